"""IE-BK_seq as the ``ie`` knowledge (JS-reduce, TDSC 2012, §5.1, §7.3).

Algorithm 5 (:class:`~cdpbench_jsreduce.sequential_knowledge.SequenceCounts`) run over the
ORIGINAL releases seen so far. :meth:`prior` receives the raw release, so the counts are updated
with the current release before its priors are computed ("at each time τ_i, IE-BK_seq is
calculated based on H_i"). Only a defender may use it: it reads ``release.sensitive``; "the
adversary cannot observe original views" (§5.1) — the ``sequential`` attacker accepts it only as
the reference adversary of Fig. 5a (an oracle, documented there). The revision engine the three
knowledge plugins share is :mod:`cdpbench_jsreduce.sequential_knowledge`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cdpbench.data import Release

from ..sequential_knowledge import SequenceCounts, SequentialKnowledge


class IncrementalKnowledge(SequentialKnowledge):
    """IE-BK_seq: Algorithm 5 over the original releases so far — a defender's knowledge only."""

    label = "ie"
    requires_model = False  # with bk_sv=uniform it runs on any data set

    def __init__(self, params: Any | None = None):
        super().__init__(params)
        self.counts: SequenceCounts | None = None
        self._tables: list[np.ndarray] = []
        self._counted: set[int] = set()  # release times already counted (prior may be asked twice)

    def observe_release(self, release: Release) -> None:
        """Count the raw release (once per release time ``t``)."""
        if self.counts is None:
            self.counts = SequenceCounts(self.params.steps, release.n_values)
        if release.t in self._counted:
            return
        self._counted.add(release.t)
        self.counts.add(release.respondent, release.sensitive, release.t)
        self._tables = self.counts.tables()

    def transition_tables(self, release: Release, cls: int = 0) -> list[np.ndarray]:
        assert self.counts is not None
        return self._tables

    def backoff_base(self, release: Release) -> np.ndarray:
        assert self.counts is not None
        return self.counts.frequencies()
