"""The bkseq data set (JS-reduce §7.1 re-created): the releases, the documented numbers and the
exactness of the knowledge it exposes (BK_sv, 1/2/3-step BK_seq) against simulations.

Statistical checks use fixed seeds. Their tolerances: a frequency f estimated from n transitions
of a row whose exact probability is p is compared with |f - p| <= 5 sqrt(p (1 - p) / n) on rows
with n >= 200 (5 binomial standard deviations; the largest deviation measured was 3.0 sd over
the ~1,800 cells compared, while a first-order generator or a discharge probability 10 % off
gives 9-16 sd), and transitions of probability 0 must never occur. Chi-square tests of BK_sv
require p-value > 1e-4 per class.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cdpbench.datasets.validate import validated
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench_jsreduce.bkseq import (
    DECEASED,
    DISCHARGED,
    LIVING,
    TRACKS,
    VALUES,
    BKseq,
    BKseqParams,
    bk_sv_table,
    expected_history_counts,
    producible_windows,
    qi_class,
    sepsis_daily_matrix,
    weekly_disease_matrix,
)

M = len(VALUES)


@pytest.fixture(scope="module")
def dataset() -> BKseq:
    return BKseq()


@pytest.fixture(scope="module")
def releases(dataset):
    return list(validated(dataset.releases(np.random.default_rng(2012)), dataset.scenario))


@pytest.fixture(scope="module")
def big_corpus(dataset) -> np.ndarray:
    return dataset.model.corpus(24, 40_000, 7)


def ngram_counts(corpus: np.ndarray, steps: int) -> np.ndarray:
    """Counts of (steps past values, next value) over consecutive views of every individual
    (Algorithm 5's frequency count), shape [19] * (steps + 1)."""
    flats = []
    for t in range(corpus.shape[1] - steps):
        block = corpus[:, t : t + steps + 1]
        ok = (block >= 0).all(axis=1)
        flat = np.zeros(int(ok.sum()), dtype=np.int64)
        for j in range(steps + 1):
            flat = flat * M + block[ok, j]
        flats.append(flat)
    return np.bincount(np.concatenate(flats), minlength=M ** (steps + 1)).reshape([M] * (steps + 1))


def assert_frequencies_match(counts: np.ndarray, exact: np.ndarray, min_rows: int = 200) -> int:
    """Compare row frequencies to exact rows (tolerance in the module docstring); returns the
    number of rows compared."""
    n = counts.sum(axis=-1, keepdims=True).astype(float)
    freq = counts / np.maximum(n, 1.0)
    big = n[..., 0] >= min_rows
    p, f, nb = exact[big], freq[big], np.broadcast_to(n, counts.shape)[big]
    assert (f[p == 0] == 0).all(), "a transition of probability 0 occurred"
    sd = np.sqrt(p * (1 - p) / nb)
    worst = np.abs(f - p) / np.where(sd > 0, sd, np.inf)
    assert worst.max() <= 5.0, f"frequency {worst.max():.1f} sd away from the exact row"
    return int(big.sum())


# ---------------------------------------------------------------------------- the releases
def test_every_view_has_exactly_the_asked_tuples(releases):
    # replacement of leavers keeps every view at exactly `tuples` (tolerance 0)
    assert len(releases) == 24
    assert [len(r) for r in releases] == [5000] * 24
    assert [r.t for r in releases] == list(range(1, 25))


def test_total_individuals_near_16160(dataset, releases):
    # the calibration makes the EXPECTED total 16,160 exactly; one run varies with sd ~70
    # (20 seeds: 16,141 +- 70), so a single run must be within 300 (4 sd)
    assert dataset.model.expected_individuals_per_tuple * 5000 == pytest.approx(16_160, abs=1e-6)
    ids = np.unique(np.concatenate([r.respondent for r in releases]))
    assert abs(len(ids) - 16_160) <= 300
    assert ids.tolist() == list(range(len(ids)))  # ids 0..n-1 in order of arrival
    totals = [len(np.unique(np.concatenate(list(dataset.model.simulate(24, 5000, np.random.default_rng(s)).ids)))) for s in range(5)]
    assert abs(np.mean(totals) - 16_160) <= 150  # mean of 5: sd ~31


def test_qi_domains_and_fixed_per_individual(releases):
    schema = releases[0].schema
    assert schema.qi_names == ["age", "gender", "weight"]
    assert schema.qi[1].values == ("1", "2")
    assert schema.sensitive.values == VALUES and len(VALUES) == 19
    qi_of: dict[int, np.ndarray] = {}
    for r in releases:
        age, gender, weight = r.qi.T
        assert set(np.unique(age)) == set(range(45, 75))  # uniform on 30 ages: all occur in 5,000
        assert set(np.unique(gender)) == {0.0, 1.0}
        assert set(np.unique(weight)) == set(range(60, 90))
        for rid, row in zip(r.respondent[::50], r.qi[::50]):
            np.testing.assert_array_equal(qi_of.setdefault(int(rid), row), row)
    frame = releases[3].to_frame()
    assert list(frame.columns) == ["id", "age", "gender", "weight", "exam_result"]
    assert set(frame["gender"]) == {"1", "2"}


def test_one_tuple_per_individual_and_absorbing_values_end_a_history(releases):
    T = len(releases)
    first, last, count, last_code = {}, {}, {}, {}
    for r in releases:
        assert len(np.unique(r.respondent)) == len(r)
        for rid, code in zip(r.respondent.tolist(), r.sensitive.tolist()):
            first.setdefault(rid, r.t)
            if rid in last_code:
                assert last_code[rid] < LIVING, f"respondent {rid} has a tuple after {VALUES[last_code[rid]]}"
            last[rid], last_code[rid] = r.t, code
            count[rid] = count.get(rid, 0) + 1
    for rid in first:
        assert count[rid] == last[rid] - first[rid] + 1  # an exam every week while active
        if last[rid] < T:  # left before the end: only through deceased / discharged
            assert last_code[rid] in (DECEASED, DISCHARGED)
    assert not any(code >= LIVING for code in releases[0].sensitive)  # view 1: first exams only


def test_truth_lists_the_model_inserted_and_deleted(releases, dataset):
    assert all(r.truth["model"] is dataset.model for r in releases)
    np.testing.assert_array_equal(releases[0].truth["inserted"], releases[0].respondent)
    assert len(releases[1].truth["inserted"]) == 0  # view 1 has no leavers, so view 2 no newcomers
    for prev, cur in zip(releases, releases[1:]):
        gone = prev.respondent[prev.sensitive >= LIVING]
        np.testing.assert_array_equal(cur.truth["deleted"], gone)
        assert len(cur.truth["inserted"]) == len(gone)  # leavers replaced one for one
        np.testing.assert_array_equal(np.setdiff1d(cur.respondent, prev.respondent), cur.truth["inserted"])


def test_same_seed_same_releases_other_seed_other_releases(dataset):
    a = list(dataset.releases(np.random.default_rng(5)))
    b = list(BKseq().releases(np.random.default_rng(5)))
    c = list(dataset.releases(np.random.default_rng(6)))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.respondent, y.respondent)
        np.testing.assert_array_equal(x.qi, y.qi)
        np.testing.assert_array_equal(x.sensitive, y.sensitive)
    assert not np.array_equal(a[0].sensitive, c[0].sensitive)


def test_registry_creates_it_with_validated_parameters():
    ds = default_registry().create("dataset", "bkseq", {"releases": 3, "tuples": 300, "individuals": 360})
    rel = list(ds.releases(np.random.default_rng(0)))
    assert [len(r) for r in rel] == [300, 300, 300]
    assert ds.model.expected_individuals_per_tuple * 300 == pytest.approx(360)
    assert ds.scenario == "continuous"


def test_default_process_does_not_depend_on_the_run_length():
    # individuals=null: the discharge probability is the paper's calibration for any length
    d24 = BKseq().model.discharge
    assert d24 == pytest.approx(0.1084, abs=5e-5)
    for releases in (1, 2, 12):
        ds = BKseq(BKseqParams(releases=releases, tuples=100))
        assert ds.model.discharge == d24
        assert [len(r) for r in ds.releases(np.random.default_rng(0))] == [100] * releases
    # a set total calibrates on the run's own views: more individuals, more discharge
    assert BKseq(BKseqParams(releases=12, individuals=12_000)).model.discharge > d24


@pytest.mark.parametrize(
    "values, message",
    [
        ({"releases": 0}, "releases must be an integer >= 1 (got 0)"),
        ({"tuples": -5}, "tuples must be an integer >= 1 (got -5)"),
        ({"momentum": 0.5}, "momentum must be a number in [1, 10] (got 0.5)"),
        ({"individuals": 4000}, "individuals must be an integer >= 5000 (got 4000)"),
        ({"releases": 2, "individuals": 5000}, "individuals must be null for fewer than 3 releases"),
        ({"individuals": 5001}, "individuals must be between"),  # deaths alone replace more
        ({"releases": 3, "individuals": 20_000}, "individuals must be between"),  # more than all leave
    ],
)
def test_bad_parameters_are_refused_naming_the_field(values, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        BKseqParams(**values)


# ---------------------------------------------------------------------------- documented numbers
def test_weekly_matrix_reproduces_the_published_numbers():
    D = weekly_disease_matrix()
    assert D.shape == (17, 18)
    np.testing.assert_allclose(D.sum(axis=1), 1.0, atol=1e-12)
    # HIV (Longini): stage 2 mean 52.6 months -> 1 - exp(-7 / (52.6 * 30.4375 days)) = 0.00436
    assert D[6, 7] == pytest.approx(0.004362, abs=2e-6)
    assert D[8, DECEASED] == pytest.approx(1 - np.exp(-7 / (23.6 * 365.25 / 12)))
    # Alzheimer (Spackman): severe, annual death 0.480 -> weekly 1 - 0.52^(1/52) = 0.01250
    assert D[11, DECEASED] == pytest.approx(0.012496, abs=1e-6)
    # moderate: exits 0.07 + 0.214 + 0.215 = 0.499 a year, split in proportion
    weekly = 1 - 0.501 ** (1 / 52)
    assert D[10, 9] == pytest.approx(weekly * 0.07 / 0.499)
    assert D[10, DECEASED] == pytest.approx(weekly * 0.215 / 0.499)
    # liver: HCC -> death 0.427 and -> transplant 0.04 a year (competing)
    weekly = 1 - (1 - 0.467) ** (1 / 52)
    assert D[3, DECEASED] == pytest.approx(weekly * 0.427 / 0.467)
    # chronic -> cirrhosis: hazard 1 / 35.2 years (HEP-SIM F0..F3)
    assert D[0, 1] == pytest.approx(1 - np.exp(-1 / 35.24 / 52), rel=1e-3)
    # sepsis: Rangel-Frausto 1-day numbers, weekly = 7th power
    P = sepsis_daily_matrix()
    assert (P[2, 2], P[3, 3], P[4, 4]) == (0.65, 0.68, 0.61)
    assert (P[2, 3], P[3, 4], P[2, 5], P[3, 5], P[4, 5]) == (0.09, 0.026, 0.005, 0.009, 0.079)
    np.testing.assert_allclose(D[12:17][:, [12, 13, 14, 15, 16, DECEASED]], np.linalg.matrix_power(P, 7)[:5])
    # an individual keeps its track
    tracks = np.repeat(np.arange(4), [5, 4, 3, 5])
    assert (D[:, :17][tracks[:, None] != tracks[None, :]] == 0).all()


def test_bk_sv_table_rows_and_documented_class_effects():
    sv = bk_sv_table()
    assert sv.shape == (18, 19)
    np.testing.assert_allclose(sv.sum(axis=1), 1.0)
    assert (sv[:, :LIVING] > 0).all() and (sv[:, LIVING:] == 0).all()  # first exams: a stage
    share = {k: sv[:, list(c)].sum(axis=1).reshape(3, 3, 2) for k, c in TRACKS.items()}  # [age, weight, gender]
    assert (np.diff(share["alzheimer"], axis=0) > 0).all()  # Alzheimer rises with age
    assert (np.diff(share["hiv"], axis=0) < 0).all()  # HIV falls with age
    assert (share["hiv"][..., 0] > share["hiv"][..., 1]).all()  # more HIV among men ("1")
    assert (share["alzheimer"][..., 1] > share["alzheimer"][..., 0]).all()  # more Alzheimer among women
    # the 18 classes are clearly different: total variation >= 0.02 between any two
    tv = 0.5 * np.abs(sv[:, None, :] - sv[None, :, :]).sum(-1)
    assert tv[~np.eye(18, dtype=bool)].min() >= 0.02


def test_qi_class_bands_and_domain_errors(dataset):
    qi = np.array([[45, 0, 60], [54, 1, 69], [55, 0, 70], [64, 1, 79], [65, 0, 80], [74, 1, 89]], float)
    np.testing.assert_array_equal(qi_class(qi), [0, 1, 8, 9, 16, 17])
    np.testing.assert_array_equal(dataset.model.bk_sv(qi), bk_sv_table()[[0, 1, 8, 9, 16, 17]])
    with pytest.raises(DataError, match="outside the domain"):
        qi_class(np.array([[44.0, 0, 60]]))
    with pytest.raises(DataError, match=r"shape \[n, 3\]"):
        qi_class(np.zeros((2, 2)))


# ---------------------------------------------------------------------------- the exposed knowledge
def test_bk_seq_shapes_rows_and_read_only(dataset):
    model = dataset.model
    assert model.values == VALUES and model.max_order == 3
    for steps in (1, 2, 3):
        table = model.bk_seq(steps)
        assert table.shape == (19,) * (steps + 1)
        sums = table.sum(axis=-1)  # a distribution for a producible history, a zero row otherwise (Algorithm 5)
        assert np.all(np.isclose(sums, 1.0, atol=1e-12) | (sums == 0.0))
        assert (table >= 0).all()
        with pytest.raises(ValueError):
            table[(0,) * (steps + 1)] = 0.5
    # nothing follows "deceased" or "discharged"; a cross-track window (liver 0, then HIV 5, 5) and a
    # never-seen pair (liver 0 -> HIV 5) are impossible: zero rows, not backed off
    assert np.flatnonzero(model.bk_seq(1).sum(axis=-1) == 0).tolist() == [DECEASED, DECEASED + 1]
    assert not model.bk_seq(3)[0, 5, 5].any() and not model.bk_seq(2)[0, 5].any()
    assert np.array_equal(model.bk_seq(3).sum(axis=-1) > 0, producible_windows(model.disease))
    assert model.bk_seq(3)[5, 5, 5, 5] == model.bk_seq(3)[5, 5, 5].max()  # a real row: staying
    with pytest.raises(ConfigError, match="steps must be 1, 2 or 3"):
        model.bk_seq(4)


def test_three_step_dependence_is_real_and_hand_computed(dataset):
    model = dataset.model
    T3, D, d = model.bk_seq(3), model.disease, model.discharge
    # HIV stage 3 (code 7) -> AIDS (8): first-order p, x1.5 after one progression, x2.25 after two
    p = D[7, 8]
    assert T3[7, 7, 7, 8] == pytest.approx(p * (1 - d))
    assert T3[6, 6, 7, 8] == pytest.approx(1.5 * p * (1 - d))
    assert T3[5, 6, 7, 8] == pytest.approx(2.25 * p * (1 - d))
    assert T3[5, 6, 7, 7] == pytest.approx((D[7, 7] - 1.25 * p) * (1 - d))  # the extra comes from staying
    assert T3[5, 6, 7, DISCHARGED] == pytest.approx(d * (1 - D[7, DECEASED]))
    # same last TWO values, different third-last value -> different next-value distributions
    assert np.abs(T3[5, 6, 7] - T3[6, 6, 7]).sum() > 1e-3
    # Alzheimer: right after mild -> moderate, moving on to severe is likelier than after stable weeks
    assert T3[9, 9, 10, 11] == pytest.approx(1.5 * T3[10, 10, 10, 11])
    # momentum = 1: a first-order chain, every possible window ending in z has the same row
    flat = BKseq(BKseqParams(momentum=1.0)).model.bk_seq(3)
    np.testing.assert_allclose(flat[5, 6, 7], flat[7, 7, 7])
    np.testing.assert_allclose(flat[12, 14, 13], flat[15, 13, 13])


def test_marginals_are_convex_mixtures_of_the_3_step_rows(dataset):
    model = dataset.model
    T3, T2, T1 = model.bk_seq(3), model.bk_seq(2), model.bk_seq(1)
    # HIV is progressive: (6, 7) is reached from x = 5, 6 (real history) or padded (6, 6, 7)
    rows = T3[[5, 6], 6, 7]
    lam = (T2[6, 7, 8] - rows[1, 8]) / (rows[0, 8] - rows[1, 8])
    assert 0 < lam < 1
    np.testing.assert_allclose(T2[6, 7], lam * rows[0] + (1 - lam) * rows[1], atol=1e-12)
    # stable liver patients dominate: 1-step row of cirrhosis is close to the stable row
    assert np.abs(T1[1] - T3[1, 1, 1]).sum() < 0.05


def test_marginals_match_a_large_simulation(dataset, big_corpus):
    # bk_seq(1) and bk_seq(2) are the marginals of bk_seq(3) over the generator's histories:
    # frequencies of a 24-view corpus of 40,000 tuples a view match them (tolerance: docstring)
    assert assert_frequencies_match(ngram_counts(big_corpus, 1), dataset.model.bk_seq(1)) >= 15
    assert assert_frequencies_match(ngram_counts(big_corpus, 2), dataset.model.bk_seq(2)) >= 30
    # and the expected NUMBER of transitions matches too (counts scale with the view size)
    hc = expected_history_counts(dataset.model.bk_seq(3), dataset.model.entry, 24)
    assert ngram_counts(big_corpus, 1).sum() == pytest.approx(hc.pairs.sum() * 40_000, rel=0.005)
    assert ngram_counts(big_corpus, 2).sum() == pytest.approx(hc.triples.sum() * 40_000, rel=0.005)


def test_three_step_frequencies_match_the_exact_transition(dataset, big_corpus):
    assert assert_frequencies_match(ngram_counts(big_corpus, 3), dataset.model.bk_seq(3)) >= 40


def test_first_values_follow_bk_sv_per_class(dataset):
    model = dataset.model
    sim = model.simulate(1, 90_000, np.random.default_rng(11))  # 90,000 first exams, ~5,000 a class
    classes = qi_class(sim.qi)
    values = sim.codes[0]
    sv = bk_sv_table()
    for c in range(18):
        observed = np.bincount(values[classes == c], minlength=19)[:LIVING]
        expected = sv[c, :LIVING] * observed.sum()
        small = expected < 5
        obs = np.append(observed[~small], observed[small].sum())
        exp = np.append(expected[~small], expected[small].sum())
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-4, f"class {c}"


def test_later_newcomers_also_follow_bk_sv(releases, dataset):
    seen: set[int] = set(releases[0].respondent.tolist())
    firsts, qis = [], []
    for r in releases[1:]:
        new = ~np.isin(r.respondent, list(seen))
        firsts.append(r.sensitive[new])
        qis.append(r.qi[new])
        seen.update(r.respondent.tolist())
    first, qi = np.concatenate(firsts), np.concatenate(qis)
    assert len(first) > 10_000
    observed = np.bincount(first, minlength=19)[:LIVING]
    expected = dataset.model.bk_sv(qi).sum(axis=0)[:LIVING]
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_corpus_shape_codes_and_seed(dataset):
    a = dataset.model.corpus(6, 500, 3)
    assert a.dtype == np.int64 and a.shape[1] == 6
    assert ((a >= -1) & (a < 19)).all()
    assert ((a >= 0).sum(axis=0) == 500).all()  # every view has 500 tuples
    np.testing.assert_array_equal(a, dataset.model.corpus(6, 500, 3))
    assert not np.array_equal(a[:500, 0], dataset.model.corpus(6, 500, 4)[:500, 0])
    assert (a[:, 0] >= 0).sum() == 500 and (a[:, 0][a[:, 0] >= 0] < LIVING).all()
