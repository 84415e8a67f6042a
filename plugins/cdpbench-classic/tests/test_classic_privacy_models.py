"""l-diversity, t-closeness and β-likeness: hand-computed values, brute-force oracles (per-group
loops, an LP for the EMD), parameter validation and merge/whole-table properties."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.privacy_models.beta_likeness import BetaLikeness, BetaLikenessParams
from cdpbench_classic.privacy_models.l_diversity import LDiversity, LDiversityParams
from cdpbench_classic.privacy_models.t_closeness import TCloseness, TClosenessParams, equal_emd, hierarchical_emd, ordered_emd

HIER = Path(__file__).resolve().parents[3] / "src" / "cdpbench" / "datasets" / "data" / "hierarchies"
SETTINGS = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------------------- helpers
def batch_of(*groups: list[int], m: int) -> GroupBatch:
    """A GroupBatch from per-group lists of sensitive codes."""
    sens = np.array([s for g in groups for s in g], dtype=np.int64)
    seg = np.array([i for i, g in enumerate(groups) for _ in g], dtype=np.int64)
    return GroupBatch(sens, seg, len(groups), m)


def batch_from_counts(counts: np.ndarray) -> GroupBatch:
    counts = np.asarray(counts, dtype=np.int64)
    G, m = counts.shape
    seg = np.repeat(np.repeat(np.arange(G), m), counts.ravel())
    sens = np.repeat(np.tile(np.arange(m), G), counts.ravel())
    return GroupBatch(sens, seg, G, m)


def ctx_for(sensitive: Sensitive, q) -> ModelContext:
    schema = Schema((NumericQI("age", 0, 100),), sensitive)
    return ModelContext(schema, np.asarray(q, dtype=float))


def publication(values: tuple[str, ...], sensitive: list[str], groups: list[int], **sens_kw) -> tuple[Publication, ModelContext]:
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", values, **sens_kw))
    n = len(sensitive)
    frame = pd.DataFrame({"id": np.arange(n), "age": np.arange(n) % 100, "s": sensitive})
    release = schema.encode(frame, 1)
    pub = Publication.from_partition(release, np.asarray(groups))
    return pub, ModelContext(schema, release.sensitive_distribution(), release=release)


def ground_distance(kind: str, m: int, taxonomy: Taxonomy | None = None) -> np.ndarray:
    i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    if kind == "equal":
        return (i != j).astype(float)
    if kind == "ordered":
        return np.abs(i - j) / max(m - 1, 1)
    same = taxonomy.node_of_leaf[:, :, None] == taxonomy.node_of_leaf[:, None, :]  # [H+1, m, m]
    return np.argmax(same, axis=0) / taxonomy.height


def emd_lp(p: np.ndarray, q: np.ndarray, d: np.ndarray) -> float:
    """Brute-force EMD: the transportation LP min sum d_ij f_ij, rows sum to p, columns to q."""
    m = len(p)
    a_eq = np.zeros((2 * m, m * m))
    for i in range(m):
        a_eq[i, i * m : (i + 1) * m] = 1.0
        a_eq[m + i, i::m] = 1.0
    res = linprog(d.ravel(), A_eq=a_eq, b_eq=np.r_[p, q], bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun)


@st.composite
def taxonomies(draw) -> Taxonomy:
    """A random balanced-depth tree: every node of a level gets a random parent in the next."""
    height = draw(st.integers(1, 3))
    n_leaves = draw(st.integers(2, 7))
    labels = list(range(n_leaves))
    paths = [[f"v{i}"] for i in range(n_leaves)]
    for h in range(1, height):
        n_nodes = draw(st.integers(1, max(1, len(set(labels)))))
        parent = {lab: draw(st.integers(0, n_nodes - 1)) for lab in sorted(set(labels))}
        labels = [parent[lab] for lab in labels]
        for path, lab in zip(paths, labels):
            path.append(f"n{h}_{lab}")
    for path in paths:
        path.append("*")
    return Taxonomy.from_paths(paths)


def distribution(draw, m: int, allow_zero: bool = True) -> np.ndarray:
    w = np.array(draw(st.lists(st.integers(0 if allow_zero else 1, 6), min_size=m, max_size=m)), dtype=float)
    if w.sum() == 0:
        w[0] = 1.0
    return w / w.sum()


counts_matrix = st.integers(1, 5).flatmap(
    lambda m: st.lists(st.lists(st.integers(0, 6), min_size=m, max_size=m), min_size=1, max_size=6)
).map(lambda rows: np.array(rows, dtype=np.int64))


# ---------------------------------------------------------------------------- registry / parameters
@pytest.mark.parametrize("name", ["l_diversity", "t_closeness", "beta_likeness"])
def test_models_are_registered_with_a_minimum_group_size(name):
    pm = default_registry().create("privacy_model", name, {"k": 3})
    assert pm.params.k == 3


@pytest.mark.parametrize(
    "params_cls, kwargs, message",
    [
        (LDiversityParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
        (LDiversityParams, {"k": 2.5}, "k must be an integer >= 1 (got 2.5)"),
        (LDiversityParams, {"l": 0.5}, "l must be a number >= 1 (got 0.5)"),
        (LDiversityParams, {"l": float("nan")}, "l must be a number >= 1 (got nan)"),
        (LDiversityParams, {"variant": "recursive", "l": 2.5}, "l must be a whole number for variant 'recursive'"),
        (LDiversityParams, {"c": 0}, "c must be a number > 0 (got 0)"),
        (LDiversityParams, {"variant": "probabilistic"}, "variant must be one of 'distinct', 'entropy', 'recursive' (got 'probabilistic')"),
        (TClosenessParams, {"t": -0.1}, "t must be a number in [0, 1] (got -0.1)"),
        (TClosenessParams, {"t": 1.5}, "t must be a number in [0, 1] (got 1.5)"),
        (TClosenessParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
        (TClosenessParams, {"distance": "euclid"}, "distance must be one of 'equal', 'ordered', 'hierarchical' (got 'euclid')"),
        (BetaLikenessParams, {"beta": 0}, "beta must be a number > 0 (got 0)"),
        (BetaLikenessParams, {"beta": -1.0}, "beta must be a number > 0 (got -1.0)"),
        (BetaLikenessParams, {"variant": "robust"}, "variant must be one of 'basic', 'enhanced' (got 'robust')"),
        (BetaLikenessParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
    ],
)
def test_invalid_parameters_raise_one_line_config_error_naming_the_field(params_cls, kwargs, message):
    with pytest.raises(ConfigError) as err:
        params_cls(**kwargs)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_invalid_parameter_through_the_registry_names_the_config_key():
    with pytest.raises(ConfigError, match=r"^privacy_model\.t must be a number in \[0, 1\] \(got 2\.0\)$"):
        default_registry().create("privacy_model", "t_closeness", {"t": 2.0})


def test_hierarchical_distance_without_sensitive_taxonomy_is_a_config_error_in_prepare():
    ctx = ctx_for(Sensitive("s", ("a", "b")), [0.5, 0.5])
    pm = TCloseness(TClosenessParams(distance="hierarchical"))
    with pytest.raises(ConfigError, match=r"distance='hierarchical' needs a taxonomy for the sensitive attribute 's'"):
        pm.prepare(None, ctx)
    with pytest.raises(ConfigError, match="hierarchical"):
        pm.accepts(batch_of([0, 1], m=2), ctx)  # verification without prepare fails the same way


def test_ordered_distance_needs_an_ordered_sensitive_attribute():
    pm = TCloseness(TClosenessParams(distance="ordered"))
    with pytest.raises(ConfigError, match="distance='ordered' needs an ordered sensitive attribute"):
        pm.prepare(None, ctx_for(Sensitive("s", ("a", "b")), [0.5, 0.5]))
    pm.prepare(None, ctx_for(Sensitive("s", ("a", "b"), ordered=True), [0.5, 0.5]))  # fine


# ---------------------------------------------------------------------------- l-diversity, by hand
def test_l_diversity_hand_computed_levels():
    # group 0: a a a b c (r = 3,1,1)   group 1: a b c d (uniform over 4)   group 2: a a a a a b b b c d (r = 5,3,1,1)
    values = ("a", "b", "c", "d")
    sens = list("aaabc") + list("abcd") + list("aaaaabbbcd")
    groups = [0] * 5 + [1] * 4 + [2] * 10
    pub, ctx = publication(values, sens, groups)
    lv = LDiversity(LDiversityParams(variant="recursive", l=2, c=3.0)).levels(pub, ctx)
    assert lv["k"] == 4 and lv["l_distinct"] == 3
    # exp(H) = prod p^-p: group 0 has the smallest entropy, 0.6^-0.6 * 0.2^-0.4 = 2.58641...
    assert lv["l_entropy"] == pytest.approx(0.6**-0.6 * 0.2**-0.4, rel=1e-12)
    assert lv["l_entropy"] == pytest.approx(2.58641, abs=1e-5)
    # c at l=2: group 0: 3 < c*2 -> 2;  group 1: 1 < c*3 -> 1;  group 2: 5 < c*5 -> 2
    assert lv["c_recursive"] == 2
    # at l=3: group 0: 3 < c*1 -> 4;  group 1: 1 < c*2 -> 1;  group 2: 5 < c*2 -> 3
    assert LDiversity(LDiversityParams(variant="recursive", l=3)).levels(pub, ctx)["c_recursive"] == 4
    # at l=5 no group has 5 values: no c works
    assert LDiversity(LDiversityParams(variant="recursive", l=5)).levels(pub, ctx)["c_recursive"] == math.inf


def test_l_diversity_accepts_by_hand():
    b = batch_of([0, 0, 0, 1, 2], [0, 1, 2, 3], [0, 0, 0, 0, 0, 1, 1, 1, 2, 3], [0, 0], m=4)

    def acc(**kw):
        return LDiversity(LDiversityParams(**kw)).accepts(b, None).tolist()

    assert acc(variant="distinct", l=3) == [True, True, True, False]
    assert acc(variant="distinct", l=4) == [False, True, True, False]
    assert acc(variant="distinct", l=2.5) == [True, True, True, False]  # a count >= 2.5 means >= 3
    assert acc(variant="distinct", l=3, k=5) == [True, False, True, False]
    # entropy: exp(H) = 2.586, 4 (exactly at the threshold), 3.26..., 1
    assert acc(variant="entropy", l=2.5) == [True, True, True, False]
    assert acc(variant="entropy", l=2.6) == [False, True, True, False]
    assert acc(variant="entropy", l=4) == [False, True, False, False]
    # recursive l=2: 3 < c*2, 1 < c*3, 5 < c*5, 2 < c*0
    assert acc(variant="recursive", l=2, c=1.5) == [False, True, True, False]
    assert acc(variant="recursive", l=2, c=1.51) == [True, True, True, False]
    assert acc(variant="recursive", l=2, c=1.0) == [False, True, False, False]
    assert acc(variant="recursive", l=2, c=1.01) == [False, True, True, False]


def brute_l_diversity(groups: list[list[int]], variant: str, l: float, c: float, k: int) -> list[bool]:
    out = []
    for g in groups:
        if len(g) < k or not g:
            out.append(False)
            continue
        freq = sorted((g.count(v) for v in set(g)), reverse=True)
        if variant == "distinct":
            out.append(len(freq) >= l)
        elif variant == "entropy":
            h = -sum(f / len(g) * math.log(f / len(g)) for f in freq)
            out.append(h >= math.log(l) - 1e-12)
        else:
            out.append(freq[0] < c * sum(freq[int(l) - 1 :]))
    return out


@SETTINGS
@given(
    counts=counts_matrix,
    variant=st.sampled_from(["distinct", "entropy", "recursive"]),
    l=st.integers(1, 5),
    c=st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]),
    k=st.integers(1, 8),
)
def test_l_diversity_vectorized_matches_per_group_oracle(counts, variant, l, c, k):
    b = batch_from_counts(counts)
    groups = [b.sensitive[b.segment == i].tolist() for i in range(b.n_groups)]
    got = LDiversity(LDiversityParams(variant=variant, l=float(l), c=c, k=k)).accepts(b, None)
    assert got.tolist() == brute_l_diversity(groups, variant, l, c, k)


@SETTINGS
@given(
    a=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    b=st.lists(st.integers(0, 5), min_size=1, max_size=12),
    variant=st.sampled_from(["distinct", "entropy", "recursive"]),
    l=st.integers(1, 4),
    c=st.sampled_from([1.0, 2.0, 3.0]),
)
def test_merging_two_l_diverse_groups_stays_l_diverse(a, b, variant, l, c):
    """Monotonicity (Machanavajjhala et al. §4): the union of two l-diverse groups is l-diverse."""
    pm = LDiversity(LDiversityParams(variant=variant, l=float(l), c=c))
    ok = pm.accepts(batch_of(a, b, a + b, m=6), None)
    if ok[0] and ok[1]:
        assert ok[2]


# ---------------------------------------------------------------------------- t-closeness, by hand
SALARY = Sensitive("salary", tuple(f"{v}k" for v in range(3, 12)), ordered=True)  # 3k..11k


def test_t_closeness_salary_example_of_li_et_al():
    """Li, Li, Venkatasubramanian 2007 §4: table salaries 3k..11k once each; {3k,4k,5k} is at
    ordered EMD 0.375 and {6k,8k,11k} at 0.167 from the table."""
    ctx = ctx_for(SALARY, np.full(9, 1 / 9))
    b = batch_of([0, 1, 2], [3, 5, 8], m=9)
    ordered = TCloseness(TClosenessParams(distance="ordered"))
    np.testing.assert_allclose(ordered.distances(b.counts(), ctx), [0.375, 1 / 6], rtol=1e-12)
    # equal distance: half L1 = (3 * 2/9 + 6 * 1/9) / 2 = 2/3 for both
    equal = TCloseness(TClosenessParams(distance="equal"))
    np.testing.assert_allclose(equal.distances(b.counts(), ctx), [2 / 3, 2 / 3], rtol=1e-12)
    assert TCloseness(TClosenessParams(distance="ordered", t=0.375)).accepts(b, ctx).tolist() == [True, True]
    assert TCloseness(TClosenessParams(distance="ordered", t=0.3)).accepts(b, ctx).tolist() == [False, True]
    assert TCloseness(TClosenessParams(distance="ordered", t=0.3, k=4)).accepts(b, ctx).tolist() == [False, False]


def disease_taxonomy() -> Taxonomy:
    """A 3-level disease hierarchy in the style of Li et al. 2007, Fig. 2."""
    rows = [
        ("gastric ulcer", "stomach diseases", "digestive"),
        ("gastritis", "stomach diseases", "digestive"),
        ("stomach cancer", "stomach diseases", "digestive"),
        ("colitis", "colon diseases", "digestive"),
        ("colon cancer", "colon diseases", "digestive"),
        ("flu", "respiratory infection", "respiratory"),
        ("pneumonia", "respiratory infection", "respiratory"),
        ("bronchitis", "respiratory infection", "respiratory"),
        ("pulmonary edema", "vascular lung diseases", "respiratory"),
        ("pulmonary embolism", "vascular lung diseases", "respiratory"),
    ]
    return Taxonomy.from_paths([[*r, "*"] for r in rows])


def test_hierarchical_emd_by_hand():
    """Table (9 records): gastric ulcer 1, gastritis 2, stomach cancer 2, flu 1, pneumonia 1,
    bronchitis 2. Group {gastric ulcer, stomach cancer, pneumonia}: extras (p - q) are +2/9, -2/9,
    +1/9 (stomach) and -1/9, +2/9, -2/9 (respiratory infection). Costs: stomach diseases
    1/3 * min(3/9, 2/9) = 2/27; respiratory infection 1/3 * min(2/9, 3/9) = 2/27; level 2 nodes
    have one non-zero child (cost 0); root 3/3 * min(1/9, 1/9) = 3/27. EMD = 7/27.
    Group {gastritis, flu, bronchitis}: 1/27 + 1/27 + 6/27 = 8/27; group {gastritis, stomach
    cancer, bronchitis}: 1/27 + 1/27 + 3/27 = 5/27."""
    tax = disease_taxonomy()
    code = tax.code()
    sens = Sensitive("disease", tax.leaves, taxonomy=tax)
    table = ["gastric ulcer", "gastritis", "gastritis", "stomach cancer", "stomach cancer", "flu", "pneumonia", "bronchitis", "bronchitis"]
    q = np.bincount([code[v] for v in table], minlength=tax.size) / len(table)
    ctx = ctx_for(sens, q)
    groups = [["gastric ulcer", "stomach cancer", "pneumonia"], ["gastritis", "flu", "bronchitis"], ["gastritis", "stomach cancer", "bronchitis"]]
    b = batch_of(*[[code[v] for v in g] for g in groups], m=tax.size)
    pm = TCloseness(TClosenessParams(distance="hierarchical", t=7 / 27))
    pm.prepare(None, ctx)
    np.testing.assert_allclose(pm.distances(b.counts(), ctx), [7 / 27, 8 / 27, 5 / 27], rtol=1e-12)
    assert pm.accepts(b, ctx).tolist() == [True, False, True]
    # the LP with ground distance level(LCA)/H agrees
    d = ground_distance("hierarchical", tax.size, tax)
    p = b.counts() / 3.0
    assert [emd_lp(p[i], q, d) for i in range(3)] == pytest.approx([7 / 27, 8 / 27, 5 / 27], abs=1e-9)


def test_hierarchical_emd_on_the_adult_occupation_taxonomy_matches_the_lp():
    tax = Taxonomy.from_arx_csv(HIER / "adult_hierarchy_occupation.csv")
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.full(tax.size, 0.3), size=5)
    q = rng.dirichlet(np.ones(tax.size))
    d = ground_distance("hierarchical", tax.size, tax)
    got = hierarchical_emd(p, q, tax)
    assert got.tolist() == pytest.approx([emd_lp(row, q, d) for row in p], abs=1e-8)


@SETTINGS
@given(data=st.data())
def test_emds_match_the_transportation_lp(data):
    tax = data.draw(taxonomies())
    m = tax.size
    p = np.stack([distribution(data.draw, m) for _ in range(2)])
    q = distribution(data.draw, m, allow_zero=data.draw(st.booleans()))
    for kind, fn in (("equal", equal_emd), ("ordered", ordered_emd)):
        assert fn(p, q).tolist() == pytest.approx([emd_lp(row, q, ground_distance(kind, m)) for row in p], abs=1e-9)
    d = ground_distance("hierarchical", m, tax)
    assert hierarchical_emd(p, q, tax).tolist() == pytest.approx([emd_lp(row, q, d) for row in p], abs=1e-9)


@SETTINGS
@given(data=st.data())
def test_hierarchical_emd_of_a_flat_taxonomy_is_the_equal_distance_emd(data):
    m = data.draw(st.integers(2, 8))
    tax = Taxonomy.flat([f"v{i}" for i in range(m)])
    p = np.stack([distribution(data.draw, m) for _ in range(3)])
    q = distribution(data.draw, m)
    np.testing.assert_allclose(hierarchical_emd(p, q, tax), equal_emd(p, q), atol=1e-12)


@SETTINGS
@given(data=st.data(), distance=st.sampled_from(["equal", "ordered", "hierarchical"]))
def test_t_closeness_of_the_whole_table_is_zero_and_merging_never_increases_the_emd(data, distance):
    tax = data.draw(taxonomies())
    m = tax.size
    sens = Sensitive("s", tax.leaves, ordered=True, taxonomy=tax)
    a = data.draw(st.lists(st.integers(0, m - 1), min_size=1, max_size=10))
    b = data.draw(st.lists(st.integers(0, m - 1), min_size=1, max_size=10))
    whole = a + b
    q = np.bincount(whole, minlength=m) / len(whole)
    ctx = ctx_for(sens, q)
    pm = TCloseness(TClosenessParams(distance=distance, t=0.0))
    # the table itself: EMD 0, accepted even at t = 0
    assert pm.distances(batch_of(whole, m=m).counts(), ctx)[0] == pytest.approx(0.0, abs=1e-12)
    assert pm.accepts(batch_of(whole, m=m), ctx).tolist() == [True]
    # against any reference distribution, EMD(a ∪ b) <= max(EMD(a), EMD(b)) (EMD is convex)
    ctx2 = ctx_for(sens, distribution(data.draw, m))
    da, db, dab = pm.distances(batch_of(a, b, a + b, m=m).counts(), ctx2)
    assert dab <= max(da, db) + 1e-12


def test_t_closeness_levels_and_verify_on_a_publication():
    values = tuple(f"{v}k" for v in range(3, 12))
    sens = [f"{v}k" for v in (3, 4, 5, 6, 8, 11, 7, 9, 10)]
    pub, ctx = publication(values, sens, [0, 0, 0, 1, 1, 1, 2, 2, 2], ordered=True)
    pm = TCloseness(TClosenessParams(distance="ordered", t=0.2))
    lv = pm.levels(pub, ctx)
    assert lv["k"] == 3 and lv["t"] == pytest.approx(0.375, rel=1e-12)
    rep = pm.verify(pub, ctx)
    # {3k,4k,5k}: 0.375; {6k,8k,11k}: 1/6; {7k,9k,10k}: cumsums -1,-2,-3,-4,-2,-3,-1,1,0 (/9) -> 17/72
    assert not rep.satisfied and rep.violations == 2
    assert pm.distances(pub.group_counts(), ctx).tolist() == pytest.approx([0.375, 1 / 6, 17 / 72], rel=1e-12)
    assert TCloseness(TClosenessParams(distance="ordered", t=0.375)).verify(pub, ctx).satisfied


# ---------------------------------------------------------------------------- β-likeness, by hand
def test_beta_likeness_by_hand():
    """q = (0.5, 0.3, 0.2). Group [1,1,2] -> p = (.25,.25,.5): gains -0.5, -1/6, +1.5.
    Group [3,1,0] -> p = (.75,.25,0): gains +0.5, -1/6, -1. Group [4,0,0] -> p = (1,0,0):
    gain +1.0 on a value whose enhanced cap is -ln 0.5 = 0.693."""
    ctx = ctx_for(Sensitive("s", ("a", "b", "c")), [0.5, 0.3, 0.2])
    b = batch_from_counts(np.array([[1, 1, 2], [3, 1, 0], [4, 0, 0]]))

    def acc(**kw):
        return BetaLikeness(BetaLikenessParams(**kw)).accepts(b, ctx).tolist()

    assert acc(beta=1.5) == [True, True, True]
    assert acc(beta=1.49) == [False, True, True]
    assert acc(beta=0.99) == [False, True, False]
    assert acc(beta=1.5, k=4) == [True, True, True]
    assert acc(beta=1.5, k=5) == [False, False, False]
    # enhanced: bounds min(beta, -ln q) = min(beta, (0.693, 1.204, 1.609))
    assert acc(beta=1.5, variant="enhanced") == [True, True, False]
    assert acc(beta=1.49, variant="enhanced") == [False, True, False]
    assert acc(beta=100.0, variant="enhanced") == [True, True, False]  # no β rescues group 2


def test_beta_likeness_levels_basic_and_enhanced():
    # q over (a, b, c) = (4, 3, 3)/10; groups: [a a b c c] and [a a a b c]
    values = ("a", "b", "c")
    pub, ctx = publication(values, list("aabcc") + list("aaabc"), [0] * 5 + [1] * 5)
    np.testing.assert_allclose(ctx.table_distribution, [0.5, 0.2, 0.3])
    # gains: group 0: (0.4-0.5)/0.5, 0, (0.4-0.3)/0.3 = 1/3; group 1: (0.6-0.5)/0.5 = 0.2, 0, -1/3
    basic = BetaLikeness(BetaLikenessParams(variant="basic")).levels(pub, ctx)
    assert basic == pytest.approx({"k": 5.0, "beta": 1 / 3, "beta_satisfied": 1 / 3}, rel=1e-12)
    enh = BetaLikeness(BetaLikenessParams(variant="enhanced")).levels(pub, ctx)
    # pycanon's convention: min(β_basic, max_s -ln q_s) = min(1/3, -ln 0.2) = 1/3
    assert enh["beta"] == pytest.approx(1 / 3, rel=1e-12)
    assert enh["beta_satisfied"] == pytest.approx(1 / 3, rel=1e-12)  # every gain is under its cap
    # a group that is all 'a' (gain 1.0 > -ln 0.5): pycanon's number stays finite, no β satisfies it
    pub2, ctx2 = publication(values, list("aaaaa") + list("bbccc"), [0] * 5 + [1] * 5)
    enh2 = BetaLikeness(BetaLikenessParams(variant="enhanced")).levels(pub2, ctx2)
    # β_basic = max((1-.5)/.5, (.4-.2)/.2, (.6-.3)/.3) = 1.0; max_s -ln q_s = -ln 0.2 = 1.609
    assert enh2["beta"] == pytest.approx(1.0, rel=1e-12)
    assert enh2["beta_satisfied"] == math.inf


def test_beta_likeness_value_absent_from_the_table_is_an_infinite_gain():
    ctx = ctx_for(Sensitive("s", ("a", "b", "c")), [0.5, 0.5, 0.0])
    b = batch_from_counts(np.array([[1, 1, 0], [1, 0, 1]]))
    for variant in ("basic", "enhanced"):
        assert BetaLikeness(BetaLikenessParams(beta=50.0, variant=variant)).accepts(b, ctx).tolist() == [True, False]


def brute_beta(groups: list[list[int]], q: np.ndarray, beta: float, variant: str, k: int) -> list[bool]:
    out = []
    for g in groups:
        ok = len(g) >= k
        for s in range(len(q)):
            p = g.count(s) / len(g) if g else 0.0
            if p > q[s]:
                bound = beta if variant == "basic" else min(beta, -math.log(q[s]) if q[s] > 0 else math.inf)
                gain = (p - q[s]) / q[s] if q[s] > 0 else math.inf
                ok &= gain <= bound + 1e-12
        out.append(ok)
    return out


@SETTINGS
@given(
    data=st.data(),
    counts=counts_matrix,
    beta=st.sampled_from([0.1, 0.5, 1.0, 2.0, 5.0]),
    variant=st.sampled_from(["basic", "enhanced"]),
    k=st.integers(1, 6),
)
def test_beta_likeness_vectorized_matches_per_group_oracle(data, counts, beta, variant, k):
    m = counts.shape[1]
    q = distribution(data.draw, m)
    b = batch_from_counts(counts)
    groups = [b.sensitive[b.segment == i].tolist() for i in range(b.n_groups)]
    ctx = ctx_for(Sensitive("s", tuple(f"v{i}" for i in range(m))), q)
    got = BetaLikeness(BetaLikenessParams(beta=beta, variant=variant, k=k)).accepts(b, ctx)
    assert got.tolist() == brute_beta(groups, q, beta, variant, k)


@SETTINGS
@given(
    a=st.lists(st.integers(0, 4), min_size=1, max_size=10),
    b=st.lists(st.integers(0, 4), min_size=1, max_size=10),
    beta=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
    variant=st.sampled_from(["basic", "enhanced"]),
)
def test_beta_likeness_whole_table_is_zero_and_merging_keeps_it(a, b, beta, variant):
    whole = a + b
    q = np.bincount(whole, minlength=5) / len(whole)
    ctx = ctx_for(Sensitive("s", tuple("vwxyz")), q)
    pm = BetaLikeness(BetaLikenessParams(beta=beta, variant=variant))
    assert pm.accepts(batch_of(whole, m=5), ctx).tolist() == [True]
    ok = pm.accepts(batch_of(a, b, a + b, m=5), ctx)
    if ok[0] and ok[1]:
        assert ok[2]
    pub, pctx = publication(tuple("vwxyz"), ["vwxyz"[s] for s in whole], [0] * len(whole))
    assert pm.levels(pub, pctx)["beta"] == pytest.approx(0.0, abs=1e-12)


def test_empty_publication_levels():
    pub, ctx = publication(("a", "b"), ["a", "b"], [-1, -1])
    assert LDiversity().levels(pub, ctx)["k"] == 0
    assert TCloseness().levels(pub, ctx) == {"k": 0.0, "t": 0.0}
    assert BetaLikeness().levels(pub, ctx)["k"] == 0
    assert all(m.verify(pub, ctx).satisfied for m in (LDiversity(), TCloseness(), BetaLikeness()))


def test_product_of_small_cases_distinct_l_equals_number_of_values():
    """Exhaustive over all groups of size <= 4 on 3 values: l_distinct = number of values present."""
    for n in range(1, 5):
        for g in itertools.product(range(3), repeat=n):
            pub, ctx = publication(("a", "b", "c"), ["abc"[s] for s in g], [0] * n)
            assert LDiversity().levels(pub, ctx)["l_distinct"] == len(set(g))
