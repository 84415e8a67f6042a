"""The release loop in-process: determinism, verification, metric ranges, scenario checks."""

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO, SMALL
from cdpbench import runner
from cdpbench.registry import register_configs


def config(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[*SMALL, *overrides])


def run(*overrides):
    cfg = config(*overrides)
    return runner.run_releases(cfg, runner.build(cfg), progress=False)


def deterministic(table):
    return table[[c for c in table.columns if not c.startswith("time_")]]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), model=st.sampled_from(["k_anonymity", "l_diversity", "t_closeness"]))
def test_same_seed_gives_identical_metrics(seed, model):
    a = run(f"seed={seed}", f"privacy_model={model}", "dataset.releases=2")
    b = run(f"seed={seed}", f"privacy_model={model}", "dataset.releases=2")
    assert deterministic(a).equals(deterministic(b))


def test_other_seed_gives_other_releases():
    a = run("seed=1", "dataset.releases=2")
    b = run("seed=2", "dataset.releases=2")
    assert not deterministic(a).equals(deterministic(b))


RANGES_01 = ["gcp_norm", "rl_norm", "discernibility_norm", "suppressed_fraction", "snapshot.confidence", "satisfied"]


@pytest.mark.parametrize("model", ["k_anonymity", "l_diversity", "t_closeness", "beta_likeness", "bt_privacy"])
def test_every_publication_verifies_and_metrics_stay_in_range(model):
    table = run(f"privacy_model={model}", "privacy_model.k=4")
    assert (table["violations"] == 0).all()
    assert (table["satisfied"] == 1).all()
    assert (table["level.k"] >= 4).all()
    for key in RANGES_01:
        assert table[key].between(0, 1).all(), key
    assert (table["kl"] >= 0).all()
    assert (table["query_error_mean"] >= 0).all() and (table["query_error_median"] >= 0).all()
    assert (table["snapshot.gain_rho"] <= 1).all() and (table["snapshot.gain_g"] >= 0).all()
    assert (table["group_size_min"] >= 4).all()


def test_extra_attackers_are_reported_under_their_label():
    table = run("extra_attackers={freq: {name: snapshot, knowledge: uniform, estimator: frequency}}")
    # no background knowledge beyond frequencies: zero gain, confidence = mean m/|Q|
    assert np.allclose(table["freq.gain_rho"], 0.0)
    assert np.allclose(table["freq.gain_g"], 0.0)
    assert "snapshot.gain_rho" in table


def attacker_reporting(extra):
    """The default run's config and components, its one attacker also reporting ``extra``."""
    cfg = config()
    comp = runner.build(cfg)
    (label, attacker), = comp.attackers.items()
    observe = attacker.observe

    def with_extra(view, ctx):
        result = observe(view, ctx)
        result.extra.update(extra)
        return result

    attacker.observe = with_extra
    return cfg, comp, label


def test_an_attackers_extra_may_not_overwrite_a_metric():
    """Two producers of one metric name are refused, naming both (the loop used to let the
    attacker's number silently replace the belief metric's)."""
    from cdpbench.errors import CdpbenchError

    cfg, comp, label = attacker_reporting({"gain_rho": 0.5})  # the belief metric reports {label}.gain_rho
    with pytest.raises(CdpbenchError, match=rf"metric '{label}.gain_rho' is reported by metric '\w+' and by attacker '{label}' \(its extra 'gain_rho'\)"):
        runner.run_releases(cfg, comp, progress=False)


def test_an_attackers_own_numbers_are_reported_under_its_label():
    cfg, comp, label = attacker_reporting({"my_count": 3})
    table = runner.run_releases(cfg, comp, progress=False)
    assert (table[f"{label}.my_count"] == 3.0).all()
