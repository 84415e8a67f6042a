"""The ``permanent`` estimator: the Bayes posterior with product weights, against brute-force
enumeration of all n! assignments (product of priors) on random groups up to n = 8 with repeated
values, several groups per publication; its conventions; and the Sinkhorn approximation's own
guarantees (row and column sums, exactness where every assignment weighs the same)."""

import itertools

import numpy as np
import pytest

from cdpbench.errors import ConfigError
from cdpbench.registry import default_registry
from cdpbench_classic.estimators.permanent import PermanentParams, permanent_posterior


def brute_force(w: np.ndarray, sens: np.ndarray) -> np.ndarray | None:
    """P(i gets value s) over all n! assignments of the tuples, each weighted Π_i w[i, value]."""
    n, m = len(sens), w.shape[1]
    num, total = np.zeros((n, m)), 0.0
    for perm in itertools.permutations(range(n)):
        vals = sens[list(perm)]
        weight = float(np.prod(w[np.arange(n), vals]))
        total += weight
        num[np.arange(n), vals] += weight
    return num / total if total > 0 else None


def test_equals_brute_force_on_random_groups_up_to_eight():
    rng = np.random.default_rng(8)
    m, checked, sizes = 5, 0, set()
    for _ in range(60):
        G = int(rng.integers(1, 4))
        n_g = rng.integers(1, 9, G) if rng.random() < 0.3 else rng.integers(1, 7, G)
        segment = rng.permutation(np.repeat(np.arange(G), n_g))  # groups interleaved in the arrays
        sens = rng.integers(0, int(rng.integers(1, 4)), len(segment))  # 1-3 values: many repeats
        w = rng.random((len(segment), m)) ** 3
        w[rng.random(w.shape) < 0.15] = 0.0  # priors that rule values out
        post, approximated = permanent_posterior(w, sens, segment, G, m)
        assert approximated == 0
        assert post.sum(axis=1) == pytest.approx(np.ones(len(segment)))
        for g in range(G):
            rows = np.flatnonzero(segment == g)
            want = brute_force(w[rows], sens[rows])
            if want is None:  # no assignment has positive weight: the group's frequencies
                want = np.bincount(sens[rows], minlength=m)[None, :].repeat(len(rows), 0) / len(rows)
            assert post[rows] == pytest.approx(want, abs=1e-12)
            checked += 1
            sizes.add(len(rows))
    assert checked >= 100 and max(sizes) == 8


def test_conventions():
    sens = np.array([0, 0, 1, 2])
    freq = np.array([[0.5, 0.25, 0.25]] * 4)
    seg = np.zeros(4, np.int64)
    assert permanent_posterior(None, sens, seg, 1, 3)[0] == pytest.approx(freq)  # no knowledge
    assert permanent_posterior(np.full((4, 3), 0.2), sens, seg, 1, 3)[0] == pytest.approx(freq)  # uniform prior
    w = np.array([[1.0, 0, 0]] * 4)  # nobody can hold values 1 or 2: perm(W) = 0
    assert permanent_posterior(w, sens, seg, 1, 3)[0] == pytest.approx(freq)
    # one respondent known to hold value 1 (prior 1 on it), the rest uniform
    w = np.array([[0.0, 1.0, 0.0], [1, 1, 1], [1, 1, 1], [1, 1, 1]])
    post = permanent_posterior(w, sens, seg, 1, 3)[0]
    assert post[0] == pytest.approx([0, 1, 0])
    assert post[1:] == pytest.approx(np.array([[2 / 3, 0, 1 / 3]] * 3))


def test_sinkhorn_beyond_max_states_keeps_the_counts_and_is_exact_for_equal_weight_assignments():
    rng = np.random.default_rng(1)
    n, m = 40, 4
    sens = rng.integers(0, m, n)
    w = rng.random((n, m)) + 0.05
    post, approximated = permanent_posterior(w, sens, np.zeros(n, np.int64), 1, m, PermanentParams(max_states=1))
    assert approximated == 1
    assert post.sum(axis=1) == pytest.approx(np.ones(n))
    assert post.sum(axis=0) == pytest.approx(np.bincount(sens, minlength=m), abs=1e-6)
    # rank-one priors a_i * b_s: every assignment weighs the same, the posterior is the frequencies
    w = rng.random(n)[:, None] * rng.random(m)[None, :]
    post, _ = permanent_posterior(w, sens, np.zeros(n, np.int64), 1, m, PermanentParams(max_states=1))
    assert post == pytest.approx(np.bincount(sens, minlength=m)[None, :].repeat(n, 0) / n, abs=1e-6)


def test_registered_and_validated():
    est = default_registry().create("estimator", "permanent", {"max_states": 100})
    assert est.params.max_states == 100
    with pytest.raises(ConfigError, match="max_states"):
        default_registry().create("estimator", "permanent", {"max_states": 0})


def test_groups_of_one_shape_are_solved_together_as_each_alone(monkeypatch):
    """Groups of the same size and value counts go through one batched programme (chunked when
    large); each group's posterior is bit for bit what it gets alone, equals brute force, and a
    group with no positive-weight assignment in the batch falls back to its frequencies."""
    import cdpbench_classic.estimators.permanent as perm

    rng = np.random.default_rng(11)
    m, G = 4, 40
    shape = np.array([0, 0, 1, 2, 3, 3])  # n = 6: counts (2, 1, 1, 2), or (4, 1, 1) taken mod 3 (two shapes)
    segment = np.repeat(np.arange(G), len(shape))
    sens = np.concatenate([rng.permutation(shape if g % 2 else shape % 3) for g in range(G)])
    w = rng.random((len(segment), m)) ** 2
    w[segment == 5] = np.array([0.0, 1.0, 1.0, 1.0])  # value 0 ruled out for the whole group 5: perm(W) = 0
    monkeypatch.setattr(perm, "_BATCH_CELLS", 7 * 3 * 2 * 4 * 5)  # a few groups per chunk
    post, _ = perm.permanent_posterior(w, sens, segment, G, m)
    for g in range(G):
        rows = np.flatnonzero(segment == g)
        alone, _ = perm.permanent_posterior(w[rows], sens[rows], np.zeros(len(rows), dtype=np.int64), 1, m)
        np.testing.assert_array_equal(post[rows], alone)  # the same bits, whatever shares the batch
        want = brute_force(w[rows], sens[rows])
        if want is None:
            assert g == 5
            want = np.bincount(sens[rows], minlength=m)[None, :].repeat(len(rows), 0) / len(rows)
        assert post[rows] == pytest.approx(want, abs=1e-12)


def test_a_groups_bits_do_not_depend_on_the_groups_batched_with_it(monkeypatch):
    """Larger groups (counts 3, 3, 3, 1: 128 states, levels wider than numpy's pairwise-sum
    block), batched by twos, fives and all at once: every group's posterior is the same bits."""
    import cdpbench_classic.estimators.permanent as perm

    rng = np.random.default_rng(12)
    m, G = 4, 12
    shape = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3])
    segment = np.repeat(np.arange(G), len(shape))
    sens = np.concatenate([rng.permutation(shape) for _ in range(G)])
    w = rng.dirichlet(np.ones(m), size=len(segment))
    results = []
    for per_batch in (1, 2, 5, G):
        monkeypatch.setattr(perm, "_BATCH_CELLS", per_batch * 11 * 128)
        results.append(perm.permanent_posterior(w, sens, segment, G, m)[0])
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
