"""The core metrics (src/cdpbench/metrics): hand-computed values on tiny tables, brute-force
oracles and range properties on random releases and partitions."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.metrics import _regions
from cdpbench.metrics.belief import BeliefMetrics
from cdpbench.metrics.kl import KLDivergence, kl_divergence
from cdpbench.metrics.linkage import RecordLinkage, linkage_probabilities
from cdpbench.metrics.query import (
    ANY_VALUE,
    CountQueries,
    QueryError,
    QueryErrorParams,
    query_answers,
    random_queries,
    relative_errors,
)
from cdpbench.metrics.utility import UtilityMetrics, UtilityParams, gcp, ncp
from cdpbench.plugin import AttackResult, MetricContext
from cdpbench.registry import Registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

# leaves coded nurse 0, doctor 1, clerk 2, manager 3; nodes medical = {0,1}, office = {2,3}
JOBS = Taxonomy.from_paths(
    [["nurse", "medical", "*"], ["doctor", "medical", "*"], ["clerk", "office", "*"], ["manager", "office", "*"]]
)
DISEASE = Sensitive("disease", ("flu", "hiv", "cancer"))
SCHEMA = Schema((NumericQI("age", 20, 40), CategoricalQI("job", JOBS)), DISEASE)

# id, age, job, disease
TABLE = [
    (1, 20, "nurse", "flu"),
    (2, 24, "doctor", "hiv"),
    (3, 30, "clerk", "flu"),
    (4, 34, "manager", "cancer"),
    (5, 40, "nurse", "flu"),
    (6, 22, "clerk", "hiv"),
]
# groups A = {1, 2}: age [20, 24], job medical; B = {3, 4, 6}: age [22, 34], job office; 5 suppressed
AB = [0, 0, 1, 1, -1, 1]


def release_of(rows, schema=SCHEMA):
    cols = [schema.respondent, *schema.qi_names, schema.sensitive.name]
    return schema.encode(pd.DataFrame(rows, columns=cols), t=1)


def ctx_of(release, publication, attacks=None, seed=0):
    return MetricContext(release, publication, attacks or {}, None, np.random.default_rng(seed))


def with_counterfeits(pub: Publication, groups, sensitive, counterfeit: bool = True) -> Publication:
    """Append counterfeit tuples (respondent -1) to the given groups; in a bucketized publication
    each gets its group's lower corner as QI point. ``counterfeit=False`` appends ownerless copies
    instead (real tuples published again without their owner: respondent and row -1, as
    slicedBucket's duplicates)."""
    groups = np.asarray(groups, dtype=np.int64)
    k = len(groups)
    return dataclasses.replace(
        pub,
        group=np.concatenate([pub.group, groups]),
        sensitive=np.concatenate([pub.sensitive, np.asarray(sensitive, dtype=np.int64)]),
        respondent=np.concatenate([pub.respondent, np.full(k, -1)]),
        counterfeit=np.concatenate([pub.counterfeit, np.full(k, counterfeit)]),
        row=np.concatenate([pub.row, np.full(k, -1)]),
        qi=None if pub.qi is None else np.vstack([pub.qi, pub.low[groups]]),
    )


@pytest.fixture
def table():
    return release_of(TABLE)


# ============================================================================ utility
@pytest.mark.parametrize("ncp_range", ["data", "domain"])
def test_utility_hand_computed(table, ncp_range):
    """TABLE's ages span the whole domain [20, 40]: both NCP ranges are 20."""
    pub = Publication.from_partition(table, np.array(AB))
    # A: age 4/20, job 2/4 -> NCP 0.35; B: age 12/20, job 2/4 -> NCP 0.55
    np.testing.assert_allclose(ncp(pub, table, ncp_range), [0.35, 0.35, 0.55, 0.55, 0.55])
    out = UtilityMetrics(UtilityParams(ncp_range=ncp_range)).compute(ctx_of(table, pub))
    assert out["gcp"] == pytest.approx(2 * 0.35 + 3 * 0.55)
    assert out["gcp_norm"] == pytest.approx((2.35 + 1) / 6)
    assert out["discernibility"] == 2**2 + 3**2 + 1 * 6
    assert out["discernibility_norm"] == pytest.approx(19 / 36)
    assert out["suppressed"] == 1 and out["suppressed_fraction"] == pytest.approx(1 / 6)
    assert out["counterfeits"] == 0 and out["groups"] == 2
    assert out["group_size_min"] == 2 and out["group_size_mean"] == 2.5
    assert gcp(pub, table, ncp_range) == (pytest.approx(2.35), pytest.approx(3.35 / 6))


@pytest.mark.parametrize("ncp_range", ["data", "domain"])
def test_utility_value_set_versus_taxonomy_node(table, ncp_range):
    # groups {1,3}, {2,4}, {5,6}: each mixes the two subtrees
    g = np.array([0, 1, 0, 1, 2, 2])
    node = Publication.from_partition(table, g, categorical="taxonomy")
    vset = Publication.from_partition(table, g, categorical="set")
    metric = UtilityMetrics(UtilityParams(ncp_range=ncp_range))
    # taxonomy: job -> root (4/4); value set: 2 of 4 leaves
    np.testing.assert_allclose(ncp(node, table, ncp_range), [0.75, 0.75, 0.75, 0.75, 0.95, 0.95])
    np.testing.assert_allclose(ncp(vset, table, ncp_range), [0.5, 0.5, 0.5, 0.5, 0.7, 0.7])
    assert metric.compute(ctx_of(table, node))["gcp"] == pytest.approx(4.9)
    assert metric.compute(ctx_of(table, vset))["gcp"] == pytest.approx(3.4)
    # a group of one job value costs nothing on that QI: {1, 5} are both nurses
    single = Publication.from_partition(table, np.array([0, -1, -1, -1, 0, -1]))
    np.testing.assert_allclose(ncp(single, table, ncp_range), [0.5, 0.5])
    assert gcp(single, table, ncp_range) == (pytest.approx(1.0), pytest.approx((1.0 + 4) / 6))


WIDE = Schema((NumericQI("age", 0, 100), CategoricalQI("job", JOBS)), DISEASE)
# ages 20..70 in a domain [0, 100]; r6 (the oldest) is suppressed but still spans the data range
WIDE_TABLE = [
    (1, 20, "nurse", "flu"),
    (2, 30, "doctor", "hiv"),
    (3, 40, "clerk", "flu"),
    (4, 60, "manager", "cancer"),
    (5, 50, "clerk", "hiv"),
    (6, 70, "nurse", "flu"),
]


def test_ncp_data_range_versus_domain_hand_computed():
    rel = release_of(WIDE_TABLE, WIDE)
    # A = {1, 2}: age [20, 30], job medical (2 of 4 leaves); B = {3, 4, 5}: age [40, 60], job office
    pub = Publication.from_partition(rel, np.array([0, 0, 1, 1, 1, -1]))
    # data: R_age = 70 - 20 = 50 (the suppressed r6 included): A (10/50 + 2/4)/2 = 0.35,
    # B (20/50 + 2/4)/2 = 0.45 -> GCP 2 x 0.35 + 3 x 0.45 = 2.05, normalized (2.05 + 1)/6
    np.testing.assert_allclose(ncp(pub, rel, "data"), [0.35, 0.35, 0.45, 0.45, 0.45])
    assert gcp(pub, rel, "data") == (pytest.approx(2.05), pytest.approx(3.05 / 6))
    # domain: R_age = 100: A (10/100 + 0.5)/2 = 0.3, B (20/100 + 0.5)/2 = 0.35 -> GCP 1.65
    np.testing.assert_allclose(ncp(pub, rel, "domain"), [0.3, 0.3, 0.35, 0.35, 0.35])
    assert gcp(pub, rel, "domain") == (pytest.approx(1.65), pytest.approx(2.65 / 6))
    for form, expected in (("data", 2.05), ("domain", 1.65)):
        out = UtilityMetrics(UtilityParams(ncp_range=form)).compute(ctx_of(rel, pub))
        assert out["gcp"] == pytest.approx(expected) and out["gcp_norm"] == pytest.approx((expected + 1) / 6)
    # the default is the papers' form (BayFrame §6.2): the release's range
    assert UtilityParams().ncp_range == "data"
    assert UtilityMetrics().compute(ctx_of(rel, pub))["gcp"] == pytest.approx(2.05)
    assert Registry().create("metric", "utility").params.ncp_range == "data"


def test_ncp_degenerate_data_range_is_zero():
    schema = Schema((NumericQI("age", 0, 100), NumericQI("w", 0, 10)), Sensitive("s", ("a", "b")))
    rel = release_of([(1, 20, 5, "a"), (2, 40, 5, "b"), (3, 60, 5, "a")], schema)
    pub = Publication.from_partition(rel, np.array([0, 0, 1]))
    # every record has w = 5: R_w = 0 -> NCP_w = 0. data: {1, 2} age 20/40 -> (0.5 + 0)/2 = 0.25
    with np.errstate(all="raise"):
        np.testing.assert_allclose(ncp(pub, rel, "data"), [0.25, 0.25, 0.0])
        assert gcp(pub, rel, "data")[0] == pytest.approx(0.5)
    np.testing.assert_allclose(ncp(pub, rel, "domain"), [0.1, 0.1, 0.0])  # (20/100 + 0/10)/2
    # a published w interval wider than the (empty) data range still counts 0 there, by definition
    high = pub.high.copy()
    high[0, 1] = 7
    wider = dataclasses.replace(pub, high=high)
    with np.errstate(all="raise"):
        np.testing.assert_allclose(ncp(wider, rel, "data"), [0.25, 0.25, 0.0])
    np.testing.assert_allclose(ncp(wider, rel, "domain"), [0.2, 0.2, 0.0])  # (20/100 + 2/10)/2
    # a single record: every range is degenerate
    one = release_of([(1, 20, 5, "a")], schema)
    assert gcp(Publication.from_partition(one, np.array([0])), one, "data") == (0.0, 0.0)


def test_utility_params_are_validated():
    with pytest.raises(ConfigError, match=r"ncp_range must be one of 'data', 'domain' \(got 'table'\)"):
        UtilityParams(ncp_range="table")
    with pytest.raises(ConfigError, match="ncp_range"):
        Registry().create("metric", "utility", {"ncp_range": "range"})
    assert Registry().create("metric", "utility", {"ncp_range": "domain"}).params.ncp_range == "domain"


def test_utility_counterfeits_and_bucketized(table):
    pub = with_counterfeits(Publication.from_partition(table, np.array(AB)), [0], [2])
    out = UtilityMetrics().compute(ctx_of(table, pub))
    assert out["gcp"] == pytest.approx(2.35)  # counterfeits are no records of the release
    assert out["counterfeits"] == 1
    assert out["discernibility"] == 3**2 + 3**2 + 1 * 6
    assert out["discernibility_norm"] == pytest.approx(24 / 49)
    assert out["group_size_min"] == 3 and out["group_size_mean"] == 3
    bucket = Publication.from_partition(table, np.array(AB), bucketized=True)
    out = UtilityMetrics().compute(ctx_of(table, bucket))
    assert out["gcp"] == 0 and out["gcp_norm"] == pytest.approx(1 / 6)  # exact QIs; 1 suppressed
    everything_suppressed = Publication.from_partition(table, np.full(6, -1))
    out = UtilityMetrics().compute(ctx_of(table, everything_suppressed))
    assert out["gcp_norm"] == 1 and out["discernibility_norm"] == 1 and out["groups"] == 0
    assert out["group_size_min"] == 0


# ============================================================================ record linkage
def test_record_linkage_hand_computed(table):
    pub = Publication.from_partition(table, np.array(AB))
    np.testing.assert_allclose(linkage_probabilities(pub, table), [1 / 2, 1 / 2, 1 / 3, 1 / 3, 0, 1 / 3])
    out = RecordLinkage().compute(ctx_of(table, pub))
    assert out["rl"] == pytest.approx(2.0) and out["rl_norm"] == pytest.approx(1 / 3)


def test_record_linkage_skips_ownerless_copies(table):
    """An ownerless copy (slicedBucket's duplicate: counterfeit False, row -1) counts in its
    group's size but links to no row: before Publication.owned its row -1 overwrote the last
    row's probability (r6's 1/3 became the copy's)."""
    pub = with_counterfeits(Publication.from_partition(table, np.array(AB)), [0], [0], counterfeit=False)
    np.testing.assert_allclose(linkage_probabilities(pub, table), [1 / 3, 1 / 3, 1 / 3, 1 / 3, 0, 1 / 3])
    assert pub.owned.tolist() == [True] * 5 + [False]


def test_record_linkage_ties_between_overlapping_groups(table):
    # X = {1,3}: [20,30]; Y = {2,4}: [24,34]; Z = {5,6}: [22,40]; every job generalized to *
    pub = Publication.from_partition(table, np.array([0, 1, 0, 1, 2, 2]))
    np.testing.assert_allclose(pub.low[:, 0], [20, 24, 22])
    # r2 (24) and r3 (30) lie in all three boxes, r4 (34) in Y and Z, r6 (22) in X and Z
    expected = [1 / 2, 1 / (3 * 2), 1 / (3 * 2), 1 / (2 * 2), 1 / 2, 1 / (2 * 2)]
    np.testing.assert_allclose(linkage_probabilities(pub, table), expected)
    assert RecordLinkage().compute(ctx_of(table, pub))["rl"] == pytest.approx(11 / 6)


def test_record_linkage_records_outside_every_region(table):
    """Boxes that do not contain their own records: the nearest group by distance decides."""
    pub = Publication.from_partition(table, np.array(AB))
    low, high = pub.low.copy(), pub.high.copy()
    sets = {1: pub.value_sets[1].copy()}
    low[0, 0] = high[0, 0] = 30  # A: age [30, 30]
    sets[1][1, 0] = True  # B stands for nurse, clerk, manager
    moved = dataclasses.replace(pub, low=low, high=high, value_sets=sets)
    # r1 (20, nurse): A (10/20 + 0)/2 = 0.25, B (2/20 + 0)/2 = 0.05 -> B, not its own: 0
    # r2 (24, doctor): A (6/20 + 0)/2 = 0.15, B (0 + 1)/2 = 0.5 -> own: 1/2
    np.testing.assert_allclose(linkage_probabilities(moved, table), [0, 1 / 2, 1 / 3, 1 / 3, 0, 1 / 3])
    # an exact tie between A = [24, 24] and B = [24, 34] for r1: both at (4/20 + 0)/2
    low[0, 0] = high[0, 0] = 24
    low[1, 0] = 24
    tied = dataclasses.replace(pub, low=low, high=high, value_sets=sets)
    np.testing.assert_allclose(linkage_probabilities(tied, table), [1 / (2 * 2), 1 / 2, 1 / 3, 1 / 3, 0, 1 / 3])
    # A = [30, 30], B = [20, 34] with nurse: r1 lies in B only, so it links to B: 0
    low[0, 0] = high[0, 0] = 30
    low[1, 0] = 20
    other = dataclasses.replace(pub, low=low, high=high, value_sets=sets)
    np.testing.assert_allclose(linkage_probabilities(other, table), [0, 1 / 2, 1 / 3, 1 / 3, 0, 1 / 3])


def test_record_linkage_bucketized_uses_exact_points(table):
    rows = TABLE + [(7, 20, "nurse", "hiv")]  # same QI point as respondent 1
    rel = release_of(rows)
    pub = Publication.from_partition(rel, np.array([0, 0, 1, 1, -1, 1, 1]), bucketized=True)
    # the point (20, nurse) is in bucket A (r1) and bucket B (r7): ties for both
    expected = [1 / (2 * 2), 1 / 2, 1 / 4, 1 / 4, 0, 1 / 4, 1 / (2 * 4)]
    np.testing.assert_allclose(linkage_probabilities(pub, rel), expected)
    assert RecordLinkage().compute(ctx_of(rel, pub))["rl"] == pytest.approx(sum(expected))


# ============================================================================ KL divergence
def test_kl_hand_computed_integral_domain(table):
    pub = Publication.from_partition(table, np.array(AB))
    # per cell, N x P_rec: A spreads over 5 ages x 2 jobs, B over 13 ages x 2 jobs, the
    # suppressed flu record (r5) over 21 ages x 4 jobs
    x = [1 / 10 + 1 / 84, 1 / 10, 1 / 26 + 1 / 84, 1 / 26, 1 / 84, 1 / 26]
    expected = -sum(math.log(v) for v in x) / 6
    assert KLDivergence().compute(ctx_of(table, pub))["kl"] == pytest.approx(expected, rel=1e-12)


def test_kl_hand_computed_bucketized(table):
    pub = Publication.from_partition(table, np.array(AB), bucketized=True)
    # each exact point carries its bucket's sensitive distribution: A 1/2 flu 1/2 hiv, B 1/3 each
    x = [1 / 2 + 1 / 84, 1 / 2, 1 / 3 + 1 / 84, 1 / 3, 1 / 84, 1 / 3]
    assert kl_divergence(pub, table) == pytest.approx(-sum(math.log(v) for v in x) / 6, rel=1e-12)


def test_kl_hand_computed_real_valued_domain():
    schema = Schema((NumericQI("w", 0.0, 1.0),), Sensitive("s", ("a", "b")))
    rel = release_of([(1, 0.1, "a"), (2, 0.3, "b"), (3, 0.9, "a")], schema)
    # value cells: [0, 0.2], [0.2, 0.6], [0.6, 1]; group {1,2} spreads over [0.1, 0.3], half in
    # each of the first two cells; r3 alone is a point in the last cell
    pub = Publication.from_partition(rel, np.array([0, 0, 1]))
    assert kl_divergence(pub, rel) == pytest.approx(2 / 3 * math.log(2), rel=1e-12)
    # r3 ('a') suppressed: spread over [0, 1]; the cell of 0.9 gets 0.4 of it, that of 0.1 0.2
    pub = Publication.from_partition(rel, np.array([0, 0, -1]))
    expected = (math.log(1 / 0.7) + math.log(1 / 0.5) + math.log(1 / 0.4)) / 3
    assert kl_divergence(pub, rel) == pytest.approx(expected, rel=1e-12)
    # a point at the domain's upper bound belongs to the last (closed) cell
    rel = release_of([(1, 0.1, "a"), (2, 0.3, "b"), (3, 1.0, "a")], schema)
    assert kl_divergence(Publication.from_partition(rel, np.array([0, 0, 1])), rel) == pytest.approx(2 / 3 * math.log(2))
    expected = (math.log(1 / 0.7) + math.log(1 / 0.5) + math.log(1 / 0.35)) / 3
    assert kl_divergence(Publication.from_partition(rel, np.array([0, 0, -1])), rel) == pytest.approx(expected)


def test_kl_is_infinite_when_a_cell_gets_no_mass(table):
    pub = Publication.from_partition(table, np.arange(6))
    assert kl_divergence(pub, table) == 0.0
    low, high = pub.low.copy(), pub.high.copy()
    low[0, 0] = high[0, 0] = 21  # r1 (age 20) published at age 21: its cell gets no mass
    assert kl_divergence(dataclasses.replace(pub, low=low, high=high), table) == math.inf


# ============================================================================ query error
def test_query_answers_hand_computed(table):
    pub = Publication.from_partition(table, np.array(AB))
    queries = CountQueries(
        low=np.array([[20, 0], [30, 2], [36, 0], [25, 2]], dtype=float),
        high=np.array([[22, 1], [40, 3], [40, 3], [29, 3]], dtype=float),
        sensitive=np.array([0, 2, 0, 1]),
    )
    true, est = query_answers(queries, table, pub)
    np.testing.assert_array_equal(true, [1, 1, 1, 0])
    # q0: A covers ages 20..22 of 20..24 (3/5), all its jobs, 1 flu -> 0.6
    # q1: B ages 30..34 of 22..34 (5/13), 1 cancer -> 5/13
    # q2: the only match, r5, is suppressed -> 0
    # q3: B ages 25..29 (5/13), 1 hiv -> 5/13 although no record matches
    np.testing.assert_allclose(est, [0.6, 5 / 13, 0, 5 / 13])
    np.testing.assert_allclose(relative_errors(true, est), [0.4, 8 / 13, 1, 5 / 13])
    bucket = Publication.from_partition(table, np.array(AB), bucketized=True)
    _, est_b = query_answers(queries, table, bucket)
    # q0: only r1's point (20, nurse) is inside; bucket A is half flu -> 0.5
    np.testing.assert_allclose(est_b[0], 0.5)


# groups A = {1, 2}: age [20, 24] (5 ages), job medical {0, 1}; B = {3, 4}: age [30, 34], job
# office {2, 3}; C = {5, 6}: age [22, 40] (19 ages), job * (4 leaves). Flu: r1, r3, r5; hiv: r2,
# r6; cancer: r4. Three query ranges, each asked in both forms.
ABC = [0, 0, 1, 1, 2, 2]
RANGES_LOW = np.array([[20, 0], [25, 2], [36, 0]], dtype=float)  # age [20, 30] medical; [25, 40] office;
RANGES_HIGH = np.array([[30, 1], [40, 3], [40, 0]], dtype=float)  # [36, 40] nurse


def test_query_answers_both_forms_hand_computed(table):
    pub = Publication.from_partition(table, np.array(ABC))
    qi = CountQueries(RANGES_LOW, RANGES_HIGH, np.full(3, ANY_VALUE))
    true, est = query_answers(qi, table, pub)
    # true, QI ranges only: q0 r1 (20, nurse), r2 (24, doctor); q1 r3 (30, clerk), r4 (34, manager);
    # q2 r5 (40, nurse)
    np.testing.assert_array_equal(true, [2, 1 + 1, 1])
    # estimate: share of each group's region inside the ranges x |Q|
    # q0: A all of it (5/5 ages, 2/2 jobs) x 2 = 2; B only age 30 (1/5) but no job: 0;
    #     C ages 22..30 (9/19) x jobs 2/4 x 2 = 9/19
    # q1: A none; B all x 2 = 2; C ages 25..40 (16/19) x 2/4 x 2 = 16/19
    # q2: C ages 36..40 (5/19) x 1/4 x 2 = 5/38
    np.testing.assert_allclose(est, [2 + 9 / 19, 2 + 16 / 19, 5 / 38])
    np.testing.assert_allclose(relative_errors(true, est), [9 / 38, 8 / 19, 33 / 38])
    # the same ranges AND S = flu / cancer / flu
    qs = CountQueries(RANGES_LOW, RANGES_HIGH, np.array([0, 2, 0]))
    true_s, est_s = query_answers(qs, table, pub)
    np.testing.assert_array_equal(true_s, [1, 1, 1])  # r1; r4; r5
    # q0: A 1 x 1 flu + C 9/38 x 1 flu; q1: B 1 x 1 cancer (C has none); q2: C 5/76 x 1 flu
    np.testing.assert_allclose(est_s, [1 + 9 / 38, 1, 5 / 76])
    np.testing.assert_allclose(relative_errors(true_s, est_s), [9 / 38, 0, 71 / 76])
    # both forms in one batch: each query keeps its own answer
    both = CountQueries(np.vstack([RANGES_LOW, RANGES_LOW]), np.vstack([RANGES_HIGH, RANGES_HIGH]),
                        np.array([ANY_VALUE] * 3 + [0, 2, 0]))
    t, e = query_answers(both, table, pub)
    np.testing.assert_allclose(t, [*true, *true_s])
    np.testing.assert_allclose(e, [*est, *est_s])
    # bucketized: exact points; the qi form counts each published point inside (1 each), the
    # qi_sensitive form its bucket's share of the value (each bucket holds 2 distinct values: 1/2)
    bucket = Publication.from_partition(table, np.array(ABC), bucketized=True)
    np.testing.assert_allclose(query_answers(qi, table, bucket)[1], [2, 2, 1])
    np.testing.assert_allclose(query_answers(qs, table, bucket)[1], [1 / 2 + 1 / 2, 1 / 2 + 1 / 2, 1 / 2])
    # a counterfeit (hiv) in B is one more tuple of |B| = 3; bucketized, its point is B's lower
    # corner (30, clerk), inside q1; the true counts are the release's and do not change
    fake = with_counterfeits(pub, [1], [1])
    t, e = query_answers(qi, table, fake)
    np.testing.assert_array_equal(t, true)
    np.testing.assert_allclose(e, [2 + 9 / 19, 3 + 16 / 19, 5 / 38])
    np.testing.assert_allclose(query_answers(qs, table, fake)[1], est_s)  # no flu, no cancer added
    fake_b = with_counterfeits(bucket, [1], [1])
    np.testing.assert_allclose(query_answers(qi, table, fake_b)[1], [2, 3, 1])
    # r5 suppressed (C = {6}): gone from the estimate; C is now the point (22, clerk)
    sup = Publication.from_partition(table, np.array([0, 0, 1, 1, -1, 2]))
    t, e = query_answers(qi, table, sup)
    np.testing.assert_array_equal(t, true)
    np.testing.assert_allclose(e, [2, 2, 0])


def test_query_form_default_is_the_papers(table):
    """QI ranges only (JS-reduce §7.5, slicedBucket eq. 8) unless ``form=qi_sensitive``."""
    assert QueryErrorParams().form == "qi"
    assert Registry().create("metric", "query_error").params.form == "qi"
    assert (random_queries(table, 20, 0.3, np.random.default_rng(0)).sensitive == ANY_VALUE).all()
    sens = random_queries(table, 20, 0.3, np.random.default_rng(0), form="qi_sensitive").sensitive
    assert ((sens >= 0) & (sens < 3)).all()
    pub = Publication.from_partition(table, np.array(ABC))
    default = QueryError(QueryErrorParams(queries=40)).compute(ctx_of(table, pub, seed=5))
    assert default == QueryError(QueryErrorParams(queries=40, form="qi")).compute(ctx_of(table, pub, seed=5))
    assert default != QueryError(QueryErrorParams(queries=40, form="qi_sensitive")).compute(ctx_of(table, pub, seed=5))


def test_empty_query_ranges_select_nothing(table):
    """random_queries encodes an empty range as (+inf, -inf); no column may count it negatively."""
    for j in range(2):
        low, high = np.array([[20.0, 0.0]]), np.array([[40.0, 3.0]])
        low[0, j], high[0, j] = np.inf, -np.inf
        q = CountQueries(low, high, np.array([0]))
        for bucketized in (False, True):
            true, est = query_answers(q, table, Publication.from_partition(table, np.array(AB), bucketized=bucketized))
            assert true[0] == 0 and est[0] == 0


def test_query_answers_real_valued_domain():
    schema = Schema((NumericQI("w", 0.0, 1.0),), Sensitive("s", ("a", "b")))
    rel = release_of([(1, 0.1, "a"), (2, 0.3, "b"), (3, 0.9, "a")], schema)
    pub = Publication.from_partition(rel, np.array([0, 0, 1]))
    q = CountQueries(np.array([[0.2]]), np.array([[0.9]]), np.array([0]))
    true, est = query_answers(q, rel, pub)
    # [0.2, 0.9] holds half of [0.1, 0.3] (one 'a' there) and the point 0.9 (one 'a')
    assert true[0] == 1 and est[0] == pytest.approx(1.5)


def test_query_error_is_zero_without_generalization_and_seeded(table):
    exact = Publication.from_partition(table, np.arange(6))
    for form in ("qi", "qi_sensitive"):
        out = QueryError(QueryErrorParams(queries=200, selectivity=0.3, form=form)).compute(ctx_of(table, exact))
        assert out == {"query_error_mean": 0.0, "query_error_median": 0.0}
    pub = Publication.from_partition(table, np.array(AB))
    for form in ("qi", "qi_sensitive"):
        a = QueryError(QueryErrorParams(queries=50, form=form)).compute(ctx_of(table, pub, seed=3))
        b = QueryError(QueryErrorParams(queries=50, form=form)).compute(ctx_of(table, pub, seed=3))
        c = QueryError(QueryErrorParams(queries=50, form=form)).compute(ctx_of(table, pub, seed=4))
        assert a == b and a != c and a["query_error_mean"] > 0


@pytest.mark.parametrize("form", ["qi", "qi_sensitive"])
@pytest.mark.parametrize("theta", [0.02, 0.1, 0.3])
def test_random_queries_reach_the_expected_selectivity(theta, form):
    """Independent uniform QIs (and, in the qi_sensitive form, a sensitive value frequent
    enough): mean selectivity ~ theta."""
    rng = np.random.default_rng(7)
    n = 4000
    schema = Schema(
        (NumericQI("age", 0, 99), NumericQI("w", 0.0, 1.0), CategoricalQI("job", Taxonomy.flat([str(i) for i in range(8)]))),
        Sensitive("s", ("a", "b", "c")),
    )
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(0, 100, n),
            "w": rng.random(n),
            "job": rng.integers(0, 8, n).astype(str),
            "s": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
        }
    )
    rel = schema.encode(frame, t=1)
    queries = random_queries(rel, 400, theta, np.random.default_rng(1), form)
    true, _ = query_answers(queries, rel, Publication.from_partition(rel, np.zeros(n, dtype=np.int64)))
    assert np.mean(true) / n == pytest.approx(theta, rel=0.25)


@pytest.mark.parametrize("theta", [0.05, 0.3])
def test_query_ranges_are_unbiased_on_repeated_values(theta):
    """One QI of 8 unevenly frequent codes and one sensitive value: a range covers theta of the
    records on average, although every range boundary cuts through a block of equal values."""
    rng = np.random.default_rng(11)
    n = 800
    schema = Schema((CategoricalQI("job", Taxonomy.flat([str(i) for i in range(8)])),), Sensitive("s", ("x",)))
    codes = rng.choice(8, n, p=[0.3, 0.05, 0.2, 0.1, 0.05, 0.15, 0.1, 0.05])
    rel = schema.encode(pd.DataFrame({"id": np.arange(n), "job": codes.astype(str), "s": "x"}), t=1)
    for form in ("qi", "qi_sensitive"):  # one sensitive value: both forms use f = theta
        queries = random_queries(rel, 40000, theta, np.random.default_rng(2), form, ranges="exact")
        true, _ = query_answers(queries, rel, Publication.from_partition(rel, np.zeros(n, dtype=np.int64)))
        assert np.mean(true) / n == pytest.approx(theta, abs=0.004)
    # non-empty ranges cannot go below one value: every query selects exactly one code at theta =
    # 0.05 (no code is rarer than 5 %), so the mean selectivity is the mean share of the code under
    # a window's middle, far above theta — the price of never asking for nothing
    queries = random_queries(rel, 4000, 0.05, np.random.default_rng(2))
    assert (queries.low == queries.high).all()


def _coarse_and_fine(n: int, seed: int):
    """Independent QIs: a two-valued one (like bkseq's gender) and two of 30 integer values."""
    rng = np.random.default_rng(seed)
    schema = Schema(
        (NumericQI("age", 45, 74), CategoricalQI("sex", Taxonomy.flat(["1", "2"])), NumericQI("weight", 60, 89)),
        Sensitive("s", ("a", "b")),
    )
    frame = pd.DataFrame({"id": np.arange(n), "age": rng.integers(45, 75, n), "sex": rng.choice(["1", "2"], n),
                          "weight": rng.integers(60, 90, n), "s": rng.choice(["a", "b"], n)})
    return schema.encode(frame, t=1)


@pytest.mark.parametrize("theta", [0.001, 0.01, 0.1])
def test_nonempty_ranges_never_ask_for_nothing_and_keep_the_selectivity(theta):
    rel = _coarse_and_fine(5000, 3)
    n = len(rel)
    exact = random_queries(rel, 4000, theta, np.random.default_rng(4), ranges="exact")
    nonempty = random_queries(rel, 4000, theta, np.random.default_rng(4))
    one_group = Publication.from_partition(rel, np.zeros(n, dtype=np.int64))
    # randomized rounding empties the two-valued QI's range (two halves A | B of the sorted column,
    # window [u, u + f), u ~ U[0, 1 - f], f = theta^(1/3)): inside one half it keeps that value with
    # probability f / 0.5; across the middle it keeps A with (0.5 - u) / 0.5 and B with
    # (u + f - 0.5) / 0.5, independently, and is empty when it keeps neither
    f = theta ** (1 / 3)
    u = np.linspace(0, 1 - f, 200001)
    across = (u < 0.5) & (u + f > 0.5)
    empty = np.where(across, (1 - (0.5 - u) / 0.5) * (1 - (u + f - 0.5) / 0.5), 1 - f / 0.5)
    assert (exact.low > exact.high).any(axis=1).mean() == pytest.approx(empty.mean(), abs=0.03)
    assert not (nonempty.low > nonempty.high).any()
    for j in range(3):  # every range holds at least one value of the release
        col = rel.qi[:, j]
        inside = (col[None, :] >= nonempty.low[:, j, None]) & (col[None, :] <= nonempty.high[:, j, None])
        assert inside.any(axis=1).all()
    true, _ = query_answers(nonempty, rel, one_group)
    assert true.mean() / n == pytest.approx(theta, rel=0.25)  # the finer QIs make up for the coarse one


def test_query_error_params_are_validated():
    with pytest.raises(ConfigError, match=r"queries must be an integer >= 1 \(got 0\)"):
        QueryErrorParams(queries=0)
    with pytest.raises(ConfigError, match=r"selectivity must be a number in \(0, 1\] \(got 1.5\)"):
        QueryErrorParams(selectivity=1.5)
    with pytest.raises(ConfigError, match="selectivity"):
        QueryErrorParams(selectivity=0)
    with pytest.raises(ConfigError, match="queries"):
        Registry().create("metric", "query_error", {"queries": -3})
    with pytest.raises(ConfigError, match=r"form must be one of 'qi', 'qi_sensitive' \(got 'sensitive'\)"):
        QueryErrorParams(form="sensitive")
    with pytest.raises(ConfigError, match="form"):
        Registry().create("metric", "query_error", {"form": "QI"})
    assert Registry().create("metric", "query_error", {"form": "qi_sensitive"}).params.form == "qi_sensitive"


# ============================================================================ belief
def posterior_for(ids, rows):
    return AttackResult(respondent=np.asarray(ids), posterior=np.asarray(rows, dtype=float))


def test_belief_hand_computed(table):
    pub = Publication.from_partition(table, np.array(AB))
    # true values: 1 flu, 2 hiv (A: 1 flu, 1 hiv); 3 flu, 4 cancer, 6 hiv (B: one of each)
    # respondents listed out of order to exercise the matching; 99 is not published
    attack = posterior_for(
        [6, 99, 4, 1, 3, 2],
        [[0.5, 0.0, 0.5], [1, 0, 0], [0, 0, 1], [0.8, 0.2, 0], [1 / 3, 1 / 3, 1 / 3], [0.7, 0.3, 0]],
    )
    out = BeliefMetrics().compute(ctx_of(table, pub, {"bk": attack, "none": AttackResult(np.array([1]))}))
    # rho terms: r1 (0.8-.5)/.5 = .6, r2 (.3-.5)/.5 = -.4, r3 0, r4 (1-1/3)/(2/3) = 1, r6 (0-1/3)/(2/3) = -.5
    assert out["bk.gain_rho"] == pytest.approx((0.6 - 0.4 + 0 + 1 - 0.5) / 5)
    assert out["bk.gain_g"] == pytest.approx((0.6 + 0.4 + 0 + 1 + 0.5) / 5)
    assert out["bk.confidence"] == pytest.approx((0.8 + 0.3 + 1 / 3 + 1 + 0) / 5)
    assert out["bk.single_value_share"] == 0  # every group holds two or three distinct values
    # risks beyond averages: true-value posteriors .8, .3, 1/3, 1, 0
    assert out["bk.max_confidence"] == 1.0
    assert out["bk.share_over_50"] == pytest.approx(2 / 5) and out["bk.share_over_90"] == pytest.approx(1 / 5)
    # r4's posterior is one-hot on its true value: certain and disclosed; r6's gives hiv 0: ruled out
    assert (out["bk.certain"], out["bk.disclosed"], out["bk.true_value_ruled_out"]) == (1, 1, 1)
    assert out["bk.certain_share"] == out["bk.disclosed_share"] == pytest.approx(1 / 5)
    assert set(out) == {f"bk.{k}" for k in ("gain_rho", "gain_g", "confidence", "single_value_share", "max_confidence",
                                              "share_over_50", "share_over_90", "certain", "certain_share",
                                              "disclosed", "disclosed_share", "true_value_ruled_out")}  # no posterior, no keys


def test_belief_skips_ownerless_copies(table):
    """An ownerless copy has no respondent and no true value at the release: it is not a record
    the beliefs are measured over, even when the attack gives a row for respondent -1 (it gives
    one per published tuple). Before Publication.owned the copy was matched to that row: in the
    churn attack table one slicedBucket record had its "true value ruled out"."""
    pub = with_counterfeits(Publication.from_partition(table, np.array(AB)), [0], [1], counterfeit=False)
    attack = posterior_for([-1, 1, 2, 3, 4, 6], [[1, 0, 0], *[[1 / 3] * 3] * 5])
    out = BeliefMetrics().compute(ctx_of(table, pub, {"bk": attack}))
    assert out["bk.confidence"] == pytest.approx(1 / 3)  # over the five owned records only
    assert (out["bk.certain"], out["bk.true_value_ruled_out"]) == (0, 0)
    # r1's group A now holds flu, hiv and the copy's hiv: a = 1/3 for r1, 2/3 for r2
    assert out["bk.gain_rho"] == pytest.approx((0 + (1 / 3 - 2 / 3) / (1 / 3) + 0 + 0 + 0) / 5)


def test_certain_counts_wrong_inferences_disclosed_only_right_ones(table):
    """An adversary left with one value is certain; she has disclosed the record only when that
    value is the true one (trust issue). True values: 1 flu, 2 hiv, 3 flu, 4 cancer, 6 hiv; the
    value order is (flu, hiv, cancer)."""
    pub = Publication.from_partition(table, np.array(AB))
    attack = posterior_for(
        [1, 2, 3, 4, 6],
        [[0, 0, 1],  # one value left, not flu: certain, wrong, truth ruled out
         [0.005, 0.995, 0],  # >= 0.99 on hiv, the true value: certain and disclosed
         [0.985, 0.015, 0],  # below 0.99: neither
         [0.995, 0.005, 0],  # certain of flu, but 4 has cancer: certain, wrong, truth ruled out
         [0, 1, 0]],  # one-hot on hiv, true: disclosed
    )
    out = BeliefMetrics().compute(ctx_of(table, pub, {"bk": attack}))
    assert (out["bk.certain"], out["bk.disclosed"], out["bk.true_value_ruled_out"]) == (4, 2, 2)
    assert out["bk.certain_share"] == pytest.approx(4 / 5) and out["bk.disclosed_share"] == pytest.approx(2 / 5)


def test_belief_over_records_whose_value_was_not_given(table):
    """AttackResult.given (e.g. BayFrame's compromised records): the gains are also reported over
    the other records only (BayFrame Fig. 4b)."""
    pub = Publication.from_partition(table, np.array(AB))
    attack = posterior_for(
        [6, 99, 4, 1, 3, 2],
        [[0.5, 0.0, 0.5], [1, 0, 0], [0, 0, 1], [0.8, 0.2, 0], [1 / 3, 1 / 3, 1 / 3], [0.7, 0.3, 0]],
    )
    attack.given = np.array([False, True, True, False, False, False])  # 99 is not published
    out = BeliefMetrics().compute(ctx_of(table, pub, {"bk": attack}))
    # as in test_belief_hand_computed, without r4 (given): rho terms .6, -.4, 0, -.5; G .6 .4 0 .5
    assert out["bk.gain_rho"] == pytest.approx((0.6 - 0.4 + 0 + 1 - 0.5) / 5)
    assert out["bk.gain_rho_unknown"] == pytest.approx((0.6 - 0.4 + 0 - 0.5) / 4)
    assert out["bk.gain_g_unknown"] == pytest.approx((0.6 + 0.4 + 0 + 0.5) / 4)
    assert out["bk.confidence_unknown"] == pytest.approx((0.8 + 0.3 + 1 / 3 + 0) / 4)
    assert out["bk.given_share"] == pytest.approx(1 / 5)


def test_belief_full_groups_large_shares_and_counterfeits(table):
    # group {1, 3}: both flu, m = |Q|: rho term 0, G = |1 - p|
    pub = Publication.from_partition(table, np.array([0, -1, 0, -1, -1, -1]))
    out = BeliefMetrics().compute(ctx_of(table, pub, {"x": posterior_for([1, 3], [[0.9, 0.1, 0], [0.6, 0, 0.4]])}))
    assert out["x.gain_rho"] == 0
    assert out["x.gain_g"] == pytest.approx((0.1 + 0.4) / 2)
    assert out["x.single_value_share"] == 1
    # group {1, 2, 3, 5}: three flu out of four; a posterior of 0 on flu gives G = 0.75/0.25 = 3
    pub = Publication.from_partition(table, np.array([0, 0, 0, -1, 0, -1]))
    post = posterior_for([1, 2, 3, 5], [[0, 1, 0], [0, 1, 0], [1, 0, 0], [1, 0, 0]])
    out = BeliefMetrics().compute(ctx_of(table, pub, {"x": post}))
    # r1: rho (0-.75)/.25 = -3, G 3; r2 hiv share 1/4: (1-.25)/.75 = 1; r3, r5: 1
    assert out["x.gain_rho"] == pytest.approx((-3 + 1 + 1 + 1) / 4)
    assert out["x.gain_g"] == pytest.approx((3 + 1 + 1 + 1) / 4)
    assert out["x.single_value_share"] == 0
    # a counterfeit cancer tuple in group A = {1, 2}: |Q| = 3, shares 1/3; it has no posterior
    pub = with_counterfeits(Publication.from_partition(table, np.array(AB)), [0], [2])
    post = posterior_for([1, 2], [[0.5, 0.5, 0], [0.5, 0.5, 0]])
    out = BeliefMetrics().compute(ctx_of(table, pub, {"x": post}))
    assert out["x.gain_rho"] == pytest.approx((0.5 - 1 / 3) / (2 / 3))
    assert out["x.confidence"] == pytest.approx(0.5)
    # an attacker with posteriors for nobody published gives NaN, not a crash
    out = BeliefMetrics().compute(ctx_of(table, pub, {"x": posterior_for([42], [[1, 0, 0]])}))
    assert math.isnan(out["x.gain_g"]) and math.isnan(out["x.single_value_share"])


def test_single_value_share_hand_computed(table):
    # groups {1, 5}: flu, flu (a = 1); {2, 6}: hiv, hiv (a = 1); {3, 4}: flu, cancer (a = 1/2)
    pub = Publication.from_partition(table, np.array([0, 1, 2, 2, 0, 1]))
    uniform = posterior_for([1, 2, 3, 4, 5, 6], np.full((6, 3), 1 / 3))
    some = posterior_for([3, 1], [[1, 0, 0], [1, 0, 0]])  # r3 (a = 1/2) and r1 (a = 1)
    attacks = {"all": uniform, "some": some, "none": AttackResult(np.array([1]))}
    out = BeliefMetrics().compute(ctx_of(table, pub, attacks))
    assert out["all.single_value_share"] == pytest.approx(4 / 6)
    assert out["some.single_value_share"] == pytest.approx(1 / 2)  # over the records it has beliefs for
    assert "none.single_value_share" not in out
    # r3, r4: (1/3 - 1/2)/(1/2) = -1/3 each, the four a = 1 records 0: rho = -2/3 / 6 = -1/9;
    # over the records where the ratio is defined: rho / (1 - share) = -1/3
    assert out["all.gain_rho"] == pytest.approx(-1 / 9)
    assert out["all.gain_rho"] / (1 - out["all.single_value_share"]) == pytest.approx(-1 / 3)
    assert out["some.gain_rho"] == pytest.approx((1 + 0) / 2)  # r3: (1 - 1/2)/(1/2) = 1; r1: 0
    # a counterfeit hiv tuple in {1, 5}: a = 2/3 there, only r2 and r6 keep a = 1
    fake = with_counterfeits(pub, [0], [1])
    out = BeliefMetrics().compute(ctx_of(table, fake, {"all": uniform}))
    assert out["all.single_value_share"] == pytest.approx(2 / 6)
    # suppressed records are not published: {1, 5} alone, r2 .. r4 and r6 suppressed
    alone = Publication.from_partition(table, np.array([0, -1, -1, -1, 0, -1]))
    assert BeliefMetrics().compute(ctx_of(table, alone, {"all": uniform}))["all.single_value_share"] == 1


# ============================================================================ oracles and properties
WEIGHTS = [0.0, 0.15, 0.3, 0.5, 0.75, 1.0]  # few values, so repeated ones and shared cells occur
PSCHEMA = Schema((NumericQI("age", 20, 40), NumericQI("w", 0.0, 1.0), CategoricalQI("job", JOBS)), DISEASE)


@st.composite
def scenarios(draw, max_n=12, perturb=False):
    """A random release of PSCHEMA and a random partition of it published; with ``perturb``,
    some published regions are then replaced by random ones (records may fall outside them)."""
    n = draw(st.integers(1, max_n))
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=n, max_size=n)  # noqa: E731
    ages, jobs, sens, groups = draw(ints(20, 40)), draw(ints(0, 3)), draw(ints(0, 2)), draw(ints(-1, 3))
    weights = draw(st.lists(st.sampled_from(WEIGHTS), min_size=n, max_size=n))
    rows = [(i + 1, ages[i], weights[i], JOBS.leaves[jobs[i]], DISEASE.values[sens[i]]) for i in range(n)]
    rel = release_of(rows, PSCHEMA)
    pub = Publication.from_partition(
        rel,
        np.array(groups),
        categorical=draw(st.sampled_from(["taxonomy", "set"])),
        bucketized=draw(st.booleans()),
    )
    if pub.n_groups:
        fakes = draw(st.lists(st.tuples(st.integers(0, pub.n_groups - 1), st.integers(0, 2)), max_size=2))
        if fakes:
            pub = with_counterfeits(pub, [f[0] for f in fakes], [f[1] for f in fakes])
    if perturb and len(pub):
        low, high, sets = pub.low.copy(), pub.high.copy(), {2: pub.value_sets[2].copy()}
        qi = None if pub.qi is None else pub.qi.copy()
        rows = draw(st.lists(st.integers(0, (len(pub) if pub.bucketized else pub.n_groups) - 1), max_size=2))
        for r in rows:
            age = sorted(draw(st.lists(st.integers(20, 40), min_size=2, max_size=2)))
            w = sorted(draw(st.lists(st.sampled_from(WEIGHTS), min_size=2, max_size=2)))
            if pub.bucketized:
                qi[r] = [age[0], w[0], draw(st.integers(0, 3))]
            else:
                vs = np.array(draw(st.lists(st.booleans(), min_size=4, max_size=4)))
                vs[draw(st.integers(0, 3))] = True
                low[r] = [age[0], w[0], np.flatnonzero(vs).min()]
                high[r] = [age[1], w[1], np.flatnonzero(vs).max()]
                sets[2][r] = vs
        pub = dataclasses.replace(pub, low=low, high=high, value_sets=sets, qi=qi)
    return rel, pub


def region_list(pub):
    """(group, low, high, {column: set}) per region, plainly."""
    out = []
    if pub.bucketized:
        for k in range(len(pub)):
            q = pub.qi[k]
            out.append((pub.group[k], q, q, {j: {int(q[j])} for j in pub.schema.categorical}))
    else:
        for g in range(pub.n_groups):
            sets = {j: set(np.flatnonzero(pub.value_sets[j][g]).tolist()) for j in pub.schema.categorical}
            out.append((g, pub.low[g], pub.high[g], sets))
    return out


def rl_oracle(rel, pub):
    """P_RL by loops over records and regions."""
    schema = pub.schema
    sizes = np.bincount(pub.group, minlength=pub.n_groups)
    regions = region_list(pub)
    p = np.zeros(len(rel))
    for k in range(len(pub)):
        if pub.counterfeit[k]:
            continue
        x = rel.qi[pub.row[k]]
        best = np.full(pub.n_groups, np.inf)
        for g, lo, hi, sets in regions:
            dist = 0.0
            for j, a in enumerate(schema.qi):
                if a.kind == "numeric":
                    dist += max(lo[j] - x[j], 0, x[j] - hi[j]) / (a.high - a.low)
                else:
                    dist += 0.0 if int(x[j]) in sets[j] else 1.0
            best[g] = min(best[g], dist / len(schema.qi))
        nearest = np.flatnonzero(best <= best.min() + 1e-12)
        if pub.group[k] in nearest:
            p[pub.row[k]] = 1.0 / (len(nearest) * sizes[pub.group[k]])
    return p


def kl_oracle(rel, pub):
    """KL(P_orig || P_rec) by loops over cells and published records."""
    schema = pub.schema
    n = len(rel)
    integral = [a.kind == "numeric" and np.all(rel.qi[:, j] == np.round(rel.qi[:, j])) for j, a in enumerate(schema.qi)]

    def value_cell(j, v):
        vals = sorted(set(rel.qi[:, j].tolist()))
        i = vals.index(v)
        left = schema.qi[j].low if i == 0 else (vals[i - 1] + v) / 2
        right = schema.qi[j].high if i == len(vals) - 1 else (v + vals[i + 1]) / 2
        return left, right, i == len(vals) - 1

    def share(j, x, lo, hi, valueset):
        """Share of region [lo, hi] (or value set) falling on the cell of value x."""
        a = schema.qi[j]
        if a.kind == "categorical":
            return (int(x) in valueset) / len(valueset)
        if integral[j]:
            ints = math.floor(hi) - math.ceil(lo) + 1  # 0: a perturbed box holding no integer
            return float(lo <= x <= hi) / ints if ints > 0 else 0.0
        left, right, last = value_cell(j, x)
        if hi > lo:
            return max(min(hi, right) - max(lo, left), 0) / (hi - lo)
        return float(left <= lo < right or (last and lo == right))

    sizes = np.bincount(pub.group, minlength=pub.n_groups)
    counts = pub.group_counts()
    regions = region_list(pub)
    domain = [(a.low, a.high, None) if a.kind == "numeric" else (0, a.taxonomy.size - 1, set(range(a.taxonomy.size))) for a in schema.qi]
    suppressed = [i for i in range(n) if rel.respondent[i] in set(pub.suppressed.tolist())]
    cells = {}
    for i in range(n):
        key = (*rel.qi[i].tolist(), int(rel.sensitive[i]))
        cells[key] = cells.get(key, 0) + 1
    total = 0.0
    for key, c in cells.items():
        x, s = key[:-1], key[-1]
        mass = 0.0
        for g, lo, hi, sets in regions:
            f = 1.0
            for j in range(len(x)):
                f *= share(j, x[j], lo[j], hi[j], sets.get(j))
            mass += f * (counts[g, s] / sizes[g] if pub.bucketized else counts[g, s])
        for i in suppressed:
            if rel.sensitive[i] == s:
                f = 1.0
                for j in range(len(x)):
                    f *= share(j, x[j], domain[j][0], domain[j][1], domain[j][2])
                mass += f
        if mass == 0:
            return math.inf
        q = mass / (len(pub) + len(pub.suppressed))
        total += c / n * math.log((c / n) / q)
    return total


@settings(max_examples=60, deadline=None)
@given(scenarios(max_n=16, perturb=True), st.sampled_from([None, 1, 3]))
def test_record_linkage_matches_brute_force(case, leaf):
    """``leaf`` set: records are searched in k-d blocks of that size instead of one block."""
    rel, pub = case
    with pytest.MonkeyPatch.context() as mp:
        if leaf:
            mp.setattr(_regions, "LEAF", leaf)
        np.testing.assert_allclose(linkage_probabilities(pub, rel), rl_oracle(rel, pub), atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(scenarios(max_n=16, perturb=True), st.sampled_from([None, 1, 3]))
def test_kl_matches_brute_force(case, leaf):
    rel, pub = case
    with pytest.MonkeyPatch.context() as mp:
        if leaf:
            mp.setattr(_regions, "LEAF", leaf)
        assert kl_divergence(pub, rel) == pytest.approx(kl_oracle(rel, pub), rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 300), st.integers(1, 4), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_kd_order_is_a_permutation(n, d, leaf, seed):
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 5, size=(n, d)).astype(float)
    order = _regions.kd_order(points, leaf)
    np.testing.assert_array_equal(np.sort(order), np.arange(n))
    if d == 1 and n > leaf:  # every split is along the only column: the order sorts it
        assert np.all(np.diff(points[order, 0]) >= 0)


@settings(max_examples=40, deadline=None)
@given(scenarios(perturb=True), st.integers(0, 2**32 - 1), st.sampled_from(["qi", "qi_sensitive"]))
def test_query_estimates_match_brute_force(case, seed, form):
    rel, pub = case
    queries = random_queries(rel, 5, 0.3, np.random.default_rng(seed), form)
    assert (queries.sensitive == ANY_VALUE).all() == (form == "qi")
    true, est = query_answers(queries, rel, pub)
    integral = [np.all(rel.qi[:, j] == np.round(rel.qi[:, j])) for j in range(3)]
    counts, sizes = pub.group_counts(), np.bincount(pub.group, minlength=pub.n_groups)
    if form == "qi":  # no condition on S: a group counts all its tuples, a bucket's point 1
        counts = sizes[:, None]
    for q in range(len(queries)):
        lo_q, hi_q, s = queries.low[q], queries.high[q], max(queries.sensitive[q], 0)
        inside = [
            all(lo_q[j] <= rel.qi[i, j] <= hi_q[j] for j in range(3)) and (form == "qi" or rel.sensitive[i] == s)
            for i in range(len(rel))
        ]
        assert true[q] == sum(inside)
        expected = 0.0
        for g, lo, hi, sets in region_list(pub):
            f = 1.0
            for j, a in enumerate(PSCHEMA.qi):
                if a.kind == "categorical":
                    f *= len([v for v in sets[j] if lo_q[j] <= v <= hi_q[j]]) / len(sets[j])
                elif integral[j]:
                    ints = np.floor(hi[j]) - np.ceil(lo[j]) + 1  # 0: a perturbed box holding no integer
                    hit = max(np.floor(min(hi[j], hi_q[j])) - np.ceil(max(lo[j], lo_q[j])) + 1, 0)
                    f *= hit / ints if ints > 0 else 0.0
                elif hi[j] > lo[j]:
                    f *= max(min(hi[j], hi_q[j]) - max(lo[j], lo_q[j]), 0) / (hi[j] - lo[j])
                else:
                    f *= float(lo_q[j] <= lo[j] <= hi_q[j])
            expected += f * (counts[g, s] / sizes[g] if pub.bucketized else counts[g, s])
        assert est[q] == pytest.approx(expected, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(scenarios(max_n=20), st.integers(0, 2**32 - 1))
def test_every_metric_stays_in_its_range(case, seed):
    rel, pub = case
    rng = np.random.default_rng(seed)
    real = ~pub.counterfeit
    post = rng.dirichlet(np.ones(DISEASE.size), size=int(real.sum()))
    attacks = {"a": AttackResult(pub.respondent[real], post)}
    ctx = ctx_of(rel, pub, attacks, seed)
    out = {}
    for metric in (UtilityMetrics(), RecordLinkage(), KLDivergence(), QueryError(QueryErrorParams(queries=30)), BeliefMetrics()):
        out.update(metric.compute(ctx))
    for key in ("gcp_norm", "discernibility_norm", "suppressed_fraction", "rl_norm"):
        assert 0.0 <= out[key] <= 1.0 + 1e-12, key
    assert 0 <= out["gcp"] <= len(rel) and out["rl"] <= len(rel) - out["suppressed"] + 1e-9
    assert out["kl"] >= 0.0
    assert out["query_error_mean"] >= 0.0 and out["query_error_median"] >= 0.0
    if real.any():
        assert 0.0 <= out["a.confidence"] <= 1.0 and 0.0 <= out["a.single_value_share"] <= 1.0
        assert out["a.gain_rho"] <= 1.0 + 1e-12
        # G <= max(a, 1 - a) / (1 - a): above 1 only on values holding more than half a group
        share = pub.group_counts().max(axis=1) / pub.group_sizes()
        assert out["a.gain_g"] >= 0.0
        if np.all(share[np.unique(pub.group[real])] <= 0.5):
            assert out["a.gain_g"] <= 1.0 + 1e-12


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.booleans())
def test_identity_partition_loses_nothing(case, bucketized):
    rel, _ = case
    pub = Publication.from_partition(rel, np.arange(len(rel)), bucketized=bucketized)
    ctx = ctx_of(rel, pub)
    assert UtilityMetrics().compute(ctx)["gcp"] == 0
    assert KLDivergence().compute(ctx)["kl"] == pytest.approx(0.0, abs=1e-12)
    # every record is linked to its own singleton group, shared only with records of the same QI
    distinct = len(np.unique(rel.qi, axis=0))
    assert RecordLinkage().compute(ctx)["rl"] == pytest.approx(distinct)
    if distinct == len(rel):
        assert RecordLinkage().compute(ctx)["rl"] == pytest.approx(len(rel))


def test_metrics_are_registered():
    reg = Registry()
    assert {"utility", "record_linkage", "kl_divergence", "query_error", "belief"} <= set(reg.names("metric"))
    assert isinstance(reg.create("metric", "kl_divergence"), KLDivergence)
    assert reg.create("metric", "query_error", {"queries": 5}).params.queries == 5


def test_publication_info_reports_its_numbers():
    from cdpbench.metrics.info import PublicationInfo

    reg = Registry()
    assert isinstance(reg.create("metric", "publication_info"), PublicationInfo)
    rel = Release(1, Schema((NumericQI("age", 0, 100),), Sensitive("s", ("a", "b"))), np.arange(2),
                  np.array([[30.0], [40.0]]), np.array([0, 1]))
    pub = Publication.from_partition(rel, np.zeros(2, dtype=np.int64),
                                     info={"anonymizer": "X", "counterfeits": 3, "delayed": 0, "exact": True,
                                           "ratio": 0.5, "nan": float("nan"), "nested": {"a": 1}})
    ctx = MetricContext(rel, pub, {}, None, np.random.default_rng(0))
    assert PublicationInfo().compute(ctx) == {"info.counterfeits": 3.0, "info.delayed": 0.0, "info.exact": 1.0,
                                             "info.ratio": 0.5}


def test_ncp_mean_is_the_mean_over_published_tuples_counterfeits_included():
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", ("a", "b")))
    rel = Release(1, schema, np.arange(5), np.array([[10.0], [30.0], [50.0], [50.0], [90.0]]), np.array([0, 1, 0, 1, 0]))
    pub = Publication.from_partition(rel, np.array([0, 0, 1, 1, -1]))  # NCP 0.2 (10-30), 0 (50-50); row 4 suppressed
    pub.group = np.concatenate([pub.group, [0]])  # a counterfeit in group 0
    pub.sensitive = np.concatenate([pub.sensitive, [1]])
    pub.respondent = np.concatenate([pub.respondent, [-1]])
    pub.row = np.concatenate([pub.row, [-1]])
    pub.counterfeit = np.concatenate([pub.counterfeit, [True]])
    out = UtilityMetrics(UtilityParams(ncp_range="domain")).compute(MetricContext(rel, pub, {}, None, np.random.default_rng(0)))
    assert out["ncp_mean"] == pytest.approx((0.2 * 3 + 0.0 * 2) / 5)
    assert out["gcp"] == pytest.approx(0.4) and out["gcp_norm"] == pytest.approx((0.4 + 1) / 5)


def test_view_regions_are_the_publication_regions():
    from cdpbench.regions import view_regions

    tax = Taxonomy.from_prefixes(["47901", "47902", "47905", "47302", "47304"])
    schema = Schema((NumericQI("age", 0, 100), CategoricalQI("zip", tax)), Sensitive("s", ("a", "b")))
    rng = np.random.default_rng(1)
    rel = Release(1, schema, np.arange(40), np.column_stack([rng.integers(20, 60, 40), rng.integers(0, 5, 40)]).astype(float),
                  rng.integers(0, 2, 40))
    pub = Publication.from_partition(rel, rng.integers(0, 6, 40))
    got, want = view_regions(pub.public()), _regions.publication_regions(pub)
    np.testing.assert_array_equal(got.low, want.low)
    np.testing.assert_array_equal(got.high, want.high)
    np.testing.assert_array_equal(got.sets[1], want.sets[1])
    np.testing.assert_array_equal(got.group, want.group)


def zip_generalization(rng, n: int, groups: int) -> tuple[Release, Publication]:
    """A release over (age 17-90, a 12-code zip prefix taxonomy, sex) with 3 sensitive values, and
    a random partition of it into ``groups`` taxonomy-generalized groups (some records suppressed)."""
    tax = Taxonomy.from_prefixes([f"47{a}{b}{c}" for a in "09" for b in "012" for c in "13"])
    schema = Schema((NumericQI("age", 17, 90), CategoricalQI("zip", tax), CategoricalQI("sex", Taxonomy.flat(["F", "M"]))),
                    Sensitive("s", ("a", "b", "c")))
    rel = Release(1, schema, np.arange(n), np.column_stack([rng.integers(17, 91, n), rng.integers(0, tax.size, n),
                                                            rng.integers(0, 2, n)]).astype(float), rng.integers(0, 3, n))
    return rel, Publication.from_partition(rel, rng.integers(-1, groups, n))


@pytest.mark.parametrize("seed", range(4))
def test_prefix_sums_and_meeting_blocks_agree(seed, monkeypatch):
    """KL and RL count the regions holding a point by prefix sums over the grid when every region
    is a box (covering_sums), else pair by pair (meeting_blocks): both give the same numbers; and
    covering_sums equals the dense brute force."""
    from cdpbench.metrics import kl as kl_module
    from cdpbench.metrics import linkage as linkage_module

    rng = np.random.default_rng(seed)
    rel, pub = zip_generalization(rng, 300, 25)
    schema, n = rel.schema, len(rel)
    regions = _regions.publication_regions(pub)
    w = rng.random((len(regions), 2))
    summed = _regions.covering_sums(rel.qi, regions, w, schema.categorical)
    inside = np.ones((n, len(regions)), dtype=bool)
    for j in range(3):
        if j in schema.categorical:
            inside &= regions.sets[j][:, rel.qi[:, j].astype(np.int64)].T
        else:
            inside &= (rel.qi[:, j][:, None] >= regions.low[:, j]) & (rel.qi[:, j][:, None] <= regions.high[:, j])
    np.testing.assert_allclose(summed, inside.astype(float) @ w, rtol=1e-12, atol=1e-12)
    fast = (kl_divergence(pub, rel), linkage_probabilities(pub, rel))
    monkeypatch.setattr(kl_module, "covering_sums", lambda *a: None)
    monkeypatch.setattr(linkage_module, "covering_sums", lambda *a: None)
    slow = (kl_divergence(pub, rel), linkage_probabilities(pub, rel))
    assert fast[0] == pytest.approx(slow[0], rel=1e-12, abs=1e-12)
    np.testing.assert_array_equal(fast[1], slow[1])
    # a set that is not a leaf range: no prefix sums
    sets = dict(regions.sets)
    sets[1] = sets[1].copy()
    sets[1][0] = False
    sets[1][0, [0, 2]] = True
    holes = _regions.Regions(regions.low, regions.high, sets, regions.group)
    assert _regions.covering_sums(rel.qi, holes, w, schema.categorical) is None


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("form", ["qi", "qi_sensitive"])
def test_query_lattice_sums_equal_the_group_by_group_answers(seed, form, monkeypatch):
    """On a lattice QI space (categorical leaf ranges, integral numeric domains) the query metric
    sums densities by prefix sums, and counts true answers over the grid of record values; both
    equal the pair-by-pair answers (point by point, group by group)."""
    from cdpbench.metrics import query as query_module
    from cdpbench.metrics.query import random_queries

    rng = np.random.default_rng(seed)
    rel, pub = zip_generalization(rng, 400, 30)
    queries = random_queries(rel, 200, 0.1, np.random.default_rng(seed), form, "nonempty")
    fast = query_answers(queries, rel, pub)
    monkeypatch.setattr(query_module, "_lattice_spread", lambda *a: None)
    monkeypatch.setattr(query_module, "GRID_BUDGET", 0)
    slow = query_answers(queries, rel, pub)
    np.testing.assert_array_equal(fast[0], slow[0])  # counts: integers either way
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-12, atol=1e-9)
    assert (slow[1] > 0).any() and (slow[0] > 0).any()


@pytest.mark.parametrize("seed", range(20))
def test_overlapping_pairs_match_brute_force(seed, monkeypatch):
    """cdpbench.regions.overlapping_pairs: regions of two releases with different QI sets meet on
    their shared columns (numeric intervals intersect, categorical leaf sets intersect), block by
    block; checked against every pair, with a block small enough to cut the matrix."""
    from cdpbench import regions as reg_mod
    from cdpbench.regions import Regions, overlapping_pairs

    rng = np.random.default_rng(seed)
    L = 5

    def regions(n, cat_cols, d):
        low = rng.integers(0, 8, size=(n, d)).astype(float)
        high = low + rng.integers(0, 4, size=(n, d))
        sets = {}
        for j in cat_cols:
            vs = rng.random((n, L)) < 0.35
            vs[np.arange(n), rng.integers(0, L, n)] = True
            sets[j] = vs
            low[:, j] = np.argmax(vs, axis=1)
            high[:, j] = L - 1 - np.argmax(vs[:, ::-1], axis=1)
        return Regions(low, high, sets, np.arange(n))

    a = regions(int(rng.integers(1, 12)), [1], 3)  # columns: num, cat, num
    b = regions(int(rng.integers(1, 12)), [0], 2)  # columns: cat, num
    columns = [(1, 0, True), (2, 1, False)]  # a's cat = b's col 0, a's col 2 = b's col 1
    monkeypatch.setattr(reg_mod, "BLOCK_CELLS", 7)
    got = set(zip(*(x.tolist() for x in overlapping_pairs(a, b, columns))))
    want = {(i, j) for i in range(len(a)) for j in range(len(b))
            if (a.sets[1][i] & b.sets[0][j]).any() and a.low[i, 2] <= b.high[j, 1] and b.low[j, 1] <= a.high[i, 2]}
    assert got == want
    assert len(set(zip(*(x.tolist() for x in overlapping_pairs(a, b, []))))) == len(a) * len(b)  # nothing shared
