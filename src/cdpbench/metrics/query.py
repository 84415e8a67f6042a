"""Relative error of random COUNT queries answered from a publication.

Two query forms (parameter ``form``):

* ``"qi"`` (default) — the papers' form: QI ranges only. JS-reduce §7.5 ("count the number of
  individuals in the table whose QI-values belong to certain ranges", random queries of a given
  expected selectivity, median error reported) and (tau,m)-slicedBucket §6.2 eq. 8,
  ``select count(*) from R* where A_1 in D(A_1) AND ... AND A_q in D(A_q)`` with selectivity
  ``theta = |T_Query| / |T|`` and ``QueryError = |Count(anonymized) - Count(original)| /
  Count(original)``. A query is ``COUNT(*) WHERE A_1 in [a_1, b_1] AND ... AND A_d in [a_d, b_d]``.
* ``"qi_sensitive"`` — Xiao & Tao's anatomy workload, which m-invariance's experiments use (see
  specs/invariance.md, note 13): the same ranges ``AND S = s``.

Query construction (``selectivity`` = theta, d QIs):

1. ``qi_sensitive`` only: ``s`` is drawn with probability ``pi_s``, its frequency in the release;
2. every QI range covers, in expectation, the fraction ``f`` of the release's records along that
   QI — ``f = theta^(1/d)`` in the ``qi`` form, ``f = min(1, (theta / pi_s)^(1/d))`` in the
   ``qi_sensitive`` form: with ``u ~ U[0, 1 - f]``, ``[a_j, b_j]`` runs from the empirical
   ``u``-quantile to the ``(u + f)``-quantile of column j, a repeated value at either edge being
   kept with the probability of its share inside the window (a categorical QI uses its leaf
   codes, whose order makes every taxonomy node a contiguous range).

If the QIs were independent of each other (and of S), a query would select on average
``f^d = theta`` of the records in the ``qi`` form, and ``pi_s f^d = theta`` in the
``qi_sensitive`` form whenever ``pi_s >= theta`` (else ``pi_s``).

Empty ranges (parameter ``ranges``). The randomized rounding above keeps the expected selectivity
exact, but on a coarse QI it often keeps no value at all: on bkseq's two-valued gender, a window
of 10 % of the records at theta = 0.001 keeps its value with probability 0.2, so 80 % of the
queries ask ``gender in {}`` and count 0 under any publication — the median error is then 0
whatever the anonymization. ``ranges="nonempty"`` (default) draws ranges that always hold at
least one value: the QIs are taken from the coarsest (fewest distinct values) to the finest; each
window's edges are rounded to the nearer boundary of the repeated value they cut, a window that
would then be empty takes the value under its middle, and the fraction a range actually covers is
carried over, ``f_j = (F / prod_{i<j} c_i)^(1/(d-j))`` with ``F`` the target of all QIs together
(``theta``, or ``theta / pi_s``) and ``c_i`` the share of records inside the ranges already drawn,
so the finer QIs make up for a coarse one. Expected selectivity is then close to theta when the
finer QIs can absorb it (within 25 % on independent QIs in the tests) but not exact: a query can
never be narrower than one value of every QI. ``ranges="exact"`` keeps the randomized rounding.

The true answer (``Count(original)``) counts the release's records inside the ranges (and of
value ``s``). The estimate (``Count(anonymized)``) assumes records spread uniformly over their
group's region: ``sum_groups (share of the group's region inside the query ranges) x c_g``, with
``c_g`` the group's size ``|Q|`` in the ``qi`` form and the count of ``s`` in the group in the
``qi_sensitive`` form (in a counted publication, :attr:`~cdpbench.data.Publication.noisy_counts`,
the raw noisy counts: the sum over the values of the cell's noisy counts, resp. the noisy count of
``s``; unbiased, a negative count kept as it is; its expected count through the buckets in an angelized publication,
:meth:`~cdpbench.data.Publication.expected_group_counts`; integral numeric domains count
integers, other numeric domains measure length, categorical QIs count leaves of the value set). In a bucketized publication the QI values
are exact: every published QI point inside the ranges counts 1 in the ``qi`` form, and its
bucket's share ``count_bucket(s) / |bucket|`` in the ``qi_sensitive`` form. Suppressed records
are absent from the publication and thus from the estimate; counterfeits are in it (they are
part of ``|Q|``). Error: ``|estimate - true| / max(true, 1)`` (eq. 8, with a true count of 0
taken as 1 so the error stays finite).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import Publication, Release
from ..errors import require
from ..plugin import Metric, MetricContext
from ._regions import (
    DENSE_BUDGET,
    GRID_BUDGET,
    box_density,
    box_sums,
    integer_count,
    integral_columns,
    leaf_ranges,
    prefix_grid,
    publication_regions,
)

FORMS = ("qi", "qi_sensitive")
RANGES = ("nonempty", "exact")
ANY_VALUE = -1  # CountQueries.sensitive: no condition on the sensitive attribute (the "qi" form)


@dataclass
class CountQueries:
    """``COUNT(*) WHERE low[q, j] <= A_j <= high[q, j] for all j [AND S = sensitive[q]]``
    (categorical columns: leaf-code ranges); ``sensitive[q] = ANY_VALUE`` (-1) puts no condition
    on S (the papers' ``qi`` form)."""

    low: np.ndarray  # float [Q, d]
    high: np.ndarray  # float [Q, d]
    sensitive: np.ndarray  # int64 [Q]; ANY_VALUE: QI ranges only

    def __len__(self) -> int:
        return len(self.sensitive)


def random_queries(
    release: Release, count: int, selectivity: float, rng: np.random.Generator, form: str = "qi",
    ranges: str = "nonempty",
) -> CountQueries:
    """``count`` random queries of expected selectivity about ``selectivity`` in the given
    ``form`` (``"qi"``: QI ranges only; ``"qi_sensitive"``: and ``S = s``) with ``ranges``
    ``"nonempty"`` or ``"exact"`` (module docstring)."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if ranges not in RANGES:
        raise ValueError(f"ranges must be one of {RANGES}, got {ranges!r}")
    n, d = release.qi.shape
    if n == 0:
        return CountQueries(np.zeros((0, d)), np.zeros((0, d)), np.zeros(0, np.int64))
    if form == "qi":
        s = np.full(count, ANY_VALUE, dtype=np.int64)
        target = np.full(count, float(selectivity))
    else:
        pi = release.sensitive_distribution()
        s = rng.choice(len(pi), size=count, p=pi)
        target = np.minimum(1.0, selectivity / pi[s])
    low = np.empty((count, d))
    high = np.empty((count, d))
    columns = [np.sort(release.qi[:, j]) for j in range(d)]
    if ranges == "exact":
        f = target ** (1.0 / max(d, 1))
        for j in range(d):
            low[:, j], high[:, j] = _quantile_ranges(columns[j], f, rng)
        return CountQueries(low, high, s.astype(np.int64))
    coarse_first = np.argsort([len(np.unique(c)) for c in columns], kind="stable")
    remaining = target
    for k, j in enumerate(coarse_first):
        f = np.clip(remaining ** (1.0 / (d - k)), 0.0, 1.0)
        low[:, j], high[:, j], covered = _nonempty_ranges(columns[j], f, rng)
        remaining = remaining / covered
    return CountQueries(low, high, s.astype(np.int64))


@dataclass
class _Windows:
    """Random windows ``[start, end)`` of ``f n`` positions over a sorted column, with the
    repeated values ``va``/``vb`` their edges cut (copies at ``[la, ra)`` / ``[lb, rb)``) and the
    values just outside them (``after_a``, ``before_b``; +-inf past the column's ends)."""

    start: np.ndarray
    end: np.ndarray
    va: np.ndarray
    vb: np.ndarray
    la: np.ndarray
    ra: np.ndarray
    lb: np.ndarray
    rb: np.ndarray
    after_a: np.ndarray
    before_b: np.ndarray

    @classmethod
    def draw(cls, col: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> "_Windows":
        n = len(col)
        start = rng.random(len(f)) * (1.0 - f) * n
        end = start + f * n
        va = col[np.minimum(np.floor(start).astype(np.int64), n - 1)]
        vb = col[np.clip(np.ceil(end).astype(np.int64) - 1, 0, n - 1)]
        la, ra = np.searchsorted(col, va, "left"), np.searchsorted(col, va, "right")
        lb, rb = np.searchsorted(col, vb, "left"), np.searchsorted(col, vb, "right")
        after_a = np.where(ra < n, col[np.minimum(ra, n - 1)], np.inf)
        before_b = np.where(lb > 0, col[np.maximum(lb - 1, 0)], -np.inf)
        return cls(start, end, va, vb, la, ra, lb, rb, after_a, before_b)

    def inside_a(self) -> np.ndarray:
        """Copies of ``va`` inside the window."""
        return np.minimum(self.ra, self.end) - self.start

    def inside_b(self) -> np.ndarray:
        """Copies of ``vb`` inside the window."""
        return self.end - np.maximum(self.lb, self.start)


def _nonempty_ranges(col: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value ranges over the sorted column ``col`` from windows covering the fraction ``f``, each
    edge rounded to the nearer boundary of the repeated value it cuts, at least one value kept
    (the one under the window's middle); returns ``(low, high, covered share of the records)``."""
    n = len(col)
    w = _Windows.draw(col, f, rng)
    keep_a = w.inside_a() * 2 >= w.ra - w.la  # the window holds at least half of va's copies
    keep_b = w.inside_b() * 2 >= w.rb - w.lb
    low = np.where(keep_a, w.va, w.after_a)
    high = np.where(keep_b, w.vb, w.before_b)
    middle = col[np.minimum(np.floor((w.start + w.end) / 2).astype(np.int64), n - 1)]
    empty = low > high
    low = np.where(empty, middle, low)
    high = np.where(empty, middle, high)
    covered = (np.searchsorted(col, high, "right") - np.searchsorted(col, low, "left")) / n
    return low, high, covered


def _quantile_ranges(col: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Value ranges covering, in expectation, the fraction ``f`` of the sorted column ``col``.

    The positions ``[u n, (u + f) n)`` with ``u ~ U[0, 1 - f]`` are a window over the sorted
    values; a repeated value cut by the window's edge is kept with probability equal to the share
    of its copies inside the window (randomized rounding), so repeated values (categorical codes,
    integer ages) do not inflate the selectivity. An empty range is ``(+inf, -inf)``.
    """
    w = _Windows.draw(col, f, rng)
    keep_a = rng.random(len(f)) * (w.ra - w.la) < w.inside_a()
    keep_b = rng.random(len(f)) * (w.rb - w.lb) < w.inside_b()
    low = np.where(keep_a, w.va, w.after_a)
    high = np.where(keep_b, w.vb, w.before_b)
    same = w.va == w.vb  # the whole window inside one repeated value: keep it with probability f n / copies
    low = np.where(same, np.where(keep_a, w.va, np.inf), low)
    high = np.where(same, np.where(keep_a, w.va, -np.inf), high)
    return low, high


def query_answers(queries: CountQueries, release: Release, publication: Publication) -> tuple[np.ndarray, np.ndarray]:
    """``(true answers, estimates)`` of every query, float ``[Q]`` each.

    Queries are taken one sensitive value at a time, so each is compared only with the records
    of its value (true answers) and with the groups (buckets' points) holding that value; queries
    without a sensitive condition (``ANY_VALUE``) with every record, every group (weighted by its
    size ``|Q|``) or every published point (weight 1)."""
    true = np.zeros(len(queries))
    est = np.zeros(len(queries))
    if len(queries) == 0:
        return true, est
    values = np.unique(queries.sensitive)
    m = publication.schema.sensitive.size
    if values[0] < ANY_VALUE or values[-1] >= m:
        raise ValueError(f"query sensitive values must be in [{ANY_VALUE}, {m - 1}], got {values[0]}..{values[-1]}")
    if publication.counted:
        # noisy counts (issue #29): c_g = the raw noisy count of s in cell g (qi_sensitive form), or
        # their sum over the values (qi form); unbiased, negative values kept
        gcounts = publication.noisy_counts
        gsizes = gcounts.sum(axis=1)
    else:
        gcounts = publication.expected_group_counts()  # the group counts when single-partition
        gsizes = publication.group_sizes().astype(float)
    bucketized = publication.bucketized
    if bucketized:
        sizes = np.maximum(gsizes, 1.0)
        point_share = gcounts[publication.group] / sizes[publication.group][:, None]  # [p, m]
    else:
        regions = publication_regions(publication)
        integral = integral_columns(release)
    for value in values:
        sel = np.flatnonzero(queries.sensitive == value)
        low, high = queries.low[sel], queries.high[sel]
        if value == ANY_VALUE:
            true[sel] = _weighted_inside(low, high, release.qi, None)
            if bucketized:
                # exact points: each one inside the ranges is one published tuple
                est[sel] = _weighted_inside(low, high, publication.qi, None)
            else:
                groups = np.flatnonzero(gsizes != 0)  # a noisy count may be negative
                est[sel] = _spread_inside(low, high, regions, groups, gsizes[groups], publication.schema, integral)
            continue
        true[sel] = _weighted_inside(low, high, release.qi[release.sensitive == value], None)
        if bucketized:
            # exact points: each one inside the ranges counts its bucket's share of the value
            pts = np.flatnonzero(point_share[:, value] > 0)
            est[sel] = _weighted_inside(low, high, publication.qi[pts], point_share[pts, value])
        else:
            groups = np.flatnonzero(gcounts[:, value] != 0)
            est[sel] = _spread_inside(low, high, regions, groups, gcounts[groups, value], publication.schema, integral)
    return true, est


def _weighted_inside(low: np.ndarray, high: np.ndarray, points: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """Per query, the (weighted) number of ``points`` inside its ranges: prefix sums over the grid
    of the points' distinct values per column when it fits ``GRID_BUDGET``, else point by point."""
    out = np.zeros(len(low))
    n = len(points)
    if n == 0:
        return out
    axes = [np.unique(points[:, j]) for j in range(points.shape[1])]
    shape = tuple(len(a) for a in axes)
    if float(np.prod([s + 1 for s in shape], dtype=np.float64)) <= GRID_BUDGET:
        index = np.column_stack([np.searchsorted(a, points[:, j]) for j, a in enumerate(axes)])
        grid = prefix_grid(index, shape, np.ones(n) if weight is None else np.asarray(weight, dtype=float))
        first = np.column_stack([np.searchsorted(a, low[:, j], side="left") for j, a in enumerate(axes)])
        stop = np.column_stack([np.searchsorted(a, high[:, j], side="right") for j, a in enumerate(axes)])
        return box_sums(grid, first, stop)
    chunk = max(1, DENSE_BUDGET // n)
    for q0 in range(0, len(low), chunk):
        sl = slice(q0, q0 + chunk)
        inside = np.ones((len(low[sl]), n), dtype=bool)
        for j in range(points.shape[1]):
            v = points[:, j][None, :]
            inside &= (v >= low[sl, j][:, None]) & (v <= high[sl, j][:, None])
        out[sl] = inside.sum(axis=1) if weight is None else inside @ weight
    return out


def _spread_inside(low, high, regions, groups: np.ndarray, count: np.ndarray, schema, integral) -> np.ndarray:
    """Per query, ``sum_g (share of group g's region inside the ranges) x count[g]``: on the
    lattice of the domain (:func:`_lattice_spread`) when every QI is categorical with leaf-range
    sets or integral, else group by group."""
    out = np.zeros(len(low))
    R = len(groups)
    if R == 0:
        return out
    spread = _lattice_spread(low, high, regions, groups, count, schema, integral)
    if spread is not None:
        return spread
    lo_all, hi_all = regions.low[groups], regions.high[groups]
    cum = {j: np.concatenate([np.zeros((R, 1)), np.cumsum(s[groups], axis=1)], axis=1) for j, s in regions.sets.items()}
    rows = np.arange(R)[None, :]
    chunk = max(1, DENSE_BUDGET // R)
    for q0 in range(0, len(low), chunk):
        sl = slice(q0, q0 + chunk)
        share = np.broadcast_to(count, (len(low[sl]), R)).copy()
        for j, a in enumerate(schema.qi):
            a_q, b_q = low[sl, j][:, None], high[sl, j][:, None]
            lo, hi = lo_all[:, j][None, :], hi_all[:, j][None, :]
            if a.kind == "categorical":
                L = a.taxonomy.size
                first = np.clip(a_q, 0, L).astype(np.int64)
                last = np.clip(b_q + 1, 0, L).astype(np.int64)
                hit = cum[j][rows, last] - cum[j][rows, first]
                share *= np.maximum(hit, 0.0) / np.maximum(cum[j][:, -1], 1.0)[None, :]
            elif integral[j]:
                inside = integer_count(np.maximum(lo, a_q), np.minimum(hi, b_q))
                share *= inside / np.maximum(integer_count(lo, hi), 1.0)
            else:
                length = hi - lo
                overlap = np.maximum(np.minimum(hi, b_q) - np.maximum(lo, a_q), 0.0)
                point = (lo >= a_q) & (lo <= b_q)
                share *= np.where(length > 0, overlap / np.where(length > 0, length, 1.0), point)
        out[sl] = share.sum(axis=1)
    return out


def _lattice_spread(low, high, regions, groups: np.ndarray, count: np.ndarray, schema, integral) -> np.ndarray | None:
    """:func:`_spread_inside` when the QI space is a lattice — every QI categorical (leaves) or
    numeric with an integral domain (its integers) — and every group's region a box of it (a
    categorical set a leaf range): a group spreads ``count[g]`` evenly over its lattice points,
    the density of every point is summed by inclusion–exclusion and prefix sums, and a query's
    estimate is the density summed over its box (prefix sums again). ``None`` otherwise, or when
    the lattice exceeds ``GRID_BUDGET``. Sums are taken in another order than group by group
    (last-bit differences)."""
    d = len(schema.qi)
    sizes, offset = [], []
    for j, a in enumerate(schema.qi):
        if a.kind == "categorical":
            sizes.append(a.taxonomy.size)
            offset.append(0)
        elif integral[j]:
            sizes.append(int(np.floor(a.high) - np.ceil(a.low)) + 1)
            offset.append(int(np.ceil(a.low)))
        else:
            return None
    if float(np.prod([n + 2 for n in sizes], dtype=np.float64)) > GRID_BUDGET:
        return None
    lo = np.zeros((len(groups), d), dtype=np.int64)
    hi = np.zeros((len(groups), d), dtype=np.int64)
    if not leaf_ranges(regions, schema.categorical, groups):
        return None
    for j, a in enumerate(schema.qi):
        if a.kind == "categorical":
            lo[:, j], hi[:, j] = regions.low[groups, j], regions.high[groups, j]
        else:
            lo[:, j] = np.ceil(regions.low[groups, j]) - offset[j]
            hi[:, j] = np.floor(regions.high[groups, j]) - offset[j]
        lo[:, j], hi[:, j] = np.clip(lo[:, j], 0, sizes[j]), np.clip(hi[:, j], -1, sizes[j] - 1)
    points = np.prod(np.maximum(hi - lo + 1, 0), axis=1)
    weight = np.asarray(count, dtype=float) / np.maximum(points, 1)
    keep = points > 0
    lo, hi, weight = lo[keep], hi[keep], weight[keep]
    density = box_density(tuple(n + 1 for n in sizes), lo, hi, weight)  # per lattice point
    cumulative = np.zeros(tuple(n + 1 for n in sizes))  # prefix sums of the density, zero-padded
    cumulative[tuple(slice(1, None) for _ in sizes)] = density[tuple(slice(0, n) for n in sizes)]
    for j in range(d):
        np.cumsum(cumulative, axis=j, out=cumulative)
    first = np.zeros((len(low), d), dtype=np.int64)
    stop = np.zeros((len(low), d), dtype=np.int64)
    for j, a in enumerate(schema.qi):
        if a.kind == "categorical":
            first[:, j] = np.clip(low[:, j], 0, sizes[j])
            stop[:, j] = np.clip(high[:, j] + 1, 0, sizes[j])
        else:
            first[:, j] = np.clip(np.ceil(low[:, j]) - offset[j], 0, sizes[j])
            stop[:, j] = np.clip(np.floor(high[:, j]) - offset[j] + 1, 0, sizes[j])
    return box_sums(cumulative, first, stop)


def relative_errors(true: np.ndarray, est: np.ndarray) -> np.ndarray:
    """``|est - true| / max(true, 1)``."""
    return np.abs(est - true) / np.maximum(true, 1.0)


@dataclass
class QueryErrorParams:
    queries: int = field(default=1000, metadata={"help": "number of random COUNT queries per release (>= 1)"})
    selectivity: float = field(
        default=0.1, metadata={"help": "expected fraction of the release's records a query selects, in (0, 1]"}
    )
    form: str = field(
        default="qi",
        metadata={
            "help": "'qi': ranges over the QIs only (JS-reduce §7.5, slicedBucket eq. 8); "
            "'qi_sensitive': the ranges AND S = s (Xiao & Tao's anatomy workload)"
        },
    )
    ranges: str = field(
        default="nonempty",
        metadata={
            "help": "'nonempty': every range holds a value, the selectivity carried over to finer QIs; "
            "'exact': randomized rounding, exact expected selectivity but often empty ranges on coarse QIs"
        },
    )

    def __post_init__(self) -> None:
        require(
            isinstance(self.queries, int) and not isinstance(self.queries, bool) and self.queries >= 1,
            "queries",
            "an integer >= 1",
            self.queries,
        )
        number = isinstance(self.selectivity, (int, float)) and not isinstance(self.selectivity, bool)
        require(
            number and 0.0 < self.selectivity <= 1.0,
            "selectivity",
            "a number in (0, 1]",
            self.selectivity,
        )
        require(self.form in FORMS, "form", "one of 'qi', 'qi_sensitive'", self.form)
        require(self.ranges in RANGES, "ranges", "one of 'nonempty', 'exact'", self.ranges)


class QueryError(Metric):
    """Relative error of random COUNT queries over QI ranges (JS-reduce §7.5, slicedBucket eq. 8).

    Keys: ``query_error_mean``, ``query_error_median`` (0 for an empty release). Queries are drawn
    from ``ctx.rng`` in the form ``params.form`` (``"qi_sensitive"`` adds ``AND S = s``); see the module docstring for both forms, their
    construction and the estimate.
    """

    uses_history = False  # reads no ctx.history: this release and its publication only (issue #28: the run keeps no more than it needs)

    Params = QueryErrorParams
    reads_counts = True  # answers from Publication.noisy_counts in a counted publication (issue #29)

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        p = self.params
        queries = random_queries(ctx.release, p.queries, float(p.selectivity), ctx.rng, p.form, p.ranges)
        if len(queries) == 0:
            return {"query_error_mean": 0.0, "query_error_median": 0.0}
        err = relative_errors(*query_answers(queries, ctx.release, ctx.publication))
        return {"query_error_mean": float(err.mean()), "query_error_median": float(np.median(err))}
