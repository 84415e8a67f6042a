"""``permanent``: the Bayes posterior inside a QI-group, an adversary who weighs an assignment of
the group's tuples to its respondents by the product of her priors (the lab's estimator, beyond
the papers: DESIGN.md §5 "Beyond the papers"; attack-matrix issue).

With ``w[i, j]`` the prior of respondent ``i`` on the value of tuple ``j``, an assignment ``c``
(a bijection respondents → tuples) has weight ``Π_i w[i, c(i)]`` and

    P(i owns tuple j) = w[i, j] · perm(W without row i and column j) / perm(W).

Tuples with the same value are identical columns, so an assignment is, up to the ``Π_s m_s!``
orderings of identical tuples, a map of respondents to values that gives value ``s`` to exactly
``m_s`` respondents. **Exact form**: a dynamic programme over the respondents in turn whose state
is the vector ``u`` of values already handed out (``0 ≤ u_s ≤ m_s``): ``Π_s (m_s + 1)`` states, not
``n!``. A forward pass ``F_t(u)`` (weight of the first ``t`` respondents using ``u``) and a backward
pass ``B_t(u)`` (weight of the others completing ``u`` to ``m``) give

    P(i gets s) ∝ Σ_u F_i(u) · w[i, s] · B_{i+1}(u + e_s),

normalized per respondent (each pass is rescaled at every step; the scale cancels in a row).
Groups whose state count exceeds ``max_states`` get the **approximation**: Sinkhorn scaling
(iterative proportional fitting) of the ``n × k`` matrix of priors to row sums 1 and column sums
``m_s`` — the Ω-estimate is its first step — whose error against the exact form is measured in
``benchmarks/bench_permanent.py``.

Conventions: only the values published in the group count (a prior's mass elsewhere is ignored);
``weights=None`` is a uniform prior, whose posterior is the group's frequencies; a group in which
no assignment has positive weight (``perm(W) = 0``) falls back to the frequencies, as the other
estimators do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.errors import require
from cdpbench.plugin import Estimator

from .frequency import group_counts, refuse_angelized


@dataclass
class PermanentParams:
    max_states: int = field(default=20_000, metadata={"help": "exact dynamic programme when a group has at most this many count states (Π(m_s+1)); Sinkhorn beyond (>= 1)"})
    iterations: int = field(default=500, metadata={"help": "Sinkhorn: most scaling rounds (>= 1)"})
    tolerance: float = field(default=1e-9, metadata={"help": "Sinkhorn: stop when every column sum is within this of its count (> 0)"})

    def __post_init__(self) -> None:
        for name in ("max_states", "iterations"):
            v = getattr(self, name)
            require(isinstance(v, int) and not isinstance(v, bool) and v >= 1, name, "an integer >= 1", v)
        require(isinstance(self.tolerance, (int, float)) and self.tolerance > 0, "tolerance", "a number > 0", self.tolerance)


def exact_groups(w: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P(respondent i gets value s) in ``B`` groups of one shape at once (the exact form of the
    module docstring): priors ``w`` ``[B, n, k]`` (each group's values only) and the value counts
    ``m`` ``[k]`` they share, summing to n. Returns the ``[B, n, k]`` posteriors and ``[B]`` bool,
    False where perm(W) = 0 (that group's rows are then meaningless): :func:`exact_chunk` over
    the ``B`` groups."""
    B, n, k = w.shape
    m = np.asarray(m, dtype=np.int64)
    post = np.zeros((B, n, k))
    if B == 0:
        return post, np.ones(0, dtype=bool)
    cnt = np.repeat(m[None, :], B, axis=0)
    flat, ok = exact_chunk(w.reshape(B * n, k), cnt)
    return flat.reshape(B, n, k), ok


def exact_chunk(w: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact posteriors of ``G`` groups of any shapes at once, by levels.

    ``cnt`` ``[G, k]``: each group's value counts in value order, a group with fewer values
    padded with 0 at the end; ``w`` ``[R, k]``: the priors of every group's respondents on its
    values, group after group (``R = cnt.sum()``; a padded value's column is ignored). Returns
    the ``[R, k]`` posteriors (0 on padding) and ``[G]`` bool, False where perm(W) = 0.

    The passes (the ``[R, k]`` sums ``Σ_u F_t(u) B_{t+1}(u + e_s)``) run in the compiled kernel
    :mod:`~cdpbench_classic.permanent_kernel` (numba) when it imports, else in
    :func:`_programme_by_levels` (NumPy / scipy); both make the additions below in the same order,
    so the posteriors are the same bits (``tests/test_permanent_numba.py``).

    Every group's count states ``u`` are laid out level after level (``|u|`` = respondents
    handled), each level group after group in the order of the state index ``Σ_s u_s ·
    Π_{s'<s}(m_{s'}+1)``, so that one level of all groups is one slice. A step of the forward
    pass is one sparse product whose row for a state ``u`` adds ``w · F(u - e_s)`` over its
    values ``s`` in order, from 0 (``scipy.sparse``'s CSR product: ``sum += data · x`` entry by
    entry); a step of the backward pass reads the same entries as the columns of a CSC matrix
    (each adds into its row ``u`` in the order of ``u + e_s``, which is value order). A level's sums per group (the rescaling, and
    ``Σ_u F_t(u) B_{t+1}(u + e_s)`` per value) are ``np.bincount`` over the level, which adds in
    state order from 0. Those are the additions, in their order, of the programme over dense
    ``[n + 1, Π(m_s+1)]`` tables (the zeros off a level add nothing), so a group's floats are the
    same whatever the other groups of the chunk, and the work is ``O(k · Π(m_s+1))`` a group
    instead of ``O(n · k · Π(m_s+1))``.
    """
    G, k = cnt.shape
    cnt = np.ascontiguousarray(cnt, dtype=np.int64)
    w = np.ascontiguousarray(w, dtype=float)
    n_of = cnt.sum(axis=1)
    programme = compiled_programme() if k <= 62 else None  # the kernel keeps a state's values in an int64 mask
    if programme is not None:
        sums = np.zeros((int(n_of.sum()), k))
        ok = np.ones(G, dtype=bool)
        programme(w, cnt, sums, ok)
    else:
        sums, ok = _programme_by_levels(w, cnt)
    post = w * sums
    post[np.arange(k)[None, :] >= np.repeat((cnt > 0).sum(axis=1), n_of)[:, None]] = 0.0
    rows = _sums(post)[:, None]
    ok &= np.bincount(np.repeat(np.arange(G), n_of), weights=(rows[:, 0] <= 0), minlength=G) == 0
    return post / np.where(rows > 0, rows, 1.0), ok


COMPILED = True  # the exact programme by the compiled kernel when numba imports (False: NumPy / scipy)
_KERNEL: list = []  # the imported kernel (or None when numba is missing), once per process


def compiled_programme():
    """:func:`~cdpbench_classic.permanent_kernel.count_state_programme` (numba, imported
    on first use, its compilation cached on disk), or None when :data:`COMPILED` is off or numba does
    not import: the NumPy / scipy passes of :func:`_programme_by_levels` then do the same additions."""
    if not COMPILED:
        return None
    if not _KERNEL:
        try:
            from ..permanent_kernel import count_state_programme
        except Exception:  # numba missing or broken: the NumPy path gives the same bits
            count_state_programme = None
        _KERNEL.append(count_state_programme)
    return _KERNEL[0]


def _programme_by_levels(w: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The NumPy / scipy passes of :func:`exact_chunk`: ``([R, k]`` sums ``Σ_u F_t(u) B_{t+1}(u +
    e_s)`` per respondent and value, ``[G]`` ok``)``."""
    # scipy's compiled CSR / CSC products (``sum += data · x``, entry by entry), called on slices
    # of one chunk's arrays: here, not at import (registering plugins must stay fast)
    from scipy.sparse._sparsetools import csc_matvec, csr_matvec

    G, k = cnt.shape
    n_of = cnt.sum(axis=1)
    R = int(n_of.sum())
    row0 = np.concatenate([[0], np.cumsum(n_of)[:-1]]).astype(np.int64)  # first respondent of each group
    radix = cnt + 1
    stride = np.ones((G, k), dtype=np.int64)
    stride[:, 1:] = np.cumprod(radix[:, :-1], axis=1)
    n_states = stride[:, -1] * radix[:, -1]
    first = np.concatenate([[0], np.cumsum(n_states)[:-1]]).astype(np.int64)  # first state of each group
    S = int(n_states.sum())
    group = np.repeat(np.arange(G), n_states)
    # the digits u_s of every state ([k, S], value after value), in state order: exact in
    # floats (states < 2^53)
    rest = (np.arange(S, dtype=np.int64) - np.repeat(first, n_states)).astype(float)
    radix_of = np.repeat(radix.T.astype(float), n_states, axis=1)
    digits = np.empty((k, S), dtype=np.int16 if n_of.max() < 2**15 else np.int64)
    for s in range(k):
        q = np.floor(rest / radix_of[s])
        digits[s] = rest - q * radix_of[s]
        rest = q
    del rest, radix_of, q
    level = digits.sum(axis=0, dtype=np.int32)
    top = int(n_of.max())
    # (level, group, index) order; a stable sort of 16-bit keys is numpy's radix sort
    by_level = np.argsort(level.astype(np.int16) if top < 2**15 else level, kind="stable")
    pos = np.empty(S, dtype=np.int64)
    pos[by_level] = np.arange(S)
    handed = np.ascontiguousarray((digits[:, by_level] > 0).T)  # [S, k] in position order: u_s > 0
    del digits
    group = group[by_level]
    level = level[by_level]
    cut = np.searchsorted(level, np.arange(top + 2))  # level t is [cut[t], cut[t + 1])
    # a (level, group) segment: its id within its level, its first position, its group
    new_segment = np.ones(S, dtype=bool)
    new_segment[1:] = (group[1:] != group[:-1]) | (level[1:] != level[:-1])
    seg_start = np.flatnonzero(new_segment)
    seg_id = np.cumsum(new_segment) - 1
    del new_segment
    seg_cut = np.searchsorted(seg_start, cut)  # level t's segments are [seg_cut[t], seg_cut[t + 1])
    seg_local = seg_id - seg_cut[level]
    seg_group = group[seg_start]
    del seg_id

    # the moves into each state u from u - e_s (respondent |u| - 1 takes value s), in (u, s) order
    at, value = np.nonzero(handed)
    g_at = group[at]
    src = pos[by_level[at] - stride.reshape(-1)[g_at * k + value]]
    data = w.reshape(-1)[(row0[g_at] + level[at] - 1) * k + value]
    ptr = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(np.count_nonzero(handed, axis=1), out=ptr[1:])
    del handed
    # Σ_u F_t(u) B_{t+1}(u + e_s) by (segment of u within its level, s): for one s the moves
    # come in the order of u (u -> u + e_s keeps the order of a group's states)
    pair_bin = seg_local[src] * k + value
    del g_at, value

    ok = np.ones(G, dtype=bool)
    F = np.zeros(S)
    F[cut[0] : cut[1]] = 1.0  # u = 0, nothing handed out
    for t in range(top):
        lo, hi = cut[t + 1], cut[t + 2]
        # F_{t+1}(u) = Σ_s w · F_t(u - e_s): the CSR rows of level t + 1, columns anywhere in F
        csr_matvec(int(hi - lo), S, ptr[lo : hi + 1], src, data, F, F[lo:hi])
        segs = seg_local[lo:hi]
        total = np.bincount(segs, weights=F[lo:hi], minlength=int(seg_cut[t + 2] - seg_cut[t + 1]))
        ok[seg_group[seg_cut[t + 1] : seg_cut[t + 2]]] &= total > 0
        F[lo:hi] /= np.where(total > 0, total, 1.0)[segs]
    Bw = np.zeros(S)
    last = pos[first + n_states - 1]  # u = m: every value handed out
    Bw[last] = 1.0
    sums = np.zeros((R, k))
    for t in range(top - 1, -1, -1):
        lo, hi = cut[t], cut[t + 1]
        nxt = Bw[hi : cut[t + 2]]
        # B_t(u) = Σ_s w · B_{t+1}(u + e_s): the same entries read as the columns of level t + 1,
        # each adding into its row (a state of level t) in the order of u + e_s, i.e. of s; a
        # group's u = m (n = t) has no moves and keeps B = 1
        csc_matvec(S, int(cut[t + 2] - hi), ptr[hi : cut[t + 2] + 1], src, data, nxt, Bw)
        a, b = ptr[hi], ptr[cut[t + 2]]
        n_segs = int(seg_cut[t + 1] - seg_cut[t])
        per_value = np.bincount(pair_bin[a:b], weights=F[src[a:b]] * nxt[at[a:b] - hi], minlength=n_segs * k)
        groups_here = seg_group[seg_cut[t] : seg_cut[t + 1]]
        handing = n_of[groups_here] > t  # segments still handing out values (not a group's u = m)
        sums[row0[groups_here[handing]] + t] = per_value.reshape(n_segs, k)[handing]
        here = Bw[lo:hi]
        here /= np.maximum(np.maximum.reduceat(here, seg_start[seg_cut[t] : seg_cut[t + 1]] - lo), 1e-300)[seg_local[lo:hi]]
    return sums, ok


def _sums(x: np.ndarray) -> np.ndarray:
    """Sums along the last axis, added one term after another in index order (a running sum),
    so a row's sum does not depend on the array it sits in."""
    if x.shape[-1] == 0:
        return np.zeros(x.shape[:-1])
    return np.cumsum(x, axis=-1)[..., -1]


_BATCH_CELLS = 1 << 18  # most state moves (Σ over a chunk's groups of k · Π(m_s+1)) solved at once


def sinkhorn(w: np.ndarray, count: np.ndarray, segment: np.ndarray, n_groups: int, iterations: int, tolerance: float) -> np.ndarray:
    """``[n, m]`` Sinkhorn-scaled priors of every listed respondent: rows sum to 1, each group's
    column of value ``s`` sums to its count ``m_s`` (``count`` is ``[n, m]``, the respondent's
    group's counts); all groups at once by segment sums."""
    m = w.shape[1]
    # rows group after group (in their order within a group: a group's sums add the same rows in
    # the same order), so that a group's column scales reach its rows by one repeat
    order = np.argsort(np.asarray(segment, dtype=np.int64), kind="stable")
    segment = np.asarray(segment, dtype=np.int64)[order]
    size = np.bincount(segment, minlength=n_groups)
    a = np.where(count[order] > 0, w[order], 0.0)
    # a group's rows share its counts and its column scales: both kept per group ([groups, m])
    target = count[order][np.minimum(np.cumsum(size) - size, max(len(segment) - 1, 0))] * (size > 0)[:, None]
    col = np.ones((n_groups, m))
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    x = np.empty_like(a)  # [n, m] buffer reused every round
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(iterations):
            np.multiply(a, np.repeat(col, size, axis=0), out=x)
            x /= np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
            # per group and value, the rows added in order
            sums = np.bincount(flat, weights=x.ravel(), minlength=n_groups * m).reshape(n_groups, m)
            if np.all(np.abs(sums - target)[target > 0] <= tolerance):
                break
            col = col * np.where(sums > 0, target / np.maximum(sums, 1e-300), 1.0)
        x = a * np.repeat(col, size, axis=0)
        x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
    x[order] = x.copy()  # back to the rows' order
    # a group whose counts no scaling can meet (a value nobody's prior allows often enough) has
    # diverged: its rows become 0 and the caller falls back to the frequencies
    return np.where(np.isfinite(x).all(axis=1, keepdims=True), x, 0.0)


def permanent_posterior(weights, sensitive, segment, n_groups: int, n_values: int, params: PermanentParams | None = None):
    """``([n, m]`` posteriors, number of groups approximated) — see the module docstring."""
    p = params or PermanentParams()
    segment = np.asarray(segment, dtype=np.int64)
    n, m, G = len(segment), int(n_values), int(n_groups)
    counts = group_counts(sensitive, segment, G, m)
    freq = counts[segment] / np.maximum(counts.sum(axis=1)[segment], 1)[:, None]
    if weights is None:
        return freq, 0
    w = np.asarray(weights, dtype=float)
    if w.shape != (n, m):
        raise ValueError(f"weights must have shape (n, n_values) = ({n}, {m}); got {w.shape}")
    out = freq.copy()
    present = counts > 0
    k = present.sum(axis=1)
    states = np.prod(np.where(present, counts + 1, 1), axis=1, dtype=float)
    order = np.argsort(segment, kind="stable")
    start = np.searchsorted(segment[order], np.arange(G + 1))
    big = (k > 1) & (states > p.max_states)
    exact = np.flatnonzero((k > 1) & ~big)  # one value: the frequencies (1 on it) are exact
    exact = exact[np.argsort(counts[exact].sum(axis=1), kind="stable")]  # chunks of like sizes: fewer levels each
    cost = np.cumsum(k[exact] * states[exact])
    i = 0
    while i < len(exact):
        j = max(i + 1, int(np.searchsorted(cost, (cost[i - 1] if i else 0.0) + _BATCH_CELLS, side="right")))
        gs = exact[i:j]
        i = j
        cnt = counts[gs]
        pres = present[gs]
        kk = k[gs]
        slot = np.arange(m)[None, :] < kk[:, None]  # [B, m]: the first k slots hold each group's values, in order
        vals = np.zeros((len(gs), m), dtype=np.int64)
        vals[slot] = np.nonzero(pres)[1]
        cnt_slots = np.zeros((len(gs), m), dtype=np.int64)
        cnt_slots[slot] = cnt[pres]
        width = int(kk.max())
        sizes = cnt.sum(axis=1)
        rows = order[np.repeat(start[gs] - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))]
        value_of = np.repeat(vals[:, :width], sizes, axis=0)  # [R, width]
        post, ok = exact_chunk(w[rows[:, None], value_of], cnt_slots[:, :width])
        keep = np.repeat(ok, sizes)[:, None] & np.repeat(slot[:, :width], sizes, axis=0)
        r, c = np.nonzero(keep)
        out[rows[r], value_of[r, c]] = post[r, c]  # other values: 0 already (not published in the group)
    if big.any():
        rows = np.flatnonzero(big[segment])
        sub = segment[rows]
        remap = np.full(G, -1, np.int64)
        remap[np.flatnonzero(big)] = np.arange(int(big.sum()))
        approx = sinkhorn(w[rows], counts[segment[rows]].astype(float), remap[sub], int(big.sum()), p.iterations, p.tolerance)
        ok = approx.sum(axis=1) > 0.5
        out[rows[ok]] = approx[ok]
    return out, int(big.sum())


class Permanent(Estimator):
    """Bayes posterior with product weights: marginals of a permanent, exact over value-count states (Sinkhorn beyond max_states)."""

    Params = PermanentParams

    def posterior(self, weights, sensitive, segment, n_groups, n_values):
        return permanent_posterior(weights, sensitive, segment, n_groups, n_values, self.params)[0]

    def angelized_posterior(self, weights, view):
        """Refused: the exact permanent is over a group's assignments to its published values."""
        refuse_angelized("'permanent' (exact permanent over a group's values)")
