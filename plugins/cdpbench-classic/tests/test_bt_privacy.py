"""(B,t)-privacy: JS divergence by hand, groups whose priors are equal (distance by hand), the k
requirement, verify/levels, parameter errors and a per-group brute-force oracle."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_classic.bt_privacy import BTPrivacy, BTPrivacyParams, js_divergence
from cdpbench_classic.knowledge import kernel_prior

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
    assert np.allclose(ctx.prior[:4], [0.5, 0.25, 0.25])
    assert np.allclose(ctx.prior[4:], [[0, 1, 0], [0, 0, 1]])
    assert np.allclose(ctx.prior, kernel_prior(rel, 0.3))


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
    assert JS_AA == pytest.approx(0.311278, abs=1e-6) and JS_AB == pytest.approx(0.155639, abs=1e-6)
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
def naive_group_distance(prior: np.ndarray, sensitive: np.ndarray) -> float:
    """Largest JS divergence in one group: Ω-estimate and JS written out with loops and log2."""
    n, m = prior.shape
    counts = np.bincount(sensitive, minlength=m)
    worst = 0.0
    for r in range(n):
        om = [counts[s] * prior[r, s] / prior[:, s].sum() if prior[:, s].sum() > 0 else counts[s] / n for s in range(m)]
        post = [x / sum(om) for x in om]
        js = 0.0
        for s in range(m):
            mid = (prior[r, s] + post[s]) / 2
            if prior[r, s] > 0:
                js += 0.5 * prior[r, s] * math.log2(prior[r, s] / mid)
            if post[s] > 0:
                js += 0.5 * post[s] * math.log2(post[s] / mid)
        worst = max(worst, js)
    return worst


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 100), st.sampled_from("abc")), min_size=2, max_size=30),
    st.integers(1, 5),
    st.sampled_from([0.1, 0.3, 0.6]),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_accepts_matches_a_per_group_loop(rows, n_groups, B, t, seed):
    rel = release(rows)
    ctx = context(rel)
    m = model(B=B, t=t)
    m.prepare(rel, ctx)
    segment = np.random.default_rng(seed).integers(0, n_groups, len(rel))
    b = GroupBatch(rel.sensitive, segment, n_groups, rel.n_values, ctx.prior, rel.qi)
    expected = []
    for g in range(n_groups):
        members = np.flatnonzero(segment == g)
        d = naive_group_distance(ctx.prior[members], rel.sensitive[members]) if len(members) else 0.0
        expected.append(d)
    assert np.allclose(m.group_distances(b), expected, atol=1e-9)
    ok = m.accepts(b, ctx)
    sizes = np.bincount(segment, minlength=n_groups)
    assert ok.tolist() == [d <= t + 1e-12 and size >= 1 for d, size in zip(expected, sizes)]
    # monotone in t: a looser threshold accepts a superset
    assert np.all(model(B=B, t=min(1.0, t + 0.1)).accepts(b, ctx) >= ok)
