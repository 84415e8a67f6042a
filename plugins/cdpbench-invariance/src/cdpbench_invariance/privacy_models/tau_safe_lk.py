"""τ-safe (l,k)-diversity (reading of [12], see :mod:`cdpbench_invariance.anonymizers.tau_safe_lk`)
as the ``tau_safe_lk`` privacy model: every bucket l-diverse (m-unique, Def. 7, with m = l: at
least l tuples of distinct values), τ-safety's rule on the buckets' signatures against each
respondent's previous publication (:class:`~cdpbench_invariance.privacy_models.tau_safety.TauSafetyModel`),
and every QI group of the generalized table GT at least k tuples (k-anonymity). In a
single-partition publication the buckets are the groups. The shared verifier is
:mod:`cdpbench_invariance.history_verifier`; levels add ``k``, the smallest QI group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.data import Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, VerifyReport

from .tau_safety import TauSafetyModel


@dataclass
class TauSafeLKModelParams:
    m: int = field(default=2, metadata={"help": "l: distinct sensitive values per bucket (l-diversity as m-uniqueness; >= 2)"})
    k: int | None = field(default=None, metadata={"help": "tuples per QI group (k-anonymity; >= 1); null = m"})

    def __post_init__(self) -> None:
        require(isinstance(self.m, int) and not isinstance(self.m, bool) and self.m >= 2, "m", "an integer >= 2", self.m)
        if self.k is not None:
            require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k",
                    "an integer >= 1, or null for m", self.k)


class TauSafeLKModel(TauSafetyModel):
    """τ-safe (l,k)-diversity (reading of [12]): τ-safety on l-diverse buckets, QI groups of >= k tuples."""

    Params = TauSafeLKModelParams

    @property
    def k(self) -> int:
        return self.params.m if self.params.k is None else self.params.k

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        out = super().levels(publication, ctx)
        sizes = publication.group_sizes()
        out["k"] = float(sizes.min()) if len(sizes) else 0.0
        return out

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        report = super().verify(publication, ctx)
        small = int((publication.group_sizes() < self.k).sum())
        bad = report.violations + small
        return VerifyReport(bad == 0, bad, report.levels)
