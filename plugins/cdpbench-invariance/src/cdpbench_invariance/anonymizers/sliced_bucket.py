"""(τ,m)-slicedBucket (Khan et al., Algorithm 1) as the ``sliced_bucket`` anonymizer.

Per release (:mod:`cdpbench_invariance.family` runs the phases):

* **Cach** (Algorithm 2): among the new tuples, the first tuple of each repeated value moves to
  Cach (delayed) and a value held once is copied to it (Table 1a -> Tables 1b/1c). At the
  releases after the first, ``cache_duplicate: last`` moves the last tuple of a repeated value
  instead (§5.2: "say p11") and ``cache_single: hold`` holds a value held once in Cach instead of
  copying it (§5.2: p9 "is cached in Cach table till next release"); the defaults keep Table 1a's
  rule at every release. Cach, not counterfeits, fills buckets: a delayed record is published
  as itself when used, a copy as a *duplicate* (a second tuple of a respondent already in the
  table, published without an owner id; counted as ``duplicated``, spec §3.5 item 6). What Cach
  cannot fill is delayed.
* **Classification** (Algorithm 4) over the whole history (the pairwise reading of Def. 11, spec
  §3.5 item 3): a tuple of T_s keeps its signature; an updated or re-inserted tuple reuses its Del
  signature, or an earlier signature from its Upd history, that holds its value; else it gets a
  new signature disjoint from every earlier one. So each respondent's signatures are pairwise
  equal or disjoint and the collusion attack finds no partial intersection.
* **Balancing** (Algorithm 5) from the new tuples, then Cach, else delay; **assignment**
  (Algorithm 6) made m-eligible with Cach tuples (keeping ``cache_reserve`` per value: spec §3.5
  item 5); **partition** (Algorithm 7); **cell generalization** (Algorithm 8): age to [min-max],
  gender kept or *, zip to its longest common prefix; tuples shuffled inside each bucket.
* **Attribute grouping** (Eq. 3): the QI columns are grouped by φ² affinity (``grouping:
  affinity``: average-linkage merging of the pair of groups with the highest mean φ² until
  ``column_count`` groups are left, as slicing clusters attributes) or as the paper fixes them
  (``grouping: paper``, the default: {age, gender}, {zip}), or as ``columns`` lists them. With cells generalized bucket by bucket, every column's cell is the same
  for all tuples of a bucket (spec §3.5 item 8), so the grouping changes no published value; it is
  reported in the publication's ``info`` (``columns``) and :func:`affinity` computes Eq. 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import PublishContext

from ..family import M_HELP, InvariantAnonymizer, check_threshold
from ..phases import Policy


def affinity(a: np.ndarray, b: np.ndarray) -> float:
    """φ²(A1, A2) of Eq. 3: the mean square contingency of two coded columns,
    ``1 / (min(d1, d2) - 1) * sum_ij (f_ij - f_i. f_.j)^2 / (f_i. f_.j)`` with ``f`` relative
    frequencies and ``d`` the numbers of distinct values; in [0, 1] (0 for a constant column)."""
    _, ia = np.unique(np.asarray(a), return_inverse=True)
    _, ib = np.unique(np.asarray(b), return_inverse=True)
    d1, d2 = int(ia.max()) + 1 if len(ia) else 0, int(ib.max()) + 1 if len(ib) else 0
    if min(d1, d2) < 2:
        return 0.0
    f = np.bincount(ia * d2 + ib, minlength=d1 * d2).reshape(d1, d2) / len(ia)
    expected = f.sum(axis=1, keepdims=True) * f.sum(axis=0, keepdims=True)
    return float(((f - expected) ** 2 / expected).sum() / (min(d1, d2) - 1))


@dataclass
class SlicedBucketParams:
    m: int | None = field(default=None, metadata={"help": M_HELP})
    cache_reserve: int = field(
        default=0,
        metadata={"help": "Cach tuples kept per value when Cach makes the new tuples m-eligible (>= 0; spec §3.5 item 5)"},
    )
    cache_duplicate: str = field(
        default="first",
        metadata={"help": "at each release after the first (Algorithm 5's Cach update), which of the new tuples of a "
                  "sensitive value held by several new tuples moves to Cach (delayed): 'first' = the first in table "
                  "order, as Algorithm 2 does on Table 1a (default); 'last' = the last in table order, as §5.2 "
                  "caches p11 of p10, p11 ('say p11'). The first release always moves the first"},
    )
    cache_single: str = field(
        default="copy",
        metadata={"help": "at each release after the first (Algorithm 5's Cach update), a sensitive value held by one "
                  "new tuple: 'copy' = a copy goes to Cach and the tuple stays among the new tuples, published in this "
                  "release when it can be (Algorithm 2's copy_of, Table 1a's p3; default); 'hold' = the tuple itself "
                  "moves to Cach (delayed, no copy), published only when a bucket takes it from Cach, as §5.2 holds "
                  "p9 back 'not to empty the Cach'. The first release always copies"},
    )
    grouping: str = field(
        default="paper",
        metadata={"help": "how the QI columns are grouped (Eq. 3): 'paper' = {age, gender}, {zip} (other QIs alone), "
                  "'affinity' = by phi^2 into column_count groups; 'columns' overrides both"},
    )
    column_count: int = field(default=2, metadata={"help": "grouping=affinity: number of QI column groups (>= 1)"})
    columns: list[list[str]] | None = field(
        default=None,
        metadata={"help": "QI column groups given explicitly (lists of QI names), or null for 'grouping'"},
    )
    shuffle: bool = field(default=True, metadata={"help": "shuffle the tuples inside each bucket before publishing"})

    def __post_init__(self) -> None:
        check_threshold(self.m, "m", 2)
        require(
            isinstance(self.cache_reserve, int) and not isinstance(self.cache_reserve, bool) and self.cache_reserve >= 0,
            "cache_reserve",
            "an integer >= 0",
            self.cache_reserve,
        )
        require(self.cache_duplicate in ("first", "last"), "cache_duplicate", "one of 'first', 'last'", self.cache_duplicate)
        require(self.cache_single in ("copy", "hold"), "cache_single", "one of 'copy', 'hold'", self.cache_single)
        require(self.grouping in ("paper", "affinity"), "grouping", "one of 'paper', 'affinity'", self.grouping)
        require(
            isinstance(self.column_count, int) and not isinstance(self.column_count, bool) and self.column_count >= 1,
            "column_count",
            "an integer >= 1",
            self.column_count,
        )
        if self.columns is not None:
            ok = isinstance(self.columns, (list, tuple)) and all(
                isinstance(g, (list, tuple)) and g and all(isinstance(c, str) for c in g) for g in self.columns
            )
            require(ok, "columns", "a list of non-empty lists of QI column names, or null", self.columns)


class SlicedBucket(InvariantAnonymizer):
    """(τ,m)-slicedBucket: Cach instead of counterfeits, signatures equal or disjoint over each respondent's history."""

    Params = SlicedBucketParams

    def __init__(self, params=None):
        super().__init__(params)
        self.policy = Policy(
            scope="history",
            filler="cache",
            cache_reserve=self.params.cache_reserve,
            cache_duplicate=self.params.cache_duplicate,
            cache_single=self.params.cache_single,
        )

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        names = list(release.schema.qi_names)
        groups = self.params.columns
        if groups is None and self.params.grouping == "affinity":
            groups = affinity_groups(release.qi, names, self.params.column_count)
        elif groups is None:
            paper = [[c for c in ("age", "sex", "gender") if c in names], [c for c in ("zip",) if c in names]]
            rest = [[c] for c in names if not any(c in g for g in paper)]
            groups = [g for g in paper if g] + rest
        unknown = sorted({c for g in groups for c in g} - set(names))
        require(not unknown, "anonymizer.columns", f"QI column names among {names}", unknown)
        pub = super().publish(release, ctx)
        pub.info["columns"] = " | ".join(",".join(g) for g in groups)
        return pub


def affinity_groups(qi: np.ndarray, names: list[str], count: int) -> list[list[str]]:
    """The QI columns grouped by φ² (Eq. 3): from one group per column, the two groups with the
    highest mean pairwise φ² merge until ``count`` groups are left (ties: the first pair in
    column order). Groups list their columns in column order, in the order of their first column."""
    d = len(names)
    phi = np.array([[affinity(qi[:, a], qi[:, b]) if a != b else 1.0 for b in range(d)] for a in range(d)])
    groups = [[j] for j in range(d)]
    while len(groups) > max(count, 1):
        best, pair = -1.0, (0, 1)
        for x in range(len(groups)):
            for y in range(x + 1, len(groups)):
                score = float(phi[np.ix_(groups[x], groups[y])].mean())
                if score > best:
                    best, pair = score, (x, y)
        x, y = pair
        groups[x] = sorted(groups[x] + groups[y])
        del groups[y]
    groups.sort(key=lambda g: g[0])
    return [[names[j] for j in g] for g in groups]
