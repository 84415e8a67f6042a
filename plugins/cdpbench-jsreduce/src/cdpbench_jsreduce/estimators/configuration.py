"""The exact posterior over all configurations of a QI-group (JS-reduce §5.2, PK^sv).

A QI-group Q holds n tuples and n respondents; a *configuration* c is a one-to-one assignment of
the tuples to the respondents. Its confidence degree is the sum of the prior beliefs (RBK^sv, or
BK^sv for a first release) of the single associations it makes, d(c) = Σ_i w[i, c(i)], where
w[i, j] is the weight respondent i's prior gives to the sensitive value of tuple j. The posterior
of respondent i on value s is the degree of the configurations giving i a tuple with value s over
the degree of all configurations:

    p(i, s) = Σ_{c: s(c(i)) = s} d(c) / Σ_c d(c).

The paper enumerates the n! configurations and therefore falls back to the Ω-estimate; the sums
have a closed form (DESIGN.md §5). Counting permutations, Σ_c d(c) = (n−1)!·W and
Σ_{c: c(i)=j} d(c) = (n−1)!·w[i,j] + (n−2)!·(W − R_i − C_j + w[i,j]), with W the total of w, R_i
its row sums and C_j its column sums, so for n ≥ 2

    P(i→j) = (w[i,j] + (W − R_i − C_j + w[i,j]) / (n−1)) / W,     p(i, s) = Σ_{j: s(j)=s} P(i→j).

All tuples with the same value s have the same column of w (w[i, j] = prior[i, s]), so the sum
over j collapses; with m_s the number of tuples of Q with value s and K_s = Σ_{i∈Q} prior[i, s]:

    R_i = Σ_s m_s·prior[i, s],   W = Σ_s m_s·K_s,
    p(i, s) = m_s · (prior[i, s] + (W − R_i − K_s + prior[i, s]) / (n−1)) / W.

This costs O(n·m) per group instead of the O(n²) of the tuple-by-tuple form (and O(n!) of the
enumeration); every group of a publication is handled in one pass of segment sums.

Conventions (not covered by the paper):

* the weights are used as given, not normalized per respondent: the paper's Example 2 sums raw
  RBK values (0.31 + 0.31 = 0.62), and normalizing first would change its 0.62/0.69;
* n = 1: the single respondent owns the single tuple, p = 1 on its value;
* W = 0 (no respondent of the group has prior mass on any published value of the group: every
  configuration has degree 0 and the ratio is undefined): the posterior falls back to the group's
  frequencies m_s/|Q|, the belief of an adversary without usable knowledge;
* ``weights=None`` (no knowledge) is a uniform prior, which gives the same frequencies.
"""

from __future__ import annotations

import numpy as np

from cdpbench.errors import DataError
from cdpbench.plugin import Estimator


def configuration_posterior(
    weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
) -> np.ndarray:
    """``[n, m]`` exact configuration posteriors PK^sv (JS-reduce §5.2) for every group at once.

    Row ``i`` is a respondent of group ``segment[i]`` with prior weights ``weights[i]`` (``[n, m]``,
    non-negative, not necessarily summing to 1); the group's published sensitive multiset is
    ``sensitive[segment == g]``. Rows of the result sum to 1. See the module docstring.
    """
    segment = np.asarray(segment, dtype=np.int64)
    sensitive = np.asarray(sensitive, dtype=np.int64)
    n, m, G = len(segment), int(n_values), int(n_groups)
    if sensitive.shape != (n,):
        raise DataError(f"sensitive must have one value per row of segment ({n}); got shape {sensitive.shape}")
    counts = np.bincount(segment * m + sensitive, minlength=G * m).reshape(G, m).astype(float)  # m_s
    sizes = counts.sum(axis=1)
    size = np.maximum(sizes, 1.0)
    if weights is None or n == 0:
        return counts[segment] / size[segment][:, None]
    w = np.asarray(weights, dtype=float)
    if w.shape != (n, m):
        raise DataError(f"weights must have shape (n, n_values) = ({n}, {m}); got {w.shape}")
    if not np.isfinite(w).all() or w.min() < 0:
        raise DataError("weights must be finite and non-negative")
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=w.ravel(), minlength=G * m).reshape(G, m)  # K_s
    total = (counts * column).sum(axis=1)  # W per group
    count = counts[segment]  # [n, m] m_s of the respondent's group
    row = (w * count).sum(axis=1)  # R_i
    W = total[segment]
    # the [n, m] terms in place: post = m_s · (p + max(W − R_i − K_s + p, 0) / (n−1)) / W
    post = column[segment]
    np.subtract((W - row)[:, None], post, out=post)
    post += w
    np.maximum(post, 0.0, out=post)  # mass outside row i and column s
    post /= np.maximum(sizes[segment] - 1.0, 1.0)[:, None]  # pairs
    post += w
    post *= count
    with np.errstate(divide="ignore", invalid="ignore"):
        post /= W[:, None]
    inexact = np.flatnonzero((sizes[segment] < 2) | ~(W > 0))
    post[inexact] = count[inexact] / size[segment[inexact]][:, None]  # the group's frequencies
    post /= post.sum(axis=1, keepdims=True)  # exact up to rounding; removes float drift
    return post


class ConfigurationEstimator(Estimator):
    """Exact posterior over all configurations of a QI-group (JS-reduce §5.2), in closed form."""

    def posterior(
        self, weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
    ) -> np.ndarray:
        return configuration_posterior(weights, sensitive, segment, n_groups, n_values)
