"""JS-reduce through the privacy model's running per-group statistics (``PrivacyModel.extension``):
the leftover merge (``accepts_plus``: every group plus one record) and the scan and stuck-start
search (``accepts_prefixes``: every prefix of many starts, running sums restarted at each start)
close exactly the groups, set aside and place exactly the records the paths through ``accepts``
do — on bkseq releases of the real Fig. 4 pipeline (defender DK beliefs) and on random releases
with random beliefs, every t-closeness ground distance, raw / zero / point-mass beliefs and
random parameters — and never ask ``accepts``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import History
from cdpbench.plugin import GroupExtension, ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce.anonymizers import js_reduce
from cdpbench.greedy import prefix_judge as _prefix_judge
from cdpbench_jsreduce.anonymizers.js_reduce import greedy_partition, hilbert_order

REG = default_registry()
CONF = Path(__file__).resolve().parents[3] / "conf"
KEYS = ("n_groups", "leftovers", "merged", "set_aside", "suppressed")


def counting(accepts):
    calls = {"n": 0}

    def wrapped(rows, segment, n_groups):
        calls["n"] += 1
        return accepts(rows, segment, n_groups)

    return wrapped, calls


def same_partition(order, accepts, extension, **opts):
    """The partition through ``accepts`` and through ``extension`` (which must not ask ``accepts``)
    are identical; returns the fast path's counts."""
    old, old_stats = greedy_partition(order, accepts, **opts)
    wrapped, calls = counting(accepts)
    new, new_stats = greedy_partition(order, wrapped, extension=extension, **opts)
    assert calls["n"] == 0, "the fast path never asks accepts"
    np.testing.assert_array_equal(new, old)  # every group, and every suppressed row (-1)
    for key in KEYS:
        assert new_stats[key] == old_stats[key], key
    return new_stats


class NoPrefixes(GroupExtension):
    """An extension that merges through running statistics but offers no prefix judgments."""

    def __init__(self, inner):
        self.inner = inner

    def accepts_plus(self, row):
        return self.inner.accepts_plus(row)

    def add(self, g, row):
        self.inner.add(g, row)


def without_prefixes(start):
    def old_contract(rows, segment, n_groups):
        inner = start(rows, segment, n_groups)
        return None if inner is None else NoPrefixes(inner)

    return old_contract


# ---------------------------------------------------------------------------- the real pipeline
def test_fast_paths_equal_accepts_on_fig4_bkseq_releases(monkeypatch):
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs

    seen = dict.fromkeys(("releases", "set_aside", "groups", "merged", "suppressed"), 0)
    real = js_reduce.greedy_partition

    def checking(order, accepts, *, extension=None, **params):
        assert extension is not None and _prefix_judge(extension) is not None, "js_reduce offers both fast paths"
        assert params["max_group"] > 0 and params["leftovers"] == "merge"
        stats = same_partition(order, accepts, extension, **params)
        same_partition(order, accepts, extension, **{**params, "leftovers": "suppress"})
        seen["releases"] += 1
        seen["set_aside"] += stats["set_aside"]
        seen["groups"] += stats["n_groups"]
        seen["merged"] += stats["merged"]
        seen["suppressed"] += stats["suppressed"]
        return real(order, accepts, extension=extension, **params)

    monkeypatch.setattr(js_reduce, "greedy_partition", checking)
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "+experiment=js_reduce/fig4",
                "+experiment/js_reduce/method=js_reduce",
                "dataset.releases=6",
                "extra_attackers=null",
            ],
        )
    runner.run_releases(cfg, runner.build(cfg), progress=False)
    assert seen["releases"] == 6
    # stuck starts, closed groups, merged and suppressed leftovers were all exercised
    assert min(seen["set_aside"], seen["groups"], seen["merged"], seen["suppressed"]) > 0


# ---------------------------------------------------------------------------- random releases
SENSITIVE_TAX = Taxonomy.from_paths([["a", "A", "*"], ["b", "A", "*"], ["c", "C", "*"], ["d", "C", "*"], ["e", "C", "*"]])


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 200))
    distance = draw(st.sampled_from(["equal", "ordered", "hierarchical"]))
    if distance == "hierarchical":
        sensitive = Sensitive("s", SENSITIVE_TAX.leaves, taxonomy=SENSITIVE_TAX)
    else:
        sensitive = Sensitive("s", tuple("abcdefghij"[: draw(st.integers(2, 10))]), ordered=True)
    m = sensitive.size
    schema = Schema((NumericQI("x", 0, 30), NumericQI("y", 0, 30)), sensitive)
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "x": rng.integers(0, 31, n),
            "y": rng.integers(0, 31, n),
            "s": rng.choice(list(sensitive.values), n, p=rng.dirichlet(np.ones(m))),
        }
    )
    release = schema.encode(frame, 1)
    prior = rng.dirichlet(np.full(m, draw(st.sampled_from([0.05, 0.2, 1.0, 5.0, 50.0]))), size=n)
    prior[rng.random((n, m)) < draw(st.sampled_from([0.0, 0.3, 0.7]))] = 0.0  # some rows all zero: uniform
    if draw(st.booleans()):  # point masses (entropy -0.0) and signed zeros
        hot = rng.random(n) < 0.5
        prior[hot] = np.eye(m)[rng.integers(0, m, hot.sum())]
        prior[prior == 0.0] = -0.0
    prior *= rng.choice([1.0, 0.3, 7.0, 1e-3], size=(n, 1))  # raw, unnormalized beliefs
    k = draw(st.integers(1, 6))
    t = draw(st.sampled_from([0.1, 0.2, 0.35, 0.5, 1.0]))
    j = draw(st.sampled_from([0.0, 0.05, 0.2, 0.4, 0.6, 1.0]))
    params = {"k": k, "j": j, "closeness": {"t": t, "distance": distance}}
    return release, prior, params


def contexts(release, prior, params):
    model = REG.create("privacy_model", "js_reduce", params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    return PublishContext(model, mctx, History(), np.random.default_rng(0), prior)


@settings(max_examples=200, deadline=None)
@given(
    cases(),
    st.sampled_from([0, 1, 2, 5, 32]),
    st.sampled_from([1, 8]),
    st.sampled_from(["suppress", "merge"]),
    st.booleans(),
    st.booleans(),
)
def test_fast_paths_equal_accepts_on_random_beliefs(case, max_group, window, leftovers, prefixes, nearest_first):
    """Both fast paths, or the merge alone (an extension without prefix judgments); the merge
    judging all groups at once or, as for large releases, nearest first in blocks."""
    release, prior, params = case
    ctx = contexts(release, prior, params)
    extension = ctx.extension(release)
    assert extension is not None and _prefix_judge(extension) is not None
    order, accepts = hilbert_order(release), ctx.predicate(release)
    opts = {"window": window, "leftovers": leftovers, "max_group": max_group}
    threshold = js_reduce._NEAREST_FIRST_FROM
    js_reduce._NEAREST_FIRST_FROM = 0 if nearest_first else threshold
    try:
        if prefixes:
            same_partition(order, accepts, extension, **opts)
        elif leftovers == "merge":  # an extension without prefix judgments only merges (the scan asks accepts)
            old, _ = greedy_partition(order, accepts, **opts)
            new, _ = greedy_partition(order, accepts, extension=without_prefixes(extension), **opts)
            np.testing.assert_array_equal(new, old)
    finally:
        js_reduce._NEAREST_FIRST_FROM = threshold


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_accepts_prefixes_equals_accepts_on_every_prefix(case, length, seed):
    """The judgment itself: ``accepts_prefixes`` on random (also repeated-record) sequences is
    ``accepts`` on every prefix, for the JS-reduce model and for its t-closeness model."""
    release, prior, params = case
    ctx = contexts(release, prior, params)
    n = len(release)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=(int(rng.integers(1, 6)), length))
    B, L = rows.shape
    segment = np.repeat(np.arange(B * L), np.tile(np.arange(1, L + 1), B))
    flat = np.concatenate([r[:l] for r in rows for l in range(1, L + 1)])
    expected = ctx.predicate(release)(flat, segment, B * L).reshape(B, L)
    empty = np.zeros(0, dtype=np.int64)
    ext = ctx.extension(release)(empty, empty, 0)
    np.testing.assert_array_equal(ext.accepts_prefixes(rows), expected)

    closeness = ctx.privacy_model.closeness
    cctx = PublishContext(closeness, ctx.model_context, History(), np.random.default_rng(0), prior)
    expected_t = cctx.predicate(release)(flat, segment, B * L).reshape(B, L)
    np.testing.assert_array_equal(cctx.extension(release)(empty, empty, 0).accepts_prefixes(rows), expected_t)


# ---------------------------------------------------------------------------- the fallback
def test_scan_falls_back_to_accepts_without_prefix_judgments():
    rng = np.random.default_rng(3)
    n, m = 300, 4
    schema = Schema((NumericQI("x", 0, 30), NumericQI("y", 0, 30)), Sensitive("s", tuple("abcd"), ordered=True))
    frame = pd.DataFrame({"id": np.arange(n), "x": rng.integers(0, 31, n), "y": rng.integers(0, 31, n), "s": rng.choice(list("abcd"), n)})
    release = schema.encode(frame, 1)
    prior = rng.dirichlet(np.full(m, 0.3), size=n)
    ctx = contexts(release, prior, {"k": 3, "j": 0.4, "closeness": {"t": 0.35}})
    start = ctx.extension(release)
    old_contract = without_prefixes(start)
    assert GroupExtension().accepts_prefixes(np.zeros((0, 1), dtype=np.int64)) is None  # the default
    assert _prefix_judge(old_contract) is None and _prefix_judge(None) is None
    order = hilbert_order(release)
    accepts = ctx.predicate(release)
    opts = {"window": 8, "leftovers": "merge", "max_group": 8}
    old, old_stats = greedy_partition(order, accepts, **opts)
    wrapped, calls = counting(accepts)
    new, _ = greedy_partition(order, wrapped, extension=old_contract, **opts)
    assert calls["n"] > 0  # the scan asked accepts
    np.testing.assert_array_equal(new, old)
    fast, _ = greedy_partition(order, accepts, extension=start, **opts)
    np.testing.assert_array_equal(fast, old)
    assert old_stats["set_aside"] > 0 and old_stats["n_groups"] > 0


def test_extension_is_offered_only_by_models_that_have_one():
    schema = Schema((NumericQI("x", 0, 9),), Sensitive("s", ("a", "b")))
    release = schema.encode(pd.DataFrame({"id": range(6), "x": range(6), "s": list("ababab")}), 1)
    prior = np.full((6, 2), 0.5)
    mctx = ModelContext(schema, release.sensitive_distribution(), release=release, prior=prior)
    for name, params, offered in (("k_anonymity", {"k": 2}, False), ("t_closeness", {"t": 0.5}, True), ("js_reduce", {}, True)):
        model = REG.create("privacy_model", name, params)
        ctx = PublishContext(model, mctx, History(), np.random.default_rng(0), prior)
        assert (ctx.extension(release) is not None) == offered, name

    class Judging(type(REG.create("privacy_model", "js_reduce", {}))):
        def accepts(self, batch, ctx):  # a subclass that judges otherwise must not get the fast path
            return super().accepts(batch, ctx) & False

    ctx = PublishContext(Judging(REG.params("privacy_model", "js_reduce", {})), mctx, History(), np.random.default_rng(0), prior)
    assert ctx.extension(release)(np.arange(6), np.repeat(np.arange(3), 2), 3) is None


# ---------------------------------------------------------------------------- nearest-first blocks
def test_the_extension_judges_a_few_groups_as_it_judges_all():
    """``accepts_plus_among`` of the JS-reduce and t-closeness extensions equals ``accepts_plus``
    picked at those groups, bit for bit, on a bkseq-like view with its groups."""
    import sys

    sys.path.insert(0, str(CONF.parent))
    from benchmarks.bench_js_reduce import bkseq_like_view

    release, prior = bkseq_like_view(np.random.default_rng(7), n=3000)
    ctx = contexts(release, prior, {"k": 3, "j": 0.6, "closeness": {"t": 0.5}})
    rng = np.random.default_rng(1)
    members = rng.permutation(3000)[:2400]
    segment = np.sort(rng.integers(0, 300, 2400))
    ext = ctx.extension(release)(members, segment, 300)
    for row in rng.integers(0, 3000, 50):
        groups = rng.choice(300, size=int(rng.integers(1, 40)), replace=False)
        np.testing.assert_array_equal(ext.accepts_plus_among(int(row), groups), np.asarray(ext.accepts_plus(int(row)))[groups])
        np.testing.assert_array_equal(ext.closeness.accepts_plus_among(int(row), groups), np.asarray(ext.closeness.accepts_plus(int(row)))[groups])
        ext.add(int(rng.integers(0, 300)), int(row))
