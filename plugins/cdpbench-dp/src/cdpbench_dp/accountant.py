"""Privacy-budget accounting over the releases of a horizon.

Every noisy quantity a mechanism releases is a *charge*: an epsilon (and delta) spent on one part
of the input stream. Charges on the same ``part`` touch disjoint pieces of the stream (the nodes of
one level of the binary tree cover disjoint time ranges, so an event lies in one of them):
they compose in parallel (the part costs the largest of its charges). Different parts compose
sequentially (their costs add). The spend so far is therefore ``sum over parts of max charge``
(basic composition; Dwork & Roth, "The algorithmic foundations of differential privacy", 2014,
Thm 3.16 and §2.4 for parallel composition on disjoint data).

* binary tree (Chan, Shi & Song 2011, Thm 3.5): part = level of the node, each node
  ``epsilon / L``; after release ``t`` the levels ``0..floor(log2 t)`` hold a node, so the spend is
  ``(floor(log2 t) + 1) epsilon / L``, exactly ``epsilon`` once ``t >= 2^(L - 1)``.
* per release: part = release, ``epsilon / T`` each, ``t epsilon / T`` after ``t`` releases.

The accountant refuses a release past its horizon (the budget was split over ``horizon``
releases; one more would spend beyond the stated total).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdpbench.errors import CdpbenchError


@dataclass
class Charge:
    t: int  # the release that paid it
    part: str  # charges of one part compose in parallel (module docstring)
    epsilon: float
    delta: float = 0.0


@dataclass
class BudgetAccountant:
    """Records each release's charges and the composed spend against the stated total."""

    epsilon_total: float
    horizon: int
    delta_total: float = 0.0
    charges: list[Charge] = field(default_factory=list)
    released: int = 0

    def start_release(self, t: int) -> None:
        """Open release ``t`` (1..horizon), refusing one past the horizon."""
        if t > self.horizon:
            raise CdpbenchError(f"release {t} is past the privacy horizon of {self.horizon} releases the budget "
                                f"epsilon = {self.epsilon_total:g} was split over; set anonymizer.horizon >= {t}")
        if t <= self.released:
            raise CdpbenchError(f"release {t} comes after release {self.released}: releases must be consecutive")
        self.released = t

    def charge(self, part: str, epsilon: float, delta: float = 0.0) -> None:
        self.charges.append(Charge(self.released, part, float(epsilon), float(delta)))

    def _composed(self, upto: int | None, what: str) -> float:
        parts: dict[str, float] = {}
        for c in self.charges:
            if upto is None or c.t <= upto:
                parts[c.part] = max(parts.get(c.part, 0.0), getattr(c, what))
        return float(sum(parts.values()))

    def epsilon_spent(self, upto: int | None = None) -> float:
        """The composed epsilon of every charge of releases ``<= upto`` (all: None)."""
        return self._composed(upto, "epsilon")

    def delta_spent(self, upto: int | None = None) -> float:
        return self._composed(upto, "delta")

    def release_spend(self, t: int) -> float:
        """What release ``t`` added to the composed epsilon."""
        return self.epsilon_spent(t) - self.epsilon_spent(t - 1)
