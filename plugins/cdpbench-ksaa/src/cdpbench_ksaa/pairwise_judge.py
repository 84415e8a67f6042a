"""The groups a linkability model (``k_linkability``, ``k_diversity``: :mod:`.linkability_models`)
rejects, for the many candidate publications of one release that ``ksaa`` asks about (KSAA §1,
step 2, "check of the join"; issue #28, scale): the same groups as the model's
``violating_groups``, with each respondent's part of the history computed once per release.

Under the pairwise join with values that persist (``join="pairwise"``, ``transitions="none"``), a
respondent ``r`` of the latest view, in group ``g`` there and in group ``h_i`` of each earlier view
``V_i`` where it is published, has the candidate values (:func:`.linkability.candidate_masks`)

    values(g) & AND_i [ values_i(h_i) & reach_i(twin_i(h_i), twin(g)) ]

where ``reach_i`` is the OR of the values of the kept twin edges between the two twin groups
(:func:`.linkability._linked_masks`). The earlier views do not change while the candidates of one
release are judged, so ``W(r) = AND_i values_i(h_i)`` and the twin groups ``twin_i(h_i)`` are a
fixed per-respondent part, kept while the respondents (in row order) and the earlier views' sides
are the same; a candidate publication only brings its own ``values(g)``, its twin groups and the
``reach_i`` tables (twin-level, small). The per-respondent work of a candidate is then a few
gathers and ANDs of one ``uint64`` word per 64 values, instead of recomputing every respondent's
pair of groups (unique keys, searches, boolean-mask writes) twice per candidate. The counts are
the same integers, so the verdict is the same; the other cases (the joint join, any other
transitions, a bucketized publication, no earlier view) are the model's own ``violating_groups``.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import Publication
from cdpbench.plugin import ModelContext

from .linkability import _twin_group_of, _value_masks
from .linkage_graph import LinkageGraph, prune


class PairwiseJudge:
    """``violating_groups(publication)`` of ``model`` in ``ctx`` (module docstring)."""

    def __init__(self, model, ctx: ModelContext):
        self.model = model
        self.ctx = ctx
        self._fixed: tuple | None = None  # (respondent, twin_a of each graph, lookups, words, W, twin_then)

    @staticmethod
    def applies(model) -> bool:
        """A :class:`~.linkability_models.LinkabilityModel` judging with its own
        ``violating_groups`` (not one replaced on the instance or overridden by a subclass),
        under the pairwise join with values that persist: what the per-respondent part assumes."""
        from .linkability_models import LinkabilityModel

        return (isinstance(model, LinkabilityModel) and "violating_groups" not in vars(model)
                and type(model).violating_groups is LinkabilityModel.violating_groups
                and model.params.join == "pairwise" and model.params.transitions == "none")

    def __call__(self, publication: Publication) -> np.ndarray:
        model, ctx = self.model, self.ctx
        if publication.bucket is not None or not ctx.history.publications:
            return np.asarray(model.violating_groups(publication, ctx), np.int64)
        views, natural_graphs, lookups = model._graphs(publication, ctx, own=True)
        latest = views[-1]
        words = (max(int(v.schema.sensitive.size) for v in views) + 63) // 64
        group = np.asarray(latest.group, np.int64)
        history, twin_then = self._history_part(np.asarray(latest.respondent, np.int64), natural_graphs, lookups, words)
        values_of_group = _value_masks(natural_graphs[0].b, words)
        own = [np.ascontiguousarray(values_of_group[:, w])[group] & history[w] for w in range(words)]  # values(g) & W(r)
        pairs = []  # per earlier view: each respondent's (twin_i(h_i), twin(g)) as twin_i(h_i) * n_tb + twin(g)
        for graph, twin_h in zip(natural_graphs, twin_then):
            pair = twin_h * int(graph.twins_b.n_groups)
            pair += _twin_group_of(graph.b, graph.twin_b, graph.twins_b)[group]
            pairs.append(pair)
        natural = _candidate_values(own, natural_graphs, pairs, len(group))
        values = natural
        if model.pruned:  # pruning keeps the nodes and twins: the same pairs
            values = _candidate_values(own, [prune(g) for g in natural_graphs], pairs, len(group))
        at_risk = (natural >= 1) & (values < model.params.k)
        return np.flatnonzero(np.bincount(group[at_risk], minlength=int(latest.n_groups))).astype(np.int64)

    def _history_part(self, respondent: np.ndarray, graphs: list[LinkageGraph], lookups, words: int):
        """``(W, twin_then)``: per word of 64 values, ``uint64 [n]`` the values of every
        respondent's earlier groups ANDed (all ones where it is not published); per earlier view,
        ``int64 [n]`` the twin group of the respondent's group there (``n_twins`` where it is not
        published: the all-ones row of the reach table). Kept while the respondents and the
        earlier views' sides are the same."""
        fixed = self._fixed
        if (fixed is not None and fixed[3] == words and len(fixed[1]) == len(graphs)
                and all(x is g.twin_a for x, g in zip(fixed[1], graphs))
                and all(x is y for x, y in zip(fixed[2], lookups))
                and len(fixed[0]) == len(respondent) and np.array_equal(fixed[0], respondent)):
            return fixed[4], fixed[5]
        history = np.full((len(respondent), words), ALL, dtype=np.uint64)
        twin_then = []
        for graph, lookup in zip(graphs, lookups):
            h = lookup(respondent)
            seen = h >= 0
            history[seen] &= _value_masks(graph.a, words)[h[seen]]
            n_twins = int(graph.twins_a.n_groups)
            twin_then.append(np.where(seen, _twin_group_of(graph.a, graph.twin_a, graph.twins_a)[np.maximum(h, 0)],
                                      n_twins).astype(np.int64))
        history = [np.ascontiguousarray(history[:, w]) for w in range(words)]
        self._fixed = (respondent.copy(), [g.twin_a for g in graphs], list(lookups), words, history, twin_then)
        return history, twin_then


ALL = np.iinfo(np.uint64).max  # every value of a word
DENSE_REACH_FLOOR, DENSE_REACH_RATIO = 1 << 16, 4  # _reach: a dense table when no larger than max(RATIO * lookups, FLOOR)


def _candidate_values(own: list[np.ndarray], graphs: list[LinkageGraph], pairs: list[np.ndarray], n: int) -> np.ndarray:
    """Set bits of ``own & AND_i reach_i(twin_i(h_i), twin(g))`` per respondent (module
    docstring), one word of 64 values at a time."""
    count = np.zeros(n, np.int64)
    for w, own_w in enumerate(own):
        mask = own_w.copy()
        for graph, pair in zip(graphs, pairs):
            mask &= _reach(graph, w, pair)
        count += np.bitwise_count(mask)
    return count


def _reach(graph: LinkageGraph, word: int, pair: np.ndarray) -> np.ndarray:
    """``uint64 [len(pair)]``: word ``word`` of ``reach(a, b)`` at each ``pair = a * n_tb + b``:
    the OR of the value bits of the kept twin edges between twin group ``a`` of the earlier view
    and twin group ``b`` of the latest; at ``a = n_ta`` (not published then) every value. A dense
    table over the pairs when it is no larger than the lookups, else a search over the pairs with
    some kept edge."""
    ta, tb = graph.twins_a, graph.twins_b
    n_ta, n_tb = int(ta.n_groups), int(tb.n_groups)
    e = np.flatnonzero(graph.ckept)
    ca, cb = graph.cedge_a[e], graph.cedge_b[e]
    on = tb.value[cb] // 64 == word
    key = ta.group[ca[on]] * n_tb + tb.group[cb[on]]
    bit = np.left_shift(np.uint64(1), (tb.value[cb[on]] % 64).astype(np.uint64))
    size = (n_ta + 1) * n_tb
    if size <= max(DENSE_REACH_RATIO * len(pair), DENSE_REACH_FLOOR):
        table = np.zeros(size, np.uint64)
        np.bitwise_or.at(table, key, bit)
        table[n_ta * n_tb:] = ALL
        return table[pair]
    uniq, inv = np.unique(key, return_inverse=True)
    table = np.zeros(len(uniq), np.uint64)
    np.bitwise_or.at(table, inv.ravel(), bit)
    out = np.where(pair >= n_ta * n_tb, ALL, np.uint64(0)).astype(np.uint64)
    if len(uniq):
        pos = np.minimum(np.searchsorted(uniq, pair), len(uniq) - 1)
        hit = uniq[pos] == pair
        out[hit] = table[pos[hit]]
    return out
