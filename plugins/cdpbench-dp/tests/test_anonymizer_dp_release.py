"""dp_release: the per-release baseline's noise scale (discrete Laplace and discrete Gaussian)
against the stated epsilon, unbiasedness, seeding, and its budget growing with the releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cdpbench.errors import CdpbenchError, ConfigError
from cdpbench.registry import default_registry
from cdpbench_dp.anonymizers.dp_release import DPRelease, DPReleaseParams
from cdpbench_dp.counts import true_counts
from dp_testdata import publish_context, release_stream

SEEDS = 2000


def noise_samples(params: DPReleaseParams) -> tuple[np.ndarray, DPRelease]:
    """The noise on every coordinate of release 1 (6 cells x 3 values = 18 per seed) over SEEDS seeds."""
    release = release_stream(1)[0]
    out = []
    for seed in range(SEEDS):
        anon = DPRelease(params)
        pub = anon.publish(release, publish_context(release, np.random.default_rng(seed)))
        _, counts = true_counts(release, anon.grid)
        out.append((pub.noisy_counts - counts).reshape(-1))
    return np.concatenate(out), anon


def test_laplace_noise_variance_matches_epsilon_over_the_horizon():
    """Var = 2a/(1 - a)^2, a = exp(-epsilon / T) (Delta = 1). Tolerance: 4.5 standard errors of the
    sample variance, sqrt((mu4 - sigma^4) / N) with mu4 of the exact pmf (N = 36,000: about 1.2 %)."""
    epsilon, T = 4.0, 8
    noise, _ = noise_samples(DPReleaseParams(epsilon=epsilon, horizon=T, bins=3))
    a = math.exp(-epsilon / T)
    w = int(math.log(1e-18) / math.log(a)) + 1
    x = np.arange(-w, w + 1)
    pmf = (1 - a) / (1 + a) * a ** np.abs(x)
    var, mu4 = float((pmf * x**2).sum()), float((pmf * x**4).sum())
    assert var == pytest.approx(2 * a / (1 - a) ** 2, rel=1e-9)
    se = math.sqrt((mu4 - var**2) / len(noise))
    assert abs(noise.var(ddof=1) - var) < 4.5 * se, (noise.var(ddof=1), var, se)
    assert abs(noise.mean()) < 4.5 * math.sqrt(var / len(noise))
    print(f"dp_release laplace: empirical var {noise.var(ddof=1):.3f} formula {var:.3f} (se {se:.3f})")


def test_gaussian_noise_variance_matches_its_calibrated_sigma():
    """noise=gaussian: diffprivlib's discrete Gaussian at (epsilon/T, delta/T); the variance is
    that of the discrete Gaussian of its sigma (computed here from exp(-x^2 / 2 sigma^2))."""
    epsilon, delta, T = 4.0, 1e-5, 8
    noise, anon = noise_samples(DPReleaseParams(epsilon=epsilon, horizon=T, bins=3, noise="gaussian", delta=delta))
    sigma = anon._noise.sigma
    from diffprivlib.mechanisms import GaussianDiscrete

    assert sigma == GaussianDiscrete(epsilon=epsilon / T, delta=delta / T, sensitivity=1)._scale
    w = int(sigma * 12) + 1
    x = np.arange(-w, w + 1)
    pmf = np.exp(-x.astype(float) ** 2 / (2 * sigma**2))
    pmf /= pmf.sum()
    var, mu4 = float((pmf * x**2).sum()), float((pmf * x**4).sum())
    assert anon._noise.variance() == pytest.approx(var, rel=1e-9)
    se = math.sqrt((mu4 - var**2) / len(noise))
    assert abs(noise.var(ddof=1) - var) < 4.5 * se, (noise.var(ddof=1), var, se)
    assert abs(noise.mean()) < 4.5 * math.sqrt(var / len(noise))
    print(f"dp_release gaussian: sigma {sigma:.3f} empirical var {noise.var(ddof=1):.3f} formula {var:.3f} (se {se:.3f})")


def test_the_same_seed_gives_identical_counts_and_another_seed_differs():
    def run(seed):
        anon = DPRelease(DPReleaseParams(epsilon=1.0, horizon=3))
        rng = np.random.default_rng(seed)
        return [anon.publish(r, publish_context(r, rng)).noisy_counts for r in release_stream(3)]

    for x, y, z in zip(run(3), run(3), run(4)):
        assert np.array_equal(x, y) and not np.array_equal(x, z)


def test_budget_grows_linearly_to_epsilon_and_a_25th_release_is_refused():
    epsilon = 2.4
    anon = DPRelease(DPReleaseParams(epsilon=epsilon, horizon=24, noise="gaussian", delta=2.4e-5))
    rng = np.random.default_rng(0)
    stream = release_stream(25, n=20)
    infos = [anon.publish(r, publish_context(r, rng)).info for r in stream[:24]]
    assert [i["epsilon_spent"] for i in infos] == pytest.approx([0.1 * t for t in range(1, 25)], rel=1e-12)
    assert sum(i["epsilon_release"] for i in infos) == pytest.approx(epsilon, rel=1e-12)
    assert infos[-1]["delta_spent"] == pytest.approx(2.4e-5, rel=1e-12)
    assert anon.accountant.epsilon_spent() == pytest.approx(epsilon, rel=1e-12)
    with pytest.raises(CdpbenchError, match="release 25 is past the privacy horizon of 24 releases"):
        anon.publish(stream[24], publish_context(stream[24], rng))


@pytest.mark.parametrize("values, message", [
    ({"epsilon": 0.0}, "anonymizer.epsilon must be a number > 0 (got 0.0)"),
    ({"bins": 0}, "anonymizer.bins must be an integer >= 1 (got 0)"),
    ({"noise": "uniform"}, "anonymizer.noise must be one of 'laplace', 'gaussian' (got 'uniform')"),
    ({"delta": 0.0}, "anonymizer.delta must be a number in (0, 1) (got 0.0)"),
    ({"level": -1}, "anonymizer.level must be an integer >= 0 (got -1)"),
])
def test_bad_parameters_give_one_line_errors(values, message):
    with pytest.raises(ConfigError) as err:
        default_registry().create("anonymizer", "dp_release", {"horizon": 4, **values})
    assert str(err.value) == message
