"""The Ω-estimate of the posterior belief inside a QI-group.

Li, Li & Zhang, "Modeling and Integrating Background Knowledge in Data Anonymization" (ICDE 2009),
the approximate-inference section; JS-reduce (TDSC 2012) §5.2 uses it to compute PK^sv. Exact
inference sums over the |Q|! assignments of the group's tuples to its respondents; the Ω-estimate
replaces it by one proportional allocation. With ``p(r, s)`` the prior of respondent ``r`` on value
``s`` and ``n(s)`` the number of tuples of group ``Q`` carrying ``s``, the ``n(s)`` tuples are shared
among the respondents of ``Q`` in proportion to their priors on ``s``:

    Ω(r, s) = n(s) · p(r, s) / Σ_{r' ∈ Q} p(r', s),

the expected number of ``s``-tuples of ``r``; the posterior normalizes it per respondent,

    P_post(r, s) = Ω(r, s) / Σ_{s'} Ω(r, s').

(One column-then-row step of iterative proportional fitting of the prior matrix to the group's
published counts.) When every respondent of the group has the same prior, the estimate is exactly
the group's frequencies ``n(s)/|Q|``.

Source note: the paper's body is not in ``/work/shared/papers`` and the stored public corpora hold
only its abstract, so the formula follows the paper as recalled; degenerate cases it does not
cover are decided here:

* a published value ``s`` on which no respondent of the group has prior mass (the column sum is
  0): its ``n(s)`` tuples are shared evenly, ``Ω(r, s) = n(s) / |Q|`` (the prior says nothing
  usable about ``s``);
* a respondent whose ``Ω(r, ·)`` is 0 everywhere (its prior excludes every published value of its
  group): its posterior is the group's frequencies ``n(s)/|Q|``;
* ``weights=None`` (no knowledge) is a uniform prior, hence the frequencies.
"""

from __future__ import annotations

import numpy as np

from cdpbench.plugin import Estimator

from .frequency import Frequency, group_counts, refuse_angelized


def omega_posterior(
    weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
) -> np.ndarray:
    """``[n, m]`` Ω-estimate posteriors for every respondent of every group at once.

    Row ``i`` is a respondent of group ``segment[i]`` with prior ``weights[i]``; the group's
    published sensitive multiset is ``sensitive[segment == g]``. Rows sum to 1.
    """
    segment = np.asarray(segment, dtype=np.int64)
    n, m = len(segment), int(n_values)
    counts = group_counts(sensitive, segment, n_groups, m).astype(float)  # n(s) per group
    size = np.maximum(counts.sum(axis=1), 1.0)  # |Q|, 1 for an empty group
    if weights is None:
        return counts[segment] / size[segment][:, None]
    w = np.asarray(weights, dtype=float)
    if w.shape != (n, m):
        raise ValueError(f"weights must have shape (n, n_values) = ({n}, {m}); got {w.shape}")
    # Σ_{r' ∈ Q} p(r', s): one bincount over the flattened (group, value) index
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=w.ravel(), minlength=int(n_groups) * m).reshape(int(n_groups), m)
    return omega_rows(segment, w, counts, column, size)


def omega_rows(segment: np.ndarray, prior: np.ndarray, counts: np.ndarray, column: np.ndarray,
               size: np.ndarray) -> np.ndarray:
    """``[r, m]`` Ω-estimate posteriors of the rows ``prior`` (groups ``segment``) from their groups'
    tables: ``counts`` n(s), ``column`` Σ_{r' ∈ Q} p(r', s) and ``size`` |Q| (``[groups, m]``,
    ``[groups, m]``, ``[groups]``). A row depends on its own prior and its group's sums only, so
    any block of rows gives the floats of the whole. The ``[r, m]`` arrays are made in place, one
    gather each from the tables."""
    omega = counts[segment]
    omega *= prior
    col = column[segment]
    has_mass = col > 0
    np.divide(omega, col, out=omega, where=has_mass)
    del col
    if not has_mass.all():  # a value nobody's prior allows: its tuples are shared evenly
        i, s = np.nonzero(~has_mass)
        omega[i, s] = counts[segment[i], s] / size[segment[i]]
    del has_mass
    total = omega.sum(axis=1, keepdims=True)
    positive = total > 0
    np.divide(omega, total, out=omega, where=positive)
    if not positive.all():  # Ω(r, ·) = 0 everywhere: the group's frequencies
        i = np.flatnonzero(~positive[:, 0])
        omega[i] = counts[segment[i]] / size[segment[i]][:, None]
    return omega


class OmegaEstimate(Estimator):
    """Ω-estimate posterior (Li, Li & Zhang, ICDE 2009): priors rescaled to the group's counts."""

    def posterior(
        self, weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
    ) -> np.ndarray:
        return omega_posterior(weights, sensitive, segment, n_groups, n_values)

    def angelized_posterior(self, weights, view):
        """Without priors the frequencies through the buckets; with them refused (the Ω-estimate
        shares a group's published counts, which an angelized group does not have)."""
        if weights is not None:
            refuse_angelized("'omega' (with prior weights)")
        return Frequency().angelized_posterior(None, view)
