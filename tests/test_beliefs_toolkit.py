"""cdpbench.beliefs (normalized beliefs, entropy, the Jensen–Shannon divergence of JS-reduce §6.2 and
BayFrame's J-similarity, its running sums, the check of the defender's prior) and
cdpbench.data.rows_of (the respondent lookup of the attackers), on hand-computed values; the
running sums against recomputation from scratch on random data, bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cdpbench.beliefs import BeliefSums, checked_prior, entropy, js_divergence, normalized_beliefs
from cdpbench.data import rows_of
from cdpbench.errors import ConfigError, DataError


def one_group(rows, base=2.0) -> float:
    rows = np.asarray(rows, dtype=float)
    return float(js_divergence(rows, np.zeros(len(rows), dtype=np.int64), 1, base)[0])


# ---------------------------------------------------------------------------- by hand
def test_normalized_beliefs_scales_rows_and_makes_an_empty_row_uniform():
    got = normalized_beliefs(np.array([[2.0, 0.0, 2.0], [0.0, 0.0, 0.0], [1.0, 3.0, 0.0]]))
    assert got.tolist() == [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3], [0.25, 0.75, 0.0]]
    assert normalized_beliefs(np.array([[0, 4], [1, 1]])).tolist() == [[0.0, 1.0], [0.5, 0.5]]  # ints pass


def test_entropy_in_bits_and_other_bases():
    p = np.array([[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])
    assert entropy(p).tolist() == [1.0, 2.0, 0.0]  # 0 log 0 = 0
    assert entropy(p, math.e) == pytest.approx([math.log(2), math.log(4), 0.0], abs=1e-15)
    assert entropy(np.full((1, 3), 1 / 3), 3.0) == pytest.approx([1.0], abs=1e-15)


def test_js_divergence_of_known_distributions_in_bits():
    assert one_group([[1, 0], [0, 1]]) == 1.0  # two disjoint point masses: 1 bit
    assert one_group([[1, 0], [0, 1]], math.e) == pytest.approx(math.log(2), abs=1e-15)  # ln 2 nats
    # [1, 0] and [1/2, 1/2]: H([3/4, 1/4]) - (0 + 1) / 2 = (2 - 3/4 log2 3) - 1/2
    assert one_group([[1, 0], [0.5, 0.5]]) == pytest.approx(1.5 - 0.75 * math.log2(3), abs=1e-15)
    assert one_group([[3, 0], [1, 1]]) == one_group([[1, 0], [0.5, 0.5]])  # rows are normalized first
    assert one_group(np.eye(3)) == pytest.approx(math.log2(3), abs=1e-15)  # u > 2 exceeds 1 bit
    assert one_group([[0.2, 0.8], [0.2, 0.8], [2, 8]]) == 0.0  # equal beliefs


def test_js_divergence_per_group_with_empty_and_single_groups():
    beliefs = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7], [1.0, 0.0], [0.0, 0.0]])
    segment = np.array([0, 0, 1, 3, 3])
    got = js_divergence(beliefs, segment, 4)
    # group 2 is empty, group 1 has one respondent; group 3: [1, 0] and the uniform [1/2, 1/2]
    assert got.tolist() == [1.0, 0.0, 0.0, one_group([[1, 0], [0.5, 0.5]])]


def test_checked_prior_names_the_model():
    with pytest.raises(ConfigError, match=r"^privacy_model js_reduce needs the defender's beliefs about every record \(GroupBatch\.prior\); set knowledge=<name> \(e\.g\. knowledge=dk\)$"):
        checked_prior(None, 2, 2, model="js_reduce", example="dk")
    with pytest.raises(ConfigError, match=r"^privacy_model j_similarity needs the defender's \(revised\) prior beliefs about every record \(GroupBatch\.prior\); set knowledge=<name>$"):
        checked_prior(None, 2, 2, model="j_similarity", beliefs="(revised) prior beliefs")
    with pytest.raises(DataError, match=r"prior must have shape \(2, 3\) \(records x sensitive values\); got \(2, 2\)"):
        checked_prior(np.ones((2, 2)), 2, 3, model="x")
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(DataError, match="finite and non-negative"):
            checked_prior(np.array([[0.5, bad]]), 1, 2, model="x")
    ok = checked_prior([[1, 0]], 1, 2, model="x")
    assert ok.dtype == float and ok.tolist() == [[1.0, 0.0]]


def test_rows_of_with_missing_ids_and_counterfeits():
    ids = np.array([10, 3, 7, -1, 42])
    rows, found = rows_of(ids, np.array([7, 3, 5, -1, 10, 99, 42]))
    assert found.tolist() == [True, True, False, False, True, False, True]  # -1 (a counterfeit) is never found
    assert rows[found].tolist() == [2, 1, 0, 4]
    assert ((rows >= 0) & (rows < len(ids))).all()  # a valid row even where not found
    rows, found = rows_of(ids, np.array([-1, -5]), match_negative=True)
    assert found.tolist() == [True, False] and rows[0] == 3
    rows, found = rows_of(np.array([4, 2, 4, 2]), np.array([2, 4]))  # an id listed twice: its first row
    assert rows.tolist() == [1, 0] and found.all()
    rows, found = rows_of(np.array([], dtype=np.int64), np.array([1, -1]))
    assert rows.tolist() == [0, 0] and found.tolist() == [False, False]
    rows, found = rows_of([5, 6], np.array([], dtype=np.int64))
    assert rows.shape == found.shape == (0,)


def test_rows_of_against_a_dictionary():
    rng = np.random.default_rng(3)
    for _ in range(50):
        ids = rng.permutation(200)[: int(rng.integers(0, 40))] - 5  # unique, some negative
        wanted = rng.integers(-6, 200, size=30)
        for match_negative in (False, True):
            rows, found = rows_of(ids, wanted, match_negative=match_negative)
            where = {int(v): i for i, v in enumerate(ids)}
            assert found.tolist() == [int(w) in where and (match_negative or w >= 0) for w in wanted]
            assert rows[found].tolist() == [where[int(w)] for w in wanted[found]]


# ---------------------------------------------------------------------------- running sums, brute force
def random_prior(rng, n, m):
    prior = rng.random((n, m)) * (rng.random((n, m)) < 0.6)  # zeros, some all-zero rows
    prior[rng.random(n) < 0.1] = 0.0
    prior[rng.random(n) < 0.1] = np.eye(m)[rng.integers(0, m)]  # point masses (entropy -0.0)
    return prior


def batch_of(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, segment) listing each group's records in its order, the way a batch lists them."""
    rows = [r for g in groups for r in g]
    segment = [i for i, g in enumerate(groups) for _ in g]
    return np.asarray(rows, dtype=np.int64), np.asarray(segment, dtype=np.int64)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=float).tobytes()


@pytest.mark.parametrize("base", [2.0, math.e, 3.0])
@pytest.mark.parametrize("seed", range(6))
def test_running_sums_are_the_batch_divergence_bit_for_bit(seed, base):
    rng = np.random.default_rng(seed)
    n, m, G = 60, int(rng.integers(2, 7)), int(rng.integers(1, 8))
    prior = random_prior(rng, n, m)
    groups = [[] for _ in range(G)]
    for r in rng.choice(n, size=int(rng.integers(0, 25)), replace=False):
        groups[int(rng.integers(0, G))].append(int(r))  # some groups stay empty
    sums = BeliefSums(prior, *batch_of(groups), G, base)
    for step in range(40):
        row = int(rng.integers(0, n))
        plus = batch_of([g + [row] for g in groups])
        expected = js_divergence(prior[plus[0]], plus[1], G, base)
        assert bits(sums.divergence_plus(row)) == bits(expected)
        among = rng.choice(G, size=int(rng.integers(0, G + 1)), replace=True)
        assert bits(sums.divergence_plus(row, among)) == bits(expected[among])
        assert sums.size_plus.tolist() == [len(g) + 1.0 for g in groups]
        if step % 2 == 0:
            g = int(rng.integers(0, G))
            sums.add(g, row)
            groups[g].append(row)
    # after the additions: the sums are those of groups built from scratch
    fresh = BeliefSums(prior, *batch_of(groups), G, base)
    assert bits(sums.mass) == bits(fresh.mass) and bits(sums.entropy_sum) == bits(fresh.entropy_sum)


@pytest.mark.parametrize("base", [2.0, math.e])
@pytest.mark.parametrize("seed", range(4))
def test_prefix_divergences_are_the_batch_divergence_bit_for_bit(seed, base):
    rng = np.random.default_rng(100 + seed)
    n, m = 40, int(rng.integers(2, 6))
    prior = random_prior(rng, n, m)
    sums = BeliefSums(prior, np.zeros(0, np.int64), np.zeros(0, np.int64), 0, base)
    B, L = 5, 12
    rows = rng.integers(0, n, size=(B, L))
    got = sums.divergence_prefixes(rows)
    for b in range(B):
        for length in range(1, L + 1):
            prefix = rows[b, :length]
            expected = js_divergence(prior[prefix], np.zeros(length, np.int64), 1, base)
            assert bits(got[b, length - 1 : length]) == bits(expected)
    assert sums.divergence_prefixes(np.zeros((0, 3), np.int64)).shape == (0, 3)
    assert sums.divergence_prefixes(np.zeros((2, 0), np.int64)).shape == (2, 0)


def test_running_sums_start_from_empty_groups():
    prior = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    sums = BeliefSums(prior, np.zeros(0, np.int64), np.zeros(0, np.int64), 2)
    assert sums.mass.dtype == float and sums.entropy_sum.dtype == float
    assert sums.divergence_plus(0).tolist() == [0.0, 0.0]  # a group of one
    sums.add(1, 0)
    assert sums.divergence_plus(1).tolist() == [0.0, 1.0]
    sums.add(1, 1)
    assert sums.divergence_plus(2).tolist() == [0.0, pytest.approx(one_group([[1, 0], [0, 1], [0.5, 0.5]]), abs=0)]
