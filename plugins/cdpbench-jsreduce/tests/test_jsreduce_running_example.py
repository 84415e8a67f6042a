"""JS-reduce's running example (TDSC 2012, §2 Tables 1, 3, 4; §5 Examples 1–3), end to end.

Tables 1a/1c are built as real releases, Tables 1b/1d as real publications (QI-groups
{Alice, Betty}, {Carol, Doris} at τ1 and {Alice, Carol}, {Elisa, Fran, Grace} at τ2). The
background knowledge is a tiny hand-made model over the 7 exam results of Table 1:

* BK_sv (Table 3a) depends on the zip code: zip 12030 (Alice, Betty) gives MAM-pos 0.002,
  CX-neg 0.05, BCM-pos 0.001; zip 12031 (Carol, Doris) gives CX-pos 0.0003, BS-neg 0.2; the rest
  of each row is spread evenly over the values the table does not list, and other zip codes
  (Elisa, Fran, Grace) get the uniform distribution. Equal beliefs inside each τ1 group are what
  makes PK_1 = 0.5 / 0.5 (Table 4a).
* BK_seq (Table 3b) is first order: the eight listed transitions, each row's missing mass
  (e.g. 1 − 0.6 − 0.02 = 0.38 for MAM-pos) spread evenly over the 5 values the table does not list
  as a successor, so rows sum to 1; rows for histories the table does not cover (BCM-pos, PNE-pos,
  MAM-neg) are uniform.

The paper's Table 3b as printed is *partial*: only the eight listed transitions, nothing else.
``RunningExampleModel(partial=True)`` uses exactly that (every unlisted transition 0, so no row
sums to 1): raw RBK is then Table 4b exactly and normalized RBK differs from it, which is what
the raw/normalized tests use.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

VALUES = ("MAM-pos", "CX-neg", "CX-pos", "BS-neg", "BCM-pos", "PNE-pos", "MAM-neg")
V = {v: i for i, v in enumerate(VALUES)}
M = len(VALUES)
SCHEMA = Schema(
    (NumericQI("age", 0, 120), CategoricalQI("gender", Taxonomy.flat(["F", "M"])), NumericQI("zip", 10000, 99999)),
    Sensitive("exres", VALUES),
)
ID = {"Alice": 1, "Betty": 2, "Carol": 3, "Doris": 4, "Elisa": 5, "Fran": 6, "Grace": 7}


def _spread(listed: dict[str, float]) -> np.ndarray:
    """A distribution with the listed probabilities, the rest spread over the other values."""
    row = np.zeros(M)
    for v, p in listed.items():
        row[V[v]] = p
    rest = [i for i in range(M) if VALUES[i] not in listed]
    row[rest] = (1.0 - row.sum()) / len(rest)
    return row


TABLE_3B = {
    "MAM-pos": {"BCM-pos": 0.6, "PNE-pos": 0.02},
    "CX-neg": {"BCM-pos": 0.02, "PNE-pos": 0.08},
    "CX-pos": {"BCM-pos": 0.02, "PNE-pos": 0.6},
    "BS-neg": {"BCM-pos": 0.02, "PNE-pos": 0.02},
}


class RunningExampleModel:
    """BK_sv of Table 3a and BK_seq of Table 3b, completed as the module docstring says
    (``partial=True``: Table 3b exactly as printed, every unlisted transition 0)."""

    values = VALUES
    max_order = 1

    def __init__(self, partial: bool = False) -> None:
        t = np.zeros((M, M)) if partial else np.full((M, M), 1.0 / M)
        for before, after in TABLE_3B.items():
            if partial:
                for v, p in after.items():
                    t[V[before], V[v]] = p
            else:
                t[V[before]] = _spread(after)
        self.table = t
        self.by_zip = {
            12030: _spread({"MAM-pos": 0.002, "CX-neg": 0.05, "BCM-pos": 0.001}),
            12031: _spread({"CX-pos": 0.0003, "BS-neg": 0.2}),
        }

    def bk_sv(self, qi: np.ndarray, t: int | None = None) -> np.ndarray:
        return np.array([self.by_zip.get(int(z), np.full(M, 1.0 / M)) for z in qi[:, 2]])

    def bk_seq(self, steps: int) -> np.ndarray:
        # first order: the value depends on the last one only
        return np.broadcast_to(self.table, (M,) * (steps + 1)).copy()

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        raise NotImplementedError("the running example has no corpus")


MODEL = RunningExampleModel()
PARTIAL = RunningExampleModel(partial=True)
TABLE_1A = [("Alice", 51, 12030, "MAM-pos"), ("Betty", 52, 12030, "CX-neg"), ("Carol", 51, 12031, "CX-pos"), ("Doris", 52, 12031, "BS-neg")]
TABLE_1C = [
    ("Alice", 51, 12030, "BCM-pos"),
    ("Carol", 51, 12031, "PNE-pos"),
    ("Elisa", 51, 12044, "MAM-neg"),
    ("Fran", 51, 12045, "CX-neg"),
    ("Grace", 51, 12040, "CX-pos"),
]


def release(rows, t: int, model=MODEL):
    frame = pd.DataFrame(
        [(ID[name], age, "F", zip_, value) for name, age, zip_, value in rows], columns=["id", "age", "gender", "zip", "exres"]
    )
    return SCHEMA.encode(frame, t, truth={"model": model})


def releases_and_publications(model=MODEL):
    r1, r2 = release(TABLE_1A, 1, model), release(TABLE_1C, 2, model)
    p1 = Publication.from_partition(r1, np.array([0, 0, 1, 1]))  # Table 1b: QI-groups 1, 2
    p2 = Publication.from_partition(r2, np.array([0, 0, 1, 1, 1]))  # Table 1d: QI-groups 3, 4
    return r1, p1, r2, p2


def dk(**kw):
    return default_registry().create("knowledge", "dk", kw)


def configuration():
    return default_registry().create("estimator", "configuration")


def defender_step(knowledge, estimator, rel, pub):
    """Fig. 2: prior for the release, posterior on the publication, revision (as the runner does)."""
    prior = knowledge.prior(rel)
    post = estimator.posterior(prior[pub.row], pub.sensitive, pub.group, pub.n_groups, M)
    knowledge.revise(pub.public(), post, pub.respondent)
    return prior, post


def row_of(pub: Publication, name: str) -> int:
    return int(np.flatnonzero(pub.respondent == ID[name])[0])


def table_4a(pub: Publication) -> np.ndarray:
    """PK_1 of Table 4a typed in, one row per respondent of ``pub`` (not an estimator's output)."""
    listed = {"Alice": ("MAM-pos", "CX-neg"), "Betty": ("MAM-pos", "CX-neg"), "Carol": ("CX-pos", "BS-neg"), "Doris": ("CX-pos", "BS-neg")}
    name_of = {i: name for name, i in ID.items()}
    pk = np.zeros((len(pub), M))
    for row, r in enumerate(pub.respondent.tolist()):
        for v in listed[name_of[r]]:
            pk[row, V[v]] = 0.5
    return pk


def test_revision_of_table_4a_with_table_3b_is_table_4b():
    """Algorithm 3 on the paper's own inputs: PK_1 = Table 4a, BK_seq = Table 3b as printed."""
    r1, p1, r2, _ = releases_and_publications(PARTIAL)
    knowledge = dk(normalized=False)
    # first release, nobody seen yet: every prior is BK_sv (Algorithm 1, RBK_1 = BK_sv)
    assert np.array_equal(knowledge.prior(r1), PARTIAL.bk_sv(r1.qi))
    knowledge.revise(p1.public(), table_4a(p1), p1.respondent)
    rbk2 = knowledge.prior(r2)
    alice, carol = 0, 1  # release rows (Table 1c order)
    # Example 3: RBK(Alice, BCM-pos) = 0.5 · p(BCM-pos | MAM-pos) + 0.5 · p(BCM-pos | CX-neg) = 0.5·0.6 + 0.5·0.02 = 0.31
    #            RBK(Alice, PNE-pos) = 0.5 · 0.02 + 0.5 · 0.08 = 0.05
    #            RBK(Carol, BCM-pos) = 0.5 · p(BCM-pos | CX-pos) + 0.5 · p(BCM-pos | BS-neg) = 0.5·0.02 + 0.5·0.02 = 0.02
    #            RBK(Carol, PNE-pos) = 0.5 · 0.6 + 0.5 · 0.02 = 0.31
    # and 0 on every other value: the printed table lists no other successor
    expected = np.zeros((2, M))
    expected[alice, [V["BCM-pos"], V["PNE-pos"]]] = [0.31, 0.05]
    expected[carol, [V["BCM-pos"], V["PNE-pos"]]] = [0.02, 0.31]
    assert np.allclose(rbk2[:2], expected, atol=1e-15)
    # Elisa, Fran and Grace appear for the first time: BK_sv (uniform for their zip codes)
    assert np.allclose(rbk2[2:], 1.0 / M)


# Raw vs normalized on the printed (partial) Table 3b: Alice's RBK row sums to 0.31 + 0.05 = 0.36,
# Carol's to 0.02 + 0.31 = 0.33, so dividing by the sum changes every number.
#   raw:        Alice (BCM 0.31, PNE 0.05), Carol (BCM 0.02, PNE 0.31)       (Table 4b)
#   normalized: Alice (31/36, 5/36),        Carol (2/33, 31/33)
# PK_2 in QI-group 3 (tuples BCM-pos, PNE-pos), §5.2: c1 = Alice->BCM, Carol->PNE; c2 the swap.
#   raw:        d1 = 0.31 + 0.31 = 0.62, d2 = 0.05 + 0.02 = 0.07 -> p = 0.62/0.69 (Example 2)
#   normalized: d1 = 31/36 + 31/33 = 2139/1188, d2 = 5/36 + 2/33 = 237/1188 -> p = 2139/2376
@pytest.mark.parametrize(
    "normalized, alice, carol, pk2",
    [
        (False, (0.31, 0.05), (0.02, 0.31), 0.62 / 0.69),
        (True, (31 / 36, 5 / 36), (2 / 33, 31 / 33), 2139 / 2376),
    ],
)
def test_raw_and_normalized_revision_on_the_printed_table(normalized, alice, carol, pk2):
    r1, p1, r2, p2 = releases_and_publications(PARTIAL)
    knowledge, estimator = dk(normalized=normalized), configuration()
    _, pk1 = defender_step(knowledge, estimator, r1, p1)
    assert np.allclose(pk1, table_4a(p1), atol=1e-12)  # Table 4a (equal BK_sv inside each group)
    rbk2 = knowledge.prior(r2)
    for row, (bcm, pne) in [(0, alice), (1, carol)]:
        assert rbk2[row, V["BCM-pos"]] == pytest.approx(bcm, abs=1e-12)
        assert rbk2[row, V["PNE-pos"]] == pytest.approx(pne, abs=1e-12)
        assert rbk2[row].sum() == pytest.approx(bcm + pne, abs=1e-12)  # nothing on other values
    post2 = estimator.posterior(rbk2[p2.row], p2.sensitive, p2.group, p2.n_groups, M)
    a, c = row_of(p2, "Alice"), row_of(p2, "Carol")
    assert post2[a, V["BCM-pos"]] == pytest.approx(pk2, abs=1e-12)
    assert post2[a, V["PNE-pos"]] == pytest.approx(1 - pk2, abs=1e-12)
    assert post2[c, V["PNE-pos"]] == pytest.approx(pk2, abs=1e-12)  # c1 puts Carol on PNE-pos
    assert post2[c, V["BCM-pos"]] == pytest.approx(1 - pk2, abs=1e-12)


# A posterior row that does not sum to 1 (Alice's PK_1 = 0.4 / 0.4, sum 0.8) on the completed table
# (rows sum to 1): raw RBK(Alice, ·) = 0.8 × the normalized one.
#   raw:        BCM 0.4·0.6 + 0.4·0.02 = 0.248;  PNE 0.4·0.02 + 0.4·0.08 = 0.04;  row sum 0.8
#   normalized: BCM 0.248 / 0.8 = 0.31;          PNE 0.04 / 0.8 = 0.05;           row sum 1
@pytest.mark.parametrize("normalized, bcm, pne, total", [(False, 0.248, 0.04, 0.8), (True, 0.31, 0.05, 1.0)])
def test_raw_and_normalized_revision_of_a_posterior_not_summing_to_one(normalized, bcm, pne, total):
    _, p1, r2, _ = releases_and_publications()
    knowledge = dk(normalized=normalized)
    pk = table_4a(p1)
    pk[row_of(p1, "Alice")] *= 0.8
    knowledge.revise(p1.public(), pk, p1.respondent)
    rbk2 = knowledge.prior(r2)
    alice = 0
    assert rbk2[alice, V["BCM-pos"]] == pytest.approx(bcm, abs=1e-12)
    assert rbk2[alice, V["PNE-pos"]] == pytest.approx(pne, abs=1e-12)
    assert rbk2[alice].sum() == pytest.approx(total, abs=1e-12)


def test_table_4_posterior_revised_and_posterior_again():
    """The full defender cycle of Fig. 2 on the completed tables, raw RBK as the paper prints it."""
    r1, p1, r2, p2 = releases_and_publications()
    knowledge, estimator = dk(normalized=False), configuration()

    # Table 4a: PK_1 = 0.5 / 0.5 inside each τ1 group (Example: equal BK_sv, no way to tell apart)
    _, pk1 = defender_step(knowledge, estimator, r1, p1)
    assert np.allclose(pk1, table_4a(p1), atol=1e-12)

    # Table 4b / Example 3: RBK_2 = 0.5·0.6 + 0.5·0.02 = 0.31 ... (the completed rows of Table 3b
    # keep the listed transitions, so the four listed values are the paper's)
    rbk2 = knowledge.prior(r2)
    alice, carol = 0, 1  # release rows (Table 1c order)
    assert rbk2[alice, V["BCM-pos"]] == pytest.approx(0.31, abs=1e-12)
    assert rbk2[alice, V["PNE-pos"]] == pytest.approx(0.05, abs=1e-12)
    assert rbk2[carol, V["BCM-pos"]] == pytest.approx(0.02, abs=1e-12)
    assert rbk2[carol, V["PNE-pos"]] == pytest.approx(0.31, abs=1e-12)
    # the completed table spreads the rest: Alice's MAM-neg = 0.5·(0.38/5) + 0.5·(0.9/5) = 0.128
    assert rbk2[alice, V["MAM-neg"]] == pytest.approx(0.5 * 0.38 / 5 + 0.5 * 0.9 / 5, abs=1e-12)
    # rows of the table and of PK_1 sum to 1, hence so does RBK (Σ_s Σ_λ p(s|λ) P(λ) = Σ_λ P(λ))
    assert np.allclose(rbk2.sum(axis=1), 1.0)
    # Elisa, Fran and Grace appear for the first time: BK_sv (uniform for their zip codes)
    assert np.allclose(rbk2[2:], 1.0 / M)

    # Table 4c / Example 2: PK_2(Alice, BCM-pos) = 0.62 / (0.62 + 0.07) ≈ 0.9
    post2 = estimator.posterior(rbk2[p2.row], p2.sensitive, p2.group, p2.n_groups, M)
    a, c = row_of(p2, "Alice"), row_of(p2, "Carol")
    assert post2[a, V["BCM-pos"]] == pytest.approx(0.62 / 0.69)
    assert post2[a, V["PNE-pos"]] == pytest.approx(0.07 / 0.69)
    assert post2[c, V["PNE-pos"]] == pytest.approx(0.62 / 0.69)
    assert post2[c, V["BCM-pos"]] == pytest.approx(0.07 / 0.69)
    assert round(post2[a, V["BCM-pos"]], 1) == 0.9 and round(post2[a, V["PNE-pos"]], 1) == 0.1


def test_the_sequential_attacker_reproduces_table_4c():
    r1, p1, r2, p2 = releases_and_publications()
    attacker = default_registry().create("attacker", "sequential", {"knowledge": "dk", "normalized": False})
    views = []
    rng = np.random.default_rng(0)
    for rel, pub in [(r1, p1), (r2, p2)]:
        views.append(pub.public())
        result = attacker.observe(views[-1], AttackContext(rel, views, rng))
        post = dict(zip(result.respondent.tolist(), result.posterior))
        if rel.t == 1:
            assert post[ID["Alice"]][V["MAM-pos"]] == pytest.approx(0.5)
            assert post[ID["Doris"]][V["BS-neg"]] == pytest.approx(0.5)
    assert post[ID["Alice"]][V["BCM-pos"]] == pytest.approx(0.62 / 0.69)
    assert post[ID["Carol"]][V["PNE-pos"]] == pytest.approx(0.62 / 0.69)
    # the snapshot attacker (BK_sv only) cannot tell Alice from Carol apart at τ2:
    # BK_sv gives Alice BCM-pos 0.001 and PNE-pos (1-0.053)/4, Carol BCM-pos and PNE-pos (1-0.2003)/5
    snapshot = default_registry().create("attacker", "sequential", {"knowledge": "bksv"})
    views = []
    for rel, pub in [(r1, p1), (r2, p2)]:
        views.append(pub.public())
        result = snapshot.observe(views[-1], AttackContext(rel, views, rng))
    post = dict(zip(result.respondent.tolist(), result.posterior))
    wa, wc = MODEL.by_zip[12030], MODEL.by_zip[12031]
    d1 = wa[V["BCM-pos"]] + wc[V["PNE-pos"]]  # Alice BCM-pos, Carol PNE-pos
    d2 = wa[V["PNE-pos"]] + wc[V["BCM-pos"]]
    assert post[ID["Alice"]][V["BCM-pos"]] == pytest.approx(d1 / (d1 + d2))
    assert post[ID["Alice"]][V["BCM-pos"]] < 0.5  # BK_sv alone even points the wrong way
