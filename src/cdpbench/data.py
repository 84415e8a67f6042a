"""The columnar data types that flow through a run (DESIGN.md §3).

* :class:`Release` — the raw records at time ``t`` (one per respondent).
* :class:`Publication` — what an anonymizer publishes for a release: per published record its
  group, its sensitive value, a counterfeit flag and (hidden from attackers) its true respondent;
  per group the generalized QI (an interval per QI column; for a categorical QI also the set of
  leaf values it stands for, so taxonomy nodes and arbitrary value sets are both expressible and
  groups may overlap: local recoding); the suppressed respondents. A *bucketized* publication
  (anatomy, slicing) additionally publishes every record's exact QI, joined to the sensitive values
  only through the group (bucket) id.
* :class:`PublicView` — a publication as an adversary sees it: per group the respondents that may
  own its tuples and the multiset of its sensitive values, with the link between them removed.
* :class:`History` — releases and publications so far.

The three scenarios of the papers are all served: continuous (each release a snapshot with
insertions, deletions, updates and re-insertions: respondent ids persist across releases),
cumulative (``Release.time`` holds each record's timestamp) and sequential releases whose
attribute sets differ (each release carries its own :class:`~cdpbench.schema.Schema`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # a release holds its schema; the schema builds releases (Schema.encode)
    from .schema import Schema


@dataclass
class Release:
    """Raw records of one release (``t`` counts from 1)."""

    t: int
    schema: Schema
    respondent: np.ndarray  # int64 [n]
    qi: np.ndarray  # float64 [n, d]; categorical columns hold leaf codes
    sensitive: np.ndarray  # int64 [n] codes into schema.sensitive.values
    time: np.ndarray | None = None  # int64 [n] per-record timestamp (cumulative releases)
    truth: dict[str, Any] = field(default_factory=dict)  # ground truth a synthetic data set exposes

    def __len__(self) -> int:
        return len(self.respondent)

    @property
    def n_values(self) -> int:
        return self.schema.sensitive.size

    def sensitive_distribution(self) -> np.ndarray:
        """Distribution of the sensitive attribute over the whole release (t-closeness's P)."""
        counts = np.bincount(self.sensitive, minlength=self.n_values).astype(float)
        return counts / max(counts.sum(), 1.0)

    def to_frame(self) -> pd.DataFrame:
        """Decode back to a table of the schema's columns."""
        s = self.schema
        out: dict[str, Any] = {s.respondent: self.respondent}
        if s.time:
            out[s.time] = self.time
        for j, a in enumerate(s.qi):
            col = self.qi[:, j]
            out[a.name] = col if a.kind == "numeric" else np.asarray(a.values, dtype=object)[col.astype(np.int64)]
        out[s.sensitive.name] = np.asarray(s.sensitive.values, dtype=object)[self.sensitive]
        return pd.DataFrame(out)

    def subset(self, mask: np.ndarray) -> "Release":
        return Release(
            self.t,
            self.schema,
            self.respondent[mask],
            self.qi[mask],
            self.sensitive[mask],
            None if self.time is None else self.time[mask],
            self.truth,
        )


@dataclass
class GroupBatch:
    """Candidate groups handed to a privacy model's ``accepts`` in one vectorized call.

    Record ``i`` belongs to candidate group ``segment[i]`` (0..n_groups-1). ``prior`` holds the
    per-record prior beliefs ``[n, m]`` when the privacy model declares ``needs_prior``.
    """

    sensitive: np.ndarray
    segment: np.ndarray
    n_groups: int
    n_values: int
    prior: np.ndarray | None = None
    qi: np.ndarray | None = None

    def counts(self) -> np.ndarray:
        """``[n_groups, m]`` count of each sensitive value in each candidate group."""
        flat = np.bincount(self.segment * self.n_values + self.sensitive, minlength=self.n_groups * self.n_values)
        return flat.reshape(self.n_groups, self.n_values)

    def sizes(self) -> np.ndarray:
        return np.bincount(self.segment, minlength=self.n_groups)


@dataclass
class Publication:
    """One anonymized release; see the module docstring. Group ids are 0..n_groups-1."""

    t: int
    schema: Schema
    group: np.ndarray  # int64 [p] group of each published record
    sensitive: np.ndarray  # int64 [p]
    respondent: np.ndarray  # int64 [p] true respondent (-1 for a counterfeit or an ownerless copy); hidden from attackers
    counterfeit: np.ndarray  # bool [p]
    row: np.ndarray  # int64 [p] row of the record in its Release (-1 for a counterfeit or an ownerless copy); hidden
    low: np.ndarray  # float64 [G, d] generalized lower bound (categorical: lowest leaf code)
    high: np.ndarray  # float64 [G, d]
    value_sets: dict[int, np.ndarray]  # categorical QI column -> bool [G, L] leaves the group stands for
    suppressed: np.ndarray  # int64 respondent ids not published
    qi: np.ndarray | None = None  # float64 [p, d] exact QI, only in a bucketized publication
    time: np.ndarray | None = None  # int64 [p] timestamps (cumulative releases)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_groups(self) -> int:
        return int(self.low.shape[0])

    @property
    def bucketized(self) -> bool:
        return self.qi is not None

    @property
    def owned(self) -> np.ndarray:
        """bool ``[p]``: the record is a row of its release, with a respondent and a true value at
        this release. False for a counterfeit and for an ownerless copy (a real tuple published
        again without its owner, e.g. slicedBucket's duplicates from its cache, ``counterfeit``
        False but ``row`` -1): per-respondent metrics (beliefs, record linkage) skip both."""
        return self.row >= 0

    def __len__(self) -> int:
        return len(self.group)

    def group_sizes(self) -> np.ndarray:
        return np.bincount(self.group, minlength=self.n_groups)

    def group_counts(self) -> np.ndarray:
        """``[G, m]`` count of each sensitive value per group."""
        m = self.schema.sensitive.size
        flat = np.bincount(self.group * m + self.sensitive, minlength=self.n_groups * m)
        return flat.reshape(self.n_groups, m)

    def batch(self, prior: np.ndarray | None = None) -> GroupBatch:
        """The publication's groups as a :class:`GroupBatch` (for verification)."""
        return GroupBatch(self.sensitive, self.group, self.n_groups, self.schema.sensitive.size, prior, self.qi)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_partition(
        cls,
        release: Release,
        group_of_record: np.ndarray,
        *,
        categorical: str = "taxonomy",
        bucketized: bool = False,
        info: dict[str, Any] | None = None,
    ) -> "Publication":
        """Publish a partition of ``release``: ``group_of_record[i]`` is record i's group, -1 to
        suppress it. Each group is generalized to the tightest box around its records; a
        categorical QI becomes the smallest taxonomy node covering its values
        (``categorical="taxonomy"``) or exactly the set of values present (``"set"``).
        """
        if categorical not in ("taxonomy", "set"):
            raise ValueError("categorical must be 'taxonomy' or 'set'")
        g = np.asarray(group_of_record, dtype=np.int64)
        keep = g >= 0
        # renumber groups 0..G-1 in the sorted order of their labels
        uniq, inv = np.unique(g[keep], return_inverse=True)
        group = inv.astype(np.int64)
        G = len(uniq)
        qi = release.qi[keep]
        d = qi.shape[1]
        low = np.full((G, d), np.inf)
        high = np.full((G, d), -np.inf)
        if G:
            order = np.argsort(group, kind="stable")
            starts = np.searchsorted(group[order], np.arange(G))
            sorted_qi = qi[order]
            low = np.minimum.reduceat(sorted_qi, starts, axis=0)
            high = np.maximum.reduceat(sorted_qi, starts, axis=0)
        value_sets: dict[int, np.ndarray] = {}
        schema = release.schema
        for j in schema.categorical:
            tax = schema.qi[j].taxonomy
            L = tax.size
            if categorical == "taxonomy":
                _, lo, hi = tax.covering_range(low[:, j].astype(np.int64), high[:, j].astype(np.int64))
                low[:, j], high[:, j] = lo, hi
                leaves = np.arange(L)
                value_sets[j] = (leaves[None, :] >= lo[:, None]) & (leaves[None, :] <= hi[:, None])
            else:
                mask = np.zeros(G * L, dtype=bool)
                mask[group * L + qi[:, j].astype(np.int64)] = True
                value_sets[j] = mask.reshape(G, L)
        return cls(
            t=release.t,
            schema=schema,
            group=group,
            sensitive=release.sensitive[keep].copy(),
            respondent=release.respondent[keep].copy(),
            counterfeit=np.zeros(int(keep.sum()), dtype=bool),
            row=np.flatnonzero(keep).astype(np.int64),
            low=low,
            high=high,
            value_sets=value_sets,
            suppressed=release.respondent[~keep].copy(),
            qi=qi.copy() if bucketized else None,
            time=None if release.time is None else release.time[keep].copy(),
            info=dict(info or {}),
        )

    # ------------------------------------------------------------------ views
    def public(self) -> "PublicView":
        """What an adversary sees: per group its candidate respondents and its sensitive values,
        each sorted, so the position of a tuple says nothing about who owns it."""
        by_resp = np.lexsort((self.respondent, self.group))
        by_sens = np.lexsort((self.sensitive, self.group))
        return PublicView(
            t=self.t,
            schema=self.schema,
            group=self.group[by_resp],
            respondent=self.respondent[by_resp],
            sensitive=self.sensitive[by_sens],
            low=self.low,
            high=self.high,
            value_sets=self.value_sets,
            suppressed_count=len(self.suppressed),
        )

    def to_frame(self) -> pd.DataFrame:
        """A readable table: one row per published record, generalized QIs as strings."""
        s = self.schema
        out: dict[str, Any] = {"group": self.group}
        for j, a in enumerate(s.qi):  # one label per group, then one lookup per record
            lo, hi = self.low[:, j], self.high[:, j]
            if a.kind == "numeric":
                labels = [f"{x:g}" if x == y else f"[{x:g}-{y:g}]" for x, y in zip(lo, hi)]
            else:
                vals = np.asarray(a.values, dtype=object)
                labels = [vals[int(x)] if x == y else "{" + ",".join(vals[int(x) : int(y) + 1]) + "}" for x, y in zip(lo, hi)]
            out[a.name] = np.asarray(labels, dtype=object)[self.group] if len(labels) else np.empty(0, dtype=object)
        out[s.sensitive.name] = np.asarray(s.sensitive.values, dtype=object)[self.sensitive]
        out["counterfeit"] = self.counterfeit
        return pd.DataFrame(out)


@dataclass
class PublicView:
    """A publication with the respondent–tuple link removed (see :meth:`Publication.public`).

    ``group``/``respondent`` list the candidate respondents per group (sorted by group, then id);
    ``sensitive`` lists the published sensitive values sorted by group, then value. Both arrays are
    aligned on group boundaries (same group sizes), not on individual rows.
    """

    t: int
    schema: Schema
    group: np.ndarray
    respondent: np.ndarray
    sensitive: np.ndarray
    low: np.ndarray
    high: np.ndarray
    value_sets: dict[int, np.ndarray]
    suppressed_count: int

    @property
    def n_groups(self) -> int:
        return int(self.low.shape[0])

    def group_counts(self) -> np.ndarray:
        m = self.schema.sensitive.size
        flat = np.bincount(self.group * m + self.sensitive, minlength=self.n_groups * m)
        return flat.reshape(self.n_groups, m)


def rows_of(ids: np.ndarray, wanted: np.ndarray, *, match_negative: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, found)``: the row of each ``wanted`` respondent id in the id array ``ids`` (in any
    order, e.g. ``Release.respondent`` of a population, ``PublicView.respondent``) and whether it
    is there — ``ids[rows[i]] == wanted[i]`` where ``found[i]``.

    An id listed more than once in ``ids`` is found at its first row. An id < 0 (-1 marks a
    counterfeit or an ownerless copy, :attr:`Publication.respondent`) is never found, unless
    ``match_negative``: then it is looked up like any other. Where ``found`` is False ``rows``
    still holds a valid row of ``ids`` (0 when ``ids`` is empty), not a meaningful one: index with
    ``rows[found]``. One stable ``argsort`` of ``ids`` and one ``searchsorted``.
    """
    ids = np.asarray(ids, dtype=np.int64)
    wanted = np.asarray(wanted, dtype=np.int64)
    if len(ids) == 0:
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    pos = np.minimum(np.searchsorted(ordered, wanted), len(ids) - 1)
    found = ordered[pos] == wanted
    if not match_negative:
        found &= wanted >= 0
    return order[pos], found


@dataclass
class History:
    """Everything released so far; anonymizers and attackers keep their own state on instances."""

    releases: list[Release] = field(default_factory=list)
    publications: list[Publication] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.publications)
