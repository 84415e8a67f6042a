"""Tests that close survivors of the mutation check (mutation/README.md): k-linkability's group
test, the levels k_linkability and k_diversity report (linkable values, unplaced respondents) on a
four-record hand history, and j_similarity_join's fallback to the prior when the join leaves a
respondent's prior no mass."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import GroupBatch, History, Publication, Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench_ksaa.linkability import candidates
from cdpbench_ksaa.datasets.adult_sequential import AdultSequential, AdultSequentialParams

sys.path.insert(0, str(Path(__file__).parent))
from test_privacy_model_j_similarity_join import two_releases  # noqa: E402  (Mondrian k = 6 on two adult_sequential releases)


def reg():
    return default_registry()


@pytest.mark.parametrize("name", ["k_linkability", "k_diversity"])
def test_a_group_passes_with_k_distinct_values_each_held_once(name):
    # groups: (0, 1, 2) three distinct values once each; (0, 0, 1) two; (3, 3, 3, 3) one
    sens = np.array([0, 1, 2, 0, 0, 1, 3, 3, 3, 3])
    seg = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    batch = GroupBatch(sens, seg, 3, 5)
    for k, want in [(1, [True, True, True]), (2, [True, True, False]), (3, [True, False, False]), (4, [False] * 3)]:
        model = reg().create("privacy_model", name, {"k": k})
        assert model.accepts(batch, None).tolist() == want, k


def four_record_update():
    """test_ksaa_anonymizers' four-record instance: release 1 publishes race, groups {1, 3} and
    {0, 2}; respondent 1's value is updated to Craft-repair; release 2 publishes sex, race in
    groups {3} and {0, 1, 2}. The natural join links respondent 1 to Handlers-cleaners only; the
    full matching join drops that edge: respondent 1 is linked to nothing ("unplaced")."""
    r1, r2 = AdultSequential(AdultSequentialParams(records=4, releases=2, qi_sets=[["race"], ["sex", "race"]],
                                                   update_rate=0.0)).releases(np.random.default_rng(0))
    values = list(r1.schema.sensitive.values)
    sens2 = r2.sensitive.copy()
    sens2[1] = values.index("Craft-repair")
    r2 = Release(r2.t, r2.schema, r2.respondent, r2.qi, sens2, truth={"updated": np.array([1])})
    p1 = Publication.from_partition(r1, np.array([1, 0, 1, 0]), categorical="set")
    p2 = Publication.from_partition(r2, np.array([1, 1, 1, 0]), categorical="set")
    ctx = ModelContext(r2.schema, r2.sensitive_distribution(), History([r1], [p1]), r2)
    return p2, ctx


def test_linkability_levels_on_the_four_record_update():
    p2, ctx = four_record_update()
    kl = reg().create("privacy_model", "k_linkability", {"k": 2, "transitions": "none"}).verify(p2, ctx)
    assert kl.levels["unplaced"] == 0.0
    assert kl.levels["linkable_values"] == 1.0  # respondent 1: Handlers-cleaners only
    kd = reg().create("privacy_model", "k_diversity", {"k": 2, "transitions": "none"}).verify(p2, ctx)
    assert kd.levels["unplaced"] == 1.0  # respondent 1, linked to nothing by the full matching join
    assert kd.levels["linkable_values"] >= 1.0  # the minimum over placed respondents only


def test_joined_prior_falls_back_to_the_prior_when_the_join_leaves_it_no_mass():
    rels, (p1, p2) = two_releases(0)
    m = rels[1].n_values
    cand = candidates([p1.public(), p2.public()], transitions="none", pruned=True)
    allowed = {}
    for r, x in zip(cand.row.tolist(), cand.node.tolist()):
        allowed.setdefault(int(cand.respondent[r]), set()).add(int(cand.nodes.value[x]))
    prior = np.full((len(rels[1]), m), 1.0 / m)
    zeroed = []
    for i, resp in enumerate(p2.respondent.tolist()):
        vals = allowed.get(resp, set())
        if vals and len(vals) < m and len(zeroed) < 5:  # all its prior on one value the join rules out
            outside = min(set(range(m)) - vals)
            prior[p2.row[i]] = np.eye(m)[outside]
            zeroed.append(i)
    assert zeroed
    ctx = ModelContext(rels[1].schema, rels[1].sensitive_distribution(), History([rels[0]], [p1]), rels[1], prior)
    model = reg().create("privacy_model", "j_similarity_join", {"inner": {"k": 2, "j": 0.3, "beta": 5.0}})
    batch = model.joined_batch(p2, ctx)
    for i in zeroed:
        np.testing.assert_array_equal(batch.prior[i], prior[p2.row[i]])
    np.testing.assert_allclose(batch.prior.sum(axis=1), 1.0)
