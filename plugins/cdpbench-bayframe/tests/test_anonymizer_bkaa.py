"""The bkaa anonymizer (BayFrame Algorithm 1): the NPN order by hand and against the naive O(n²)
definition (random data full of ties), a hand-checked grouping where a leftover skips the nearest
group that would break β-likeness or is suppressed when the JSD forbids every group, and
properties on random releases — every group has at least k records and verifies, merging keeps
groups valid, counts add up, the window never changes the result, any privacy model works. A
100,000-record run is timed (printed, not asserted)."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from cdpbench.data import History, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_bayframe.anonymizers.bkaa import BKAA, BKAAParams, greedy_partition, npn_coordinates, npn_order
from cdpbench_bayframe.privacy_models.j_similarity import JSimilarity, JSimilarityParams


def naive_npn(points: np.ndarray) -> np.ndarray:
    """The O(n²) definition: farthest from the centroid first, then the nearest remaining record to
    the previous one; ties (equal squared Euclidean distances) to the lowest index."""
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    current = int(np.argmax(((points - points.mean(axis=0)) ** 2).sum(axis=1)))
    order, left = [current], np.ones(n, dtype=bool)
    left[current] = False
    for _ in range(n - 1):
        d = ((points - points[current]) ** 2).sum(axis=1)
        d[~left] = np.inf
        current = int(np.argmin(d))
        order.append(current)
        left[current] = False
    return np.asarray(order, dtype=np.int64)


def release_of(schema: Schema, rows: list[tuple]) -> Release:
    cols = ["id", *schema.qi_names, schema.sensitive.name]
    return schema.encode(pd.DataFrame([(i, *r) for i, r in enumerate(rows)], columns=cols), 1)


def publish(release: Release, model, prior: np.ndarray | None = None, **params):
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0))
    return BKAA(BKAAParams(**params)).publish(release, ctx), mctx


EDU = Taxonomy.from_paths([[f"e{i}", f"g{i // 4}", "*"] for i in range(16)])


def random_release(n: int, seed: int, m: int = 6, alpha: float = 2.0) -> tuple[Release, np.ndarray]:
    """Age, sex, education (a 16-leaf taxonomy) and a continuous weight; Dirichlet beliefs."""
    rng = np.random.default_rng(seed)
    schema = Schema(
        (
            NumericQI("age", 17, 90),
            CategoricalQI("sex", Taxonomy.flat(["F", "M"])),
            CategoricalQI("education", EDU),
            NumericQI("weight", 40, 120),
        ),
        Sensitive("s", tuple(f"s{i}" for i in range(m))),
    )
    qi = np.column_stack(
        [rng.integers(17, 91, n), rng.integers(0, 2, n), rng.integers(0, 16, n), np.round(rng.uniform(40, 120, n), 1)]
    ).astype(float)
    sensitive = rng.choice(m, n, p=rng.dirichlet(np.full(m, 3.0)))
    return Release(1, schema, np.arange(n, dtype=np.int64) + 1000, qi, sensitive), rng.dirichlet(np.full(m, alpha), size=n)


# ---------------------------------------------------------------------------- NPN order
def test_npn_coordinates_are_normalized():
    schema = Schema(
        (NumericQI("age", 0, 100), CategoricalQI("sex", Taxonomy.flat(["F", "M"])), CategoricalQI("e", EDU), NumericQI("c", 0, 9)),
        Sensitive("s", ("a",)),
    )
    release = release_of(schema, [(20, "F", "e0", 5, "a"), (30, "M", "e15", 5, "a"), (25, "M", "e3", 5, "a")])
    # age min-max over the release (20..30), not the domain; leaf codes / (L - 1); a constant column is 0
    assert npn_coordinates(release).tolist() == [[0, 0, 0, 0], [1, 1, 1, 0], [0.5, 1, 0.2, 0]]


def test_npn_order_by_hand_with_ties():
    # centroid (0, 0): (5,0) and (-5,0) tie as farthest -> row 3; nearest to it (0,0), row 2; from
    # there (0,1) and (0,-1) tie -> row 0; then row 1 (distance 2), then row 4
    points = np.array([[0, 1], [0, -1], [0, 0], [5, 0], [-5, 0]], dtype=float)
    assert npn_order(points).tolist() == [3, 2, 0, 1, 4]
    # duplicates are visited together, in row order: 1-D points 2, 0, 4, 2, 10 (centroid 3.6)
    assert npn_order(np.array([[2.0], [0], [4], [2], [10]])).tolist() == [4, 2, 0, 3, 1]
    assert npn_order(np.zeros((4, 2))).tolist() == [0, 1, 2, 3]
    assert npn_order(np.zeros((0, 2))).tolist() == [] and npn_order(np.ones((1, 3))).tolist() == [0]


def test_npn_order_equals_the_naive_definition_on_random_data_with_many_ties():
    rng = np.random.default_rng(11)
    for case in range(120):
        n = int(rng.integers(1, 400)) if case < 100 else int(rng.integers(1000, 2500))
        d = int(rng.integers(1, 4))
        kind = case % 3
        if kind == 0:  # a coarse grid: duplicates and equal distances everywhere (exact dyadic floats)
            points = rng.integers(0, int(rng.integers(1, 9)), (n, d)) / 8.0
        elif kind == 1:  # a finer grid
            points = rng.integers(0, 33, (n, d)) / 32.0
        else:  # continuous
            points = rng.random((n, d))
        assert np.array_equal(npn_order(points), naive_npn(points)), (case, n, d, kind)


def test_npn_order_of_a_release_equals_the_naive_order_of_its_coordinates():
    release, _ = random_release(700, seed=5)
    points = npn_coordinates(release)
    assert np.array_equal(npn_order(points), naive_npn(points))


# ---------------------------------------------------------------------------- a hand-checked run
# One numeric QI x; the NPN order runs from the farthest point (30) down: 30, 21, 20, 11, 10, 1, 0.
HAND_X = [30, 21, 20, 11, 10, 1, 0]
HAND_S = ["c", "b", "b", "c", "a", "b", "a"]  # table P = (2/7, 3/7, 2/7)
X_ONLY = Schema((NumericQI("x", 0, 100),), Sensitive("s", ("a", "b", "c")))


def hand_groups(pub) -> tuple[list[set[int]], set[int]]:
    x = dict(enumerate(HAND_X))
    groups = [set() for _ in range(pub.n_groups)]
    for g, rid in zip(pub.group, pub.respondent):
        groups[g].add(x[int(rid)])
    return groups, {x[int(r)] for r in pub.suppressed}


def test_hand_checked_grouping_and_leftover_placement():
    # k = 2, beta = 1, uniform beliefs except the last record's (a point mass on a).
    #   {30:c, 21:b}: gains c (1/2 - 2/7)/(2/7) = 3/4, b 1/6 -> group 0; likewise {20:b, 11:c} ->
    #   group 1 and {10:a, 1:b} -> group 2; {0:a} alone is left over.
    #   Nearest centroid to 0 is group 2 (5.5), but {10:a, 1:b, 0:a} has gain of a
    #   (2/3 - 2/7)/(2/7) = 4/3 > 1; next is group 1 (15.5): {b, c, a} has gains 1/6 -> merged there.
    #   JSD of (u, u, e_a) = H(5/9, 2/9, 2/9) - (2/3) log2 3 = 0.379 bits.
    release = release_of(X_ONLY, list(zip(HAND_X, HAND_S)))
    u = np.full(3, 1 / 3)
    prior = np.array([u, u, u, u, u, u, [1.0, 0, 0]])
    pub, mctx = publish(release, JSimilarity(JSimilarityParams(k=2, j=0.5, beta=1.0)), prior)
    assert hand_groups(pub) == ([{30, 21}, {20, 11, 0}, {10, 1}], set())
    assert pub.low[:, 0].tolist() == [21, 0, 1] and pub.high[:, 0].tolist() == [30, 20, 10]
    assert {k: pub.info[k] for k in ("n_groups", "leftovers", "merged", "suppressed")} == {
        "n_groups": 3, "leftovers": 1, "merged": 1, "suppressed": 0
    }
    model = JSimilarity(JSimilarityParams(k=2, j=0.5, beta=1.0))
    assert model.verify(pub, mctx).satisfied
    # j = 0.3 < 0.379: no group takes the leftover -> suppressed
    pub, _ = publish(release, JSimilarity(JSimilarityParams(k=2, j=0.3, beta=1.0)), prior)
    assert hand_groups(pub) == ([{30, 21}, {20, 11}, {10, 1}], {0})
    assert pub.info["merged"] == 0 and pub.info["suppressed"] == 1
    # beta = 4/3 lets the nearest group take it
    pub, _ = publish(release, JSimilarity(JSimilarityParams(k=2, j=0.5, beta=4 / 3)), prior)
    assert hand_groups(pub) == ([{30, 21}, {20, 11}, {10, 1, 0}], set())
    # leftovers="suppress" (the paper's step 4 switched off)
    pub, _ = publish(release, JSimilarity(JSimilarityParams(k=2, j=0.5, beta=1.0)), prior, leftovers="suppress")
    assert hand_groups(pub) == ([{30, 21}, {20, 11}, {10, 1}], {0})


def test_a_leftover_goes_to_the_nearest_centroid_and_on_ties_to_the_lowest_group():
    # greedy_partition on a given order with a size-only predicate (k = 2): groups {0, 1}, {2, 3};
    # the leftover 4 at (1/2, 1/2) is equally near both centroids (1/8, 0) and (7/8, 0)
    points = np.array([[0, 0], [0.25, 0], [0.75, 0], [1, 0], [0.5, 0.5]])

    def pairs(rows, segment, n_groups):
        return np.bincount(segment, minlength=n_groups) >= 2

    group, stats = greedy_partition(np.array([0, 1, 2, 3, 4]), pairs, points)
    assert group.tolist() == [0, 0, 1, 1, 0] and stats["merged"] == 1
    group, _ = greedy_partition(np.array([3, 2, 1, 0, 4]), pairs, points)  # {3, 2} is group 0 now
    assert group.tolist() == [1, 1, 0, 0, 0]
    # sequential semantics: with k = 3, groups {0, 1, 2} (centroid 0.1) and {3, 4, 5} (0.9); leftover
    # 6 at 0.3 joins the first, whose centroid moves to 0.15; leftover 7 at 0.52 is then nearer to it
    # (0.37) than to the second (0.38), though nearer the second (0.38 < 0.42) without leftover 6
    points = np.array([[0.0], [0.1], [0.2], [1.0], [0.9], [0.8], [0.3], [0.52]])

    def triples(rows, segment, n_groups):
        return np.bincount(segment, minlength=n_groups) >= 3

    group, stats = greedy_partition(np.arange(8), triples, points)
    assert group.tolist() == [0, 0, 0, 1, 1, 1, 0, 0]
    assert (stats["n_groups"], stats["leftovers"], stats["merged"], stats["suppressed"]) == (2, 2, 2, 0)
    group, _ = greedy_partition(np.arange(7), triples, np.delete(points, 6, axis=0))
    assert group.tolist() == [0, 0, 0, 1, 1, 1, 1]
    # the nearest group that refuses the leftover is skipped; none accepting: suppressed

    def not_group_0(rows, segment, n_groups):  # at least 3 records, none of rows 0..2
        return triples(rows, segment, n_groups) & (np.bincount(segment, weights=(rows < 3), minlength=n_groups) == 0)

    group, stats = greedy_partition(np.arange(8), not_group_0, points)  # the scan is stuck at row 0
    assert group.tolist() == [-1] * 8 and stats["leftovers"] == 8 and stats["suppressed"] == 8
    # order 3, 4, 5, 6, 0, 1, 2, 7: {3, 4, 5} is group 0; no group from row 6 on holds none of rows
    # 0..2, so 6, 0, 1, 2, 7 are left over; only 6 and 7 may join {3, 4, 5}
    group, stats = greedy_partition(np.array([3, 4, 5, 6, 0, 1, 2, 7]), not_group_0, points)
    assert group.tolist() == [-1, -1, -1, 0, 0, 0, 0, 0]
    assert (stats["n_groups"], stats["leftovers"], stats["merged"], stats["suppressed"]) == (1, 5, 2, 3)


# ---------------------------------------------------------------------------- random releases
@pytest.mark.parametrize("seed", range(6))
def test_every_group_has_k_records_and_verifies(seed):
    release, prior = random_release(int(np.random.default_rng(seed).integers(50, 400)), seed)
    params = JSimilarityParams(k=int(2 + seed % 4), j=0.5, beta=float(3 + seed))
    model = JSimilarity(params)
    pub, mctx = publish(release, model, prior)
    assert pub.n_groups > 0
    assert pub.group_sizes().min() >= params.k
    report = model.verify(pub, mctx)
    assert report.satisfied, report
    assert report.levels["k"] >= params.k and report.levels["jsd"] <= params.j + 1e-12 and report.levels["beta"] <= params.beta + 1e-12
    # every record is published once or suppressed; the counts add up
    assert len(pub) + len(pub.suppressed) == len(release)
    assert sorted(pub.respondent.tolist() + pub.suppressed.tolist()) == release.respondent.tolist()
    info = pub.info
    assert info["n_groups"] == pub.n_groups and info["suppressed"] == len(pub.suppressed)
    assert info["leftovers"] == info["merged"] + info["suppressed"]
    assert info["anonymizer"] == "bkaa" and info["accepts_calls"] >= pub.n_groups


@pytest.mark.parametrize("seed", range(4))
def test_groups_are_runs_of_the_npn_order_and_merging_keeps_them_valid(seed):
    # Dirichlet(1) beliefs and a strict J: the scan gets stuck early (the paper never abandons Q)
    # and leaves hundreds of leftovers, some merged, some suppressed
    release, prior = random_release(300, 100 + seed, m=4, alpha=1.0)
    model = JSimilarity(JSimilarityParams(k=3, j=0.3, beta=3.0))
    suppressed, _ = publish(release, model, prior, leftovers="suppress")
    merged, mctx = publish(release, model, prior, leftovers="merge")
    order = npn_order(npn_coordinates(release))
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    # without merging, each group is a run of consecutive records of the order, in creation order
    runs = position[suppressed.row]
    for g in range(suppressed.n_groups):
        p = np.sort(runs[suppressed.group == g])
        assert np.array_equal(p, np.arange(p[0], p[0] + len(p)))
    firsts = [runs[suppressed.group == g].min() for g in range(suppressed.n_groups)]
    assert firsts == sorted(firsts)
    # merging adds leftovers to those groups and never breaks one
    assert merged.n_groups == suppressed.n_groups > 0
    assert merged.info["merged"] > 0 and len(merged.suppressed) > 0
    assert model.verify(merged, mctx).satisfied
    assert len(merged.suppressed) == suppressed.info["leftovers"] - merged.info["merged"]
    assert len(merged.suppressed) <= len(suppressed.suppressed)
    assert set(merged.suppressed.tolist()) <= set(suppressed.suppressed.tolist())
    left = release.respondent[order[len(order) - suppressed.info["leftovers"]:]]
    assert set(suppressed.suppressed.tolist()) == set(left.tolist())


def test_the_window_never_changes_the_result():
    for seed in range(4):
        release, prior = random_release(250, 200 + seed, m=4, alpha=2.0)
        model = JSimilarity(JSimilarityParams(k=2 + seed, j=0.3, beta=4.0))
        pubs = [publish(release, model, prior, window=w)[0] for w in (1, 2, 3, 8, 64)]
        for pub in pubs[1:]:
            assert np.array_equal(pub.group, pubs[0].group) and np.array_equal(pub.row, pubs[0].row)
            assert np.array_equal(pub.suppressed, pubs[0].suppressed)
        assert pubs[0].n_groups > 5
        assert pubs[0].info["accepts_calls"] >= pubs[-1].info["accepts_calls"]  # a small window asks more often


def test_any_privacy_model_works():
    release, _ = random_release(103, seed=9)
    k4 = default_registry().create("privacy_model", "k_anonymity", {"k": 4})
    pub, mctx = publish(release, k4)
    # k-anonymity closes a group at exactly 4 records; the 3 leftovers are merged (any group fits)
    assert pub.n_groups == 25 and len(pub.suppressed) == 0
    assert pub.info["leftovers"] == pub.info["merged"] == 3
    sizes = pub.group_sizes()
    assert sizes.min() == 4 and sizes.sum() == 103 and (sizes > 4).sum() <= 3
    assert k4.verify(pub, mctx).satisfied
    pub, _ = publish(release, k4, leftovers="suppress", categorical="set")
    assert len(pub.suppressed) == 3 and pub.info["merged"] == 0


def test_empty_and_too_small_releases():
    release, prior = random_release(5, seed=1)
    pub, _ = publish(release, JSimilarity(JSimilarityParams(k=8)), prior)
    assert pub.n_groups == 0 and len(pub.suppressed) == 5 and pub.info["leftovers"] == 5
    empty = release.subset(np.zeros(5, dtype=bool))
    pub, _ = publish(empty, JSimilarity(), prior[:0])
    assert pub.n_groups == 0 and len(pub) == 0


def test_parameters_are_checked():
    with pytest.raises(ConfigError, match=r"^leftovers must be 'merge' or 'suppress' \(got 'drop'\)$"):
        BKAAParams(leftovers="drop")
    with pytest.raises(ConfigError, match=r"^categorical must be 'taxonomy' or 'set'"):
        BKAAParams(categorical="node")
    with pytest.raises(ConfigError, match=r"^window must be an integer >= 1 \(got 0\)$"):
        BKAAParams(window=0)
    assert BKAA.needs_prior is False and JSimilarity.needs_prior is True


# ---------------------------------------------------------------------------- size
def test_a_5000_record_release_verifies_and_accounts_for_every_record():
    """A release of bkseq's size (timings: benchmarks/bench_bayframe.py, not here)."""
    release, prior = random_release(5_000, seed=42, m=10)
    model = JSimilarity()
    pub, mctx = publish(release, model, prior)
    assert model.verify(pub, mctx).satisfied
    assert len(pub) + len(pub.suppressed) == len(release)
    assert np.array_equal(np.sort(np.concatenate([pub.respondent, pub.suppressed])), np.sort(release.respondent))
    assert pub.group_sizes().min() >= model.params.k
