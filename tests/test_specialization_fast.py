"""The incremental top-down specialization (``cdpbench_bcf.specialization.CutState``, issue #28)
against its literal form (``LiteralCutState`` below: the module as it was before, recomputing every
Score, scanning every record for ``Link[w]`` and concatenating class arrays at each step).

On small random releases (1..300 records, 1-4 QIs mixing random categorical taxonomies, with levels
that do not split a node, and numeric columns with repeated values) and random validity tests
(k-anonymity with a random k; a rejection drawn from a generator seeded by the specialization it
judges; the two together; a test that also reads the classes and the publication the specialization
would give), both forms must take the same steps: the same ``(attribute, node)`` in the same order,
the same records, new classes and removed classes offered to the test, the same accepted/dropped
outcome, and publish the same table. Lockstep runs also compare the candidate list and every
candidate's Score at every step, and ``tds``/``bcf`` publish the same with either form.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from cdpbench.data import History, Publication, Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_bcf.anonymizers import bcf as bcf_module
from cdpbench_bcf.anonymizers import tds as tds_module
from cdpbench_bcf.anonymizers.bcf import BCFAnonymizer
from cdpbench_bcf.anonymizers.tds import TopDownSpecialization
from cdpbench_bcf.classes import Classes
from cdpbench_bcf.params import BCFAnonymizerParams
from cdpbench_bcf import specialization
from cdpbench_bcf.specialization import CutState

N_CASES = 80


# ---------------------------------------------------------------------------- the literal form
@dataclass
class LiteralSplit:
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


class LiteralCutState:
    """The literal form (cdpbench-bcf's CutState before issue #28): every step recomputes every
    candidate's Score over the live classes, finds ``Link[w]`` by scanning every record and grows the
    class arrays by concatenation."""

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
    def split(self, a: int, node: int) -> LiteralSplit:
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
        return LiteralSplit(a, node, rows, child, removed, segment.astype(np.int64), nodes)

    def apply(self, s: LiteralSplit) -> None:
        G = len(self.alive)
        self.cur[s.rows, s.attr] = s.child
        self.klass[s.rows] = G + s.segment
        self.alive[s.removed] = False
        self.class_nodes = np.vstack([self.class_nodes, s.nodes])
        self.alive = np.concatenate([self.alive, np.ones(s.n_new, bool)])
        self.size = np.concatenate([self.size, np.bincount(s.segment, minlength=s.n_new)])

    def drop(self, a: int, node: int) -> None:
        self.dropped.add((a, node))

    def run(self, valid: Callable[[LiteralSplit], bool]) -> int:
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

    def live_classes(self, s: LiteralSplit | None = None) -> tuple[np.ndarray, np.ndarray]:
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

    def classes(self, s: LiteralSplit | None = None) -> Classes:
        group, nodes = self.live_classes(s)
        low, high = self.boxes(nodes)
        return Classes.build(low, high, {}, group, self.release.sensitive, self.release.n_values)

    def publication(self, info: dict | None = None, split: LiteralSplit | None = None) -> Publication:
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


# ---------------------------------------------------------------------------- random instances
def random_taxonomy(rng: np.random.Generator, j: int) -> Taxonomy:
    """Paths of a random tree of height 1..3: each node has 1..4 children (one child: a level that
    does not split the node)."""
    height = int(rng.integers(1, 4))
    paths: list[list[str]] = []

    def grow(prefix: list[str], level: int) -> None:
        if level == 0:
            paths.append([f"q{j}_{'_'.join(prefix)}", *reversed([f"q{j}_n{'_'.join(prefix[:i])}" for i in range(1, len(prefix))]), "*"])
            return
        for c in range(int(rng.integers(1, 5))):
            grow(prefix + [str(c)], level - 1)

    grow(["r"], height)
    return Taxonomy.from_paths(paths)


def random_release(seed: int) -> Release:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 301))
    d = int(rng.integers(1, 5))
    qis, cols = [], []
    for j in range(d):
        if rng.random() < 0.5:
            tax = random_taxonomy(rng, j)
            qis.append(CategoricalQI(f"q{j}", tax))
            p = rng.dirichlet(np.full(tax.size, 0.7))
            cols.append(rng.choice(tax.size, size=n, p=p).astype(float))
        else:  # numeric with repeats (few distinct values) or mostly distinct
            span = int(rng.choice([3, 10, 1000]))
            qis.append(NumericQI(f"x{j}", 0, span))
            cols.append(rng.integers(0, span + 1, size=n).astype(float))
    m = int(rng.integers(2, 5))
    schema = Schema(tuple(qis), Sensitive("s", tuple(f"s{v}" for v in range(m))), respondent="id", time="time")
    return Release(1, schema, np.arange(n, dtype=np.int64), np.stack(cols, axis=1), rng.integers(0, m, n).astype(np.int64),
                   np.ones(n, dtype=np.int64))


@dataclass
class Step:
    """What a validity test was asked, and what it answered."""

    attr: int
    node: int
    lo: int
    hi: int
    rows: list
    child: list
    removed: list
    segment: list
    nodes: list
    group: list | None  # the classes the specialization would give (when the test reads them)
    accepted: bool


def validity(kind: str, seed: int, k: int, state, log: list[Step]) -> Callable:
    """A validity test of kind ``k`` (k-anonymity), ``reject`` (random, seeded by the split),
    ``both``, or ``classes`` (k-anonymity after reading the would-be classes and publication);
    every question and answer is appended to ``log``."""

    def valid(s) -> bool:
        lo, hi = state.node_lo[s.attr][s.node], state.node_hi[s.attr][s.node]
        ok = True
        if kind in ("k", "both", "classes"):
            ok = bool(np.bincount(s.segment, minlength=s.n_new).min() >= k)
        if kind in ("reject", "both"):
            tag = zlib.crc32(np.array([seed, s.attr, lo, hi, len(s.rows), int(s.segment.sum())], dtype=np.int64).tobytes())
            ok = ok and bool(np.random.default_rng(tag).random() < 0.7)
        group = None
        if kind == "classes":
            cl = state.classes(s)
            pub = state.publication(split=s)
            assert np.array_equal(cl.size, np.bincount(pub.group, minlength=len(pub.low)))
            group = pub.group.tolist() + pub.low.ravel().tolist() + pub.high.ravel().tolist()
        log.append(Step(s.attr, s.node, lo, hi, s.rows.tolist(), s.child.tolist(), s.removed.tolist(), s.segment.tolist(),
                        s.nodes.tolist(), group, ok))
        return ok

    return valid


def same_publication(a: Publication, b: Publication) -> None:
    assert np.array_equal(a.group, b.group)
    assert np.array_equal(a.low, b.low) and np.array_equal(a.high, b.high)
    assert a.value_sets.keys() == b.value_sets.keys()
    for j in a.value_sets:
        assert np.array_equal(a.value_sets[j], b.value_sets[j])
    assert a.info == b.info


KINDS = ("k", "reject", "both", "classes")


@pytest.fixture(params=["tables", "mixed", "sorts"])
def counting(request, monkeypatch):
    """The fast form counts keys with tables when they are small and sorts them otherwise; on
    these small releases tables win unless the threshold is lowered: ``mixed`` takes each path
    depending on the node and the classes so far, ``sorts`` the sort paths only."""
    per_value, slack = {"tables": (4, 1024), "mixed": (2, 0), "sorts": (0, 0)}[request.param]
    monkeypatch.setattr(specialization, "DENSE_PER_VALUE", per_value)
    monkeypatch.setattr(specialization, "DENSE_SLACK", slack)
    return request.param


@pytest.mark.parametrize("seed", range(N_CASES))
def test_fast_takes_the_literal_steps(seed, counting):
    rel = random_release(seed)
    rng = np.random.default_rng(10_000 + seed)
    kind = KINDS[seed % len(KINDS)]
    k = int(rng.integers(1, 12))
    runs = []
    for form in (LiteralCutState, CutState):
        state = form(rel)
        log: list[Step] = []
        steps = state.run(validity(kind, seed, k, state, log))
        runs.append((steps, log, state.publication({"steps": steps})))
    (steps_lit, log_lit, pub_lit), (steps_fast, log_fast, pub_fast) = runs
    where = f"seed={seed} n={len(rel)} d={rel.qi.shape[1]} kind={kind} k={k}"
    assert [(s.attr, s.node, s.lo, s.hi, s.accepted) for s in log_fast] == [(s.attr, s.node, s.lo, s.hi, s.accepted) for s in log_lit], where
    assert log_fast == log_lit, where
    assert steps_fast == steps_lit, where
    same_publication(pub_fast, pub_lit)


@pytest.mark.parametrize("seed", range(0, 200, 5))
def test_candidates_and_scores_agree_at_every_step(seed, counting):
    """Lockstep: before every step the same candidates in the same order with the same Scores."""
    rel = random_release(seed)
    rng = np.random.default_rng(20_000 + seed)
    k = int(rng.integers(1, 6))
    lit, fast = LiteralCutState(rel), CutState(rel)
    while True:
        cands = lit.candidates()
        assert fast.candidates() == cands, seed
        if not cands:
            break
        score = lit.scores(cands)
        assert np.array_equal(fast.scores(cands), score.astype(np.int64)), seed
        assert fast.best() == cands[int(np.argmax(score))], seed
        a, node = cands[int(np.argmax(score))]
        s_lit, s_fast = lit.split(a, node), fast.split(a, node)
        ok = bool(np.bincount(s_lit.segment, minlength=s_lit.n_new).min() >= k) and rng.random() < 0.8
        if ok:
            lit.apply(s_lit)
            fast.apply(s_fast)
        else:
            lit.drop(a, node)
            fast.drop(a, node)
    assert np.array_equal(fast.size[fast.alive], lit.size[lit.alive])


def test_empty_release():
    rel = random_release(3)
    empty = Release(1, rel.schema, rel.respondent[:0], rel.qi[:0], rel.sensitive[:0], rel.time[:0])
    pubs = []
    for form in (LiteralCutState, CutState):
        state = form(empty)
        assert state.run(lambda s: True) == 0 and state.candidates() == []
        pubs.append(state.publication())
    same_publication(*pubs)


def publish_ctx(model, rel: Release, history: History) -> PublishContext:
    return PublishContext(model, ModelContext(rel.schema, rel.sensitive_distribution(), history, rel), history, np.random.default_rng(0))


@pytest.mark.parametrize("seed", range(20))
def test_tds_and_bcf_publish_the_same_with_either_form(seed, monkeypatch):
    """``tds`` (k-anonymity) on release 1, then ``bcf`` on release 2 = release 1 plus new records."""
    rel1 = random_release(seed)
    rng = np.random.default_rng(30_000 + seed)
    n1 = len(rel1)
    extra = int(rng.integers(0, 60))
    pick = rng.integers(0, n1, extra)
    rel2 = Release(2, rel1.schema, np.arange(n1 + extra, dtype=np.int64), np.concatenate([rel1.qi, rel1.qi[pick]]),
                   np.concatenate([rel1.sensitive, rng.integers(0, rel1.schema.sensitive.size, extra)]),
                   np.concatenate([rel1.time, np.full(extra, 2, dtype=np.int64)]))
    k = int(rng.integers(1, 8))
    model = default_registry().create("privacy_model", "k_anonymity", {"k": k})
    out = []
    for form in (LiteralCutState, CutState):
        monkeypatch.setattr(tds_module, "CutState", form)
        monkeypatch.setattr(bcf_module, "CutState", form)
        r1 = TopDownSpecialization().publish(rel1, publish_ctx(model, rel1, History()))
        r2 = BCFAnonymizer(BCFAnonymizerParams(k=k)).publish(rel2, publish_ctx(model, rel2, History([rel1], [r1])))
        out.append((r1, r2))
    same_publication(out[0][0], out[1][0])
    same_publication(out[0][1], out[1][1])


@pytest.mark.parametrize("seed", range(30))
def test_classes_build_counts_as_unique(seed):
    """``Classes.build`` counts (class, value) pairs by a table when it is small: the same groups
    and counts as sorting them (``np.unique``), also when classes are far more than records."""
    rng = np.random.default_rng(40_000 + seed)
    n, V = int(rng.integers(0, 200)), int(rng.integers(1, 6))
    G = int(rng.integers(1, 8)) if seed % 2 else int(rng.integers(1, 3000))
    klass, value = rng.integers(0, G, n), rng.integers(0, V, n)
    box = np.zeros((G, 1))
    cl = Classes.build(box, box, {}, klass, value, V)
    uniq, count = np.unique(klass * V + value, return_counts=True)
    assert np.array_equal(cl.entry_class, uniq // V) and np.array_equal(cl.entry_value, uniq % V)
    assert np.array_equal(cl.entry_count, count) and cl.entry_count.dtype == np.int64
