"""The exact configuration posterior (JS-reduce §5.2): the paper's Example 2, brute-force
enumeration of all n! configurations, the tuple-by-tuple closed form on a group of 1,000, the
degenerate cases, and the Ω-estimate from the classic plugin used through the same interface."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import Publication
from cdpbench.errors import DataError
from cdpbench.registry import default_registry
from cdpbench.runner import defender_posterior
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_jsreduce.estimators.configuration import ConfigurationEstimator, configuration_posterior

SETTINGS = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------------------- the paper's example
def test_example_2_alice_and_carol():
    # Table 4b: RBK_2 Alice 0.31 (BCM-pos) / 0.05 (PNE-pos), Carol 0.02 / 0.31. QI-group 3 of
    # Table 1d publishes one BCM-pos and one PNE-pos tuple. d1 = 0.31 + 0.31 = 0.62 (Alice gets
    # BCM-pos), d2 = 0.05 + 0.02 = 0.07, so p(Alice, BCM-pos) = 0.62 / 0.69.
    BCM, PNE = 0, 1
    weights = np.array([[0.31, 0.05], [0.02, 0.31]])
    post = configuration_posterior(weights, np.array([BCM, PNE]), np.array([0, 0]), 1, 2)
    exact = Fraction(62, 69)
    assert post[0, BCM] == pytest.approx(float(exact), rel=1e-13)
    assert post[0, PNE] == pytest.approx(float(1 - exact), rel=1e-13)
    assert post[1, PNE] == pytest.approx(float(exact), rel=1e-13)  # Carol: same configurations
    assert post[1, BCM] == pytest.approx(float(1 - exact), rel=1e-13)
    # Table 4c prints them rounded: 0.9 / 0.1 / 0.1 / 0.9
    assert np.round(post, 1).tolist() == [[0.9, 0.1], [0.1, 0.9]]


def test_example_2_through_the_registry():
    est = default_registry().create("estimator", "configuration")
    assert isinstance(est, ConfigurationEstimator)
    post = est.posterior(np.array([[0.31, 0.05], [0.02, 0.31]]), np.array([1, 0]), np.array([0, 0]), 1, 2)
    assert post[0, 0] == pytest.approx(62 / 69, rel=1e-13)


# ---------------------------------------------------------------------------- brute force
def brute_force(weights: np.ndarray, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, m: int) -> np.ndarray:
    """Enumerate every configuration of every group (n! bijections respondents -> tuples)."""
    out = np.zeros((len(segment), m))
    for g in range(n_groups):
        members = np.flatnonzero(segment == g)
        n = len(members)
        if n == 0:
            continue
        values = sensitive[members]  # tuple j carries value values[j]
        w = weights[members][:, values]  # w[i, j] = prior of respondent i for the value of tuple j
        perms = np.array(list(itertools.permutations(range(n))))  # perms[c, i] = tuple of respondent i
        degree = w[np.arange(n), perms].sum(axis=1)  # d(c) = sum_i w[i, c(i)]
        if degree.sum() == 0:  # undefined ratio: the documented fallback, the group's frequencies
            freq = np.bincount(values, minlength=m) / n
            out[members] = freq
            continue
        for i in range(n):
            got = values[perms[:, i]]  # value respondent i receives in each configuration
            for s in range(m):
                out[members[i], s] = degree[got == s].sum() / degree.sum()
    return out


@st.composite
def groups(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    m = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))
    G = len(sizes)
    segment = np.repeat(np.arange(G), sizes)
    rng.shuffle(segment)  # rows of a group need not be contiguous
    n = len(segment)
    sensitive = rng.integers(0, m, n)
    weights = rng.random((n, m))
    weights[rng.random((n, m)) < draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))] = 0.0  # zeros, even all
    weights *= rng.choice([1.0, 0.2, 5.0], size=(n, 1))  # raw, unnormalized rows
    return weights, sensitive, segment, G, m


@SETTINGS
@given(groups())
def test_closed_form_equals_enumeration_of_all_configurations(case):
    weights, sensitive, segment, G, m = case
    got = configuration_posterior(weights, sensitive, segment, G, m)
    want = brute_force(weights, sensitive, segment, G, m)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.allclose(got.sum(axis=1), 1.0)


@SETTINGS
@given(groups(), st.integers(0, 2**32 - 1))
def test_posterior_ignores_which_row_lists_which_tuple(case, seed):
    # the published multiset is all that matters: shuffling the sensitive column within each group
    # (the tuples, not the respondents) changes nothing
    weights, sensitive, segment, G, m = case
    rng = np.random.default_rng(seed)
    shuffled = sensitive.copy()
    for g in range(G):
        idx = np.flatnonzero(segment == g)
        shuffled[idx] = sensitive[rng.permutation(idx)]
    a = configuration_posterior(weights, sensitive, segment, G, m)
    b = configuration_posterior(weights, shuffled, segment, G, m)
    assert np.allclose(a, b, atol=1e-12)


# ---------------------------------------------------------------------------- large groups
def pairwise_form(w: np.ndarray) -> np.ndarray:
    """DESIGN.md §5 tuple by tuple: P(i->j) = (w_ij + (W - R_i - C_j + w_ij)/(n-1)) / W."""
    n = w.shape[0]
    W, R, C = w.sum(), w.sum(axis=1), w.sum(axis=0)
    return (w + (W - R[:, None] - C[None, :] + w) / (n - 1)) / W


def test_group_of_1000_matches_the_tuple_by_tuple_form():
    rng = np.random.default_rng(7)
    n, m = 1000, 17
    weights = rng.dirichlet(np.full(m, 0.3), size=n)
    sensitive = rng.integers(0, m, n)
    post = configuration_posterior(weights, sensitive, np.zeros(n, dtype=np.int64), 1, m)
    assert post.shape == (n, m)
    assert np.allclose(post.sum(axis=1), 1.0, atol=1e-12)
    P = pairwise_form(weights[:, sensitive])  # [respondent, tuple]
    assert np.allclose(P.sum(axis=0), 1.0) and np.allclose(P.sum(axis=1), 1.0)  # doubly stochastic
    by_value = np.zeros((n, m))
    for s in range(m):
        by_value[:, s] = P[:, sensitive == s].sum(axis=1)
    assert np.allclose(post, by_value, atol=1e-12)


def test_many_groups_at_once_equal_each_group_alone():
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 40, 60)
    sizes[5] = 1000
    segment = np.repeat(np.arange(len(sizes)), sizes)
    n, m = len(segment), 5
    weights = rng.random((n, m))
    sensitive = rng.integers(0, m, n)
    together = configuration_posterior(weights, sensitive, segment, len(sizes), m)
    for g in (0, 5, 59):
        idx = np.flatnonzero(segment == g)
        alone = configuration_posterior(weights[idx], sensitive[idx], np.zeros(len(idx), dtype=np.int64), 1, m)
        assert np.allclose(together[idx], alone, atol=1e-12)


# ---------------------------------------------------------------------------- degenerate cases
def test_single_respondent_owns_the_single_tuple():
    post = configuration_posterior(np.array([[0.0, 0.2, 0.8]]), np.array([1]), np.array([0]), 1, 3)
    assert post.tolist() == [[0.0, 1.0, 0.0]]


def test_all_zero_weights_fall_back_to_the_group_frequencies():
    # group 0: nobody has mass on the published values {0, 0, 1} (only on value 2) -> 2/3, 1/3, 0
    # group 1: ordinary weights, unaffected
    weights = np.array([[0, 0, 1.0], [0, 0, 0.5], [0, 0, 0.0], [0.5, 0.5, 0], [0.1, 0.9, 0]])
    sensitive = np.array([0, 0, 1, 0, 1])
    segment = np.array([0, 0, 0, 1, 1])
    post = configuration_posterior(weights, sensitive, segment, 2, 3)
    assert np.allclose(post[:3], [[2 / 3, 1 / 3, 0]] * 3)
    # group 1: d(0->t0, 1->t1) = 0.5 + 0.9, d(0->t1, 1->t0) = 0.5 + 0.1
    assert np.allclose(post[3], [1.4 / 2.0, 0.6 / 2.0, 0])


def test_no_knowledge_gives_the_group_frequencies():
    sensitive = np.array([0, 1, 1, 2, 2, 2])
    segment = np.array([0, 0, 0, 1, 1, 1])
    post = configuration_posterior(None, sensitive, segment, 2, 3)
    assert np.allclose(post, [[1 / 3, 2 / 3, 0]] * 3 + [[0, 0, 1]] * 3)
    # equal priors say nothing either
    same = configuration_posterior(np.full((6, 3), 0.2), sensitive, segment, 2, 3)
    assert np.allclose(same, post)


def test_bad_weights_are_refused():
    with pytest.raises(DataError, match=r"weights must have shape \(n, n_values\) = \(2, 3\)"):
        configuration_posterior(np.ones((2, 2)), np.array([0, 1]), np.array([0, 0]), 1, 3)
    with pytest.raises(DataError, match="non-negative"):
        configuration_posterior(np.array([[1.0, -0.1], [0.5, 0.5]]), np.array([0, 1]), np.array([0, 0]), 1, 2)


# ---------------------------------------------------------------------------- the Ω-estimate too
def test_omega_estimator_is_used_through_the_same_interface():
    reg = default_registry()
    rng = np.random.default_rng(11)
    n, m = 30, 4
    segment = np.repeat(np.arange(6), 5)
    sensitive = rng.integers(0, m, n)
    weights = rng.dirichlet(np.ones(m), size=n)
    results = {}
    for name in ("configuration", "omega"):
        est = reg.create("estimator", name)
        post = est.posterior(weights, sensitive, segment, 6, m)
        assert post.shape == (n, m)
        assert np.allclose(post.sum(axis=1), 1.0)
        # no tuple value outside the group's multiset gets any mass
        counts = np.zeros((6, m))
        np.add.at(counts, (segment, sensitive), 1)
        assert np.all(post[counts[segment] == 0] == 0)
        results[name] = post
    # both reduce to the frequencies when every respondent has the same prior
    for name in ("configuration", "omega"):
        est = reg.create("estimator", name)
        flat = est.posterior(np.full((n, m), 0.25), sensitive, segment, 6, m)
        assert np.allclose(flat, configuration_posterior(None, sensitive, segment, 6, m))
    assert not np.allclose(results["configuration"], results["omega"])  # they are different estimators

    # and the runner's defender revision accepts either
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", tuple("abcd")))
    frame = pd.DataFrame({"id": np.arange(n), "age": np.arange(n), "s": np.array(list("abcd"))[sensitive]})
    release = schema.encode(frame, 1)
    pub = Publication.from_partition(release, segment)
    for name in ("configuration", "omega"):
        comp = SimpleNamespace(estimator=reg.create("estimator", name))
        post = defender_posterior(comp, release, pub, weights)
        assert post.shape == (n, m) and np.allclose(post.sum(axis=1), 1.0)
    assert math.isclose(
        defender_posterior(SimpleNamespace(estimator=reg.create("estimator", "configuration")), release, pub, weights)[0, sensitive[0]],
        configuration_posterior(weights, sensitive, segment, 6, m)[0, sensitive[0]],
    )
