"""(τ,m)-slicedBucket (Def. 11, pairwise reading, spec §3.5 item 3) as the ``sliced_bucket``
privacy model: m-unique releases (Def. 7), and every two signatures of a respondent are equal or
disjoint. The shared verifier is :mod:`cdpbench_invariance.history_verifier`.
"""

from __future__ import annotations

import numpy as np

from ..history_verifier import Signed, _Invariance, align


class SlicedBucketModel(_Invariance):
    """(τ,m)-slicedBucket (Def. 11, pairwise): m-unique releases, a respondent's signatures pairwise equal or disjoint."""

    def history_violations(self, now: Signed, history: list[Signed]) -> np.ndarray:
        bad = np.zeros(len(now.respondent), dtype=bool)
        for before in history:
            rows, prev = align(now, before)
            old = before.signature[prev]
            equal = (now.signature[rows] == old).all(axis=1)
            disjoint = ~(now.signature[rows] & old).any(axis=1)
            bad[rows] |= ~(equal | disjoint)
        return bad
