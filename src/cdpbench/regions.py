"""Published QI regions and which of them meet a set of points or boxes — the geometry the core's
metrics use (:mod:`cdpbench.metrics._regions`), for plugins (e.g. an attacker mapping each
respondent's QI to the groups whose cell covers it).

* :class:`Regions`: per region (group) its box (categorical columns: the leaf-code range) and,
  per categorical column, the set of leaves it stands for;
* :func:`view_regions`: the regions of a :class:`~cdpbench.data.PublicView`;
* :func:`meeting_blocks`: every (query, region) pair that meets, block by block, without the
  dense queries x regions matrix (queries in k-d tree order, a block compared only with the
  regions meeting its bounding box);
* :func:`covering_sums`: per point, a sum of per-region weights over the regions holding it, by
  prefix sums over the grid of the points' values (when every categorical set is a leaf range);
* :func:`overlapping_pairs`: every pair of regions of two releases that share an instantiation on
  the columns they have in common (the releases may have different QI sets).
"""

from __future__ import annotations

import numpy as np

from .data import PublicView
from .metrics._regions import Regions, covering_sums, kd_order, meeting_blocks

__all__ = ["Regions", "covering_sums", "kd_order", "meeting_blocks", "overlapping_pairs", "view_regions"]

BLOCK_CELLS = 1 << 22  # booleans per block of the pair matrix


def view_regions(view: PublicView) -> Regions:
    """One region per group of ``view``: its box, categorical columns as leaf sets (a column
    without a set stands for the leaf range ``[low, high]``)."""
    schema = view.schema
    low = np.asarray(view.low, dtype=float).copy()
    high = np.asarray(view.high, dtype=float).copy()
    sets: dict[int, np.ndarray] = {}
    for j in schema.categorical:
        vs = view.value_sets.get(j)
        if vs is None:
            leaves = np.arange(schema.qi[j].taxonomy.size)
            vs = (leaves[None, :] >= low[:, j][:, None]) & (leaves[None, :] <= high[:, j][:, None])
        vs = np.asarray(vs, dtype=bool)
        L = vs.shape[1]
        any_ = vs.any(axis=1)
        low[:, j] = np.where(any_, np.argmax(vs, axis=1), L)
        high[:, j] = np.where(any_, L - 1 - np.argmax(vs[:, ::-1], axis=1), -1)
        sets[j] = vs
    return Regions(low, high, sets, np.arange(view.n_groups, dtype=np.int64))


def overlapping_pairs(
    a: Regions, b: Regions, columns: list[tuple[int, int, bool]], rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(i, j)``, region ``i`` of ``a`` and ``j`` of ``b``, whose boxes share a point on the
    listed columns: ``(column in a, column in b, categorical)``; a numeric column's closed intervals
    intersect, a categorical column's leaf sets intersect (both releases must code the column's
    leaves alike). No column listed: every pair. Sorted by ``i`` then ``j``; ``rows`` restricts
    ``i``. Compared block by block (``BLOCK_CELLS`` booleans at a time), so memory stays bounded.
    """
    rows = np.arange(len(a)) if rows is None else np.asarray(rows, dtype=np.int64)
    nb = len(b)
    if len(rows) == 0 or nb == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    sets_b = {jb: np.ascontiguousarray(b.sets[jb].T.astype(np.float32)) for ja, jb, cat in columns if cat}
    out_i, out_j = [], []
    step = max(1, BLOCK_CELLS // nb)
    for start in range(0, len(rows), step):
        r = rows[start : start + step]
        ok = np.ones((len(r), nb), dtype=bool)
        for ja, jb, cat in columns:
            # leaf ranges / intervals first: for a categorical column they bound the leaf sets
            ok &= (a.low[r, ja][:, None] <= b.high[None, :, jb]) & (b.low[None, :, jb] <= a.high[r, ja][:, None])
            if cat:
                ok &= (a.sets[ja][r].astype(np.float32) @ sets_b[jb]) > 0.5
        ii, jj = np.nonzero(ok)
        out_i.append(r[ii])
        out_j.append(jj.astype(np.int64))
    return np.concatenate(out_i), np.concatenate(out_j)
