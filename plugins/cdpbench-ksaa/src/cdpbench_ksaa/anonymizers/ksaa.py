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
so the rounds end. Often one group alone keeps violating for hundreds of rounds, absorbing its
nearest group each time (on 30,162 Adult records at k = 2, 310 of 332 rounds). With
``search="bisect"`` (the default) such a tail is found without judging every round: the group's
chain of nearest groups is followed without publishing, and the number of groups it must absorb
is found by doubling and bisection, judging the publication only at the probed lengths. When the
model's verdict is monotone along the chain (once the grown group stops violating, with no other
group violating, it stays so), this is the publication of ``search="rounds"``, one round at a
time; when it is not (the full matching join is global), it is a publication the model accepts at
a length where one fewer absorbed group is still rejected. ``info``: ``merge_rounds`` (rounds, a
tail's absorbed groups counted as one round each), ``merged_groups`` and ``judged`` (publications
the model judged).

``repair="split"`` (not in the paper; default ``"none"``): KSAA's own model, ``j_similarity_join``,
is not monotone under merging (a large group mixes respondents whose restricted beliefs differ),
so merge-until-valid can end with groups it still rejects; each is then split by its
respondents' joined beliefs and judged again (:mod:`~cdpbench_ksaa.belief_split`; ``info``:
``split_rounds``, ``split_violating`` — the groups still rejected after the last round).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext, plugin_ref

from ..nearest_group import NearestGroups


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
        metadata={"help": "'bisect': a lone violating group's absorptions found by doubling and bisection; 'rounds': one merge round at a time"},
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
        pub, rounds, merged, judged = primary, 0, 0, 0
        if judge is not None:
            merger = _Merger(release, lambda q: np.asarray(judge(q, ctx.model_context), dtype=np.int64))
            bad = merger.judge(primary)
            while len(bad) and pub.n_groups > 1 and merger.rounds < self.params.max_rounds:
                before = merger.rounds
                if len(bad) == 1 and self.params.search == "bisect":
                    pub, bad = merger.absorb(pub, int(bad[0]), self.params.max_rounds - merger.rounds)
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
        pub.info.update({"merge_rounds": float(rounds), "merged_groups": float(merged), "judged": float(judged)})
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

    def judge(self, pub: Publication) -> np.ndarray:
        self.judged += 1
        return self._judge(pub)

    def publish(self, labels: np.ndarray) -> Publication:
        """The publication of record labels, its groups numbered by their first record (so the
        same partition is the same publication, whichever merges led to it)."""
        rows = np.flatnonzero(labels >= 0)
        first = np.full(int(labels.max(initial=-1)) + 1, len(labels), dtype=np.int64)
        np.minimum.at(first, labels[rows], rows)
        return Publication.from_partition(self.release, np.where(labels >= 0, first[np.maximum(labels, 0)], -1))

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
        new = self.publish(np.where(labels >= 0, comp[np.maximum(labels, 0)], -1))
        return new, self.judge(new)

    def absorb(self, pub: Publication, x: int, budget: int):
        """Group ``x`` alone violates: follow its chain of nearest groups (each absorbed group
        widens its box, which moves its centre) and find, by doubling then bisection, the fewest
        absorbed groups after which the judge no longer names the grown group alone."""
        labels = self.labels(pub)
        centre, key = self._groups(pub, labels)
        near = NearestGroups(centre, key)
        near.remove(x)
        schema = self.release.schema
        low, high = pub.low[x].copy(), pub.high[x].copy()
        chain: list[int] = []

        def extend(n: int) -> int:
            nonlocal low, high
            while len(chain) < n:
                j = int(near.query(((low + high) / 2.0 / self.widths)[None, :])[0])
                if j < 0:
                    break
                chain.append(j)
                near.remove(j)
                low, high = _covering(np.minimum(low, pub.low[j]), np.maximum(high, pub.high[j]), schema)
            return len(chain)

        cache: dict[int, tuple[Publication, np.ndarray]] = {}
        first_row = int(np.flatnonzero(labels == x)[0])  # a record of x: it stays in the grown group

        def state(n: int):
            if n not in cache:
                into = np.arange(pub.n_groups)
                into[chain[:n]] = x
                new = self.publish(np.where(labels >= 0, into[np.maximum(labels, 0)], -1))
                cache[n] = (new, self.judge(new))
            return cache[n]

        def alone(n: int) -> bool:  # the judge still names exactly the grown group
            new, bad = state(n)
            grown = int(new.group[np.flatnonzero(new.row == first_row)[0]])
            return len(bad) == 1 and int(bad[0]) == grown and new.n_groups > 1

        lo, hi, step = 0, None, 1  # alone(lo) holds; alone(hi) fails
        while hi is None:
            n = extend(min(step, budget))
            if n <= lo:  # nothing left to absorb, or the budget is spent
                hi = lo
                break
            if alone(n):
                lo = n
                if n >= budget:
                    hi = n
                step *= 2
            else:
                hi = n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if alone(mid):
                lo = mid
            else:
                hi = mid
        new, bad = state(hi) if hi > 0 else (pub, np.array([x]))
        self.rounds += hi
        self.merged += hi
        return new, bad


def _covering(low: np.ndarray, high: np.ndarray, schema) -> tuple[np.ndarray, np.ndarray]:
    """The box ``Publication.from_partition`` gives a group whose records span ``low..high``:
    categorical QIs widened to the smallest taxonomy node covering them."""
    for j in schema.categorical:
        _, lo, hi = schema.qi[j].taxonomy.covering_range(np.array([int(low[j])]), np.array([int(high[j])]))
        low[j], high[j] = lo[0], hi[0]
    return low, high
