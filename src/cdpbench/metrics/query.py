"""Relative error of random COUNT queries answered from a publication.

JS-reduce §7.5 ("count the number of individuals in the table whose QI-values belong to certain
ranges", random queries of a given expected selectivity, median error reported) and
(tau,m)-slicedBucket §6.2 eq. 8; the sensitive predicate follows Xiao & Tao's anatomy workload.

Query construction (``selectivity`` = theta, d QIs): a query is
``COUNT(*) WHERE A_1 in [a_1, b_1] AND ... AND A_d in [a_d, b_d] AND S = s``.

1. ``s`` is drawn with probability ``pi_s``, its frequency in the release;
2. every QI range covers, in expectation, the fraction ``f = min(1, (theta / pi_s)^(1/d))`` of
   the release's records along that QI: with ``u ~ U[0, 1 - f]``, ``[a_j, b_j]`` runs from the
   empirical ``u``-quantile to the ``(u + f)``-quantile of column j, a repeated value at either
   edge being kept with the probability of its share inside the window (a categorical QI uses its
   leaf codes, whose order makes every taxonomy node a contiguous range).

If the QIs were independent of each other and of S, a query would select on average
``pi_s f^d = theta`` of the records whenever ``pi_s >= theta`` (else ``pi_s``).

The true answer counts the release's records. The estimate assumes records spread uniformly over
their group's region: ``sum_groups (share of the group's region inside the query ranges) x count
of s in the group`` (integral numeric domains count integers, other numeric domains measure
length, categorical QIs count leaves of the value set); in a bucketized publication every exact
QI point inside the ranges contributes its bucket's share ``count_bucket(s) / |bucket|``.
Suppressed records are absent from the publication and thus from the estimate; counterfeits are
in it. Error: ``|estimate - true| / max(true, 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import Publication, Release
from ..errors import require
from ..plugin import Metric, MetricContext
from ._regions import DENSE_BUDGET, integer_count, integral_columns, publication_regions


@dataclass
class CountQueries:
    """``COUNT(*) WHERE low[q, j] <= A_j <= high[q, j] for all j AND S = sensitive[q]``
    (categorical columns: leaf-code ranges)."""

    low: np.ndarray  # float [Q, d]
    high: np.ndarray  # float [Q, d]
    sensitive: np.ndarray  # int64 [Q]

    def __len__(self) -> int:
        return len(self.sensitive)


def random_queries(release: Release, count: int, selectivity: float, rng: np.random.Generator) -> CountQueries:
    """``count`` random queries of expected selectivity about ``selectivity`` (module docstring)."""
    n, d = release.qi.shape
    if n == 0:
        return CountQueries(np.zeros((0, d)), np.zeros((0, d)), np.zeros(0, np.int64))
    pi = release.sensitive_distribution()
    s = rng.choice(len(pi), size=count, p=pi)
    f = np.minimum(1.0, (selectivity / pi[s]) ** (1.0 / max(d, 1)))
    low = np.empty((count, d))
    high = np.empty((count, d))
    for j in range(d):
        low[:, j], high[:, j] = _quantile_ranges(np.sort(release.qi[:, j]), f, rng)
    return CountQueries(low, high, s.astype(np.int64))


def _quantile_ranges(col: np.ndarray, f: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Value ranges covering, in expectation, the fraction ``f`` of the sorted column ``col``.

    The positions ``[u n, (u + f) n)`` with ``u ~ U[0, 1 - f]`` are a window over the sorted
    values; a repeated value cut by the window's edge is kept with probability equal to the share
    of its copies inside the window (randomized rounding), so repeated values (categorical codes,
    integer ages) do not inflate the selectivity. An empty range is ``(+inf, -inf)``.
    """
    n = len(col)
    start = rng.random(len(f)) * (1.0 - f) * n
    end = start + f * n
    ia = np.minimum(np.floor(start).astype(np.int64), n - 1)
    ib = np.clip(np.ceil(end).astype(np.int64) - 1, 0, n - 1)
    va, vb = col[ia], col[ib]
    la, ra = np.searchsorted(col, va, "left"), np.searchsorted(col, va, "right")
    lb, rb = np.searchsorted(col, vb, "left"), np.searchsorted(col, vb, "right")
    keep_a = rng.random(len(f)) * (ra - la) < np.minimum(ra, end) - start
    keep_b = rng.random(len(f)) * (rb - lb) < end - np.maximum(lb, start)
    after_a = np.where(ra < n, col[np.minimum(ra, n - 1)], np.inf)
    before_b = np.where(lb > 0, col[np.maximum(lb - 1, 0)], -np.inf)
    low = np.where(keep_a, va, after_a)
    high = np.where(keep_b, vb, before_b)
    same = va == vb  # the whole window inside one repeated value: keep it with probability f n / copies
    low = np.where(same, np.where(keep_a, va, np.inf), low)
    high = np.where(same, np.where(keep_a, va, -np.inf), high)
    return low, high


def query_answers(queries: CountQueries, release: Release, publication: Publication) -> tuple[np.ndarray, np.ndarray]:
    """``(true answers, estimates)`` of every query, float ``[Q]`` each.

    Queries are taken one sensitive value at a time, so each is compared only with the records
    of its value (true answers) and with the groups (buckets' points) holding that value."""
    true = np.zeros(len(queries))
    est = np.zeros(len(queries))
    if len(queries) == 0:
        return true, est
    gcounts = publication.group_counts().astype(float)
    bucketized = publication.bucketized
    if bucketized:
        sizes = np.maximum(publication.group_sizes(), 1)
        point_share = gcounts[publication.group] / sizes[publication.group][:, None]  # [p, m]
    else:
        regions = publication_regions(publication)
        integral = integral_columns(release)
    for value in np.unique(queries.sensitive):
        sel = np.flatnonzero(queries.sensitive == value)
        low, high = queries.low[sel], queries.high[sel]
        true[sel] = _weighted_inside(low, high, release.qi[release.sensitive == value], None)
        if bucketized:
            # exact points: each one inside the ranges counts its bucket's share of the value
            pts = np.flatnonzero(point_share[:, value] > 0)
            est[sel] = _weighted_inside(low, high, publication.qi[pts], point_share[pts, value])
        else:
            groups = np.flatnonzero(gcounts[:, value] > 0)
            est[sel] = _spread_inside(low, high, regions, groups, gcounts[groups, value], publication.schema, integral)
    return true, est


def _weighted_inside(low: np.ndarray, high: np.ndarray, points: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """Per query, the (weighted) number of ``points`` inside its ranges."""
    out = np.zeros(len(low))
    n = len(points)
    if n == 0:
        return out
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
    """Per query, ``sum_g (share of group g's region inside the ranges) x count[g]``."""
    out = np.zeros(len(low))
    R = len(groups)
    if R == 0:
        return out
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


def relative_errors(true: np.ndarray, est: np.ndarray) -> np.ndarray:
    """``|est - true| / max(true, 1)``."""
    return np.abs(est - true) / np.maximum(true, 1.0)


@dataclass
class QueryErrorParams:
    queries: int = field(default=1000, metadata={"help": "number of random COUNT queries per release (>= 1)"})
    selectivity: float = field(
        default=0.1, metadata={"help": "expected fraction of the release's records a query selects, in (0, 1]"}
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


class QueryError(Metric):
    """Relative error of random COUNT queries over QI ranges and a sensitive value (JS-reduce §7.5).

    Keys: ``query_error_mean``, ``query_error_median`` (0 for an empty release). Queries are drawn
    from ``ctx.rng``; see the module docstring for their construction and the estimate.
    """

    Params = QueryErrorParams

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        queries = random_queries(ctx.release, self.params.queries, float(self.params.selectivity), ctx.rng)
        if len(queries) == 0:
            return {"query_error_mean": 0.0, "query_error_median": 0.0}
        err = relative_errors(*query_answers(queries, ctx.release, ctx.publication))
        return {"query_error_mean": float(err.mean()), "query_error_median": float(np.median(err))}
