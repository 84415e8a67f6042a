"""Comparable classes of two releases (BCF Def. 4.1), found by vectorized box tests.

``(qid1, qid2)`` are comparable when, on every QI attribute, the two generalized values share an
instantiation. Under global recoding along taxonomies (the paper's setting) that is Def. 4.1's
"on the same root-to-leaf path": two taxonomy nodes are leaf-code ranges, and two nodes of one
tree intersect exactly when one contains the other. For other publications (Mondrian's boxes and
value sets) sharing an instantiation is the paper's own gloss of the definition ("being comparable
means sharing a common instantiation", §4) and is what is tested.

This replaces the paper's GTree1 (a trie over R1 searched depth-first per qid2): every pair of
classes is judged at once with array comparisons (the core's ``overlapping_pairs``), R1's classes
in blocks so that memory stays bounded.
"""

from __future__ import annotations

import numpy as np

from .classes import Classes


def comparable_pairs(a: Classes, b: Classes, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every comparable ``(i, j)``, class ``i`` of ``a`` and ``j`` of ``b``, sorted by ``i`` then
    ``j``; ``rows`` restricts ``i`` to the listed classes of ``a``. Both releases have the same
    QIs; a column whose value set is not a leaf range on either side is compared as sets, the
    others as intervals (:func:`cdpbench.regions.overlapping_pairs`, block by block)."""
    from cdpbench.regions import overlapping_pairs

    set_cols = sorted(set(a.sets) | set(b.sets))
    columns = [(j, j, j in set_cols) for j in range(a.low.shape[1])]
    return overlapping_pairs(_regions(a, b, set_cols), _regions(b, a, set_cols), columns, rows)


def _regions(c: Classes, other: Classes, set_cols: list[int]):
    """``c`` as regions, with a leaf set for every column either release stores as a set."""
    from cdpbench.regions import Regions

    sets = {}
    for j in set_cols:
        L = (c.sets.get(j) if j in c.sets else other.sets[j]).shape[1]
        if j in c.sets:
            sets[j] = c.sets[j]
        else:
            leaves = np.arange(L)
            sets[j] = (leaves[None, :] >= c.low[:, j][:, None]) & (leaves[None, :] <= c.high[:, j][:, None])
    return Regions(c.low, c.high, sets, np.arange(c.n_classes, dtype=np.int64))
