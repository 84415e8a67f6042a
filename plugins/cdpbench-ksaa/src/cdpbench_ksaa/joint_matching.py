"""The joint matching of all the releases so far (KSAA §1: "every perfect matching [of the
multipartite graph] is a possible assignment"): the adversary who assigns the records of every
release at once, not one pair of releases at a time (:mod:`.linkability`'s ``join="pairwise"``).

**The multipartite graph.** Its nodes are the published records of the views; two records of two
different views are linked when the linkage graph of their two views links them
(:mod:`.linkage_graph`: their groups' generalized QIs meet on every attribute both publish, and
their values are equal under ``transitions="none"``, any under ``"any"``, a change the PD_cor
knowledge allows under ``"knowledge"``, :mod:`.transition_relation`). A *clique* takes one
record of each view and links every two of them: the records one respondent may have.

**Whose records are assigned** (the lab's reading: the views do not all publish the same
respondents). A respondent ``v`` of the latest view ``V_n`` is published in the views ``S``
(``n`` among them); only those views constrain it, as in the pairwise join. The joint assignment
for ``S`` assigns the records of the respondents ``C_S`` published in *every* view of ``S``: each
view lists the respondents of each of its groups, so the adversary knows how many of a group's
records, ``c_g``, belong to ``C_S`` — not which ones (a group with respondents outside ``C_S``
holds records no clique takes). A *joint assignment* for ``S`` is a set of disjoint cliques over
the views of ``S``, at most ``c_g`` of whose records lie in each group ``g``, of the largest size
such a set can have: ``|C_S|`` cliques (a perfect matching of the multipartite graph of the
records of ``C_S``) when the releases are consistent with the adversary's assumption (e.g. values
persist under ``"none"``: the true assignment is one), fewer when they are not (as the pairwise
join keeps the edges on some *maximum* matching). With two views publishing the same
respondents, this is the pairwise join's full matching join exactly.

**What survives.** An edge is kept when some joint assignment puts its two records in one clique;
a record ``x`` of ``v``'s group in ``V_n`` is a *candidate record* of ``v`` when some joint
assignment for ``S`` puts ``x`` in a clique whose record in each view of ``S`` lies in ``v``'s
group there (the *candidate values* are their values). The natural join (``pruned=False``)
keeps every clique: ``x`` is a candidate when some clique holds ``x`` and a record of ``v``'s
group in every view of ``S`` (linked pairwise, also between the earlier views).

The pairwise join asks less: ``x`` needs, for each earlier view separately, a kept edge to
``v``'s group there, each pair pruned on its own and the earlier views never joined with each
other. Its natural join keeps every candidate the joint one does; its full matching join does
too whenever the views publish the same respondents and the releases are consistent with the
assumption (a joint assignment is then perfect, and so are its restrictions to the pairs). Not
otherwise: the pairwise join matches the records of respondents only one of the two views
publishes (it can leave a respondent published in both with nothing), and a maximum joint
assignment need not restrict to maximum matchings of the pairs.

**How it is computed (exactly).** Records are collapsed, per view, to *class nodes*: groups with
the same generalized QI on the attributes shared with each other view of ``S`` (the same
neighbours) form a class, and a class node is ``(class, value)`` with its records summed (under
``"any"`` values do not decide links: a class node is the class). Groups some of whose respondents
are outside ``C_S`` (``c_g`` below the group's size) join a class only with groups of the same
``c_g`` and the same records of each value (under ``"none"``), so that a class's cap, the sum of
its ``c_g``, splits back into the groups' caps. Twin records are interchangeable in every
assignment (their neighbours are the same), so every statement about records is read off the
class nodes. The *clique types* (one class node per view, every two linked) are listed, and the
joint assignments are the integer solutions ``z`` (cliques of each type) of: at most a node's
records and a class's cap used, as many cliques as possible. A type is *usable* when some optimal
solution uses it. With two views this is a maximum flow, and every type is decided at once (used
by the flow found, or its ends in one strongly connected component of the residual graph, as in
:func:`.linkage_graph.prune`). With more: the types of one optimal solution are usable; then,
among the types asked about (those that decide some respondent's candidates) and not yet found,
an optimal solution using as many of them as it can is sought, again and again, until one uses
none of them (none of those left is usable). Types that share no node or class, even through
others, form independent components, each settled on its own. Every program is solved first as
its LP relaxation (``scipy.optimize.linprog``, HiGHS): where its optimum is integral it is the
integer optimum, and a relaxed optimum below one type found proves that none is left; elsewhere
``scipy.optimize.milp`` (HiGHS, relative gap 0) solves it. The tests compare every kept edge and
candidate with an enumeration of all the joint assignments of small random instances, by this
route and by ``milp`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdpbench.data import PublicView
from cdpbench.regions import overlapping_pairs, view_regions

from .linkage_graph import Nodes, _twin_groups, segments, shared_columns
from .transition_relation import as_relation

JOINS = ("joint", "pairwise")
JOIN_HELP = (  # the help of ``join`` in the components that also have ``pruned``
    "how more than two releases are joined. 'joint' (the paper's adversary, KSAA §1; slower, integer "
    "programs): a respondent's candidate records are the records of its latest group that lie in one "
    "clique with a record of its group in every other release it is published in, every two records "
    "linked (with pruned: only cliques of some maximum joint assignment of the records of the respondents "
    "published in all those releases, a perfect matching of their multipartite graph when one exists). "
    "'pairwise' (the weaker adversary, an over-approximation of what she can link when the releases "
    "publish the same respondents and values persist): a candidate record needs a link to the "
    "respondent's group in each earlier release separately, through the linkage graph of that release "
    "and the latest one alone (with pruned: each pair pruned to the edges on some maximum matching of its "
    "own); the earlier releases are never joined with each other"
)


class Prepared:
    """What does not depend on which views are joined: each view's nodes and regions, and for two
    views the twin groups of each on their shared attributes and which twins meet. Kept while the
    views are the same objects (an anonymizer judging many candidates of one release)."""

    def __init__(self):
        self._nodes: dict[int, tuple[PublicView, Nodes]] = {}
        self._regions: dict[int, tuple[PublicView, object]] = {}
        self._pairs: dict[tuple[int, int], tuple[PublicView, PublicView, tuple]] = {}

    def nodes(self, view: PublicView) -> Nodes:
        hit = self._nodes.get(id(view))
        if hit is None or hit[0] is not view:
            hit = self._nodes[id(view)] = (view, Nodes.of(view))
        return hit[1]

    def regions(self, view: PublicView):
        hit = self._regions.get(id(view))
        if hit is None or hit[0] is not view:
            hit = self._regions[id(view)] = (view, view_regions(view))
        return hit[1]

    def pair(self, va: PublicView, vb: PublicView):
        """``(twin of each group of a, twin of each group of b, meeting twin pairs (ta, tb))`` on
        the attributes both publish."""
        key = (id(va), id(vb))
        hit = self._pairs.get(key)
        if hit is None or hit[0] is not va or hit[1] is not vb:
            shared = shared_columns(va, vb)
            twin_a, reg_a = _twin_groups(self.regions(va), [(ja, cat) for ja, _, cat in shared])
            twin_b, reg_b = _twin_groups(self.regions(vb), [(jb, cat) for _, jb, cat in shared])
            ta, tb = overlapping_pairs(reg_a, reg_b, shared)
            hit = self._pairs[key] = (va, vb, (twin_a, twin_b, ta, tb))
        return hit[2]

    def forget_except(self, views: list[PublicView]) -> None:
        keep = {id(v) for v in views}
        self._nodes = {k: v for k, v in self._nodes.items() if k in keep}
        self._regions = {k: v for k, v in self._regions.items() if k in keep}
        self._pairs = {k: v for k, v in self._pairs.items() if k[0] in keep and k[1] in keep}


@dataclass
class JointGraph:
    """The multipartite graph of the views ``positions`` (indices into the views; the latest last)
    for the respondents published in all of them, on class nodes (module docstring). Per position:
    ``group_class`` (class of every group of the view, -1 for a group holding none of those
    respondents), ``node_class`` / ``node_value`` / ``node_count`` (the class nodes; value -1 under
    ``transitions="any"``: the node is the class), ``class_cap`` (most records of the class in
    cliques). ``types`` [T, m]: the class node of each position of every clique type. After
    :func:`solve`: ``size`` (the most cliques) and ``usable`` (the types some joint assignment
    uses, among those asked about; ``asked``)."""

    positions: tuple[int, ...]
    transitions: str
    nodes: list[Nodes]
    group_class: list[np.ndarray]
    node_class: list[np.ndarray]
    node_value: list[np.ndarray]
    node_count: list[np.ndarray]
    class_cap: list[np.ndarray]
    class_total: list[np.ndarray]
    types: np.ndarray
    size: int = -1
    usable: np.ndarray | None = None
    asked: np.ndarray | None = None
    ilps: int = 0  # programs solved (LP relaxations and milp; 0 for a flow)

    @property
    def m(self) -> int:
        return len(self.positions)

    def node_of(self, p: int, node: np.ndarray) -> np.ndarray:
        """Class node of each ``(group, value)`` node of the view at position ``p`` (-1 where
        its group holds no respondent of the joint assignment)."""
        nodes = self.nodes[p]
        cls = self.group_class[p][nodes.group[node]]
        if self.transitions == "any":
            return np.where(cls >= 0, cls, -1)
        key = self.node_class[p] * _VALUE_RADIX + self.node_value[p]
        want = cls * _VALUE_RADIX + nodes.value[node]
        pos = np.minimum(np.searchsorted(key, want), max(len(key) - 1, 0))
        hit = (cls >= 0) & (key[pos] == want) if len(key) else np.zeros(len(want), bool)
        return np.where(hit, pos, -1)

    def kept_pairs(self, p: int, q: int) -> set[tuple[int, int]]:
        """The ``(node of position p, node of position q)`` pairs (``Nodes.of`` the views) some
        joint assignment puts in one clique: the edges kept (read on the ``usable`` types, so
        exactly when :func:`solve` asked about every type, its default; every clique's edges when
        not solved)."""
        use = self.usable if self.usable is not None else np.ones(len(self.types), bool)
        kept = set(zip(self.types[use, p].tolist(), self.types[use, q].tolist()))
        xp, xq = np.arange(len(self.nodes[p].count)), np.arange(len(self.nodes[q].count))
        cp, cq = self.node_of(p, xp), self.node_of(q, xq)
        out = set()
        for i in np.flatnonzero(cp >= 0).tolist():
            for j in np.flatnonzero(cq >= 0).tolist():
                if (int(cp[i]), int(cq[j])) in kept:
                    out.add((i, j))
        return out


_VALUE_RADIX = 1 << 20  # class * radix + value keys (values are far fewer)


def joint_graph(views: list[PublicView], groups: list[np.ndarray], positions: tuple[int, ...],
                transitions="none", prepared: Prepared | None = None) -> JointGraph:
    """The :class:`JointGraph` of ``views[i]`` for ``i`` in ``positions``, for the respondents of
    the latest view published in all of them; ``groups[i]`` is the group of every respondent of
    the latest view in ``views[i]`` (-1: not published there). ``transitions``: ``"none"``,
    ``"any"`` or a :class:`.transition_relation.TransitionRelation` (PD_cor: class nodes keep their
    values, as under ``"none"``, and two are linked when the relation allows their change over
    the releases between their views)."""
    relation = as_relation(transitions)
    transitions = relation.kind
    valued = transitions != "any"  # class nodes are (class, value)
    prepared = prepared or Prepared()
    positions = tuple(positions)
    m = len(positions)
    vs = [views[i] for i in positions]
    common = np.ones(len(groups[positions[0]]), dtype=bool)
    for i in positions:
        common &= groups[i] >= 0
    n_values = max(int(v.schema.sensitive.size) for v in vs)
    nodes = [prepared.nodes(v) for v in vs]
    twins = {(p, q): None for p in range(m) for q in range(m) if p != q}
    meets = {}
    for p in range(m):
        for q in range(p + 1, m):
            twin_p, twin_q, ta, tb = prepared.pair(vs[p], vs[q])
            twins[(p, q)], twins[(q, p)] = twin_p, twin_q
            meets[(p, q)] = (ta, tb)
    group_class, node_class, node_value, node_count, class_cap, class_total, class_twin = [], [], [], [], [], [], []
    for p in range(m):
        view, nd = vs[p], nodes[p]
        G = view.n_groups
        size = np.bincount(np.asarray(view.group, np.int64), minlength=G).astype(np.int64)
        c = np.minimum(np.bincount(groups[positions[p]][common], minlength=G)[:G], size).astype(np.int64)
        partial = (c < size).astype(np.int64)
        cols = [twins[(p, q)][:, None] for q in range(m) if q != p]
        cols += [partial[:, None], (c * partial)[:, None]]
        if valued:  # a partial group's records of each value
            counts = np.zeros((G, n_values), dtype=np.int64)
            np.add.at(counts, (nd.group, nd.value), nd.count)
            cols.append(counts * partial[:, None])
        key = np.concatenate(cols, axis=1)
        active = np.flatnonzero(c > 0)
        cls = np.full(G, -1, dtype=np.int64)
        if len(active):
            _, first, inv = np.unique(key[active], axis=0, return_index=True, return_inverse=True)
            cls[active] = np.asarray(inv, np.int64).ravel()
            rep = active[np.asarray(first, np.int64)]
        else:
            rep = np.zeros(0, np.int64)
        n_cls = len(rep)
        cap = np.bincount(cls[active], weights=c[active], minlength=n_cls).astype(np.int64)
        total = np.bincount(cls[active], weights=size[active], minlength=n_cls).astype(np.int64)
        on = cls[nd.group] >= 0
        if valued:
            k = cls[nd.group[on]] * _VALUE_RADIX + nd.value[on]
            uk, inv = np.unique(k, return_inverse=True)
            node_class.append(uk // _VALUE_RADIX)
            node_value.append(uk % _VALUE_RADIX)
            node_count.append(np.bincount(inv.ravel(), weights=nd.count[on], minlength=len(uk)).astype(np.int64))
        else:
            node_class.append(np.arange(n_cls, dtype=np.int64))
            node_value.append(np.full(n_cls, -1, dtype=np.int64))
            node_count.append(total.copy())
        group_class.append(cls)
        class_cap.append(cap)
        class_total.append(total)
        class_twin.append({q: twins[(p, q)][rep] for q in range(m) if q != p})
    adjacency = {}
    for p in range(m):
        for q in range(p + 1, m):
            allowed = None
            if transitions == "knowledge":
                allowed = relation.allowed(int(vs[q].t) - int(vs[p].t), n_values)
            adjacency[(p, q)] = _node_pairs(meets[(p, q)], class_twin[p][q], class_twin[q][p],
                                            node_class[p], node_value[p], node_class[q], node_value[q], transitions,
                                            allowed)
    types = _cliques([len(c) for c in node_class], adjacency)
    return JointGraph(positions, transitions, nodes, group_class, node_class, node_value, node_count,
                      class_cap, class_total, types)


def _node_pairs(meet, twin_p, twin_q, cls_p, val_p, cls_q, val_q, transitions, allowed=None) -> np.ndarray:
    """Sorted keys ``x * Nq + y`` of the linked class nodes of two positions: their classes'
    twins meet (``meet``: pairs of twins) and, when values are kept (``val >= 0``), equal values
    (``"none"``) or values whose change ``allowed`` (``[m, m]``, earlier value first) allows
    (``"knowledge"``)."""
    ta, tb = meet
    Nq = len(cls_q)
    if len(ta) == 0 or len(cls_p) == 0 or Nq == 0:
        return np.zeros(0, np.int64)
    # nodes by twin: node -> twin of its class
    tw_p, tw_q = twin_p[cls_p], twin_q[cls_q]
    op, oq = np.argsort(tw_p, kind="stable"), np.argsort(tw_q, kind="stable")
    n_tp = int(max(tw_p.max(initial=-1), ta.max(initial=-1))) + 1
    n_tq = int(max(tw_q.max(initial=-1), tb.max(initial=-1))) + 1
    pp = np.searchsorted(tw_p[op], np.arange(n_tp + 1))
    pq = np.searchsorted(tw_q[oq], np.arange(n_tq + 1))
    na, nb = pp[ta + 1] - pp[ta], pq[tb + 1] - pq[tb]
    if transitions in ("any", "knowledge"):  # every node pair of meeting twins (PD_cor: then filtered)
        rep, within = segments(np.zeros(len(ta), np.int64), na * nb)
        x = op[pp[ta][rep] + within // np.maximum(nb[rep], 1)]
        y = oq[pq[tb][rep] + within % np.maximum(nb[rep], 1)]
        if transitions == "knowledge":
            keep = allowed[val_p[x], val_q[y]]
            x, y = x[keep], y[keep]
        return np.unique(x * Nq + y)
    # equal values: each node of a twin of p against the node of the same value in each class of
    # the meeting twin of q
    rep, within = segments(np.zeros(len(ta), np.int64), na)
    x = op[pp[ta][rep] + within]  # node of p, for meeting twin pair rep
    t2 = tb[rep]
    rep2, within2 = segments(np.zeros(len(x), np.int64), nb[rep])
    y = oq[pq[t2][rep2] + within2]
    x = x[rep2]
    same = val_p[x] == val_q[y]
    return np.unique(x[same] * Nq + y[same])


def _cliques(sizes: list[int], adjacency: dict) -> np.ndarray:
    """Every tuple of one node per position, every two linked (``adjacency[(p, q)]``, ``p < q``:
    sorted keys ``x * N_q + y``), as int64 [T, m]. Built position by position, smallest first."""
    m = len(sizes)
    order = sorted(range(m), key=lambda p: sizes[p])

    def keys(p, q):  # linked pairs of positions p, q as sorted keys x_p * N_q + x_q
        if p < q:
            return adjacency[(p, q)], sizes[q], False
        return adjacency[(q, p)], sizes[p], True

    first = order[0]
    tup = np.arange(sizes[first], dtype=np.int64)[:, None]
    for k in range(1, m):
        q = order[k]
        key, radix, flipped = keys(first, q)
        if flipped:  # key = y * N_first + x: re-key as x * N_q + y
            y, x = key // radix, key % radix
            key = np.sort(x * sizes[q] + y)
        a, b = key // sizes[q], key % sizes[q]
        ptr = np.searchsorted(a, np.arange(sizes[first] + 1))
        start, count = ptr[tup[:, 0]], ptr[tup[:, 0] + 1] - ptr[tup[:, 0]]
        rep, idx = segments(start, count)
        new = b[idx]
        tup = tup[rep]
        keep = np.ones(len(new), dtype=bool)
        for j in range(1, k):
            r = order[j]
            key, radix, flipped = keys(r, q)
            want = (new * sizes[r] + tup[:, j]) if flipped else (tup[:, j] * sizes[q] + new)
            if len(key) == 0:
                keep[:] = False
                break
            pos = np.minimum(np.searchsorted(key, want), len(key) - 1)
            keep &= key[pos] == want
        tup = np.concatenate([tup[keep], new[keep][:, None]], axis=1)
    out = np.empty_like(tup)
    out[:, order] = tup
    return out


def _resources(graph: JointGraph):
    """The constraint matrix (a row per class node and per class whose cap binds) and its bounds."""
    from scipy.sparse import csr_matrix

    T = len(graph.types)
    rows, cols, ub = [], [], []
    base = 0
    for p in range(graph.m):
        x = graph.types[:, p]
        rows.append(base + x)
        cols.append(np.arange(T))
        ub.append(graph.node_count[p])
        base += len(graph.node_count[p])
        binds = np.flatnonzero(graph.class_cap[p] < graph.class_total[p])
        if len(binds):
            where = np.full(len(graph.class_cap[p]), -1, np.int64)
            where[binds] = np.arange(len(binds))
            row = where[graph.node_class[p][x]]
            on = row >= 0
            rows.append(base + row[on])
            cols.append(np.flatnonzero(on))
            ub.append(graph.class_cap[p][binds])
            base += len(binds)
    A = csr_matrix((np.ones(sum(len(r) for r in rows)), (np.concatenate(rows), np.concatenate(cols))), shape=(base, T))
    ub = np.concatenate(ub).astype(float)
    zub = np.full(T, np.inf)
    for p in range(graph.m):
        zub = np.minimum(zub, graph.node_count[p][graph.types[:, p]])
        zub = np.minimum(zub, graph.class_cap[p][graph.node_class[p][graph.types[:, p]]])
    return A, ub, zub


def _components(A) -> tuple[np.ndarray, np.ndarray]:
    """``(component of every type, of every row)``: types sharing a row, even through other
    types, are in one component (components numbered by their first type; a row no type uses
    gets -1)."""
    from scipy.sparse import bmat
    from scipy.sparse.csgraph import connected_components

    R, T = A.shape
    _, label = connected_components(bmat([[None, A], [A.T, None]]).tocsr(), directed=False)
    number = np.full(int(label.max()) + 1, -1, np.int64)
    _, first = np.unique(label[R:], return_index=True)
    number[label[R:][np.sort(first)]] = np.arange(len(first))
    return number[label[R:]], number[label[:R]]


class _Program:
    """Integer programs over the clique types of some components, each solved first as its LP
    relaxation (``scipy.optimize.linprog``, HiGHS): where the relaxed optimum is integral it is
    the integer optimum; the components where it is not go to ``scipy.optimize.milp`` (HiGHS,
    relative gap 0). The components are independent (no row spans two), so an optimum of the
    whole is an optimum of each component, and the relaxation is read component by component."""

    def __init__(self, A, ub, zub, comp_type, comp_row, relax: bool = True):
        self.A, self.ub, self.zub = A, ub, zub
        self.comp_type, self.comp_row = comp_type, comp_row
        self.relax = relax  # False: milp alone
        self.calls = 0

    def _system(self, comps, targets, most):
        """The program on the components ``comps``: variables ``z`` (cliques of each of their
        types) and, with ``targets``, ``y`` (one per target type: ``y <= z``, ``y <= 1``), rows
        ``A_ub x <= b_ub`` (records of each node, caps of classes; ``y - z <= 0``) and ``A_eq x =
        b_eq`` (with ``targets``: ``most`` cliques in every component), cost: ``-sum z`` without
        ``targets``, ``-sum y`` with them."""
        from scipy.sparse import csr_matrix, diags, hstack, vstack

        types = np.flatnonzero(np.isin(self.comp_type, comps))
        rows = np.flatnonzero(np.isin(self.comp_row, comps))
        n = len(types)
        local = np.full(int(self.comp_type.max()) + 1, -1, np.int64)
        local[comps] = np.arange(len(comps))
        ctype = local[self.comp_type[types]]
        A = self.A[rows][:, types]
        if targets is None:
            return dict(types=types, rows=rows, ctype=ctype, local=local, idx=np.zeros(0, np.int64), cost=-np.ones(n),
                        A_ub=A, b_ub=self.ub[rows], A_eq=None, b_eq=None, upper=self.zub[types])
        idx = np.flatnonzero(targets[types])
        K = len(idx)
        link = hstack([csr_matrix((-np.ones(K), (np.arange(K), idx)), shape=(K, n)), diags(np.ones(K)).tocsr()])
        return dict(
            types=types, rows=rows, ctype=ctype, local=local, idx=idx,
            cost=np.concatenate([np.zeros(n), -np.ones(K)]),
            A_ub=vstack([hstack([A, csr_matrix((len(rows), K))]), link]).tocsr(),
            b_ub=np.concatenate([self.ub[rows], np.zeros(K)]),
            A_eq=hstack([csr_matrix((np.ones(n), (ctype, np.arange(n))), shape=(len(comps), n)),
                         csr_matrix((len(comps), K))]).tocsr(),
            b_eq=most[comps].astype(float),
            upper=np.concatenate([self.zub[types], np.ones(K)]),
        )

    def run(self, comps: np.ndarray, targets: np.ndarray | None = None, most: np.ndarray | None = None):
        """Over the types of the components ``comps``: without ``targets``, a solution with the
        most cliques; with ``targets`` (bool over all types) and ``most`` (the most cliques of
        every component), a solution with that many cliques in every component that uses as many
        targets as it can — except in a component where none can be used, left at 0 there. ``z``
        over all types (0 outside ``comps``)."""
        from scipy.optimize import linprog

        if not self.relax:
            return self._milp(comps, targets, most)
        sy = self._system(comps, targets, most)
        types, rows, ctype, local, idx = sy["types"], sy["rows"], sy["ctype"], sy["local"], sy["idx"]
        n = len(types)
        lp = linprog(sy["cost"], A_ub=sy["A_ub"], b_ub=sy["b_ub"], A_eq=sy["A_eq"], b_eq=sy["b_eq"],
                     bounds=np.stack([np.zeros(len(sy["cost"])), sy["upper"]], axis=1), method="highs")
        self.calls += 1
        if lp.status != 0:
            raise RuntimeError(f"joint matching LP failed: {lp.message}")
        z = np.round(lp.x[:n]).astype(np.int64)
        # per component: is the relaxed optimum an integer solution (integral, feasible once rounded)?
        exact = np.ones(len(comps), dtype=bool)
        exact[ctype[np.abs(lp.x[:n] - z) > 1e-6]] = False
        over = np.asarray(self.A[rows][:, types] @ z).ravel() > self.ub[rows]
        exact[local[self.comp_row[rows[over]]]] = False
        none = np.zeros(len(comps), dtype=bool)
        if targets is not None:
            exact &= np.bincount(ctype, weights=z, minlength=len(comps)) == most[comps]
            # a relaxed optimum below 1: no integer solution uses a target (the optimum is 0)
            none = np.bincount(ctype[idx], weights=lp.x[n:], minlength=len(comps)) < 0.999
        z[(none & ~exact)[ctype]] = 0
        redo = ~exact & ~none
        if redo.any():  # the integer program, on the components the relaxation leaves fractional
            z_sub = self._milp(comps[redo], targets, most)
            z[redo[ctype]] = z_sub[types[redo[ctype]]]
        out = np.zeros(self.A.shape[1], dtype=np.int64)
        out[types] = z
        return out

    def _milp(self, comps, targets, most):
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import vstack

        sy = self._system(comps, targets, most)
        rows_ub = sy["A_ub"].shape[0]
        if sy["A_eq"] is None:
            cons = LinearConstraint(sy["A_ub"], -np.inf, sy["b_ub"])
        else:
            cons = LinearConstraint(vstack([sy["A_ub"], sy["A_eq"]]).tocsr(),
                                    np.concatenate([np.full(rows_ub, -np.inf), sy["b_eq"]]),
                                    np.concatenate([sy["b_ub"], sy["b_eq"]]))
        res = milp(sy["cost"], integrality=np.ones(len(sy["cost"])), bounds=Bounds(0, sy["upper"]), constraints=cons,
                   options={"mip_rel_gap": 0.0, "presolve": True})
        self.calls += 1
        if res.x is None:
            raise RuntimeError(f"joint matching ILP failed: {res.message}")
        out = np.zeros(self.A.shape[1], dtype=np.int64)
        out[sy["types"]] = np.round(res.x[: len(sy["types"])]).astype(np.int64)
        return out


def _solve_flow(graph: JointGraph) -> JointGraph:
    """Two views: the joint assignments are the integral maximum flows of source -> class of the
    first view (its cap) -> class node (its records) -> class node of the second view (a type:
    the fewer records of its two ends) -> class -> sink (the class and node rows nest on each
    side, so the constraint matrix is a network matrix). A type is used by some maximum flow iff
    the flow found uses it or its two ends lie in one strongly connected component of the
    residual graph — :func:`.linkage_graph.prune`'s argument, with the class layer added; scipy's
    ``maximum_flow`` and ``connected_components``, every type decided at once."""
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.csgraph import connected_components, maximum_flow

    cls_a, cls_b = graph.node_class
    cap_a, cap_b = graph.class_cap
    cnt_a, cnt_b = graph.node_count
    ea, eb = graph.types[:, 0], graph.types[:, 1]
    Ca, Na, Nb, Cb = len(cap_a), len(cnt_a), len(cnt_b), len(cap_b)
    s = 0
    ca = 1 + np.arange(Ca)
    na = 1 + Ca + np.arange(Na)
    nb = 1 + Ca + Na + np.arange(Nb)
    cb = 1 + Ca + Na + Nb + np.arange(Cb)
    t = 1 + Ca + Na + Nb + Cb
    tail = np.concatenate([np.full(Ca, s), ca[cls_a], na[ea], nb, cb])
    head = np.concatenate([ca, na, nb[eb], cb[cls_b], np.full(Cb, t)])
    cap = np.concatenate([cap_a, cnt_a, np.minimum(cnt_a[ea], cnt_b[eb]), cnt_b, cap_b]).astype(np.int32)
    n = t + 1
    result = maximum_flow(csr_matrix((cap, (tail, head)), shape=(n, n)), s, t)
    flow_m = result.flow.tocsr() if hasattr(result, "flow") else result.residual.tocsr()
    flow = np.asarray(flow_m[tail, head]).ravel().astype(np.int64)
    fwd, back = flow < cap, flow > 0
    res = coo_matrix(
        (np.ones(int(fwd.sum() + back.sum())), (np.concatenate([tail[fwd], head[back]]), np.concatenate([head[fwd], tail[back]]))),
        shape=(n, n),
    )
    _, comp = connected_components(res, directed=True, connection="strong")
    mid = slice(Ca + Na, Ca + Na + len(ea))
    graph.size = int(result.flow_value)
    graph.usable = (flow[mid] > 0) | (comp[na[ea]] == comp[nb[eb]])
    graph.ilps = 0
    return graph


def solve(graph: JointGraph, asked: np.ndarray | None = None, shortcuts: bool = True) -> JointGraph:
    """The most cliques (``size``) and which of the ``asked`` types (bool [T]; all by default) some
    joint assignment uses (``usable``); see the module docstring. Two views are a flow problem
    (:func:`_solve_flow`: every type decided at once); more are integer programs
    (:class:`_Program`). ``shortcuts=False`` takes neither the flow nor the LP relaxations: every
    program goes to ``milp`` (the same answers, slower; the tests compare both).

    Types that share no node or class, even through other types, are independent: a solution is
    optimal exactly when its part in every such component is, so each step works on the
    components still in question only (a component is settled when every type asked about in it
    is found usable, or when an optimal covering solution uses none of those left in it)."""
    T = len(graph.types)
    asked = np.ones(T, dtype=bool) if asked is None else np.asarray(asked, dtype=bool)
    graph.asked = asked
    graph.usable = np.zeros(T, dtype=bool)
    graph.size = 0
    graph.ilps = 0
    if T == 0:
        return graph
    if graph.m == 2 and shortcuts:
        return _solve_flow(graph)
    A, ub, zub = _resources(graph)
    comp_type, comp_row = _components(A)
    C = int(comp_type.max()) + 1
    program = _Program(A, ub, zub, comp_type, comp_row, shortcuts)
    z = program.run(np.arange(C))  # the most cliques, optimal in every component
    graph.size = int(z.sum())
    graph.usable = z > 0
    most = np.bincount(comp_type, weights=z, minlength=C).astype(np.int64)
    todo = asked & ~graph.usable
    open_ = np.zeros(C, dtype=bool)
    open_[comp_type[todo]] = True
    while open_.any():
        z = program.run(np.flatnonzero(open_), todo, most)
        covered = (z > 0) & todo
        graph.usable |= z > 0
        todo &= ~graph.usable
        # settled: nothing left in question, or nothing new found (optimal for the component)
        newly = np.zeros(C, dtype=bool)
        newly[comp_type[covered]] = True
        still = np.zeros(C, dtype=bool)
        still[comp_type[todo]] = True
        open_ &= newly & still
    graph.ilps = program.calls
    return graph


@dataclass
class _Pattern:
    """The respondents of the latest view published in the views ``positions`` exactly: each
    ``(respondent row, node of its latest group)`` pair, the id of the clique types it asks about
    (-1: none can hold it), and their graph (None: published in the latest view only)."""

    row: np.ndarray
    node: np.ndarray
    want: np.ndarray
    graph: JointGraph | None
    type_id: np.ndarray
    # transitions="knowledge": the (pair, clique type) matches, a type matching a pair when its
    # classes are the respondent's, its latest value the node's and each earlier value one its
    # group there holds (None under "none" / "any": a pair asks about the types of one id)
    match_pair: np.ndarray | None = None
    match_type: np.ndarray | None = None


class JointJoin:
    """The joint join of ``views`` (module docstring): one :class:`JointGraph` per set of views the
    respondents of the latest view are published in (``graphs``), and the candidates of every
    respondent through the natural join (``candidates(pruned=False)``: some clique) or the joint
    matching (``pruned=True``: some joint assignment's clique; the ILPs are solved at the first
    call). ``groups[i]``: the group of every respondent of the latest view in ``views[i]`` (-1: not
    published there); ``prepared`` may pass the views' :class:`Prepared` parts already built;
    ``shortcuts``: see :func:`solve`."""

    def __init__(self, views: list[PublicView], groups: list[np.ndarray], transitions="none",
                 prepared: Prepared | None = None, shortcuts: bool = True):
        relation = as_relation(transitions)
        self.transitions = transitions = relation.kind
        self.shortcuts = shortcuts
        prepared = prepared or Prepared()
        n = len(views)
        latest = prepared.nodes(views[-1])
        g_now = np.asarray(groups[-1], np.int64)
        pattern = np.zeros(len(g_now), dtype=np.int64)
        for i, g in enumerate(groups):
            pattern |= (np.asarray(g) >= 0).astype(np.int64) << i
        self.patterns: list[_Pattern] = []
        ptr = latest.ptr
        for pat in np.unique(pattern).tolist():
            members = np.flatnonzero(pattern == pat)
            positions = tuple(i for i in range(n) if pat >> i & 1)
            rep, x = segments(ptr[g_now[members]], ptr[g_now[members] + 1] - ptr[g_now[members]])
            row = members[rep]
            if len(positions) == 1:  # published in the latest view only: nothing to join
                self.patterns.append(_Pattern(row, x, np.zeros(len(row), np.int64), None, np.zeros(0, np.int64)))
                continue
            graph = joint_graph(views, groups, positions, relation, prepared)
            m = graph.m
            # the class vector and value of each (member, latest node) pair, and of each type
            cv = np.stack([graph.group_class[p][groups[positions[p]][row]] for p in range(m)], axis=1)
            value = latest.value[x]
            ok = np.ones(len(row), dtype=bool)
            if transitions == "none":  # its group in every view must hold the value
                for p in range(m - 1):
                    nd = graph.nodes[p]
                    key = nd.group * _VALUE_RADIX + nd.value
                    want = groups[positions[p]][row] * _VALUE_RADIX + value
                    pos = np.minimum(np.searchsorted(key, want), max(len(key) - 1, 0))
                    ok &= (key[pos] == want) if len(key) else False
            T = len(graph.types)
            if transitions == "knowledge":
                self.patterns.append(_knowledge_pattern(graph, groups, positions, row, x, cv, value))
                continue
            type_cv = np.stack([graph.node_class[p][graph.types[:, p]] for p in range(m)], axis=1) if T else np.zeros((0, m), np.int64)
            type_value = graph.node_value[0][graph.types[:, 0]] if T else np.zeros(0, np.int64)
            ids = _joint_ids(np.concatenate([cv, type_cv]), np.concatenate([value, type_value]), transitions)
            want_id, type_id = ids[: len(row)], ids[len(row):]
            want_id = np.where(ok & np.isin(want_id, type_id), want_id, -1)
            self.patterns.append(_Pattern(row, x, want_id, graph, type_id))
        self._solved = False

    @property
    def graphs(self) -> list[JointGraph]:
        return [p.graph for p in self.patterns if p.graph is not None]

    def candidates(self, pruned: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(row, node)``: every candidate ``(respondent row, node of the latest view)`` pair,
        sorted by row then node."""
        if pruned and not self._solved:
            for pat in self.patterns:
                if pat.graph is not None and pat.match_type is not None:
                    asked = np.zeros(len(pat.graph.types), dtype=bool)
                    asked[pat.match_type] = True
                    solve(pat.graph, asked, self.shortcuts)
                elif pat.graph is not None:
                    solve(pat.graph, np.isin(pat.type_id, pat.want[pat.want >= 0]), self.shortcuts)
            self._solved = True
        rows, nodes = [], []
        for pat in self.patterns:
            if pat.match_type is not None:  # PD_cor: some matching (usable) type
                hit = pat.graph.usable[pat.match_type] if pruned else np.ones(len(pat.match_type), dtype=bool)
                ok = np.zeros(len(pat.row), dtype=bool)
                ok[pat.match_pair[hit]] = True
                rows.append(pat.row[ok])
                nodes.append(pat.node[ok])
                continue
            ok = pat.want >= 0 if pat.graph is not None else np.ones(len(pat.row), dtype=bool)
            if pruned and pat.graph is not None:
                ok &= np.isin(pat.want, pat.type_id[pat.graph.usable])
            rows.append(pat.row[ok])
            nodes.append(pat.node[ok])
        row = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
        node = np.concatenate(nodes).astype(np.int64) if nodes else np.zeros(0, np.int64)
        order = np.lexsort((node, row))
        return row[order], node[order]


def _joint_ids(cv: np.ndarray, value: np.ndarray, transitions: str) -> np.ndarray:
    """One id per distinct (class vector, value) row (the value ignored under ``"any"``)."""
    cols = cv if transitions == "any" else np.concatenate([cv, value[:, None]], axis=1)
    if len(cols) == 0:
        return np.zeros(0, np.int64)
    _, inv = np.unique(cols, axis=0, return_inverse=True)
    return np.asarray(inv, np.int64).ravel()


def _knowledge_pattern(graph: JointGraph, groups: list[np.ndarray], positions: tuple[int, ...],
                       row: np.ndarray, x: np.ndarray, cv: np.ndarray, value: np.ndarray) -> _Pattern:
    """The :class:`_Pattern` of ``(row, latest node x)`` pairs under PD_cor transitions: values
    may change along a clique, so a pair asks about every clique type with its class vector
    ``cv`` and its latest value whose value in each earlier view is one the respondent's group
    there holds (a class node sums the records of a value over twin groups; the respondent's own
    group must have a record of it)."""
    m, T = graph.m, len(graph.types)
    if T == 0 or len(row) == 0:
        empty = np.zeros(0, np.int64)
        return _Pattern(row, x, np.full(len(row), -1, np.int64), graph, empty, empty, empty)
    type_cv = np.stack([graph.node_class[p][graph.types[:, p]] for p in range(m)], axis=1)
    type_last = graph.node_value[m - 1][graph.types[:, m - 1]]
    ids = _joint_ids(np.concatenate([cv, type_cv]), np.concatenate([value, type_last]), "none")
    want_id, type_id = ids[: len(row)], ids[len(row):]
    order = np.argsort(type_id, kind="stable")
    sorted_id = type_id[order]
    start = np.searchsorted(sorted_id, want_id, side="left")
    stop = np.searchsorted(sorted_id, want_id, side="right")
    pair, k = segments(start, stop - start)
    typ = order[k]
    ok = np.ones(len(pair), dtype=bool)
    for p in range(m - 1):  # the respondent's group in each earlier view holds the type's value there
        nd = graph.nodes[p]
        key = nd.group * _VALUE_RADIX + nd.value
        want = groups[positions[p]][row[pair]] * _VALUE_RADIX + graph.node_value[p][graph.types[typ, p]]
        pos = np.minimum(np.searchsorted(key, want), max(len(key) - 1, 0))
        ok &= (key[pos] == want) if len(key) else False
    return _Pattern(row, x, np.full(len(row), -1, np.int64), graph, type_id, pair[ok].astype(np.int64), typ[ok].astype(np.int64))
