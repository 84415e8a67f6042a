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


class RunningExampleModel:
    """BK_sv of Table 3a and BK_seq of Table 3b, completed as the module docstring says."""

    values = VALUES
    max_order = 1

    def __init__(self) -> None:
        t = np.full((M, M), 1.0 / M)
        table3b = {
            "MAM-pos": {"BCM-pos": 0.6, "PNE-pos": 0.02},
            "CX-neg": {"BCM-pos": 0.02, "PNE-pos": 0.08},
            "CX-pos": {"BCM-pos": 0.02, "PNE-pos": 0.6},
            "BS-neg": {"BCM-pos": 0.02, "PNE-pos": 0.02},
        }
        for before, after in table3b.items():
            t[V[before]] = _spread(after)
        self.table = t
        self.by_zip = {
            12030: _spread({"MAM-pos": 0.002, "CX-neg": 0.05, "BCM-pos": 0.001}),
            12031: _spread({"CX-pos": 0.0003, "BS-neg": 0.2}),
        }

    def bk_sv(self, qi: np.ndarray) -> np.ndarray:
        return np.array([self.by_zip.get(int(z), np.full(M, 1.0 / M)) for z in qi[:, 2]])

    def bk_seq(self, steps: int) -> np.ndarray:
        # first order: the value depends on the last one only
        return np.broadcast_to(self.table, (M,) * (steps + 1)).copy()

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        raise NotImplementedError("the running example has no corpus")


MODEL = RunningExampleModel()
TABLE_1A = [("Alice", 51, 12030, "MAM-pos"), ("Betty", 52, 12030, "CX-neg"), ("Carol", 51, 12031, "CX-pos"), ("Doris", 52, 12031, "BS-neg")]
TABLE_1C = [
    ("Alice", 51, 12030, "BCM-pos"),
    ("Carol", 51, 12031, "PNE-pos"),
    ("Elisa", 51, 12044, "MAM-neg"),
    ("Fran", 51, 12045, "CX-neg"),
    ("Grace", 51, 12040, "CX-pos"),
]


def release(rows, t: int):
    frame = pd.DataFrame(
        [(ID[name], age, "F", zip_, value) for name, age, zip_, value in rows], columns=["id", "age", "gender", "zip", "exres"]
    )
    return SCHEMA.encode(frame, t, truth={"model": MODEL})


def releases_and_publications():
    r1, r2 = release(TABLE_1A, 1), release(TABLE_1C, 2)
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


def test_bk_sv_is_table_3a_at_the_first_release():
    r1, *_ = releases_and_publications()
    prior = dk(normalized=False).prior(r1)
    assert prior[0, V["MAM-pos"]] == pytest.approx(0.002) and prior[0, V["CX-neg"]] == pytest.approx(0.05)
    assert prior[0, V["BCM-pos"]] == pytest.approx(0.001)
    assert np.array_equal(prior[0], prior[1])  # Alice and Betty: same beliefs
    assert prior[2, V["CX-pos"]] == pytest.approx(0.0003) and prior[2, V["BS-neg"]] == pytest.approx(0.2)
    assert np.array_equal(prior[2], prior[3])


@pytest.mark.parametrize("normalized", [False, True])
def test_table_4_posterior_revised_and_posterior_again(normalized):
    r1, p1, r2, p2 = releases_and_publications()
    knowledge, estimator = dk(normalized=normalized), configuration()

    # Table 4a: PK_1 = 0.5 / 0.5 inside each τ1 group (Example: equal BK_sv, no way to tell apart)
    _, pk1 = defender_step(knowledge, estimator, r1, p1)
    for name, a, b in [("Alice", "MAM-pos", "CX-neg"), ("Betty", "MAM-pos", "CX-neg"), ("Carol", "CX-pos", "BS-neg"), ("Doris", "CX-pos", "BS-neg")]:
        i = row_of(p1, name)
        assert pk1[i, V[a]] == pytest.approx(0.5) and pk1[i, V[b]] == pytest.approx(0.5)

    # Table 4b / Example 3: RBK_2 = 0.5·0.6 + 0.5·0.02 = 0.31 ...
    rbk2 = knowledge.prior(r2)
    alice, carol = 0, 1  # release rows (Table 1c order)
    assert rbk2[alice, V["BCM-pos"]] == pytest.approx(0.31, abs=1e-12)
    assert rbk2[alice, V["PNE-pos"]] == pytest.approx(0.05, abs=1e-12)
    assert rbk2[carol, V["BCM-pos"]] == pytest.approx(0.02, abs=1e-12)
    assert rbk2[carol, V["PNE-pos"]] == pytest.approx(0.31, abs=1e-12)
    assert round(rbk2[alice, V["BCM-pos"]], 2) == 0.31 and round(rbk2[carol, V["BCM-pos"]], 2) == 0.02
    # the completed table's rows sum to 1, so raw and normalized RBK agree here
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
