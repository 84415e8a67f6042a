"""Tests that close survivors of the mutation check (mutation/README.md): the shares the collusion
and membership attacks report, the membership attack's belief about a respondent no published
cell covers, and the m reported by the invariance verifiers' levels — all by hand."""

import numpy as np
import pytest

from cdpbench.data import Publication, Release
from cdpbench.plugin import AttackContext
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_invariance.attackers.intersection import IntersectionAttacker
from cdpbench_invariance.attackers.membership import MembershipAttacker
from cdpbench_invariance.privacy_models.m_invariance import MInvarianceModel
from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel
from cdpbench_invariance.privacy_models.tau_safety import TauSafetyModel

VALUES = ("a", "b", "c", "d", "e")
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("s", VALUES))


def publish(t, buckets, ages=None):
    """Release and publication of ``buckets`` = [[(respondent, value), ...], ...]; ``ages`` per
    respondent (default 40)."""
    rows = [(r, v, b) for b, bucket in enumerate(buckets) for r, v in bucket]
    ids = np.array([r for r, _, _ in rows])
    order = np.argsort(ids, kind="stable")
    age = np.array([[float((ages or {}).get(r, 40.0))] for r, _, _ in rows])[order]
    release = Release(t, SCHEMA, ids[order], age, np.array([VALUES.index(v) for _, v, _ in rows])[order])
    return release, Publication.from_partition(release, np.array([b for _, _, b in rows])[order])


def belief(result, respondent):
    return dict(zip(VALUES, result.posterior[list(result.respondent).index(respondent)].tolist()))


def test_collusion_narrowed_share_by_hand():
    # T1: {1:a, 2:b, 3:c}. T2: {1:a, 4:b, 5:d}, {2:b, 6:c, 7:e}. Respondent 1: {a,b,d} ∩ {a,b,c} =
    # {a,b}; respondent 2: {b,c,e} ∩ {a,b,c} = {b,c}; both narrowed (2 values, fewer than 3), 4-7 new.
    attacker = IntersectionAttacker()
    views = []
    results = []
    for t, buckets in enumerate([[[(1, "a"), (2, "b"), (3, "c")]],
                                 [[(1, "a"), (4, "b"), (5, "d")], [(2, "b"), (6, "c"), (7, "e")]]], start=1):
        release, pub = publish(t, buckets)
        views.append(pub.public())
        results.append(attacker.observe(views[-1], AttackContext(release, views, np.random.default_rng(0))))
    r2 = results[1]
    assert r2.extra["narrowed"] == 2
    assert r2.extra["narrowed_share"] == pytest.approx(2 / 6)
    assert belief(r2, 1) == pytest.approx({"a": 0.5, "b": 0.5, "c": 0, "d": 0, "e": 0})
    assert belief(r2, 2) == pytest.approx({"a": 0, "b": 0.5, "c": 0.5, "d": 0, "e": 0})
    assert belief(r2, 4) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 0, "d": 1 / 3, "e": 0})


def test_membership_shares_and_an_uncovered_respondent_by_hand():
    # group A: ages 20 (a), 40 (b) -> cell [20, 40]; group B: 30 (c), 35 (c) -> [30, 35], inside A.
    # The population puts respondent 5 (published in B, value c) at age 99: no cell covers it.
    ages = {1: 20, 2: 40, 3: 30, 4: 35, 5: 33}
    release, pub = publish(1, [[(1, "a"), (2, "b")], [(3, "c"), (4, "c"), (5, "d")]], ages)
    population = Release(1, SCHEMA, release.respondent, release.qi.copy(), release.sensitive)
    population.qi[list(population.respondent).index(5)] = 99.0
    res = MembershipAttacker().observe(pub.public(), AttackContext(population, [pub.public()], np.random.default_rng(0)))
    assert res.respondent.tolist() == [1, 2, 3, 4, 5]
    assert res.extra["mapped"] == 2  # 1 and 2 are covered by A alone; 3 and 4 by A and B
    assert res.extra["mapped_share"] == pytest.approx(2 / 5)
    assert belief(res, 1) == pytest.approx({"a": 0.5, "b": 0.5, "c": 0, "d": 0, "e": 0})
    assert belief(res, 3) == pytest.approx({"a": 0.2, "b": 0.2, "c": 0.4, "d": 0.2, "e": 0})
    assert belief(res, 5) == pytest.approx(dict.fromkeys(VALUES, 0.2))  # nothing known: uniform


@pytest.mark.parametrize("model", [MInvarianceModel, TauSafetyModel, SlicedBucketModel])
def test_verifier_level_m_is_the_fewest_distinct_values_of_a_group(model):
    # groups: {a, a, b} (2 distinct), {a, b, c} (3 distinct) -> m = 2
    release, pub = publish(1, [[(1, "a"), (2, "a"), (3, "b")], [(4, "a"), (5, "b"), (6, "c")]])
    assert model().levels(pub, None)["m"] == 2.0
