"""The QI-closest group, as KSAA's merge step asks for it (``ksaa``; Amiri et al. 2018, §1: "merge
a violating group with the QI-closest one").

Closeness is the Euclidean distance between the centres of the groups' published boxes, each QI
scaled by its domain width. Categorical QIs make many groups share one box, so ties are common;
the rule that breaks them is fixed, so the answer does not depend on how the groups happen to be
numbered: among the groups at the smallest distance, the one whose first record (lowest row of
the release) comes first. One k-d tree (scipy's ``cKDTree``) over the distinct centres; each centre
lists its groups by that key, and groups taken out (absorbed by a growing group) are skipped.
"""

from __future__ import annotations

import numpy as np

from .distinct_rows import distinct_rows


class NearestGroups:
    """Nearest-group queries over fixed group centres (module docstring)."""

    def __init__(self, centre: np.ndarray, key: np.ndarray):
        from scipy.spatial import cKDTree

        centre = np.asarray(centre, dtype=float)
        self.key = np.asarray(key, dtype=np.int64)
        uniq, _, cid = distinct_rows(centre)  # np.unique(centre, axis=0, ...), its rows ranked per column
        self.cid = np.asarray(cid, np.int64).ravel()
        self.members = np.lexsort((self.key, self.cid)).astype(np.int64)  # by centre, then key
        self.ptr = np.searchsorted(self.cid[self.members], np.arange(len(uniq) + 1)).astype(np.int64)
        self.head = self.ptr[:-1].copy()  # first member of each centre still present
        self.present = np.ones(len(self.key), dtype=bool)
        self.removed = 0
        self.tree = cKDTree(uniq)
        self.n_centres = len(uniq)

    def remove(self, group: int) -> None:
        """Take ``group`` out of every later answer."""
        self.present[group] = False
        self.removed += 1
        u = self.cid[group]
        h, end = self.head[u], self.ptr[u + 1]
        while h < end and not self.present[self.members[h]]:
            h += 1
        self.head[u] = h

    def query(self, points: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
        """The nearest present group to each point (-1 when there is none); ``exclude`` names one
        group per point to skip (a group's own centre is among the points), allowed only while no
        group has been removed."""
        points = np.atleast_2d(np.asarray(points, dtype=float))
        n = len(points)
        out = np.full(n, -1, dtype=np.int64)
        if self.n_centres == 0 or n == 0:
            return out
        if exclude is not None and self.removed:
            raise ValueError("exclude is only supported before any remove()")
        exclude = np.full(n, -1, np.int64) if exclude is None else np.asarray(exclude, np.int64)
        todo = np.arange(n)
        k = min(8, self.n_centres)
        while len(todo):
            dist, idx = self.tree.query(points[todo], k=k)
            dist, idx = dist.reshape(len(todo), k), idx.reshape(len(todo), k)
            first = self.head[idx]
            has = first < self.ptr[idx + 1]
            cand = np.where(has, self.members[np.minimum(first, len(self.members) - 1)], -1)
            own = (cand == exclude[todo][:, None]) & has
            nxt = first + 1  # nothing removed when excluding: the next member is present
            has_next = nxt < self.ptr[idx + 1]
            cand = np.where(own, np.where(has_next, self.members[np.minimum(nxt, len(self.members) - 1)], -1), cand)
            valid = cand >= 0
            dstar = np.where(valid, dist, np.inf).min(axis=1)
            tie = valid & (dist == dstar[:, None])
            cut = (k < self.n_centres) & (~valid.any(axis=1) | (dist[:, -1] == dstar))  # ties may go on past k
            done = ~cut & valid.any(axis=1)
            if done.any():
                keys = np.where(tie[done], self.key[np.maximum(cand[done], 0)], np.iinfo(np.int64).max)
                out[todo[done]] = cand[done][np.arange(int(done.sum())), keys.argmin(axis=1)]
            todo = todo[cut]
            k = min(2 * k, self.n_centres)
        return out
