"""The core's counted publication form (Publication.noisy_counts, issue #29): what its public view
holds, who refuses it, and the query-error metric answering from the noisy counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cdpbench.errors import CdpbenchError, ConfigError
from cdpbench.metrics.belief import true_value_beliefs
from cdpbench.metrics.query import query_answers, random_queries
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench_dp.anonymizers.dp_tree import DPTree, DPTreeParams
from cdpbench_dp.attackers.noisy_counts import NoisyCountsAttacker
from dp_testdata import publish_context, release_stream


def counted(epsilon: float = 1.0, bins: int = 3, n: int = 60):
    release = release_stream(1, n=n)[0]
    pub = DPTree(DPTreeParams(epsilon=epsilon, horizon=2, bins=bins)).publish(release, publish_context(release, np.random.default_rng(0)))
    return release, pub


def test_a_counted_view_publishes_boxes_counts_and_noise_only():
    release, pub = counted()
    view = pub.public()
    assert view.counted and pub.counted and not pub.angelized
    assert np.array_equal(view.noisy_counts, pub.noisy_counts) and view.noise is pub.noise
    assert view.sensitive is None and len(view.group) == 0 and len(view.respondent) == 0
    assert view.n_groups == pub.n_groups == 6 and view.suppressed_count == 0
    for read in (view.group_counts, view.expected_group_counts, view.group_sizes, view.bucket_counts):
        with pytest.raises(CdpbenchError, match="does not support a counts publication") as err:
            read()
        assert "\n" not in str(err.value)
    # the hidden truth stays on the publication, for the metrics
    assert pub.group_counts().sum() == len(release) and pub.group_sizes().sum() == len(release)


def test_noisy_counts_of_the_wrong_shape_are_refused():
    _, pub = counted()
    with pytest.raises(CdpbenchError, match=r"noisy_counts must be \[groups, values\] = \[6, 3\], got \[6, 2\]"):
        dataclasses.replace(pub, noisy_counts=np.zeros((6, 2)))


ATTACKERS = ["intersection", "membership", "sequential", "bayframe", "linkage", "snapshot", "correspondence"]


@pytest.mark.parametrize("name", ATTACKERS)
def test_existing_attackers_refuse_a_counted_view_with_one_line(name):
    release, pub = counted()
    view = pub.public()
    attacker = default_registry().create("attacker", name, {})
    with pytest.raises(CdpbenchError, match="does not support a counts publication") as err:
        attacker.observe(view, AttackContext(release, [view], np.random.default_rng(0)))
    assert "\n" not in str(err.value)


def test_a_run_pairing_a_counts_anonymizer_with_a_records_reader_is_refused_when_built():
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs
    from pathlib import Path

    register_configs()
    base = ["dataset=bkseq", "dataset.releases=2", "anonymizer=dp_tree", "privacy_model=dp_budget", "attacker=noisy_counts",
            "metrics.kl_divergence.enabled=false", "metrics.record_linkage.enabled=false"]
    conf = str(Path(__file__).resolve().parents[3] / "conf")
    cases = [("attacker=snapshot", "attacker 'snapshot' cannot read a counts publication", "attackers that can: noisy_counts"),
             ("privacy_model=k_anonymity", "privacy_model 'k_anonymity' cannot read a counts publication", "dp_budget"),
             ("metrics.kl_divergence.enabled=true", "metrics.kl_divergence", "metrics that can: belief, publication_info, query_error, utility"),
             ("knowledge=uniform", "knowledge 'uniform' revises the defender's beliefs", "set knowledge=none")]
    for override, first, second in cases:
        with initialize_config_dir(config_dir=conf, version_base="1.3"):
            cfg = compose("config", overrides=[*base, override])
        with pytest.raises(ConfigError) as err:
            runner.build(cfg)
        assert first in str(err.value) and second in str(err.value) and "\n" not in str(err.value)
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        runner.build(compose("config", overrides=base))  # the DP run itself builds


def test_query_error_answers_from_the_noisy_counts():
    """With the noise removed the counted publication answers every query exactly as the records
    publication of the same cells does; the estimate is linear in the counts, a negative count
    included (raw noisy counts, no clipping)."""
    release, pub = counted(n=200)
    exact = dataclasses.replace(pub, noisy_counts=pub.group_counts().astype(float))
    records = dataclasses.replace(pub, noisy_counts=None, noise=None)
    rng = np.random.default_rng(3)
    for form in ("qi", "qi_sensitive"):
        queries = random_queries(release, 300, 0.1, rng, form)
        true_c, est_c = query_answers(queries, release, exact)
        true_r, est_r = query_answers(queries, release, records)
        assert np.array_equal(true_c, true_r) and np.allclose(est_c, est_r, rtol=1e-12, atol=1e-9)
        bump = np.zeros_like(exact.noisy_counts)
        bump[2] = [-7.0, 3.0, -1.0]  # one cell's counts moved, one of them below zero
        shifted = dataclasses.replace(pub, noisy_counts=exact.noisy_counts + bump)
        only = dataclasses.replace(pub, noisy_counts=bump)
        _, est_s = query_answers(queries, release, shifted)
        _, est_o = query_answers(queries, release, only)
        assert np.allclose(est_s, est_c + est_o, atol=1e-9)
        assert (est_o < 0).any()  # the negative counts are used, not dropped


def test_belief_metrics_read_the_hidden_truth_of_a_counted_publication():
    """a = the true share of the record's value in its cell; p = the attacker's posterior on it."""
    release, pub = counted(epsilon=50.0, n=120)
    attack = NoisyCountsAttacker().observe(pub.public(), AttackContext(release, [pub.public()], np.random.default_rng(0)))
    p, a = true_value_beliefs(pub, attack)
    counts, sizes = pub.group_counts(), pub.group_sizes()
    assert np.allclose(a, counts[pub.group, pub.sensitive] / sizes[pub.group])
    order = np.argsort(attack.respondent)
    rows = order[np.searchsorted(attack.respondent[order], pub.respondent)]
    assert np.allclose(p, attack.posterior[rows, pub.sensitive])
    # epsilon = 50 over 2 levels: almost no noise, so the posterior is nearly the frequency a
    assert np.abs(p - a).max() < 0.02
