"""Tests that close survivors of the mutation check (mutation/README.md): comparable classes (BCF
Def. 4.1) when one release stores a categorical column as value sets (Mondrian's
``categorical=set``) and the other as leaf ranges, against a brute-force oracle."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench_bcf.classes import Classes
from cdpbench_bcf.comparable import comparable_pairs


def brute_pairs(a_sets, a_num, b_sets, b_num) -> list[tuple[int, int]]:
    """(i, j) with a shared leaf in column 0 and overlapping closed intervals in column 1."""
    return [
        (i, j)
        for i in range(len(a_sets))
        for j in range(len(b_sets))
        if a_sets[i] & b_sets[j] and a_num[i][0] <= b_num[j][1] and b_num[j][0] <= a_num[i][1]
    ]


def classes_of(sets: list[set[int]], num: list[tuple[int, int]], L: int, as_sets: bool) -> Classes:
    G = len(sets)
    low = np.array([[min(s), lo] for s, (lo, _) in zip(sets, num)], dtype=float)
    high = np.array([[max(s), hi] for s, (_, hi) in zip(sets, num)], dtype=float)
    value_sets = {}
    if as_sets:
        value_sets[0] = np.array([[leaf in s for leaf in range(L)] for s in sets], dtype=bool)
    klass = np.arange(G)
    return Classes.build(low, high, value_sets, klass, np.zeros(G, dtype=np.int64), 2)


def test_a_set_against_ranges_by_hand():
    # a: class 0 = {0, 2}, class 1 = {1, 3} (neither a range); b: ranges [1, 2] and [0, 0]
    L = 4
    a = classes_of([{0, 2}, {1, 3}], [(0, 9), (0, 9)], L, as_sets=True)
    b = classes_of([{1, 2}, {0}], [(0, 9), (0, 9)], L, as_sets=False)
    assert 0 in a.sets and not b.sets
    pa, pb = comparable_pairs(a, b)
    assert list(zip(pa.tolist(), pb.tolist())) == [(0, 0), (0, 1), (1, 0)]
    pb2, pa2 = comparable_pairs(b, a)
    assert sorted(zip(pa2.tolist(), pb2.tolist())) == [(0, 0), (0, 1), (1, 0)]


@pytest.mark.parametrize("seed", range(12))
def test_mixed_sets_and_ranges_match_the_brute_force_oracle(seed):
    rng = np.random.default_rng(seed)
    L = int(rng.integers(3, 7))

    def random_set():
        s = {int(x) for x in np.flatnonzero(rng.random(L) < 0.4)}
        return s or {int(rng.integers(L))}

    def random_range():
        lo = int(rng.integers(L))
        return set(range(lo, int(rng.integers(lo, L)) + 1))

    def random_interval():
        lo = int(rng.integers(0, 10))
        return (lo, lo + int(rng.integers(0, 5)))

    a_sets = [random_set() for _ in range(int(rng.integers(2, 7)))]
    a_sets[0] = {0, L - 1}  # at least one class that is not a range, so `a` stores sets
    b_sets = [random_range() for _ in range(int(rng.integers(2, 7)))]
    a_num = [random_interval() for _ in a_sets]
    b_num = [random_interval() for _ in b_sets]
    a = classes_of(a_sets, a_num, L, as_sets=True)
    b = classes_of(b_sets, b_num, L, as_sets=False)
    expected = brute_pairs(a_sets, a_num, b_sets, b_num)
    pa, pb = comparable_pairs(a, b)
    assert list(zip(pa.tolist(), pb.tolist())) == expected
    qb, qa = comparable_pairs(b, a)
    assert sorted(zip(qa.tolist(), qb.tolist())) == expected
