"""``ksaa``: the knowledge-based sequential anonymization algorithm (KSAA, Amiri et al., Inf. Sci.
2018, §1 — the only part of the paper that is public; the steps below are the three its
introduction names, the rest is the lab's reading, listed in the package README).

1. **Primary groups** that satisfy the privacy model in the current release: a bottom-up, local
   generalization anonymizer, a plugin reference (``base``, default ``js_reduce``: Hilbert order
   and greedy groups, any privacy model; its parameters are ``anonymizer.base.<param>``, e.g.
   ``anonymizer.base.leftovers=merge`` so that no record is suppressed, as the presets set).
2. **Check of the join** with the earlier releases: the run's privacy model, when it judges the
   history (``violating_groups``: ``k_linkability``, ``k_diversity``, ``j_similarity_join``), names
   the groups of the current release holding a respondent it finds at risk.
3. **Merge** every violating group with the group closest in QI (:mod:`~cdpbench_ksaa.nearest_group`: the
   nearest centre of the published boxes, each QI scaled by its domain width, ties to the group
   whose first record comes first), all merges of a round at once (connected pairs become one
   group), and check again; repeat until no group violates the model or one group is left.

A merged group's box is the smallest box around its records (local generalization). Merging can
only add links (a wider box is consistent with more records; a larger group holds more values),
so the rounds end. Often a few groups keep violating for hundreds of rounds, each absorbing its
nearest group every round (on 30,162 Adult records at k = 2, one group for 310 of 332 rounds; on
the synthetic 10^5-record scale case, release 3, three groups for 170 of 188 rounds). With
``search="bisect"`` (the default) such a tail is found without judging every round: the rounds the
violating groups would take (each merged with its nearest other group, all at once, as one round
does) are followed without publishing, and the number of rounds is found by doubling and
bisection, judging the publication only at the probed numbers: the first at which the judge names
anything but exactly the grown groups. When the model's verdict is monotone along the rounds (a
grown group, once it stops violating, stays so, and no other group starts), this is the
publication of ``search="rounds"``, one round at a time; when it is not (the full matching join is
global), it is a publication where the judge's verdict changed with one round fewer still
unchanged. ``info``: ``merge_rounds`` (rounds, each round of a tail counted),
``merged_groups`` (violating groups merged, summed over the rounds) and ``judged``
(publications the model judged), ``violating_left`` (groups the judge still rejects in the
publication: 0 unless ``max_rounds`` stopped the merge or no group was left to merge with). Under the pairwise join with values that persist, a candidate is
judged by :class:`~cdpbench_ksaa.pairwise_judge.PairwiseJudge` (the model's verdict, each
respondent's part of the history computed once per release).

``repair="split"`` (not in the paper; default ``"none"``): KSAA's own model, ``j_similarity_join``,
is not monotone under merging (a large group mixes respondents whose restricted beliefs differ),
so merge-until-valid can end with groups it still rejects; each is then split by its
respondents' joined beliefs and judged again (:mod:`~cdpbench_ksaa.belief_split`; ``info``:
``split_rounds``, ``split_violating`` — the groups still rejected after the last round).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext, plugin_ref

from ..nearest_group import NearestGroups
from ..pairwise_judge import PairwiseJudge


@dataclass
class KSAAParams:
    base: Any = plugin_ref(
        "anonymizer", "js_reduce",
        "anonymizer plugin giving the primary groups (bottom-up, local generalization; KSAA §1 step 1); "
        "anonymizer.base.<param> sets its parameters (the presets: anonymizer.base.leftovers=merge)",
    )
    max_rounds: int = field(default=1000, metadata={"help": "merge rounds before giving up (>= 1)"})
    search: str = field(
        default="bisect",
        metadata={"help": "'bisect': the rounds a tail of violating groups takes found by doubling and bisection; 'rounds': one merge round at a time, each judged"},
    )
    repair: str = field(
        default="none",
        metadata={"help": "after merge-until-valid: 'none' (publish as merged) or 'split' (the lab's repair for KSAA's own "
                  "model, j_similarity_join: each group still rejected split by its respondents' joined beliefs, the "
                  "parts the inner model rejects merged with the part of most similar beliefs; judged again, up to "
                  "repair_rounds rounds)"},
    )
    repair_rounds: int = field(default=10, metadata={"help": "repair=split: split rounds at most (>= 1)"})

    def __post_init__(self) -> None:
        require(isinstance(self.max_rounds, int) and not isinstance(self.max_rounds, bool) and self.max_rounds >= 1,
                "max_rounds", "an integer >= 1", self.max_rounds)
        require(self.search in ("bisect", "rounds"), "search", "one of ['bisect', 'rounds']", self.search)
        require(self.repair in ("none", "split"), "repair", "one of ['none', 'split']", self.repair)
        require(isinstance(self.repair_rounds, int) and not isinstance(self.repair_rounds, bool) and self.repair_rounds >= 1,
                "repair_rounds", "an integer >= 1", self.repair_rounds)


class KSAA(Anonymizer):
    """KSAA (Amiri et al. 2018): primary groups by a bottom-up anonymizer, then groups the join with earlier releases breaks merged with their QI-nearest group."""

    Params = KSAAParams

    def __init__(self, params=None):
        super().__init__(params)
        self.base: Anonymizer = self.params.base
        self.needs_prior = bool(getattr(self.base, "needs_prior", False))

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        primary = self.base.publish(release, ctx)
        judge = getattr(ctx.privacy_model, "violating_groups", None)
        pub, rounds, merged, judged, bad = primary, 0, 0, 0, np.zeros(0, np.int64)
        if judge is not None:
            if PairwiseJudge.applies(ctx.privacy_model):  # the same verdicts, the history's part kept per release
                merger = _Merger(release, PairwiseJudge(ctx.privacy_model, ctx.model_context))
            else:
                merger = _Merger(release, lambda q: np.asarray(judge(q, ctx.model_context), dtype=np.int64))
            bad = merger.judge(primary)
            while len(bad) and pub.n_groups > 1 and merger.rounds < self.params.max_rounds:
                before = merger.rounds
                if self.params.search == "bisect":
                    pub, bad = merger.absorb(pub, bad, self.params.max_rounds - merger.rounds)
                else:
                    pub, bad = merger.merge_round(pub, bad)
                if merger.rounds == before:  # nothing left to merge with
                    break
            rounds, merged, judged = merger.rounds, merger.merged, merger.judged
        repaired = None
        if self.params.repair == "split":
            require(judge is not None and hasattr(ctx.privacy_model, "joined_batch"), "repair",
                    "'none' unless the privacy model gives joined beliefs ('split' needs privacy_model=j_similarity_join)",
                    self.params.repair)
            if len(bad):
                pub, bad, repaired = merger.split(pub, bad, ctx, self.params.repair_rounds)
                judged = merger.judged
        pub.info.update(primary.info)
        pub.info.update({"merge_rounds": float(rounds), "merged_groups": float(merged), "judged": float(judged),
                         "violating_left": float(len(bad))})
        if self.params.repair == "split":
            pub.info.update({"split_rounds": float(repaired or 0), "split_violating": float(len(bad))})
        return pub


class _Merger:
    """KSAA's merge step on one release: publications of record labels, the model's judge, and
    the counters (module docstring)."""

    def __init__(self, release: Release, judge):
        self.release = release
        self._judge = judge
        schema = release.schema
        self.widths = np.where(schema.widths > 0, schema.widths, 1.0)
        self.rounds = self.merged = self.judged = 0
        self._own = weakref.WeakValueDictionary()  # id -> a publication this merger built (publish_merged's fast path)

    def judge(self, pub: Publication) -> np.ndarray:
        self.judged += 1
        return self._judge(pub)

    def publish(self, labels: np.ndarray) -> Publication:
        """The publication of record labels, its groups numbered by their first record (so the
        same partition is the same publication, whichever merges led to it)."""
        rows = np.flatnonzero(labels >= 0)
        first = np.full(int(labels.max(initial=-1)) + 1, len(labels), dtype=np.int64)
        np.minimum.at(first, labels[rows], rows)
        pub = Publication.from_partition(self.release, np.where(labels >= 0, first[np.maximum(labels, 0)], -1))
        self._own[id(pub)] = pub
        return pub

    def publish_merged(self, pub: Publication, into: np.ndarray) -> Publication:
        """The publication :meth:`publish` gives when the groups of ``pub`` are merged as ``into``
        maps them (group -> the group it joins), built from the groups' boxes instead of the
        records: a merged group's box is the smallest box around its records, so its numeric
        bounds are the extremes of its groups' bounds and a categorical QI's node is the smallest
        one covering its groups' nodes (each already the smallest covering its records). Only for
        a publication :meth:`publish` made (a partition of real records, taxonomy nodes): the
        others go through :meth:`publish`."""
        if self._own.get(id(pub)) is not pub:
            labels = self.labels(pub)
            return self.publish(np.where(labels >= 0, into[np.maximum(labels, 0)], -1))
        G = pub.n_groups
        first = np.full(G, np.iinfo(np.int64).max)
        np.minimum.at(first, pub.group, pub.row)  # each group's first record
        reps = np.unique(into)
        lead = np.full(G, np.iinfo(np.int64).max)
        np.minimum.at(lead, into, first)  # each merged group's first record
        renumber = np.empty(G, dtype=np.int64)
        renumber[reps[np.argsort(lead[reps], kind="stable")]] = np.arange(len(reps))  # numbered by first record
        new_of = renumber[into]
        low = np.full((len(reps), pub.low.shape[1]), np.inf)
        high = np.full_like(low, -np.inf)
        np.minimum.at(low, new_of, pub.low)
        np.maximum.at(high, new_of, pub.high)
        schema = self.release.schema
        value_sets: dict[int, np.ndarray] = {}
        for j in schema.categorical:
            tax = schema.qi[j].taxonomy
            _, lo, hi = tax.covering_range(low[:, j].astype(np.int64), high[:, j].astype(np.int64))
            low[:, j], high[:, j] = lo, hi
            leaves = np.arange(tax.size)
            value_sets[j] = (leaves[None, :] >= lo[:, None]) & (leaves[None, :] <= hi[:, None])
        new = Publication(t=pub.t, schema=schema, group=new_of[pub.group], sensitive=pub.sensitive,
                          respondent=pub.respondent, counterfeit=pub.counterfeit, row=pub.row, low=low, high=high,
                          value_sets=value_sets, suppressed=pub.suppressed, qi=None, time=pub.time, info={})
        self._own[id(new)] = new
        return new

    def labels(self, pub: Publication) -> np.ndarray:
        labels = np.full(len(self.release), -1, dtype=np.int64)
        real = ~pub.counterfeit
        labels[pub.row[real]] = pub.group[real]
        return labels

    def _groups(self, pub: Publication, labels: np.ndarray):
        """Centres and first records of ``pub``'s groups, for :class:`~cdpbench_ksaa.nearest_group.NearestGroups`."""
        centre = (pub.low + pub.high) / 2.0 / self.widths
        key = np.full(pub.n_groups, np.iinfo(np.int64).max)
        rows = np.flatnonzero(labels >= 0)
        np.minimum.at(key, labels[rows], rows)
        return centre, key

    def split(self, pub: Publication, bad: np.ndarray, ctx: PublishContext, max_rounds: int):
        """``repair=split`` (:mod:`~cdpbench_ksaa.belief_split`): split the groups ``bad`` of
        ``pub`` by their respondents' joined beliefs, judge again, repeat. Returns the last
        publication, its violating groups and the rounds taken."""
        from ..belief_split import split_group

        model, mctx = ctx.privacy_model, ctx.model_context
        inner = model.inner
        base = float(getattr(inner.params, "log_base", 2.0))
        m = self.release.n_values
        rounds = 0
        while len(bad) and rounds < max_rounds:
            beliefs = np.asarray(model.joined_batch(pub, mctx).prior, dtype=float)  # rows: pub's records
            labels = self.labels(pub)
            new = labels.copy()
            top = int(labels.max(initial=-1)) + 1
            real = ~pub.counterfeit
            changed = False
            for g in np.asarray(bad, np.int64).tolist():
                recs = np.flatnonzero((pub.group == g) & real)
                part = split_group(beliefs[recs], pub.sensitive[recs], m, lambda b: inner.accepts(b, mctx), base)
                if part.max(initial=0) > 0:
                    changed = True
                    rows = pub.row[recs]
                    new[rows] = np.where(part == 0, g, top + part - 1)
                    top += int(part.max())
            rounds += 1
            if not changed:
                break
            pub = self.publish(new)
            bad = self.judge(pub)
        return pub, bad, rounds

    def merge_round(self, pub: Publication, bad: np.ndarray):
        """Merge every group in ``bad`` with its nearest other group, all at once."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        labels = self.labels(pub)
        centre, key = self._groups(pub, labels)
        partner = NearestGroups(centre, key).query(centre[bad], exclude=bad)
        ok = partner >= 0
        G = pub.n_groups
        graph = coo_matrix((np.ones(int(ok.sum())), (bad[ok], partner[ok])), shape=(G, G))
        _, comp = connected_components(graph, directed=False)
        self.rounds += 1
        self.merged += len(bad)
        new = self.publish_merged(pub, comp)
        return new, self.judge(new)

    def absorb(self, pub: Publication, bad: np.ndarray, budget: int):
        """The groups ``bad`` violate: follow the merge rounds they would take while the judge
        names exactly the grown groups (each round, every grown group merged with its nearest
        other group, all at once, as :meth:`merge_round` does), without publishing, and find by
        doubling then bisection the fewest rounds after which the judge names anything else."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        labels = self.labels(pub)
        centre, key = self._groups(pub, labels)
        near = NearestGroups(centre, key)  # the groups not yet absorbed nor grown
        schema = self.release.schema
        low, high, key = pub.low.copy(), pub.high.copy(), key.copy()  # a grown group's at its representative
        grown = np.unique(np.asarray(bad, np.int64))
        for g in grown.tolist():
            near.remove(g)
        rounds: list[tuple[np.ndarray, np.ndarray]] = []  # per round: (groups, the representative each joins)
        violators: list[int] = []  # grown groups at the start of each round

        def extend(n: int) -> int:
            nonlocal grown
            while len(rounds) < n and len(grown):
                point = (low[grown] + high[grown]) / 2.0 / self.widths
                other = near.query(point)  # the nearest group not grown, for each grown group
                has = other >= 0
                # candidates: those, and the grown groups; the nearest with ties to the first key
                ids = np.concatenate([other[has], grown])
                cand = NearestGroups((low[ids] + high[ids]) / 2.0 / self.widths, key[ids])
                own = len(ids) - len(grown) + np.arange(len(grown))
                pick = cand.query(point, exclude=own)
                ok = pick >= 0
                if not ok.any():
                    break
                partner = ids[pick[ok]]
                node, inv = np.unique(np.concatenate([grown[ok], partner, grown]), return_inverse=True)
                src, dst = inv[: ok.sum()], inv[ok.sum(): 2 * ok.sum()]
                _, comp = connected_components(coo_matrix((np.ones(len(src)), (src, dst)), shape=(len(node),) * 2),
                                               directed=False)
                rep = np.full(comp.max() + 1, np.iinfo(np.int64).max)
                np.minimum.at(rep, comp, node)  # each merged group kept at its lowest group id
                into = rep[comp]
                for c in np.unique(comp).tolist():  # few groups a round: one box each
                    members = node[comp == c]
                    r = int(rep[c])
                    low[r], high[r] = _covering(low[members].min(axis=0), high[members].max(axis=0), schema)
                    key[r] = key[members].min()
                for g in np.setdiff1d(partner, grown).tolist():
                    near.remove(g)
                violators.append(len(grown))
                rounds.append((node, into))
                grown = np.unique(into)
            return len(rounds)

        cache: dict[int, tuple[Publication, np.ndarray, np.ndarray]] = {}
        first_row = np.full(pub.n_groups, len(labels), dtype=np.int64)
        rows = np.flatnonzero(labels >= 0)
        np.minimum.at(first_row, labels[rows], rows)  # a record of each group: it stays with its group

        def state(n: int):
            if n not in cache:
                into = np.arange(pub.n_groups)
                for node, to in rounds[:n]:
                    into[node] = to
                while True:  # follow each group to the representative it ended in
                    nxt = into[into]
                    if np.array_equal(nxt, into):
                        break
                    into = nxt
                new = self.publish_merged(pub, into)
                at = np.full(len(labels), -1, dtype=np.int64)
                real = ~new.counterfeit
                at[new.row[real]] = new.group[real]
                cache[n] = (new, self.judge(new), np.unique(at[first_row[np.unique(into[bad])]]))
            return cache[n]

        def unchanged(n: int) -> bool:  # the judge names exactly the grown groups
            new, judged, grown_now = state(n)
            return np.array_equal(np.unique(judged), grown_now) and new.n_groups > 1

        lo, hi, step = 0, None, 1  # unchanged(lo) holds; unchanged(hi) fails
        while hi is None:
            n = extend(min(step, budget))
            if n <= lo:  # nothing left to merge with, or the budget is spent
                hi = lo
                break
            if unchanged(n):
                lo = n
                if n >= budget:
                    hi = n
                step *= 2
            else:
                hi = n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if unchanged(mid):
                lo = mid
            else:
                hi = mid
        new, judged = state(hi)[:2] if hi > 0 else (pub, bad)
        self.rounds += hi
        self.merged += int(sum(violators[:hi]))
        return new, judged


def _covering(low: np.ndarray, high: np.ndarray, schema) -> tuple[np.ndarray, np.ndarray]:
    """The box ``Publication.from_partition`` gives a group whose records span ``low..high``:
    categorical QIs widened to the smallest taxonomy node covering them."""
    for j in schema.categorical:
        _, lo, hi = schema.qi[j].taxonomy.covering_range(np.array([int(low[j])]), np.array([int(high[j])]))
        low[j], high[j] = lo[0], hi[0]
    return low, high
