"""noisy_counts: the exact posterior against brute-force enumeration and a log-space convolution,
the Poisson approximation's convergence, the frequency posterior on a records view, and the
attacker through a counted view (cells found from the population's exact QIs)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from cdpbench.data import Publication
from cdpbench.errors import ConfigError
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench_dp.anonymizers.dp_tree import DPTree, DPTreeParams
from cdpbench_dp.attackers.noisy_counts import (
    NoisyCountsAttacker,
    _log_k_terms,
    _normalized,
    NoisyCountsParams,
    exact_posterior,
    poisson_posterior,
    value_prior,
)
from cdpbench_dp.noise import NoiseDescription
from dp_testdata import publish_context, release_stream


def brute_force_posterior(noisy, n, p, noise) -> np.ndarray:
    """P(S_1 = s | c^) by enumerating every assignment of values to the n respondents of the cell:
    weight prod_i p_{s_i} x prod_v f(c^_v - count_v)."""
    m = len(p)
    post = np.zeros(m)
    for values in itertools.product(range(m), repeat=n):
        counts = np.bincount(values, minlength=m)
        weight = np.prod(p[list(values)]) * np.exp(noise.log_pmf_at(np.asarray(noisy) - counts)).prod()
        post[values[0]] += weight
    return post / post.sum()


NOISES = [NoiseDescription("discrete_laplace", terms=1, alpha=0.5), NoiseDescription("discrete_laplace", terms=3, alpha=0.3),
          NoiseDescription("discrete_gaussian", terms=1, sigma=1.2), NoiseDescription("discrete_laplace", terms=2, alpha=0.05)]


@pytest.mark.parametrize("seed", range(24))
def test_exact_posterior_equals_enumeration_over_every_assignment(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 6)), int(rng.integers(2, 4))
    noise = NOISES[seed % len(NOISES)]
    p = rng.dirichlet(np.ones(m))
    truth = np.bincount(rng.choice(m, size=n, p=p), minlength=m)
    noisy = truth + rng.integers(-2, 3, size=m)
    expected = brute_force_posterior(noisy, n, p, noise)
    assert np.allclose(exact_posterior(noisy, n, p, noise), expected, rtol=1e-10, atol=1e-13), (n, m, noisy)


def log_space_posterior(noisy, n, p, noise) -> np.ndarray:
    """The exact posterior by convolutions in log space (logsumexp per degree): slow, no rescaling."""
    m, k = len(p), np.arange(n)
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    la = [np.where(k == 0, 0, k * lp[v]) - gammaln(k + 1) + noise.log_pmf_at(noisy[v] - k) for v in range(m)]
    lb = [np.where(k == 0, 0, k * lp[v]) - gammaln(k + 1) + noise.log_pmf_at(noisy[v] - k - 1) for v in range(m)]

    def conv(a, b):
        pairs = a[:, None] + b[None, :]
        degree = np.add.outer(np.arange(len(a)), np.arange(len(b)))
        return np.array([logsumexp(pairs[degree == d]) for d in range(n)])

    terms = []
    for s in range(m):
        acc = np.zeros(1)
        for u in range(m):
            if u != s:
                acc = conv(acc, la[u])
        terms.append(conv(acc, lb[s])[n - 1] + lp[s])
    w = np.exp(np.array(terms) - max(terms))
    return w / w.sum()


@pytest.mark.parametrize("n, alpha, terms, prior", [(300, 0.5, 2, "match"), (200, 0.9, 3, "uniform"),
                                                    (120, 0.99, 1, "uniform"), (60, 0.5, 4, "skewed")])
def test_exact_posterior_stays_exact_on_large_cells(n, alpha, terms, prior):
    """Cells of hundreds: p^k / k! spans more than double range; the tilted, rescaled products
    must still agree with the log-space convolution (without the common tilt (n - 1)^k the
    rescaled products lose the terms that matter: the first two cases then fail)."""
    rng = np.random.default_rng(n)
    noise = NoiseDescription("discrete_laplace", terms=terms, alpha=alpha)
    for _ in range(2):
        q = rng.dirichlet(np.ones(3))
        noisy = rng.multinomial(n, q) + np.rint(rng.laplace(0, 3, size=3)).astype(int)
        p = {"match": q, "uniform": np.ones(3) / 3, "skewed": np.array([0.8, 0.15, 0.05])}[prior]
        assert np.allclose(exact_posterior(noisy, n, p, noise), log_space_posterior(noisy, n, p, noise), atol=1e-11)


def test_poisson_approximation_approaches_the_exact_posterior():
    """Stated tolerances (max over values and 30 random cells of 3 values): as the noise vanishes
    (a = 1e-6) both are the frequency posterior, within 1e-5; at fixed noise (a = 0.5, 2 terms) the
    difference shrinks as the cell grows: < 0.05 at n = 10, < 0.01 at n = 1,000."""
    rng = np.random.default_rng(7)

    def worst(n, noise):
        out = 0.0
        for _ in range(30):
            p = rng.dirichlet(np.ones(3) * 3)
            noisy = rng.multinomial(n, p) + (0 if noise.alpha < 1e-3 else rng.integers(-2, 3, size=3))
            out = max(out, np.abs(exact_posterior(noisy, n, p, noise) - poisson_posterior(noisy, n, p, noise)).max())
        return out

    assert worst(10, NoiseDescription("discrete_laplace", alpha=1e-6)) < 1e-5
    moderate = NoiseDescription("discrete_laplace", terms=2, alpha=0.5)
    small, large = worst(10, moderate), worst(1000, moderate)
    assert small < 0.05 and large < 0.01 and large < small, (small, large)


@pytest.mark.parametrize("prior", ["table", "uniform"])
@pytest.mark.parametrize("model", ["exact", "poisson"])
def test_a_records_view_gives_the_frequency_posterior(prior, model):
    """Zero noise: p_s Mult(c - e_s; n - 1, p) is proportional to c_s whatever p (full support), so
    the posterior is c_s / n for every respondent of a group."""
    release = release_stream(1, n=60, m=4, seed=3)[0]
    group = (release.qi[:, 0] // 3).astype(np.int64)  # 4 groups by age
    pub = Publication.from_partition(release, group)
    attack = NoisyCountsAttacker(NoisyCountsParams(prior=prior, model=model)).observe(
        pub.public(), AttackContext(release, [pub.public()], np.random.default_rng(0)))
    counts = pub.group_counts()
    sizes = pub.group_sizes()
    order = np.argsort(pub.respondent)
    rows = order[np.searchsorted(pub.respondent[order], attack.respondent)]
    expected = counts[pub.group[rows]] / sizes[pub.group[rows], None]
    assert sorted(attack.respondent.tolist()) == sorted(release.respondent.tolist())
    assert np.allclose(attack.posterior, expected, rtol=1e-9, atol=1e-12)


def test_on_a_counted_view_every_respondent_is_placed_in_her_cell():
    stream = release_stream(3, n=80)
    anon = DPTree(DPTreeParams(epsilon=5.0, horizon=3, bins=2))
    rng = np.random.default_rng(1)
    attacker = NoisyCountsAttacker()
    for release in stream:
        pub = anon.publish(release, publish_context(release, rng))
        view = pub.public()
        result = attacker.observe(view, AttackContext(release, [view], np.random.default_rng(0)))
        assert sorted(result.respondent.tolist()) == sorted(release.respondent.tolist())
        order = np.argsort(result.respondent)
        cell_of = dict(zip(pub.respondent.tolist(), pub.group.tolist()))
        cells = np.array([cell_of[r] for r in result.respondent])
        p = value_prior(pub.noisy_counts, "table")
        sizes = np.bincount(pub.group, minlength=pub.n_groups)
        for g in np.unique(cells):
            expected = exact_posterior(pub.noisy_counts[g], int(sizes[g]), p, pub.noise)
            assert np.allclose(result.posterior[cells == g], expected[None, :], rtol=1e-12)
        assert np.allclose(result.posterior.sum(axis=1), 1.0) and len(order) == len(release)


def test_the_table_prior_keeps_a_value_whose_noisy_total_fell_below_zero():
    counts = np.array([[3.0, -2.0, 5.0], [1.0, -1.0, 0.0]])
    assert value_prior(counts, "table") == pytest.approx(np.array([5, 1, 6]) / 12)
    assert value_prior(counts, "uniform") == pytest.approx(np.ones(3) / 3)


@pytest.mark.parametrize("values, message", [
    ({"prior": "flat"}, "attacker.prior must be one of 'table', 'uniform' (got 'flat')"),
    ({"model": "normal"}, "attacker.model must be one of 'exact', 'poisson' (got 'normal')"),
])
def test_bad_parameters_give_one_line_errors(values, message):
    with pytest.raises(ConfigError) as err:
        default_registry().create("attacker", "noisy_counts", values)
    assert str(err.value) == message


# ------------------------------------------------------------ the former (dense) exact posterior, as an oracle
class _DenseScaled:
    """A polynomial as ``exp(offset) x coef`` with ``max(coef) = 1`` (or all 0, offset -inf)."""

    __slots__ = ("coef", "offset")

    def __init__(self, log_coef: np.ndarray):
        top = np.max(log_coef) if len(log_coef) else -np.inf
        if np.isfinite(top):
            self.coef, self.offset = np.exp(log_coef - top), float(top)
        else:
            self.coef, self.offset = np.zeros(len(log_coef)), -np.inf

    @classmethod
    def one(cls) -> "_DenseScaled":
        return cls(np.zeros(1))

    def times(self, other: "_DenseScaled", degree: int) -> "_DenseScaled":
        out = _DenseScaled.__new__(_DenseScaled)
        prod = np.convolve(self.coef, other.coef)[: degree + 1]
        top = prod.max() if len(prod) else 0.0
        if top > 0 and np.isfinite(self.offset) and np.isfinite(other.offset):
            out.coef, out.offset = prod / top, self.offset + other.offset + math.log(top)
        else:
            out.coef, out.offset = np.zeros(len(prod)), -np.inf
        return out


def dense_exact_posterior(noisy: np.ndarray, n: int, p: np.ndarray, noise: NoiseDescription) -> np.ndarray:
    """The former exact posterior (every polynomial kept dense up to degree n - 1, O(n^2) a
    product): the oracle of the banded one."""
    m = len(p)
    k = np.arange(n)  # the others' count of a value: 0..n-1
    noisy = np.rint(np.asarray(noisy, dtype=float)).astype(np.int64)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    # k log((n - 1) p_v) - log k!: the common tilt (n - 1)^k multiplies every term of degree n - 1 by
    # the same (n - 1)^(n - 1), and centres each sequence near its Poisson mean (n - 1) p_v, so the
    # terms that matter stay within double range of each sequence's maximum
    tilt = math.log(n - 1) if n > 1 else 0.0
    A, log_b = [], []
    for v in range(m):
        base = _log_k_terms(n - 1, log_p[v] + tilt)
        A.append(_DenseScaled(base + noise.log_pmf_at(noisy[v] - k)))
        log_b.append(base + noise.log_pmf_at(noisy[v] - k - 1))
    prefix = [_DenseScaled.one()]
    for v in range(m):
        prefix.append(prefix[-1].times(A[v], n - 1))
    suffix = [_DenseScaled.one()]
    for v in reversed(range(m)):
        suffix.append(A[v].times(suffix[-1], n - 1))
    suffix.reverse()  # suffix[v] = prod_{u >= v} A_u
    log_term = np.full(m, -np.inf)
    for s in range(m):
        others = prefix[s].times(suffix[s + 1], n - 1)
        if not np.isfinite(others.offset) or not np.isfinite(log_p[s]):
            continue
        coef = np.zeros(n)
        coef[: len(others.coef)] = others.coef
        b = _DenseScaled(log_b[s])
        if not np.isfinite(b.offset):
            continue
        total = float(np.dot(coef[::-1], b.coef))  # sum_k others[n-1-k] b_s[k]
        if total > 0:
            log_term[s] = log_p[s] + others.offset + b.offset + math.log(total)
    return _normalized(log_term, p)


@pytest.mark.parametrize("seed", range(40))
def test_the_banded_products_give_the_dense_ones_results(seed):
    """Random cells (n up to 120, m up to 6, every noise kind, records-view zero noise included):
    the banded exact posterior equals the former dense one (up to the order of float sums)."""
    rng = np.random.default_rng(1000 + seed)
    n, m = int(rng.integers(1, 121)), int(rng.integers(2, 7))
    noise = (NOISES + [NoiseDescription("none")])[seed % (len(NOISES) + 1)]
    p = rng.dirichlet(np.ones(m)) if seed % 3 else np.ones(m) / m
    noisy = rng.multinomial(n, rng.dirichlet(np.ones(m))) + (0 if noise.mechanism == "none" else rng.integers(-3, 4, size=m))
    assert np.allclose(exact_posterior(noisy, n, p, noise), dense_exact_posterior(noisy, n, p, noise), rtol=1e-10, atol=1e-14)


def test_the_banded_products_give_the_dense_ones_results_on_a_bkseq_release():
    """A realistic case: every cell of a bkseq release under dp_tree at epsilon = 1 and 0.1."""
    from cdpbench.registry import default_registry as registry

    release = next(iter(registry().create("dataset", "bkseq", {"releases": 1}).releases(np.random.default_rng(0))))
    for epsilon in (1.0, 0.1):
        pub = DPTree(DPTreeParams(epsilon=epsilon, horizon=24)).publish(release, publish_context(release, np.random.default_rng(0)))
        p = value_prior(pub.noisy_counts, "table")
        sizes = pub.group_sizes()
        for g in range(0, pub.n_groups, 7):
            got = exact_posterior(pub.noisy_counts[g], int(sizes[g]), p, pub.noise)
            assert np.allclose(got, dense_exact_posterior(pub.noisy_counts[g], int(sizes[g]), p, pub.noise), rtol=1e-9, atol=1e-13)
