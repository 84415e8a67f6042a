"""Top-down specialization under global recoding (TDS, Fung, Wang & Yu ICDE 2005, as used by BCF
§5.2), shared by the ``tds`` and ``bcf`` anonymizers.

Every QI attribute starts at the root of its taxonomy (ANY_j). A *candidate* is a value ``w`` of
the current cut of some attribute that has children and has not been dropped. Each step takes the
candidate with the highest ``Score(w) = Σ_{qid ∋ w} |qid|²`` (the discernibility penalty its
records pay, §5.2), asks the anonymizer's validity test about the classes the specialization would
create, and either replaces ``w`` by its children in every record holding it (``Link[w]``: the
records are found with one vectorized comparison) or drops ``w`` for good (Theorem 5.1). The loop
ends when no candidate is left. Scores are recomputed for every candidate after each step
(Algorithm 1 line 7 refreshes only the new children's; the specializations' order is the "highest
Score first" of the text either way only if the others' scores do not change, which they do when
their classes are split). Ties go to the first attribute in QI order, then the lowest leaf code.

Children with no record are not added to the cut: they publish nothing and change nothing.
A node with a single child (a taxonomy level that does not split it) is skipped over: its child
covers the same leaves. A numeric QI has no taxonomy: its values start as one interval, and an
interval is specialized into two at the median of the values its records hold (global recoding:
the same split for every record in it; TDS, Fung et al. ICDE 2005 §4, splits continuous
attributes dynamically too, at the point of highest information gain, which the lab's Score does
not define).
"""

from __future__ import annotations

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
    rows: np.ndarray
    child: np.ndarray  # child node id per row
    removed: np.ndarray  # class ids that disappear
    segment: np.ndarray  # new class (0..n_new-1) per row
    nodes: np.ndarray  # [n_new, d] node ids of the new classes

    @property
    def n_new(self) -> int:
        return int(self.nodes.shape[0])


class CutState:
    """The current cut of every attribute and the classes of ``release`` it induces."""

    def __init__(self, release: Release):
        schema = release.schema
        self.release = release
        self.tax = [a.taxonomy if a.kind == "categorical" else None for a in schema.qi]
        n, d = release.qi.shape
        self.leaf = np.zeros((n, d), dtype=np.int64)  # leaf code (categorical) or value rank (numeric)
        self.grid: dict[int, np.ndarray] = {}  # numeric column -> its sorted distinct values
        self.node_lo: list[list[int]] = []
        self.node_hi: list[list[int]] = []
        self.node_id: list[dict[tuple[int, int], int]] = []
        for a, t in enumerate(self.tax):
            if t is None:
                self.grid[a], self.leaf[:, a] = np.unique(release.qi[:, a], return_inverse=True)
                top = max(len(self.grid[a]) - 1, 0)
            else:
                self.leaf[:, a] = release.qi[:, a].astype(np.int64)
                top = t.size - 1
            self.node_lo.append([0])
            self.node_hi.append([top])
            self.node_id.append({(0, top): 0})
        self.cur = np.zeros((n, d), dtype=np.int64)  # node id per record and attribute
        self.klass = np.zeros(n, dtype=np.int64)
        self.class_nodes = np.zeros((1 if n else 0, d), dtype=np.int64)
        self.alive = np.ones(1 if n else 0, dtype=bool)
        self.size = np.array([n] if n else [], dtype=np.int64)
        self.dropped: set[tuple[int, int]] = set()

    # ------------------------------------------------------------------ taxonomy
    def _node(self, a: int, lo: int, hi: int) -> int:
        ids = self.node_id[a]
        if (lo, hi) not in ids:
            ids[(lo, hi)] = len(self.node_lo[a])
            self.node_lo[a].append(lo)
            self.node_hi[a].append(hi)
        return ids[(lo, hi)]

    def _cuts(self, a: int, node: int, codes: np.ndarray) -> np.ndarray:
        """Leaf codes where the children of ``node`` start (first child excluded): the taxonomy's
        children (descending through single-child levels), or for a numeric column two intervals
        split at the median of the records' values ``codes`` (value ranks) in the node."""
        lo, hi = self.node_lo[a][node], self.node_hi[a][node]
        if self.tax[a] is not None:
            return self.tax[a].children_cuts(lo, hi)
        ranks = np.sort(codes)
        cut = int(ranks[len(ranks) // 2])
        if cut <= lo:  # the lower half is one value: split just above it
            cut = int(ranks[np.searchsorted(ranks, lo, side="right")])
        return np.array([cut], dtype=np.int64)

    def candidates(self) -> list[tuple[int, int]]:
        out = []
        for a in range(len(self.tax)):
            nodes = np.unique(self.class_nodes[self.alive, a])
            lo = np.asarray(self.node_lo[a])[nodes]
            for node in nodes[np.argsort(lo, kind="stable")]:
                node = int(node)
                if self.node_lo[a][node] < self.node_hi[a][node] and (a, node) not in self.dropped:
                    out.append((a, node))
        return out

    def scores(self, cands: list[tuple[int, int]]) -> np.ndarray:
        """``Score(w) = Σ |qid|²`` over the live classes holding ``w`` (BCF §5.2)."""
        sq = self.size[self.alive].astype(float) ** 2
        out = np.empty(len(cands))
        per_attr: dict[int, np.ndarray] = {}
        for c, (a, node) in enumerate(cands):
            if a not in per_attr:
                per_attr[a] = np.bincount(self.class_nodes[self.alive, a], weights=sq, minlength=len(self.node_lo[a]))
            out[c] = per_attr[a][node]
        return out

    # ------------------------------------------------------------------ steps
    def split(self, a: int, node: int) -> Split:
        rows = np.flatnonzero(self.cur[:, a] == node)
        cuts = self._cuts(a, node, self.leaf[rows, a])
        lo, hi = self.node_lo[a][node], self.node_hi[a][node]
        bounds = np.concatenate(([lo], cuts, [hi + 1]))
        idx = np.searchsorted(cuts, self.leaf[rows, a], side="right")
        child_ids = np.array([self._node(a, int(bounds[c]), int(bounds[c + 1] - 1)) for c in range(len(bounds) - 1)])
        child = child_ids[idx]
        old = self.klass[rows]
        key = old * len(child_ids) + idx
        uniq, segment = np.unique(key, return_inverse=True)
        nodes = self.class_nodes[uniq // len(child_ids)].copy()
        nodes[:, a] = child_ids[uniq % len(child_ids)]
        removed = np.unique(old)
        return Split(a, node, rows, child, removed, segment.astype(np.int64), nodes)

    def apply(self, s: Split) -> None:
        G = len(self.alive)
        self.cur[s.rows, s.attr] = s.child
        self.klass[s.rows] = G + s.segment
        self.alive[s.removed] = False
        self.class_nodes = np.vstack([self.class_nodes, s.nodes])
        self.alive = np.concatenate([self.alive, np.ones(s.n_new, bool)])
        self.size = np.concatenate([self.size, np.bincount(s.segment, minlength=s.n_new)])

    def drop(self, a: int, node: int) -> None:
        self.dropped.add((a, node))

    def run(self, valid: Callable[[Split], bool]) -> int:
        """Specialize while a candidate is left (Algorithm 1); returns the number of steps taken."""
        steps = 0
        while True:
            cands = self.candidates()
            if not cands:
                return steps
            score = self.scores(cands)
            best = int(np.argmax(score))  # first maximum: QI order, then lowest node id
            a, node = cands[best]
            s = self.split(a, node)
            if valid(s):
                self.apply(s)
                steps += 1
            else:
                self.drop(a, node)

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
        klass, nodes, alive = self.klass, self.class_nodes, self.alive
        if s is not None:
            G = len(alive)
            klass = klass.copy()
            klass[s.rows] = G + s.segment
            alive = alive.copy()
            alive[s.removed] = False
            nodes = np.vstack([nodes, s.nodes])
            alive = np.concatenate([alive, np.ones(s.n_new, bool)])
        live = np.flatnonzero(alive)
        order = live[np.lexsort(nodes[live].T[::-1])]
        renum = np.full(len(alive), -1, dtype=np.int64)
        renum[order] = np.arange(len(order))
        return renum[klass], nodes[order]

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
