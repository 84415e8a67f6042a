"""Sequential knowledge (dk / spm / ie): revision against Algorithm 3 enumerated literally,
Algorithm 5's counts against a naive count, IE learning from raw releases, BK_sv for first
appearances, raw vs normalized beliefs, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import Publication
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_jsreduce.sequential_knowledge import SequenceCounts, revised_prior


def schema(m: int) -> Schema:
    return Schema((NumericQI("x", 0, 100),), Sensitive("s", tuple(f"v{i}" for i in range(m))))


class RandomModel:
    """A random order-3 model; ``scale`` < 1 shrinks table rows (a partial BK_seq)."""

    def __init__(self, m: int, seed: int, max_order: int = 3, partial: bool = False, corpus=None):
        rng = np.random.default_rng(seed)
        self.values = tuple(f"v{i}" for i in range(m))
        self.max_order = max_order
        self.tables = {}
        for j in range(1, 4):
            t = rng.dirichlet(np.ones(m), size=(m,) * j)
            if partial:
                t = t * rng.uniform(0.2, 1.0, size=(m,) * j + (1,))
            self.tables[j] = t
        self.sv = rng.dirichlet(np.ones(m), size=5)
        self.fixed_corpus = corpus
        self.corpus_calls: list[tuple[int, int, int]] = []

    def bk_sv(self, qi: np.ndarray, t: int | None = None) -> np.ndarray:
        return self.sv[qi[:, 0].astype(np.int64) % 5]

    def bk_seq(self, steps: int) -> np.ndarray:
        return self.tables[steps]

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        self.corpus_calls.append((views, tuples, seed))
        return self.fixed_corpus


def make_release(ids, values, t: int, m: int, model=None, qi=None):
    ids = np.asarray(ids)
    qi = ids % 100 if qi is None else qi
    frame = pd.DataFrame({"id": ids, "x": qi, "s": [f"v{v}" for v in values]})
    return schema(m).encode(frame, t, truth={"model": model} if model is not None else None)


def knowledge(name: str, **kw):
    return default_registry().create("knowledge", name, kw)


def brute_force_over_weeks(table: np.ndarray, weeks: int) -> np.ndarray:
    """Def. 2 across ``weeks`` weeks, enumerated: every sequence of hidden values u_1..u_{g-1},
    each drawn from the table's row of the window before it; rows renormalized for g > 1."""
    m, n = table.shape[-1], table.ndim - 1
    if weeks == 1:
        return table
    out = np.zeros_like(table)
    for lam in itertools.product(range(m), repeat=n):
        for hidden in itertools.product(range(m), repeat=weeks - 1):
            path = list(lam) + list(hidden)
            p = 1.0
            for i in range(weeks - 1):
                p *= table[tuple(path[i : i + n]) + (path[i + n],)]
            out[lam] += p * table[tuple(path[-n:])]
    total = out.sum(axis=-1, keepdims=True)
    return out / np.where(total > 0, total, 1.0)


def brute_force_rbk(history: list[np.ndarray], table: np.ndarray, m: int) -> np.ndarray:
    """Algorithm 3 literally: every sequence λ of the last n values, P(λ) = Π PK_j(s_j)."""
    n = len(history)
    out = np.zeros(m)
    for seq in itertools.product(range(m), repeat=n):
        p_lambda = 1.0
        for j, s_j in enumerate(seq):
            p_lambda *= history[j][s_j]
        for s in range(m):
            out[s] += table[seq + (s,)] * p_lambda
    return out


# ---------------------------------------------------------------------------- Algorithm 3
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(2, 4),
    steps=st.sampled_from([1, 2, 3]),
    normalized=st.booleans(),
    partial=st.booleans(),
)
def test_revision_equals_algorithm_3_enumerated(seed, m, steps, normalized, partial):
    """Random histories (respondents come and go, some publications suppress them) through the
    plugin; every prior equals BK_sv (never revised) or the literal sum over all m^n sequences of
    the last n posteriors taken in consecutive weeks, with the n-step table enumerated across the
    weeks since the last one (Def. 2)."""
    rng = np.random.default_rng(seed)
    model = RandomModel(m, seed, partial=partial)
    k = knowledge("dk", steps=steps, normalized=normalized)
    stored: dict[int, list[tuple[int, np.ndarray]]] = {}
    population = np.arange(8)
    composed: dict[tuple[int, int], np.ndarray] = {}
    for t in range(1, 7):
        ids = rng.choice(population, size=int(rng.integers(1, 9)), replace=False)
        rel = make_release(ids, rng.integers(0, m, len(ids)), t, m, model)
        prior = k.prior(rel)
        for i, r in enumerate(ids.tolist()):
            past = stored.get(r, [])
            if not past:
                expected = model.sv[r % 5]
            else:
                run = 1
                while run < len(past) and past[-run - 1][0] == past[-1][0] - run:
                    run += 1
                n, gap = min(run, steps), t - past[-1][0]
                if (n, gap) not in composed:
                    composed[n, gap] = brute_force_over_weeks(model.tables[n], gap)
                expected = brute_force_rbk([row for _, row in past[-n:]], composed[n, gap], m)
                if normalized:
                    expected = expected / expected.sum()
            assert np.allclose(prior[i], expected, rtol=1e-10, atol=1e-12)
            if normalized or not past:
                assert prior[i].sum() == pytest.approx(1.0)
        # publish a random subset (the rest suppressed) and revise with random posteriors
        keep = rng.random(len(ids)) < 0.8
        pub = Publication.from_partition(rel, np.where(keep, 0, -1))
        post = rng.dirichlet(np.ones(m), size=len(pub))
        k.revise(pub.public(), post, pub.respondent)
        for r, row in zip(pub.respondent.tolist(), post):
            stored.setdefault(r, []).append((t, row))


def test_raw_and_normalized_beliefs_with_a_partial_table():
    """A BK_seq listing only some transitions (rows summing to < 1): raw RBK keeps the missing
    mass out (Table 4b style), normalized RBK rescales each row to sum 1."""
    m = 3
    model = RandomModel(m, 11)
    model.tables[1] = np.array([[0.6, 0.1, 0.0], [0.0, 0.2, 0.2], [0.1, 0.1, 0.1]])
    raw, norm = knowledge("dk", steps=1, normalized=False), knowledge("dk", steps=1)
    r1 = make_release([1, 2], [0, 1], 1, m, model)
    pub = Publication.from_partition(r1, np.array([0, 0]))
    for k in (raw, norm):
        k.prior(r1)
        k.revise(pub.public(), np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), pub.respondent)
    r2 = make_release([1, 2], [0, 0], 2, m, model)
    assert np.allclose(raw.prior(r2), [[0.3, 0.15, 0.1], [0.1, 0.1, 0.1]])
    assert np.allclose(norm.prior(r2), [[0.3 / 0.55, 0.15 / 0.55, 0.1 / 0.55], [1 / 3, 1 / 3, 1 / 3]])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(2, 5), n=st.sampled_from([1, 2, 3]), r=st.integers(0, 6))
def test_revised_prior_function_against_enumeration(seed, m, n, r):
    rng = np.random.default_rng(seed)
    history = rng.random((r, n, m))  # rows need not sum to 1
    table = rng.random((m,) * (n + 1))
    got = revised_prior(history, table)
    want = np.array([brute_force_rbk(list(history[i]), table, m) for i in range(r)]).reshape(r, m)
    assert np.allclose(got, want)


def test_revised_prior_chunks_large_inputs(monkeypatch):
    import cdpbench_jsreduce.sequential_knowledge as kn

    rng = np.random.default_rng(3)
    history = rng.dirichlet(np.ones(6), size=(50, 3))
    table = rng.dirichlet(np.ones(6), size=(6, 6, 6))
    whole = revised_prior(history, table)
    monkeypatch.setattr(kn, "_CHUNK_ELEMENTS", 6**3 * 7)  # 7 rows per chunk
    assert np.allclose(kn.revised_prior(history, table), whole)


def test_first_order_model_needs_only_the_last_posterior():
    """DK caps n at the model's order: with a first-order model 3-step knowledge = 1-step."""
    m = 3
    model = RandomModel(m, 7, max_order=1)
    model.tables = {j: np.broadcast_to(model.tables[1], (m,) * (j + 1)).copy() for j in (1, 2, 3)}
    rng = np.random.default_rng(0)
    three, one = knowledge("dk", steps=3), knowledge("dk", steps=1)
    for t in range(1, 5):
        rel = make_release(np.arange(4), rng.integers(0, m, 4), t, m, model)
        p3, p1 = three.prior(rel), one.prior(rel)
        assert np.allclose(p3, p1)
        pub = Publication.from_partition(rel, np.zeros(4, dtype=int))
        post = rng.dirichlet(np.ones(m), size=4)
        three.revise(pub.public(), post, pub.respondent)
        one.revise(pub.public(), post, pub.respondent)
    assert t == 4 and not np.allclose(p1, model.sv[np.arange(4) % 5])  # revised, not BK_sv


# ---------------------------------------------------------------------------- BK_sv, revision input
def test_respondents_seen_for_the_first_time_get_bk_sv():
    m = 3
    model = RandomModel(m, 1)
    k = knowledge("dk")
    r1 = make_release([10, 11, 12], [0, 1, 2], 1, m, model)
    assert np.array_equal(k.prior(r1), model.sv[[0, 1, 2]])
    pub = Publication.from_partition(r1, np.array([0, 0, 0]))
    k.revise(pub.public(), np.eye(m)[[0, 1, 2]], pub.respondent)
    r2 = make_release([11, 13, 14], [0, 0, 0], 2, m, model, qi=np.array([11, 3, 4]))
    prior = k.prior(r2)
    assert np.array_equal(prior[1:], model.sv[[3, 4]])  # new: BK_sv of their QI
    assert np.allclose(prior[0], model.tables[1][1])  # 11 was surely v1: the row of v1
    uniform = knowledge("dk", bk_sv="uniform")
    assert np.array_equal(uniform.prior(r2), np.full((3, m), 1 / m))


def test_revise_without_posterior_stores_the_group_frequencies():
    """posterior=None: each respondent's PK is m(s)/|Q| of its group in the view."""
    m = 3
    model = RandomModel(m, 2)
    k = knowledge("dk", normalized=False)
    r1 = make_release([5, 6, 7, 8], [0, 0, 1, 2], 1, m, model)
    pub = Publication.from_partition(r1, np.array([0, 0, 0, 1]))  # {v0, v0, v1}, {v2}
    k.revise(pub.public(), None, pub.respondent)
    prior = k.prior(make_release([8, 5], [0, 0], 2, m, model))
    T = model.tables[1]
    assert np.allclose(prior[0], T[2])
    assert np.allclose(prior[1], 2 / 3 * T[0] + 1 / 3 * T[1])


def test_revise_skips_counterfeits_and_rejects_bad_shapes():
    m = 2
    model = RandomModel(m, 4)
    k = knowledge("dk", steps=1)
    rel = make_release([1, 2], [0, 1], 1, m, model)
    view = Publication.from_partition(rel, np.array([0, 0])).public()
    k.revise(view, np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), np.array([1, 2, -1]))
    assert len(k.posteriors) == 2
    with pytest.raises(ValueError, match="shape"):
        k.revise(view, np.ones((2, 3)), np.array([1, 2]))


# ---------------------------------------------------------------------------- Algorithm 5
def naive_counts(corpus: np.ndarray, steps: int, m: int) -> list[np.ndarray]:
    """Every value counted once; a j-step window only when its j + 1 values are in consecutive
    views (weekly transitions, gaps not bridged)."""
    counts = [np.zeros((m,) * (j + 1), dtype=np.int64) for j in range(steps + 1)]
    for row in corpus:
        for i, s in enumerate(row):
            if s < 0:
                continue
            counts[0][s] += 1
            for j in range(1, min(i, steps) + 1):
                window = row[i - j : i]
                if (window >= 0).all():
                    counts[j][tuple(int(v) for v in window) + (int(s),)] += 1
    return counts


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(2, 4), steps=st.sampled_from([1, 2, 3]))
def test_sequence_counts_equal_a_naive_count(seed, m, steps):
    rng = np.random.default_rng(seed)
    corpus = rng.integers(0, m, size=(int(rng.integers(1, 12)), int(rng.integers(1, 8))))
    corpus[rng.random(corpus.shape) < 0.3] = -1
    counter = SequenceCounts(steps, m)
    counter.add_corpus(corpus)
    for got, want in zip(counter.counts, naive_counts(corpus, steps, m)):
        assert np.array_equal(got, want)
    for j, table in enumerate(counter.tables(), start=1):  # Algorithm 5: a seen history sums to 1, an unseen one to 0
        assert np.allclose(table.sum(axis=-1), counter.counts[j].sum(axis=-1) > 0)
    for table in counter.knowledge_tables("backoff"):
        assert np.allclose(table.sum(axis=-1), 1.0)


def test_tables_by_hand_zero_rows_and_back_off():
    # individuals A: 0, 1, (absent), 0   and   B: 1, 1, 0, (absent)
    corpus = np.array([[0, 1, -1, 0], [1, 1, 0, -1]])
    counter = SequenceCounts(2, 3)
    counter.add_corpus(corpus)
    assert counter.counts[0].tolist() == [3, 3, 0]
    T1, T2 = counter.tables()
    # 1-step, weekly: 0->1 (A), 1->1 (B), 1->0 (B); A's 1 -> 0 spans an absent week: not a weekly
    # transition, not counted; value 2 never seen: a zero row (line 10)
    assert np.allclose(T1, [[0, 1, 0], [1 / 2, 1 / 2, 0], [0, 0, 0]])
    # 2-step: (1,1)->0 (B) only (A's (0,1)->0 spans the gap); every other history unseen: zero rows
    assert np.allclose(T2[1, 1], [1, 0, 0]) and np.allclose(T2[0, 1], 0.0)
    assert np.count_nonzero(T2.sum(axis=-1)) == 1
    # back-off: unseen 1-step rows take the frequencies (3/6, 3/6, 0), unseen 2-step rows the
    # 1-step row of their last value
    B1, B2 = counter.knowledge_tables("backoff")
    assert np.allclose(B1, [[0, 1, 0], [1 / 2, 1 / 2, 0], [0.5, 0.5, 0]])
    assert np.allclose(B2[0, 1], B1[1]) and np.allclose(B2[1, 1], [1, 0, 0])
    assert np.allclose(B2[1, 0], B1[0]) and np.allclose(B2[2, 2], B1[2]) and np.allclose(B2[0, 2], B1[2])
    assert np.allclose(SequenceCounts(1, 4).tables()[0], 0.0)
    assert np.allclose(SequenceCounts(1, 4).knowledge_tables("backoff")[0], 0.25)


class TwoStepModel:
    """A hand-built order-2 model over a, b, c (codes 0, 1, 2): a -> b; after (a, b) always c,
    but a respondent whose first value is b moves to a, so the 1-step marginal of b is half a,
    half c. c ends a sequence (nothing follows), and (c, a), (b, b), ... never occur."""

    values = ("v0", "v1", "v2")
    max_order = 2

    def bk_sv(self, qi, t=None):
        return np.tile([1 / 3, 1 / 3, 1 / 3], (len(qi), 1))

    def bk_seq(self, steps):
        T1 = np.array([[0, 1, 0], [0.5, 0, 0.5], [0, 0, 0]], dtype=float)
        if steps == 1:
            return T1
        T2 = np.zeros((3, 3, 3))
        T2[0, 1] = [0, 0, 1]  # (a, b) -> c
        T2[1, 0] = [0, 1, 0]  # (b, a) -> b
        return T2


def _dk_beliefs(history: list[np.ndarray], **params) -> np.ndarray:
    """DK beliefs for respondents 1..r after the posteriors ``history`` (one [r, 3] array a release)."""
    model, k = TwoStepModel(), knowledge("dk", **params)
    ids = np.arange(1, len(history[0]) + 1)
    for t, post in enumerate(history, start=1):
        rel = make_release(ids, np.zeros(len(ids), dtype=int), t, 3, model)
        k.prior(rel)
        pub = Publication.from_partition(rel, np.zeros(len(ids), dtype=np.int64))
        k.revise(pub.public(), post, pub.respondent)
    return k.prior(make_release(ids, np.zeros(len(ids), dtype=int), len(history) + 1, 3, model))


def test_dk_two_step_revision_differs_from_one_step_and_is_zero_for_an_impossible_history():
    a, b, c = np.eye(3)
    # respondent 1 was seen with a then b; respondent 2 with c then a (impossible: c ends a sequence);
    # respondent 3 with a or b (half each), then b: (a, b) -> c, while (b, b) is impossible
    history = [np.array([a, c, [0.5, 0.5, 0]]), np.array([b, a, b])]
    one = _dk_beliefs(history, steps=1, normalized=False)
    two = _dk_beliefs(history, steps=2, normalized=False)
    assert np.allclose(one[0], [0.5, 0, 0.5])  # T1[b]: the 1-step marginal
    assert np.allclose(two[0], [0, 0, 1])  # T2[a, b]: the 2-step dependence
    assert np.allclose(two[1], 0.0)  # Σ_λ p(s|λ) Π PK over the only history (c, a): a zero row
    assert np.allclose(two[2], [0, 0, 0.5])  # 0.5 · T2[a, b] + 0.5 · T2[b, b] (= 0)
    normalized = _dk_beliefs(history, steps=2)
    assert np.allclose(normalized[1], 1 / 3)  # nothing known of that history: uniform
    assert np.allclose(normalized[2], [0, 0, 1])
    # what back-off changes: (c, a) answers like a (-> b), and (b, b) like b, so respondent 3's
    # certain inference (c) becomes 0.5 · [0, 0, 1] + 0.5 · [0.5, 0, 0.5] = [0.25, 0, 0.75]
    backoff = _dk_beliefs(history, steps=2, unseen="backoff")
    assert np.allclose(backoff[0], [0, 0, 1])
    assert np.allclose(backoff[1], [0, 1, 0])
    assert np.allclose(backoff[2], [0.25, 0, 0.75])


def test_spm_mines_the_models_corpus_with_its_parameters():
    m = 3
    corpus = np.array([[0, 1, 2, 0, 1], [1, 2, -1, 0, 1], [2, 0, 1, -1, -1]])
    model = RandomModel(m, 5, corpus=corpus)
    k = knowledge("spm", steps=2, corpus_views=7, corpus_tuples=123, corpus_seed=99, normalized=False)
    r1 = make_release([1, 2], [0, 0], 1, m, model)
    assert np.array_equal(k.prior(r1), model.sv[[1, 2]])
    pub = Publication.from_partition(r1, np.array([0, 0]))
    k.revise(pub.public(), np.array([[1.0, 0, 0], [0, 0.5, 0.5]]), pub.respondent)
    prior = k.prior(make_release([1, 2], [0, 0], 2, m, model))
    assert model.corpus_calls == [(7, 123, 99)]
    # 1-step transitions of the corpus: 0->1 x3, 1->2 x2, 2->0 x2, 0->1... count by hand
    # row 0: 0 1 2 0 1 -> 01 12 20 01;  row 1: 1 2 0 1 -> 12 20 01;  row 2: 2 0 1 -> 20 01
    T1 = np.zeros((3, 3))
    T1[0, 1], T1[1, 2], T1[2, 0] = 1.0, 1.0, 1.0
    assert np.allclose(prior[0], T1[0])
    assert np.allclose(prior[1], 0.5 * T1[1] + 0.5 * T1[2])
    # a second release does not mine the corpus again
    k.prior(make_release([1], [0], 3, m, model))
    assert len(model.corpus_calls) == 1


# ---------------------------------------------------------------------------- IE
def test_ie_learns_from_the_raw_releases_including_the_current_one():
    """A deterministic cycle v0 -> v1 -> v2 -> v0; no model: IE with uniform BK_sv."""
    m = 3
    k = knowledge("ie", bk_sv="uniform", normalized=False)
    ids = np.arange(6)
    start = np.array([0, 1, 2, 0, 1, 2])
    for t in range(1, 4):
        values = (start + t - 1) % 3
        rel = make_release(ids, values, t, m)  # no truth["model"]
        prior = k.prior(rel)
        prior_again = k.prior(rel)  # asking twice does not count the release twice
        assert np.array_equal(prior, prior_again)
        if t == 1:
            assert np.allclose(prior, 1 / 3)
        else:
            # transitions of release t were counted before the priors: the exact successor
            assert np.allclose(prior, np.eye(m)[values])
        pub = Publication.from_partition(rel, np.zeros(len(ids), dtype=int))
        k.revise(pub.public(), np.eye(m)[pub.sensitive], pub.respondent)  # an exact posterior
    T1 = k.counts.tables()[0]
    assert np.allclose(T1, np.eye(m)[[1, 2, 0]])
    assert k.counts.counts[1].sum() == 12  # 6 individuals x 2 transitions


def test_ie_only_counts_what_it_saw():
    m = 2
    k = knowledge("ie", bk_sv="uniform", steps=1)
    k.prior(make_release([1, 2], [0, 1], 1, m))
    k.prior(make_release([1, 3], [1, 0], 2, m))  # 1: 0 -> 1; 3 is new
    assert k.counts.counts[1].tolist() == [[0, 1], [0, 0]]
    assert k.counts.counts[0].tolist() == [2, 2]


# ---------------------------------------------------------------------------- errors
def test_knowledge_without_a_model_is_a_clear_data_error():
    rel = make_release([1, 2], [0, 1], 1, 2)
    for name in ("dk", "spm"):
        with pytest.raises(DataError, match=rf"knowledge '{name}'.*'bkseq' data set provides one"):
            knowledge(name).prior(rel)
    with pytest.raises(DataError, match="knowledge 'ie'.*bk_sv=uniform"):
        knowledge("ie").prior(rel)
    with pytest.raises(DataError, match="3 sensitive values"):
        knowledge("dk").prior(make_release([1], [0], 1, 2, RandomModel(3, 0)))


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("dk", {"steps": 4}, "steps must be 1, 2 or 3 (got 4)"),
        ("dk", {"steps": 0}, "steps must be 1, 2 or 3 (got 0)"),
        ("ie", {"bk_sv": "kernel"}, "bk_sv must be 'model' or 'uniform' (got 'kernel')"),
        ("spm", {"corpus_views": 0}, "corpus_views must be an integer >= 1 (got 0)"),
        ("spm", {"corpus_seed": -1}, "corpus_seed must be an integer >= 0 (got -1)"),
    ],
)
def test_parameter_errors_name_the_field(name, params, message):
    with pytest.raises(ConfigError) as e:
        knowledge(name, **params)
    assert message in str(e.value)
