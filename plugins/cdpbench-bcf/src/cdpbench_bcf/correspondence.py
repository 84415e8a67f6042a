"""The three correspondence attacks on a pair of cumulative releases (BCF §4, Theorems 4.2–4.5).

``R_i`` is the earlier release (the paper's R1), ``R_j`` the later one (R2 ⊇ D1). For comparable
classes ``(qid1, qid2)`` and each sensitive value ``s`` the pair of groups ``(g1, g2)`` of
CG(qid1, qid2) gives closed-form crack sizes (the papers' proofs show each is both a lower bound
over all generators and attained by one):

* F-attack, Theorem 4.2: ``|g1| - min(|g1|, |g2|)`` records of ``g1`` (in R1) cannot be the target;
* C-attack, Theorem 4.3: ``|g2| - min(|g1|, |g2|)`` records of ``g2`` (in R2);
* B-attack, Theorem 4.4: with ``G1`` the R1 records comparable to ``g2`` and ``G2`` the R2 records
  comparable to some record of ``G1``, crack 0 when ``G1`` is empty (the (1) guard: then
  ``|G2| < |g2|``), else ``max(0, |G1| - (|G2| - |g2|))``.

Anonymities (Defs. 3.2, 3.4, 3.6): with ``M(qid1, qid2) = Σ_s min(|g1|, |g2|)`` (Lemma 4.4:
``|qid1| - F(qid1, qid2) = |qid2| - C(qid1, qid2) = M``), the F-anonymity of ``qid1`` is the
minimum of ``M`` over the comparable ``qid2``, the C-anonymity of ``qid2`` the minimum over the
comparable ``qid1``; FA and CA are their minima and are equal (Theorem 4.5). The B-anonymity of
``qid2`` is ``|qid2| - Σ_{g2 in qid2} crack``; BA is the minimum over every class of R2.

Readings (see the package README and specs/bcf.md §2.6):

* *Phantom pairs.* A comparable pair with ``M = 0`` shares no sensitive value: no generator makes
  any record of ``qid1`` a buddy of one of ``qid2``, so no target with timestamp T1 can match both
  (the realised data always has ``M >= 1`` on the pair holding a real T1 record). The literal
  Def. 3.2 counts such a pair (``F = |qid1|``, anonymity 0); by default they are skipped
  (``phantom=False``), ``phantom=True`` keeps them. Likewise a class of R2 whose B-crack is its
  whole size (B-anonymity 0) cannot hold a T2 target: every generator gives each of its records a
  buddy, the true one included, so it holds T1 records only. By default its B-anonymity is
  reported as ``inf`` (no target) and left out of BA; ``phantom=True`` keeps the literal 0.
* CA's minimum ranges over the classes of R2 that have a comparable class in R1: a class with
  none holds only T2 records and no T1 target can match it (specs §2.6 item 2).
* ``G2`` is computed as defined (two hops in the comparability graph of groups). Under global
  recoding Lemma 4.1 makes every connected component of that graph complete bipartite, so the two
  hops are the component, summed with one pass; otherwise (Mondrian's local boxes) the two-hop
  sets are formed with a sparse product. The closed forms are exact under global recoding, the
  paper's setting; on other publications every crack size they give is still a sound lower bound
  (injective buddies), which is what the attackers report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .classes import Classes
from .comparable import comparable_pairs


# ---------------------------------------------------------------------------- Theorems 4.2–4.4
def forward_crack(g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """Crack size of ``g1`` in R1 by the F-attack, Theorem 4.2(1): ``|g1| - min(|g1|, |g2|)``."""
    g1 = np.asarray(g1)
    return g1 - np.minimum(g1, g2)


def cross_crack(g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """Crack size of ``g2`` in R2 by the C-attack, Theorem 4.3(1): ``|g2| - min(|g1|, |g2|)``."""
    g2 = np.asarray(g2)
    return g2 - np.minimum(g1, g2)


def backward_crack(G1: np.ndarray, G2: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """Crack size of ``g2`` in R2 by the B-attack, Theorem 4.4(1)–(2): 0 when ``|G1| = 0`` (then
    ``|G2| < |g2|``), else ``max(0, |G1| - (|G2| - |g2|))``."""
    G1, G2, g2 = np.asarray(G1), np.asarray(G2), np.asarray(g2)
    return np.where(G1 > 0, np.maximum(0, G1 - (G2 - g2)), 0)


# ---------------------------------------------------------------------------- one pair of releases
@dataclass
class PairAttack:
    """Every correspondence attack between an earlier release ``a`` and a later one ``b``."""

    pair_a: np.ndarray  # int64 [P] comparable classes (a side), sorted
    pair_b: np.ndarray  # int64 [P]
    common: np.ndarray  # int64 [P] M(qid_a, qid_b) = Σ_s min(|g_a|, |g_b|)
    forward_anonymity: np.ndarray  # float [Ga] min M over realisable pairs (inf: none)
    cross_anonymity: np.ndarray  # float [Gb] (inf: no comparable class in a)
    backward_crack: np.ndarray  # int64 [Eb] crack of each group of b (entries of b)
    backward_anonymity: np.ndarray  # float [Gb] |qid_b| - B(qid_b) (inf: no T2 target can match, see above)
    FA: float
    CA: float
    BA: float

    def forward(self, a: Classes, i: int, b: Classes, j: int) -> dict[int, int]:
        """Crack size per sensitive value of class ``i`` of ``a`` against class ``j`` of ``b``."""
        v, n1, n2 = group_pairs(a, i, b, j)
        return dict(zip(v.tolist(), forward_crack(n1, n2).tolist()))

    def cross(self, a: Classes, i: int, b: Classes, j: int) -> dict[int, int]:
        v, n1, n2 = group_pairs(a, i, b, j)
        return dict(zip(v.tolist(), cross_crack(n1, n2).tolist()))


def group_pairs(a: Classes, i: int, b: Classes, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CG(qid_i, qid_j): per sensitive value present in either class, ``(value, |g_a|, |g_b|)``."""
    pa, pb = a.entry_ptr, b.entry_ptr
    va, ca = a.entry_value[pa[i] : pa[i + 1]], a.entry_count[pa[i] : pa[i + 1]]
    vb, cb = b.entry_value[pb[j] : pb[j + 1]], b.entry_count[pb[j] : pb[j + 1]]
    values = np.union1d(va, vb)
    n1 = np.zeros(len(values), np.int64)
    n2 = np.zeros(len(values), np.int64)
    n1[np.searchsorted(values, va)] = ca
    n2[np.searchsorted(values, vb)] = cb
    keep = (n1 > 0) | (n2 > 0)
    return values[keep], n1[keep], n2[keep]


def common_groups(a: Classes, b: Classes, pair_a: np.ndarray, pair_b: np.ndarray):
    """For every comparable pair ``p``: ``M[p] = Σ_s min(|g_a|, |g_b|)``, and every comparable pair
    of groups (same value, comparable classes) as entry indices ``(edge_a, edge_b)`` with the pair
    ``edge_pair`` it belongs to. Vectorized: each pair is expanded over the groups of its ``a``
    class and the groups of ``b`` are looked up by ``(class, value)``."""
    m = max(a.n_values, b.n_values)
    ptr = a.entry_ptr
    per_pair = ptr[pair_a + 1] - ptr[pair_a]
    P = len(pair_a)
    rep = np.repeat(np.arange(P), per_pair)
    start = np.repeat(ptr[pair_a] - np.concatenate(([0], np.cumsum(per_pair)[:-1])), per_pair) if P else np.zeros(0, np.int64)
    ea = (start + np.arange(len(rep))).astype(np.int64)
    key_b = b.entry_class * m + b.entry_value  # sorted: entries are sorted by class then value
    want = pair_b[rep] * m + a.entry_value[ea]
    pos = np.minimum(np.searchsorted(key_b, want), max(len(key_b) - 1, 0))
    found = (key_b[pos] == want) if len(key_b) else np.zeros(len(want), bool)
    n2 = np.where(found, b.entry_count[pos] if len(key_b) else 0, 0)
    both = np.minimum(a.entry_count[ea], n2)
    M = np.bincount(rep, weights=both, minlength=P).astype(np.int64)
    hit = found & (a.entry_count[ea] > 0) & (n2 > 0)
    return M, ea[hit], pos[hit], rep[hit]


def attack_pair(a: Classes, b: Classes, *, phantom: bool = False, pairs=None) -> PairAttack:
    """F, C and B attacks of release ``b`` (later) against release ``a`` (earlier); see the module
    docstring. ``pairs`` may pass precomputed :func:`comparable_pairs`."""
    pair_a, pair_b = comparable_pairs(a, b) if pairs is None else pairs
    M, edge_a, edge_b, _ = common_groups(a, b, pair_a, pair_b)
    real = np.ones(len(M), bool) if phantom else M > 0
    fwd = np.full(a.n_classes, np.inf)
    np.minimum.at(fwd, pair_a[real], M[real].astype(float))
    crs = np.full(b.n_classes, np.inf)
    np.minimum.at(crs, pair_b[real], M[real].astype(float))
    G1, G2 = backward_sets(a, b, edge_a, edge_b)
    crack = backward_crack(G1, G2, b.entry_count)
    bwd = (b.size - np.bincount(b.entry_class, weights=crack, minlength=b.n_classes)).astype(float)
    if not phantom:
        bwd[bwd == 0] = np.inf
    FA = float(fwd.min()) if a.n_classes else np.inf
    CA = float(crs.min()) if b.n_classes else np.inf
    BA = float(bwd.min()) if b.n_classes else np.inf
    return PairAttack(pair_a, pair_b, M, fwd, crs, crack.astype(np.int64), bwd, FA, CA, BA)


def backward_sets(a: Classes, b: Classes, edge_a: np.ndarray, edge_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(|G1(g2)|, |G2(g2)|)`` for every group ``g2`` of ``b`` (Theorem 4.4), from the comparable
    pairs of groups ``(edge_a, edge_b)``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    Ea, Eb = len(a.entry_count), len(b.entry_count)
    n1 = a.entry_count.astype(np.int64)
    n2 = b.entry_count.astype(np.int64)
    G1 = np.bincount(edge_b, weights=n1[edge_a], minlength=Eb).astype(np.int64)
    if len(edge_a) == 0:
        return G1, np.zeros(Eb, np.int64)
    graph = coo_matrix((np.ones(len(edge_a)), (edge_a, Ea + edge_b)), shape=(Ea + Eb, Ea + Eb))
    n_comp, comp = connected_components(graph, directed=False)
    ca, cb = comp[:Ea], comp[Ea:]
    linked_b = np.bincount(edge_b, minlength=Eb) > 0
    nodes_a = np.bincount(ca, minlength=n_comp)
    nodes_b = np.bincount(cb[linked_b], minlength=n_comp)
    edges = np.bincount(comp[edge_a], minlength=n_comp)
    sum_b = np.bincount(cb[linked_b], weights=n2[linked_b], minlength=n_comp).astype(np.int64)
    G2 = np.where(linked_b, sum_b[cb], 0)
    if np.array_equal(edges, nodes_a * nodes_b):  # every component complete bipartite (Lemma 4.1)
        return G1, G2
    adj = coo_matrix((np.ones(len(edge_a)), (edge_a, edge_b)), shape=(Ea, Eb)).tocsr()
    adj.data[:] = 1.0
    two_hop = (adj.T @ adj).tocsr()
    two_hop.data[:] = 1.0
    return G1, np.asarray(two_hop @ n2.astype(float)).astype(np.int64)
