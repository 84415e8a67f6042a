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
    False where perm(W) = 0 (that group's rows are then meaningless). Every group's floats are
    the ones a batch of one gives, whatever the other groups: the same products and divisions,
    and sums taken in index order (:func:`_sums`; numpy's ``sum`` would pick its summation
    order by the batch's shape)."""
    B, n, k = w.shape
    m = np.asarray(m, dtype=np.int64)
    radix = m + 1
    stride = np.concatenate([[1], np.cumprod(radix)[:-1]]).astype(np.int64)
    S = int(np.prod(radix))
    digits = (np.arange(S)[:, None] // stride[None, :]) % radix[None, :]
    level = digits.sum(axis=1)  # values handed out: F_t and B_t live on level t only
    moves = []  # per value: u -> u + e_s, split by the level of u
    for s in range(k):
        src = np.flatnonzero(digits[:, s] < m[s])
        src = src[np.argsort(level[src], kind="stable")]
        cut = np.searchsorted(level[src], np.arange(n + 1))
        moves.append(([src[cut[t]:cut[t + 1]] for t in range(n)], stride[s]))
    ok = np.ones(B, dtype=bool)
    F = np.zeros((B, n + 1, S))
    F[:, 0, 0] = 1.0
    for t in range(n):
        for s, (by_level, step) in enumerate(moves):
            src = by_level[t]
            F[:, t + 1, src + step] += F[:, t, src] * w[:, t, s, None]
        total = _sums(F[:, t + 1])
        ok &= total > 0
        F[:, t + 1] /= np.where(total > 0, total, 1.0)[:, None]
    Bw = np.zeros((B, n + 1, S))
    Bw[:, n, S - 1] = 1.0  # every value handed out
    post = np.zeros((B, n, k))
    for t in range(n - 1, -1, -1):
        for s, (by_level, step) in enumerate(moves):
            src = by_level[t]
            Bw[:, t, src] += w[:, t, s, None] * Bw[:, t + 1, src + step]
            post[:, t, s] = w[:, t, s] * _sums(F[:, t, src] * Bw[:, t + 1, src + step])
        Bw[:, t] /= np.maximum(Bw[:, t].max(axis=1), 1e-300)[:, None]
    rows = _sums(post)[..., None]
    ok &= (rows > 0).all(axis=(1, 2))
    return post / np.where(rows > 0, rows, 1.0), ok


def _sums(x: np.ndarray) -> np.ndarray:
    """Sums along the last axis, added one term after another in index order (a running sum),
    so a row's sum does not depend on the array it sits in."""
    if x.shape[-1] == 0:
        return np.zeros(x.shape[:-1])
    return np.cumsum(x, axis=-1)[..., -1]


_BATCH_CELLS = 1 << 22  # most floats of one batch's forward table (B x (n + 1) x states): 32 MB


def sinkhorn(w: np.ndarray, count: np.ndarray, segment: np.ndarray, n_groups: int, iterations: int, tolerance: float) -> np.ndarray:
    """``[n, m]`` Sinkhorn-scaled priors of every listed respondent: rows sum to 1, each group's
    column of value ``s`` sums to its count ``m_s`` (``count`` is ``[n, m]``, the respondent's
    group's counts); all groups at once by segment sums."""
    m = w.shape[1]
    a = np.where(count > 0, w, 0.0)
    col = np.ones_like(a)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(iterations):
            x = a * col
            x /= np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
            sums = np.zeros((n_groups, m))
            np.add.at(sums, segment, x)
            per = sums[segment]
            if np.all(np.abs(per - count)[count > 0] <= tolerance):
                break
            col = col * np.where(per > 0, count / np.maximum(per, 1e-300), 1.0)
        x = a * col
        x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
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
    shapes: dict[tuple, list[int]] = {}  # groups of the same size and value counts, in value order
    for g in np.flatnonzero((k > 1) & ~big).tolist():  # one value: the frequencies (1 on it) are exact
        shapes.setdefault(tuple(counts[g][present[g]].tolist()), []).append(g)
    for shape, members in shapes.items():
        m_shape = np.array(shape, dtype=np.int64)
        n_g = int(m_shape.sum())
        per_batch = max(1, _BATCH_CELLS // ((n_g + 1) * int(np.prod(m_shape + 1))))
        for i in range(0, len(members), per_batch):
            gs = np.array(members[i : i + per_batch])
            rows = order[start[gs][:, None] + np.arange(n_g)[None, :]]  # [B, n]
            vals = np.nonzero(present[gs])[1].reshape(len(gs), len(shape))  # [B, k]: each group's values, in order
            post, ok = exact_groups(w[rows[:, :, None], vals[:, None, :]], m_shape)
            # other values: 0 already (not published in the group)
            out[rows[ok][:, :, None], vals[ok][:, None, :]] = post[ok]
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
