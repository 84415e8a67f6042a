"""The sequential attacker (Fig. 1): the snapshot variant has no memory, the population's sensitive
column is never read, the gain grows over releases under a deterministic model, counterfeits,
parameter errors. (The running example's PK_2 ≈ 0.9 is in test_running_example.py.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication, PublicView
from cdpbench.errors import ConfigError
from cdpbench.metrics.belief import gains, true_value_beliefs
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_jsreduce.configuration import configuration_posterior

M = 3
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("s", ("a", "b", "c")))


class CycleModel:
    """a -> b -> c -> a with certainty (first order); BK_sv depends on age: below 50 leans to a."""

    values = ("a", "b", "c")
    max_order = 1

    def bk_sv(self, qi: np.ndarray) -> np.ndarray:
        young = qi[:, 0] < 50
        return np.where(young[:, None], [0.5, 0.25, 0.25], [0.2, 0.4, 0.4])

    def bk_seq(self, steps: int) -> np.ndarray:
        return np.broadcast_to(np.eye(M)[[1, 2, 0]], (M,) * (steps + 1)).copy()

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        start = rng.integers(0, M, tuples)
        out = (start[:, None] + np.arange(views)[None, :]) % M
        late = rng.integers(0, views, tuples)  # individuals enter late (-1 before), no gaps after
        out[np.arange(views)[None, :] < late[:, None]] = -1
        return out


MODEL = CycleModel()


def scenario(releases: int = 8, n: int = 30, seed: int = 0):
    """Every respondent in every release, values following the cycle; groups of 3 re-drawn at random."""
    rng = np.random.default_rng(seed)
    ids = np.arange(100, 100 + n)
    ages = rng.integers(20, 80, n)
    start = rng.integers(0, M, n)
    out = []
    for t in range(1, releases + 1):
        frame = pd.DataFrame({"id": ids, "age": ages, "s": np.array(MODEL.values)[(start + t - 1) % M]})
        rel = SCHEMA.encode(frame, t, truth={"model": MODEL})
        groups = np.empty(n, dtype=np.int64)
        groups[rng.permutation(n)] = np.arange(n) // 3
        out.append((rel, Publication.from_partition(rel, groups)))
    return out


def sequential(**kw):
    return default_registry().create("attacker", "sequential", kw)


def run(attacker, pairs, shuffle_sensitive: bool = False):
    rng = np.random.default_rng(0)
    views, results = [], []
    for rel, pub in pairs:
        population = rel
        if shuffle_sensitive:
            population = rel.subset(np.ones(len(rel), dtype=bool))
            population.sensitive = np.random.default_rng(rel.t).permutation(population.sensitive)
        views.append(pub.public())
        results.append(attacker.observe(views[-1], AttackContext(population, views, rng)))
    return results


def mean_gain(pub, result) -> float:
    p, a = true_value_beliefs(pub, result)
    assert len(p) == len(pub)
    return float(gains(p, a)[0].mean())


def test_bksv_is_the_estimator_on_bk_sv_at_every_release():
    pairs = scenario(releases=4)
    for result, (rel, pub) in zip(run(sequential(knowledge="bksv"), pairs), pairs):
        view = pub.public()
        rows = np.searchsorted(rel.respondent, view.respondent)  # ids are sorted in the release
        weights = MODEL.bk_sv(rel.qi[rows])
        expected = configuration_posterior(weights, view.sensitive, view.group, view.n_groups, M)
        assert np.array_equal(result.respondent, view.respondent)
        assert np.allclose(result.posterior, expected)


def test_the_population_sensitive_column_is_never_read():
    pairs = scenario(releases=4)
    for knowledge in ("dk", "spm", "bksv"):
        plain = run(sequential(knowledge=knowledge, corpus_tuples=200), pairs)
        shuffled = run(sequential(knowledge=knowledge, corpus_tuples=200), pairs, shuffle_sensitive=True)
        for a, b in zip(plain, shuffled):
            assert np.array_equal(a.posterior, b.posterior)


def test_the_oracle_ie_adversary_is_the_only_one_reading_original_values():
    pairs = scenario(releases=4)
    plain = run(sequential(knowledge="ie", steps=1), pairs)
    shuffled = run(sequential(knowledge="ie", steps=1), pairs, shuffle_sensitive=True)
    assert any(not np.allclose(a.posterior, b.posterior) for a, b in zip(plain, shuffled))


def test_gain_grows_over_releases_under_a_deterministic_model():
    pairs = scenario(releases=8)

    def gain_curve(**kw):
        return [mean_gain(pub, r) for r, (_, pub) in zip(run(sequential(**kw), pairs), pairs)]

    dk, snap = gain_curve(knowledge="dk"), gain_curve(knowledge="bksv")
    # the first release only has BK_sv: both attackers are the same
    assert dk[0] == pytest.approx(snap[0])
    assert abs(dk[0]) < 0.05 and max(abs(g) for g in snap) < 0.1  # BK_sv alone gains ~nothing
    # the revised beliefs sharpen over the first releases ...
    assert dk[1] > dk[0] + 0.1 and dk[2] > dk[1] and dk[3] > dk[1]
    assert min(dk[1:]) > 0.15
    # ... up to a plateau: the sum-of-degrees configuration posterior damps certainty (a one-hot
    # correct prior in a group of 3 distinct values gives p = 2/3, rho = 0.5), and for a first-order
    # model only the last posterior carries the past (Algorithm 3)
    assert max(dk) < 0.5
    # with the Ω-estimate (the paper's experiments, §5.2) certainty accumulates release after release
    omega = gain_curve(knowledge="dk", estimator="omega")
    assert omega[1] > omega[0] + 0.3 and omega[2] > omega[1] and omega[3] > omega[2]
    assert omega[-1] > 0.85
    # SPM mined from the model's corpus: its 1-step table is the exact cycle, hence DK's posteriors;
    # its 3-step table backs off on histories the corpus never shows, yet it beats the snapshot
    assert np.allclose(gain_curve(knowledge="spm", steps=1, corpus_tuples=300), dk)
    spm = gain_curve(knowledge="spm", corpus_tuples=300)
    assert min(spm[1:]) > 0.1


def test_counterfeits_and_unknown_respondents_get_a_uniform_prior_and_no_memory():
    (rel, pub), *_ = scenario(releases=1, n=6)
    view = pub.public()
    # add a counterfeit tuple (respondent -1) to group 0
    fake = PublicView(
        t=view.t,
        schema=view.schema,
        group=np.concatenate([[0], view.group]),
        respondent=np.concatenate([[-1], view.respondent]),
        sensitive=np.concatenate([[0], view.sensitive]),
        low=view.low,
        high=view.high,
        value_sets=view.value_sets,
        suppressed_count=0,
    )
    attacker = sequential()
    result = attacker.observe(fake, AttackContext(rel, [fake], np.random.default_rng(0)))
    assert result.respondent[0] == -1 and result.posterior.shape == (7, M)
    assert np.allclose(result.posterior.sum(axis=1), 1.0)
    assert len(attacker.knowledge.posteriors) == 6  # the counterfeit was not stored


@pytest.mark.parametrize(
    "params, message",
    [
        ({"knowledge": "kernel"}, "knowledge must be one of 'dk', 'spm', 'ie', 'bksv' (got 'kernel')"),
        ({"steps": 5}, "steps must be 1, 2 or 3 (got 5)"),
        ({"estimator": "nope"}, "estimator must be an installed estimator"),
        ({"corpus_tuples": 0}, "corpus_tuples must be an integer >= 1 (got 0)"),
    ],
)
def test_parameter_errors(params, message):
    with pytest.raises(ConfigError) as e:
        sequential(**params)
    assert message in str(e.value)
