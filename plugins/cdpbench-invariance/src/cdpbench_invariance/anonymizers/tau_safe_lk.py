"""τ-safe (l,k)-diversity ([12] of Khan et al., not in papers/) as the ``tau_safe_lk`` anonymizer,
in the reading Khan et al. describe (§4: "like τ-safety ... classification, balancing, assignment
and generalization"; "the assignment phase is exactly the same as in [11]"; counterfeits balance).

Reading: τ-safety's phases with l-diverse buckets of l distinct values (m = l) and k-anonymous
groups. [12] publishes in the angelization form (a generalized table of groups of >= k tuples
linked to a bucket table of signatures, Table 2b); cdpbench's publication has one partition, the
buckets, each of l >= k tuples, so its groups are already k-anonymous and the two tables coincide.
So its releases are τ-safety's with m = l, and it is as exposed to the collusion attack (the
paper's own fixture, §1.1, is a τ-safe (2,2)-diverse release sequence).

Thresholds: ``l`` null (the default) is the run's privacy model's m (``tau_safety``'s, in the
presets), read at each publish; ``k`` null is l. Explicit values win over the model's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.errors import require
from cdpbench.plugin import PublishContext

from ..family import InvariantAnonymizer, check_threshold, is_threshold, model_threshold
from ..phases import Policy


@dataclass
class TauSafeLKParams:
    l: int | None = field(
        default=None,
        metadata={"help": "distinct sensitive values per bucket (l-diversity; >= 2); null = the run's privacy model's m"},
    )
    k: int | None = field(
        default=None,
        metadata={"help": "tuples per generalized group (k-anonymity; 1 <= k <= l); null = l"},
    )
    shuffle: bool = field(default=True, metadata={"help": "shuffle the tuples inside each bucket before publishing"})

    def __post_init__(self) -> None:
        check_threshold(self.l, "l", 2)
        if self.k is not None:
            require(is_threshold(self.k, 1), "k", "an integer >= 1, or null for l", self.k)
            if self.l is not None:
                require(self.k <= self.l, "k", f"an integer in [1, l = {self.l}] (a bucket of l distinct values is the published group)", self.k)

    @property
    def m(self) -> int | None:
        """The family's m: l (null: the privacy model's m, resolved at publish)."""
        return self.l


class TauSafeLK(InvariantAnonymizer):
    """τ-safe (l,k)-diversity: τ-safety's phases with l-diverse buckets (groups of >= l >= k tuples)."""

    Params = TauSafeLKParams
    policy = Policy(scope="previous", filler="counterfeit")

    def threshold(self, ctx: PublishContext) -> tuple[int, str]:
        """l (the family's m) and where it comes from: ``anonymizer.l``, or when it is null the run's
        privacy model's m; k (null: l) must not exceed it."""
        l, name = model_threshold(ctx, self.params.l, "l", 2, param="m")
        if self.params.k is not None:
            require(self.params.k <= l, "anonymizer.k", f"an integer in [1, l = {l}] (l from {name})", self.params.k)
        return l, name
