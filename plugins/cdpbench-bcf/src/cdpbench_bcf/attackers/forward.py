"""``forward``: the F-attack alone (BCF Def. 3.1–3.2, Theorem 4.2) on every pair ``(R_i, R_n)``
with the latest release (the adversary and her numbers: :mod:`~cdpbench_bcf.adversary`)."""

from __future__ import annotations

from ..adversary import CorrespondenceAdversary


class ForwardAttacker(CorrespondenceAdversary):
    """F-attack (BCF Def. 3.1–3.2, Theorem 4.2): crack records of an earlier release with a later one."""

    attacks = ("F",)
