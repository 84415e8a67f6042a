"""τ-safe (l,k)-diversity ([12] of Khan et al., not in papers/) as the ``tau_safe_lk`` anonymizer,
in the reading Khan et al. describe (§4: "like τ-safety ... classification, balancing, assignment
and generalization"; "the assignment phase is exactly the same as in [11]"; counterfeits balance).

Reading: τ-safety's phases with l-diverse buckets of l distinct values (m = l) and k-anonymous
groups. [12] publishes in the angelization form (a generalized table of groups of >= k tuples
linked to a bucket table of signatures, Table 2b); cdpbench's publication has one partition, the
buckets, each of l >= k tuples, so its groups are already k-anonymous and the two tables coincide.
So its releases are τ-safety's with m = l, and it is as exposed to the collusion attack (the
paper's own fixture, §1.1, is a τ-safe (2,2)-diverse release sequence).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.errors import require

from .family import InvariantAnonymizer
from .phases import Policy


@dataclass
class TauSafeLKParams:
    l: int = field(default=2, metadata={"help": "distinct sensitive values per bucket (l-diversity; >= 2)"})
    k: int = field(default=2, metadata={"help": "tuples per generalized group (k-anonymity; 1 <= k <= l)"})
    shuffle: bool = field(default=True, metadata={"help": "shuffle the tuples inside each bucket before publishing"})

    def __post_init__(self) -> None:
        require(isinstance(self.l, int) and not isinstance(self.l, bool) and self.l >= 2, "l", "an integer >= 2", self.l)
        require(
            isinstance(self.k, int) and not isinstance(self.k, bool) and 1 <= self.k <= self.l,
            "k",
            f"an integer in [1, l = {self.l}] (a bucket of l distinct values is the published group)",
            self.k,
        )

    @property
    def m(self) -> int:
        return self.l


class TauSafeLK(InvariantAnonymizer):
    """τ-safe (l,k)-diversity: τ-safety's phases with l-diverse buckets (groups of >= l >= k tuples)."""

    Params = TauSafeLKParams
    policy = Policy(scope="previous", filler="counterfeit")
