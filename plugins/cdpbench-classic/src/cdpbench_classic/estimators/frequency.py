"""The frequency estimator: an adversary without background knowledge.

Every respondent of QI-group ``Q`` believes the group's sensitive frequencies: the posterior of
respondent ``r`` on value ``s`` is ``m(s) / |Q|``, with ``m(s)`` the number of tuples of ``Q`` with
value ``s`` (the baseline of JS-reduce's gain of knowledge ρ, §7.2, and of BayFrame's gain G).
In an angelized publication (GT/BT) ``m(s)`` is the group's expected count through its buckets,
``sum_b n_{Q,b} c_b(s) / |b|`` (:meth:`~cdpbench.data.PublicView.expected_group_counts`).
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import PublicView
from cdpbench.errors import CdpbenchError
from cdpbench.plugin import Estimator


def group_counts(sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
    """``[n_groups, n_values]`` count ``m(s)`` of each sensitive value in each group."""
    segment = np.asarray(segment, dtype=np.int64)
    sensitive = np.asarray(sensitive, dtype=np.int64)
    flat = np.bincount(segment * n_values + sensitive, minlength=n_groups * n_values)
    return flat.reshape(n_groups, n_values)


def frequency_posterior(sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
    """``[n, m]``: row ``i`` is the sensitive distribution ``m(s)/|Q|`` of group ``segment[i]``."""
    counts = group_counts(sensitive, segment, n_groups, n_values).astype(float)
    sizes = counts.sum(axis=1, keepdims=True)
    freq = np.divide(counts, sizes, out=np.zeros_like(counts), where=sizes > 0)
    return freq[np.asarray(segment, dtype=np.int64)]


class Frequency(Estimator):
    """Posterior = the group's sensitive frequencies m(s)/|Q| (prior weights are ignored)."""

    def posterior(
        self, weights: np.ndarray | None, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
    ) -> np.ndarray:
        return frequency_posterior(sensitive, segment, n_groups, n_values)

    def angelized_posterior(self, weights: np.ndarray | None, view: PublicView) -> np.ndarray:
        """``[len(view.respondent), m]``: each candidate's group's expected frequencies through its
        buckets (GT/BT; the group frequencies in a single-partition view)."""
        counts = view.expected_group_counts()
        sizes = counts.sum(axis=1, keepdims=True)
        freq = np.divide(counts, sizes, out=np.zeros_like(counts), where=sizes > 0)
        return freq[np.asarray(view.group, dtype=np.int64)]


def refuse_angelized(who: str) -> None:
    """The one-line refusal of an estimator that judges a QI group's published values, which an
    angelized publication does not have."""
    raise CdpbenchError(f"estimator {who} does not support an angelized publication (QI groups published apart "
                        "from the sensitive buckets, GT/BT): use estimator=frequency")
