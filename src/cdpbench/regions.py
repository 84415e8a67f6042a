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
  prefix sums over the grid of the points' values (when every categorical set is a leaf range).
"""

from __future__ import annotations

import numpy as np

from .data import PublicView
from .metrics._regions import Regions, covering_sums, kd_order, meeting_blocks

__all__ = ["Regions", "covering_sums", "kd_order", "meeting_blocks", "view_regions"]


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
