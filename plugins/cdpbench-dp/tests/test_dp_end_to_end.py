"""The DP plugins through the release loop, composed as the command line composes a config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from cdpbench import runner
from cdpbench.registry import register_configs

CONF = str(Path(__file__).resolve().parents[3] / "conf")
#: the metrics that read records only (kl_divergence spreads the records, record_linkage links them)
COUNTS_METRICS = ["metrics.kl_divergence.enabled=false", "metrics.record_linkage.enabled=false"]


def run(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=["dataset=bkseq", "dataset.releases=4", "privacy_model=dp_budget",
                                           "attacker=noisy_counts", "tracking.enabled=false", "progress=false",
                                           *COUNTS_METRICS, *overrides])
    return runner.run_releases(cfg, runner.build(cfg), progress=False)


@pytest.mark.parametrize("anonymizer", ["dp_tree", "dp_release"])
def test_bkseq_four_releases_give_finite_gain_and_query_error_within_budget(anonymizer):
    table = run(f"anonymizer={anonymizer}", "anonymizer.epsilon=2.0")
    for key in ("noisy_counts.gain_rho", "noisy_counts.gain_g", "noisy_counts.confidence", "query_error_mean",
                "query_error_median", "gcp", "level.epsilon_spent"):
        assert np.isfinite(table[key]).all(), key
    assert (table["violations"] == 0).all()
    assert (table["noisy_counts.true_value_ruled_out"] == 0).all()
    assert table["noisy_counts.confidence"].between(0, 1).all() and (table["query_error_mean"] > 0).all()
    # the horizon defaults to dataset.releases = 4: the whole budget is spent at release 4
    expected = [1, 2, 2, 3] if anonymizer == "dp_tree" else [1, 2, 3, 4]
    assert table["level.epsilon_spent"].tolist() == pytest.approx([2.0 * k / expected[-1] for k in expected])
    assert (table["info.cells"] == 50).all()  # bkseq: age 5 bins x gender 2 x weight 5 bins


def test_more_budget_means_less_query_error_and_a_more_confident_adversary():
    """The gains are measured against a = the value's true share in the cell (the frequency
    belief): with (almost) no noise the posterior is that frequency, so gain_rho -> 0 from below
    and the confidence rises to the frequencies' (about 0.13 on bkseq's cells); with much noise
    the posterior falls back to the prior, below the frequency on the true value (gain_rho < 0)."""
    low, high = run("anonymizer=dp_tree", "anonymizer.epsilon=0.1"), run("anonymizer=dp_tree", "anonymizer.epsilon=1000")
    assert high["query_error_mean"].mean() < 0.05 < 0.3 < low["query_error_mean"].mean()
    assert high["noisy_counts.confidence"].mean() > low["noisy_counts.confidence"].mean() + 0.03
    assert (low["noisy_counts.gain_rho"] < -0.01).all() and (high["noisy_counts.gain_rho"].abs() < 1e-9).all()


def test_the_same_config_and_seed_give_identical_numbers():
    a, b = run("anonymizer=dp_tree", "seed=3"), run("anonymizer=dp_tree", "seed=3")
    numbers = [c for c in a.columns if not c.startswith("time_")]
    assert a[numbers].equals(b[numbers])
