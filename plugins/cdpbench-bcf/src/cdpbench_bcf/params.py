"""The parameters every BCF plugin takes: the threshold k and the reading of unrealisable targets."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.errors import require


@dataclass
class BCFParams:
    k: int = field(
        default=40,
        metadata={"help": "BCF-anonymity threshold: FA, CA, BA >= k (BCF §3.2); attackers count the respondents below it; >= 1"},
    )
    phantom: bool = field(
        default=False,
        metadata={"help": "keep targets no generator can realise (literal Defs. 3.2/3.6: anonymity 0; see the README)"},
    )

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(isinstance(self.phantom, bool), "phantom", "true or false", self.phantom)
