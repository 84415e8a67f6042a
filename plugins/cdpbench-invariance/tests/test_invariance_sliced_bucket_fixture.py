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


# Where T2 and T3 differ from the paper under the default readings (spec §3.1, §3.5 item 5): at T2,
# Algorithm 2's rule as Table 1a shows it ("the first of a repeated value moves to Cach") moves p10,
# not p11 as §5.2 says ("say p11"), so updated p3 (Glaucoma) pairs with the nearest new tuple of an
# allowed value, p9 (Malaria), and p8 (Dyspepsia) with p11 (new tuples before Cach, Algorithm 5's
# order); the paper pairs p3 with p10 and p8 with ch3. At T3 p12 then pairs with p9 instead of p10.
# The other buckets and all their cells are the paper's. Both choices are parameters
# (cache_duplicate, cache_single): the paper's printed choices are tested below the default ones.
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


@pytest.mark.parametrize("form", ["angelized", "buckets"])
def test_collusion_discloses_p3_under_tau_safe_lk_only(published, form):
    """§1.1: under τ-safe (2,2)-diversity p3's T3 signature is checked against T2 only, so T1 ∩ T3 =
    {SSM-pos} discloses it, in the GT/BT form (p3's signature through its QI group's buckets) as in
    the buckets form; slicedBucket discloses no one."""
    from cdpbench_invariance.anonymizers.tau_safe_lk import TauSafeLK, TauSafeLKParams

    pubs = run(TauSafeLK(TauSafeLKParams(l=2, k=2, shuffle=False, form=form)))
    assert all(p.angelized == (form == "angelized") for p in pubs)
    tau = attack(pubs)
    assert [int((r.posterior.max(axis=1) == 1.0).sum()) for r in tau] == [0, 0, 1]  # one value left
    p3 = list(tau[2].respondent).index(IDS["p3"])
    assert tau[2].posterior[p3, DISEASES.index("SSM-pos")] == 1.0  # p3's true value at T3
    views = [pub.public() for pub in published]
    assert [shrunk(r, v) for r, v in zip(attack(published), views)] == [0, 0, 0]


# ---------------------------------------------------------------------------- the paper's printed choices
# §5.2, T2: "Because of the same sensitive values for p10 and p11, one of the sensitive values say p11
# is stored in Cach. Since p9 is the last tuple to accommodate and can use a tuple from Cach to create
# a new signature but the algorithm does not do so because this will empty the Cach. Instead p9 is
# cached in Cach table till next release." As parameters of the Cach update after the first release:
PRINTED = {"cache_duplicate": "last", "cache_single": "hold"}
# Tables 7 and 8 as printed: buckets (sorted names) and cells (age, gender, zip)
TABLE_7 = {("ch1", "p1"): ("21-22", "M", "4790*"), ("p10", "p3"): ("33-45", "F", "4790*"),
           ("p5", "p6"): ("54", "*", "4790*"), ("ch2", "p7"): ("60-64", "*", "4730*"),
           ("ch3", "p8"): ("22-65", "*", "4730*")}
TABLE_8 = {("ch1", "p1"): ("21-22", "M", "4790*"), ("p3", "p4"): ("33-58", "F", "47905"),
           ("p10", "p12"): ("40-45", "*", "47***"), ("p5", "p6"): ("54", "*", "4790*"),
           ("ch2", "ch4"): ("60-64", "*", "4730*"), ("ch3", "p8"): ("22-65", "*", "4730*")}


@pytest.fixture(scope="module")
def printed():
    """The publications and the anonymizer (its Cach after T3) under the paper's printed choices."""
    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False, **PRINTED))
    return run(anon), anon


def test_printed_choices_leave_t1_as_table_6(printed, published):
    """The parameters act at the Cach updates after the first release: T1 (Tables 1b, 1c, 6) is
    the default's."""
    pubs, _ = printed
    assert buckets(pubs[0]) == buckets(published[0]) == [["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]]
    assert cells(pubs[0]) == cells(published[0])


def test_printed_choices_give_table_7(printed):
    """T2 is Table 7, buckets and cells: p11 moves to Cach (cache_duplicate=last), so p3 pairs with
    p10; p9 is held in Cach (cache_single=hold), so no new tuple is left for p8, which takes ch3 from
    Cach (Flu: the most frequent value of the release that p8 may take)."""
    pubs, _ = printed
    assert cells(pubs[1]) == TABLE_7
    assert IDS["p9"] in pubs[1].suppressed and IDS["p11"] in pubs[1].suppressed
    assert pubs[1].info["duplicated"] == 0 and not pubs[1].counterfeit.any()


def test_printed_choices_give_table_8_but_for_the_two_flu_dyspepsia_buckets(printed):
    """T3 is Table 8 except two buckets: a third contradiction in the paper. Table 7 gives updated
    p8 the new signature {Dyspepsia, Flu} (with ch3), which is p5's and p6's signature since Table 6.
    At T3 all four are in T_s ("at time 3 T s ={p1, p5, p6, p8, p10, ch1, ch2, ch3}", §5.4 (iii)),
    and "Records in T s get the same signatures from Tr−1"; "Each SBUC has a unique signature
    created", and Algorithm 4 puts each record in the SBUC of its signature ("SB =
    Crt_SBkt(Sig(STr−1 (t))) ... put(SB, t) if (SB ∉ SBUC) then SBUC = SBUC ∪ {SB}"), so p5, p6,
    p8, ch3 form one SBUC, which Algorithm 7 partitions anew ("Crt_new_SBkt(Sig(SBUCnew ) =
    Sig(SBUC), with min. interval w.r.t. AQI"). Table 8 instead prints T2's two buckets {p5, p6}
    and {p8, ch3} unchanged. The lab follows the algorithms (one bucket per kept signature, then
    Xiao & Tao's split along the QI column of widest spread, here gender): {ch3, p6} (F) and
    {p5, p8} (M). The other four buckets and their cells are Table 8's."""
    pubs, _ = printed
    flu_dyspepsia = {"Flu", "Dyspepsia"}
    assert sorted(key for key, sig in signatures(pubs[1]).items() if sig == flu_dyspepsia) == [("ch3", "p8"), ("p5", "p6")]
    printed_only = {("p5", "p6"), ("ch3", "p8")}
    lab = {("ch3", "p6"): ("22-54", "F", "47***"), ("p5", "p8"): ("54-65", "M", "47***")}
    assert cells(pubs[2]) == {k: v for k, v in TABLE_8.items() if k not in printed_only} | lab
    assert {signatures(pubs[2])[k] == flu_dyspepsia for k in lab} == {True}


def signatures(pub):
    """Each bucket's signature (set of disease names), keyed like :func:`cells`."""
    out = {}
    for g in range(pub.n_groups):
        inside = pub.group == g
        key = tuple(sorted(NAME.get(int(r), "dup") for r in pub.respondent[inside]))
        out[key] = {DISEASES[int(v)] for v in pub.sensitive[inside]}
    return out


def test_printed_choices_cache_table_1b_last_rows(printed):
    """Table 1b (the cumulative Cach, spec §3.1) ends with 52 F 47907 Malaria, 32 M 47955 Diarrhea,
    52 M 47915 Pneumonia: p9, p11, p13, each once. Under the printed choices these are exactly the
    records the updates at T2 and T3 leave in Cach, in that order, as themselves (no copies); p12
    (Glaucoma), held at T3, is taken from Cach at once to balance p10's bucket. Under the defaults
    the updates leave a copy of p9, p10 (moved), a copy of p12, and p13."""
    first = {"ch1", "ch3", "p3", "r4", "ch2", "r7", "ch4", "r9"}  # Table 1b's first 8 rows (T1's Cach)

    def added(anon):
        return [(NAME[e.respondent], DISEASES[e.value], e.copy) for e in anon.cache if NAME[e.respondent] not in first]

    assert added(printed[1]) == [("p9", "Malaria", False), ("p11", "Diarrhea", False), ("p13", "Pneumonia", False)]
    default = SlicedBucket(SlicedBucketParams(m=2, shuffle=False))
    run(default)
    assert added(default) == [("p9", "Malaria", True), ("p10", "Diarrhea", False), ("p12", "Glaucoma", True),
                              ("p13", "Pneumonia", False)]


@pytest.mark.parametrize("choice, t2", [
    # "say p11" alone: p3 pairs with p10 as printed; p9 is a new tuple and fills p8's bucket before Cach
    ({"cache_duplicate": "last"}, [["ch1", "p1"], ["ch2", "p7"], ["p10", "p3"], ["p5", "p6"], ["p8", "p9"]]),
    # p9 held alone: p8 pairs with ch3 as printed; p10 moved to Cach, p3 pairs with the new tuple p11
    ({"cache_single": "hold"}, [["ch1", "p1"], ["ch2", "p7"], ["ch3", "p8"], ["p11", "p3"], ["p5", "p6"]]),
])
def test_each_printed_choice_alone_explains_one_t2_bucket(choice, t2):
    pubs = run(SlicedBucket(SlicedBucketParams(m=2, shuffle=False, **choice)))
    assert buckets(pubs[0]) == [["p1", "p2"], ["p3", "p4"], ["p5", "p6"], ["p7", "p8"]]
    assert buckets(pubs[1]) == t2


def test_printed_choices_verify_and_disclose_no_one(printed):
    pubs, _ = printed
    model = SlicedBucketModel(MUniqueParams(m=2))
    history = History()
    for rel, pub in zip(tables(), pubs):
        report = model.verify(pub, ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel))
        assert report.satisfied and report.violations == 0
        assert not pub.counterfeit.any()
        history.releases.append(rel)
        history.publications.append(pub)
    views = [pub.public() for pub in pubs]
    assert [shrunk(r, v) for r, v in zip(attack(pubs), views)] == [0, 0, 0]
