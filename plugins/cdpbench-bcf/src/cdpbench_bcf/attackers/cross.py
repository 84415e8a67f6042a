"""``cross``: the C-attack alone (BCF Def. 3.3–3.4, Theorem 4.3) on every pair ``(R_i, R_n)``
with the latest release (the adversary and her numbers: :mod:`~cdpbench_bcf.adversary`)."""

from __future__ import annotations

from ..adversary import CorrespondenceAdversary


class CrossAttacker(CorrespondenceAdversary):
    """C-attack (BCF Def. 3.3–3.4, Theorem 4.3): crack the later release's records of an earlier target."""

    attacks = ("C",)
