"""The membership attack (slicedBucket Def. 2) against a brute-force oracle."""

import sys
from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import Publication
from cdpbench.metrics.belief import BeliefMetrics
from cdpbench.plugin import AttackContext, MetricContext
from cdpbench.schema import CategoricalQI, Schema
from cdpbench.taxonomy import Taxonomy
from cdpbench_invariance.attackers.membership import MembershipAttacker
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams

sys.path.insert(0, str(Path(__file__).parent))
from test_invariance_properties import SCHEMA, publish_all, scenario  # noqa: E402


def certain_and_disclosed(pub, release, res):
    """The core's counts of records left with one value, and of those whose value is their true one."""
    out = BeliefMetrics().compute(MetricContext(release, pub, {"m": res}, None, np.random.default_rng(0)))
    return out["m.certain"], out["m.disclosed"]


def oracle(pub, release):
    schema = release.schema
    """Per published respondent: the value counts over the tuples of every group whose cell covers
    its QI, by loops."""
    out = {}
    for r in sorted(set(pub.respondent[pub.respondent >= 0].tolist())):
        x = release.qi[list(release.respondent).index(r)]
        weight = np.zeros(release.n_values)
        for g in range(pub.n_groups):
            ok = True
            for j, a in enumerate(schema.qi):
                if a.kind == "categorical":
                    ok &= bool(pub.value_sets[j][g, int(x[j])])
                else:
                    ok &= pub.low[g, j] <= x[j] <= pub.high[g, j]
            if ok:
                weight += np.bincount(pub.sensitive[pub.group == g], minlength=release.n_values)
        out[r] = weight / weight.sum()
    return out


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("categorical", ["taxonomy", "set"])
def test_posterior_matches_brute_force_on_random_partitions(seed, categorical, monkeypatch):
    """Taxonomy nodes are leaf ranges: prefix sums over the grid; arbitrary leaf sets ("set" with
    more leaves than the gender's two: a flat zip) fall back to meeting rows and groups."""
    import cdpbench_invariance.attackers.membership as membership

    calls = []
    real = membership.covering_sums
    monkeypatch.setattr(membership, "covering_sums", lambda *a: calls.append(real(*a)) or calls[-1])
    rng = np.random.default_rng(seed)
    release = scenario(seed, releases=1)[0]
    if categorical == "set":  # a third column with 6 leaves, so that a group's set can have holes
        from cdpbench.data import Release

        zips = Taxonomy.flat([f"z{i}" for i in range(6)])
        schema = Schema((*SCHEMA.qi, CategoricalQI("zip", zips)), SCHEMA.sensitive)
        release = Release(release.t, schema, release.respondent,
                          np.column_stack([release.qi, rng.integers(0, 6, len(release))]).astype(float), release.sensitive)
    groups = rng.integers(0, 12, len(release))
    groups[rng.random(len(release)) < 0.1] = -1
    pub = Publication.from_partition(release, groups, categorical=categorical)
    res = MembershipAttacker().observe(pub.public(), AttackContext(release, [pub.public()], rng))
    expected = oracle(pub, release)
    assert list(res.respondent) == list(expected)
    np.testing.assert_allclose(res.posterior, np.array(list(expected.values())), rtol=0, atol=1e-12)
    single = int(sum((p > 0).sum() == 1 for p in expected.values()))
    # her QI is the published respondent's own, so a single value left is always the true one
    assert certain_and_disclosed(pub, release, res) == (single, single)
    assert (calls[0] is None) == (categorical == "set")  # which path ran


def test_a_single_valued_group_alone_on_its_cell_is_disclosed():
    release = scenario(0, releases=1)[0]
    order = np.argsort(release.qi[:, 0], kind="stable")  # the youngest records of one value, alone in a group
    youngest = order[:3]
    groups = np.ones(len(release), dtype=np.int64)
    groups[youngest] = 0
    release.sensitive[youngest] = release.sensitive[youngest[0]]
    release.qi[youngest, 0] = release.qi[youngest[0], 0]  # one age: no other group's box reaches it ...
    release.qi[order[3:], 0] = np.maximum(release.qi[order[3:], 0], release.qi[youngest[0], 0] + 1)
    pub = Publication.from_partition(release, groups)
    res = MembershipAttacker().observe(pub.public(), AttackContext(release, [pub.public()], np.random.default_rng(0)))
    assert certain_and_disclosed(pub, release, res) == (3, 3)  # the three of group 0
    assert res.extra["mapped"] == len(res.respondent)  # everyone's QI is covered by one group
    assert res.extra["mapped"] == len(res.respondent)
    p = res.posterior[np.isin(res.respondent, release.respondent[youngest])]
    assert (p[:, release.sensitive[youngest[0]]] == 1.0).all()


@pytest.mark.parametrize("seed,m", [(0, 2), (1, 3)])
def test_m_unique_releases_disclose_no_one_by_mapping(seed, m):
    releases = scenario(seed)
    pubs = publish_all(SlicedBucket(SlicedBucketParams(m=m)), releases)
    for rel, pub in zip(releases, pubs):
        res = MembershipAttacker().observe(pub.public(), AttackContext(rel, [pub.public()], np.random.default_rng(0)))
        assert certain_and_disclosed(pub, rel, res) == (0, 0)
        # each covering group holds >= m tuples of distinct values: no value above 1/m
        assert res.posterior.max() <= 1 / m + 1e-12
