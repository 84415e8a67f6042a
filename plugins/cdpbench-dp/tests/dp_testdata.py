"""Small schemas and release streams for the cdpbench-dp tests (not a test module)."""

from __future__ import annotations

import numpy as np

from cdpbench.data import Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy


def tiny_schema(m: int = 3) -> Schema:
    """age in 0..9 (integral), sex in {f, m} (flat taxonomy), m sensitive values."""
    return Schema((NumericQI("age", 0.0, 9.0), CategoricalQI("sex", Taxonomy.flat(["f", "m"]))),
                  Sensitive("disease", tuple(f"d{i}" for i in range(m))))


def release_stream(releases: int, n: int = 40, m: int = 3, seed: int = 0, churn: float = 0.2):
    """``releases`` snapshots of ``n`` respondents: each release a share ``churn`` of them is
    replaced by new respondents and another share changes its sensitive value."""
    rng = np.random.default_rng(seed)
    schema = tiny_schema(m)
    ids = np.arange(n)
    qi = np.column_stack([rng.integers(0, 10, n), rng.integers(0, 2, n)]).astype(float)
    s = rng.integers(0, m, n)
    next_id = n
    out = []
    for t in range(1, releases + 1):
        out.append(Release(t, schema, ids.copy(), qi.copy(), s.copy()))
        gone = rng.random(n) < churn
        ids = ids.copy()
        ids[gone] = np.arange(next_id, next_id + gone.sum())
        next_id += int(gone.sum())
        qi = qi.copy()
        qi[gone] = np.column_stack([rng.integers(0, 10, gone.sum()), rng.integers(0, 2, gone.sum())])
        s = s.copy()
        s[gone] = rng.integers(0, m, gone.sum())
        moved = rng.random(n) < churn
        s[moved] = rng.integers(0, m, moved.sum())
    return out


def publish_context(release: Release, rng: np.random.Generator, model=None) -> PublishContext:
    mctx = ModelContext(schema=release.schema, table_distribution=release.sensitive_distribution(), release=release)
    return PublishContext(model, mctx, None, rng)
