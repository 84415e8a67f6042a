"""The ``permanent`` estimator's exact programme as a compiled loop (numba): the forward pass, the
backward pass and the per-value sums over a group's value-count states (the exact form of
:mod:`cdpbench_classic.estimators.permanent`; issue #28, scale), with the same floating-point
additions in the same order as :func:`~cdpbench_classic.estimators.permanent.exact_chunk`'s NumPy /
scipy passes, so the posteriors are bit-identical.

Imported only by :func:`~cdpbench_classic.estimators.permanent.exact_chunk` when it runs (never at
package import: registering plugins must stay fast and must not need numba); the compilation is
cached on disk (``cache=True``: ``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``).

The order of the additions (what makes the bits equal):

* forward, a state ``u`` of level ``t + 1``: ``F(u) = 0 + w[t, s] · F(u - e_s) + …`` over the
  values ``s`` with ``u_s > 0`` in value order (a CSR row of ``csr_matvec``); the level's total adds
  its states in state-index order from 0 (``np.bincount``);
* backward: the states ``v`` of level ``t + 1`` in state-index order, each adding
  ``w[t, s] · B(v)`` into ``B(v - e_s)`` in value order (``csc_matvec`` over the columns ``v``),
  every ``B`` of level ``t`` starting from 0; the per-value sum of value ``s`` adds
  ``F(v - e_s) · B(v)`` in the order of ``v`` from 0 (``np.bincount``);
* rescaling: ``F`` of a level divided by its total (by 1 if the total is not > 0, and the group is
  then marked), ``B`` of a level by ``max(max_u B(u), 1e-300)`` (NaN kept, as ``np.maximum``).

No ``fastmath``: LLVM then neither reorders these additions nor fuses a product into an FMA.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def count_state_programme(w, cnt, sums, ok):
    """For every group of a chunk (``cnt`` ``[G, k]`` int64, its value counts, padded with 0; ``w``
    ``[R, k]`` float64, its respondents' priors group after group; ``k <= 62``): writes ``sums[r, s]
    = Σ_u F_t(u) · B_{t+1}(u + e_s)`` for the group's respondent ``t`` (row ``r``) and clears
    ``ok[g]`` where a forward level's total is not > 0 (perm(W) = 0). A state is its index ``Σ_s u_s
    · Π_{s'<s}(m_{s'}+1)``; its level ``|u|`` and the bit mask of its values ``u_s > 0`` come from an
    odometer over the indices, and a stable counting sort by level lists each level's states in
    index order (the moves are not stored: ``u - e_s`` is ``u - stride_s``)."""
    G, k = cnt.shape
    # buffers for the largest group of the chunk
    most = 1
    for g in range(G):
        S = 1
        for s in range(k):
            S *= cnt[g, s] + 1
        most = max(most, S)
    top = 0
    for g in range(G):
        n = 0
        for s in range(k):
            n += cnt[g, s]
        top = max(top, n)
    mask = np.empty(most, dtype=np.int64)  # bit s: u_s > 0
    order = np.empty(most, dtype=np.int64)  # states by (level, index)
    level = np.empty(most, dtype=np.int64)
    start = np.empty(top + 3, dtype=np.int64)  # level t is order[start[t]:start[t + 1]]
    F = np.empty(most)
    Bw = np.empty(most)
    stride = np.empty(k, dtype=np.int64)
    d = np.empty(k, dtype=np.int64)
    pv = np.empty(k)
    row0 = 0
    for g in range(G):
        n = 0
        S = 1
        for s in range(k):
            stride[s] = S
            S *= cnt[g, s] + 1
            n += cnt[g, s]
        # the digits of every state in index order (an odometer) and its level
        for s in range(k):
            d[s] = 0
        lev = 0
        bits = 0
        for u in range(S):
            mask[u] = bits
            level[u] = lev
            for s in range(k):
                d[s] += 1
                lev += 1
                if d[s] <= cnt[g, s]:
                    bits |= 1 << s
                    break
                lev -= d[s]
                d[s] = 0
                bits &= ~(1 << s)
        # a stable counting sort by level: within a level, index order
        for t in range(n + 2):
            start[t] = 0
        for u in range(S):
            start[level[u] + 1] += 1
        for t in range(n + 1):
            start[t + 1] += start[t]
        for u in range(S):
            order[start[level[u]]] = u
            start[level[u]] += 1
        for t in range(n, 0, -1):
            start[t] = start[t - 1]
        start[0] = 0
        # forward: F_{t+1}(u) = Σ_s w[t, s] · F_t(u - e_s), rescaled by the level's total
        F[0] = 1.0
        for t in range(n):
            r = row0 + t
            total = 0.0
            for p in range(start[t + 1], start[t + 2]):
                u = order[p]
                acc = 0.0
                bits = mask[u]
                for s in range(k):
                    if bits & (1 << s):
                        acc += w[r, s] * F[u - stride[s]]
                F[u] = acc
                total += acc
            if total > 0:
                scale = total
            else:
                scale = 1.0
                ok[g] = False
            for p in range(start[t + 1], start[t + 2]):
                F[order[p]] /= scale
        # backward: B_t(u) = Σ_s w[t, s] · B_{t+1}(u + e_s), with the per-value sums, rescaled by
        # the level's largest value
        for u in range(S):
            Bw[u] = 0.0
        Bw[S - 1] = 1.0
        for t in range(n - 1, -1, -1):
            r = row0 + t
            for s in range(k):
                pv[s] = 0.0
            for p in range(start[t + 1], start[t + 2]):
                v = order[p]
                b = Bw[v]
                bits = mask[v]
                for s in range(k):
                    if bits & (1 << s):
                        Bw[v - stride[s]] += w[r, s] * b
                        pv[s] += F[v - stride[s]] * b
            for s in range(k):
                sums[r, s] = pv[s]
            lo, hi = start[t], start[t + 1]
            top_b = Bw[order[lo]]
            for p in range(lo + 1, hi):
                x = Bw[order[p]]
                if x > top_b or x != x:
                    if top_b == top_b:
                        top_b = x
            if not (top_b <= 1e-300):
                scale = top_b  # NaN stays NaN, as np.maximum
            else:
                scale = 1e-300
            for p in range(lo, hi):
                Bw[order[p]] /= scale
        row0 += n
