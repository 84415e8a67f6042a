"""The budget verifier of the DP count releases: the epsilon spent so far against the total.

A DP anonymizer (``dp_tree``, ``dp_release``) keeps an accountant
(:mod:`cdpbench_dp.accountant`) and reports in ``Publication.info`` the composed spend so far
(``epsilon_spent``), its stated total (``epsilon_total``) and, where it measures one, the user-level
epsilon (``epsilon_user_level``). ``verify`` reports them as levels (``level.epsilon_spent``, ...)
and one violation when the spend exceeds the total held to: ``privacy_model.epsilon``, or the
anonymizer's own stated total when unset. There are no candidate groups to judge (the cells are
fixed by the schema): ``accepts`` accepts every group, so a syntactic anonymizer run with this
model is simply not constrained by it — and ``verify`` refuses its publication, which has no
budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import CdpbenchError, require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport

#: relative slack for float sums of per-node charges (L x epsilon / L)
SLACK = 1e-9


@dataclass
class DPBudgetParams:
    epsilon: Optional[float] = field(default=None, metadata={"help": "the total epsilon to hold the spend to (> 0); "
                                                                     "default: the anonymizer's stated total"})

    def __post_init__(self) -> None:
        ok = self.epsilon is None or (isinstance(self.epsilon, (int, float)) and not isinstance(self.epsilon, bool)
                                      and math.isfinite(self.epsilon) and self.epsilon > 0)
        require(ok, "epsilon", "a number > 0 or null", self.epsilon)


class DPBudget(PrivacyModel):
    """The DP budget: epsilon spent so far (event level for dp_tree, user level for dp_release) against the stated total."""

    Params = DPBudgetParams
    reads_counts = True
    uses_history = False

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return np.ones(batch.n_groups, dtype=bool)

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        info = publication.info
        if "epsilon_spent" not in info or "epsilon_total" not in info:
            raise CdpbenchError("privacy model dp_budget verifies a DP count release (anonymizer dp_tree or dp_release); "
                                "this publication reports no privacy budget")
        spent = float(info["epsilon_spent"])
        total = float(self.params.epsilon if self.params.epsilon is not None else info["epsilon_total"])
        over = spent > total * (1 + SLACK)
        levels = {"epsilon_spent": spent, "epsilon_total": total}
        if "epsilon_user_level" in info:
            levels["epsilon_user_level"] = float(info["epsilon_user_level"])
        return VerifyReport(not over, int(over), levels)
