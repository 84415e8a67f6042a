"""β-likeness (Cao & Karras, "Publishing microdata with a robust privacy guarantee", VLDB 2012).

With ``q`` the sensitive distribution of the whole table (``ctx.table_distribution``) and ``p``
that of a QI-group, the relative gain of value ``s`` is ``D(p_s, q_s) = (p_s - q_s) / q_s``. A group
satisfies

* **basic** β-likeness when ``D(p_s, q_s) <= β`` for every ``s`` with ``p_s > q_s``;
* **enhanced** β-likeness when ``D(p_s, q_s) <= min(β, -ln q_s)`` for every ``s``
  with ``p_s > q_s`` (a frequent value may gain less than β).

A value with ``q_s = 0`` but ``p_s > 0`` (possible only when the group holds records foreign to the
table, e.g. counterfeits) has an infinite gain. Every classic model here also takes a minimum group
size ``k``.

``levels`` reports ``k`` (smallest group), ``beta`` as pycanon 1.3.6 computes it and
``beta_satisfied``, the smallest β the publication satisfies under the configured variant:

* basic: ``beta = beta_satisfied = max over groups and s of D(p_s, q_s)``;
* enhanced: pycanon reports ``max_s min(β_basic, -ln q_s) = min(β_basic, -ln min_s q_s)`` (over
  values present in the table), which does not look at which value carries the gain; the
  smallest satisfied β is β_basic when no gain exceeds its ``-ln q_s`` cap, else ``inf`` (no β
  helps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel

from ..table import table_distribution

VARIANTS = ("basic", "enhanced")
_TOL = 1e-12  # slack for float comparisons of a relative gain with its bound


@dataclass
class BetaLikenessParams:
    beta: float = field(default=1.0, metadata={"help": "maximum relative gain (p_s - q_s)/q_s of a sensitive value in a group (> 0)"})
    variant: str = field(default="basic", metadata={"help": "'basic' or 'enhanced' (gain also capped by -ln q_s)"})
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(
            isinstance(self.beta, (int, float)) and not isinstance(self.beta, bool) and math.isfinite(self.beta) and self.beta > 0,
            "beta",
            "a number > 0",
            self.beta,
        )
        require(self.variant in VARIANTS, "variant", "one of 'basic', 'enhanced'", self.variant)
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)


def relative_gains(counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``[G, m]`` relative gain ``(p_s - q_s) / q_s``; ``inf`` where ``q_s = 0 < p_s``, ``-1`` where
    both are 0 (a value absent from table and group gains nothing)."""
    p = counts / np.maximum(counts.sum(axis=1), 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = (p - q) / q
    absent = q == 0
    if absent.any():
        gain[:, absent] = np.where(p[:, absent] > 0, np.inf, -1.0)
    return gain


def enhanced_caps(q: np.ndarray) -> np.ndarray:
    """``[m]`` the enhanced cap ``-ln q_s`` (``inf`` where ``q_s = 0``)."""
    with np.errstate(divide="ignore"):
        return -np.log(q)


class BetaLikeness(PrivacyModel):
    """β-likeness (basic or enhanced): relative gain of every sensitive value bounded by β."""

    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    Params = BetaLikenessParams

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        counts = batch.counts()
        q = table_distribution(ctx, counts.shape[1])
        gain = relative_gains(counts, q)
        bound = np.full(len(q), float(self.params.beta))
        if self.params.variant == "enhanced":
            bound = np.minimum(bound, enhanced_caps(q))
        # a gain <= 0 (p_s <= q_s) is never constrained, and every bound is >= 0
        ok = (gain <= bound + _TOL).all(axis=1)
        return ok & (counts.sum(axis=1) >= self.params.k)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model beta_likeness (it judges a QI group's values)")
        counts = publication.group_counts()
        if counts.shape[0] == 0:
            return {"k": 0.0, "beta": 0.0, "beta_satisfied": 0.0}
        q = table_distribution(ctx, counts.shape[1])
        gain = relative_gains(counts, q)
        basic = float(gain.max())
        out = {"k": float(counts.sum(axis=1).min())}
        if self.params.variant == "basic":
            out["beta"] = out["beta_satisfied"] = basic
            return out
        caps = enhanced_caps(q)
        present = q > 0
        out["beta"] = float(min(basic, caps[present].max())) if present.any() else basic
        over_cap = (gain > caps + _TOL).any()
        out["beta_satisfied"] = float("inf") if over_cap else basic
        return out
