"""k-anonymity (Sweeney 2002): every QI-group holds at least k records."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel


@dataclass
class KAnonymityParams:
    k: int = field(default=2, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and self.k >= 1, "k", "an integer >= 1", self.k)


class KAnonymity(PrivacyModel):
    """k-anonymity: |Q| >= k for every QI-group."""

    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    Params = KAnonymityParams

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return batch.sizes() >= self.params.k

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        sizes = publication.group_sizes()
        return {"k": float(sizes.min()) if len(sizes) else 0.0}
