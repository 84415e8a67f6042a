"""(α,k)-anonymity (Wong, Li, Fu & Wang, "(α, k)-anonymity: an enhanced k-anonymity model for
privacy preserving data publishing", KDD 2006).

A publication is (α,k)-anonymous when every QI-group (equivalence class) E holds at least k
records and, for the sensitive values protected, the relative frequency ``|E, s| / |E|`` of each
is at most α. The paper protects a chosen set of sensitive values; here, as in pycanon 1.3.6's
``alpha_k_anonymity`` (and the paper's extension to a set of sensitive values taken as the whole
domain), every value of the sensitive attribute is protected: ``max_s |E, s| / |E| <= α``.

``levels``: ``k`` (smallest group) and ``alpha`` (largest relative frequency of a value in a group):
pycanon's ``(alpha, k)`` pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel

_TOL = 1e-12  # slack for a frequency equal to α (3/10 against 0.3)


@dataclass
class AlphaKAnonymityParams:
    alpha: float = field(default=0.5, metadata={"help": "largest relative frequency of a sensitive value in a QI-group, in (0, 1]"})
    k: int = field(default=2, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(
            isinstance(self.alpha, (int, float)) and not isinstance(self.alpha, bool) and math.isfinite(self.alpha)
            and 0 < self.alpha <= 1,
            "alpha", "a number in (0, 1]", self.alpha,
        )
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)


def top_frequencies(counts: np.ndarray) -> np.ndarray:
    """``[G]`` relative frequency of each group's most frequent value (0 for an empty group)."""
    return counts.max(axis=1, initial=0) / np.maximum(counts.sum(axis=1), 1)


class AlphaKAnonymity(PrivacyModel):
    """(α,k)-anonymity: |E| >= k and every value's frequency in E at most α."""

    Params = AlphaKAnonymityParams
    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        counts = batch.counts()
        return (counts.sum(axis=1) >= self.params.k) & (top_frequencies(counts) <= self.params.alpha + _TOL)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model alpha_k_anonymity (it judges a QI group's values)")
        counts = publication.group_counts()
        if counts.shape[0] == 0:
            return {"k": 0.0, "alpha": 0.0}
        return {"k": float(counts.sum(axis=1).min()), "alpha": float(top_frequencies(counts).max())}
