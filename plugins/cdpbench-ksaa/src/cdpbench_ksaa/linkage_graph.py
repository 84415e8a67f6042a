"""The linkage graph between two releases (KSAA §1, after Shmueli & Tassa's full matching join).

Nodes are the published records of two views. Two records of different views are linked when
their groups' generalized QIs are consistent on every attribute both releases publish (a numeric
interval or a categorical value set share a value: :func:`cdpbench.regions.overlapping_pairs`) and
their sensitive values are compatible: equal when values are assumed not to change
(``transitions="none"``), any pair otherwise (``"any"``). An assignment of the records of one
release to those of the other is a perfect matching of this graph; the *pruned* graph keeps only
the edges that lie on some maximum matching (= some perfect matching whenever one exists), the
links an adversary cannot rule out.

Records of one group with one value are indistinguishable, so the graph is kept collapsed: a node
is ``(group, value)`` with its number of records, an edge joins two nodes (every record of one to
every record of the other). Maximum matchings of the record graph are the integral maximum flows of
the network source -> a-node (capacity = its records) -> b-node (capacity = min of the two) ->
sink (capacity = its records), and an edge carries records in some maximum flow iff it carries
some in the one found or its two ends lie in one strongly connected component of the residual
graph (a cycle of the residual graph through the edge; the flow version of the Dulmage–Mendelsohn
decomposition). One maximum flow (``scipy.sparse.csgraph.maximum_flow``) and one strongly
connected components pass (``connected_components``), both scipy's: no hand-written matching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdpbench.data import PublicView
from cdpbench.errors import require
from cdpbench.regions import overlapping_pairs, view_regions

TRANSITIONS = ("none", "any")


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
        m = view.schema.sensitive.size
        key, count = np.unique(np.asarray(view.group, np.int64) * m + np.asarray(view.sensitive, np.int64), return_counts=True)
        return cls(key // m, key % m, count.astype(np.int64), view.n_groups)


@dataclass
class LinkageGraph:
    """Edges ``(edge_a[e], edge_b[e])`` between the nodes of two views; ``kept`` marks the edges on
    some maximum matching of the record graph (all True before :func:`prune`)."""

    a: Nodes
    b: Nodes
    edge_a: np.ndarray
    edge_b: np.ndarray
    kept: np.ndarray
    matched: int = -1  # records matched by a maximum matching (-1: not computed)

    @property
    def perfect(self) -> bool:
        return self.matched == int(self.a.count.sum()) == int(self.b.count.sum())


def shared_columns(view_a: PublicView, view_b: PublicView) -> list[tuple[int, int, bool]]:
    """``(column in a, column in b, categorical)`` for every QI attribute both views publish."""
    names_b = {q.name: j for j, q in enumerate(view_b.schema.qi)}
    out = []
    for ja, q in enumerate(view_a.schema.qi):
        if q.name in names_b:
            out.append((ja, names_b[q.name], q.kind == "categorical"))
    return out


def linkage_graph(view_a: PublicView, view_b: PublicView, transitions: str = "none") -> LinkageGraph:
    """The (unpruned) linkage graph of two views; see the module docstring."""
    require(transitions in TRANSITIONS, "transitions", f"one of {list(TRANSITIONS)}", transitions)
    a, b = Nodes.of(view_a), Nodes.of(view_b)
    ga, gb = overlapping_pairs(view_regions(view_a), view_regions(view_b), shared_columns(view_a, view_b))
    pa, pb = a.ptr, b.ptr
    if transitions == "none":  # expand each group pair over a's nodes, look b's node up by (group, value)
        m = max(view_a.schema.sensitive.size, view_b.schema.sensitive.size)
        per = pa[ga + 1] - pa[ga]
        rep = np.repeat(np.arange(len(ga)), per)
        ea = (np.repeat(pa[ga] - np.concatenate(([0], np.cumsum(per)[:-1])), per) + np.arange(len(rep))).astype(np.int64) if len(ga) else np.zeros(0, np.int64)
        key_b = b.group * m + b.value
        want = gb[rep] * m + a.value[ea]
        pos = np.minimum(np.searchsorted(key_b, want), max(len(key_b) - 1, 0))
        hit = key_b[pos] == want if len(key_b) else np.zeros(len(want), bool)
        edge_a, edge_b = ea[hit], pos[hit].astype(np.int64)
    else:  # every node of ga with every node of gb
        na, nb = pa[ga + 1] - pa[ga], pb[gb + 1] - pb[gb]
        per = na * nb
        rep = np.repeat(np.arange(len(ga)), per)
        within = np.arange(per.sum()) - np.repeat(np.concatenate(([0], np.cumsum(per)[:-1])), per)
        edge_a = (pa[ga][rep] + within // nb[rep]).astype(np.int64)
        edge_b = (pb[gb][rep] + within % nb[rep]).astype(np.int64)
    return LinkageGraph(a, b, edge_a, edge_b, np.ones(len(edge_a), dtype=bool))


def prune(graph: LinkageGraph) -> LinkageGraph:
    """Keep the edges on some maximum matching of the record graph (module docstring)."""
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.csgraph import connected_components, maximum_flow

    a, b = graph.a, graph.b
    Na, Nb, E = len(a.count), len(b.count), len(graph.edge_a)
    s, t = 0, Na + Nb + 1
    an = 1 + np.arange(Na)
    bn = 1 + Na + np.arange(Nb)
    tail = np.concatenate([np.full(Na, s), an[graph.edge_a], bn])
    head = np.concatenate([an, bn[graph.edge_b], np.full(Nb, t)])
    cap = np.concatenate([a.count, np.minimum(a.count[graph.edge_a], b.count[graph.edge_b]), b.count]).astype(np.int32)
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
    on_some = (flow[mid] > 0) | (comp[an[graph.edge_a]] == comp[bn[graph.edge_b]])
    return LinkageGraph(a, b, graph.edge_a, graph.edge_b, on_some, int(result.flow_value))
