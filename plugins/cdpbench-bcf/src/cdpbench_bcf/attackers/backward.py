"""``backward``: the B-attack alone (BCF Def. 3.5–3.6, Theorem 4.4 with 4.4(1)'s guard) on every
pair ``(R_i, R_n)`` with the latest release (the adversary and her numbers:
:mod:`~cdpbench_bcf.adversary`)."""

from __future__ import annotations

from ..adversary import CorrespondenceAdversary


class BackwardAttacker(CorrespondenceAdversary):
    """B-attack (BCF Def. 3.5–3.6, Theorem 4.4 with its guard): crack the later release's records of a new target."""

    attacks = ("B",)
