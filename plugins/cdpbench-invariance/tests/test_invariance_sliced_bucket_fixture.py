"""(τ,m)-slicedBucket on the paper's running example (Tables 1a-1c, 6-8; spec §3.1), m = 2."""

import sys
from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import History, Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams
from cdpbench_invariance.history_verifier import MUniqueParams
from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel

sys.path.insert(0, str(Path(__file__).parent))
from test_invariance_properties import shrunk  # noqa: E402

DISEASES = ("Aids", "Flu", "SSM-pos", "Asthma", "Cardiac", "Dyspepsia", "Gastritis", "Bronchitis", "Glaucoma",
            "Diarrhea", "Malaria", "Pneumonia")
ZIPS = ("47302", "47303", "47304", "47305", "47308", "47407", "47901", "47902", "47905", "47906", "47907", "47915",
        "47955")


def zip_taxonomy(zips):
    """The prefix hierarchy: 47906 -> 4790* -> 479** -> 47*** -> 4**** -> *."""
    return Taxonomy.from_paths([[z] + [z[:k] + "*" * (5 - k) for k in (4, 3, 2, 1)] + ["*"] for z in sorted(zips)])


SCHEMA = Schema(
    (NumericQI("age", 17, 90), CategoricalQI("gender", Taxonomy.flat(["F", "M"])), CategoricalQI("zip", Taxonomy.from_prefixes(ZIPS))),
    Sensitive("disease", DISEASES),
)
# Table 1a in its order; respondent ids: the paper's p1..p8 (Table 1c) and ch1..ch4 (Tables 7-8)
TABLE_1A = [
    ("ch1", 22, "M", "47906", "Aids"), ("ch3", 22, "F", "47305", "Flu"), ("p3", 33, "F", "47905", "SSM-pos"),
    ("r4", 52, "F", "47905", "Asthma"), ("p5", 54, "M", "47906", "Flu"), ("ch2", 60, "M", "47302", "Cardiac"),
    ("r7", 60, "M", "47304", "Dyspepsia"), ("ch4", 64, "F", "47304", "Gastritis"), ("r9", 21, "M", "47901", "Bronchitis"),
    ("p6", 54, "F", "47902", "Dyspepsia"), ("p2", 27, "M", "47303", "Aids"), ("p8", 65, "M", "47308", "Cardiac"),
    ("p4", 58, "F", "47905", "Asthma"), ("p7", 64, "F", "47308", "Gastritis"), ("p1", 21, "M", "47907", "Bronchitis"),
]
IDS = {f"p{i}": i for i in range(1, 14)} | {f"ch{i}": 100 + i for i in range(1, 5)} | {"r4": 204, "r7": 207, "r9": 209}
NAME = {v: k for k, v in IDS.items()}


def release(t, rows):
    g = SCHEMA.qi[1].taxonomy.code()
    z = SCHEMA.qi[2].taxonomy.code()
    return Release(
        t, SCHEMA, np.array([IDS[r[0]] for r in rows]),
        np.array([[r[1], g[r[2]], z[r[3]]] for r in rows], dtype=float),
        np.array([DISEASES.index(r[4]) for r in rows]),
    )


def tables():
    """T1 = Table 1a; T2: p2, p4 deleted, p3 -> Glaucoma, p8 -> Dyspepsia, p9-p11 inserted; T3: p7
    deleted, p3 -> SSM-pos, p4 re-inserted, p12, p13 inserted (§5.2)."""
    t1 = list(TABLE_1A)
    t2 = [r for r in t1 if r[0] not in ("p2", "p4")]
    t2 = [(r[0], r[1], r[2], r[3], {"p3": "Glaucoma", "p8": "Dyspepsia"}.get(r[0], r[4])) for r in t2]
    t2 += [("p9", 52, "F", "47907", "Malaria"), ("p10", 45, "F", "47901", "Diarrhea"), ("p11", 32, "M", "47955", "Diarrhea")]
    t3 = [r for r in t2 if r[0] != "p7"]
    t3 = [(r[0], r[1], r[2], r[3], "SSM-pos" if r[0] == "p3" else r[4]) for r in t3]
    t3 += [("p4", 58, "F", "47905", "Asthma"), ("p12", 40, "M", "47407", "Glaucoma"), ("p13", 52, "M", "47915", "Pneumonia")]
    return [release(t, rows) for t, rows in enumerate((t1, t2, t3), start=1)]


def run(anonymizer):
    history, pubs = History(), []
    for rel in tables():
        mctx = ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel)
        pub = anonymizer.publish(rel, PublishContext(None, mctx, history, np.random.default_rng(0)))
        pubs.append(pub)
        history.releases.append(rel)
        history.publications.append(pub)
    return pubs


def buckets(pub):
    out = []
    for g in range(pub.n_groups):
        out.append(sorted(NAME.get(int(r), "dup") if r >= 0 else "dup" for r in pub.respondent[pub.group == g]))
    return sorted(out)


def cells(pub):
    """Each bucket's generalized (age, gender, zip) cell as the paper prints it."""
    out = {}
    for g in range(pub.n_groups):
        lo, hi = pub.low[g], pub.high[g]
        age = f"{lo[0]:g}" if lo[0] == hi[0] else f"{lo[0]:g}-{hi[0]:g}"
        gender = "*" if hi[1] > lo[1] else SCHEMA.qi[1].values[int(lo[1])]
        zips = [z for z, inside in zip(SCHEMA.qi[2].values, pub.value_sets[2][g]) if inside]
        prefix = zips[0]
        for z in zips[1:]:
            while not z.startswith(prefix):
                prefix = prefix[:-1]
        key = tuple(sorted(NAME.get(int(r), "dup") for r in pub.respondent[pub.group == g]))
        out[key] = (age, gender, prefix.ljust(5, "*"))
    return out


@pytest.fixture(scope="module")
def published():
    return run(SlicedBucket(SlicedBucketParams(m=2, shuffle=False)))


def test_cach_of_table_1a():
    """Algorithm 2: the first of each repeated value moves to Cach, a value held once is copied
    (Table 1b's first 8 rows, in order); T keeps the rows of Table 1c."""
    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False))
    rel = tables()[0]
    mctx = ModelContext(SCHEMA, rel.sensitive_distribution(), release=rel)
    pub = anon.publish(rel, PublishContext(None, mctx, History(), np.random.default_rng(0)))
    cach = [(NAME[e.respondent], DISEASES[e.value], e.copy) for e in anon.cache]
    assert cach == [("ch1", "Aids", False), ("ch3", "Flu", False), ("p3", "SSM-pos", True), ("r4", "Asthma", False),
                    ("ch2", "Cardiac", False), ("r7", "Dyspepsia", False), ("ch4", "Gastritis", False),
                    ("r9", "Bronchitis", False)]
    assert sorted(NAME[int(r)] for r in pub.respondent) == sorted(f"p{i}" for i in range(1, 9))


def test_t1_buckets_and_cells(published):
    """Table 6: {p1, p2} {p3, p4} {p5, p6} {p7, p8}; cells (21-27, M, 47***), (33-58, F, 47905),
    (54, *, 4790*), (64-65, *, 47308)."""
    assert buckets(published[0]) == [["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]]
    assert cells(published[0]) == {
        ("p1", "p2"): ("21-27", "M", "47***"), ("p3", "p4"): ("33-58", "F", "47905"),
        ("p5", "p6"): ("54", "*", "4790*"), ("p7", "p8"): ("64-65", "*", "47308"),
    }


# Where T2 and T3 differ from the paper (spec §3.1, §3.5 item 5): at T2, Algorithm 2's rule as Table
# 1a shows it ("the first of a repeated value moves to Cach") moves p10, not p11 as §5.2 says ("say
# p11"), so updated p3 (Glaucoma) pairs with the nearest new tuple of an allowed value, p9 (Malaria),
# and p8 (Dyspepsia) with p11 (new tuples before Cach, Algorithm 5's order); the paper pairs p3 with
# p10 and p8 with ch3. At T3 p12 then pairs with p9 instead of p10. The other buckets and all their
# cells are the paper's.
T2 = [["ch1", "p1"], ["ch2", "p7"], ["p11", "p8"], ["p3", "p9"], ["p5", "p6"]]
T3 = [["ch1", "p1"], ["ch2", "ch4"], ["p11", "p8"], ["p12", "p9"], ["p3", "p4"], ["p5", "p6"]]


def test_t2_t3(published):
    assert buckets(published[1]) == T2
    assert buckets(published[2]) == T3
    as_paper_t2 = {("ch1", "p1"): ("21-22", "M", "4790*"), ("p5", "p6"): ("54", "*", "4790*"),
                   ("ch2", "p7"): ("60-64", "*", "4730*")}
    as_paper_t3 = {("ch1", "p1"): ("21-22", "M", "4790*"), ("p3", "p4"): ("33-58", "F", "47905"),
                   ("p5", "p6"): ("54", "*", "4790*"), ("ch2", "ch4"): ("60-64", "*", "4730*")}
    assert as_paper_t2.items() <= cells(published[1]).items()
    assert as_paper_t3.items() <= cells(published[2]).items()
    # the signatures of Tables 7-8 that the readings keep: p1 {Bronchitis, Aids}, p3 back to {SSM-pos, Asthma}
    assert cells(published[1])[("p3", "p9")] == ("33-52", "F", "4790*")
    assert cells(published[1])[("p11", "p8")] == ("32-65", "M", "47***")


def test_whole_history_verifies_and_no_counterfeit(published):
    model = SlicedBucketModel(MUniqueParams(m=2))
    history = History()
    for rel, pub in zip(tables(), published):
        report = model.verify(pub, ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel))
        assert report.satisfied and report.violations == 0
        assert not pub.counterfeit.any()
        history.releases.append(rel)
        history.publications.append(pub)


def attack(pubs):
    from cdpbench.plugin import AttackContext
    from cdpbench_invariance.attackers.intersection import IntersectionAttacker

    attacker, views, out = IntersectionAttacker(), [], []
    for rel, pub in zip(tables(), pubs):
        views.append(pub.public())
        out.append(attacker.observe(views[-1], AttackContext(rel, views, np.random.default_rng(0))))
    return out


def test_collusion_discloses_p3_under_tau_safe_lk_only(published):
    """§1.1: under τ-safe (2,2)-diversity p3's T3 signature is checked against T2 only, so T1 ∩ T3 =
    {SSM-pos} discloses it; slicedBucket discloses no one."""
    from cdpbench_invariance.anonymizers.tau_safe_lk import TauSafeLK, TauSafeLKParams

    tau = attack(run(TauSafeLK(TauSafeLKParams(l=2, k=2, shuffle=False))))
    assert [int((r.posterior.max(axis=1) == 1.0).sum()) for r in tau] == [0, 0, 1]  # one value left
    p3 = list(tau[2].respondent).index(IDS["p3"])
    assert tau[2].posterior[p3, DISEASES.index("SSM-pos")] == 1.0  # p3's true value at T3
    views = [pub.public() for pub in published]
    assert [shrunk(r, v) for r, v in zip(attack(published), views)] == [0, 0, 0]
