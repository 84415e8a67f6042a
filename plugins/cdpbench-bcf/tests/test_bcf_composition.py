"""BCF §7.1 ("Beyond Two Releases") on a four-release history computed by hand: the B-reduced
release a composition starts from takes, group by group, the LARGEST B-crack over every earlier
background (the optimal micro attack, "max_j c_ij"; specs/bcf.md §2.4), and the compositions
(case 1: B then F, case 2: B then C) are computed on that reduced release.

The history (one QI with leaves 0..3 under ``m0 = {0, 1}``, ``m1 = {2, 3}``, ``ANY = {0..3}``;
S in {Flu, HIV}):

* D1 = 2 Flu in m0, 2 HIV in m0, 1 HIV in m1; R1 = D1 published as classes m0 | m1;
* D2 = 2 Flu in m1, 1 HIV in m0;               R2 = D1 ∪ D2 published as the one class ANY;
* D3 = 2 Flu in m1;                            R3 = D1 ∪ D2 ∪ D3 as m0 | m1;
* D4 = 1 Flu in m0, 1 HIV in m1;               R4 = D1 ∪ .. ∪ D4 as m0 | m1.

R3's groups (entries, sorted by class then value): (m0, Flu) 2, (m0, HIV) 3, (m1, Flu) 4,
(m1, HIV) 1. Theorem 4.4, crack = max(0, |G1| - (|G2| - |g|)), 0 when G1 is empty:

* B(R1, R3): R1's classes coincide with R3's, so G2 = g and the crack is |G1| = the R1 records of
  the group: (m0, Flu) 2, (m0, HIV) 2, (m1, Flu) 0 (G1 empty), (m1, HIV) 1 -> [2, 2, 0, 1];
* B(R2, R3): ANY is comparable to everything, so G1 = R2's records of value s and G2 = R3's:
  Flu 4 and 6, HIV 4 and 4 -> (m0, Flu) 4 - (6 - 2) = 0, (m0, HIV) 4 - (4 - 3) = 3,
  (m1, Flu) 4 - (6 - 4) = 2, (m1, HIV) 4 - (4 - 1) = 1 -> [0, 3, 2, 1].

The largest crack per group is [2, 3, 2, 1], taken from R1 for (m0, Flu) and from R2 for (m0, HIV)
and (m1, Flu): R3' = [0, 0, 2, 0], which is exactly D3 (a T3 target can only be a D3 record).
The smallest (the planted bug) would be [0, 2, 0, 1], R3' = [2, 1, 4, 0].

At R4 (groups (m0, Flu) 3, (m0, HIV) 3, (m1, Flu) 4, (m1, HIV) 2) the composition through R3'
meets M(qid3', qid4) = Σ_s min(|g'3|, |g4|): m0 against m0 is 0 (a phantom pair, skipped by
default), m1 against m1 is min(2, 4) + min(0, 2) = 2. Case 1: [m1] of R3 keeps 5 - (2 + 1) - 0 = 2
candidates; case 2: R4's [m1] loses (4 - 2) + (2 - 0) = 4 of its 6 records to the C-attack: 2.
Through R2' = R2 - B(R1, R2) = ANY {Flu 2, HIV 1} (B(R1, R2): Flu 2 - (4 - 4) = 2, HIV 3 - 0 = 3),
M = 2 + 1 = 3 against either class of R4. So FA_composed = CA_composed = 2 (with the min it would
be 3: R3' m0 {2, 1} vs R4 m0 gives 3, m1 {4, 0} vs m1 gives 4).
"""

from __future__ import annotations

import numpy as np

from cdpbench_bcf.classes import Classes
from cdpbench_bcf.correspondence import PairAttack, attack_pair
from cdpbench_bcf.history import LatestAttacks, ReleaseChain, attack_latest

FLU, HIV = 0, 1
M0, M1, ANY = (0, 1), (2, 3), (0, 3)  # taxonomy nodes as leaf-code ranges

D1 = [(M0, FLU)] * 2 + [(M0, HIV)] * 2 + [(M1, HIV)]
D2 = [(M1, FLU)] * 2 + [(M0, HIV)]
D3 = [(M1, FLU)] * 2
D4 = [(M0, FLU), (M1, HIV)]


def release_classes(cut: list[tuple[int, int]], records: list[tuple[tuple[int, int], int]]) -> Classes:
    """The classes of a release published with the classes ``cut`` (each record goes to the class
    whose node contains the record's node)."""
    klass = [next(c for c, (lo, hi) in enumerate(cut) if lo <= node[0] and node[1] <= hi) for node, _ in records]
    low = np.array([[lo] for lo, _ in cut], dtype=float)
    high = np.array([[hi] for _, hi in cut], dtype=float)
    return Classes.build(low, high, {}, np.array(klass), np.array([s for _, s in records]), 2)


R1 = release_classes([M0, M1], D1)
R2 = release_classes([ANY], D1 + D2)
R3 = release_classes([M0, M1], D1 + D2 + D3)
R4 = release_classes([M0, M1], D1 + D2 + D3 + D4)


def entries(c: Classes) -> list[tuple[int, int, int]]:
    return list(zip(c.entry_class.tolist(), c.entry_value.tolist(), c.entry_count.tolist()))


def test_fixture_releases_are_the_hand_built_ones():
    assert entries(R1) == [(0, FLU, 2), (0, HIV, 2), (1, HIV, 1)]
    assert entries(R2) == [(0, FLU, 4), (0, HIV, 4)]
    assert entries(R3) == [(0, FLU, 2), (0, HIV, 3), (1, FLU, 4), (1, HIV, 1)]
    assert entries(R4) == [(0, FLU, 3), (0, HIV, 3), (1, FLU, 4), (1, HIV, 2)]


def test_b_cracks_of_r3_against_each_earlier_release():
    """Theorem 4.4 on (R1, R3) and (R2, R3), by hand (module docstring): each background is the
    stronger one for different groups, so neither alone gives the optimal crack."""
    assert attack_pair(R1, R3).backward_crack.tolist() == [2, 2, 0, 1]
    assert attack_pair(R2, R3).backward_crack.tolist() == [0, 3, 2, 1]


def test_b_reduced_release_takes_the_largest_crack_over_every_earlier_release():
    """§7.1, optimal micro attack: x_B of a group is max_j of its B-cracks (not the min, nor the
    last background's). R3' = R3 - [2, 3, 2, 1] = [0, 0, 2, 0]: exactly the two D3 records."""
    chain = ReleaseChain()
    chain.add(R1)
    chain.add(R2)
    third = chain.add(R3)
    assert sorted(third.pairs) == [0, 1]
    assert third.pairs[0].backward_crack.tolist() == [2, 2, 0, 1]
    assert third.pairs[1].backward_crack.tolist() == [0, 3, 2, 1]
    assert chain.reduced[0] is None  # R1 has no background
    assert chain.reduced[1].entry_count.tolist() == [2, 1]  # R2' = ANY {Flu 2, HIV 1} = D2
    assert chain.reduced[2].entry_count.tolist() == [0, 0, 2, 0], "x_B must be the max over R1 and R2: [2, 3, 2, 1]"
    # the reduction keeps the classes and groups, only the counts change
    assert chain.reduced[2].entry_class.tolist() == R3.entry_class.tolist()
    assert chain.reduced[2].entry_value.tolist() == R3.entry_value.tolist()
    # soundness: a B-attack only removes records that are not T3 records (D3 is 2 Flu in m1)
    t3_records = np.array([0, 0, 2, 0])
    assert (chain.reduced[2].entry_count >= t3_records).all()


def test_backward_reduced_is_the_per_group_max_whatever_the_order_of_the_backgrounds():
    """The same reduction from ``LatestAttacks`` directly, the backgrounds given in either order."""
    p0, p1 = attack_pair(R1, R3), attack_pair(R2, R3)
    for pairs in ({0: p0, 1: p1}, {0: p1, 1: p0}):
        reduced = LatestAttacks(pairs=pairs).backward_reduced(R3)
        assert reduced is not None
        assert reduced.entry_count.tolist() == [0, 0, 2, 0]


def _pair_with_crack(crack: list[int]) -> PairAttack:
    e = np.zeros(0, np.int64)
    return PairAttack(e, e, e, np.zeros(0), np.zeros(0), np.array(crack, np.int64), np.zeros(0), np.inf, np.inf, np.inf)


def test_backward_reduced_on_disjoint_cracks_keeps_both():
    """Two backgrounds cracking different groups: the reduced release loses both cracks (a
    per-group min would see no crack at all and report no composition)."""
    latest = R3.with_counts(np.array([5, 5, 5, 5]))
    reduced = LatestAttacks(pairs={0: _pair_with_crack([3, 0, 0, 1]), 1: _pair_with_crack([0, 2, 0, 0])}).backward_reduced(latest)
    assert reduced is not None
    assert reduced.entry_count.tolist() == [2, 3, 5, 4]
    assert LatestAttacks(pairs={0: _pair_with_crack([0, 0, 0, 0])}).backward_reduced(latest) is None
    assert LatestAttacks().backward_reduced(latest) is None


def test_compositions_at_the_fourth_release():
    """§7.1 cases 1 and 2 at R4 through R2' and R3' (module docstring): M(R3' m1, R4 m1) = 2,
    the R3' m0 pair is a phantom (M = 0); through R2', M = 3. FA_composed = CA_composed = 2."""
    chain = ReleaseChain()
    for r in (R1, R2, R3):
        chain.add(r)
    fourth = chain.attack(R4)
    assert sorted(fourth.pairs) == [0, 1, 2]
    assert sorted(fourth.composed) == [1, 2]
    via_r3 = fourth.composed[2]
    common = dict(zip(zip(via_r3.pair_a.tolist(), via_r3.pair_b.tolist()), via_r3.common.tolist()))
    assert common == {(0, 0): 0, (1, 1): 2}
    assert via_r3.forward_anonymity.tolist() == [np.inf, 2.0]  # case 1: R3's m1 keeps 2 candidates
    assert via_r3.cross_anonymity.tolist() == [np.inf, 2.0]  # case 2: R4's m1 keeps 2 of its 6
    assert via_r3.cross(chain.reduced[2], 1, R4, 1) == {FLU: 2, HIV: 2}  # |g4| - min(|g'3|, |g4|)
    via_r2 = fourth.composed[1]
    assert via_r2.common.tolist() == [3, 3]
    assert fourth.FA_composed == 2.0
    assert min(p.CA for p in fourth.composed.values()) == 2.0
    # the composition through R3' is stronger than the micro attack (R3, R4) alone: Σ min = 5 on m1
    micro = dict(zip(zip(fourth.pairs[2].pair_a.tolist(), fourth.pairs[2].pair_b.tolist()), fourth.pairs[2].common.tolist()))
    assert micro[(1, 1)] == 5
    # attack_latest with the chain's reduced releases gives the same compositions
    again = attack_latest(chain.classes, chain.reduced, R4)
    assert again.FA_composed == 2.0 and sorted(again.composed) == [1, 2]
