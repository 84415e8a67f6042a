"""δ-disclosure privacy (Brickell & Shmatikov, "The cost of privacy: destruction of data-mining
utility in anonymized data publishing", KDD 2008).

With ``p(s|T)`` the sensitive distribution of the whole table (``ctx.table_distribution``) and
``p(s|E)`` that of a QI-group (equivalence class) E, E is δ-disclosure private when
``|log(p(s|E) / p(s|T))| < δ`` for every sensitive value s.

A value absent from E makes ``log 0 = -inf``, so read literally every group must hold every value
of the table. Two readings (``absent``):

* ``skip`` (default): the bound applies to the values present in E (``p(s|E) > 0``). This is
  what pycanon 1.3.6 computes (``aux_calculate_delta_disclosure`` takes
  ``max |log x|`` over the ratios ``x > 0`` only) and what its reported δ means.
* ``violate``: the literal definition: a group lacking a value present in the table violates
  the model whatever δ.

Natural logarithm, as in pycanon. A value present in a group but absent from the table (possible
only with records foreign to it, e.g. counterfeits) has an infinite ratio. Every classic model
here also takes a minimum group size ``k``.

``levels``: ``k`` (smallest group), ``delta`` = max over groups and present values of
``|ln(p(s|E)/p(s|T))|`` (pycanon's δ: the publication satisfies every δ' > ``delta`` under
``skip``), ``delta_literal`` = the same with absent table values counted (``inf`` when a group
lacks one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel

from ..table import table_distribution

READINGS = ("skip", "violate")


@dataclass
class DeltaDisclosureParams:
    delta: float = field(default=1.0, metadata={"help": "bound δ > 0 on |ln(p(s|group) / p(s|table))| for every sensitive value s"})
    absent: str = field(
        default="skip",
        metadata={"help": "a value absent from a group: 'skip' (bound the values present, pycanon's reading) or 'violate' "
                          "(the literal definition: ln 0 = -inf)"},
    )
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(
            isinstance(self.delta, (int, float)) and not isinstance(self.delta, bool) and math.isfinite(self.delta)
            and self.delta > 0,
            "delta", "a number > 0", self.delta,
        )
        require(self.absent in READINGS, "absent", "one of 'skip', 'violate'", self.absent)
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)


def log_ratios(counts: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(|ln(p(s|E)/p(s|T))|, present)``, both ``[G, m]``: the absolute log ratio of each value
    present in a group (``inf`` where the table lacks it; 0 where the group lacks it) and whether
    it is present. ``p(s|E) = count / |E|`` divided by ``q``, then the log: pycanon's order."""
    present = counts > 0
    p = counts / np.maximum(counts.sum(axis=1), 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(np.log(p / q))
    return np.where(present, ratio, 0.0), present


class DeltaDisclosure(PrivacyModel):
    """δ-disclosure privacy: |ln(p(s|group)/p(s|table))| < δ for every value (present, or every one)."""

    Params = DeltaDisclosureParams
    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        counts = batch.counts()
        q = table_distribution(ctx, counts.shape[1])
        ratio, present = log_ratios(counts, q)
        ok = (ratio < self.params.delta).all(axis=1)
        if self.params.absent == "violate":
            ok &= ~((~present) & (q > 0)[None, :]).any(axis=1)
        return ok & (counts.sum(axis=1) >= self.params.k)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model delta_disclosure (it judges a QI group's values)")
        counts = publication.group_counts()
        if counts.shape[0] == 0:
            return {"k": 0.0, "delta": 0.0, "delta_literal": 0.0}
        q = table_distribution(ctx, counts.shape[1])
        ratio, present = log_ratios(counts, q)
        delta = float(ratio.max())
        lacking = ((~present) & (q > 0)[None, :]).any()
        return {"k": float(counts.sum(axis=1).min()), "delta": delta, "delta_literal": math.inf if lacking else delta}
