"""Tests that close survivors of the mutation check (mutation/README.md): enhanced β-likeness's
reported β, the levels of an empty publication, t-closeness's prefix fast path on one short row,
and the kernel prior's one-level taxonomy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication
from cdpbench.plugin import ModelContext
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.privacy_models.beta_likeness import BetaLikeness, BetaLikenessParams
from cdpbench_classic.knowledge.kernel import kernel_prior
from cdpbench_classic.privacy_models.t_closeness import TCloseness, TClosenessParams


def publication(values: tuple[str, ...], sensitive: list[str], groups: list[int]):
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", values))
    n = len(sensitive)
    frame = pd.DataFrame({"id": np.arange(n), "age": np.arange(n) % 100, "s": sensitive})
    release = schema.encode(frame, 1)
    pub = Publication.from_partition(release, np.asarray(groups))
    return pub, ModelContext(schema, release.sensitive_distribution(), release=release), release


def test_enhanced_beta_level_is_capped_by_the_largest_cap_of_a_value_of_the_table():
    # q = (0.9, 0.1); group 0 = [b b]: gain of b = (1 - 0.1) / 0.1 = 9 = β_basic. Enhanced:
    # min(β_basic, max_s -ln q_s) = min(9, -ln 0.1) = 2.303; no β satisfies the group (9 > cap).
    pub, ctx, _ = publication(("a", "b"), ["b", "b"] + ["a"] * 18, [0, 0] + [1] * 18)
    np.testing.assert_allclose(ctx.table_distribution, [0.9, 0.1])
    basic = BetaLikeness(BetaLikenessParams(variant="basic")).levels(pub, ctx)
    assert basic["beta"] == pytest.approx(9.0, rel=1e-12)
    enh = BetaLikeness(BetaLikenessParams(variant="enhanced")).levels(pub, ctx)
    assert enh["beta"] == pytest.approx(-math.log(0.1), rel=1e-12)
    assert enh["beta_satisfied"] == math.inf
    assert enh["k"] == 2.0


def test_levels_of_an_empty_publication_are_all_zero():
    pub, ctx, _ = publication(("a", "b"), ["a", "b"], [-1, -1])
    for variant in ("basic", "enhanced"):
        assert BetaLikeness(BetaLikenessParams(variant=variant)).levels(pub, ctx) == {
            "k": 0.0, "beta": 0.0, "beta_satisfied": 0.0
        }


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (1, 3), (2, 1), (3, 2), (2, 4)])
@pytest.mark.parametrize("t", [0.05, 0.3, 0.6])
def test_t_closeness_prefixes_of_short_rows_match_accepts(shape, t):
    # the fast path must answer what `accepts` answers on every prefix, also for a single row
    rng = np.random.default_rng(sum(shape) * 100 + int(t * 100))
    values = ("a", "b", "c")
    sens = [values[i] for i in rng.integers(0, 3, 30)]
    _, ctx, release = publication(values, sens, [0] * 30)
    model = TCloseness(TClosenessParams(t=t, k=1))
    rows = np.arange(30)
    ext = model.extension(release, ctx, rows, np.zeros(30, dtype=np.int64), 1)
    B, L = shape
    prefix_rows = rng.choice(30, size=(B, L), replace=False)
    got = ext.accepts_prefixes(prefix_rows)
    from cdpbench.data import GroupBatch

    for b in range(B):
        for l in range(L):
            batch = GroupBatch(release.sensitive[prefix_rows[b, : l + 1]], np.zeros(l + 1, dtype=np.int64), 1,
                               release.n_values)
            assert bool(got[b, l]) == bool(model.accepts(batch, ctx)[0]), (b, l)


def test_t_closeness_prefix_of_one_record_is_judged():
    # one record of the rare value: EMD (equal distance) = 1 - q_c = 0.9 > t; of the common one: 0.1
    _, ctx, release = publication(("a", "c"), ["a"] * 9 + ["c"], [0] * 10)
    model = TCloseness(TClosenessParams(t=0.2, k=1))
    ext = model.extension(release, ctx, np.arange(10), np.zeros(10, dtype=np.int64), 1)
    assert ext.accepts_prefixes(np.array([[0]])).tolist() == [[True]]
    assert ext.accepts_prefixes(np.array([[9]])).tolist() == [[False]]


def test_kernel_prior_ignores_a_one_level_taxonomy():
    # a taxonomy of height 0 puts every two values at distance 0: the prior is the one without it
    flat = Taxonomy.from_paths([["u"], ["v"], ["w"]])
    sens = Sensitive("disease", ("a", "b", "c"))
    rows = [(20, "u", "a"), (30, "v", "b"), (60, "w", "a"), (25, "w", "c"), (33, "u", "b")]

    def release(qi, rows):
        schema = Schema(qi, sens)
        frame = pd.DataFrame([(i, *r) for i, r in enumerate(rows)],
                             columns=["id", *[a.name for a in qi], "disease"])
        return schema.encode(frame, 1)

    with_flat = kernel_prior(release((NumericQI("age", 0, 100), CategoricalQI("f", flat)), rows), 0.3)
    without = kernel_prior(release((NumericQI("age", 0, 100),), [(a, s) for a, _, s in rows]), 0.3)
    assert np.isfinite(with_flat).all()
    np.testing.assert_allclose(with_flat, without, atol=1e-12)


def test_t_closeness_refresh_equals_add_and_emd_terms_are_stated_only_where_they_hold():
    """``refresh`` after growing counts in place gives ``add``'s table rows; ``emd_terms`` (what a
    compiled loop may reproduce: JS-reduce's kernels) is stated for the equal and ordered ground
    distances with the bound t + the model's slack, and withheld from a subclass, which may judge
    otherwise."""
    from cdpbench_classic.privacy_models.t_closeness import _TOL, ClosenessExtension

    rng = np.random.default_rng(4)
    values = ("a", "b", "c")
    _, ctx, release = publication(values, [values[i] for i in rng.integers(0, 3, 30)], [0] * 30)
    segment = np.repeat(np.arange(6), 5)
    model = TCloseness(TClosenessParams(t=0.3, k=2))
    by_add = model.extension(release, ctx, np.arange(30), segment, 6)
    by_refresh = model.extension(release, ctx, np.arange(30), segment, 6)
    for g, row in [(0, 3), (2, 7), (2, 11), (5, 0)]:
        by_add.add(g, row)
        by_refresh.counts[g, by_refresh.sensitive[row]] += 1
    by_refresh.refresh(np.array([0, 2, 5]))
    assert np.array_equal(by_add.table, by_refresh.table) and not by_add.table.all() and by_add.table.any()
    counts, sensitive, table, bound, k, ordered = by_add.emd_terms()
    assert counts is by_add.counts and bound == 0.3 + _TOL and k == 2 and ordered is False
    assert np.array_equal(sensitive, release.sensitive) and np.allclose(table, ctx.table_distribution)

    class Stricter(ClosenessExtension):
        pass

    assert Stricter(model, ctx, release.sensitive, 3, np.arange(30), segment, 6).emd_terms() is None
