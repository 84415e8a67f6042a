"""``correspondence``: every correspondence attack (BCF §4, §7.1) — F, C and B on every pair
``(R_i, R_n)`` with the latest release, and the two compositions of §7.1 — with their union
``below_k`` and ``FA_composed`` (the adversary and her numbers: :mod:`~cdpbench_bcf.adversary`)."""

from __future__ import annotations

from typing import ClassVar

from ..adversary import CorrespondenceAdversary


class CorrespondenceAttacker(CorrespondenceAdversary):
    """All correspondence attacks (BCF §4, §7.1): F, C, B on every pair with the latest release, and the compositions."""

    attacks: ClassVar[tuple[str, ...]] = ("F", "C", "B")
