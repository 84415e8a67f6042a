"""m-invariance (Def. 8) as the ``m_invariance`` privacy model: m-unique releases (Def. 7), and a
respondent published in consecutive releases with the same value (one lifespan) keeps its
signature. The shared verifier is :mod:`cdpbench_invariance.history_verifier`.
"""

from __future__ import annotations

import numpy as np

from ..history_verifier import Signed, _Invariance, align


class MInvarianceModel(_Invariance):
    """m-invariance (Def. 8): m-unique releases, one signature per lifespan (consecutive releases, same value)."""

    def history_violations(self, now: Signed, history: list[Signed]) -> np.ndarray:
        bad = np.zeros(len(now.respondent), dtype=bool)
        rows, prev = align(now, history[-1])
        same_life = now.value[rows] == history[-1].value[prev]
        changed = (now.signature[rows] != history[-1].signature[prev]).any(axis=1)
        bad[rows[same_life & changed]] = True
        return bad
