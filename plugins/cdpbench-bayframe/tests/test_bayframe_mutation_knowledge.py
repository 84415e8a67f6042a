"""Tests that close survivors of the mutation check (mutation/README.md): BayFrame's knowledge
storing PB without an estimator (the group's value frequencies), including a respondent the view
does not hold (no information: the uniform belief, a distribution like every stored PB)."""

import numpy as np
import pytest

from cdpbench.data import PublicView
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive

VALUES = ("a", "b", "c", "d", "e")
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("s", VALUES))


def view(t, groups):
    group = np.concatenate([np.full(len(r), g) for g, (r, _) in enumerate(groups)])
    resp = np.concatenate([np.asarray(r) for r, _ in groups])
    sens = np.concatenate([np.sort(np.asarray(vals)) for _, vals in groups])
    G = len(groups)
    return PublicView(t, SCHEMA, group, resp, sens, np.zeros((G, 1)), np.zeros((G, 1)), {}, 0)


def test_revise_without_posterior_stores_frequencies_and_uniform_for_an_absent_respondent():
    k = default_registry().create("knowledge", "bayframe")  # builds its kernel reference
    v = view(1, [([10, 11, 12], [0, 0, 2]), ([20, 21], [1, 4])])
    ids = np.array([12, 20, 99])  # 99 is not in the view
    k.revise(v, None, ids)
    stored = k.memory.post[k.memory.rows(ids), 0]
    assert stored[0] == pytest.approx([2 / 3, 0, 1 / 3, 0, 0])
    assert stored[1] == pytest.approx([0, 0.5, 0, 0, 0.5])
    assert stored[2] == pytest.approx(np.full(5, 1 / 5))
    assert stored.sum(axis=1) == pytest.approx(1.0)
