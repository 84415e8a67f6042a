"""Comparable classes of two releases (BCF Def. 4.1), found by vectorized box tests.

``(qid1, qid2)`` are comparable when, on every QI attribute, the two generalized values share an
instantiation. Under global recoding along taxonomies (the paper's setting) that is Def. 4.1's
"on the same root-to-leaf path": two taxonomy nodes are leaf-code ranges, and two nodes of one
tree intersect exactly when one contains the other. For other publications (Mondrian's boxes and
value sets) sharing an instantiation is the paper's own gloss of the definition ("being comparable
means sharing a common instantiation", §4) and is what is tested.

This replaces the paper's GTree1 (a trie over R1 searched depth-first per qid2): every pair of
classes is judged at once with array comparisons, R1's classes in blocks so that memory stays
bounded (``block`` x |R2 classes| booleans per attribute).
"""

from __future__ import annotations

import numpy as np

from .classes import Classes

BLOCK_CELLS = 1 << 22  # booleans per block of the pair matrix


def comparable_pairs(a: Classes, b: Classes, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every comparable ``(i, j)``, class ``i`` of ``a`` and ``j`` of ``b``, sorted by ``i`` then
    ``j``; ``rows`` restricts ``i`` to the listed classes of ``a``."""
    rows = np.arange(a.n_classes) if rows is None else np.asarray(rows, dtype=np.int64)
    G2 = b.n_classes
    if len(rows) == 0 or G2 == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    d = a.low.shape[1]
    set_cols = set(a.sets) | set(b.sets)
    out_i, out_j = [], []
    step = max(1, BLOCK_CELLS // G2)
    for start in range(0, len(rows), step):
        r = rows[start : start + step]
        ok = np.ones((len(r), G2), dtype=bool)
        for c in range(d):
            if c in set_cols:
                L = (a.sets.get(c) if c in a.sets else b.sets[c]).shape[1]
                sa = _value_set(a, c, r, L)
                sb = _value_set(b, c, np.arange(G2), L)
                ok &= (sa.astype(np.float32) @ sb.T.astype(np.float32)) > 0.5
            else:
                lo, hi = a.low[r, c][:, None], a.high[r, c][:, None]
                ok &= (lo <= b.high[None, :, c]) & (b.low[None, :, c] <= hi)
        ii, jj = np.nonzero(ok)
        out_i.append(r[ii])
        out_j.append(jj.astype(np.int64))
    return np.concatenate(out_i), np.concatenate(out_j)


def _value_set(c: Classes, col: int, rows: np.ndarray, L: int) -> np.ndarray:
    """``[len(rows), L]`` leaf sets of column ``col`` (the stored set, or the leaf-code range)."""
    if col in c.sets:
        return c.sets[col][rows]
    leaves = np.arange(L)
    return (leaves[None, :] >= c.low[rows, col][:, None]) & (leaves[None, :] <= c.high[rows, col][:, None])
