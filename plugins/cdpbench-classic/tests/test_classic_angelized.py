"""An angelized publication (GT/BT: QI groups apart from the sensitive buckets, ``Publication.bucket``)
in the classic plugins: the snapshot attacker with the frequency estimator believes the expected
frequencies through the buckets (hand-computed); what judges a QI group's values refuses in one line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication
from cdpbench.errors import CdpbenchError
from cdpbench.plugin import AttackContext, ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive

SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("disease", ("a", "b", "c", "d")))


def angelized():
    """Ids 1..4 (a, c, b, d): QI groups {1, 2} and {3, 4}; buckets {1, 3} = {a, b} and {2, 4} = {c, d}.
    Each group holds one tuple of each bucket: every respondent a, b, c or d with 1/4."""
    frame = pd.DataFrame({"id": [1, 2, 3, 4], "age": [20, 30, 60, 70], "disease": ["a", "c", "b", "d"]})
    rel = SCHEMA.encode(frame, 1)
    pub = Publication.from_partition(rel, np.array([0, 0, 1, 1]))
    return rel, dataclasses.replace(pub, bucket=np.array([0, 1, 0, 1]))


def observe(estimator):
    rel, pub = angelized()
    attacker = default_registry().create("attacker", "snapshot", {"knowledge": "uniform", "estimator": estimator})
    view = pub.public()
    return attacker.observe(view, AttackContext(population=rel, views=[view], rng=np.random.default_rng(0)))


def test_frequency_believes_the_expected_frequencies_through_the_buckets():
    result = observe("frequency")
    assert result.respondent.tolist() == [1, 2, 3, 4]
    assert np.allclose(result.posterior, 0.25)  # a single-partition reading would give 1/2 on two values


@pytest.mark.parametrize("estimator, message", [
    ("omega", r"^estimator 'omega' \(with prior weights\) does not support an angelized publication"),
    ("permanent", r"^estimator 'permanent' \(exact permanent over a group's values\) does not support"),
])
def test_estimators_that_judge_a_groups_values_refuse(estimator, message):
    with pytest.raises(CdpbenchError, match=message) as err:
        observe(estimator)
    assert "\n" not in str(err.value)


def test_omega_without_priors_is_the_frequencies():
    from cdpbench_classic.estimators.omega import OmegaEstimate

    _, pub = angelized()
    assert np.allclose(OmegaEstimate().angelized_posterior(None, pub.public()), 0.25)


@pytest.mark.parametrize("name, params", [("l_diversity", {"l": 2}), ("t_closeness", {"t": 0.5}),
                                          ("beta_likeness", {"beta": 1.0}), ("bt_privacy", {})])
def test_models_that_judge_a_groups_values_refuse(name, params):
    rel, pub = angelized()
    model = default_registry().create("privacy_model", name, params)
    ctx = ModelContext(SCHEMA, rel.sensitive_distribution(), release=rel)
    if getattr(model, "needs_prior", False):
        ctx.prior = np.full((len(rel), 4), 0.25)
    with pytest.raises(CdpbenchError, match=rf"^privacy model {name} \(it judges a QI group's values\) does not support an angelized publication") as err:
        model.verify(pub, ctx)
    assert "\n" not in str(err.value)
