"""The merge of leftovers through the privacy model's running per-group statistics
(``PrivacyModel.extension``) places every leftover exactly where the block search through
``accepts`` places it: on bkseq releases of the real Fig. 4 pipeline (defender DK beliefs) and on
random releases with random beliefs, every t-closeness ground distance and raw / zero beliefs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import History
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce import js_reduce
from cdpbench_jsreduce.js_reduce import greedy_partition, hilbert_order

REG = default_registry()
CONF = Path(__file__).resolve().parents[3] / "conf"


def both_paths(order, accepts, extension, **params):
    """``greedy_partition`` through the old block search (no extension) and through the extension."""
    old, old_stats = greedy_partition(order, accepts, **params)
    new, new_stats = greedy_partition(order, accepts, extension=extension, **params)
    return old, old_stats, new, new_stats


# ---------------------------------------------------------------------------- the real pipeline
def test_extension_merge_equals_block_search_on_fig4_bkseq_releases(monkeypatch):
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs

    seen = {"releases": 0, "leftovers": 0, "merged": 0, "suppressed": 0}
    real = js_reduce.greedy_partition

    def checking(order, accepts, *, extension=None, **params):
        assert extension is not None, "js_reduce offers the fast path"
        old, old_stats = real(order, accepts, **params)
        new, new_stats = real(order, accepts, extension=extension, **params)
        np.testing.assert_array_equal(new, old)  # every group, and every suppressed row (-1)
        for key in ("n_groups", "leftovers", "merged", "set_aside", "suppressed"):
            assert new_stats[key] == old_stats[key], key
        seen["releases"] += 1
        seen["leftovers"] += new_stats["leftovers"]
        seen["merged"] += new_stats["merged"]
        seen["suppressed"] += new_stats["suppressed"]
        return new, new_stats

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
    assert seen["merged"] > 0 and seen["suppressed"] > 0  # both outcomes of a leftover were exercised
    assert seen["leftovers"] == seen["merged"] + seen["suppressed"]


# ---------------------------------------------------------------------------- random releases
SENSITIVE_TAX = Taxonomy.from_paths([["a", "A", "*"], ["b", "A", "*"], ["c", "C", "*"], ["d", "C", "*"], ["e", "C", "*"]])


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 160))
    distance = draw(st.sampled_from(["equal", "ordered", "hierarchical"]))
    if distance == "hierarchical":
        sensitive = Sensitive("s", SENSITIVE_TAX.leaves, taxonomy=SENSITIVE_TAX)
    else:
        sensitive = Sensitive("s", tuple("abcdefg"[: draw(st.integers(2, 7))]), ordered=True)
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
    prior = rng.dirichlet(np.full(m, draw(st.sampled_from([0.2, 1.0, 5.0, 50.0]))), size=n)
    prior[rng.random((n, m)) < draw(st.sampled_from([0.0, 0.3]))] = 0.0  # some rows all zero: uniform
    prior *= rng.choice([1.0, 0.3, 7.0], size=(n, 1))  # raw, unnormalized beliefs
    params = {
        "k": draw(st.integers(1, 5)),
        "t": draw(st.sampled_from([0.2, 0.35, 0.5, 1.0])),
        "j": draw(st.sampled_from([0.05, 0.2, 0.4, 0.6, 1.0])),
        "t_distance": distance,
    }
    return release, prior, params, draw(st.sampled_from([0, 2, 5, 32])), draw(st.sampled_from([1, 8]))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_extension_merge_equals_block_search_on_random_beliefs(case):
    release, prior, params, max_group, window = case
    model = REG.create("privacy_model", "js_reduce", params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0), prior)
    extension = ctx.extension(release)
    assert extension is not None
    order = hilbert_order(release)
    old, old_stats, new, new_stats = both_paths(
        order, ctx.predicate(release), extension, window=window, leftovers="merge", max_group=max_group
    )
    np.testing.assert_array_equal(new, old)
    assert new_stats["merged"] == old_stats["merged"]
    assert new_stats["suppressed"] == old_stats["suppressed"]


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

    ctx = PublishContext(Judging(), mctx, History(), np.random.default_rng(0), prior)
    assert ctx.extension(release)(np.arange(6), np.repeat(np.arange(3), 2), 3) is None
