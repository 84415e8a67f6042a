"""τ-safety (reading of [11], see :mod:`cdpbench_invariance.anonymizers.tau_safety`) as the
``tau_safety`` privacy model: m-unique releases (Def. 7), and against the respondent's previous
publication only, the signature is equal when the value lies in the previous signature, disjoint
otherwise. The shared verifier is :mod:`cdpbench_invariance.history_verifier`.
"""

from __future__ import annotations

import numpy as np

from ..history_verifier import Signed, _Invariance, align


class TauSafetyModel(_Invariance):
    """τ-safety (reading of [11]): against the previous publication, equal signatures if the value lies in it, else disjoint."""

    def history_violations(self, now: Signed, history: list[Signed]) -> np.ndarray:
        bad = np.zeros(len(now.respondent), dtype=bool)
        done = np.zeros(len(now.respondent), dtype=bool)
        for before in reversed(history):  # the most recent earlier publication of each respondent
            rows, prev = align(now, before)
            fresh = ~done[rows]
            rows, prev = rows[fresh], prev[fresh]
            old = before.signature[prev]
            inside = old[np.arange(len(rows)), now.value[rows]]
            equal = (now.signature[rows] == old).all(axis=1)
            disjoint = ~(now.signature[rows] & old).any(axis=1)
            bad[rows] = np.where(inside, ~equal, ~disjoint)
            done[rows] = True
        return bad
