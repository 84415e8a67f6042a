"""cdpbench.greedy, the greedy prefix scan and leftover placement of JS-reduce and BKAA, on small
hand-made inputs: every batched search returns what the papers' one-record-at-a-time loop returns
(the smallest accepted prefix, the nearest accepted group), found here by brute force on random
predicates, whatever the window, block or cap."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.greedy import (
    extension_over,
    largest_fitting,
    merge_leftovers,
    merge_leftovers_extension,
    prefix_judge,
    smallest_accepted_prefix,
    smallest_accepted_prefix_running,
)
from cdpbench.plugin import GroupExtension


def predicate(judge):
    """``accepts(rows, segment, n_groups)`` from a judgment of one group (a list of rows, in order)."""

    def accepts(rows, segment, n_groups):
        rows, segment = np.asarray(rows), np.asarray(segment)
        return np.array([judge(rows[segment == g].tolist()) for g in range(n_groups)], dtype=bool)

    return accepts


def prefixes_of(judge):
    """``accepts_prefixes(rows [B, L])`` from the same judgment."""

    def prefixes(rows):
        rows = np.asarray(rows)
        return np.array([[judge(rows[b, : l + 1].tolist()) for l in range(rows.shape[1])] for b in range(rows.shape[0])], dtype=bool)

    return prefixes


def random_judge(rng, n):
    """A non-monotone judgment on the group's rows: a weighted sum falls in a random set of
    residues (so a prefix may be accepted and a longer one not, and the other way round)."""
    weight = rng.integers(1, 50, n)
    residues = set(rng.choice(11, size=int(rng.integers(1, 4)), replace=False).tolist())
    least = int(rng.integers(1, 4))
    return lambda group: len(group) >= least and int(weight[group].sum()) % 11 in residues


def brute_smallest(order, start, judge):
    for size in range(1, len(order) - start + 1):
        if judge(order[start : start + size].tolist()):
            return size
    return 0


# ---------------------------------------------------------------------------- the scan
def test_smallest_accepted_prefix_by_hand():
    order = np.array([4, 2, 0, 3, 1])
    judge = lambda group: sum(group) >= 6  # noqa: E731
    stats = {"accepts_calls": 0}
    assert smallest_accepted_prefix(order, 0, predicate(judge), 8, stats) == 2  # 4 + 2
    assert smallest_accepted_prefix(order, 1, predicate(judge), 1, stats) == 4  # 2 + 0 + 3 + 1
    assert smallest_accepted_prefix(order, 2, predicate(judge), 1, stats) == 0  # 0 + 3 + 1 < 6
    # window 1 from start 1: sizes 1, then 2, then 3..4 -> three calls; from start 2: 1, 2, 3 -> three
    assert stats["accepts_calls"] == 1 + 3 + 3


@pytest.mark.parametrize("seed", range(40))
def test_smallest_accepted_prefix_is_the_brute_force_scan(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    order = rng.permutation(n)
    judge = random_judge(rng, n)
    accepts, prefixes = predicate(judge), prefixes_of(judge)
    for start in range(n):
        expected = brute_smallest(order, start, judge)
        for window in (1, 3, 8, 100):
            assert smallest_accepted_prefix(order, start, accepts, window, {"accepts_calls": 0}) == expected
            for cap in (1, 5, 1 << 18):  # a small cap hands the search to the accepts path: same answer
                for first in (1, 32):
                    stats = {"accepts_calls": 0}
                    got = smallest_accepted_prefix_running(order, start, prefixes, accepts, window, stats, cap=cap, first=first)
                    assert got == expected


def test_the_running_scan_doubles_from_max_window_first():
    order = np.arange(100)
    never = lambda group: False  # noqa: E731
    stats = {"accepts_calls": 0}
    assert smallest_accepted_prefix_running(order, 0, prefixes_of(never), predicate(never), 8, stats, cap=1 << 18) == 0
    assert stats["accepts_calls"] == 3  # sizes 1..32, 1..64, 1..100
    stats = {"accepts_calls": 0}
    assert smallest_accepted_prefix_running(order, 0, prefixes_of(never), predicate(never), 8, stats, cap=40) == 0
    # 1..32 judged running, then 64 > cap: the accepts path from size 1 (1..8, 9..16, 17..32, 33..64, 65..100)
    assert stats["accepts_calls"] == 1 + 5


@pytest.mark.parametrize("budget", [1, 2, 10, 55, 100, 1000])
def test_largest_fitting_is_the_brute_force_bound(budget):
    for lo in range(1, 40):
        for hi in range(lo, 60):
            fitting = [h for h in range(lo, hi + 1) if sum(range(lo, h + 1)) <= budget]
            assert largest_fitting(lo, hi, budget) == (max(fitting) if fitting else lo), (lo, hi)


# ---------------------------------------------------------------------------- the model's fast path
class Table(GroupExtension):
    """Running "statistics" of a fixed list of groups: the groups themselves, judged by ``judge``."""

    def __init__(self, judge, rows, segment, n_groups, offers_prefixes=True):
        self.judge, self.offers = judge, offers_prefixes
        self.parts = [np.asarray(rows)[np.asarray(segment) == g].tolist() for g in range(n_groups)]

    def accepts_plus(self, row):
        return np.array([self.judge(part + [row]) for part in self.parts], dtype=bool)

    def add(self, g, row):
        self.parts[g].append(row)

    def accepts_prefixes(self, rows):
        return prefixes_of(self.judge)(rows) if self.offers else None


class Among(Table):
    """Judges only the groups asked (``accepts_plus_among``), recording them."""

    asked: list

    def accepts_plus_among(self, row, groups):
        self.asked = getattr(self, "asked", []) + [np.asarray(groups).tolist()]
        return np.array([self.judge(self.parts[g] + [row]) for g in groups], dtype=bool)


def test_prefix_judge_only_when_the_model_offers_one():
    judge = lambda group: len(group) >= 2  # noqa: E731
    assert prefix_judge(None) is None
    assert prefix_judge(lambda rows, segment, n: None) is None
    assert prefix_judge(lambda rows, segment, n: Table(judge, rows, segment, n, offers_prefixes=False)) is None
    got = prefix_judge(lambda rows, segment, n: Table(judge, rows, segment, n))
    np.testing.assert_array_equal(got(np.array([[5, 6, 7]])), [[False, True, True]])


def test_extension_over_the_closed_groups():
    seen = []
    extension_over(lambda rows, segment, n: seen.append((rows.tolist(), segment.tolist(), n)), [np.array([3, 1]), np.array([0]), np.array([2, 4, 5])])
    assert seen == [([3, 1, 0, 2, 4, 5], [0, 0, 1, 2, 2, 2], 3)]


# ---------------------------------------------------------------------------- the leftovers
def brute_merge(left, members, distance_of, judge, later_on_ties):
    """Each leftover in order: every group judged with its current rows plus the leftover, the
    accepted group at the least distance (ties: lowest, or latest, index) joins it."""
    parts = [list(m) for m in members]
    group = {}
    for r in left:
        d = distance_of(r, [len(p) for p in parts])
        accepted = [g for g in range(len(parts)) if judge(parts[g] + [r])]
        if not accepted:
            continue
        best = min(d[g] for g in accepted)
        tied = [g for g in accepted if d[g] == best]
        g = tied[-1] if later_on_ties else tied[0]
        group[r] = g
        parts[g].append(r)
    return group


def test_merge_by_hand_nearest_accepted_and_ties():
    members = [np.array([0, 1]), np.array([2, 3]), np.array([4, 5])]
    left = np.array([6, 7])
    distance = {6: np.array([1.0, 0.0, 0.0]), 7: np.array([2.0, 2.0, 5.0])}
    judge = lambda group: 1 not in group or len(group) <= 2  # noqa: E731 - group 0 plus anything: rejected

    for later, expected in ((False, [1, 1]), (True, [2, 1])):
        group = np.full(8, -1)
        merged = merge_leftovers(left, members, group, predicate(judge), distance.__getitem__, {"accepts_calls": 0}, later_on_ties=later)
        # 6: groups 1 and 2 tied at 0 -> lowest 1 / later 2; 7: group 0 rejected, 1 before 2 (nearer)
        assert merged == 2 and group[6:].tolist() == expected


@pytest.mark.parametrize("seed", range(30))
def test_merge_paths_are_the_brute_force_placement(seed):
    rng = np.random.default_rng(seed)
    n_groups = int(rng.integers(1, 30))
    sizes = rng.integers(1, 4, n_groups)
    n = int(sizes.sum()) + int(rng.integers(1, 25))
    rows = rng.permutation(n)
    members = np.split(rows[: sizes.sum()], np.cumsum(sizes)[:-1])
    left = rows[sizes.sum() :]
    judge = random_judge(rng, n)
    base = rng.integers(0, 4, (n, n_groups)).astype(float)  # many ties
    growth = float(rng.choice([0.0, 0.5]))  # distances that change as groups grow (BKAA's centroids)

    def distance_of(r, current_sizes):
        return base[r] + growth * np.asarray(current_sizes)

    for later in (False, True):
        expected = brute_merge(left.tolist(), [m.tolist() for m in members], distance_of, judge, later)

        for path in ("accepts", "all_at_once", "blocks", "among"):
            size = sizes.astype(float).tolist()

            def joined(g, r, size=size):
                size[g] += 1

            def distance(r, size=size):
                return distance_of(r, size)

            group = np.full(n, -1)
            stats = {"accepts_calls": 0}
            if path == "accepts":
                merged = merge_leftovers(left, members, group, predicate(judge), distance, stats, later_on_ties=later, joined=joined,
                                         block=int(rng.choice([1, 2, 16])))
            else:
                cls = Among if path == "among" else Table
                ext = extension_over(lambda rows, segment, k: cls(judge, rows, segment, k), members)
                merged = merge_leftovers_extension(left, group, ext, distance, stats, later_on_ties=later, block=int(rng.choice([1, 3, 8])),
                                                   all_at_once=path == "all_at_once", joined=joined)
                if path == "all_at_once":
                    assert stats["accepts_calls"] == len(left)
                assert ext.parts == [members[g].tolist() + [r for r in left.tolist() if expected.get(r) == g] for g in range(n_groups)]
            assert merged == len(expected), path
            assert {int(r): int(group[r]) for r in left if group[r] >= 0} == expected, path
            assert (group[rows[: sizes.sum()]] == -1).all()  # the groups' own rows are the caller's

