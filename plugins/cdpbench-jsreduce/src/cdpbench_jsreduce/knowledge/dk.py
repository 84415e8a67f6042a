"""DK-BK_seq as the ``dk`` knowledge (JS-reduce, TDSC 2012, §5.1, §5.3 (Algorithm 3), §7.3).

The data set's ground-truth model (``release.truth["model"]``, a
:class:`~cdpbench_jsreduce.sequence_model.SequenceModel`), its exact ``bk_seq(n)`` tables;
``steps = n`` gives the paper's "n-steps DK-BK_seq" (§7.3). BK_sv at a first appearance, RBK^sv
after: the revision engine the three knowledge plugins share is
:mod:`cdpbench_jsreduce.sequential_knowledge`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cdpbench.data import Release
from cdpbench.errors import DataError

from ..sequential_knowledge import SequentialKnowledge


class DomainKnowledge(SequentialKnowledge):
    """DK-BK_seq: the data set's exact n-step transitions, revised per respondent (§5.1, §5.3).

    A model whose transitions depend on the QI (``n_seq_classes > 1``, ``seq_class(qi)``,
    ``bk_seq(j, seq_class=c)``) gives each respondent the tables of its class."""

    label = "dk"

    def __init__(self, params: Any | None = None):
        super().__init__(params)
        self._tables_of: Any = None
        self._tables: dict[int, list[np.ndarray]] = {}

    def classes(self, release: Release) -> np.ndarray:
        model = self.model(release)
        if int(getattr(model, "n_seq_classes", 1)) <= 1:
            return np.zeros(len(release), dtype=np.int64)
        return np.asarray(model.seq_class(release.qi), dtype=np.int64)

    def observation_weights(self, release: Release) -> np.ndarray | None:
        weights = getattr(self.model(release), "observed", None)
        return None if weights is None else np.asarray(weights, dtype=float)

    def transition_tables(self, release: Release, cls: int = 0) -> list[np.ndarray]:
        model = self.model(release)
        if self._tables_of is not model:
            self._tables_of, self._tables = model, {}
        if cls not in self._tables:
            m = release.n_values
            n = max(1, min(self.params.steps, int(getattr(model, "max_order", self.params.steps))))
            by_class = int(getattr(model, "n_seq_classes", 1)) > 1
            tables = []
            for j in range(1, n + 1):
                t = np.asarray(model.bk_seq(j, seq_class=cls) if by_class else model.bk_seq(j), dtype=float)
                if t.shape != (m,) * (j + 1):
                    raise DataError(
                        f"knowledge {self.name!r}: model.bk_seq({j}) has shape {t.shape}, expected {(m,) * (j + 1)}"
                    )
                tables.append(t)
            self._tables[cls] = tables
        return self._tables[cls]
