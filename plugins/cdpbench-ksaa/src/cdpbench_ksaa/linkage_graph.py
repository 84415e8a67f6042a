"""The linkage graph between two releases (KSAA §1, after Shmueli & Tassa's full matching join).

Nodes are the published records of two views. Two records of different views are linked when
their groups' generalized QIs are consistent on every attribute both releases publish (a numeric
interval or a categorical value set share a value: :func:`cdpbench.regions.overlapping_pairs`) and
their sensitive values are compatible: equal when values are assumed not to change
(``transitions="none"``), any pair (``"any"``), or a change the adversary's PD_cor knowledge
allows over the releases between the two views (a :class:`.transition_relation.TransitionRelation`
of kind ``"knowledge"``: every pair, then the pairs of values it rules out removed). An assignment of the records of one
release to those of the other is a perfect matching of this graph; the *pruned* graph keeps only
the edges that lie on some maximum matching (= some perfect matching whenever one exists), the
links an adversary cannot rule out.

Records of one group with one value are indistinguishable, and so are groups with the same
generalized QI on the shared attributes: the graph is kept on *twin* nodes ``(twin group, value)``
with their numbers of records, an edge joining every record of one to every record of the other
(when the shared attributes are coarse — sex and race — thousands of groups are a handful of
twins). Twins have the same neighbours, so an edge between two records lies on some maximum
matching exactly when the edge between their twin nodes does. Maximum matchings of the record graph are the integral maximum flows of
the network source -> a-node (capacity = its records) -> b-node (capacity = min of the two) ->
sink (capacity = its records), and an edge carries records in some maximum flow iff it carries
some in the one found or its two ends lie in one strongly connected component of the residual
graph (a cycle of the residual graph through the edge; the flow version of the Dulmage–Mendelsohn
decomposition). One maximum flow (``scipy.sparse.csgraph.maximum_flow``) and one strongly
connected components pass (``connected_components``), both scipy's: no hand-written matching.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from cdpbench.data import PublicView
from cdpbench.errors import require
from cdpbench.regions import overlapping_pairs, view_regions

from .distinct_rows import distinct_rows
from .transition_relation import TRANSITIONS, as_relation, steps_between


def segments(start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expand segments: for segment ``i`` (``count[i]`` items from ``start[i]``), ``(rep, index)``
    with one entry per item: its segment and ``start[i] + offset``."""
    count = np.asarray(count, dtype=np.int64)
    rep = np.repeat(np.arange(len(count)), count)
    offset = np.arange(len(rep)) - (np.cumsum(count) - count)[rep]
    return rep, (np.asarray(start, dtype=np.int64)[rep] + offset).astype(np.int64)


@dataclass(frozen=True)
class Nodes:
    """The records of one view collapsed to ``(group, value)`` nodes, sorted by group then value."""

    group: np.ndarray  # int64 [N]
    value: np.ndarray  # int64 [N]
    count: np.ndarray  # int64 [N]
    n_groups: int

    @property
    def ptr(self) -> np.ndarray:
        """CSR pointer: the nodes of group ``g`` are ``ptr[g]:ptr[g + 1]``."""
        return np.searchsorted(self.group, np.arange(self.n_groups + 1)).astype(np.int64)

    @classmethod
    def of(cls, view: PublicView) -> "Nodes":
        view.require_single_partition("KSAA's linkage graph (its nodes are a QI group's values)")
        m = view.schema.sensitive.size
        return cls.of_pairs(np.asarray(view.group, np.int64), np.asarray(view.sensitive, np.int64), view.n_groups, m)

    @classmethod
    def of_pairs(cls, group: np.ndarray, value: np.ndarray, n_groups: int, m: int) -> "Nodes":
        """The ``(group, value)`` nodes of records given by their group and value (any order).
        When the key range ``n_groups * m`` is no larger than the records (plus a constant), the
        records are counted in one ``bincount`` over it (linear, no sort): its nonzero keys, in
        increasing order, are exactly ``np.unique``'s keys and its counts ``np.unique``'s counts."""
        key = group * m  # int64, a new array
        key += value
        size = int(n_groups) * int(m)
        if len(key) and size <= 2 * len(key) + (1 << 16) and int(key.min()) >= 0 and int(key.max()) < size:
            counts = np.bincount(key, minlength=size)
            uniq = np.flatnonzero(counts)
            count = counts[uniq]
        else:
            uniq, count = np.unique(key, return_counts=True)
        uniq = uniq.astype(np.int64, copy=False)
        return cls(uniq // m, uniq % m, count.astype(np.int64), n_groups)


@dataclass
class LinkageGraph:
    """The linkage graph of two views, kept on *twin classes*: records whose groups have the same
    generalized QI on the shared attributes and the same value have the same neighbours, so the
    graph is built between ``(twin group, value)`` nodes (``twins_a`` / ``twins_b``, their
    records summed) and every record-level statement is read off it. ``twin_a[x]`` is the twin
    node of node ``x`` of ``a`` (``Nodes.of`` the view); ``cedge_a``, ``cedge_b``, ``ckept`` the
    edges between twin nodes and whether each lies on some maximum matching (all True before
    :func:`prune`). ``edge_a``, ``edge_b``, ``kept`` expand them to the ``(group, value)`` nodes.
    """

    a: Nodes
    b: Nodes
    twin_a: np.ndarray
    twin_b: np.ndarray
    twins_a: Nodes
    twins_b: Nodes
    cedge_a: np.ndarray
    cedge_b: np.ndarray
    ckept: np.ndarray
    transitions: str = "none"
    matched: int = -1  # records matched by a maximum matching (-1: not computed)

    @property
    def perfect(self) -> bool:
        return self.matched == int(self.a.count.sum()) == int(self.b.count.sum())

    @cached_property
    def _expanded(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (node of a, node of b) pair under a twin edge, with its twin edge's ``ckept``."""
        oa, ob = np.argsort(self.twin_a, kind="stable"), np.argsort(self.twin_b, kind="stable")
        pa = np.searchsorted(self.twin_a[oa], np.arange(len(self.twins_a.count) + 1))
        pb = np.searchsorted(self.twin_b[ob], np.arange(len(self.twins_b.count) + 1))
        na = pa[self.cedge_a + 1] - pa[self.cedge_a]
        nb = pb[self.cedge_b + 1] - pb[self.cedge_b]
        rep, within = segments(np.zeros(len(na), np.int64), na * nb)
        ea = oa[pa[self.cedge_a][rep] + within // np.maximum(nb[rep], 1)]
        eb = ob[pb[self.cedge_b][rep] + within % np.maximum(nb[rep], 1)]
        return ea.astype(np.int64), eb.astype(np.int64), self.ckept[rep]

    @property
    def edge_a(self) -> np.ndarray:
        return self._expanded[0]

    @property
    def edge_b(self) -> np.ndarray:
        return self._expanded[1]

    @property
    def kept(self) -> np.ndarray:
        return self._expanded[2]


def shared_columns(view_a: PublicView, view_b: PublicView) -> list[tuple[int, int, bool]]:
    """``(column in a, column in b, categorical)`` for every QI attribute both views publish."""
    names_b = {q.name: j for j, q in enumerate(view_b.schema.qi)}
    out = []
    for ja, q in enumerate(view_a.schema.qi):
        if q.name in names_b:
            out.append((ja, names_b[q.name], q.kind == "categorical"))
    return out


def _twin_groups(regions, cols: list[tuple[int, bool]]):
    """``(twin class of every group, regions of one representative group per class)``: groups
    with the same box and value sets on ``cols`` are twins."""
    from cdpbench.regions import Regions

    G = len(regions)
    parts = [np.zeros((G, 0))]
    for j, cat in cols:
        parts.append(np.stack([regions.low[:, j], regions.high[:, j]], axis=1))
        if cat:
            parts.append(regions.sets[j].astype(float))
    key = np.concatenate(parts, axis=1)
    if key.shape[1] == 0:
        twin, rep = np.zeros(G, np.int64), np.zeros(min(G, 1), np.int64)
    else:
        _, rep, twin = distinct_rows(key)  # np.unique(key, axis=0, ...), its rows ranked per column
    twin = np.asarray(twin, np.int64).ravel()
    rep = np.asarray(rep, np.int64)
    sets = {j: regions.sets[j][rep] for j in regions.sets}
    return twin, Regions(regions.low[rep], regions.high[rep], sets, np.arange(len(rep), dtype=np.int64))


def _twin_nodes(nodes: Nodes, twin_group: np.ndarray, n_twins: int, m: int) -> tuple[Nodes, np.ndarray]:
    key = twin_group[nodes.group] * m + nodes.value
    uniq, inv = np.unique(key, return_inverse=True)
    count = np.bincount(inv, weights=nodes.count, minlength=len(uniq)).astype(np.int64)
    return Nodes(uniq // m, uniq % m, count, n_twins), inv.astype(np.int64)


@dataclass(frozen=True)
class Side:
    """One view prepared for joining on the columns ``cols`` (``(column, categorical)``): its
    nodes, their twin nodes and one region per twin group. A view that does not change (an
    earlier release) is prepared once and joined with every new candidate of the latest one."""

    view: PublicView
    cols: tuple[tuple[int, bool], ...]
    nodes: Nodes
    twin: np.ndarray  # int64 [N] twin node of each node
    twins: Nodes
    regions: object  # cdpbench.regions.Regions, one per twin group

    @classmethod
    def of(cls, view: PublicView, cols, nodes: Nodes | None = None) -> "Side":
        """``nodes``: ``Nodes.of(view)`` when already counted."""
        cols = tuple((int(j), bool(cat)) for j, cat in cols)
        nodes = Nodes.of(view) if nodes is None else nodes
        twin_group, regions = _twin_groups(view_regions(view), list(cols))
        twins, twin = _twin_nodes(nodes, twin_group, len(regions), int(view.schema.sensitive.size))
        return cls(view, cols, nodes, twin, twins, regions)


def linkage_graph(view_a: PublicView, view_b: PublicView, transitions="none", *, side_a: Side | None = None,
                  nodes_b: Nodes | None = None) -> LinkageGraph:
    """The (unpruned) linkage graph of two views; see the module docstring. ``transitions``:
    ``"none"``, ``"any"`` or a :class:`.transition_relation.TransitionRelation`. ``side_a`` may pass
    ``view_a`` already prepared (:class:`Side`; used when it was prepared on the same columns),
    ``nodes_b`` ``Nodes.of(view_b)`` already counted (the latest view joined with several earlier ones)."""
    relation = as_relation(transitions)
    shared = shared_columns(view_a, view_b)
    m = max(view_a.schema.sensitive.size, view_b.schema.sensitive.size)
    cols_a = tuple((ja, cat) for ja, _, cat in shared)
    if side_a is None or side_a.view is not view_a or side_a.cols != cols_a:
        side_a = Side.of(view_a, cols_a)
    sb = Side.of(view_b, [(jb, cat) for _, jb, cat in shared], nodes_b)
    a, b, ta, tb, twin_a, twin_b = side_a.nodes, sb.nodes, side_a.twins, sb.twins, side_a.twin, sb.twin
    ga, gb = overlapping_pairs(side_a.regions, sb.regions, shared)
    pa, pb = ta.ptr, tb.ptr
    if relation.kind == "none":  # expand each group pair over a's nodes, look b's node up by (group, value)
        rep, ea = segments(pa[ga], pa[ga + 1] - pa[ga])
        key_b = tb.group * m + tb.value
        want = gb[rep] * m + ta.value[ea]
        pos = np.minimum(np.searchsorted(key_b, want), max(len(key_b) - 1, 0))
        hit = key_b[pos] == want if len(key_b) else np.zeros(len(want), bool)
        edge_a, edge_b = ea[hit], pos[hit].astype(np.int64)
    else:  # every node of ga with every node of gb
        na, nb = pa[ga + 1] - pa[ga], pb[gb + 1] - pb[gb]
        rep, within = segments(np.zeros(len(ga), np.int64), na * nb)
        edge_a = (pa[ga][rep] + within // nb[rep]).astype(np.int64)
        edge_b = (pb[gb][rep] + within % nb[rep]).astype(np.int64)
        if relation.kind == "knowledge":  # PD_cor: the changes the knowledge rules out removed
            keep = relation.allowed(steps_between(view_a, view_b), m)[ta.value[edge_a], tb.value[edge_b]]
            edge_a, edge_b = edge_a[keep], edge_b[keep]
    return LinkageGraph(a, b, twin_a, twin_b, ta, tb, edge_a, edge_b, np.ones(len(edge_a), dtype=bool), relation.kind)


def prune(graph: LinkageGraph) -> LinkageGraph:
    """Keep the edges on some maximum matching of the record graph (module docstring)."""
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.csgraph import connected_components, maximum_flow

    a, b = graph.twins_a, graph.twins_b
    ea_, eb_ = graph.cedge_a, graph.cedge_b
    Na, Nb, E = len(a.count), len(b.count), len(ea_)
    s, t = 0, Na + Nb + 1
    an = 1 + np.arange(Na)
    bn = 1 + Na + np.arange(Nb)
    tail = np.concatenate([np.full(Na, s), an[ea_], bn])
    head = np.concatenate([an, bn[eb_], np.full(Nb, t)])
    cap = np.concatenate([a.count, np.minimum(a.count[ea_], b.count[eb_]), b.count]).astype(np.int32)
    n = Na + Nb + 2
    net = csr_matrix((cap, (tail, head)), shape=(n, n))
    result = maximum_flow(net, s, t)
    flow_m = result.flow.tocsr() if hasattr(result, "flow") else result.residual.tocsr()
    flow = np.asarray(flow_m[tail, head]).ravel().astype(np.int64)
    fwd = flow < cap
    back = flow > 0
    res = coo_matrix(
        (np.ones(int(fwd.sum() + back.sum())), (np.concatenate([tail[fwd], head[back]]), np.concatenate([head[fwd], tail[back]]))),
        shape=(n, n),
    )
    _, comp = connected_components(res, directed=True, connection="strong")
    mid = slice(Na, Na + E)
    on_some = (flow[mid] > 0) | (comp[an[ea_]] == comp[bn[eb_]])
    return replace(graph, ckept=on_some, matched=int(result.flow_value))
