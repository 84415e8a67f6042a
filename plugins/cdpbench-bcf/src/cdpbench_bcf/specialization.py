"""Top-down specialization under global recoding (TDS, Fung, Wang & Yu ICDE 2005, as used by BCF
§5.2), shared by the ``tds`` and ``bcf`` anonymizers.

Every QI attribute starts at the root of its taxonomy (ANY_j). A *candidate* is a value ``w`` of
the current cut of some attribute that has children and has not been dropped. Each step takes the
candidate with the highest ``Score(w) = Σ_{qid ∋ w} |qid|²`` (the discernibility penalty its
records pay, §5.2), asks the anonymizer's validity test about the classes the specialization would
create, and either replaces ``w`` by its children in every record holding it (``Link[w]``: the
records of every node of the cut are kept, so a step touches only ``w``'s) or drops ``w`` for good
(Theorem 5.1). The loop ends when no candidate is left. Every candidate's Score is current at each
step (Algorithm 1 line 7 refreshes only the new children's; the specializations' order is the
"highest Score first" of the text either way only if the others' scores do not change, which they
do when their classes are split): it is kept incrementally, exact in int64, by subtracting the
classes a step removes and adding those it creates, which gives the same steps as recomputing every
Score (``tests/test_specialization_fast.py`` checks it against that literal form). Ties go to the
first attribute in QI order, then the lowest leaf code.

Children with no record are not added to the cut: they publish nothing and change nothing.
A node with a single child (a taxonomy level that does not split it) is skipped over: its child
covers the same leaves. A numeric QI has no taxonomy: its values start as one interval, and an
interval is specialized into two at the median of the values its records hold (global recoding:
the same split for every record in it; TDS, Fung et al. ICDE 2005 §4, splits continuous
attributes dynamically too, at the point of highest information gain, which the lab's Score does
not define).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cdpbench.data import Publication, Release

from .classes import Classes


@dataclass
class Split:
    """What specializing ``w`` (a node of attribute ``attr``) would do: the records ``rows`` of the
    classes ``removed`` move into new classes (``segment`` per record, ``nodes`` per new class)."""

    attr: int
    node: int
    rows: np.ndarray  # the records holding ``w``, ascending
    removed: np.ndarray  # class ids that disappear, ascending
    segment: np.ndarray  # new class (0..n_new-1) per row
    nodes: np.ndarray  # [n_new, d] node ids of the new classes
    index: np.ndarray  # position (0..C-1) of each row's child among ``w``'s children
    child_ids: np.ndarray  # [C] node id of each child

    @property
    def n_new(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def child(self) -> np.ndarray:
        """Child node id per row."""
        return self.child_ids[self.index]


def _grown(arr: np.ndarray, need: int) -> np.ndarray:
    """``arr`` with room for at least ``need`` entries along axis 0 (capacity doubled)."""
    if need <= arr.shape[0]:
        return arr
    out = np.zeros((max(need, 2 * arr.shape[0], 16), *arr.shape[1:]), dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


# a table of ``bound`` entries replaces a sort of ``count`` values when bound <= DENSE_PER_VALUE * count + DENSE_SLACK
DENSE_PER_VALUE, DENSE_SLACK = 4, 1024


def _dense(bound: int, count: int) -> bool:
    return bound <= DENSE_PER_VALUE * count + DENSE_SLACK


def _sorted_unique(values: np.ndarray, bound: int) -> np.ndarray:
    """``np.unique(values)`` for non-negative ints below ``bound``: a presence table when it is not
    much larger than ``values`` (linear), a sort otherwise."""
    if _dense(bound, len(values)):
        return np.flatnonzero(np.bincount(values, minlength=bound))
    return np.unique(values)


def _ranked(key: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for non-negative ints below ``bound`` (the same
    distinct keys ascending and the same inverse), by counting when ``bound`` is small."""
    if _dense(bound, len(key)):
        present = np.bincount(key, minlength=bound) > 0
        rank = np.cumsum(present, dtype=np.int64) - 1
        return np.flatnonzero(present), rank[key]
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq, inverse.reshape(-1).astype(np.int64)


class CutState:
    """The current cut of every attribute and the classes of ``release`` it induces.

    Kept incrementally so that a step costs what the specialized node's records cost, not the
    release's (issue #28; the same steps, in the same order, as recomputing everything each step,
    which ``tests/test_specialization_fast.py`` checks against that literal form):

    * ``members[a][w]``: the records holding node ``w`` of attribute ``a`` (ascending row ids);
      specializing ``w`` partitions them among its children (``Link[w]`` of Algorithm 1);
    * ``score[a][w] = Σ_{live qid ∋ w} |qid|²`` as exact int64, updated by the classes a step
      removes (subtracted at every attribute's node they hold) and creates (added);
    * ``open[a][w]``: ``w`` is in the cut, has children and is not dropped (a candidate);
    * the class arrays (nodes, alive, size) grow by doubling.
    """

    def __init__(self, release: Release):
        schema = release.schema
        self.release = release
        self.tax = [a.taxonomy if a.kind == "categorical" else None for a in schema.qi]
        n, d = release.qi.shape
        self.n, self.d = n, d
        self.leaf: dict[int, np.ndarray] = {}  # column -> leaf code (categorical) or value rank (numeric) per record
        self.grid: dict[int, np.ndarray] = {}  # numeric column -> its sorted distinct values
        self.node_lo: list[list[int]] = []
        self.node_hi: list[list[int]] = []
        self.node_id: list[dict[tuple[int, int], int]] = []
        for a, t in enumerate(self.tax):
            if t is None:
                self.grid[a], inverse = np.unique(release.qi[:, a], return_inverse=True)
                self.leaf[a] = inverse.reshape(-1).astype(np.int64)
                top = max(len(self.grid[a]) - 1, 0)
            else:  # leaf codes are read when the attribute is first specialized
                top = t.size - 1
            self.node_lo.append([0])
            self.node_hi.append([top])
            self.node_id.append({(0, top): 0})
        self.klass = np.zeros(n, dtype=np.int64)
        G = 1 if n else 0
        self.n_classes = G  # classes created so far (live or not)
        self._class_nodes = np.zeros((max(G, 16), d), dtype=np.int64)
        self._alive = np.zeros(max(G, 16), dtype=bool)
        self._alive[:G] = True
        self._size = np.zeros(max(G, 16), dtype=np.int64)
        self._size[:G] = n
        self.dropped: set[tuple[int, int]] = set()
        everyone = np.arange(n, dtype=np.int64)
        self.members: list[dict[int, np.ndarray]] = [{0: everyone} if n else {} for _ in range(d)]
        self.score = [np.zeros(16, dtype=np.int64) for _ in range(d)]
        self.open = [np.zeros(16, dtype=bool) for _ in range(d)]
        self.lo_of = [np.zeros(16, dtype=np.int64) for _ in range(d)]  # node_lo as an array
        self.heap: list[tuple[int, int, int, int]] = []  # (-Score, attribute, lowest leaf, node), some stale
        for a in range(d):
            self.score[a][0] = n * n
            self.open[a][0] = bool(n) and self.node_lo[a][0] < self.node_hi[a][0]
            if self.open[a][0]:
                self.heap.append((-n * n, a, 0, 0))
        heapq.heapify(self.heap)

    @property
    def class_nodes(self) -> np.ndarray:
        """``[classes created, d]`` node id of every class and attribute."""
        return self._class_nodes[: self.n_classes]

    @property
    def alive(self) -> np.ndarray:
        return self._alive[: self.n_classes]

    @property
    def size(self) -> np.ndarray:
        return self._size[: self.n_classes]

    # ------------------------------------------------------------------ taxonomy
    def _node(self, a: int, lo: int, hi: int) -> int:
        ids = self.node_id[a]
        if (lo, hi) not in ids:
            node = len(self.node_lo[a])
            ids[(lo, hi)] = node
            self.node_lo[a].append(lo)
            self.node_hi[a].append(hi)
            self.score[a] = _grown(self.score[a], node + 1)
            self.open[a] = _grown(self.open[a], node + 1)
            self.lo_of[a] = _grown(self.lo_of[a], node + 1)
            self.lo_of[a][node] = lo
        return ids[(lo, hi)]

    def _leaf(self, a: int) -> np.ndarray:
        if a not in self.leaf:
            self.leaf[a] = self.release.qi[:, a].astype(np.int64)
        return self.leaf[a]

    def _cuts(self, a: int, node: int, codes: np.ndarray) -> np.ndarray:
        """Leaf codes where the children of ``node`` start (first child excluded): the taxonomy's
        children (descending through single-child levels), or for a numeric column two intervals
        split at the median of the records' values ``codes`` (value ranks) in the node (the value
        at position ``len // 2`` of the sorted ranks, found by selection)."""
        lo, hi = self.node_lo[a][node], self.node_hi[a][node]
        if self.tax[a] is not None:
            return self.tax[a].children_cuts(lo, hi)
        mid = len(codes) // 2
        cut = int(np.partition(codes, mid)[mid])
        if cut <= lo:  # the lower half is one value: split just above it
            cut = int(codes[codes > lo].min())
        return np.array([cut], dtype=np.int64)

    def candidates(self) -> list[tuple[int, int]]:
        """Every candidate, in QI order, then by the lowest leaf of the node."""
        out = []
        for a in range(self.d):
            nodes = np.flatnonzero(self.open[a][: len(self.node_lo[a])])
            out += [(a, int(w)) for w in nodes[np.argsort(self.lo_of[a][nodes], kind="stable")]]
        return out

    def scores(self, cands: list[tuple[int, int]]) -> np.ndarray:
        """``Score(w) = Σ |qid|²`` over the live classes holding ``w`` (BCF §5.2), exact int64."""
        return np.array([self.score[a][node] for a, node in cands], dtype=np.int64)

    def best(self) -> tuple[int, int] | None:
        """The candidate of highest Score; ties go to the first attribute in QI order, then the
        lowest leaf code (the literal form's first maximum over :meth:`candidates`). A heap of
        ``(-Score, attribute, lowest leaf, node)``: every candidate has an entry with its current
        Score (pushed whenever it changes); entries of closed nodes or old Scores are let go here."""
        heap = self.heap
        while heap:
            neg, a, _, node = heap[0]
            if self.open[a][node] and self.score[a][node] == -neg:
                return a, node
            heapq.heappop(heap)
        return None

    # ------------------------------------------------------------------ steps
    def split(self, a: int, node: int) -> Split:
        rows = self.members[a][node]
        everyone = len(rows) == self.n  # rows is 0..n-1: read the columns as they are
        codes = self._leaf(a) if everyone else self._leaf(a)[rows]
        cuts = self._cuts(a, node, codes)
        lo, hi = self.node_lo[a][node], self.node_hi[a][node]
        bounds = np.concatenate(([lo], cuts, [hi + 1]))
        C = len(bounds) - 1
        # child position per record, in the narrowest integer type (apply's stable sort by it is a radix sort)
        if C == 2:  # a numeric interval's halves, or a taxonomy node with two children
            idx = (codes >= cuts[0]).view(np.uint8)
        else:  # a table over the node's leaf codes lo..hi (at most the taxonomy's size)
            small = np.uint8 if C <= 1 << 8 else np.uint16 if C <= 1 << 16 else np.int64
            table = np.searchsorted(cuts, np.arange(lo, hi + 1), side="right").astype(small)
            idx = table[codes - lo if lo else codes]
        child_ids = np.array([self._node(a, int(bounds[c]), int(bounds[c + 1] - 1)) for c in range(C)], dtype=np.int64)
        old = self.klass if everyone else self.klass[rows]
        if _dense(self.n_classes * C, len(old)):  # few classes so far: count (class, child) pairs directly
            key = old * C
            key += idx
            uniq, segment = _ranked(key, self.n_classes * C)
            held = uniq // C  # ascending
            removed = held[np.concatenate(([True], held[1:] != held[:-1]))]
            nodes = self.class_nodes[held]
            nodes[:, a] = child_ids[uniq % C]
            return Split(a, node, rows, removed, segment, nodes, idx, child_ids)
        if old[0] == old[-1] and (old == old[0]).all():  # one class holds w (often: one attribute, or w deep)
            removed = old[:1].copy()
        else:
            removed = _sorted_unique(old, self.n_classes)
        if len(removed) == 1:
            uniq, segment = _ranked(idx, C)
        else:  # key: (position of the record's class among ``removed``, child position)
            if _dense(self.n_classes, len(old)):
                local = np.zeros(self.n_classes, dtype=np.int64)
                local[removed] = np.arange(len(removed))
                local = local[old]
            else:
                local = np.searchsorted(removed, old)
            uniq, segment = _ranked(local * C + idx, len(removed) * C)
        nodes = self.class_nodes[removed[uniq // C]]
        nodes[:, a] = child_ids[uniq % C]
        return Split(a, node, rows, removed, segment, nodes, idx, child_ids)

    def _add_scores(self, nodes: np.ndarray, sizes: np.ndarray, sign: int) -> None:
        sq = sign * sizes * sizes
        for a in range(self.d):
            np.add.at(self.score[a], nodes[:, a], sq)

    def apply(self, s: Split) -> None:
        a, G, m = s.attr, self.n_classes, s.n_new
        sizes = np.bincount(s.segment, minlength=m).astype(np.int64)
        self._add_scores(self.class_nodes[s.removed], self.size[s.removed], -1)
        self._class_nodes = _grown(self._class_nodes, G + m)
        self._alive = _grown(self._alive, G + m)
        self._size = _grown(self._size, G + m)
        self._class_nodes[G : G + m] = s.nodes
        self._alive[s.removed] = False
        self._alive[G : G + m] = True
        self._size[G : G + m] = sizes
        self.n_classes = G + m
        if len(s.rows) == self.n:  # s.rows is 0..n-1
            np.add(s.segment, G, out=self.klass)
        else:
            self.klass[s.rows] = G + s.segment
        self._add_scores(s.nodes, sizes, +1)
        touched = np.concatenate([self.class_nodes[s.removed], s.nodes])
        # Link[w]: w's records go to its children (a stable partition keeps them ascending)
        idx, C = s.index, len(s.child_ids)
        order = np.argsort(idx, kind="stable")
        ends = np.cumsum(np.bincount(idx, minlength=C))
        moved = order if len(s.rows) == self.n else s.rows[order]
        members, first = self.members[a], 0
        del members[s.node]
        self.open[a][s.node] = False
        for c in range(C):
            if ends[c] > first:
                w = int(s.child_ids[c])
                members[w] = moved[first : ends[c]].copy()
                self.open[a][w] = self.node_lo[a][w] < self.node_hi[a][w] and (a, w) not in self.dropped
            first = int(ends[c])
        for b in range(self.d):  # every node whose Score changed gets an entry with its new Score
            for w in np.unique(touched[:, b]).tolist():
                if self.open[b][w]:
                    heapq.heappush(self.heap, (-int(self.score[b][w]), b, self.node_lo[b][w], w))

    def drop(self, a: int, node: int) -> None:
        self.dropped.add((a, node))
        self.open[a][node] = False

    def run(self, valid: Callable[[Split], bool]) -> int:
        """Specialize while a candidate is left (Algorithm 1); returns the number of steps taken."""
        steps = 0
        while True:
            pick = self.best()
            if pick is None:
                return steps
            s = self.split(*pick)
            if valid(s):
                self.apply(s)
                steps += 1
            else:
                self.drop(*pick)

    # ------------------------------------------------------------------ outputs
    def boxes(self, class_nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = class_nodes.shape[1]
        low = np.empty(class_nodes.shape, dtype=float)
        high = np.empty(class_nodes.shape, dtype=float)
        for a in range(d):
            low[:, a] = np.asarray(self.node_lo[a])[class_nodes[:, a]]
            high[:, a] = np.asarray(self.node_hi[a])[class_nodes[:, a]]
            if a in self.grid:  # value ranks back to values
                low[:, a] = self.grid[a][low[:, a].astype(np.int64)]
                high[:, a] = self.grid[a][high[:, a].astype(np.int64)]
        return low, high

    def live_classes(self, s: Split | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(group of every record, nodes [G, d])`` with live classes numbered 0..G-1 in the order
        of their node tuples, after applying ``s`` if given (without changing the state)."""
        nodes, alive = self.class_nodes, self.alive
        if s is not None:
            nodes = np.concatenate([nodes, s.nodes])
            alive = np.concatenate([alive, np.ones(s.n_new, bool)])
            alive[s.removed] = False
        live = np.flatnonzero(alive)
        order = live[np.lexsort(nodes[live].T[::-1])]
        renum = np.full(len(alive), -1, dtype=np.int64)
        renum[order] = np.arange(len(order))
        if s is not None and len(s.rows) == self.n:  # every record moves
            group = renum[self.n_classes + s.segment]
        else:
            group = renum[self.klass]
            if s is not None:
                group[s.rows] = renum[self.n_classes + s.segment]
        return group, nodes[order]

    def classes(self, s: Split | None = None) -> Classes:
        group, nodes = self.live_classes(s)
        low, high = self.boxes(nodes)
        return Classes.build(low, high, {}, group, self.release.sensitive, self.release.n_values)

    def publication(self, info: dict | None = None, split: Split | None = None) -> Publication:
        """The release published with the current cut (after ``split`` if given, without changing
        the state)."""
        rel = self.release
        group, nodes = self.live_classes(split)
        low, high = self.boxes(nodes)
        value_sets = {}
        for a, t in enumerate(self.tax):
            if t is None:
                continue
            leaves = np.arange(t.size)
            value_sets[a] = (leaves[None, :] >= low[:, a][:, None]) & (leaves[None, :] <= high[:, a][:, None])
        n = len(rel)
        return Publication(
            t=rel.t,
            schema=rel.schema,
            group=group,
            sensitive=rel.sensitive.copy(),
            respondent=rel.respondent.copy(),
            counterfeit=np.zeros(n, dtype=bool),
            row=np.arange(n, dtype=np.int64),
            low=low,
            high=high,
            value_sets=value_sets,
            suppressed=np.zeros(0, dtype=np.int64),
            time=None if rel.time is None else rel.time.copy(),
            info=dict(info or {}),
        )
