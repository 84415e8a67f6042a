"""(B,t)-privacy: JS divergence by hand, groups whose priors are equal (distance by hand), the k
requirement, verify/levels, parameter errors and a per-group brute-force oracle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_classic.privacy_models.bt_privacy import BTPrivacy, BTPrivacyParams, js_divergence

SENS = Sensitive("disease", ("a", "b", "c"))
SCHEMA = Schema((NumericQI("age", 0, 100),), SENS)


def release(rows: list[tuple]):
    frame = pd.DataFrame([(i, *r) for i, r in enumerate(rows)], columns=["id", "age", "disease"])
    return SCHEMA.encode(frame, 1)


def model(**kw) -> BTPrivacy:
    return BTPrivacy(BTPrivacyParams(**kw))


def context(rel) -> ModelContext:
    return ModelContext(schema=rel.schema, table_distribution=rel.sensitive_distribution(), release=rel)


def batch_of(rel, ctx, rows, segment, n_groups) -> GroupBatch:
    rows = np.asarray(rows)
    return GroupBatch(rel.sensitive[rows], np.asarray(segment), n_groups, rel.n_values, ctx.prior[rows], rel.qi[rows])


# ---------------------------------------------------------------------------- JS divergence
def test_js_divergence_by_hand():
    p = np.array([[0.5, 0.25, 0.25], [0.3, 0.3, 0.4], [1, 0, 0]])
    q = np.array([[1.0, 0, 0], [0.3, 0.3, 0.4], [0, 0.5, 0.5]])
    # M = (.75, .125, .125): KL(P||M) = .5 log2(2/3) + .5 = 0.2075187; KL(Q||M) = log2(4/3) = 0.4150375
    assert np.allclose(js_divergence(p, q), [0.5 * (0.5 * math.log2(2 / 3) + 0.5 + math.log2(4 / 3)), 0.0, 1.0])


# ---------------------------------------------------------------------------- groups of one QI value
# r0..r3 share age 30 (values a, a, b, c); r4, r5 (ages 70 and 100) are out of everybody's reach
# (distances 0.4, 0.7 and 0.3 = B: kernel 0).
# With B = 0.3 every one of r0..r3 has the prior (1/2, 1/4, 1/4); as their priors are equal, the
# Ω-posterior is the group's frequencies and the distance is JS(prior, frequencies).
ROWS = [(30, "a"), (30, "a"), (30, "b"), (30, "c"), (70, "b"), (100, "c")]
JS_AA = 0.5 * (0.5 * math.log2(2 / 3) + 0.5 + math.log2(4 / 3))  # posterior (1, 0, 0): 0.311278
# posterior (1/2, 1/2, 0): M = (1/2, 3/8, 1/8); KL(P||M) = .25 log2(2/3) + .25, KL(Q||M) = .5 log2(4/3)
JS_AB = 0.5 * (0.25 * math.log2(2 / 3) + 0.25 + 0.5 * math.log2(4 / 3))  # 0.155639


def test_prepare_sets_the_kernel_prior():
    rel = release(ROWS)
    ctx = context(rel)
    model(B=0.3).prepare(rel, ctx)
    # r0..r3 only see each other (kernel weight 1 each): counts a 2, b 1, c 1 out of 4
    assert np.allclose(ctx.prior[:4], [0.5, 0.25, 0.25])
    # r4 (70) and r5 (100) are 0.3 apart = B: weight 1 - (0.3/0.3)^2 = 0, each only sees itself
    assert np.allclose(ctx.prior[4:], [[0, 1, 0], [0, 0, 1]])


# ---------------------------------------------------------------------------- unequal priors by hand
# Two ages 0.15 apart (domain width 100), B = 0.3: Epanechnikov weight 1 - (0.15/0.3)^2 = 3/4
# between them, 1 within the same age.
#   r0 (30, a)  r1 (30, b)  r2 (45, b)  r3 (45, c)
# P_pri(age 30) = (a: 1, b: 1 + 3/4, c: 3/4) / 3.5 = (2/7, 1/2, 3/14)
# P_pri(age 45) = (a: 3/4, b: 3/4 + 1, c: 1) / 3.5 = (3/14, 1/2, 2/7)
KERNEL_ROWS = [(30, "a"), (30, "b"), (45, "b"), (45, "c")]
PRIOR_30 = [2 / 7, 1 / 2, 3 / 14]
PRIOR_45 = [3 / 14, 1 / 2, 2 / 7]
# Group {r0, r2} publishes a, b: n(a) = n(b) = 1, column sums Σ p(·, a) = 2/7 + 3/14 = 1/2,
# Σ p(·, b) = 1/2 + 1/2 = 1.
#   Ω(r0) = (1 · (2/7) / (1/2), 1 · (1/2) / 1, 0) = (4/7, 1/2, 0), sum 15/14 -> P_post(r0) = (8/15, 7/15, 0)
#   Ω(r2) = (1 · (3/14) / (1/2), 1 · (1/2) / 1, 0) = (3/7, 1/2, 0), sum 13/14 -> P_post(r2) = (6/13, 7/13, 0)
POST_R0 = [8 / 15, 7 / 15, 0]
POST_R2 = [6 / 13, 7 / 13, 0]
# JS(r0): M = ((2/7 + 8/15)/2, (1/2 + 7/15)/2, (3/14)/2) = (43/105, 29/60, 3/28)
#   KL(P||M) = 2/7 log2(30/43) + 1/2 log2(30/29) + 3/14 log2(2)
#   KL(Q||M) = 8/15 log2(56/43) + 7/15 log2(28/29)
JS_R0 = 0.5 * (2 / 7 * math.log2(30 / 43) + 0.5 * math.log2(30 / 29) + 3 / 14 + 8 / 15 * math.log2(56 / 43) + 7 / 15 * math.log2(28 / 29))
# JS(r2): M = ((3/14 + 6/13)/2, (1/2 + 7/13)/2, (2/7)/2) = (123/364, 27/52, 1/7)
#   KL(P||M) = 3/14 log2(26/41) + 1/2 log2(26/27) + 2/7 log2(2)
#   KL(Q||M) = 6/13 log2(56/41) + 7/13 log2(28/27)
JS_R2 = 0.5 * (3 / 14 * math.log2(26 / 41) + 0.5 * math.log2(26 / 27) + 2 / 7 + 6 / 13 * math.log2(56 / 41) + 7 / 13 * math.log2(28 / 27))
# (JS_R0 = 0.134985, JS_R2 = 0.176767: the group distance is JS_R2)


def test_kernel_prior_with_fractional_weights_by_hand():
    rel = release(KERNEL_ROWS)
    ctx = context(rel)
    model(B=0.3).prepare(rel, ctx)
    assert np.allclose(ctx.prior, [PRIOR_30, PRIOR_30, PRIOR_45, PRIOR_45], atol=1e-12)
    # a wider bandwidth weighs the other age more: B = 0.5 -> 1 - (0.15/0.5)^2 = 0.91;
    # P_pri(30) = (1, 1.91, 0.91) / 3.82
    model(B=0.5).prepare(rel, ctx)
    assert np.allclose(ctx.prior[0], np.array([1, 1.91, 0.91]) / 3.82, atol=1e-12)
    # B = 0.15: the other age sits exactly on the support's edge, weight 0
    model(B=0.15).prepare(rel, ctx)
    assert np.allclose(ctx.prior, [[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0.5, 0.5], [0, 0.5, 0.5]], atol=1e-12)


def test_unequal_priors_omega_posterior_and_distance_by_hand():
    rel = release(KERNEL_ROWS)
    ctx = context(rel)
    m = model(B=0.3, t=0.2)
    m.prepare(rel, ctx)
    # the hand values agree with scipy's JS distance (squared: the divergence)
    assert JS_R0 == pytest.approx(jensenshannon(PRIOR_30, POST_R0, base=2) ** 2, abs=1e-12)
    assert JS_R2 == pytest.approx(jensenshannon(PRIOR_45, POST_R2, base=2) ** 2, abs=1e-12)
    # groups {r0, r2} and {r1, r3} in one batch; {r1, r3} is {r0, r2} mirrored (a <-> c,
    # 30 <-> 45), so r1 has r2's distance and r3 has r0's
    b = batch_of(rel, ctx, [0, 1, 2, 3], [0, 1, 0, 1], 2)
    assert np.allclose(m.distances(b), [JS_R0, JS_R2, JS_R2, JS_R0], atol=1e-12)
    assert np.allclose(m.group_distances(b), [JS_R2, JS_R2], atol=1e-12)
    # thresholds on either side of the worst record's distance 0.176767 (not of the best 0.134985)
    assert model(B=0.3, t=0.176).accepts(b, ctx).tolist() == [False, False]
    assert model(B=0.3, t=0.177).accepts(b, ctx).tolist() == [True, True]
    # the whole table as one group: n = (1, 2, 1), column sums (1, 2, 1), so Ω(r) = P_pri(r): 0
    whole = batch_of(rel, ctx, [0, 1, 2, 3], [0, 0, 0, 0], 1)
    assert np.allclose(m.distances(whole), 0.0, atol=1e-12)
    assert model(B=0.3, t=0.0).accepts(whole, ctx).tolist() == [True]


def test_groups_sharing_one_qi_value_distance_by_hand():
    rel = release(ROWS)
    ctx = context(rel)
    m = model(B=0.3, t=0.2)
    m.prepare(rel, ctx)
    # groups: {r0, r1} (a, a), {r0', r2} is impossible in one batch, so three batches
    b_aa = batch_of(rel, ctx, [0, 1], [0, 0], 1)
    b_ab = batch_of(rel, ctx, [0, 2], [0, 0], 1)
    b_all = batch_of(rel, ctx, [0, 1, 2, 3], [0, 0, 0, 0], 1)
    assert np.allclose(m.distances(b_aa), JS_AA)
    assert np.allclose(m.distances(b_ab), JS_AB)
    assert np.allclose(m.distances(b_all), 0.0, atol=1e-12)
    # the hand formulas agree with scipy's JS distance (squared: the divergence)
    assert JS_AA == pytest.approx(jensenshannon([0.5, 0.25, 0.25], [1, 0, 0], base=2) ** 2, abs=1e-12)
    assert JS_AB == pytest.approx(jensenshannon([0.5, 0.25, 0.25], [0.5, 0.5, 0], base=2) ** 2, abs=1e-12)
    for t, aa, ab in [(0.15, False, False), (0.16, False, True), (0.31, False, True), (0.32, True, True)]:
        mt = model(B=0.3, t=t)
        assert mt.accepts(b_aa, ctx).tolist() == [aa]
        assert mt.accepts(b_ab, ctx).tolist() == [ab]
    # posterior == prior: accepted even with t = 0
    assert model(B=0.3, t=0.0).accepts(b_all, ctx).tolist() == [True]


def test_several_candidate_groups_in_one_batch_and_k():
    rel = release(ROWS)
    ctx = context(rel)
    model().prepare(rel, ctx)
    # group 0 = {r0, r2} (JS_AB), group 1 = {r1, r3}: a, c -> same distance by symmetry,
    # group 2 = {r4, r5}: priors are point masses on their own values: posteriors (1/2, 1/2) on b,c
    b = batch_of(rel, ctx, [0, 1, 2, 3, 4, 5], [0, 1, 0, 1, 2, 2], 3)
    m = model(B=0.3, t=0.2)
    # r4: prior (0,1,0), Ω = (0, 1*1/1, 1*0/1) -> (0, 1, 0): distance 0; the same for r5
    assert np.allclose(m.group_distances(b), [JS_AB, JS_AB, 0.0])
    assert m.accepts(b, ctx).tolist() == [True, True, True]
    assert model(B=0.3, t=0.1).accepts(b, ctx).tolist() == [False, False, True]
    assert model(B=0.3, t=1.0, k=3).accepts(b, ctx).tolist() == [False, False, False]
    assert model(B=0.3, t=1.0, k=2).accepts(b, ctx).tolist() == [True, True, True]


def test_verify_and_levels_on_a_publication():
    rel = release(ROWS)
    ctx = context(rel)
    m = model(B=0.3, t=0.2, k=2)
    m.prepare(rel, ctx)
    pub = Publication.from_partition(rel, np.array([0, 1, 0, 1, 2, 2]))
    report = m.verify(pub, ctx)
    assert report.satisfied and report.violations == 0
    assert report.levels == pytest.approx({"k": 2.0, "t": JS_AB})
    bad = Publication.from_partition(rel, np.array([0, 0, 1, 1, 2, 2]))  # {a, a}, {b, c}, {b, c}
    report = m.verify(bad, ctx)
    assert not report.satisfied and report.violations == 2  # {a,a}: JS_AA; {b,c} at age 30: JS_AA
    assert report.levels["t"] == pytest.approx(JS_AA)


def test_accepts_without_prior_is_a_clear_error():
    rel = release(ROWS)
    ctx = context(rel)
    b = GroupBatch(rel.sensitive, np.zeros(len(rel), dtype=np.int64), 1, rel.n_values)
    with pytest.raises(ConfigError, match="prepare"):
        model().accepts(b, ctx)


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "kw, message",
    [
        ({"B": 0}, r"^B must be a number > 0 \(got 0\)$"),
        ({"B": -0.1}, r"^B must be a number > 0 \(got -0\.1\)$"),
        ({"t": 1.5}, r"^t must be a number in \[0, 1\] \(got 1\.5\)$"),
        ({"t": -0.01}, r"^t must be a number in \[0, 1\] \(got -0\.01\)$"),
        ({"k": 0}, r"^k must be an integer >= 1 \(got 0\)$"),
    ],
)
def test_parameter_errors_name_the_field(kw, message):
    with pytest.raises(ConfigError, match=message):
        BTPrivacyParams(**kw)
    field = next(iter(kw))
    with pytest.raises(ConfigError, match=rf"^privacy_model\.{field} must be .* \(got ") as e:
        default_registry().create("privacy_model", "bt_privacy", kw)
    assert "\n" not in str(e.value)


def test_defaults_and_registry():
    m = default_registry().create("privacy_model", "bt_privacy")
    assert isinstance(m, BTPrivacy)
    assert (m.params.B, m.params.t, m.params.k) == (0.3, 0.2, 1)


# ---------------------------------------------------------------------------- brute force
SCHEMA2 = Schema((NumericQI("age", 0, 100), NumericQI("weight", 40, 120)), SENS)


def naive_kernel_prior(rows: list[tuple], B: float) -> list[list[float]]:
    """P_pri(B, q_i)[s] = Σ_j K_B(q_i, q_j) [s_j = s] / Σ_j K_B(q_i, q_j), product Epanechnikov
    kernel K_B = Π_a (1 - (d_a / B)^2) if every d_a < B else 0, d_a = |x - y| / domain width;
    one pair at a time."""
    widths = [100, 80]
    out = []
    for age_i, weight_i, _ in rows:
        mass = {"a": 0.0, "b": 0.0, "c": 0.0}
        for age_j, weight_j, s_j in rows:
            k = 1.0
            for x, y, width in [(age_i, age_j, widths[0]), (weight_i, weight_j, widths[1])]:
                d = abs(x - y) / width
                k *= 1 - (d / B) ** 2 if d < B else 0.0
            mass[s_j] += k
        total = sum(mass.values())
        out.append([mass[v] / total for v in "abc"])
    return out


def naive_group_distance(prior: list[list[float]], sensitive: list[str]) -> float:
    """Largest JS divergence in one group: Ω-estimate and JS written out with loops and log2."""
    n = len(sensitive)
    worst = 0.0
    for r in range(n):
        om = []
        for j, s in enumerate("abc"):
            count = sensitive.count(s)
            column = sum(prior[q][j] for q in range(n))
            om.append(count * prior[r][j] / column if column > 0 else count / n)
        post = [x / sum(om) for x in om]
        js = 0.0
        for j in range(3):
            mid = (prior[r][j] + post[j]) / 2
            if prior[r][j] > 0:
                js += 0.5 * prior[r][j] * math.log2(prior[r][j] / mid)
            if post[j] > 0:
                js += 0.5 * post[j] * math.log2(post[j] / mid)
        worst = max(worst, js)
    return worst


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 100), st.integers(40, 120), st.sampled_from("abc")), min_size=2, max_size=30),
    st.integers(1, 5),
    st.sampled_from([0.1, 0.3, 0.6]),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_accepts_matches_a_per_group_loop(rows, n_groups, B, t, seed):
    frame = pd.DataFrame([(i, *r) for i, r in enumerate(rows)], columns=["id", "age", "weight", "disease"])
    rel = SCHEMA2.encode(frame, 1)
    ctx = context(rel)
    m = model(B=B, t=t)
    m.prepare(rel, ctx)
    prior = naive_kernel_prior(rows, B)
    assert np.allclose(ctx.prior, prior, atol=1e-9)
    segment = np.random.default_rng(seed).integers(0, n_groups, len(rel)).tolist()
    b = GroupBatch(rel.sensitive, np.array(segment), n_groups, rel.n_values, ctx.prior, rel.qi)
    expected = []
    for g in range(n_groups):
        members = [i for i in range(len(rows)) if segment[i] == g]
        d = naive_group_distance([prior[i] for i in members], [rows[i][2] for i in members]) if members else 0.0
        expected.append(d)
    assert np.allclose(m.group_distances(b), expected, atol=1e-9)
    ok = m.accepts(b, ctx)
    # k = 1: a group is accepted iff it is not empty and its worst distance is <= t
    sizes = [segment.count(g) for g in range(n_groups)]
    assert ok.tolist() == [d <= t + 1e-12 and size >= 1 for d, size in zip(expected, sizes)]
    # monotone in t: a looser threshold accepts a superset
    assert np.all(model(B=B, t=min(1.0, t + 0.1)).accepts(b, ctx) >= ok)
