"""Correspondence attacks on a sequence of cumulative releases (BCF §7.1).

Releases ``R_1 .. R_n`` (``R_i`` covers ``D_1 ∪ .. ∪ D_i``). When ``R_n`` is published, the attacks
that involve it are checked (§7.1 item (2): the earlier releases were checked when they were
published):

* **micro attacks** F, C and B on every pair ``(R_i, R_n)``, ``i < n``, each by the two-release
  formulas (:func:`~cdpbench_bcf.correspondence.attack_pair`);
* **composition, cases 1 and 2**: a B-attack ``(g_i, g_j)`` first removes ``x_B`` records of
  ``g_j`` (they carry a timestamp ``<= T_i``), then an F-attack ``(g'_j, g_n)`` cracks the reduced
  ``g'_j`` (case 1) or a C-attack ``(g'_j, g_n)`` cracks ``g_n`` (case 2). Both are the pair
  attack on ``(R'_j, R_n)`` with ``R'_j``'s group sizes ``|g_j| - x_B``: case 1's anonymity of
  ``qid_j`` and case 2's of ``qid_n`` are the two sides of the same ``Σ_s min(|g'_j|, |g_n|)``
  (Lemma 4.4), so FA = CA holds for the compositions too. ``x_B`` of a group is the largest
  B-crack any earlier background gives it (the optimal micro attack, §7.1).

Not combined: the optimal *F* micro attack over several backgrounds at once (``max_j c_ij`` per
group of one target's chain of classes ``qid_i .. qid_n``) needs the chain of classes a target
matches in every later release; the pairs ``(R_i, R_n)`` are checked one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .classes import Classes
from .correspondence import PairAttack, attack_pair


@dataclass
class LatestAttacks:
    """The attacks involving the latest release ``R_n``."""

    pairs: dict[int, PairAttack] = field(default_factory=dict)  # i -> micro attacks on (R_i, R_n), i 0-based
    composed: dict[int, PairAttack] = field(default_factory=dict)  # j -> attacks on (R'_j, R_n)

    @property
    def FA(self) -> float:
        return min([p.FA for p in self.pairs.values()] + [p.FA for p in self.composed.values()], default=np.inf)

    @property
    def CA(self) -> float:
        return min([p.CA for p in self.pairs.values()] + [p.CA for p in self.composed.values()], default=np.inf)

    @property
    def BA(self) -> float:
        return min([p.BA for p in self.pairs.values()], default=np.inf)

    @property
    def FA_composed(self) -> float:
        return min([p.FA for p in self.composed.values()], default=np.inf)

    def backward_reduced(self, latest: Classes) -> Classes | None:
        """``R'_n``: the latest release with each group reduced by its largest B-crack over the
        earlier backgrounds; ``None`` when no B-attack cracks anything (then ``R'_n = R_n``)."""
        if not self.pairs:
            return None
        crack = np.max(np.stack([p.backward_crack for p in self.pairs.values()]), axis=0)
        if not crack.any():
            return None
        return latest.with_counts(latest.entry_count - crack)


def attack_latest(earlier: list[Classes], reduced: list[Classes | None], latest: Classes, *, phantom: bool = False) -> LatestAttacks:
    """Micro attacks of ``latest`` against every release in ``earlier`` and the compositions through
    every earlier release ``j`` with a reduced version ``reduced[j]`` (see the module docstring)."""
    out = LatestAttacks()
    for i, a in enumerate(earlier):
        out.pairs[i] = attack_pair(a, latest, phantom=phantom)
        if reduced[i] is not None:
            out.composed[i] = attack_pair(reduced[i], latest, phantom=phantom)
    return out


class ReleaseChain:
    """The classes of every release seen so far and their B-reduced versions (for compositions);
    ``add`` attacks a new release with everything before it and keeps it."""

    def __init__(self, phantom: bool = False):
        self.phantom = phantom
        self.classes: list[Classes] = []
        self.reduced: list[Classes | None] = []

    def attack(self, latest: Classes) -> LatestAttacks:
        return attack_latest(self.classes, self.reduced, latest, phantom=self.phantom)

    def add(self, latest: Classes, attacks: LatestAttacks | None = None) -> LatestAttacks:
        attacks = self.attack(latest) if attacks is None else attacks
        self.classes.append(latest)
        self.reduced.append(attacks.backward_reduced(latest))
        return attacks
