"""The BCF plugins through the release loop, on other publications than global recodings, and the
general (non-cut) path of the B-attack's two-hop sets against a literal computation."""

from __future__ import annotations

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from cdpbench import runner
from cdpbench.registry import register_configs
from cdpbench_bcf.classes import Classes
from cdpbench_bcf.comparable import comparable_pairs
from cdpbench_bcf.correspondence import attack_pair, backward_sets, common_groups

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]


def run(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["dataset=adult_cumulative", "progress=false", "tracking.enabled=false",
                                           "metrics.kl_divergence.enabled=false", "metrics.query_error.enabled=false",
                                           "metrics.record_linkage.enabled=false", "metrics.belief.enabled=false", *overrides])
    return runner.run_releases(cfg, runner.build(cfg), progress=False)


def test_mondrian_publications_are_attacked():
    table = run("anonymizer=mondrian", "privacy_model=k_anonymity", "privacy_model.k=40", "attacker=correspondence",
                "attacker.k=40", "dataset.d2=2000")
    second = table.loc[2]
    assert second["correspondence.FA"] == second["correspondence.CA"] >= 1
    assert 1 <= second["correspondence.BA"] < 40  # 2000D2: the B-attack breaks Mondrian's 40-anonymity
    assert second["correspondence.below_k.B"] > 0 and np.isnan(table.loc[1, "correspondence.FA"])


def test_three_bcf_releases_verify_clean_and_report_the_compositions():
    table = run("anonymizer=bcf", "anonymizer.k=40", "privacy_model=bcf_anonymity", "privacy_model.k=40",
                "attacker=correspondence", "attacker.k=40", "dataset.d2=2000", "dataset.releases=3")
    assert (table["violations"] == 0).all() and (table["info.feasible"] == 1).all()
    for t in (2, 3):
        assert min(table.loc[t, "level.FA"], table.loc[t, "level.BA"]) >= 40
        assert table.loc[t, "correspondence.FA"] == table.loc[t, "level.FA"]
    assert table.loc[3, "correspondence.FA_composed"] >= 40  # B(R1, R2) cracks, then F/C with R3


def random_boxes(rng, G, d=2, width=6):
    low = rng.integers(0, width, size=(G, d)).astype(float)
    high = np.minimum(low + rng.integers(0, 4, size=(G, d)), width - 1)
    return low, high


@pytest.mark.parametrize("seed", range(30))
def test_two_hop_sets_on_overlapping_boxes_match_the_definition(seed):
    """Mondrian-like publications: boxes that overlap without nesting, so the comparability graph
    of groups is not a union of complete bipartite components and the sparse two-hop path runs
    (it does for 15 of these 30 seeds; the others take the component shortcut).
    G1(g2) = R1 records comparable to g2; G2(g2) = R2 records comparable to some record of G1."""
    rng = np.random.default_rng(seed)
    m = 3
    G1, G2 = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    l1, h1 = random_boxes(rng, G1)
    l2, h2 = random_boxes(rng, G2)
    k1 = rng.integers(0, G1, size=20)
    k1[:G1] = np.arange(G1)
    k2 = rng.integers(0, G2, size=25)
    k2[:G2] = np.arange(G2)
    s1, s2 = rng.integers(0, m, size=20), rng.integers(0, m, size=25)
    a = Classes.build(l1, h1, {}, k1, s1, m)
    b = Classes.build(l2, h2, {}, k2, s2, m)
    pa, pb = comparable_pairs(a, b)
    comp = np.zeros((G1, G2), bool)
    for i in range(G1):
        for j in range(G2):
            comp[i, j] = bool(np.all((l1[i] <= h2[j]) & (l2[j] <= h1[i])))
    assert set(zip(pa.tolist(), pb.tolist())) == set(zip(*np.nonzero(comp)))
    _, ea, eb, _ = common_groups(a, b, pa, pb)
    got_G1, got_G2 = backward_sets(a, b, ea, eb)
    for e, (j, s) in enumerate(zip(b.entry_class, b.entry_value)):
        in_G1 = [r for r in range(20) if s1[r] == s and comp[k1[r], j]]
        want_G1 = len(in_G1)
        want_G2 = sum(1 for r2 in range(25) if s2[r2] == s and any(comp[k1[r], k2[r2]] for r in in_G1))
        assert (got_G1[e], got_G2[e]) == (want_G1, want_G2), (seed, e)
    att = attack_pair(a, b)
    assert att.FA == att.CA
