"""What a respondent of the latest release can be linked to through the join of the releases
(KSAA §1; Shmueli et al.'s sequential-release setting, see the package README for the sources).

A respondent ``v`` of the latest view ``V_n`` belongs to one group of each view in which it is
published (the view lists the candidate respondents of every group: the adversary knows ``v``'s
QI). Its *candidate records* in ``V_n`` are records of its group there that the join links to
its groups in the earlier views in which ``v`` is published (not published there: no
constraint); the *candidate values* are their sensitive values. The join, ``join``:

* ``"pairwise"`` (the weaker adversary): for the latest view ``V_n`` and each earlier view
  ``V_i`` the linkage graph (:mod:`.linkage_graph`) joins their records; with ``pruned=True``
  only the edges on some maximum matching are used (the full matching join), else every
  consistent pair (the natural join). A candidate record is linked to some record of ``v``'s
  group in every earlier view in which ``v`` is published. More than two releases are thus joined
  pairwise with the latest one: a record must survive every pair, but the pairs are pruned
  separately, not as one multipartite perfect matching, and the earlier views are never joined
  with each other — an over-approximation of the adversary (she can rule out at least as much
  when the releases publish the same respondents).
* ``"joint"`` (the paper's adversary, :mod:`.joint_matching`): one clique of records, one in each
  view in which ``v`` is published, every two linked — with ``pruned=True`` a clique of some
  maximum joint assignment of the records of the respondents published in all those views (a
  perfect matching of the multipartite graph), else any clique. With two views publishing the same
  respondents the two joins agree.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import PublicView
from cdpbench.errors import require

from .joint_matching import JOINS, JointJoin
from .linkage_graph import LinkageGraph, Nodes, linkage_graph, prune, segments
from .transition_relation import as_relation


PAIR_TABLE_FLOOR = 1 << 12  # candidate_masks tables the pairs of groups when they are no more than max(respondents, this)


class Candidates:
    """Per respondent of the latest view (``respondent``, its row order): how many distinct values
    and how many records it can be linked to, and the candidate nodes (``row``, ``node``) pairs;
    ``graphs``: the pairwise join's linkage graphs (empty for the joint join), ``joint``: the joint
    join (None for the pairwise join). ``allowed`` (the pairwise join with some earlier view; else
    None): ``bool [p, m]``, the candidate values of each respondent; the pairs are then listed
    from it when first asked for (by respondent, then value: the order of the group's nodes)."""

    def __init__(self, respondent: np.ndarray, values: np.ndarray, records: np.ndarray, row: np.ndarray | None,
                 node: np.ndarray | None, nodes: Nodes, graphs: list[LinkageGraph], joint: JointJoin | None = None,
                 allowed: np.ndarray | None = None, group: np.ndarray | None = None):
        self.respondent = respondent  # int64 [p] the latest view's respondents (view order)
        self.values = values  # int64 [p] distinct candidate sensitive values
        self.records = records  # int64 [p] candidate records
        self._row, self._node = row, node
        self.nodes = nodes
        self.graphs = graphs
        self.joint = joint
        self.allowed = allowed
        self._group = group  # int64 [p] latest group of each respondent (to list the pairs from ``allowed``)

    def _pairs(self) -> None:
        if self._row is None:
            row, value = np.nonzero(self.allowed)
            self._row = row.astype(np.int64)
            self._node = _node_of(self.nodes, self._group[self._row], value.astype(np.int64), self.allowed.shape[1])

    def value_table(self, m: int) -> np.ndarray:
        """``bool [p, m]``: the candidate values of each respondent (row order of ``respondent``):
        ``allowed`` as the pairwise join made it, else set from the listed pairs."""
        if self.allowed is not None and self.allowed.shape == (len(self.respondent), m):
            return self.allowed
        table = np.zeros((len(self.respondent), m), dtype=bool)
        table[self.row, self.nodes.value[self.node]] = True
        return table

    @property
    def row(self) -> np.ndarray:
        """int64 [C] respondent row of each candidate node."""
        self._pairs()
        return self._row

    @property
    def node(self) -> np.ndarray:
        """int64 [C] node of the latest view (``nodes``)."""
        self._pairs()
        return self._node


def group_of(view: PublicView, respondent: np.ndarray) -> np.ndarray:
    """Group of each respondent in ``view`` (-1 where it is not published)."""
    return GroupLookup(view)(respondent)


class GroupLookup:
    """The group of any respondent id in one view (-1 where it is not published; an id listed
    twice: its first row, as :func:`cdpbench.data.rows_of`; a counterfeit's -1 is looked up like
    any other id). Built once per view, so an earlier release's view, which does not change, is
    asked about every candidate publication of the latest release without sorting it again: a
    dense table over the id range when the ids are dense enough (one gather per lookup), else
    one ``searchsorted`` over the sorted distinct ids."""

    def __init__(self, view: PublicView):
        ids = np.asarray(view.respondent, np.int64)
        group = np.asarray(view.group, np.int64)
        self.unique = True  # every id listed once (then the lookup does not depend on the row order)
        if len(ids):
            lo, hi = int(ids.min()), int(ids.max())
            if hi - lo < 4 * len(ids) + 1024:  # dense enough for a table (no sort): the first row of each id
                first = np.full(hi - lo + 1, len(ids), np.int64)
                np.minimum.at(first, ids - lo, np.arange(len(ids), dtype=np.int64))
                present = first < len(ids)
                self.ids = (np.flatnonzero(present) + lo).astype(np.int64)
                self.groups = group[first[present]]
                self.unique = len(self.ids) == len(ids)
                self.table = None
                if hi - lo < 4 * len(self.ids) + 1024:
                    self.base = lo
                    dtype = np.int32 if int(self.groups.max()) < 2**31 - 1 else np.int64
                    self.table = np.full(hi - lo + 1, -1, dtype=dtype)
                    self.table[present] = self.groups
                return
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        first = np.ones(len(ordered), dtype=bool)
        first[1:] = ordered[1:] != ordered[:-1]
        self.ids, self.groups = ordered[first], group[order[first]]
        self.unique = len(self.ids) == len(ids)
        self.table = None
        if len(self.ids) and int(self.ids[-1]) - int(self.ids[0]) < 4 * len(self.ids) + 1024:
            self.base = int(self.ids[0])
            dtype = np.int32 if int(self.groups.max()) < 2**31 - 1 else np.int64
            self.table = np.full(int(self.ids[-1]) - self.base + 1, -1, dtype=dtype)
            self.table[self.ids - self.base] = self.groups

    def __call__(self, respondent: np.ndarray) -> np.ndarray:
        respondent = np.asarray(respondent, np.int64)
        out = np.full(len(respondent), -1, np.int64)
        if len(self.ids) == 0:
            return out
        if self.table is not None:
            at = respondent - self.base
            ok = (at >= 0) & (at < len(self.table))
            out[ok] = self.table[at[ok]]
            return out
        pos = np.minimum(np.searchsorted(self.ids, respondent), len(self.ids) - 1)
        found = self.ids[pos] == respondent
        out[found] = self.groups[pos[found]]
        return out


def candidates(views: list[PublicView], *, transitions="none", pruned: bool = True,
               graphs: list[LinkageGraph] | None = None, join: str = "pairwise",
               joint: JointJoin | None = None, lookups: list[GroupLookup] | None = None) -> Candidates:
    """Candidate records and values of every respondent of ``views[-1]`` (module docstring);
    ``graphs`` may pass the pairwise join's linkage graphs ``(views[i], views[-1])`` already built,
    ``joint`` the joint join of ``views`` already built (its natural and matching candidates share
    it). ``join`` is ``"pairwise"`` here unless given: the plugins pass their parameter.
    ``transitions``: ``"none"``, ``"any"`` or a :class:`.transition_relation.TransitionRelation`
    (PD_cor, kind ``"knowledge"``). ``lookups`` may pass the :class:`GroupLookup` of each earlier
    view already built."""
    require(join in JOINS, "join", f"one of {list(JOINS)}", join)
    latest = views[-1]
    nodes = Nodes.of(latest)
    respondent = np.asarray(latest.respondent, np.int64)
    if join == "joint":
        as_relation(transitions)  # checked here: the joint join is built lazily
        if joint is None:
            joint = joint_join(views, transitions)
        row, node = joint.candidates(pruned)
        return _counted(respondent, row, node, nodes, [], joint)
    if graphs is None:
        graphs = []
        for earlier in views[:-1]:
            g = linkage_graph(earlier, latest, transitions)
            graphs.append(prune(g) if pruned else g)
    if lookups is None:
        lookups = [GroupLookup(v) for v in views[:-1]]
    if not graphs:  # nothing earlier: every node of the respondent's group
        g_now = np.asarray(latest.group, np.int64)
        ptr = nodes.ptr
        row, node = segments(ptr[g_now], ptr[g_now + 1] - ptr[g_now])
        return _counted(respondent, row, node, nodes, graphs, None)
    # a node (value s of the respondent's latest group) is a candidate iff bit s of the
    # respondent's candidate mask is set (:func:`candidate_masks`); the pairs are listed by
    # respondent, then value, which is the order of the group's nodes
    # the counts are read on the masks: values, the set bits; records, the records of the
    # group's node of each candidate value (integers: the same sums as over the listed pairs)
    m = max(int(v.schema.sensitive.size) for v in views)
    g_now = np.asarray(latest.group, np.int64)
    mask = candidate_masks(views, graphs, lookups)
    allowed = mask_table(mask, m)
    values = np.bitwise_count(mask).sum(axis=1).astype(np.int64)
    count_of = np.zeros((nodes.n_groups, m), np.int64)
    count_of[nodes.group, nodes.value] = nodes.count
    records = np.empty(len(respondent), np.int64)
    block = 1 << 14
    for start in range(0, len(respondent), block):
        stop = min(start + block, len(respondent))
        records[start:stop] = np.where(allowed[start:stop], count_of[g_now[start:stop]], 0).sum(axis=1)
    return Candidates(respondent, values, records, None, None, nodes, graphs, None, allowed=allowed, group=g_now)


def mask_table(mask: np.ndarray, m: int) -> np.ndarray:
    """``bool [rows, m]``: bit ``s`` of each row of ``mask`` (``uint64 [rows, words]``) at column
    ``s``; unpacked in blocks of rows (the words' bytes, least significant bit first)."""
    out = np.empty((len(mask), m), dtype=bool)
    block = 1 << 16
    for start in range(0, len(mask), block):
        part = np.ascontiguousarray(mask[start:start + block], dtype="<u8").view(np.uint8)
        out[start:start + block] = np.unpackbits(part, axis=1, bitorder="little")[:, :m].view(bool)
    return out


def _node_of(nodes: Nodes, group: np.ndarray, value: np.ndarray, m: int) -> np.ndarray:
    """The node ``(group, value)`` of ``nodes`` (each pair must be a node, values ``< m``): a
    dense table over ``(group, value)`` when it is no larger than the pairs asked, else a search
    (nodes are sorted by group then value: their keys ``group * m + value`` increase)."""
    keys = nodes.group * m + nodes.value
    want = group * m + value
    size = int(nodes.n_groups) * m
    if size <= max(2 * len(want), 1 << 16):
        table = np.full(size, -1, np.int64)
        table[keys] = np.arange(len(keys), dtype=np.int64)
        return table[want]
    return np.searchsorted(keys, want).astype(np.int64)


def joint_join(views: list[PublicView], transitions="none", prepared=None) -> JointJoin:
    """The joint join of ``views`` (:class:`.joint_matching.JointJoin`) for the respondents of the
    latest one; ``prepared`` may pass a :class:`.joint_matching.Prepared` kept between calls."""
    respondent = np.asarray(views[-1].respondent, np.int64)
    return JointJoin(views, [group_of(v, respondent) for v in views], transitions, prepared)


def _counted(respondent, row, node, nodes: Nodes, graphs, joint) -> Candidates:
    values = np.bincount(row, minlength=len(respondent)).astype(np.int64)  # one node per value in a group
    records = np.bincount(row, weights=nodes.count[node], minlength=len(respondent)).astype(np.int64)
    return Candidates(respondent, values, records, row, node, nodes, graphs, joint)


def candidate_values(views: list[PublicView], graphs: list[LinkageGraph], lookups: list[GroupLookup] | None = None) -> np.ndarray:
    """Distinct candidate values of every respondent of ``views[-1]`` (view order) through the
    pairwise join, the same numbers as ``candidates(views, graphs=graphs).values`` without listing
    the candidate nodes: what the anonymizers ask once per merge round, where only the counts
    matter (the joint join counts ``candidates(views, join="joint").values``).

    Read on the twin graph with value sets as bit masks (``uint64`` words): a value ``s`` of the
    respondent's latest group ``g`` is a candidate through the earlier view ``V_i`` when some
    node ``y`` of its group ``h`` there has a kept twin edge to ``(twin(g), s)`` — with values
    that persist, ``y`` is ``h``'s node of value ``s``, so the candidate mask is
    ``values(g) & values(h) & kept(twin(h), twin(g))``; with any transitions it is the union over
    ``h``'s nodes of the values their kept edges reach in ``twin(g)``. The masks of the earlier
    views are intersected, and the bits counted. ``lookups``: as for :func:`candidates`.
    """
    return np.bitwise_count(candidate_masks(views, graphs, lookups)).sum(axis=1).astype(np.int64)


def candidate_counts(views: list[PublicView], graphs: list[LinkageGraph],
                     lookups: list[GroupLookup] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(values, records)`` of every respondent of ``views[-1]`` through the pairwise join: the
    same numbers as ``candidates(views, graphs=graphs)``'s ``values`` and ``records``, read on the
    bit masks of :func:`candidate_values` (records: the records of the latest group holding a
    candidate value, summed one value at a time) without listing the candidate nodes."""
    mask = candidate_masks(views, graphs, lookups)
    values = np.bitwise_count(mask).sum(axis=1).astype(np.int64)
    latest = views[-1]
    g_now = np.asarray(latest.group, np.int64)
    b = Nodes.of(latest) if not graphs else graphs[0].b
    records = np.zeros(len(g_now), np.int64)
    for s in np.unique(b.value).tolist():  # one pass per sensitive value, not per record
        count = np.zeros(b.n_groups, np.int64)
        at = b.value == s
        count[b.group[at]] = b.count[at]
        bit = (mask[:, s // 64] >> np.uint64(s % 64)) & np.uint64(1)
        records += bit.astype(np.int64) * count[g_now]
    return values, records


def candidate_masks(views: list[PublicView], graphs: list[LinkageGraph], lookups: list[GroupLookup] | None = None,
                    groups_then: list[np.ndarray] | None = None) -> np.ndarray:
    """``uint64 [respondents, words]``: the candidate values of every respondent of ``views[-1]``
    through the pairwise join, one bit per value (:func:`candidate_values`). ``groups_then`` may
    pass each earlier view's group of every respondent (``lookups[i](respondent)``) already looked up.

    The mask of a respondent depends only on its groups ``(h_i, g)``: when the groups of an
    earlier view times those of the latest are no more than the respondents, the masks of every
    pair ``(h, g)`` (:func:`_linked_masks`, the same function of the pair) are tabled first and
    each respondent reads its pair's mask (one gather a view, in blocks of respondents); else
    each respondent's pair is computed."""
    latest = views[-1]
    respondent = np.asarray(latest.respondent, np.int64)
    g_now = np.asarray(latest.group, np.int64)
    m = max(int(v.schema.sensitive.size) for v in views)
    words = (m + 63) // 64
    b = Nodes.of(latest) if not graphs else graphs[0].b
    values_of_group = _value_masks(b, words)
    if groups_then is None:
        if lookups is None:
            lookups = [GroupLookup(v) for v in views[:-1]]
        groups_then = [lookup(respondent) for lookup in lookups]
    n, G = len(respondent), int(b.n_groups)
    tables = _pair_tables(graphs, values_of_group, n, words)
    if tables is None:  # too many pairs to table: each respondent's own pair
        mask = values_of_group[g_now]
        for g_then, graph in zip(groups_then, graphs):
            seen = g_then >= 0
            mask[seen] &= _linked_masks(graph, g_then[seen], g_now[seen], words)
        return mask
    mask = np.empty((n, words), dtype=np.uint64)
    block = 1 << 16
    for start in range(0, n, block):
        stop = min(start + block, n)
        g = g_now[start:stop]
        out = values_of_group[g]
        for g_then, table, graph in zip(groups_then, tables, graphs):
            h = g_then[start:stop]
            out &= table[np.where(h >= 0, h, int(graph.a.n_groups)) * G + g]
        mask[start:stop] = out
    return mask


def _pair_tables(graphs: list[LinkageGraph], values_of_group: np.ndarray, n: int, words: int) -> list[np.ndarray] | None:
    """For each earlier view ``i``: ``uint64 [(H_i + 1) * G, words]``, the linked mask
    (:func:`_linked_masks`) of every pair (group ``h`` of the earlier view, group ``g`` of the
    latest) at ``h * G + g``, and at ``H_i * G + g`` the values of ``g`` (a respondent not
    published then: no constraint). None when some ``H_i * G`` exceeds ``max(n, PAIR_TABLE_FLOOR)``."""
    G = len(values_of_group)
    tables = []
    for graph in graphs:
        H = int(graph.a.n_groups)
        if H * G > max(n, PAIR_TABLE_FLOOR):
            return None
        hh, gg = np.repeat(np.arange(H, dtype=np.int64), G), np.tile(np.arange(G, dtype=np.int64), H)
        tables.append(np.concatenate([_linked_masks(graph, hh, gg, words), values_of_group], axis=0))
    return tables


def combination_of(groups_then: list[np.ndarray], sizes: tuple[int, ...]) -> np.ndarray:
    """Each respondent's combination of earlier groups, row-major over ``(h_1, ..., h_v)`` with
    ``h_i`` in ``0..sizes[i] - 1`` (``sizes[i] - 1``: not published in view ``i``)."""
    combo = np.zeros(len(groups_then[0]) if groups_then else 0, np.int64)
    for size, h in zip(sizes, groups_then):
        combo *= size
        combo += np.where(h >= 0, h, size - 1)
    return combo


def groups_at_risk(views: list[PublicView], natural_graphs: list[LinkageGraph], graphs: list[LinkageGraph], k: int,
                   groups_then: list[np.ndarray], combination=combination_of) -> np.ndarray | None:
    """The groups of ``views[-1]`` (increasing) holding a respondent the natural join places (some
    candidate value through ``natural_graphs``) with fewer than ``k`` candidate values through
    ``graphs`` (the pairwise join, :func:`candidate_masks`): the same groups as counting every
    respondent's masks. ``groups_then``: each earlier view's group of every respondent.

    A respondent's masks depend only on its combination of groups ``(h_1, ..., g)`` (``h_i = H_i``
    where it is not published in view ``i``): when the combinations are no more than the
    respondents (``max(n, PAIR_TABLE_FLOOR)``), the two counts and the verdict are computed once
    per combination (the pair tables ANDed), and the respondents only say which combinations
    occur (one ``bincount``). None otherwise (the caller counts the masks)."""
    latest = views[-1]
    g_now = np.asarray(latest.group, np.int64)
    n = len(g_now)
    if not natural_graphs:
        return None
    m = max(int(v.schema.sensitive.size) for v in views)
    words = (m + 63) // 64
    b = natural_graphs[0].b
    G = int(b.n_groups)
    sizes = [int(graph.a.n_groups) + 1 for graph in natural_graphs]
    combos = int(np.prod(sizes, dtype=np.int64)) * G
    if combos > max(n, PAIR_TABLE_FLOOR):
        return None
    values_of_group = _value_masks(b, words)

    def counts(gs: list[LinkageGraph]) -> np.ndarray | None:
        tables = _pair_tables(gs, values_of_group, n, words)
        if tables is None:
            return None
        mask = np.broadcast_to(values_of_group, (*sizes, G, words)).copy()
        for i, table in enumerate(tables):
            shape = [1] * len(sizes) + [G, words]
            shape[i] = sizes[i]
            mask &= table.reshape(shape)
        return np.bitwise_count(mask).sum(axis=-1).astype(np.int64).ravel()

    natural = counts(natural_graphs)
    values = natural if graphs is natural_graphs else counts(graphs)
    if natural is None or values is None:
        return None
    at_risk = (natural >= 1) & (values < k)
    combo = combination(groups_then, tuple(sizes)) * G  # row-major over (h_1, ..., h_v), then g
    combo += g_now
    occurs = np.bincount(combo, minlength=combos) > 0
    return np.flatnonzero(np.bincount(np.flatnonzero(occurs & at_risk) % G, minlength=G)).astype(np.int64)


def _value_masks(nodes: Nodes, words: int) -> np.ndarray:
    """``uint64 [groups, words]``: the values present in each group, one bit per value."""
    out = np.zeros((nodes.n_groups, words), dtype=np.uint64)
    np.bitwise_or.at(out, (nodes.group, nodes.value // 64), np.left_shift(np.uint64(1), (nodes.value % 64).astype(np.uint64)))
    return out


def _twin_group_of(nodes: Nodes, twin: np.ndarray, twins: Nodes) -> np.ndarray:
    """Twin group of every group of ``nodes`` (all nodes of a group share it)."""
    return twins.group[twin[nodes.ptr[:-1]]]


def _linked_masks(graph: LinkageGraph, group_then: np.ndarray, group_now: np.ndarray, words: int) -> np.ndarray:
    """``uint64 [pairs, words]``: for pairs (group of the earlier view, group of the latest view),
    the values some record of the earlier group has a kept link to a record of that value in the
    latest group (every such value is in the latest group: the caller's mask of its values need
    not be applied again)."""
    ta, tb = graph.twins_a, graph.twins_b
    e = np.flatnonzero(graph.ckept)
    ca, cb = graph.cedge_a[e], graph.cedge_b[e]
    n_tb = int(tb.n_groups)
    tga = _twin_group_of(graph.a, graph.twin_a, ta)
    tgb = _twin_group_of(graph.b, graph.twin_b, tb)
    bit_word, bit = tb.value[cb] // 64, np.left_shift(np.uint64(1), (tb.value[cb] % 64).astype(np.uint64))
    if graph.transitions == "none":  # kept[(twin(h), twin(g))] = values s with a kept edge (twin(h), s) - (twin(g), s)
        key = ta.group[ca] * n_tb + tb.group[cb]
        want = tga[group_then] * n_tb + tgb[group_now]
        reach = _or_by_key(key, bit_word, bit, want, words, int(ta.n_groups) * n_tb)
        return reach & _value_masks(graph.a, words)[group_then]
    key = ca * n_tb + tb.group[cb]  # (twin node of a, twin group of b) -> values of b reached
    ptr = graph.a.ptr
    rep, ya = segments(ptr[group_then], ptr[group_then + 1] - ptr[group_then])
    reach = _or_by_key(key, bit_word, bit, graph.twin_a[ya] * n_tb + tgb[group_now][rep], words, len(ta.count) * n_tb)
    out = np.zeros((len(group_then), words), dtype=np.uint64)
    np.bitwise_or.at(out, rep, reach)
    return out


def _or_by_key(key: np.ndarray, word: np.ndarray, bit: np.ndarray, want: np.ndarray, words: int,
               size: int | None = None) -> np.ndarray:
    """For each ``want``: the OR of the bits of the entries with that ``key`` (0 where none).
    ``size``: the keys lie in ``0..size-1``; when that range is no larger than the lookups, the
    table is dense over it and each lookup is one gather (no sort, no search)."""
    if size is not None and size * words <= max(4 * len(want), 1 << 16):
        dense = np.zeros((size, words), dtype=np.uint64)
        np.bitwise_or.at(dense, (key, word), bit)
        return dense[want]
    uniq, inv = np.unique(key, return_inverse=True)
    table = np.zeros((len(uniq), words), dtype=np.uint64)
    np.bitwise_or.at(table, (inv.ravel(), word), bit)
    out = np.zeros((len(want), words), dtype=np.uint64)
    if len(uniq):
        pos = np.minimum(np.searchsorted(uniq, want), len(uniq) - 1)
        hit = uniq[pos] == want
        out[hit] = table[pos[hit]]
    return out
