"""The j_similarity privacy model (BayFrame Def. 7): the Jensen–Shannon divergence by hand (base 2
and other bases) and against scipy, basic β-likeness on its boundary and against the classic
beta_likeness model, one group failing each condition alone, levels, and one-line parameter
errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import ConfigError, DataError
from cdpbench.plugin import ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_bayframe.privacy_models.j_similarity import JSimilarity, JSimilarityParams, js_divergence, likeness_gain


def js_one(*rows, base: float = 2.0) -> float:
    rows = np.asarray(rows, dtype=float)
    return float(js_divergence(rows, np.zeros(len(rows), dtype=np.int64), 1, base)[0])


def h2(*p: float) -> float:
    """Entropy in bits, by hand."""
    return -sum(x * math.log2(x) for x in p if x > 0)


def ctx_for(table) -> ModelContext:
    table = np.asarray(table, dtype=float)
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", tuple(f"v{i}" for i in range(len(table)))))
    return ModelContext(schema, table)


def batch(groups: list[tuple[list[int], list[list[float]]]], m: int) -> GroupBatch:
    """Candidate groups from (sensitive codes, belief rows) pairs."""
    sens = np.array([s for g, _ in groups for s in g], dtype=np.int64)
    seg = np.array([i for i, (g, _) in enumerate(groups) for _ in g], dtype=np.int64)
    prior = np.array([row for _, rows in groups for row in rows], dtype=float).reshape(len(sens), m)
    return GroupBatch(sens, seg, len(groups), m, prior)


# ---------------------------------------------------------------------------- the divergence (Eq. 6)
def test_divergence_of_known_distributions_in_bits():
    # (1, 0) and (1/2, 1/2): mean (3/4, 1/4), H = 0.811278 bits; mean entropy (0 + 1)/2 = 1/2
    assert js_one([1, 0], [0.5, 0.5]) == pytest.approx(h2(0.75, 0.25) - 0.5, abs=1e-15)
    assert js_one([1, 0], [0.5, 0.5]) == pytest.approx(0.3112781244591328, abs=1e-15)
    assert js_one([1, 0], [0, 1]) == pytest.approx(1.0, abs=1e-15)  # disjoint point masses: 1 bit
    assert js_one([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == pytest.approx(0.0, abs=1e-15)
    assert js_one([0.7, 0.3]) == 0.0  # one respondent
    # three disjoint point masses: log2 3 > 1 (the [0, 1] bound is for two distributions only)
    assert js_one([1, 0, 0], [0, 1, 0], [0, 0, 1]) == pytest.approx(math.log2(3), abs=1e-15)


def test_divergence_in_other_bases_is_rescaled():
    assert js_one([1, 0], [0, 1], base=math.e) == pytest.approx(math.log(2), abs=1e-15)
    bits = js_one([0.9, 0.1], [0.2, 0.8], [0.5, 0.5])
    assert js_one([0.9, 0.1], [0.2, 0.8], [0.5, 0.5], base=10) == pytest.approx(bits * math.log10(2), abs=1e-15)


def test_divergence_equals_scipy_for_pairs_and_is_judged_per_group():
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(5), size=40)
    segment = np.repeat(np.arange(20), 2)
    ours = js_divergence(rows, segment, 20)
    for g in range(20):
        a, b = rows[2 * g], rows[2 * g + 1]
        assert ours[g] == pytest.approx(jensenshannon(a, b, base=2) ** 2, abs=1e-12)
    # groups of different sizes judged in one call equal the groups judged one by one
    segment = rng.integers(0, 7, 40)
    together = js_divergence(rows, segment, 8)  # group 7 is empty: divergence 0
    alone = [js_one(*rows[segment == g]) if (segment == g).any() else 0.0 for g in range(8)]
    assert together == pytest.approx(alone, abs=1e-14)


def test_belief_rows_are_normalized_and_empty_rows_are_uniform():
    assert js_one([2, 0], [1, 1]) == pytest.approx(js_one([1, 0], [0.5, 0.5]), abs=1e-15)
    assert js_one([0, 0], [0.5, 0.5]) == pytest.approx(0.0, abs=1e-15)


# ---------------------------------------------------------------------------- basic beta-likeness
def test_likeness_gain_by_hand_and_on_its_boundary():
    table = np.array([0.25, 0.25, 0.5])
    # q = (1/2, 0, 1/2): only v0 gains, (1/2 - 1/4) / (1/4) = 1
    assert likeness_gain(np.array([[2, 0, 2]]), table).tolist() == [1.0]
    # q = (0, 0, 1): v2 gains (1 - 1/2) / (1/2) = 1; q = p: no gain
    assert likeness_gain(np.array([[0, 0, 3], [1, 1, 2]]), table).tolist() == [1.0, 0.0]
    # a value absent from the table has an infinite gain
    assert likeness_gain(np.array([[1, 1]]), np.array([1.0, 0.0])).tolist() == [math.inf]
    ctx = ctx_for(table)
    exactly_one = batch([([0, 0, 2, 2], [[1, 0, 0]] * 4)], 3)
    assert JSimilarity(JSimilarityParams(k=1, j=1.0, beta=1.0)).accepts(exactly_one, ctx).tolist() == [True]
    assert JSimilarity(JSimilarityParams(k=1, j=1.0, beta=0.999)).accepts(exactly_one, ctx).tolist() == [False]


def test_values_with_table_share_at_least_one_over_one_plus_beta_never_violate():
    # beta = 3: p_s = 1/4 = 1/(1 + beta); a group holding only s has gain exactly 3
    table = np.array([0.25, 0.75])
    assert likeness_gain(np.array([[5, 0]]), table).tolist() == [3.0]
    model = JSimilarity(JSimilarityParams(k=1, j=1.0, beta=3.0))
    assert model.accepts(batch([([0] * 5, [[0.5, 0.5]] * 5)], 2), ctx_for(table)).tolist() == [True]


def test_likeness_agrees_with_the_classic_basic_beta_likeness_model():
    classic = default_registry().create("privacy_model", "beta_likeness", {"beta": 1.5, "variant": "basic", "k": 1})
    ours = JSimilarity(JSimilarityParams(k=1, j=1.0, beta=1.5))
    rng = np.random.default_rng(3)
    for _ in range(30):
        m = int(rng.integers(2, 6))
        table = rng.dirichlet(np.ones(m))
        b = GroupBatch(rng.integers(0, m, 60), rng.integers(0, 12, 60), 12, m, np.full((60, m), 1.0 / m))
        ctx = ctx_for(table)
        assert ours.accepts(b, ctx).tolist() == classic.accepts(b, ctx).tolist()


# ---------------------------------------------------------------------------- the three conditions
def test_a_group_failing_each_condition_alone_is_rejected():
    # table (1/2, 1/4, 1/4); k = 3, j = 0.5 bits, beta = 1
    ctx = ctx_for([0.5, 0.25, 0.25])
    u = [1 / 3, 1 / 3, 1 / 3]
    groups = [
        ([0, 1, 2, 0], [u] * 4),  # q = p, JSD 0, 4 records: accepted
        ([1, 2], [u] * 2),  # (a) only 2 < k records
        ([0, 1, 2], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),  # (b) JSD = log2 3 = 1.58 > 0.5
        ([1, 1, 2], [u] * 3),  # (c) q_v1 = 2/3: gain (2/3 - 1/4) / (1/4) = 5/3 > 1
        ([0, 1, 2], [[0.9, 0.1, 0], [0.1, 0.9, 0], [0.5, 0.5, 0]]),  # JSD = 1 - (2 H(0.9) + 1)/3 = 0.354: accepted
    ]
    model = JSimilarity(JSimilarityParams(k=3, j=0.5, beta=1.0))
    assert model.accepts(batch(groups, 3), ctx).tolist() == [True, False, False, False, True]
    # the condition that failed, relaxed alone, lets each group through
    assert JSimilarity(JSimilarityParams(k=2, j=0.5, beta=1.0)).accepts(batch(groups[1:2], 3), ctx).tolist() == [True]
    assert JSimilarity(JSimilarityParams(k=3, j=1.0, beta=1.0)).accepts(batch(groups[2:3], 3), ctx).tolist() == [False]
    assert JSimilarity(JSimilarityParams(k=3, j=0.5, beta=5 / 3)).accepts(batch(groups[3:4], 3), ctx).tolist() == [True]


def test_levels_and_verify_of_a_publication():
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", ("a", "b")))
    release = Release(1, schema, np.arange(5), np.array([[10.0], [11], [12], [50], [51]]), np.array([0, 1, 0, 1, 1]))
    prior = np.array([[1, 0], [0.5, 0.5], [1, 0], [0.5, 0.5], [0.5, 0.5]])
    pub = Publication.from_partition(release, np.array([0, 0, 0, 1, 1]))
    ctx = ModelContext(schema, release.sensitive_distribution(), release=release, prior=prior)  # p = (2/5, 3/5)
    levels = JSimilarity().levels(pub, ctx)
    # group 0: JSD((1,0),(1/2,1/2),(1,0)) = H(5/6, 1/6) - 1/3; gain of a (2/3 - 2/5)/(2/5) = 2/3
    # group 1: JSD 0; gain of b (1 - 3/5)/(3/5) = 2/3
    assert levels["k"] == 2.0
    assert levels["jsd"] == pytest.approx(h2(5 / 6, 1 / 6) - 1 / 3, abs=1e-15)
    assert levels["beta"] == pytest.approx(2 / 3, abs=1e-15)
    report = JSimilarity(JSimilarityParams(k=2, j=0.4, beta=0.7)).verify(pub, ctx)
    assert report.satisfied and report.violations == 0
    report = JSimilarity(JSimilarityParams(k=3, j=0.4, beta=0.7)).verify(pub, ctx)
    assert not report.satisfied and report.violations == 1


def test_missing_or_misshapen_beliefs_are_one_line_errors():
    ctx = ctx_for([0.5, 0.5])
    b = GroupBatch(np.array([0, 1]), np.array([0, 0]), 1, 2, None)
    with pytest.raises(ConfigError, match="needs the defender's"):
        JSimilarity().accepts(b, ctx)
    b.prior = np.ones((2, 3))
    with pytest.raises(DataError, match=r"prior must have shape \(2, 2\)"):
        JSimilarity().accepts(b, ctx)


def test_parameters_are_checked():
    JSimilarityParams(k=1, j=0.0, beta=0.1)
    JSimilarityParams(j=1.0)  # 1 bit
    JSimilarityParams(j=0.69, log_base=math.e)  # ln 2 = 0.693
    with pytest.raises(ConfigError, match=r"^k must be an integer >= 1 \(got 0\)$"):
        JSimilarityParams(k=0)
    with pytest.raises(ConfigError, match=r"^j must be a number in \[0, log_2\(2\) = 1\] \(got 1.1\)$"):
        JSimilarityParams(j=1.1)
    with pytest.raises(ConfigError, match=r"log_2.71828\(2\) = 0.693147\] \(got 0.7\)"):
        JSimilarityParams(j=0.7, log_base=math.e)
    with pytest.raises(ConfigError, match=r"^beta must be a number > 0 \(got 0\)$"):
        JSimilarityParams(beta=0)
    with pytest.raises(ConfigError, match=r"^log_base must be a number > 1 \(got 1\)$"):
        JSimilarityParams(log_base=1)
    with pytest.raises(ConfigError, match=r"^j must be"):
        JSimilarityParams(j=-0.1)
