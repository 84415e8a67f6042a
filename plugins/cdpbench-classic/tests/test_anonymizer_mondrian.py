"""Mondrian: hand-checked examples, a brute-force recursive oracle and property tests."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdpbench.data import GroupBatch, History, Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PrivacyModel, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.anonymizers.mondrian import Mondrian, MondrianParams

SENS = Sensitive("s", ("x", "y", "z", "w"))


# ---------------------------------------------------------------------------- helpers
def model(name: str, **params) -> PrivacyModel:
    return default_registry().create("privacy_model", name, params)


def publish(release: Release, pm: PrivacyModel, categorical: str = "taxonomy", prior=None) -> tuple[Publication, ModelContext]:
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    ctx = PublishContext(pm, mctx, History(), np.random.default_rng(0))
    return Mondrian(MondrianParams(categorical=categorical)).publish(release, ctx), mctx


def groups_of(pub: Publication) -> set[frozenset[int]]:
    """The partition as a set of groups of release rows."""
    return {frozenset(pub.row[pub.group == g].tolist()) for g in range(pub.n_groups)}


def release_of(schema: Schema, columns: dict[str, list]) -> Release:
    n = len(next(iter(columns.values())))
    frame = pd.DataFrame({"id": np.arange(n), **columns})
    return schema.encode(frame, t=1)


class DistinctL(PrivacyModel):
    """Test-only model: at least ``l`` distinct sensitive values and ``k`` records per group."""

    def __init__(self, l: int, k: int = 1):
        super().__init__()
        self.l, self.k = l, k

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        c = batch.counts()
        return ((c > 0).sum(axis=1) >= self.l) & (c.sum(axis=1) >= self.k)


# ---------------------------------------------------------------------------- hand-checked examples
def test_eight_records_k2_exact_groups():
    # rows: 0:20M 1:22F 2:25M 3:30F 4:40M 5:45F 6:50M 7:60F
    # root: width(age) = 40/100 = 0.4 < width(sex) = 2/2 = 1 -> split on sex: M {0,2,4,6} | F {1,3,5,7}
    # M: ages 20,25,40,50, lower median 25 -> {20,25} | {40,50};  F: 22,30,45,60 -> {22,30} | {45,60}
    # groups of 2 cannot be split further with k = 2.
    schema = Schema((NumericQI("age", 0, 100), CategoricalQI("sex", Taxonomy.flat(["M", "F"]))), SENS)
    rel = release_of(
        schema,
        {"age": [20, 22, 25, 30, 40, 45, 50, 60], "sex": list("MFMFMFMF"), "s": list("xyzwxyzw")},
    )
    pub, mctx = publish(rel, model("k_anonymity", k=2))
    assert pub.group.tolist() == [0, 1, 0, 1, 2, 3, 2, 3]
    assert pub.row.tolist() == list(range(8))
    assert pub.low[:, 0].tolist() == [20, 22, 40, 45]
    assert pub.high[:, 0].tolist() == [25, 30, 50, 60]
    m, f = 0, 1  # leaf codes of M and F
    assert pub.low[:, 1].tolist() == [m, f, m, f] and pub.high[:, 1].tolist() == [m, f, m, f]
    assert pub.value_sets[1].tolist() == [[True, False], [False, True], [True, False], [False, True]]
    assert len(pub.suppressed) == 0
    assert pub.info["n_groups"] == 4 and pub.info["suppressed_all"] is False
    # three levels (root, sex children, age children); the model is asked once for the whole
    # table, then once per level for the one splittable rank (sex, then age, then age again)
    assert pub.info["levels"] == 3
    assert pub.info["accepts_calls"] == 4


def test_widest_dimension_unsplittable_falls_back_to_next():
    # x = 0,0,0,10 (width 1.0): strict split {0,0,0}|{10} violates k=2;
    # y = 0,5,0,5 (width 0.5): split {0,0}|{5,5} is allowed.
    schema = Schema((NumericQI("x", 0, 10), NumericQI("y", 0, 10)), SENS)
    rel = release_of(schema, {"x": [0, 0, 0, 10], "y": [0, 5, 0, 5], "s": list("xyzw")})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    assert groups_of(pub) == {frozenset({0, 2}), frozenset({1, 3})}
    assert pub.low.tolist() == [[0, 0], [0, 5]] and pub.high.tolist() == [[0, 0], [10, 5]]


def test_equal_widths_split_the_lower_column_first():
    # x and y both have width 5/10; x first gives {(0,0),(0,5)} {(5,5),(5,0)}, y first would pair by y
    schema = Schema((NumericQI("x", 0, 10), NumericQI("y", 0, 10)), SENS)
    rel = release_of(schema, {"x": [0, 5, 0, 5], "y": [0, 5, 5, 0], "s": list("xyzw")})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    assert groups_of(pub) == {frozenset({0, 2}), frozenset({1, 3})}
    swapped = Schema((NumericQI("y", 0, 10), NumericQI("x", 0, 10)), SENS)
    pub, _ = publish(release_of(swapped, {"y": [0, 5, 5, 0], "x": [0, 5, 0, 5], "s": list("xyzw")}), model("k_anonymity", k=2))
    assert groups_of(pub) == {frozenset({0, 3}), frozenset({1, 2})}


def test_strict_median_split_keeps_equal_values_together():
    # sorted 1,2,2,2,3,4: lower median 2; {<=2}|{>2} = 4|2 beats {<2}|{>=2} = 1|5.
    schema = Schema((NumericQI("a", 0, 10),), SENS)
    rel = release_of(schema, {"a": [2, 4, 1, 2, 3, 2], "s": list("xyzwxy")})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    # {1,2,2,2}: {<=2} would take all, {<2}|{>=2} = 1|3 violates k=2 -> final
    assert groups_of(pub) == {frozenset({0, 2, 3, 5}), frozenset({1, 4})}
    pub1, _ = publish(rel, model("k_anonymity", k=1))
    # with k=1 the three 2s still stay together (strict Mondrian), everything else is alone
    assert groups_of(pub1) == {frozenset({2}), frozenset({0, 3, 5}), frozenset({4}), frozenset({1})}


def test_categorical_split_follows_taxonomy_children():
    tax = Taxonomy.from_paths([["a", "ab", "*"], ["b", "ab", "*"], ["c", "cd", "*"], ["d", "cd", "*"]])
    schema = Schema((CategoricalQI("c", tax),), SENS)
    rel = release_of(schema, {"c": list("aabbcd"), "s": list("xyzwxy")})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    # root * -> {ab: a,a,b,b} {cd: c,d}; ab -> {a,a} {b,b}; cd -> {c} {d} violates k=2
    assert groups_of(pub) == {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5})}
    code = {v: i for i, v in enumerate(tax.leaves)}
    g = int(pub.group[pub.row == 4][0])
    assert (pub.low[g, 0], pub.high[g, 0]) == (min(code["c"], code["d"]), max(code["c"], code["d"]))


def test_categorical_split_has_one_child_per_taxonomy_child_with_records():
    schema = Schema((CategoricalQI("c", Taxonomy.flat(list("abcd"))),), SENS)
    rel = release_of(schema, {"c": list("aabbcc"), "s": list("xyzwxy")})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    assert groups_of(pub) == {frozenset({0, 1}), frozenset({2, 3}), frozenset({4, 5})}


def test_set_publishes_values_present_taxonomy_publishes_covering_node():
    schema = Schema((CategoricalQI("c", Taxonomy.flat(list("abcd"))),), SENS)
    rel = release_of(schema, {"c": list("aac"), "s": list("xyz")})
    code = {v: i for i, v in enumerate(schema.qi[0].taxonomy.leaves)}
    pub_t, _ = publish(rel, model("k_anonymity", k=2), "taxonomy")
    pub_s, _ = publish(rel, model("k_anonymity", k=2), "set")
    assert pub_t.n_groups == pub_s.n_groups == 1
    assert pub_t.value_sets[0].tolist() == [[True] * 4]
    expected = [False] * 4
    expected[code["a"]] = expected[code["c"]] = True
    assert pub_s.value_sets[0].tolist() == [expected]


def test_release_violating_the_model_is_suppressed_entirely():
    schema = Schema((NumericQI("a", 0, 10),), SENS)
    rel = release_of(schema, {"a": [1, 2, 3], "s": list("xyz")})
    pub, _ = publish(rel, model("k_anonymity", k=5))
    assert len(pub) == 0 and pub.n_groups == 0
    assert sorted(pub.suppressed.tolist()) == [0, 1, 2]
    assert pub.info["suppressed_all"] is True
    assert "does not satisfy" in pub.info["reason"]


def test_empty_release():
    schema = Schema((NumericQI("a", 0, 10),), SENS)
    rel = release_of(schema, {"a": [], "s": []})
    pub, _ = publish(rel, model("k_anonymity", k=2))
    assert len(pub) == 0 and len(pub.suppressed) == 0 and pub.n_groups == 0


def test_params_are_validated():
    with pytest.raises(ConfigError, match=r"categorical must be 'taxonomy' or 'set' \(got 'tree'\)"):
        MondrianParams(categorical="tree")
    with pytest.raises(ConfigError, match="categorical"):
        default_registry().create("anonymizer", "mondrian", {"categorical": "tree"})
    assert isinstance(default_registry().create("anonymizer", "mondrian", {"categorical": "set"}), Mondrian)


def test_prior_rows_follow_the_candidate_records_and_calls_are_batched():
    """The batch's prior rows are the prior rows of its records; one call per level and rank."""

    class Spy(PrivacyModel):
        calls = 0

        def accepts(self, batch, ctx):
            Spy.calls += 1
            assert batch.prior is not None and np.array_equal(batch.prior[:, 0], batch.sensitive)
            return batch.sizes() >= 3

    rng = np.random.default_rng(1)
    schema = Schema((NumericQI("a", 0, 1000), NumericQI("b", 0, 1000)), SENS)
    n = 500
    rel = release_of(schema, {"a": rng.integers(0, 1000, n), "b": rng.integers(0, 1000, n), "s": rng.choice(list("xyzw"), n)})
    prior = np.zeros((n, 4))
    prior[:, 0] = rel.sensitive  # a marker of the record the prior row belongs to
    pub, _ = publish(rel, Spy(), prior=prior)
    assert Spy.calls == pub.info["accepts_calls"]
    assert Spy.calls <= 1 + 2 * pub.info["levels"]
    assert pub.n_groups > 50  # many partitions, yet only a handful of calls
    assert pub.group_sizes().min() >= 3


# ---------------------------------------------------------------------------- brute-force oracle
TAX_PATHS = [
    ["a", "ab", "abcd", "*"],
    ["b", "ab", "abcd", "*"],
    ["c", "cd", "abcd", "*"],
    ["d", "cd", "abcd", "*"],
    ["e", "ef", "efg", "*"],
    ["f", "ef", "efg", "*"],
    ["g", "g_", "efg", "*"],
]


def reference_mondrian(columns: list[list], kinds: list[tuple], sensitive: list, predicate) -> list[set[int]] | None:
    """Plain-Python strict Mondrian, one partition at a time (None: the whole table fails).

    kinds[j] = ("numeric", domain_width) or ("categorical", {leaf: [leaf, parent, ..., root]})."""
    n = len(sensitive)

    def width_and_node(part, j):
        vals = [columns[j][i] for i in part]
        kind, spec = kinds[j]
        if kind == "numeric":
            return (max(vals) - min(vals)) / spec, None
        paths = spec
        height = len(next(iter(paths.values()))) - 1
        for h in range(height + 1):
            nodes = {tuple(paths[v][h:]) for v in vals}
            if len(nodes) == 1:
                node = nodes.pop()
                leaves = [v for v in paths if tuple(paths[v][h:]) == node]
                return len(leaves) / len(paths), h

    def children(part, j, level):
        kind, spec = kinds[j]
        if kind == "numeric":
            vals = sorted(columns[j][i] for i in part)
            m = vals[(len(vals) - 1) // 2]
            le = [i for i in part if columns[j][i] <= m]
            lt = [i for i in part if columns[j][i] < m]
            bal_le = min(len(le), len(part) - len(le)) if len(le) < len(part) else -1
            bal_lt = min(len(lt), len(part) - len(lt)) if len(lt) > 0 else -1
            left = le if bal_le >= bal_lt else lt
            return [left, [i for i in part if i not in left]]
        out: dict[tuple, list[int]] = {}
        for i in part:
            out.setdefault(tuple(spec[columns[j][i]][level - 1 :]), []).append(i)
        return list(out.values())

    def recurse(part):
        candidates = []
        for j in range(len(columns)):
            if len({columns[j][i] for i in part}) > 1:
                w, level = width_and_node(part, j)
                candidates.append((-w, j, level))
        for _, j, level in sorted(candidates):
            kids = children(part, j, level)
            if all(predicate([sensitive[i] for i in kid]) for kid in kids):
                return [g for kid in kids for g in recurse(kid)]
        return [set(part)]

    if not predicate(list(sensitive)):
        return None
    return recurse(list(range(n)))


@st.composite
def small_tables(draw):
    n = draw(st.integers(1, 40))
    n_num = draw(st.integers(0, 2))
    n_cat = draw(st.integers(0 if n_num else 1, 2))
    columns, qis = {}, []
    for j in range(n_num):
        hi = draw(st.sampled_from([3, 10, 100]))
        columns[f"n{j}"] = draw(st.lists(st.integers(0, hi), min_size=n, max_size=n))
        qis.append(NumericQI(f"n{j}", 0, hi))
    for j in range(n_cat):
        deep = draw(st.booleans())
        paths = TAX_PATHS if deep else [[p[0], "*"] for p in TAX_PATHS]
        columns[f"c{j}"] = draw(st.lists(st.sampled_from([p[0] for p in paths]), min_size=n, max_size=n))
        qis.append(CategoricalQI(f"c{j}", Taxonomy.from_paths(paths)))
    columns["s"] = draw(st.lists(st.sampled_from(list("xyzw")), min_size=n, max_size=n))
    return Schema(tuple(qis), SENS), columns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=small_tables(), k=st.integers(1, 5), l=st.integers(1, 3))
def test_matches_plain_python_reference(table, k, l):
    schema, columns = table
    rel = release_of(schema, columns)
    cols, kinds = [], []
    for a in schema.qi:
        cols.append(list(columns[a.name]))
        if a.kind == "numeric":
            kinds.append(("numeric", a.width))
        else:
            paths = {p[0]: p for p in (TAX_PATHS if a.taxonomy.height == 3 else [[q[0], "*"] for q in TAX_PATHS])}
            kinds.append(("categorical", paths))
    sens = list(columns["s"])

    expected = reference_mondrian(cols, kinds, sens, lambda s: len(s) >= k)
    pub, _ = publish(rel, model("k_anonymity", k=k))
    if expected is None:
        assert pub.info["suppressed_all"] and len(pub) == 0
    else:
        assert groups_of(pub) == {frozenset(g) for g in expected}

    expected = reference_mondrian(cols, kinds, sens, lambda s: len(s) >= k and len(set(s)) >= l)
    pub, _ = publish(rel, DistinctL(l, k))
    if expected is None:
        assert pub.info["suppressed_all"] and len(pub) == 0
    else:
        assert groups_of(pub) == {frozenset(g) for g in expected}


# ---------------------------------------------------------------------------- properties
def check_publication(rel: Release, pub: Publication, pm: PrivacyModel, mctx: ModelContext) -> None:
    n = len(rel)
    # every record in exactly one group, or suppressed
    published = pub.row.tolist()
    assert len(set(published)) == len(published)
    assert sorted(published + [int(np.flatnonzero(rel.respondent == r)[0]) for r in pub.suppressed]) == list(range(n))
    assert np.array_equal(pub.respondent, rel.respondent[pub.row])
    assert np.array_equal(pub.sensitive, rel.sensitive[pub.row])
    if pub.info["suppressed_all"]:
        assert len(pub) == 0
        return
    assert len(pub.suppressed) == 0
    # generalized boxes contain their records
    x = rel.qi[pub.row]
    assert np.all(pub.low[pub.group] <= x) and np.all(x <= pub.high[pub.group])
    for j, sets in pub.value_sets.items():
        assert sets[pub.group, x[:, j].astype(int)].all()
    # the declared model holds on every group
    report = pm.verify(pub, mctx)
    assert report.satisfied and report.violations == 0


@st.composite
def random_releases(draw):
    schema, columns = draw(small_tables())
    return release_of(schema, columns)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rel=random_releases(), k=st.integers(1, 6), categorical=st.sampled_from(["taxonomy", "set"]))
def test_k_anonymity_publications_hold(rel, k, categorical):
    pm = model("k_anonymity", k=k)
    pub, mctx = publish(rel, pm, categorical)
    check_publication(rel, pub, pm, mctx)
    if not pub.info["suppressed_all"]:
        assert pub.group_sizes().min() >= k
    # same input => same output (fresh instance)
    again, _ = publish(rel, pm, categorical)
    for name in ("group", "row", "low", "high", "sensitive", "suppressed"):
        assert np.array_equal(getattr(pub, name), getattr(again, name))
    for j in pub.value_sets:
        assert np.array_equal(pub.value_sets[j], again.value_sets[j])


def groups_values(rel: Release, pub: Publication) -> list[list[int]]:
    """The sensitive codes of every published group, read from the release rows (plain lists)."""
    sens = rel.sensitive.tolist()
    return [[sens[i] for i in sorted(g)] for g in groups_of(pub)]


def l_diverse(values: list[int], variant: str, l: int, c: float) -> bool:
    """The l-diversity paper's definitions (Machanavajjhala et al., TKDD 2007, §4), written out."""
    counts = sorted((values.count(v) for v in set(values)), reverse=True)  # r_1 >= r_2 >= ...
    if variant == "distinct":
        return len(counts) >= l
    if variant == "entropy":  # -sum p log p >= log l
        n = len(values)
        return -sum(r / n * math.log(r / n) for r in counts) >= math.log(l) - 1e-12
    # recursive (c, l): r_1 < c (r_l + r_{l+1} + ... + r_m); fewer than l values: the tail is 0
    return counts[0] < c * sum(counts[l - 1 :])


def t_close(values: list[int], table: list[int], t: float, k: int) -> bool:
    """|Q| >= k and EMD with equal ground distance (1/2 sum |p_i - q_i|) <= t (Li et al., ICDE 2007)."""
    emd = 0.5 * sum(abs(values.count(v) / len(values) - table.count(v) / len(table)) for v in set(table))
    return len(values) >= k and emd <= t + 1e-12


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rel=random_releases(),
    l=st.integers(1, 3),
    variant=st.sampled_from(["distinct", "entropy", "recursive"]),
    c=st.sampled_from([0.5, 1.0, 3.0]),
)
def test_l_diversity_publications_hold(rel, l, variant, c):
    # model() raises when l_diversity is not installed: the test fails, it is never skipped
    pm = model("l_diversity", l=l, variant=variant, c=c)
    pub, mctx = publish(rel, pm)
    check_publication(rel, pub, pm, mctx)
    # independently of the model's own verify: every group meets the paper's definition, and a
    # release suppressed entirely fails it as one group
    table = rel.sensitive.tolist()
    if pub.info["suppressed_all"]:
        assert not l_diverse(table, variant, l, c)
    else:
        assert all(l_diverse(values, variant, l, c) for values in groups_values(rel, pub))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rel=random_releases(), t=st.sampled_from([0.2, 0.4, 0.7]), k=st.integers(1, 3))
def test_t_closeness_publications_hold(rel, t, k):
    # model() raises when t_closeness is not installed: the test fails, it is never skipped
    pm = model("t_closeness", t=t, k=k)
    pub, mctx = publish(rel, pm)
    check_publication(rel, pub, pm, mctx)
    table = rel.sensitive.tolist()
    if pub.info["suppressed_all"]:
        assert not t_close(table, table, t, k)  # EMD 0: only the size can fail
        assert len(table) < k
    else:
        assert all(t_close(values, table, t, k) for values in groups_values(rel, pub))


def test_every_model_the_property_tests_use_is_installed():
    """The property tests above need these models: a missing or broken one is a failure."""
    for name, params in [("k_anonymity", {"k": 2}), ("l_diversity", {"l": 2}), ("t_closeness", {"t": 0.2})]:
        pm = model(name, **params)
        assert isinstance(pm, PrivacyModel) and pm.plugin_name == name


def test_adult_sample_is_k_anonymous_for_pycanon():
    """pycanon, an independent checker, reads the published table and finds k >= 5."""
    from pycanon import anonymity

    from cdpbench.datasets.adult import adult_release

    rel = adult_release(("age", "hours-per-week", "sex", "race"), "occupation", rows=3000)
    pm = model("k_anonymity", k=5)
    pub, mctx = publish(rel, pm)
    table = pub.to_frame()
    qi = ["age", "hours-per-week", "sex", "race"]
    assert anonymity.k_anonymity(table, qi) >= 5
    # and Mondrian did split: many groups, most small
    assert pub.n_groups > len(rel) / 20
    check_publication(rel, pub, pm, mctx)
