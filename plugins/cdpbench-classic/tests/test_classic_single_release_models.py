"""The single-release models the peers offer (issue #29 item 2): δ-disclosure privacy,
(α,k)-anonymity, δ-presence and k-map.

* δ-disclosure and (α,k) equal pycanon 1.3.6 (``delta_disclosure``, ``alpha_k_anonymity``) on 250
  seeded random partitions each (groups missing values, singletons, values absent from the table)
  and on Mondrian publications of Adult; pycanon is fed our groups as its only QI column, as in
  ``tests/test_pycanon_agreement.py``.
* δ-presence and k-map (not in pycanon): a hand-computed example, and a record-by-record oracle on
  random populations, releases and partitions (both categorical box readings), for the population
  counts (summed-area table and tuple matcher) and for the models' ``accepts`` and ``verify``.
* The churn data set publishes its base table as the population; an end-to-end run of Mondrian
  with each model on churn.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity

from cdpbench.data import GroupBatch, History, Publication, Release
from cdpbench.errors import CdpbenchError, ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.population import PopulationIndex, candidate_boxes
from cdpbench_classic.privacy_models.alpha_k_anonymity import AlphaKAnonymityParams
from cdpbench_classic.privacy_models.delta_disclosure import DeltaDisclosureParams
from cdpbench_classic.privacy_models.delta_presence import DeltaPresenceParams
from cdpbench_classic.privacy_models.k_map import KMapParams

N_PARTITIONS = 250  # acceptance: 200+ random partitions per model with pycanon
BLOCKS = 5


def model(name: str, **params):
    return default_registry().create("privacy_model", name, params)


# ---------------------------------------------------------------------------- builders
def sensitive_release(sensitive: list[int], m: int) -> Release:
    """A release of ``len(sensitive)`` records with one numeric QI and sensitive codes ``sensitive``
    over a domain of ``m`` values."""
    schema = Schema((NumericQI("age", 0, 1000),), Sensitive("s", tuple(f"v{i}" for i in range(m))))
    n = len(sensitive)
    frame = pd.DataFrame({"id": np.arange(n), "age": np.arange(n), "s": [f"v{i}" for i in sensitive]})
    return schema.encode(frame, 1)


def random_partition(seed: int) -> tuple[Publication, ModelContext, pd.DataFrame]:
    """A random partition of a random release, our publication of it, and pycanon's frame."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 7))
    n = int(rng.integers(2, 80))
    weights = rng.dirichlet(np.full(m, 0.7))  # skewed: some values rare or absent from the table
    sensitive = rng.choice(m, size=n, p=weights)
    release = sensitive_release(list(sensitive), m)
    n_groups = int(rng.integers(1, max(2, n // 2) + 1))
    group = rng.integers(n_groups, size=n)
    pub = Publication.from_partition(release, group)
    ctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    frame = pd.DataFrame({"group": pub.group, "s": np.asarray(release.schema.sensitive.values, dtype=object)[pub.sensitive]})
    return pub, ctx, frame


def seeds(block: int) -> range:
    per = N_PARTITIONS // BLOCKS
    return range(block * per, (block + 1) * per)


# ---------------------------------------------------------------------------- pycanon agreement
@pytest.mark.parametrize("block", range(BLOCKS))
def test_delta_disclosure_equals_pycanon_on_random_partitions(block):
    compared = 0
    for seed in seeds(block):
        pub, ctx, frame = random_partition(seed)
        ours = model("delta_disclosure").levels(pub, ctx)["delta"]
        theirs = anonymity.delta_disclosure(frame, ["group"], ["s"])
        assert ours == theirs, (seed, ours, theirs)  # the same float operations in the same order
        compared += 1
    assert compared == N_PARTITIONS // BLOCKS


@pytest.mark.parametrize("block", range(BLOCKS))
def test_alpha_k_equals_pycanon_on_random_partitions(block):
    for seed in seeds(block):
        pub, ctx, frame = random_partition(seed)
        levels = model("alpha_k_anonymity").levels(pub, ctx)
        alpha, k = anonymity.alpha_k_anonymity(frame, ["group"], ["s"])
        assert (levels["alpha"], levels["k"]) == (alpha, k), seed


def test_the_random_partitions_exercise_the_readings():
    """The 250 partitions hold groups lacking a table value (δ literal = inf, skipped by pycanon),
    tables lacking a domain value, singleton groups and groups with a value > 1/2."""
    lacking = absent_from_table = singletons = skewed = 0
    for seed in range(N_PARTITIONS):
        pub, ctx, _ = random_partition(seed)
        levels = model("delta_disclosure").levels(pub, ctx)
        lacking += math.isinf(levels["delta_literal"]) and math.isfinite(levels["delta"])
        absent_from_table += bool((ctx.table_distribution == 0).any())
        singletons += bool((pub.group_sizes() == 1).any())
        skewed += model("alpha_k_anonymity").levels(pub, ctx)["alpha"] > 0.5
    assert min(lacking, absent_from_table, singletons, skewed) >= 25, (lacking, absent_from_table, singletons, skewed)


@pytest.fixture(scope="module")
def adult_mondrian():
    """Mondrian publications of 3,000 Adult rows with δ-disclosure and (α,k) as split tests."""
    from cdpbench.datasets import adult as adult_dataset

    release = adult_dataset.adult_release(("age", "sex", "education"), "occupation", rows=3000)
    ctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    out = {}
    for name, params in [("delta_disclosure", {"delta": 2.0, "k": 5}), ("alpha_k_anonymity", {"alpha": 0.4, "k": 5})]:
        pm = model(name, **params)
        pub = default_registry().create("anonymizer", "mondrian", {}).publish(
            release, PublishContext(pm, ctx, History(), np.random.default_rng(0)))
        frame = pd.DataFrame({"group": pub.group, "occupation": np.asarray(release.schema.sensitive.values, dtype=object)[pub.sensitive]})
        out[name] = (pm, pub, ctx, frame)
    return out


def test_mondrian_publications_verify_and_equal_pycanon(adult_mondrian):
    pm, pub, ctx, frame = adult_mondrian["delta_disclosure"]
    report = pm.verify(pub, ctx)
    assert report.satisfied and pub.n_groups >= 10 and len(pub) == 3000
    assert 1.5 < report.levels["delta"] < 2.0
    assert report.levels["delta"] == anonymity.delta_disclosure(frame, ["group"], ["occupation"])
    pm, pub, ctx, frame = adult_mondrian["alpha_k_anonymity"]
    report = pm.verify(pub, ctx)
    assert report.satisfied and pub.n_groups >= 10
    assert 0.2 < report.levels["alpha"] <= 0.4 and report.levels["k"] >= 5
    assert (report.levels["alpha"], report.levels["k"]) == anonymity.alpha_k_anonymity(frame, ["group"], ["occupation"])


# ---------------------------------------------------------------------------- hand examples
def hand_sensitive_publication() -> tuple[Publication, ModelContext]:
    """Table of 8 records, values a a a a b b c c: p(.|T) = (1/2, 1/4, 1/4).
    Group 0 = {a, a, a, b}: p = (3/4, 1/4, 0); group 1 = {a, b, c, c}: p = (1/4, 1/4, 1/2)."""
    release = sensitive_release([0, 0, 0, 1, 0, 1, 2, 2], 3)
    pub = Publication.from_partition(release, np.array([0, 0, 0, 0, 1, 1, 1, 1]))
    return pub, ModelContext(release.schema, release.sensitive_distribution(), release=release)


def test_delta_disclosure_by_hand():
    pub, ctx = hand_sensitive_publication()
    # group 0: |ln((3/4)/(1/2))| = ln 1.5 = 0.405465, |ln((1/4)/(1/4))| = 0, c absent (ln 0 = -inf)
    # group 1: |ln((1/4)/(1/2))| = ln 2 = 0.693147, 0, |ln((1/2)/(1/4))| = ln 2
    levels = model("delta_disclosure").levels(pub, ctx)
    assert levels["delta"] == pytest.approx(math.log(2), rel=1e-15)
    assert levels["delta_literal"] == math.inf and levels["k"] == 4
    frame = pd.DataFrame({"group": pub.group, "s": pub.sensitive})
    assert anonymity.delta_disclosure(frame, ["group"], ["s"]) == pytest.approx(math.log(2), rel=1e-15)
    # δ = 0.7 > ln 2: both groups pass when absent values are skipped ...
    assert model("delta_disclosure", delta=0.7).verify(pub, ctx).satisfied
    # ... group 0 fails when the literal reading counts its missing c
    assert model("delta_disclosure", delta=0.7, absent="violate").verify(pub, ctx).violations == 1
    # δ = 0.5: group 1 (ln 2) fails, group 0 (ln 1.5 = 0.405) passes; δ = ln 2 itself: the bound is strict
    assert list(model("delta_disclosure", delta=0.5).accepts(pub.batch(), ctx)) == [True, False]
    assert model("delta_disclosure", delta=math.log(2)).verify(pub, ctx).violations == 1
    assert model("delta_disclosure", delta=0.7, k=5).verify(pub, ctx).violations == 2


def test_alpha_k_by_hand():
    pub, ctx = hand_sensitive_publication()
    # group 0: a 3/4, b 1/4; group 1: a 1/4, b 1/4, c 2/4 -> alpha = 3/4, k = 4
    levels = model("alpha_k_anonymity").levels(pub, ctx)
    assert levels == {"k": 4.0, "alpha": 0.75}
    assert model("alpha_k_anonymity", alpha=0.75, k=4).verify(pub, ctx).satisfied
    assert list(model("alpha_k_anonymity", alpha=0.7, k=4).accepts(pub.batch(), ctx)) == [False, True]
    assert list(model("alpha_k_anonymity", alpha=0.5, k=4).accepts(pub.batch(), ctx)) == [False, True]
    assert list(model("alpha_k_anonymity", alpha=0.49, k=4).accepts(pub.batch(), ctx)) == [False, False]
    assert model("alpha_k_anonymity", alpha=1.0, k=5).verify(pub, ctx).violations == 2


SEX = Taxonomy.flat(["F", "M"])
PEOPLE_SCHEMA = Schema((NumericQI("age", 0, 100), CategoricalQI("sex", SEX)), Sensitive("s", ("x", "y")))


def hand_population_publication(categorical: str = "taxonomy") -> tuple[Publication, ModelContext, Release]:
    """Population P of 10 people (age, sex):
        0 (20,F) 1 (22,M) 2 (25,F) 3 (27,F) 4 (30,M) 5 (35,M) 6 (40,F) 7 (45,M) 8 (50,F) 9 (60,M)
    Release T = people 0, 1, 2, 4, 6, 7; groups {0, 1, 2} and {4, 6, 7}."""
    ages = [20, 22, 25, 27, 30, 35, 40, 45, 50, 60]
    sexes = ["F", "M", "F", "F", "M", "M", "F", "M", "F", "M"]
    population = pd.DataFrame({"id": np.arange(10), "age": ages, "sex": sexes, "s": ["x"] * 10})
    rows = [0, 1, 2, 4, 6, 7]
    release = PEOPLE_SCHEMA.encode(population.iloc[rows].reset_index(drop=True), 1)
    release.population = PEOPLE_SCHEMA.encode(population, 0).qi
    pub = Publication.from_partition(release, np.array([0, 0, 0, 1, 1, 1]), categorical=categorical)
    return pub, ModelContext(release.schema, release.sensitive_distribution(), release=release), release


def test_delta_presence_and_k_map_by_hand():
    pub, ctx, release = hand_population_publication()
    # boxes: group 0 = age [20, 25] x {F, M} (the root: the group holds both sexes), group 1 = [30, 45] x {F, M}
    assert pub.low[:, 0].tolist() == [20, 30] and pub.high[:, 0].tolist() == [25, 45]
    # population inside: group 0: people 0, 1, 2 (27 is outside) -> 3; group 1: people 4, 5, 6, 7 -> 4
    # δ(E) = |E| / matches: 3/3 = 1 and 3/4 = 0.75; people 3 (27), 8 (50), 9 (60) are in no box
    levels = model("delta_presence").levels(pub, ctx)
    assert levels == {"k": 3.0, "delta_min": 0.75, "delta_max": 1.0, "uncovered": 3.0}
    assert model("k_map").levels(pub, ctx) == {"k_map": 3.0, "k": 3.0}
    # δmax = 0.8: group 0 (δ = 1) fails
    report = model("delta_presence", delta_max=0.8).verify(pub, ctx)
    assert (report.satisfied, report.violations) == (False, 1)
    # δ in [0.5, 1]: every group passes, but 3 population records are shown absent (probability 0 < 0.5)
    report = model("delta_presence", delta_min=0.5, delta_max=1.0).verify(pub, ctx)
    assert (report.satisfied, report.violations) == (False, 0)
    assert model("delta_presence", delta_min=0.0, delta_max=1.0).verify(pub, ctx).satisfied
    # k-map: k = 3 holds (3 and 4 matches), k = 4 fails for group 0
    assert model("k_map", k=3).verify(pub, ctx).satisfied
    report = model("k_map", k=4).verify(pub, ctx)
    assert (report.satisfied, report.violations) == (False, 1)
    # accepts on the same groups, given the records' QIs, judges the same boxes
    batch = GroupBatch(release.sensitive, pub.group, 2, 2, None, release.qi)
    assert list(model("k_map", k=4).accepts(batch, ctx)) == [False, True]
    assert list(model("delta_presence", delta_max=0.8).accepts(batch, ctx)) == [False, True]


def test_set_boxes_by_hand():
    """Groups {0 (20,F), 2 (25,F)} and {1 (22,M), 4 (30,M), 7 (45,M)} of the same population: group
    0's box is age [20, 25] x {F} (people 0, 2: 2 matches), group 1's [22, 45] x {M} (people 1, 4,
    5, 7: 4 matches). Each group holds one sex, so the set reading and the taxonomy reading (a
    flat taxonomy's covering node of one leaf is that leaf) publish the same boxes."""
    ages = [20, 22, 25, 27, 30, 35, 40, 45, 50, 60]
    sexes = ["F", "M", "F", "F", "M", "M", "F", "M", "F", "M"]
    population = pd.DataFrame({"id": np.arange(10), "age": ages, "sex": sexes, "s": ["x"] * 10})
    release = PEOPLE_SCHEMA.encode(population.iloc[[0, 1, 2, 4, 7]].reset_index(drop=True), 1)
    release.population = PEOPLE_SCHEMA.encode(population, 0).qi
    ctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    group = np.array([0, 1, 0, 1, 1])
    for categorical in ("set", "taxonomy"):
        pub = Publication.from_partition(release, group, categorical=categorical)
        assert model("k_map").levels(pub, ctx)["k_map"] == 2
        levels = model("delta_presence").levels(pub, ctx)
        # δ = 2/2 = 1 and 3/4 = 0.75; uncovered: 3 (27,F), 6 (40,F), 8 (50,F), 9 (60,M)
        assert (levels["delta_min"], levels["delta_max"], levels["uncovered"]) == (0.75, 1.0, 4.0)
        batch = GroupBatch(release.sensitive, group, 2, 2, None, release.qi)
        assert list(model("k_map", k=3, categorical=categorical).accepts(batch, ctx)) == [False, True]


# ---------------------------------------------------------------------------- population oracle
def random_schema(rng: np.random.Generator) -> Schema:
    """1-3 QIs: numeric ages on a coarse grid, categorical over a random two-level taxonomy."""
    qi = []
    for j in range(int(rng.integers(1, 4))):
        if rng.random() < 0.5:
            qi.append(NumericQI(f"n{j}", 0, 20))
        else:
            leaves = int(rng.integers(2, 7))
            parents = rng.integers(0, max(1, leaves // 2), size=leaves)
            parents = np.sort(parents)  # taxonomy nodes are contiguous leaf ranges
            qi.append(CategoricalQI(f"c{j}", Taxonomy.from_paths([[f"l{i}", f"p{parents[i]}", "*"] for i in range(leaves)])))
    return Schema(tuple(qi), Sensitive("s", ("x", "y", "z")))


def random_population(rng: np.random.Generator, schema: Schema, n: int) -> np.ndarray:
    cols = []
    for a in schema.qi:
        if a.kind == "numeric":
            cols.append(rng.integers(0, 21, size=n).astype(float))
        else:
            cols.append(rng.integers(0, a.taxonomy.size, size=n).astype(float))
    return np.column_stack(cols)


def loop_count(population: np.ndarray, low, high, value_sets=None) -> np.ndarray:
    """The oracle: for each box, every population record checked column by column."""
    out = []
    for g in range(len(low)):
        c = 0
        for rec in population:
            ok = True
            for j, v in enumerate(rec):
                if value_sets is not None and j in value_sets:
                    ok &= bool(value_sets[j][g, int(v)])
                else:
                    ok &= low[g][j] <= v <= high[g][j]
            c += ok
        out.append(c)
    return np.array(out, dtype=np.int64)


def loop_uncovered(population, low, high, value_sets=None) -> int:
    return sum(int(loop_count(rec[None, :], low, high, value_sets).max(initial=0) == 0) for rec in population)


@pytest.mark.parametrize("seed", range(40))
def test_population_counts_equal_a_record_loop(seed):
    rng = np.random.default_rng(seed)
    schema = random_schema(rng)
    population = random_population(rng, schema, int(rng.integers(0, 50)))
    G = int(rng.integers(1, 12))
    a = random_population(rng, schema, G)
    b = random_population(rng, schema, G)
    low, high = np.minimum(a, b), np.maximum(a, b)
    low[rng.random(G) < 0.2, 0] += 0.5  # bounds between values
    value_sets = {j: rng.random((G, schema.qi[j].taxonomy.size)) < 0.5 for j in schema.categorical}
    grid, tuples = PopulationIndex(population), PopulationIndex(population, grid_cells=0)
    assert len(population) == 0 or grid.prefix is not None
    assert tuples.prefix is None
    expected = loop_count(population, low, high)
    assert np.array_equal(grid.count_boxes(low, high), expected)
    assert np.array_equal(tuples.count_boxes(low, high), expected)
    assert grid.uncovered(low, high) == tuples.uncovered(low, high) == loop_uncovered(population, low, high)
    expected_sets = loop_count(population, low, high, value_sets)
    assert np.array_equal(grid.count_sets(low, high, value_sets), expected_sets)
    assert grid.uncovered(low, high, value_sets) == loop_uncovered(population, low, high, value_sets)
    assert grid.count_boxes(low[:0], high[:0]).shape == (0,)
    assert grid.uncovered(low[:0], high[:0]) == len(population)  # no box: every record uncovered


def test_population_counts_are_not_trivial():
    """Over the random cases of the oracle test, counts are mostly nonzero and differ between
    boxes, and value sets change them (the oracle compares real numbers)."""
    nonzero = differ = sets_differ = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        schema = random_schema(rng)
        population = random_population(rng, schema, int(rng.integers(0, 50)))
        G = int(rng.integers(1, 12))
        a, b = random_population(rng, schema, G), random_population(rng, schema, G)
        low, high = np.minimum(a, b), np.maximum(a, b)
        low[rng.random(G) < 0.2, 0] += 0.5
        value_sets = {j: rng.random((G, schema.qi[j].taxonomy.size)) < 0.5 for j in schema.categorical}
        counts = loop_count(population, low, high)
        nonzero += counts.sum() > 0
        differ += len(np.unique(counts)) > 1
        sets_differ += bool(value_sets) and not np.array_equal(counts, loop_count(population, low, high, value_sets))
    assert nonzero >= 30 and differ >= 20 and sets_differ >= 10, (nonzero, differ, sets_differ)


def covering_leaves(tax: Taxonomy, lo: int, hi: int) -> tuple[int, int]:
    """The oracle's covering node: the lowest level at which leaves lo and hi share a node."""
    for h in range(tax.height + 1):
        if tax.node_of_leaf[h, lo] == tax.node_of_leaf[h, hi]:
            node = tax.node_of_leaf[h, lo]
            leaves = np.flatnonzero(tax.node_of_leaf[h] == node)
            return int(leaves.min()), int(leaves.max())
    raise AssertionError("no covering node")


def random_case(seed: int):
    """A random population, a release drawn from it, a random partition of the release."""
    rng = np.random.default_rng(seed)
    schema = random_schema(rng)
    population = random_population(rng, schema, int(rng.integers(5, 60)))
    n = int(rng.integers(1, len(population) + 1))
    rows = np.sort(rng.choice(len(population), size=n, replace=False))
    release = Release(1, schema, rows.astype(np.int64), population[rows], rng.integers(0, 3, size=n), population=population)
    n_groups = int(rng.integers(1, n + 1))
    group = rng.integers(n_groups, size=n)
    return rng, schema, population, release, group


@pytest.mark.parametrize("categorical", ["taxonomy", "set"])
@pytest.mark.parametrize("seed", range(30))
def test_k_map_and_delta_presence_equal_the_oracle(seed, categorical):
    rng, schema, population, release, group = random_case(seed)
    pub = Publication.from_partition(release, group, categorical=categorical)
    ctx = ModelContext(schema, release.sensitive_distribution(), release=release)
    # the oracle: per group its box by a loop, its matches by a loop over the population
    sizes, matches = [], []
    for g in range(pub.n_groups):
        members = release.qi[pub.row[pub.group == g]]
        lo, hi = members.min(axis=0), members.max(axis=0)
        sets = {}
        for j in schema.categorical:
            if categorical == "taxonomy":
                lo[j], hi[j] = covering_leaves(schema.qi[j].taxonomy, int(lo[j]), int(hi[j]))
            else:
                s = np.zeros((1, schema.qi[j].taxonomy.size), dtype=bool)
                s[0, members[:, j].astype(int)] = True
                sets[j] = s
        sizes.append(len(members))
        matches.append(int(loop_count(population, [lo], [hi], sets or None)[0]))
    sizes, matches = np.array(sizes), np.array(matches)
    assert (matches >= sizes).all()  # P contains T
    k = int(rng.integers(1, 6))
    dmin, dmax = sorted(rng.uniform(0, 1, size=2))
    # accepts on the candidate groups (with their QIs) and verify on the published boxes
    batch = GroupBatch(release.sensitive[pub.row], pub.group, pub.n_groups, 3, None, release.qi[pub.row])
    kmap = model("k_map", k=k, categorical=categorical)
    assert np.array_equal(kmap.accepts(batch, ctx), matches >= k)
    report = kmap.verify(pub, ctx)
    assert report.violations == int((matches < k).sum()) and report.levels["k_map"] == matches.min()
    presence = model("delta_presence", delta_min=float(dmin), delta_max=float(dmax), categorical=categorical)
    ratio = sizes / matches
    expected = (ratio >= dmin) & (ratio <= dmax)
    assert np.array_equal(presence.accepts(batch, ctx), expected)
    report = presence.verify(pub, ctx)
    assert report.violations == int((~expected).sum())
    assert report.levels["delta_max"] == ratio.max() and report.levels["delta_min"] == ratio.min()
    uncovered = loop_uncovered(population, pub.low, pub.high, pub.value_sets if categorical == "set" else None)
    assert report.levels["uncovered"] == uncovered
    assert report.satisfied == (report.violations == 0 and not (dmin > 0 and uncovered > 0))


def test_candidate_boxes_equal_the_published_boxes():
    for seed in range(20):
        _, schema, _, release, group = random_case(seed)
        for categorical in ("taxonomy", "set"):
            pub = Publication.from_partition(release, group, categorical=categorical)
            low, high, sets = candidate_boxes(release.qi[pub.row], pub.group, pub.n_groups, schema, categorical)
            if categorical == "taxonomy":
                assert np.array_equal(low, pub.low) and np.array_equal(high, pub.high) and sets == {}
            else:
                numeric = [j for j in range(len(schema.qi)) if j not in schema.categorical]
                assert np.array_equal(low[:, numeric], pub.low[:, numeric])
                assert all(np.array_equal(sets[j], pub.value_sets[j]) for j in schema.categorical)


# ---------------------------------------------------------------------------- accepts vs verify
@pytest.mark.parametrize("name, params", [
    ("delta_disclosure", {"delta": 0.9}),
    ("delta_disclosure", {"delta": 1.5, "absent": "violate", "k": 2}),
    ("alpha_k_anonymity", {"alpha": 0.5, "k": 2}),
    ("alpha_k_anonymity", {"alpha": 0.67, "k": 1}),
])
def test_accepts_agrees_with_a_per_group_loop_and_verify(name, params):
    judged = {True: 0, False: 0}
    for seed in range(60):
        pub, ctx, _ = random_partition(seed)
        pm = model(name, **params)
        ok = pm.accepts(pub.batch(), ctx)
        q = ctx.table_distribution
        for g in range(pub.n_groups):
            values = pub.sensitive[pub.group == g]
            size = len(values)
            freq = np.bincount(values, minlength=len(q)) / size
            if name == "alpha_k_anonymity":
                expected = size >= params["k"] and freq.max() <= params["alpha"]
            else:
                expected = size >= params.get("k", 1)
                for s in range(len(q)):
                    if freq[s] > 0:
                        expected &= (math.inf if q[s] == 0 else abs(math.log(freq[s] / q[s]))) < params["delta"]
                    elif params.get("absent") == "violate" and q[s] > 0:
                        expected = False
            assert ok[g] == expected, (seed, g)
            judged[bool(expected)] += 1
        report = pm.verify(pub, ctx)
        assert report.violations == int((~ok).sum()) and report.satisfied == bool(ok.all())
    assert min(judged.values()) >= 40, judged  # both answers judged often


# ---------------------------------------------------------------------------- parameters and errors
@pytest.mark.parametrize("params_cls, kwargs, message", [
    (DeltaDisclosureParams, {"delta": 0}, "delta must be a number > 0 (got 0)"),
    (DeltaDisclosureParams, {"delta": float("inf")}, "delta must be a number > 0 (got inf)"),
    (DeltaDisclosureParams, {"absent": "ignore"}, "absent must be one of 'skip', 'violate' (got 'ignore')"),
    (DeltaDisclosureParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
    (AlphaKAnonymityParams, {"alpha": 0}, "alpha must be a number in (0, 1] (got 0)"),
    (AlphaKAnonymityParams, {"alpha": 1.5}, "alpha must be a number in (0, 1] (got 1.5)"),
    (AlphaKAnonymityParams, {"k": 2.0}, "k must be an integer >= 1 (got 2.0)"),
    (AlphaKAnonymityParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
    (DeltaPresenceParams, {"delta_min": -0.1}, "delta_min must be a number in [0, 1] (got -0.1)"),
    (DeltaPresenceParams, {"delta_max": 1.5}, "delta_max must be a number in [0, 1] (got 1.5)"),
    (DeltaPresenceParams, {"delta_min": 0.6, "delta_max": 0.5}, "delta_min must be <= delta_max (0.5) (got 0.6)"),
    (DeltaPresenceParams, {"categorical": "node"}, "categorical must be one of 'taxonomy', 'set' (got 'node')"),
    (KMapParams, {"k": 0}, "k must be an integer >= 1 (got 0)"),
    (KMapParams, {"k": True}, "k must be an integer >= 1 (got True)"),
])
def test_invalid_parameters_raise_one_line_config_errors(params_cls, kwargs, message):
    with pytest.raises(ConfigError) as err:
        params_cls(**kwargs)
    assert str(err.value) == message


def test_invalid_parameter_through_the_registry_names_the_config_key():
    with pytest.raises(ConfigError, match=r"^privacy_model\.alpha must be a number in \(0, 1\] \(got 2\.0\)$"):
        default_registry().create("privacy_model", "alpha_k_anonymity", {"alpha": 2.0})


@pytest.mark.parametrize("name", ["delta_presence", "k_map"])
def test_a_release_without_population_is_a_one_line_error_naming_the_dataset(name):
    pub, ctx, release = hand_population_publication()
    release.population = None
    with pytest.raises(ConfigError) as err:
        model(name).verify(pub, ctx)
    assert str(err.value).startswith(f"privacy_model {name} needs the public population table")
    assert "dataset" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="dataset"):
        model(name).accepts(GroupBatch(release.sensitive, pub.group, 2, 2, None, release.qi), ctx)


@pytest.mark.parametrize("name", ["delta_presence", "k_map"])
def test_a_batch_without_qis_and_a_bucketized_publication_are_refused(name):
    pub, ctx, release = hand_population_publication()
    with pytest.raises(ConfigError, match=r"needs the candidate groups' exact QIs"):
        model(name).accepts(GroupBatch(release.sensitive, pub.group, 2, 2), ctx)
    bucketized = Publication.from_partition(release, np.array([0, 0, 0, 1, 1, 1]), bucketized=True)
    with pytest.raises(CdpbenchError, match="bucketized publication"):
        model(name).verify(bucketized, ctx)


# ---------------------------------------------------------------------------- churn and end to end
@pytest.mark.parametrize("base", ["adult", "synthetic"])
def test_churn_publishes_its_base_table_as_the_population(base):
    from cdpbench.datasets.churn import Churn, ChurnParams

    ds = Churn(ChurnParams(base=base, releases=3, initial=300, deletions=30, insertions=40, updates=20, reinsertions=10,
                           qi=["age", "sex", "zip"]))
    releases = list(ds.releases(np.random.default_rng(7)))
    population = releases[0].population
    assert population.shape == ((30162 if base == "adult" else 300 + 2 * 40), 3)
    for release in releases:
        assert release.population is population  # one array for the whole run
        assert np.array_equal(population[release.respondent], release.qi)  # respondent id = base row
    # the churn releases themselves are unchanged by the population: the same as churn_process's
    from cdpbench.datasets.adult import adult_schema, load_adult
    from cdpbench.datasets.churn import churn_process

    if base == "adult":
        again = list(churn_process(load_adult(with_zip=True), adult_schema(["age", "sex", "zip"], "occupation"), initial=300,
                                   deletions=30, insertions=40, updates=20, reinsertions=10, releases=3,
                                   rng=np.random.default_rng(7)))
        for a, b in zip(releases, again):
            assert np.array_equal(a.respondent, b.respondent) and np.array_equal(a.qi, b.qi)
            assert np.array_equal(a.sensitive, b.sensitive) and b.population is None


def run_churn(*overrides):
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs

    repo = __import__("pathlib").Path(__file__).resolve().parents[3]
    register_configs()
    with initialize_config_dir(config_dir=str(repo / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[
            "dataset=churn", "dataset.releases=2", "dataset.initial=1500", "dataset.deletions=100",
            "dataset.insertions=100", "dataset.updates=50", "dataset.reinsertions=0", "anonymizer=mondrian",
            "attacker=none", "progress=false", "tracking.enabled=false", "metrics.kl_divergence.enabled=false",
            "metrics.query_error.enabled=false", "metrics.record_linkage.enabled=false", "metrics.belief.enabled=false",
            *overrides])
    return runner.run_releases(cfg, runner.build(cfg), progress=False)


@pytest.mark.parametrize("overrides, level, low, high", [
    (["privacy_model=k_map", "privacy_model.k=20"], "level.k_map", 20, 30162),
    (["privacy_model=delta_presence", "privacy_model.delta_max=0.2"], "level.delta_max", 0.0, 0.2),
    (["privacy_model=delta_disclosure", "privacy_model.delta=2.0", "privacy_model.k=5"], "level.delta", 0.5, 2.0),
    (["privacy_model=alpha_k_anonymity", "privacy_model.alpha=0.5", "privacy_model.k=5"], "level.alpha", 0.1, 0.5),
])
def test_mondrian_on_churn_with_each_model_verifies_clean(overrides, level, low, high):
    table = run_churn(*overrides)
    assert len(table) == 2
    assert (table["violations"] == 0).all() and (table["satisfied"] == 1).all()
    assert ((table[level] >= low) & (table[level] <= high)).all(), table[level]


@pytest.mark.parametrize("name, params", [("k_map", {"k": 6}), ("delta_presence", {"delta_max": 0.95})])
def test_partitioned_mondrian_tasks_use_the_prepared_population(name, params):
    """A task of the partitioned Mondrian judges its groups with a model context holding no
    release; the population indexed by ``prepare`` serves it, and with exact cuts the publication
    is Mondrian's, group for group."""
    from cdpbench.datasets.churn import Churn, ChurnParams

    ds = Churn(ChurnParams(base="synthetic", releases=3, initial=2000, deletions=200, insertions=500, updates=0,
                           reinsertions=0))
    release = list(ds.releases(np.random.default_rng(3)))[-1]  # 2,600 records of a 3,000-row population
    ctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    pm = model(name, **params)
    pm.prepare(release, ctx)
    publish = {}
    for anonymizer, anonymizer_params in [("mondrian", {}), ("partitioned_mondrian", {"partitions": 4})]:
        an = default_registry().create("anonymizer", anonymizer, anonymizer_params)
        publish[anonymizer] = an.publish(release, PublishContext(pm, ctx, History(), np.random.default_rng(0)))
    single, parted = publish["mondrian"], publish["partitioned_mondrian"]
    assert parted.info["tasks"] >= 2 and single.n_groups >= 20
    assert np.array_equal(single.group, parted.group) and np.array_equal(single.low, parted.low)
    report = pm.verify(parted, ctx)
    assert report.satisfied and report.violations == 0
    # without prepare, a context without a release has no population to read
    with pytest.raises(ConfigError, match="dataset"):
        model(name, **params).accepts(GroupBatch(release.sensitive, np.zeros(len(release), np.int64), 1, 14, None, release.qi),
                                      ModelContext(release.schema, release.sensitive_distribution()))


@pytest.mark.parametrize("name", ["delta_presence", "k_map"])
def test_a_dataset_without_population_is_refused_when_the_run_is_built(name):
    """Before any run is created (``runner.build``, which the CLI calls before MLflow): bkseq
    publishes no population; churn and adult_sequential declare that they do."""
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs

    register_configs()
    conf = str(Path(__file__).resolve().parents[3] / "conf")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose("config", overrides=["dataset=bkseq", f"privacy_model={name}"])
    with pytest.raises(ConfigError) as err:
        runner.build(cfg)
    assert str(err.value) == (f"privacy_model {name!r} needs the public population table (Release.population), which "
                              "dataset 'bkseq' does not publish; datasets that do: adult_sequential, churn")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        runner.build(compose("config", overrides=["dataset=churn", f"privacy_model={name}"]))
