"""Issue #28 item 3: faster forms of hot paths give IDENTICAL output to the literal forms they replaced
(copied here as oracles), on random small inputs, several seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cdpbench import beliefs as core_beliefs
from cdpbench_bayframe.privacy_models import j_similarity


# ---------------------------------------------------------------------------- oracle: cdpbench.beliefs (literal copy)
def _normalized_beliefs(beliefs):
    b = np.asarray(beliefs, dtype=float)
    total = b.sum(axis=1, keepdims=True)
    if (total > 0).all():
        return b / total
    m = b.shape[1]
    return np.where(total > 0, b / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))


def _entropy(p, base=2.0):
    p = np.asarray(p, dtype=float)
    if base == 2.0:
        log = np.log2(p, out=np.zeros_like(p), where=p > 0)
        return -np.einsum("ij,ij->i", p, log)
    log = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.einsum("ij,ij->i", p, log) / math.log(base)


def _js_divergence_literal(beliefs, segment, n_groups, base=2.0):
    segment = np.asarray(segment, dtype=np.int64)
    p = _normalized_beliefs(beliefs)
    m = p.shape[1]
    G = int(n_groups)
    per = np.maximum(np.bincount(segment, minlength=G), 1).astype(float)
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    mean = np.bincount(flat, weights=p.ravel(), minlength=G * m).reshape(G, m) / per[:, None]
    mean_entropy = np.bincount(segment, weights=_entropy(p, base), minlength=G) / per
    return np.maximum(_entropy(mean, base) - mean_entropy, 0.0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [3, 1 << 14])
def test_j_similarity_js_divergence_is_the_literal_form(seed, block, monkeypatch):
    monkeypatch.setattr(core_beliefs, "_BLOCK", block)
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 60)), int(rng.integers(1, 9))
    G = int(rng.integers(1, 15))
    beliefs = rng.random((n, m)) * (rng.random((n, m)) < 0.7)  # zeros, and some all-zero rows
    beliefs[rng.random(n) < 0.15] = 0.0
    segment = rng.integers(0, G, n)
    for base in (2.0, math.e, 10.0):
        np.testing.assert_array_equal(core_beliefs.js_divergence(beliefs, segment, G, base),
                                      _js_divergence_literal(beliefs, segment, G, base))
    positive = rng.random((n, m)) + 0.01  # the all-positive path
    np.testing.assert_array_equal(core_beliefs.js_divergence(positive, segment, G), _js_divergence_literal(positive, segment, G))


def test_j_similarity_js_divergence_is_the_literal_form_at_scale():
    rng = np.random.default_rng(7)
    n, m, G = 40_000, 19, 9_000  # more rows than a block
    beliefs = rng.dirichlet(np.ones(m), n) * (rng.random((n, m)) < 0.8)
    segment = rng.integers(0, G, n)
    np.testing.assert_array_equal(core_beliefs.js_divergence(beliefs, segment, G), _js_divergence_literal(beliefs, segment, G))


# ---------------------------------------------------------------------------- oracle: bayframe knowledge's Memory (literal copy)
class _MemoryLiteral:
    def __init__(self, m: int):
        self.m = m
        self.ids = np.empty(0, dtype=np.int64)
        self.post = np.zeros((0, 2, m))
        self.time = np.full((0, 2), np.iinfo(np.int64).min // 2, dtype=np.int64)
        self.prior = np.zeros((0, m))
        self.has_prior = np.zeros(0, dtype=bool)

    def rows(self, ids, add=False):
        ids = np.asarray(ids, dtype=np.int64)
        if add:
            new = np.setdiff1d(ids, self.ids)
            if len(new):
                merged = np.concatenate([self.ids, new])
                order = np.argsort(merged, kind="stable")
                grow = len(new)
                self.ids = merged[order]
                self.post = np.concatenate([self.post, np.zeros((grow, 2, self.m))])[order]
                self.time = np.concatenate([self.time, np.full((grow, 2), np.iinfo(np.int64).min // 2)])[order]
                self.prior = np.concatenate([self.prior, np.zeros((grow, self.m))])[order]
                self.has_prior = np.concatenate([self.has_prior, np.zeros(grow, dtype=bool)])[order]
        if len(self.ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return np.where(self.ids[pos] == ids, pos, -1)


@pytest.mark.parametrize("seed", range(6))
def test_bayframe_memory_holds_what_the_literal_form_holds(seed):
    from cdpbench_bayframe.knowledge.bayframe import Memory

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 6))
    fast, literal = Memory(m), _MemoryLiteral(m)
    for t in range(1, 8):
        ids = rng.choice(200, size=int(rng.integers(0, 60)), replace=False) - 20  # some negative ids too
        probe = rng.integers(-30, 220, 50)
        a, b = fast.rows(probe), literal.rows(probe)
        np.testing.assert_array_equal(a < 0, b < 0)
        ra, rb = fast.rows(ids, add=True), literal.rows(ids, add=True)
        assert (ra >= 0).all() and (rb >= 0).all()
        post, prior = rng.random((len(ids), m)), rng.random((len(ids), m))
        keep = rng.random(len(ids)) < 0.7
        for mem, r in ((fast, ra), (literal, rb)):  # the writes prior() and revise() make
            moved = mem.time[r, 0] != t
            mem.post[r[moved], 1] = mem.post[r[moved], 0]
            mem.time[r[moved], 1] = mem.time[r[moved], 0]
            mem.post[r[keep], 0] = post[keep]
            mem.time[r[keep], 0] = t
            mem.prior[r] = prior
            mem.has_prior[r[keep]] = True
        a, b = fast.rows(probe), literal.rows(probe)
        np.testing.assert_array_equal(a < 0, b < 0)
        found = b >= 0
        for name in ("post", "time", "prior", "has_prior"):
            np.testing.assert_array_equal(getattr(fast, name)[a[found]], getattr(literal, name)[b[found]])
        np.testing.assert_array_equal(fast.ids, literal.ids)


# ---------------------------------------------------------------------------- oracle: bayesian closed_form_posterior (literal copy)
def _closed_form_posterior_literal(counts, segment, observed_value, matched, a=1.0):
    from scipy.special import gammaln

    counts = np.asarray(counts, dtype=float)
    segment = np.asarray(segment, dtype=np.int64)
    observed_value = np.asarray(observed_value, dtype=np.int64)
    N, G = len(segment), counts.shape[0]
    sizes = counts.sum(axis=1)
    count = counts[segment]
    n = sizes[segment]
    m = matched.shape[1]
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=matched.ravel(), minlength=G * m).reshape(G, m)
    matched_mass = (column * counts).sum(axis=1)
    others = matched_mass[segment] - (matched * count).sum(axis=1)
    pairs = np.maximum(n - 1.0, 1.0)[:, None]
    numerator = count * (a + matched + (others[:, None] - column[segment] + matched) / pairs)
    observed = observed_value >= 0
    inverse_factorial = np.where(observed, np.exp(-gammaln(np.maximum(n, 1.0))), 0.0)
    rows = np.flatnonzero(observed)
    numerator[rows, observed_value[rows]] += inverse_factorial[rows]
    denominator = a * n + inverse_factorial + matched_mass[segment]
    posterior = numerator / denominator[:, None]
    single = n == 1
    posterior[single] = count[single]
    return posterior if N else np.zeros((0, counts.shape[1]))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [5, 1 << 14])
def test_closed_form_posterior_is_the_literal_form(seed, block, monkeypatch):
    from cdpbench_bayframe.estimators import bayesian

    monkeypatch.setattr(bayesian, "_BLOCK", block)
    rng = np.random.default_rng(seed)
    m, G = int(rng.integers(1, 7)), int(rng.integers(1, 12))
    sensitive_of_group = [rng.integers(0, m, int(rng.integers(1, 7))) for _ in range(G)]
    segment = np.concatenate([np.full(len(v), g) for g, v in enumerate(sensitive_of_group)])
    perm = rng.permutation(len(segment))
    segment = segment[perm]
    counts = np.zeros((G, m), dtype=np.int64)
    for g, v in enumerate(sensitive_of_group):
        np.add.at(counts[g], v, 1)
    N = len(segment)
    observed_value = np.where(rng.random(N) < 0.6, rng.integers(0, m, N), -1)
    matched = rng.random((N, m)) * (rng.random((N, m)) < 0.3)
    for a in (1.0, 0.5):
        np.testing.assert_array_equal(bayesian.closed_form_posterior(counts, segment, observed_value, matched, a),
                                      _closed_form_posterior_literal(counts, segment, observed_value, matched, a))
    empty = bayesian.closed_form_posterior(counts, segment[:0], observed_value[:0], matched[:0])
    assert empty.shape == (0, m)


# ---------------------------------------------------------------------------- oracle: the intersection attacker (literal copy)
def _intersection_observe_literal(past_views, view):
    respondent = np.asarray(view.respondent, dtype=np.int64)
    counts = view.expected_group_counts()
    signature = counts[view.group] > 0
    own = signature.sum(axis=1)
    best = signature.copy()
    best_size = own.copy()
    real = respondent >= 0
    for ids, past in reversed(past_views):
        if len(ids) == 0:
            continue
        pos = np.minimum(np.searchsorted(ids, respondent), len(ids) - 1)
        found = real & (ids[pos] == respondent)
        rows = np.flatnonzero(found)
        inter = signature[rows] & past[pos[rows]]
        size = inter.sum(axis=1)
        better = (size > 0) & (size < best_size[rows])
        best[rows[better]] = inter[better]
        best_size[rows[better]] = size[better]
    with np.errstate(invalid="ignore"):
        weight = np.where(best, counts[view.group], 0).astype(float)
        posterior = weight / weight.sum(axis=1, keepdims=True)
    order = np.argsort(respondent[real], kind="stable")
    past_views.append((respondent[real][order], signature[real][order]))
    n = max(int(real.sum()), 1)
    narrowed = int(((best_size > 1) & (best_size < own) & real).sum())
    return posterior, {"narrowed": float(narrowed), "narrowed_share": narrowed / n}


class _View:
    def __init__(self, respondent, group, counts):
        self.respondent, self.group, self._counts = respondent, group, counts

    def expected_group_counts(self):
        return self._counts


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [4, 1 << 14])
def test_intersection_observe_is_the_literal_form(seed, block, monkeypatch):
    from cdpbench_invariance.attackers import intersection

    monkeypatch.setattr(intersection, "_BLOCK", block)
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 7))
    attacker = intersection.IntersectionAttacker()
    literal_past: list = []
    for _ in range(4):
        N, G = int(rng.integers(0, 50)), int(rng.integers(1, 10))
        respondent = rng.choice(80, size=N, replace=False) - 5  # counterfeits: ids < 0
        group = rng.integers(0, G, N)
        counts = rng.integers(0, 3, (G, m)) * (rng.random((G, m)) < 0.6)
        if rng.random() < 0.5:
            counts = counts.astype(float) / 2  # expected counts (angelized)
        view = _View(respondent, group, counts)
        with np.errstate(invalid="ignore"):
            ours = attacker.observe(view, None)
        posterior, extra = _intersection_observe_literal(literal_past, view)
        np.testing.assert_array_equal(ours.posterior, posterior)
        assert ours.extra == extra
        np.testing.assert_array_equal(ours.respondent, respondent)


# ---------------------------------------------------------------------------- oracle: (B,t)-privacy distances (literal copy)
def _omega_posterior_literal(weights, sensitive, segment, n_groups, n_values):
    segment = np.asarray(segment, dtype=np.int64)
    n, m = len(segment), int(n_values)
    counts = np.bincount(segment * m + np.asarray(sensitive, dtype=np.int64), minlength=int(n_groups) * m)
    counts = counts.reshape(int(n_groups), m).astype(float)
    size = np.maximum(counts.sum(axis=1), 1.0)
    w = np.asarray(weights, dtype=float)
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=w.ravel(), minlength=int(n_groups) * m).reshape(int(n_groups), m)
    omega = counts[segment]
    omega *= w
    col = column[segment]
    has_mass = col > 0
    np.divide(omega, col, out=omega, where=has_mass)
    if not has_mass.all():
        i, s = np.nonzero(~has_mass)
        omega[i, s] = counts[segment[i], s] / size[segment[i]]
    total = omega.sum(axis=1, keepdims=True)
    positive = total > 0
    np.divide(omega, total, out=omega, where=positive)
    if not positive.all():
        i = np.flatnonzero(~positive[:, 0])
        omega[i] = counts[segment[i]] / size[segment[i]][:, None]
    return omega


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [3, 1 << 14])
def test_bt_privacy_distances_are_the_literal_form(seed, block, monkeypatch):
    from cdpbench_classic.estimators.frequency import group_counts
    from cdpbench_classic.privacy_models import bt_privacy

    monkeypatch.setattr(bt_privacy, "_BLOCK", block)
    rng = np.random.default_rng(seed)
    n, m, G = int(rng.integers(1, 60)), int(rng.integers(1, 7)), int(rng.integers(1, 12))
    segment = rng.integers(0, G, n)
    sensitive = rng.integers(0, m, n)
    prior = rng.random((n, m)) * (rng.random((n, m)) < 0.6)  # values nobody allows, all-zero rows
    prior[rng.random(n) < 0.1] = 0.0
    np.testing.assert_array_equal(group_counts(sensitive, segment, G, m),
                                  np.bincount(segment * m + sensitive, minlength=G * m).reshape(G, m))
    expected = bt_privacy.js_divergence(prior, _omega_posterior_literal(prior, sensitive, segment, G, m))
    np.testing.assert_array_equal(bt_privacy.omega_distances(prior, sensitive, segment, G, m), expected)


@pytest.mark.parametrize("seed", range(6))
def test_j_similarity_verify_is_accepts_then_levels(seed):
    from cdpbench.data import Publication, Release
    from cdpbench.plugin import ModelContext, PrivacyModel
    from cdpbench.schema import NumericQI, Schema, Sensitive

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 60)), int(rng.integers(2, 6))
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", tuple(f"v{i}" for i in range(m))))
    release = Release(1, schema, np.arange(n), rng.integers(0, 100, (n, 1)).astype(float), rng.integers(0, m, n))
    prior = rng.random((n, m)) * (rng.random((n, m)) < 0.7)
    groups = rng.integers(-1, int(rng.integers(1, 8)), n)  # -1: suppressed
    pub = Publication.from_partition(release, groups)
    ctx = ModelContext(schema, release.sensitive_distribution(), release=release, prior=prior)
    for params in (j_similarity.JSimilarityParams(k=2, j=0.3, beta=1.0), j_similarity.JSimilarityParams(k=1, j=1.0, beta=5.0)):
        model = j_similarity.JSimilarity(params)
        ours, literal = model.verify(pub, ctx), PrivacyModel.verify(model, pub, ctx)
        assert (ours.satisfied, ours.violations, ours.levels) == (literal.satisfied, literal.violations, literal.levels)


# ---------------------------------------------------------------------------- BayFrame's posterior a block of rows at a time
def _group_restricted_prior_literal(weights, present):
    restricted = np.where(present, weights, 0.0)
    total = restricted.sum(axis=1, keepdims=True)
    uniform = present / np.maximum(present.sum(axis=1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, restricted / total, uniform)


@pytest.mark.parametrize("seed", range(6))
def test_bayesian_posterior_by_blocks_is_the_whole_array_form(seed, monkeypatch):
    """The row-wise passes (group_restricted_prior, the tie test's deviation, the weight checks)
    a block of rows at a time: blocks of 3 rows cut every group, and the posterior (every bit, the
    Hungarian calls drawing from the same generator) is the one of a single block."""
    from cdpbench_bayframe.estimators import bayesian

    rng = np.random.default_rng(seed)
    m, G = int(rng.integers(2, 6)), int(rng.integers(2, 9))
    segment = rng.permutation(np.repeat(np.arange(G), rng.integers(1, 7, G)))
    N = len(segment)
    sensitive = rng.integers(0, m, N)
    weights = rng.random((N, m)) * (rng.random((N, m)) < 0.7)
    weights[rng.random(N) < 0.2] = 1.0  # rows that tie
    rows = rng.choice(N, size=min(3, N), replace=False)
    compromised = (rows, sensitive[rows], np.array([0.9, 0.4, 1.0])[: len(rows)])
    present = rng.random((N, m)) < 0.6
    got = {}
    for block in (3, 1 << 14):
        monkeypatch.setattr(bayesian, "_BLOCK", block)
        np.testing.assert_array_equal(bayesian.group_restricted_prior(weights, present),
                                      _group_restricted_prior_literal(weights, present))
        got[block] = [bayesian.bayesian_posterior(weights, sensitive, segment, G, m, rng=np.random.default_rng(seed),
                                                  compromised=c, normalize=nz)
                      for c in (None, compromised) for nz in (True, False)]
        bad = weights.copy()
        bad[N - 1, 0] = np.nan  # in the last block
        with pytest.raises(Exception, match="weights must be finite and non-negative"):
            bayesian.bayesian_posterior(bad, sensitive, segment, G, m, rng=np.random.default_rng(0))
    for a, b in zip(got[3], got[1 << 14]):
        np.testing.assert_array_equal(a, b)
