"""What ``k_linkability`` and ``k_diversity`` share: privacy models of sequential releases, verified against
the whole history (after Shmueli et al., "Limiting disclosure of sensitive data in sequential
releases of databases", Inf. Sci. 2012, and Shmueli & Tassa, "Privacy by diversity in sequential
releases of databases", Inf. Sci. 2015 — neither is in the lab's papers folder; the definitions
below are the lab's statement of them, see the package README).

Both require that every respondent of the latest release can be linked, through the join of all
releases so far, to at least ``k`` distinct sensitive values (:mod:`.linkability`):

* ``k_linkability`` joins with the natural join: every pair of records whose generalized QIs are
  consistent on the shared attributes (and whose values are compatible) is a link;
* ``k_diversity`` joins with the full matching join: only the links that lie on some maximum
  matching of the linkage graph (so it is the stricter of the two: fewer links, fewer values).

More than two releases are joined as ``join`` says (:mod:`.linkability`): ``"joint"``, the
paper's adversary, one clique of records across all the releases a respondent is in (for
``k_diversity``, a clique of some maximum joint assignment: :mod:`.joint_matching`), or
``"pairwise"`` (the default), the weaker adversary, the latest release with each earlier one
separately.

A respondent the natural join links to no record at all (its value changed while
``transitions="none"`` assumes values persist) is not counted: the adversary's assumption fails for
it and she cannot place it, so no value of it is disclosed. Whether a respondent is placed is
decided on the natural join (of the same ``join``) for both models, so k-diversity stays the stricter (a respondent the
pruning leaves with no link is at risk under it). ``levels`` report the fewest candidates among the
respondents with some candidate, and how many have none (``unplaced``).

``accepts_publication`` judges a whole candidate publication with the history (what top-down
anonymizers ask: ``cell``, ``tds4asr``); ``violating_groups`` lists the groups of a publication holding a respondent below ``k`` (what the
``ksaa`` anonymizer merges). ``accepts`` judges single candidate groups without the history: at least ``k`` distinct values in
the group, necessary for both (a respondent's candidate values lie in its group). ``verify`` builds
the public views of every release of the run and counts the groups of the latest release holding
a respondent below ``k``; ``levels``: the fewest candidate values of any respondent
(``linkable_values``) and the fewest candidate records (``linkable_records``).

Both models are :class:`LinkabilityModel` with their join (``pruned``):
``cdpbench_ksaa.privacy_models.k_linkability`` and ``cdpbench_ksaa.privacy_models.k_diversity``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cdpbench.data import GroupBatch, PublicView, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport, plugin_ref

from .joint_matching import JOINS, Prepared
from .linkability import GroupLookup, candidate_counts, candidate_masks, candidates, combination_of, groups_at_risk, joint_join
from .transition_relation import (MIN_TRANSITION_HELP, PD_COR_HELP, TRANSITIONS, TRANSITIONS_HELP, RelationOf,
                                  check_min_transition, check_pd_cor)

JOIN_HELP = (
    "how more than two releases are joined. 'joint' (the paper's adversary, KSAA §1; slower, integer "
    "programs): a respondent's candidate records are the records of its latest group that lie in one "
    "clique with a record of its group in every other release it is published in, every two records "
    "linked (k_diversity: only cliques of some maximum joint assignment of the records of the respondents "
    "published in all those releases, a perfect matching of their multipartite graph when one exists). "
    "'pairwise' (the weaker adversary, an over-approximation of what she can link when the releases "
    "publish the same respondents and values persist): a candidate record needs a link to the "
    "respondent's group in each earlier release separately, through the linkage graph of that release "
    "and the latest one alone (k_diversity: each pair pruned to the edges on some maximum matching of its "
    "own); the earlier releases are never joined with each other"
)


@dataclass
class LinkabilityParams:
    k: int = field(default=2, metadata={"help": "distinct sensitive values every respondent must be linkable to (>= 1)"})
    transitions: str = field(default="none", metadata={"help": TRANSITIONS_HELP})
    join: str = field(default="pairwise", metadata={"help": JOIN_HELP})
    min_transition: float = field(default=0.0, metadata={"help": MIN_TRANSITION_HELP})
    pd_cor: Any = plugin_ref("knowledge", "bayframe", PD_COR_HELP)

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(self.transitions in TRANSITIONS, "transitions", f"one of {list(TRANSITIONS)}", self.transitions)
        require(self.join in JOINS, "join", f"one of {list(JOINS)}", self.join)
        check_min_transition(self.min_transition)

    def check_references(self) -> None:
        check_pd_cor(self)


class LinkabilityModel(PrivacyModel):
    """Every respondent of the latest release linkable to >= k distinct values through the join of
    the releases so far: the natural join, or the full matching join when ``pruned`` (see the
    module docstring); ``k_linkability`` and ``k_diversity`` are its subclasses."""

    Params = LinkabilityParams
    pruned: ClassVar[bool]  # False: the natural join (k-linkability); True: the full matching join (k-diversity)

    def __init__(self, params=None):
        super().__init__(params)
        self._earlier: list = []  # (publication, its public view, {columns: Side}) of the history
        self._prepared = Prepared()  # the joint join's parts of the views (join="joint")
        self._relation = RelationOf(self.params)  # transitions (PD_cor built per release)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return (batch.counts() > 0).sum(axis=1) >= self.params.k

    def _views(self, publication: Publication, ctx: ModelContext, own: bool = False):
        """The views of the history and ``publication``. The earlier views, and their sides of
        the pairwise join, are kept on the instance for as long as their publications are in the
        history: ``ksaa`` asks about many candidates of one release against the same history.
        ``own``: the latest one as :func:`own_view` (the pairwise counts, which do not depend on
        its row order), not sorted as an adversary's view, and the earlier ones too
        (:func:`_earlier_own`; kept apart from the sorted ones)."""
        attr = "_earlier_own" if own else "_earlier"
        before = getattr(self, attr, [])
        kept = []
        for p in ctx.history.publications:
            entry = next((e for e in before if e[0] is p), None)
            kept.append(entry if entry is not None else (_earlier_own(p) if own else (p, p.public(), {})))
        setattr(self, attr, kept)
        self._kept = kept
        return [v for _, v, _ in kept] + [own_view(publication) if own else publication.public()]

    def _joint(self, publication: Publication, ctx: ModelContext):
        """``(views, natural, cand)``: the candidates (:class:`.linkability.Candidates`) through
        the joint join's cliques, and through this model's join (the joint matching when
        ``pruned``), from one joint join."""
        views = self._views(publication, ctx)
        self._prepared.forget_except(views)
        t = self._relation(ctx.release, len(views))
        join = joint_join(views, t, self._prepared)
        natural = candidates(views, transitions=t, pruned=False, join="joint", joint=join)
        cand = candidates(views, transitions=t, pruned=True, join="joint", joint=join) if self.pruned else natural
        return views, natural, cand

    def _graphs(self, publication: Publication, ctx: ModelContext, own: bool = False):
        """The views of the history and ``publication``, the natural-join graphs of each earlier
        view with the latest one (the pairwise join), and each earlier view's
        :class:`.linkability.GroupLookup` (kept with its sides: built once per earlier view).
        ``own``: as for :meth:`_views` (the earlier views too: :func:`_earlier_own`)."""
        from .linkage_graph import Nodes, Side, linkage_graph, shared_columns

        views = self._views(publication, ctx, own)
        kept = self._kept
        latest = views[-1]
        nodes_b = Nodes.of(latest) if kept else None  # counted once for every earlier view
        graphs = []
        for _, view, sides in kept:
            cols = tuple((ja, cat) for ja, _, cat in shared_columns(view, latest))
            if cols not in sides:
                sides[cols] = Side.of(view, cols)
            graphs.append(linkage_graph(view, latest, self._relation(ctx.release, len(views)), side_a=sides[cols], nodes_b=nodes_b))
            if "group_of" not in sides:
                sides["group_of"] = GroupLookup(view)
        return [v for _, v, _ in kept] + [latest], graphs, [sides["group_of"] for _, _, sides in kept]

    def linked(self, publication: Publication, ctx: ModelContext):
        """``(latest view, its respondents' candidates through this model's join, at-risk mask)``:
        the record-level reading (:func:`.linkability.candidates`) that ``verify`` reports."""
        from .linkage_graph import prune

        if self.params.join == "joint":
            views, natural, cand = self._joint(publication, ctx)
        else:
            views, natural_graphs, lookups = self._graphs(publication, ctx)
            t = self._relation(ctx.release, len(views))
            natural = candidates(views, transitions=t, pruned=False, graphs=natural_graphs, lookups=lookups)
            cand = natural
            if self.pruned:
                cand = candidates(views, transitions=t, pruned=True, graphs=[prune(g) for g in natural_graphs], lookups=lookups)
        # placed = the natural join links the respondent to something (module docstring)
        at_risk = (natural.values >= 1) & (cand.values < self.params.k)
        return views[-1], cand, at_risk

    def violating_groups(self, publication: Publication, ctx: ModelContext) -> np.ndarray:
        """Groups of ``publication`` holding a respondent below ``k``: the same at-risk set as
        :meth:`linked`, counted on bit masks (:func:`.linkability.candidate_values`), which is
        what ``ksaa`` asks once per merge round."""
        from .linkage_graph import prune

        if self.params.join == "joint":
            views, natural_c, cand = self._joint(publication, ctx)
            natural, values = natural_c.values, cand.values
        else:
            views, natural_graphs, lookups = self._graphs(publication, ctx, own=True)
            groups_then = self._groups_then(views[-1], lookups)
            graphs = [prune(g) for g in natural_graphs] if self.pruned else natural_graphs
            groups = groups_at_risk(views, natural_graphs, graphs, self.params.k, groups_then, self._combination)
            if groups is not None:  # counted once per combination of groups
                return groups
            natural = _bits(candidate_masks(views, natural_graphs, lookups, groups_then))
            values = _bits(candidate_masks(views, graphs, lookups, groups_then)) if self.pruned else natural
        at_risk = (natural >= 1) & (values < self.params.k)
        return _groups_holding(np.asarray(views[-1].group), at_risk, views[-1].n_groups)

    def _groups_then(self, latest: PublicView, lookups: list[GroupLookup]) -> list[np.ndarray]:
        """Each earlier view's group of every respondent of ``latest`` (row order). The candidate
        publications of one release publish the same respondents in the same rows: the groups
        looked up for the last ones asked about are kept with the lookups they came from and
        reused while the respondents are the same."""
        respondent = np.asarray(latest.respondent, np.int64)
        last = getattr(self, "_last_groups_then", None)
        if (last is not None and len(last[1]) == len(lookups) and all(x is y for x, y in zip(last[1], lookups))
                and len(last[0]) == len(respondent) and np.array_equal(last[0], respondent)):
            return last[2]
        groups = [lookup(respondent) for lookup in lookups]
        self._last_groups_then = (respondent.copy(), list(lookups), groups, {})
        return groups

    def _combination(self, groups_then: list[np.ndarray], sizes: tuple[int, ...]) -> np.ndarray:
        """:func:`.linkability.combination_of` the kept groups (:meth:`_groups_then`), kept with them."""
        last = getattr(self, "_last_groups_then", None)
        if last is None or last[2] is not groups_then:
            return combination_of(groups_then, sizes)
        if sizes not in last[3]:
            last[3][sizes] = combination_of(groups_then, sizes)
        return last[3][sizes]

    def accepts_publication(self, publication: Publication, ctx: ModelContext) -> bool:
        """The whole candidate publication joined with the history: no respondent below ``k``."""
        return len(self.violating_groups(publication, ctx)) == 0

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        """The report of :meth:`linked`'s reading; the pairwise join counted on bit masks
        (:func:`.linkability.candidate_counts`: the same numbers without listing every
        respondent's candidate nodes)."""
        from .linkage_graph import prune

        if self.params.join == "joint":
            view, cand, at_risk = self.linked(publication, ctx)
            values, records = cand.values, cand.records
        else:
            views, natural_graphs, lookups = self._graphs(publication, ctx, own=True)  # counts: any row order
            view = views[-1]
            natural, records = candidate_counts(views, natural_graphs, lookups)
            values = natural
            if self.pruned:
                values, records = candidate_counts(views, [prune(g) for g in natural_graphs], lookups)
            at_risk = (natural >= 1) & (values < self.params.k)
        groups = np.unique(np.asarray(view.group)[at_risk])
        placed = values > 0
        levels = {
            "linkable_values": float(values[placed].min()) if placed.any() else 0.0,
            "linkable_records": float(records[placed].min()) if placed.any() else 0.0,
            "unplaced": float((~placed).sum()),
        }
        return VerifyReport(len(groups) == 0, int(len(groups)), levels)



def own_view(publication: Publication) -> PublicView:
    """The defender's view of its own candidate ``publication`` for the pairwise counts: the
    public view's columns (group, respondent, sensitive value of every record, the groups'
    regions) in the publication's row order, not sorted by group as :meth:`Publication.public`
    sorts them for an adversary (two sorts of every record). Every number the model reads from
    the latest view is a per-record function of ``(group, respondent)`` or a per-group count of
    values, so it does not depend on the row order. An angelized publication: its public view."""
    if publication.bucket is not None:
        return publication.public()
    return PublicView(t=publication.t, schema=publication.schema, group=publication.group,
                      respondent=publication.respondent, sensitive=publication.sensitive, low=publication.low,
                      high=publication.high, value_sets=publication.value_sets,
                      suppressed_count=len(publication.suppressed))


def _earlier_own(publication: Publication):
    """``(publication, view, sides)`` of an earlier publication for the pairwise counts: its
    :func:`own_view` when every respondent is listed once (its group lookup, the only per-record
    reading of an earlier view, is then the same in any row order; built here and kept with its
    sides), else its public view."""
    view = own_view(publication)
    lookup = GroupLookup(view)
    if not lookup.unique:
        view = publication.public()
        lookup = GroupLookup(view)
    return publication, view, {"group_of": lookup}


def _bits(mask: np.ndarray) -> np.ndarray:
    """Set bits of every row of ``uint64 [rows, words]`` (:func:`.linkability.candidate_values`)."""
    return np.bitwise_count(mask).sum(axis=1).astype(np.int64)


def _groups_holding(group: np.ndarray, at_risk: np.ndarray, n_groups: int) -> np.ndarray:
    """``np.unique(group[at_risk])``: the groups holding an at-risk record, increasing, counted
    over the group ids (no sort)."""
    return np.flatnonzero(np.bincount(group[at_risk], minlength=int(n_groups))).astype(np.int64)
