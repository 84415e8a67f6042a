"""Published QI regions and the vectorized geometry the metrics share (private helpers).

A publication describes where each published record may lie in the QI space:

* generalization: one *region* per group, its box (a closed interval per numeric QI) and, per
  categorical QI, the set of leaves it stands for (``Publication.value_sets``; a taxonomy node is
  a set of contiguous leaves);
* bucketization (anatomy, slicing): one region per published record, its exact QI point, labelled
  with the record's bucket (group).

:func:`meeting_blocks` finds every (query, region) pair whose closed intervals meet, without
the dense queries x regions matrix: the queries (records, cells) are ordered as the leaves of a
k-d tree, and each block of them is compared only with the regions meeting its bounding box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..data import Publication, Release
from ..schema import Schema

DENSE_BUDGET = 1 << 20  # cells of a dense matrix materialized at once
LEAF = 256  # queries per block in meeting_blocks


def group_value_sets(publication: Publication) -> dict[int, np.ndarray]:
    """``{categorical column: bool [G, L]}``; a column missing from ``value_sets`` stands for the
    contiguous leaf range ``[low, high]`` of its group."""
    out: dict[int, np.ndarray] = {}
    schema = publication.schema
    for j in schema.categorical:
        vs = publication.value_sets.get(j)
        if vs is None:
            leaves = np.arange(schema.qi[j].taxonomy.size)
            lo = publication.low[:, j][:, None]
            hi = publication.high[:, j][:, None]
            vs = (leaves[None, :] >= lo) & (leaves[None, :] <= hi)
        out[j] = np.asarray(vs, dtype=bool)
    return out


@dataclass
class Regions:
    """QI regions with the group each belongs to (see the module docstring)."""

    low: np.ndarray  # float [R, d]; categorical columns: lowest leaf code of the set
    high: np.ndarray  # float [R, d]; categorical columns: highest leaf code of the set
    sets: dict[int, np.ndarray]  # categorical column -> bool [R, L]
    group: np.ndarray  # int64 [R]

    def __len__(self) -> int:
        return len(self.group)


def publication_regions(publication: Publication) -> Regions:
    """Regions of a publication: group boxes, or the exact QI points of a bucketized one."""
    schema = publication.schema
    if publication.bucketized:
        qi = np.asarray(publication.qi, dtype=float)
        sets = {}
        for j in schema.categorical:
            L = schema.qi[j].taxonomy.size
            onehot = np.zeros((len(qi), L), dtype=bool)
            onehot[np.arange(len(qi)), qi[:, j].astype(np.int64)] = True
            sets[j] = onehot
        return Regions(qi, qi, sets, publication.group.astype(np.int64))
    sets = group_value_sets(publication)
    low = publication.low.astype(float).copy()
    high = publication.high.astype(float).copy()
    for j, vs in sets.items():
        L = vs.shape[1]
        any_ = vs.any(axis=1)
        low[:, j] = np.where(any_, np.argmax(vs, axis=1), L)
        high[:, j] = np.where(any_, L - 1 - np.argmax(vs[:, ::-1], axis=1), -1)
    return Regions(low, high, sets, np.arange(publication.n_groups, dtype=np.int64))


def kd_order(points: np.ndarray, leaf: int) -> np.ndarray:
    """An order of the rows of ``points`` [n, d] in which every run of ``leaf`` consecutive rows
    is a leaf of a k-d tree: split every segment at its median along the column where segments
    are widest (relative to the column's overall spread), level by level, all segments at once."""
    n = len(points)
    order = np.arange(n)
    if n <= leaf or points.shape[1] == 0:
        return order
    span = points.max(axis=0) - points.min(axis=0)
    span = np.where(span > 0, span, 1.0)
    seg = np.zeros(n, dtype=np.int64)
    while True:
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        sizes = np.diff(np.r_[starts, n])
        if sizes.max() <= leaf:
            return order
        vals = points[order]
        spread = (np.maximum.reduceat(vals, starts, axis=0) - np.minimum.reduceat(vals, starts, axis=0)) / span
        j = int(np.argmax(spread.mean(axis=0)))
        order = order[np.lexsort((vals[:, j], seg))]
        first = np.repeat(starts, sizes)
        half = np.repeat(sizes // 2, sizes)
        seg = seg * 2 + ((np.arange(n) - first) >= half)


def meeting_blocks(
    q_low: np.ndarray,
    q_high: np.ndarray,
    regions: Regions,
    categorical: list[int],
    leaf: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(queries [b], regions [r], meets bool [b, r])`` covering every (query, region)
    pair that meets: for each numeric column the closed intervals ``[q_low, q_high]`` and
    ``[region.low, region.high]`` intersect, for each categorical column the query's leaf code
    (``q_low``) is in the region's set. Pairs not yielded do not meet.

    Queries are grouped into compact blocks (:func:`kd_order`); a block is only compared with the
    regions meeting its bounding box, so the work is far below the dense queries x regions
    product whenever regions are local (Mondrian, bucketized points), and no worse otherwise.
    ``regions`` in a block are sorted ascending.
    """
    nq = len(q_low)
    if nq == 0 or len(regions) == 0:
        return
    leaf = leaf or LEAF
    cat = set(categorical)
    lo_t = np.ascontiguousarray(regions.low.T)
    hi_t = np.ascontiguousarray(regions.high.T)
    sets_t = {j: np.ascontiguousarray(regions.sets[j].T) for j in cat}  # [L, R]: rows by leaf code
    order = kd_order(q_low, leaf)
    for b0 in range(0, nq, leaf):
        qs = order[b0 : b0 + leaf]
        box_lo = q_low[qs].min(axis=0)
        box_hi = q_high[qs].max(axis=0)
        cand = np.ones(len(regions), dtype=bool)
        for j in range(q_low.shape[1]):
            cand &= (lo_t[j] <= box_hi[j]) & (hi_t[j] >= box_lo[j])
        regs = np.flatnonzero(cand)
        if len(regs) == 0:
            continue
        meets = np.ones((len(qs), len(regs)), dtype=bool)
        for j in range(q_low.shape[1]):
            if j in cat:
                meets &= sets_t[j][:, regs][q_low[qs, j].astype(np.int64)]
            else:
                lo, hi = lo_t[j][regs][None, :], hi_t[j][regs][None, :]
                meets &= (q_high[qs, j][:, None] >= lo) & (q_low[qs, j][:, None] <= hi)
        yield qs, regs, meets


GRID_BUDGET = 1 << 24  # grid cells x weight columns summed at once by covering_sums


def covering_sums(points: np.ndarray, regions: Regions, weights: np.ndarray, categorical: list[int]) -> np.ndarray | None:
    """``[n, k]``: for each row of ``points`` the sum of ``weights`` (``[R, k]``) over the regions
    whose closed box holds it (categorical columns: its leaf in the region's set), without
    visiting (point, region) pairs: over the grid of the points' distinct values per column, each
    region adds its weights at the 2^d corners of its box (inclusion–exclusion) and a cumulative
    sum along every axis leaves in each grid cell the sum over the boxes holding it.

    Exact for integer weights (counts); for real weights the sums are taken in another order than
    region by region (last-bit differences). ``None`` when a region's categorical set is not a
    contiguous leaf range (the caller meets points and regions with :func:`meeting_blocks`), or
    when the grid exceeds ``GRID_BUDGET``."""
    n, d = points.shape
    if not leaf_ranges(regions, categorical):
        return None
    weights = np.asarray(weights, dtype=float).reshape(len(regions), -1)
    k = weights.shape[1]
    axes = [np.unique(points[:, j]) for j in range(d)]
    shape = tuple(len(a) + 1 for a in axes)
    if float(np.prod(shape, dtype=np.float64)) * k > GRID_BUDGET:
        return None
    first = np.column_stack([np.searchsorted(axes[j], regions.low[:, j], side="left") for j in range(d)])
    last = np.column_stack([np.searchsorted(axes[j], regions.high[:, j], side="right") - 1 for j in range(d)])
    keep = (first <= last).all(axis=1)  # boxes holding no grid value add nothing
    first, last, w = first[keep], last[keep], weights[keep]
    grid = box_density(shape, first, last, w)
    return grid[tuple(np.searchsorted(axes[j], points[:, j]) for j in range(d))]


def leaf_ranges(regions: Regions, categorical: list[int], rows: np.ndarray | slice = slice(None)) -> bool:
    """Every categorical set of the regions ``rows`` is the contiguous leaf range ``[low, high]``
    (a taxonomy node), so that the regions are boxes of the leaf codes."""
    for j in categorical:
        vs = regions.sets[j][rows]
        leaves = np.arange(vs.shape[1])
        ranges = (leaves[None, :] >= regions.low[rows, j][:, None]) & (leaves[None, :] <= regions.high[rows, j][:, None])
        if not np.array_equal(vs, ranges):
            return False
    return True


def box_density(shape: tuple[int, ...], first: np.ndarray, last: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The grid of ``shape`` (+ trailing weight axes) in which every cell holds the sum of the
    ``weights`` of the boxes ``[first, last]`` (inclusive index ranges, ``[R, d]`` each) holding
    it: each box adds its weights at its 2^d corners with alternating signs (inclusion–exclusion),
    then a cumulative sum runs along every axis. ``shape`` needs one spare plane per axis for the
    corners past ``last``."""
    weights = np.asarray(weights, dtype=float)
    d = len(shape)
    grid = np.zeros(tuple(shape) + weights.shape[1:])
    for corner in range(1 << d):
        index, sign = [], 1.0
        for j in range(d):
            if corner >> j & 1:
                index.append(last[:, j] + 1)
                sign = -sign
            else:
                index.append(first[:, j])
        np.add.at(grid, tuple(index), sign * weights)
    for j in range(d):
        np.cumsum(grid, axis=j, out=grid)
    return grid


def box_sums(cumulative: np.ndarray, first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """``[Q, ...]`` sums over index boxes ``[first, stop)`` (per axis, ``[Q, d]`` each) of the grid
    whose inclusive prefix sums along every axis, padded with a leading zero plane per axis, are
    ``cumulative``: inclusion–exclusion over the 2^d corners."""
    first = np.asarray(first, dtype=np.int64)
    stop = np.maximum(np.asarray(stop, dtype=np.int64), first)  # empty ranges sum to 0
    d = first.shape[1]
    out = np.zeros((len(first),) + cumulative.shape[d:])
    for corner in range(1 << d):
        index, sign = [], 1.0
        for j in range(d):
            if corner >> j & 1:
                index.append(first[:, j])
                sign = -sign
            else:
                index.append(stop[:, j])
        out += sign * cumulative[tuple(index)]
    return out


def prefix_grid(index: np.ndarray, shape: tuple[int, ...], weights: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums along every axis of the grid of ``shape`` holding ``weights`` at the
    cells ``index`` (``[n, d]``), padded with a leading zero plane per axis (shape + 1 each), for
    :func:`box_sums`."""
    grid = np.zeros(tuple(s + 1 for s in shape) + np.asarray(weights).shape[1:])
    np.add.at(grid, tuple(np.asarray(index, dtype=np.int64)[:, j] + 1 for j in range(len(shape))), weights)
    for j in range(len(shape)):
        np.cumsum(grid, axis=j, out=grid)
    return grid


def equal_rows(queries: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(query, point)`` pair of equal rows (an exact join on all columns), as two int64
    arrays; how a bucketized publication's exact QI points meet records and cells."""
    nq = len(queries)
    if nq == 0 or len(points) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    _, inv = np.unique(np.vstack([queries, points]), axis=0, return_inverse=True)
    inv = inv.ravel()
    q_id, p_id = inv[:nq], inv[nq:]
    p_order = np.argsort(p_id, kind="stable")
    p_sorted = p_id[p_order]
    start = np.searchsorted(p_sorted, q_id, side="left")
    count = np.searchsorted(p_sorted, q_id, side="right") - start
    total = int(count.sum())
    q = np.repeat(np.arange(nq, dtype=np.int64), count)
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
    return q, p_order[np.repeat(start, count) + offs].astype(np.int64)


def integral_columns(release: Release) -> np.ndarray:
    """bool [d]: numeric QIs whose domain bounds and every value of the release are integers."""
    schema = release.schema
    out = np.zeros(len(schema.qi), dtype=bool)
    for j, a in enumerate(schema.qi):
        if a.kind != "numeric":
            continue
        col = release.qi[:, j]
        out[j] = float(a.low).is_integer() and float(a.high).is_integer() and bool(np.all(col == np.round(col)))
    return out


def integer_count(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Number of integers in the closed interval ``[low, high]`` (0 when empty)."""
    return np.maximum(np.floor(high) - np.ceil(low) + 1.0, 0.0)


def domain_widths(schema: Schema) -> np.ndarray:
    """Per QI: numeric domain width ``high - low`` (1 where it is 0); categorical: leaf count."""
    w = np.empty(len(schema.qi))
    for j, a in enumerate(schema.qi):
        w[j] = (a.high - a.low) if a.kind == "numeric" else a.taxonomy.size
    return np.where(w > 0, w, 1.0)


def suppressed_rows(release: Release, publication: Publication) -> np.ndarray:
    """Rows of ``release`` whose respondents the publication lists as suppressed."""
    return np.flatnonzero(np.isin(release.respondent, publication.suppressed))
