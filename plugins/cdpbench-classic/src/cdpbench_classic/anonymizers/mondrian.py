"""Strict multidimensional Mondrian (LeFevre, DeWitt, Ramakrishnan, ICDE 2006).

The table is split recursively, top-down. A partition is split on the QI dimension with the widest
*normalized* range (the paper's "choose_dimension", §4: numeric ``(max - min) / domain width``;
categorical: number of leaves of the taxonomy node covering the partition's values / domain size):

* numeric: a median split, strict (§3.1: all records with the same value go to the same side).
  With the lower median ``m`` of the partition the two sides are ``{x <= m} | {x > m}`` or
  ``{x < m} | {x >= m}``; of these, the one with both sides non-empty and the larger smaller side
  is used (ties: ``x <= m``), i.e. the cut at whichever end of the run of ``m`` is closer to the
  middle. (Taking the upper median instead gives the same cuts.) This median split still works
  when ``m`` is repeated.
* categorical: along the taxonomy: one child partition per child of the covering node that holds
  records.

A split is *allowable* only if every child partition satisfies the privacy model (any model: it
is asked through ``accepts``). If the widest dimension has no allowable split the next widest is
tried, and so on (ties in width: the lower QI column first); a partition with no allowable split on
any dimension is final. If the whole release does not satisfy the model, every record is
suppressed.

The recursion runs breadth-first: every active partition of one level is processed at once with
sorting and segment operations, and the privacy model is asked ONCE per level and dimension rank
with all candidate child groups in one :class:`~cdpbench.data.GroupBatch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext

# accepts(rows, segment, n_groups) -> bool[n_groups]: do the candidate groups satisfy the model?
GroupPredicate = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


@dataclass
class MondrianParams:
    categorical: str = field(
        default="taxonomy",
        metadata={
            "help": "how a group's categorical QI is published: 'taxonomy' (the smallest taxonomy node "
            "covering its values) or 'set' (exactly the values present)"
        },
    )

    def __post_init__(self) -> None:
        require(self.categorical in ("taxonomy", "set"), "categorical", "'taxonomy' or 'set'", self.categorical)


class Mondrian(Anonymizer):
    """Strict multidimensional Mondrian (LeFevre et al., ICDE 2006), any privacy model as split test."""

    uses_history = False  # reads no ctx.history: publishes each release on its own (issue #28: the run keeps no more than it needs)

    Params = MondrianParams

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        model = ctx.privacy_model
        # no exact QI in the batch: the verifier of a generalized publication does not see it either
        accepts = ctx.predicate(release)
        group, stats = mondrian_partition(release, accepts)
        name = getattr(model, "plugin_name", type(model).__name__)
        info = {"anonymizer": "mondrian", "privacy_model": name, **stats}
        if stats["suppressed_all"]:
            info["reason"] = f"the whole release ({len(release)} records) does not satisfy {name}: every record suppressed"
        return Publication.from_partition(release, group, categorical=self.params.categorical, info=info)


def mondrian_partition(release: Release, accepts: GroupPredicate) -> tuple[np.ndarray, dict]:
    """The Mondrian partition of ``release``: ``group[i]`` is record i's group, -1 if suppressed.

    Groups are numbered 0..G-1 in order of their smallest record index. ``accepts(rows, segment,
    n_groups)`` judges candidate groups: record ``rows[i]`` is in candidate group ``segment[i]``.
    Returns the groups and a few counts (recursion depth, number of ``accepts`` calls).
    """
    group, _, stats = mondrian_first_cuts(release, accepts, None)
    return group, stats


def mondrian_first_cuts(
    release: Release, accepts: GroupPredicate, max_levels: int | None
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Mondrian's recursion stopped after ``max_levels`` levels of cuts (``None``: run to the end,
    :func:`mondrian_partition`). Returns ``group`` as :func:`mondrian_partition` does, where a
    partition the recursion was stopped at is a group too, ``open[g]`` (bool per group): group g is
    such a partition, which Mondrian may cut further, and the counts. Every decision depends only on
    a partition's own records, so running :func:`mondrian_partition` on each open group continues
    the recursion exactly (the partitioned Mondrian's ``exact`` cuts)."""
    schema = release.schema
    qi = np.asarray(release.qi, dtype=float)
    n, d = qi.shape
    stats = {"suppressed_all": False, "levels": 0, "accepts_calls": 0, "n_groups": 0}
    if n == 0:
        return np.empty(0, dtype=np.int64), np.zeros(0, dtype=bool), stats
    stats["accepts_calls"] += 1
    if not bool(accepts(np.arange(n), np.zeros(n, dtype=np.int64), 1)[0]):
        stats["suppressed_all"] = True
        return np.full(n, -1, dtype=np.int64), np.zeros(0, dtype=bool), stats

    taxonomies = [a.taxonomy if a.kind == "categorical" else None for a in schema.qi]
    # numeric: domain width; categorical: number of leaves (the normalizers of the widths)
    domain = np.array([float(t.size) if t is not None else a.width for a, t in zip(schema.qi, taxonomies)])
    label_base = max([2] + [t.size for t in taxonomies if t is not None])

    # One integer code per QI value: a numeric column's dense value rank (values sort as their
    # ranks do, so medians, minima and maxima are found on ranks), a categorical column's leaf.
    codes = np.empty((n, d), dtype=np.int32)
    values: dict[int, np.ndarray] = {}  # numeric column -> its distinct values, by rank
    for j, tax in enumerate(taxonomies):
        if tax is None:
            values[j], inverse = np.unique(qi[:, j], return_inverse=True)
            codes[:, j] = inverse.reshape(-1)
        else:
            codes[:, j] = qi[:, j]

    final = np.full(n, -1, dtype=np.int64)
    n_final = 0
    rows = np.arange(n, dtype=np.int64)  # active records; each partition is a contiguous block
    # their codes, kept in the order of ``rows``: gathering them from the previous level's array,
    # where each child's records lie close together, is far cheaper than from the whole table
    Z = codes
    starts = np.zeros(1, dtype=np.int64)  # block starts
    while len(starts) and stats["levels"] != max_levels:
        stats["levels"] += 1
        P = len(starts)
        sizes = np.diff(np.append(starts, len(rows)))
        part = np.repeat(np.arange(P), sizes)  # partition of each active position
        lo = np.minimum.reduceat(Z, starts, axis=0) if d else np.zeros((P, 0), dtype=np.int32)
        hi = np.maximum.reduceat(Z, starts, axis=0) if d else np.zeros((P, 0), dtype=np.int32)

        # normalized widths (choose_dimension) and, per categorical column, the covering level
        width = np.zeros((P, d))
        cover_level: dict[int, np.ndarray] = {}
        for j, tax in enumerate(taxonomies):
            if tax is None:
                if domain[j] > 0:
                    width[:, j] = (values[j][hi[:, j]] - values[j][lo[:, j]]) / domain[j]
            else:
                level, c_lo, c_hi = tax.covering_range(lo[:, j].astype(np.int64), hi[:, j].astype(np.int64))
                width[:, j] = (c_hi - c_lo + 1) / domain[j]
                cover_level[j] = level
        splittable = hi > lo
        # dimensions widest first, ties to the lower column; unsplittable ones last
        column = np.broadcast_to(np.arange(d), (P, d))
        dim_order = np.lexsort((column, -np.where(splittable, width, -1.0)), axis=1)

        undecided = np.ones(P, dtype=bool)
        child_of_pos = np.full(len(rows), -1, dtype=np.int64)  # partition id in the next level
        n_next = 0
        for r in range(d):
            dim = dim_order[:, r]
            cand = undecided & splittable[np.arange(P), dim]
            if not cand.any():
                break  # later ranks are unsplittable too
            pos = np.flatnonzero(cand[part])
            p_of = part[pos]
            dim_of = dim[p_of]
            label = np.empty(len(pos), dtype=np.int64)
            for j in range(d):
                sel = dim_of == j
                if not sel.any():
                    continue
                v = Z[pos[sel], j]
                if taxonomies[j] is None:
                    label[sel] = _median_side(v, p_of[sel], len(values[j]))
                else:
                    level = cover_level[j][p_of[sel]]
                    label[sel] = taxonomies[j].node_of_leaf[level - 1, v.astype(np.int64)]
            # the children present, numbered in (partition, label) order: a counting pass, no sort
            key = p_of * label_base + label
            present = np.bincount(key, minlength=P * label_base).astype(bool)
            child_key = np.flatnonzero(present)
            child_number = np.cumsum(present) - 1
            segment = child_number[key]
            n_children = len(child_key)
            stats["accepts_calls"] += 1
            ok = np.asarray(accepts(rows[pos], segment, n_children), dtype=bool)
            parent = child_key // label_base
            failing = np.bincount(parent, weights=~ok, minlength=P)
            split = cand & (failing == 0)
            child_split = split[parent]
            new_id = n_next + np.cumsum(child_split) - 1
            pos_split = split[p_of]
            child_of_pos[pos[pos_split]] = new_id[segment[pos_split]]
            n_next += int(child_split.sum())
            undecided &= ~split

        # partitions nobody could split are final
        fin_parts = np.flatnonzero(undecided)
        fin_id = np.full(P, -1, dtype=np.int64)
        fin_id[fin_parts] = n_final + np.arange(len(fin_parts))
        fin_pos = undecided[part]
        final[rows[fin_pos]] = fin_id[part[fin_pos]]
        n_final += len(fin_parts)

        # next level: the children, each a contiguous block
        keep = child_of_pos >= 0
        cid = child_of_pos[keep]
        order = np.argsort(cid, kind="stable")
        take = np.flatnonzero(keep)[order]
        rows, Z = rows[take], Z[take]
        cid = cid[order]
        starts = np.flatnonzero(np.r_[True, cid[1:] != cid[:-1]]) if len(cid) else np.empty(0, dtype=np.int64)

    # partitions the recursion was stopped at (``max_levels``) are groups too, open ones
    n_open = len(starts)
    if n_open:
        final[rows] = n_final + np.repeat(np.arange(n_open), np.diff(np.append(starts, len(rows))))
    n_groups = n_final + n_open
    # number groups by their smallest record index
    _, first = np.unique(final, return_index=True)
    rank = np.empty(n_groups, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n_groups)
    is_open = np.zeros(n_groups, dtype=bool)
    is_open[rank[n_final:]] = True
    stats["n_groups"] = n_groups
    return rank[final], is_open, stats


def _median_side(v: np.ndarray, seg: np.ndarray, n_ranks: int) -> np.ndarray:
    """Strict median split of each segment (``seg`` non-decreasing; every segment holds at least two
    distinct values): 0 = left side, 1 = right side; see the module docstring for the rule.
    ``v``: dense value ranks in ``[0, n_ranks)`` (they split as the values do)."""
    order = np.argsort(seg * n_ranks + v)  # by segment, then value; equal values are interchangeable
    vs = v[order]
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    counts = np.diff(np.append(starts, len(seg)))
    idx = np.repeat(np.arange(len(starts)), counts)  # segment index of each position (seg is sorted)
    median = vs[starts + (counts - 1) // 2][idx]
    n_le = np.bincount(idx, weights=v <= median, minlength=len(starts))
    n_lt = np.bincount(idx, weights=v < median, minlength=len(starts))
    balance_le = np.where(n_le < counts, np.minimum(n_le, counts - n_le), -1)
    balance_lt = np.where(n_lt > 0, np.minimum(n_lt, counts - n_lt), -1)
    use_le = (balance_le >= balance_lt)[idx]
    return np.where(use_le, v > median, v >= median).astype(np.int64)
