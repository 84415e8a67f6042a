"""Compromised records shared by the publisher and the adversary (BayFrame Fig. 2, §5, Eq. 5):
the draw, the publisher's CR_RPD, and that sigma now changes what BKAA publishes."""

from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import Publication
from cdpbench.errors import ConfigError
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench_bayframe.compromise import cascaded_prior, compromise_draw, compromised

REPO = Path(__file__).resolve().parents[3]


def test_the_draw_depends_on_the_id_release_and_seed_only():
    ids = np.arange(100_000)
    mask = compromised(ids, 3, 0.1)
    # a Binomial(100000, 0.1) count: mean 10,000, standard deviation about 95
    assert abs(int(mask.sum()) - 10_000) < 500
    perm = np.random.default_rng(0).permutation(ids)
    assert (compromised(perm, 3, 0.1) == mask[perm]).all()  # the order the ids come in does not matter
    assert (compromised(ids, 4, 0.1) != mask).any() and (compromised(ids, 3, 0.1, seed=1) != mask).any()
    # the releases are independent: about sigma^2 of the ids are compromised in both
    both = mask & compromised(ids, 4, 0.1)
    assert abs(int(both.sum()) - 1_000) < 200
    u = compromise_draw(ids, 3, 0)
    assert u.min() >= 0 and u.max() < 1 and (compromised(ids, 3, 0.0) == 0).all()


def test_eq_5_cascaded_prior():
    rpd = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    out = cascaded_prior(rpd, [1], [0], 0.9)
    assert out[0].tolist() == rpd[0].tolist()
    assert out[1] == pytest.approx([0.9 + 0.1 * 0.1, 0.1 * 0.1, 0.1 * 0.8])
    assert out.sum(axis=1) == pytest.approx([1, 1])
    assert rpd[1].tolist() == [0.1, 0.1, 0.8]  # a copy


def _bkseq_release(t=1):
    reg = default_registry()
    releases = reg.create("dataset", "bkseq", {"releases": t, "tuples": 600}).releases(np.random.default_rng(0))
    return reg, list(releases)[-1]


def test_the_publishers_knowledge_gives_cr_rpd_to_the_adversarys_compromised_records():
    reg, release = _bkseq_release()
    plain = reg.create("knowledge", "bayframe").prior(release)
    knowing = reg.create("knowledge", "bayframe", {"sigma": 0.3, "cr": 0.9})
    got = knowing.prior(release)
    hit = compromised(release.respondent, release.t, 0.3)
    assert 0 < hit.sum() < len(hit)
    expected = cascaded_prior(plain, np.flatnonzero(hit), release.sensitive[hit], 0.9)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(got[~hit], plain[~hit])
    # what it remembers as their RPD is the uncascaded one
    rows = knowing.memory.rows(release.respondent)
    np.testing.assert_array_equal(knowing.memory.prior[rows], plain)
    # the adversary with the same sigma and seed compromises the same records (those published)
    view = Publication.from_partition(release, np.arange(len(release)) // 3).public()
    attacker = reg.create("attacker", "bayframe", {"cascading": "prior", "sigma": 0.3})
    result = attacker.observe(view, AttackContext(release, [view], np.random.default_rng(0)))
    order = np.searchsorted(release.respondent, view.respondent)
    np.testing.assert_array_equal(result.given, hit[order])


def test_an_adversarys_knowledge_cannot_hold_the_publishers_compromised_records():
    with pytest.raises(ConfigError, match=r"attacker.knowledge.sigma must be 0 for an adversary"):
        default_registry().create("attacker", "bayframe", {"knowledge": {"name": "bayframe", "sigma": 0.1}}, "attacker")


def _publications(sigma: float, releases: int = 3) -> list[Publication]:
    from hydra.core.global_hydra import GlobalHydra

    from cdpbench import launch, runner

    try:
        hydra = launch.hydra_instance(REPO / "conf")
        plan = launch.prepare(hydra, ["+experiment=bayframe/fig7", "+experiment/bayframe/steps=d1", f"knowledge.sigma={sigma}",
                                      f"dataset.releases={releases}", "tracking.enabled=false", "progress=false"], False)
    finally:
        GlobalHydra.instance().clear()  # other tests of this process start Hydra themselves
    cfg = plan.jobs[0].cfg
    comp = runner.build(cfg)
    seen = []
    publish = comp.anonymizer.publish
    comp.anonymizer.publish = lambda release, ctx: seen.append(publish(release, ctx)) or seen[-1]
    runner.run_releases(cfg, comp, progress=False)
    return seen


def test_sigma_changes_what_bkaa_publishes():
    """Fig. 2's cycle: the publisher anonymizes with CR_RPD, so sigma = 0.1 publishes other groups
    than sigma = 0 (before #26 the compromised records reached only the adversaries)."""
    none, some = _publications(0.0), _publications(0.1)
    assert len(none) == len(some) == 3
    differs = [not (a.respondent.shape == b.respondent.shape and (a.group == b.group).all()
                    and (a.respondent == b.respondent).all()) for a, b in zip(none, some)]
    assert any(differs), "sigma = 0.1 published exactly what sigma = 0 did"
    again = _publications(0.1)
    assert all((a.group == b.group).all() and (a.respondent == b.respondent).all() for a, b in zip(some, again))
