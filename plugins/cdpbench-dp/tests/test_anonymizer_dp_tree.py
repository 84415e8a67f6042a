"""dp_tree: the noise scale against the stated epsilon (issue #29, acceptance 1), unbiasedness,
seeding, budget accounting over the horizon, the grid and the events counted for user level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cdpbench.errors import CdpbenchError, ConfigError
from cdpbench.registry import default_registry
from cdpbench_dp.anonymizers.dp_tree import BinaryTreeCounter, DPTree, DPTreeParams, popcount, tree_levels
from dp_testdata import publish_context, release_stream

SEEDS = 2000
COORDS = 3  # independent coordinates per seed: 6,000 samples per release checked
HORIZON = 24
EPSILON = 1.0
SENSITIVITY = 2  # event = update (module docstring of dp_tree)
CHECKED = (1, 3, 7, 8, 15, 16, 24)  # popcounts 1, 2, 3, 1, 4, 1, 2


def discrete_laplace_moments(alpha: float, terms: int) -> tuple[float, float]:
    """(variance, fourth central moment) of the sum of ``terms`` i.i.d. discrete Laplace draws,
    P(x) = (1 - a)/(1 + a) a^|x|, from the pmf convolved here (independent of the package's code)."""
    w = int(math.log(1e-18) / math.log(alpha)) + 1
    x = np.arange(-w, w + 1)
    one = (1 - alpha) / (1 + alpha) * alpha ** np.abs(x)
    pmf = np.ones(1)
    for _ in range(terms):
        pmf = np.convolve(pmf, one)
    y = np.arange(len(pmf)) - (len(pmf) - 1) // 2
    return float((pmf * y**2).sum()), float((pmf * y**4).sum())


@pytest.fixture(scope="module")
def tree_samples():
    """Released prefix counts at every t for SEEDS seeds x COORDS coordinates; true stream fixed."""
    rng = np.random.default_rng(99)
    truth = np.cumsum(rng.integers(-3, 6, size=(HORIZON, COORDS)), axis=0) + 50  # c_1..c_T
    out = np.empty((SEEDS, HORIZON, COORDS), dtype=np.int64)
    for seed in range(SEEDS):
        tree = BinaryTreeCounter(COORDS, HORIZON, EPSILON, SENSITIVITY)
        rs = np.random.RandomState(seed)
        for t in range(1, HORIZON + 1):
            out[seed, t - 1] = tree.release(t, truth[t - 1], rs)
    return truth, out


@pytest.mark.parametrize("t", CHECKED)
def test_released_prefix_count_variance_matches_the_popcount_formula(tree_samples, t):
    """Var = popcount(t) x 2a/(1 - a)^2 with a = exp(-epsilon / (L Delta1)), L = floor(log2 T) + 1.

    Tolerance: the sample variance of N i.i.d. values has standard error sqrt((mu4 - sigma^4) / N)
    (mu4 from the exact pmf); we allow 4.5 standard errors (two-sided p ~ 7e-6 per check). At
    N = 6,000 the relative standard error is about 3 %, so the smallest plausible defect, one
    tree level too few or too many (variance x (L -+ 1)^2 / L^2: -36 % / +44 %), is caught, as the
    next test shows; a factor 2 in Delta1 (x 4) all the more."""
    truth, samples = tree_samples
    L = tree_levels(HORIZON)
    assert L == 5
    alpha = math.exp(-EPSILON / (L * SENSITIVITY))
    var, mu4 = discrete_laplace_moments(alpha, popcount(t))
    assert var == pytest.approx(popcount(t) * 2 * alpha / (1 - alpha) ** 2, rel=1e-9)
    noise = (samples[:, t - 1, :] - truth[t - 1][None, :]).astype(float).reshape(-1)
    n = len(noise)
    se = math.sqrt((mu4 - var**2) / n)
    assert abs(noise.var(ddof=1) - var) < 4.5 * se, (t, noise.var(ddof=1), var, se)
    # unbiased: the mean noise within 4.5 standard errors of 0
    assert abs(noise.mean()) < 4.5 * math.sqrt(var / n), (t, noise.mean())
    print(f"t={t} popcount={popcount(t)} empirical var {noise.var(ddof=1):.2f} formula {var:.2f} (se {se:.2f})")


def test_a_wrong_level_count_would_fail_the_variance_check(tree_samples):
    """The check above is sharp: with L = 4 or 6 in the formula the empirical variance at t = 15
    is more than 4.5 standard errors away."""
    truth, samples = tree_samples
    noise = (samples[:, 14, :] - truth[14][None, :]).astype(float).reshape(-1)
    for wrong_L in (4, 6):
        alpha = math.exp(-EPSILON / (wrong_L * SENSITIVITY))
        var, mu4 = discrete_laplace_moments(alpha, 4)
        assert abs(noise.var(ddof=1) - var) > 4.5 * math.sqrt((mu4 - var**2) / len(noise))


def test_published_counts_are_the_tree_counters_for_the_same_seed():
    """The anonymizer is the tree counter on the grid's (cell, value) counts, seeded from ctx.rng."""
    stream = release_stream(6)
    anon = DPTree(DPTreeParams(epsilon=2.0, horizon=6, bins=5))
    rng = np.random.default_rng(5)
    mirror = np.random.default_rng(5)
    from cdpbench_dp.counts import true_counts
    from cdpbench_dp.grid import Grid
    from cdpbench_dp.noise import random_state_from

    grid = Grid.from_schema(stream[0].schema, 5, 0, 1000)
    tree = BinaryTreeCounter(grid.n_cells * 3, 6, 2.0, 2)
    for release in stream:
        pub = anon.publish(release, publish_context(release, rng))
        _, counts = true_counts(release, grid)
        expected = tree.release(release.t, counts, random_state_from(mirror)).reshape(counts.shape)
        assert pub.counted and np.array_equal(pub.noisy_counts, expected)
        assert np.array_equal(pub.group_counts(), counts)  # the hidden truth stays for the metrics
        assert pub.noise.terms == popcount(release.t) and pub.noise.alpha == pytest.approx(math.exp(-2.0 / (3 * 2)))


def run_tree(seed: int, releases: int = 5, **params):
    anon = DPTree(DPTreeParams(**{"epsilon": 1.0, "horizon": releases, **params}))
    rng = np.random.default_rng(seed)
    return [anon.publish(r, publish_context(r, rng)) for r in release_stream(releases)]


def test_the_same_seed_gives_identical_counts_and_another_seed_differs():
    a, b, c = run_tree(1), run_tree(1), run_tree(2)
    for x, y, z in zip(a, b, c):
        assert np.array_equal(x.noisy_counts, y.noisy_counts)
        assert not np.array_equal(x.noisy_counts, z.noisy_counts)


def test_budget_over_24_releases_sums_to_epsilon_and_a_25th_is_refused():
    epsilon = 0.7
    anon = DPTree(DPTreeParams(epsilon=epsilon, horizon=24))
    rng = np.random.default_rng(0)
    stream = release_stream(25, n=20)
    spent, added = [], []
    for release in stream[:24]:
        info = anon.publish(release, publish_context(release, rng)).info
        spent.append(info["epsilon_spent"])
        added.append(info["epsilon_release"])
    L = 5
    assert spent == pytest.approx([(int(math.log2(t)) + 1) * epsilon / L for t in range(1, 25)], rel=1e-12)
    assert spent[-1] == pytest.approx(epsilon, rel=1e-12) and sum(added) == pytest.approx(epsilon, rel=1e-12)
    assert [t for t, a in enumerate(added, 1) if a > 0] == [1, 2, 4, 8, 16]  # a new level opens
    # per node: one charge of epsilon / L per release, parallel within its level
    assert len(anon.accountant.charges) == 24
    assert all(c.epsilon == pytest.approx(epsilon / L) for c in anon.accountant.charges)
    with pytest.raises(CdpbenchError, match="release 25 is past the privacy horizon of 24 releases"):
        anon.publish(stream[24], publish_context(stream[24], rng))


def test_events_per_respondent_and_user_level_epsilon():
    """A respondent present in 3 releases who changes value at 2 and leaves at 4: insertion (1),
    move (1 with event=update, 2 with insert_delete), deletion (1); K epsilon_spent reported."""
    from cdpbench.data import Release
    from dp_testdata import tiny_schema

    schema = tiny_schema(3)
    qi = np.array([[1.0, 0.0], [8.0, 1.0]])
    rel = [Release(1, schema, np.array([0, 1]), qi, np.array([0, 2])),
           Release(2, schema, np.array([0, 1]), qi, np.array([1, 2])),
           Release(3, schema, np.array([0, 1]), qi, np.array([1, 2])),
           Release(4, schema, np.array([1]), qi[1:], np.array([2]))]
    for event, K in (("update", [1, 2, 2, 3]), ("insert_delete", [1, 3, 3, 4])):
        anon = DPTree(DPTreeParams(epsilon=1.0, horizon=4, event=event))
        rng = np.random.default_rng(0)
        infos = [anon.publish(r, publish_context(r, rng)).info for r in rel]
        assert [i["max_events_per_respondent"] for i in infos] == K
        assert [i["epsilon_user_level"] for i in infos] == pytest.approx([k * i["epsilon_spent"] for k, i in zip(K, infos)])


def test_grid_cells_come_from_the_schema_and_cover_it():
    anon = DPTree(DPTreeParams(epsilon=1.0, horizon=2, bins=3))
    release = release_stream(1)[0]
    pub = anon.publish(release, publish_context(release, np.random.default_rng(0)))
    # age 0..9 in 3 integer bins (0-3, 4-6, 7-9) x sex leaves f, m: 6 cells, all published
    assert pub.n_groups == 6 and pub.noisy_counts.shape == (6, 3)
    assert pub.low[:, 0].tolist() == [0, 0, 4, 4, 7, 7] and pub.high[:, 0].tolist() == [3, 3, 6, 6, 9, 9]
    assert pub.low[:, 1].tolist() == [0, 1] * 3
    inside = (release.qi[:, 0] >= pub.low[pub.group, 0]) & (release.qi[:, 0] <= pub.high[pub.group, 0])
    assert inside.all() and (release.qi[:, 1] == pub.low[pub.group, 1]).all()
    view = pub.public()
    assert view.counted and view.sensitive is None and len(view.respondent) == 0 and len(view.group) == 0


@pytest.mark.parametrize("values, message", [
    ({"epsilon": 0}, "anonymizer.epsilon must be a number > 0 (got 0.0)"),
    ({"epsilon": -1.0}, "anonymizer.epsilon must be a number > 0"),
    ({"bins": 0}, "anonymizer.bins must be an integer >= 1 (got 0)"),
    ({"event": "move"}, "anonymizer.event must be one of 'update', 'insert_delete'"),
    ({"horizon": 0}, "anonymizer.horizon must be an integer >= 1"),
])
def test_bad_parameters_give_one_line_errors(values, message):
    with pytest.raises(ConfigError) as err:
        default_registry().create("anonymizer", "dp_tree", {"horizon": 4, **values})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_grid_over_the_cell_cap_and_an_unset_horizon_are_refused():
    release = release_stream(1)[0]
    with pytest.raises(ConfigError, match="the grid has 20 cells .* over anonymizer.max_cells = 10"):
        DPTree(DPTreeParams(horizon=2, bins=10, max_cells=10)).publish(release, publish_context(release, np.random.default_rng(0)))
    with pytest.raises(CdpbenchError, match="set anonymizer.horizon"):
        DPTree(DPTreeParams()).publish(release, publish_context(release, np.random.default_rng(0)))


def test_grid_bins_integer_and_continuous_domains_and_taxonomy_levels():
    from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
    from cdpbench.taxonomy import Taxonomy
    from cdpbench_dp.grid import Grid

    tax = Taxonomy.from_paths([["a1", "a", "*"], ["a2", "a", "*"], ["b1", "b", "*"]])
    schema = Schema((NumericQI("age", 0.0, 9.0), NumericQI("x", 0.0, 2.5), CategoricalQI("c", tax)),
                    Sensitive("s", ("u", "v")))
    grid = Grid.from_schema(schema, 4, 1, 1000)
    # integers 0..9 in 4 bins: floor(i 4 / 10) -> [0, 2], [3, 4], [5, 7], [8, 9]; x (fractional bound): quarters of
    # [0, 2.5]; c: level 1 = {a, b}
    assert grid.lows[0].tolist() == [0, 3, 5, 8] and grid.highs[0].tolist() == [2, 4, 7, 9]
    assert grid.lows[1].tolist() == [0, 0.625, 1.25, 1.875] and grid.highs[1].tolist() == [0.625, 1.25, 1.875, 2.5]
    assert grid.lows[2].tolist() == [0, 2] and grid.highs[2].tolist() == [1, 2] and grid.n_cells == 32
    points = np.array([[0, 0, 0], [2, 0.625, 1], [2.5, 0.7, 2], [9, 2.5, 2], [10, 0.5, 0], [4, -0.1, 0]], dtype=float)
    cells = grid.cell_of(points)
    expect = [0, 1 * 2 + 0, 0 * 8 + 1 * 2 + 1, 3 * 8 + 3 * 2 + 1, -1, -1]  # 2.5 -> the lower bin [0, 2]; 0.625 -> the upper bin
    assert cells.tolist() == expect
    assert Grid.from_schema(schema, 40, 5, 1000).lows[0].tolist() == list(range(10))  # one bin per integer, root level

