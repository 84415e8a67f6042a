"""The columnar data types that flow through a run (DESIGN.md §3).

* :class:`Release` — the raw records at time ``t`` (one per respondent).
* :class:`Publication` — what an anonymizer publishes for a release: per published record its
  group, its sensitive value, a counterfeit flag and (hidden from attackers) its true respondent;
  per group the generalized QI (an interval per QI column; for a categorical QI also the set of
  leaf values it stands for, so taxonomy nodes and arbitrary value sets are both expressible and
  groups may overlap: local recoding); the suppressed respondents. A *bucketized* publication
  (anatomy, slicing) additionally publishes every record's exact QI, joined to the sensitive values
  only through the group (bucket) id.
  An *angelized* publication (Tao et al., "Angel: enhancing the utility of generalization for
  privacy preserving publication", TKDE 2009; the GT/BT tables of τ-safe (l,k)-diversity) has a
  second partition: the QI groups (``group``, generalized boxes: the generalized table GT, each
  tuple with its bucket id) and the sensitive buckets (``bucket``: the bucket table BT, per bucket
  its values and their counts). The adversary sees per group its box and the multiset of bucket
  ids of its tuples, and per bucket its values; which of a group's tuples is in which bucket is
  hidden. A respondent of group ``g`` then believes value ``v`` with probability
  ``sum_b n_{g,b}/|g| * c_b(v)/|b|`` (:meth:`Publication.expected_group_counts` / ``|g|``); with
  one partition (``bucket`` None, every other method) the bucket is the group and that is the
  group's frequencies.
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

from .errors import CdpbenchError

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
    #: float64 [N, d] the QI columns of the public population the respondents are drawn from
    #: (encoded exactly like ``qi``; a superset of this release's records), for the models that
    #: compare a publication with the population (δ-presence, k-map); None: not published
    population: np.ndarray | None = None

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
            self.population,
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
    bucket: np.ndarray | None = None  # int64 [p] sensitive bucket of each record (angelized: GT's BID); None: the group
    #: float64 [G, m] a *counted* publication (differentially private continual release, issue #29):
    #: the published (noisy) count of each sensitive value in each group (a cell of a data-independent
    #: grid, empty cells included); the record arrays above stay the hidden truth the metrics read.
    #: None: the records themselves are published (every other method)
    noisy_counts: np.ndarray | None = None
    #: what the adversary is told about the noise of ``noisy_counts`` (Kerckhoffs: mechanism and its
    #: per-cell parameters; the anonymizer's own object, e.g. ``cdpbench_dp.noise.NoiseDescription``)
    noise: Any = None

    def __post_init__(self) -> None:
        if self.noisy_counts is not None:
            self.noisy_counts = np.asarray(self.noisy_counts, dtype=np.float64)
            shape = (self.n_groups, self.schema.sensitive.size)
            if self.noisy_counts.shape != shape:
                raise CdpbenchError(f"Publication.noisy_counts must be [groups, values] = {list(shape)}, "
                                    f"got {list(self.noisy_counts.shape)}")
            if self.bucket is not None or self.qi is not None:
                raise CdpbenchError("Publication.noisy_counts (counted) excludes Publication.bucket and Publication.qi")
        if self.bucket is not None:
            self.bucket = np.asarray(self.bucket, dtype=np.int64)
            if len(self.bucket) != len(self.group) or (len(self.bucket) and self.bucket.min() < 0):
                raise CdpbenchError(f"Publication.bucket must hold a bucket id >= 0 per published record "
                                    f"({len(self.group)}), got {len(self.bucket)} ids")
            if self.qi is not None:
                raise CdpbenchError("Publication.bucket (angelized) and Publication.qi (bucketized) exclude each other")

    @property
    def n_groups(self) -> int:
        return int(self.low.shape[0])

    @property
    def bucketized(self) -> bool:
        return self.qi is not None

    @property
    def angelized(self) -> bool:
        """Two partitions: QI groups (``group``) and sensitive buckets (``bucket``); module docstring."""
        return self.bucket is not None

    @property
    def counted(self) -> bool:
        """Noisy counts per group are published, not records (the field ``noisy_counts``)."""
        return self.noisy_counts is not None

    @property
    def n_buckets(self) -> int:
        """Buckets (ids 0..B-1); the groups in a single-partition publication."""
        if self.bucket is None:
            return self.n_groups
        return int(self.bucket.max()) + 1 if len(self.bucket) else 0

    def bucket_of_record(self) -> np.ndarray:
        """int64 ``[p]``: each record's sensitive bucket (its group in a single-partition publication)."""
        return self.group if self.bucket is None else self.bucket

    def require_single_partition(self, who: str) -> None:
        """A one-line :class:`CdpbenchError` naming ``who`` when the publication is angelized: for a
        consumer that reads the sensitive values of a QI group, which an angelized one does not publish."""
        if self.angelized:
            raise CdpbenchError(f"{who} does not support an angelized publication "
                                "(QI groups published apart from the sensitive buckets, GT/BT)")

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
        """``[G, m]`` count of each sensitive value per group. Refused for an angelized publication
        (its groups publish no values: :meth:`expected_group_counts`, :meth:`bucket_counts`)."""
        self.require_single_partition("Publication.group_counts (use expected_group_counts or bucket_counts)")
        return value_counts(self.group, self.sensitive, self.n_groups, self.schema.sensitive.size)

    def bucket_sizes(self) -> np.ndarray:
        """``[B]`` tuples per bucket (the group sizes in a single-partition publication)."""
        return np.bincount(self.bucket_of_record(), minlength=self.n_buckets)

    def bucket_counts(self) -> np.ndarray:
        """``[B, m]`` count of each sensitive value per bucket (BT; :meth:`group_counts` when single-partition)."""
        return value_counts(self.bucket_of_record(), self.sensitive, self.n_buckets, self.schema.sensitive.size)

    def group_bucket_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The group x bucket multiplicities, sparse: ``(group, bucket, n)`` with ``n[i]`` > 0 tuples
        of ``group[i]`` in ``bucket[i]``, sorted by group then bucket (GT's BID column, counted)."""
        return pair_counts(self.group, self.bucket_of_record(), self.n_buckets)

    def expected_group_counts(self) -> np.ndarray:
        """float ``[G, m]``: ``E_g(v) = sum_b n_{g,b} c_b(v) / |b|``, the expected count of each value
        among group g's tuples given GT and BT (a respondent of g believes ``E_g(v) / |g|``). Equal
        to :meth:`group_counts` in a single-partition publication."""
        m = self.schema.sensitive.size
        if self.bucket is None:
            return value_counts(self.group, self.sensitive, self.n_groups, m).astype(float)
        return expected_counts(*self.group_bucket_counts(), self.bucket_counts(), self.n_groups)

    def batch(self, prior: np.ndarray | None = None) -> GroupBatch:
        """The publication's groups as a :class:`GroupBatch` (for verification; the QI groups with
        their records' true values, also in an angelized publication)."""
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
        each sorted, so the position of a tuple says nothing about who owns it. Angelized: per
        group its candidates and the bucket ids of its tuples (GT), per bucket its value counts
        (BT); no sensitive value per group (``sensitive`` None). Counted: the groups' boxes, their
        noisy counts and the noise description only; no respondent per group (listing them would
        publish every cell's exact size) and no sensitive value."""
        if self.counted:
            none = np.zeros(0, dtype=np.int64)
            return PublicView(t=self.t, schema=self.schema, group=none, respondent=none.copy(), sensitive=None,
                              low=self.low, high=self.high, value_sets=self.value_sets,
                              suppressed_count=len(self.suppressed), noisy_counts=self.noisy_counts, noise=self.noise)
        by_resp = np.lexsort((self.respondent, self.group))
        if self.bucket is None:
            sensitive, bucket, table = self.sensitive[np.lexsort((self.sensitive, self.group))], None, None
        else:
            sensitive, table = None, self.bucket_counts()
            bucket = self.bucket[np.lexsort((self.bucket, self.group))]
        return PublicView(
            t=self.t,
            schema=self.schema,
            group=self.group[by_resp],
            respondent=self.respondent[by_resp],
            sensitive=sensitive,
            low=self.low,
            high=self.high,
            value_sets=self.value_sets,
            suppressed_count=len(self.suppressed),
            bucket=bucket,
            bucket_value_counts=table,
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
        if self.bucket is not None:  # GT's BID; the value is the truth behind BT
            out["bucket"] = self.bucket
        out[s.sensitive.name] = np.asarray(s.sensitive.values, dtype=object)[self.sensitive]
        out["counterfeit"] = self.counterfeit
        return pd.DataFrame(out)


@dataclass
class PublicView:
    """A publication with the respondent–tuple link removed (see :meth:`Publication.public`).

    ``group``/``respondent`` list the candidate respondents per group (sorted by group, then id);
    ``sensitive`` lists the published sensitive values sorted by group, then value. Both arrays are
    aligned on group boundaries (same group sizes), not on individual rows.

    Angelized (GT/BT): ``sensitive`` is None — no group publishes values; ``bucket`` lists the
    bucket id of each of a group's tuples (sorted by group, then bucket id; aligned with ``group``
    on group boundaries) and ``bucket_value_counts`` ``[B, m]`` each bucket's values (BT's
    signature and count).
    """

    t: int
    schema: Schema
    group: np.ndarray
    respondent: np.ndarray
    sensitive: np.ndarray | None
    low: np.ndarray
    high: np.ndarray
    value_sets: dict[int, np.ndarray]
    suppressed_count: int
    bucket: np.ndarray | None = None  # angelized: GT's BID of each tuple, sorted by (group, bucket)
    bucket_value_counts: np.ndarray | None = None  # angelized: BT, [B, m]
    noisy_counts: np.ndarray | None = None  # counted: float64 [G, m], Publication.noisy_counts
    noise: Any = None  # counted: the noise description, Publication.noise

    @property
    def n_groups(self) -> int:
        return int(self.low.shape[0])

    @property
    def angelized(self) -> bool:
        return self.bucket is not None

    @property
    def counted(self) -> bool:
        """Noisy counts per group, no records (:attr:`Publication.noisy_counts`)."""
        return self.noisy_counts is not None

    def require_records(self, who: str) -> None:
        """A one-line :class:`CdpbenchError` naming ``who`` when the view is counted: for a consumer
        that reads published records (their values, the respondents of a group)."""
        if self.counted:
            raise CdpbenchError(f"{who} does not support a counts publication (noisy counts per grid cell, "
                                "no records; read view.noisy_counts)")

    def require_single_partition(self, who: str) -> None:
        """As :meth:`Publication.require_single_partition`; a counted view is refused as well."""
        self.require_records(who)
        if self.angelized:
            raise CdpbenchError(f"{who} does not support an angelized publication "
                                "(QI groups published apart from the sensitive buckets, GT/BT)")

    def group_sizes(self) -> np.ndarray:
        """``[G]`` published tuples per group (counterfeits included); refused for a counted view."""
        self.require_records("PublicView.group_sizes")
        return np.bincount(self.group, minlength=self.n_groups)

    def group_counts(self) -> np.ndarray:
        """``[G, m]`` count of each value per group; refused for an angelized view (use
        :meth:`expected_group_counts`) and a counted one (``noisy_counts``)."""
        self.require_single_partition("PublicView.group_counts (use expected_group_counts)")
        return value_counts(self.group, self.sensitive, self.n_groups, self.schema.sensitive.size)

    def bucket_counts(self) -> np.ndarray:
        """``[B, m]`` BT (the group counts of a single-partition view)."""
        return self.group_counts() if self.bucket_value_counts is None else self.bucket_value_counts

    def group_bucket_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`Publication.group_bucket_counts`, from GT's bucket ids."""
        bucket = self.group if self.bucket is None else self.bucket
        return pair_counts(self.group, bucket, len(self.bucket_counts()) if self.angelized else self.n_groups)

    def expected_group_counts(self) -> np.ndarray:
        """As :meth:`Publication.expected_group_counts`: float ``[G, m]`` from GT and BT only;
        refused for a counted view."""
        self.require_records("PublicView.expected_group_counts")
        if self.bucket is None:
            return self.group_counts().astype(float)
        return expected_counts(*self.group_bucket_counts(), self.bucket_value_counts, self.n_groups)


def value_counts(segment: np.ndarray, sensitive: np.ndarray, n_segments: int, m: int) -> np.ndarray:
    """``[n_segments, m]`` count of each value per segment (group or bucket)."""
    flat = np.bincount(np.asarray(segment, dtype=np.int64) * m + sensitive, minlength=n_segments * m)
    return flat.reshape(n_segments, m)


def pair_counts(group: np.ndarray, bucket: np.ndarray, n_buckets: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(group, bucket, n)``: the distinct (group, bucket) pairs of the records, sorted, and how
    many records each holds."""
    key, n = np.unique(np.asarray(group, dtype=np.int64) * max(n_buckets, 1) + bucket, return_counts=True)
    return key // max(n_buckets, 1), key % max(n_buckets, 1), n


def expected_counts(group: np.ndarray, bucket: np.ndarray, n: np.ndarray, bucket_counts: np.ndarray, n_groups: int) -> np.ndarray:
    """float ``[G, m]``: ``sum_b n_{g,b} c_b(v) / |b|`` over the pairs ``(group, bucket, n)``. Each
    term is ``(n c) / |b|``, so a group lying in one bucket it fills (``n = |b|``) gets its counts
    exactly."""
    sizes = bucket_counts.sum(axis=1)
    share = (n[:, None] * bucket_counts[bucket]) / np.maximum(sizes[bucket], 1)[:, None]
    out = np.zeros((n_groups, bucket_counts.shape[1]))
    np.add.at(out, group, share)
    return out


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
