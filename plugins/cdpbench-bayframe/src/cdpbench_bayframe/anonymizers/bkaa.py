"""BKAA, BayFrame's anonymization algorithm (Amiri, Yazdani, Shakery, Ho, TDP 2019, §5.1,
Algorithm 1).

1. **NPN order** π (nearest point next, Algorithm 1 line 2). Every QI is mapped to [0, 1]: a
   numeric QI min-max over the release's own range (a constant column maps to 0), a categorical QI
   as its taxonomy leaf code divided by ``L - 1`` (L leaves; so a two-leaf gender is 0/1 and a
   taxonomy whose leaves are listed in level order, like Adult's education, is education-num
   rescaled: bayframe.md §1.7 item 8; our choice for other taxonomies). On these points, with the
   squared Euclidean distance computed column by column (:func:`squared_distances`):
   the first record is the one farthest from the centroid of all records; each next record is the
   nearest *remaining* record to the previous one; ties go to the lowest row index (§1.7 item 8).
   The definition costs O(n²); :func:`npn_order` gives exactly its order much faster (see there).
2. **Greedy groups** (lines 3–13). Walk π, adding records to the current set Q; as soon as Q is
   accepted by the privacy model (J-similarity: |Q| >= k, the JSD of the revised priors <= J and
   β-likeness; any model works: it is asked only through
   :meth:`~cdpbench.plugin.PublishContext.predicate`), emit Q as a group and start a new Q. As in
   the pseudo-code, Q is never abandoned: if no prefix from some start is accepted, every record
   from there on is left over. The records of the last, unfinished Q are the leftovers.
3. **Leftovers** (lines 14–24). ``leftovers="merge"`` (the paper): each leftover r, in the order
   of π, joins an existing group q such that q ∪ {r} is still accepted; the paper only says such a
   q "exists" (§1.7 item 9), we take the one whose QI centroid (in the normalized space of step 1,
   over its current members) is nearest to r, ties to the lowest group index; r is suppressed when
   no group accepts it. Groups grow as leftovers join them, and later leftovers are judged against
   the grown groups (centroids included). ``leftovers="suppress"`` suppresses them all.
4. **CreateQI** (line 9): numeric QIs become [min, max], categorical QIs the closest common
   taxonomy ancestor (``categorical="taxonomy"``) or the set of values present (``"set"``), by
   :meth:`~cdpbench.data.Publication.from_partition`.

Batched judgments (the core's :mod:`cdpbench.greedy`, shared with cdpbench_jsreduce's
``js_reduce``). The scan does not ask the model about one candidate at a time: from a start it
judges the prefixes of sizes ``lo..hi`` of the rest of π in one ``accepts`` call (first
``1..window``, then doubling while none is accepted) and takes the smallest accepted size, which
is the group the record-by-record loop would close whatever ``window`` is. A call never holds more
than ``cdpbench.greedy.BATCH_RECORDS`` records. The leftover step asks the groups nearest first in
blocks (16, 32, 64, ... groups per call) and takes the first accepted one, the group the paper's
rule picks. Worst case (a start no prefix satisfies) the scan judges O(n²) records, the paper's
O(n²).

Running statistics (the privacy model's optional fast path,
:meth:`~cdpbench.plugin.PublishContext.extension`; J-similarity offers it). When the model offers
prefix judgments (``GroupExtension.accepts_prefixes``: running sums along π restarted at the start,
the same floats as ``accepts``), the scan judges all sizes ``1..hi`` from a start in one step of
O(hi·m), ``hi`` doubling: a stuck start costs O(L·m) for the L records to the end of π instead of
O(L²·m). The leftovers are then judged against every group at once (``accepts_plus``: each group
plus the leftover) and joined to the nearest accepted group by centroid (``add``). Both give the
groups of the path through ``accepts``; a model without an extension is asked through ``accepts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.greedy import (
    ExtensionStart,
    GroupPredicate,
    PrefixJudge,
    extension_over,
    merge_leftovers,
    merge_leftovers_extension,
    prefix_judge,
    smallest_accepted_prefix,
    smallest_accepted_prefix_running,
)
from cdpbench.plugin import Anonymizer, PublishContext

_EXTENSION_BLOCK = 512  # groups judged at once for a leftover through an extension (x4 while none accepts)
_FIRST_PREFIXES = 32  # sizes judged in the first prefix judgment from a start (doubles)
_PREFIX_RECORDS = 1 << 22  # most sizes in one prefix judgment (a [L, m] running sum); past it, accepts
_SMALL_GROUP = 8  # after a group of at most this size, the next starts are judged a block at a time
_RUN_STARTS = 64  # starts per block (_run_of_groups_running)


@dataclass
class BKAAParams:
    leftovers: str = field(
        default="merge",
        metadata={
            "help": "records left at the end of the NPN order: 'merge' (the paper: into the nearest group by "
            "QI centroid that stays valid, else suppress) or 'suppress'"
        },
    )
    categorical: str = field(
        default="taxonomy",
        metadata={
            "help": "how a group's categorical QI is published: 'taxonomy' (the closest common ancestor, the "
            "paper's CreateQI) or 'set' (exactly the values present)"
        },
    )
    window: int = field(
        default=8,
        metadata={"help": "candidate group sizes asked in the first accepts call from each start (doubles while none is accepted); speed only, never the result"},
    )

    def __post_init__(self) -> None:
        require(self.leftovers in ("merge", "suppress"), "leftovers", "'merge' or 'suppress'", self.leftovers)
        require(self.categorical in ("taxonomy", "set"), "categorical", "'taxonomy' or 'set'", self.categorical)
        require(isinstance(self.window, int) and not isinstance(self.window, bool) and self.window >= 1, "window", "an integer >= 1", self.window)


class BKAA(Anonymizer):
    """BKAA (BayFrame, TDP 2019, Algorithm 1): NPN order, greedy groups, leftovers merged or suppressed; any privacy model."""

    Params = BKAAParams
    needs_prior = False  # the privacy model declares its own need (J-similarity does)

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        points = npn_coordinates(release)
        order = npn_order(points)
        group, stats = greedy_partition(
            order,
            ctx.predicate(release),
            points,
            window=self.params.window,
            leftovers=self.params.leftovers,
            extension=ctx.extension(release),
        )
        model = ctx.privacy_model
        name = getattr(model, "plugin_name", type(model).__name__)
        info = {"anonymizer": getattr(self, "plugin_name", "bkaa"), "privacy_model": name, **stats}
        return Publication.from_partition(release, group, categorical=self.params.categorical, info=info)


# ---------------------------------------------------------------------------- NPN order
def npn_coordinates(release: Release) -> np.ndarray:
    """``[n, d]`` QI points in [0, 1] for the NPN distance: numeric QIs min-max normalized over
    the release's range (0 for a constant column), categorical leaf codes divided by ``L - 1``."""
    qi = np.asarray(release.qi, dtype=float)
    points = np.zeros(qi.shape, dtype=float)
    if len(qi) == 0:
        return points
    for j, a in enumerate(release.schema.qi):
        x = qi[:, j]
        if a.kind == "categorical":
            top = a.taxonomy.size - 1
            points[:, j] = x / top if top > 0 else 0.0
        else:
            low, span = x.min(), x.max() - x.min()
            points[:, j] = (x - low) / span if span > 0 else 0.0
    return points


def squared_distances(points: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``[n]`` squared Euclidean distance of each row of ``points`` to ``y``, summed column by
    column in column order (the same floats for a pair whichever rows are asked with it)."""
    points = np.asarray(points, dtype=float)
    out = np.zeros(len(points))
    for j in range(points.shape[1]):
        diff = points[:, j] - y[j]
        out += diff * diff
    return out


def npn_order(points: np.ndarray) -> np.ndarray:
    """Row indices of ``points`` in NPN order (step 1 of the module docstring), exactly the order
    of the O(n²) definition with distances from :func:`squared_distances` and ties to the lowest
    row index.

    * Records at the same point are visited together, in row order: once the walk reaches a point,
      its remaining duplicates are at distance 0. So the walk runs over the distinct points, each
      standing for its lowest row (distinct points sorted by that row, so "lowest row" is "lowest
      point index"), and is expanded back at the end.
    * Each step needs the nearest unvisited point. A ``cKDTree`` only proposes candidates: their
      distances are recomputed exactly (:func:`squared_distances`) and the smallest wins, ties to
      the lowest index. Every point's ``_NEIGHBOURS`` nearest points are listed up front in one
      vectorized query; a step first scans the current point's list (see
      :func:`_nearest_point_walk`). When the list cannot answer (all of it visited, or a run of
      tied distances reaching its end), a tree over the unvisited
      points is asked for the ``kk`` nearest, ``kk`` doubling while all are visited; that tree is
      rebuilt once half of its points are visited. Whenever the last distance a query returned lies
      within a rounding slack (``_SLACK``, relative) of the best candidate's, points tied with it
      may have been cut off, so all points within the slack are fetched (``query_ball_point``) and
      judged the same way. Per step the work is a few small array operations; 100,000 distinct
      points take about 1.5 s.
    """
    points = np.asarray(points, dtype=float)
    n = len(points)
    if n <= 1 or points.shape[1] == 0:
        return np.arange(n, dtype=np.int64)
    centroid = points.mean(axis=0)
    distinct, first_row, inverse = np.unique(points, axis=0, return_index=True, return_inverse=True)
    by_row = np.argsort(first_row, kind="stable")  # distinct points sorted by their lowest row
    rank = np.empty(len(by_row), dtype=np.int64)
    rank[by_row] = np.arange(len(by_row), dtype=np.int64)
    distinct = np.ascontiguousarray(distinct[by_row])
    inverse = rank[np.asarray(inverse).reshape(-1)]  # point index of every row
    start = int(np.argmax(squared_distances(distinct, centroid)))  # farthest; ties: lowest index
    walk = _nearest_point_walk(distinct, start)
    step = np.empty(len(walk), dtype=np.int64)
    step[walk] = np.arange(len(walk), dtype=np.int64)
    return np.argsort(step[inverse], kind="stable").astype(np.int64)  # same point: row order


_SLACK = 1e-9  # relative slack between the tree's distances and squared_distances (float rounding)
_NEIGHBOURS = 16  # nearest neighbours listed per point up front
_REBUILD = 0.5  # rebuild the tree of unvisited points when this share of its points is visited


def _nearest_point_walk(points: np.ndarray, start: int) -> np.ndarray:
    """NPN over distinct ``points`` from ``start``: each next point is the nearest unvisited one
    (exact :func:`squared_distances`), ties to the lowest index. See :func:`npn_order`.

    Every point's ``_NEIGHBOURS`` nearest points are listed up front (one vectorized tree query).
    A step scans the current point's list for unvisited points; those within the rounding slack
    of the first one (the *band*) are the candidates. The list answers the step when it holds a
    candidate and its last entry lies beyond the band (then no unlisted point can tie); the
    candidates' exact distances then decide (one candidate needs none). Otherwise the step asks a
    tree of the unvisited points (:meth:`_UnvisitedTree.nearest_unvisited`)."""
    u = len(points)
    walk = np.empty(u, dtype=np.int64)
    walk[0] = start
    visited = bytearray(u)
    visited[start] = 1
    K = min(_NEIGHBOURS + 1, u)  # + 1: a point's list holds the point itself (visited: skipped)
    from scipy.spatial import cKDTree  # here, not at import: plugin discovery stays fast

    tree_dist, tree_idx = cKDTree(points).query(points, k=K)
    tree_dist, tree_idx = tree_dist.reshape(u, K), tree_idx.reshape(u, K)
    coords = points.tolist()
    complete = K == u  # the lists hold every point
    dynamic = _UnvisitedTree(points)
    current = start
    for s in range(1, u):
        dist, idx = tree_dist[current].tolist(), tree_idx[current].tolist()
        nxt = -1
        for i in range(K):
            if not visited[idx[i]]:
                edge = dist[i] * (1 + _SLACK) + 1e-300
                band = [idx[i]]
                for i2 in range(i + 1, K):
                    if dist[i2] > edge:
                        break
                    if not visited[idx[i2]]:
                        band.append(idx[i2])
                else:
                    if not complete:
                        break  # the band may run past the list: ask the tree
                if len(band) == 1:
                    nxt = band[0]
                else:
                    here = coords[current]
                    nxt = min(band, key=lambda c: (_squared(coords[c], here), c))
                break
        if nxt < 0:
            nxt = dynamic.nearest_unvisited(current, visited, s)
        walk[s] = nxt
        visited[nxt] = 1
        current = nxt
    return walk


def _squared(a: list[float], b: list[float]) -> float:
    """:func:`squared_distances` of one pair, in Python floats (the same IEEE operations)."""
    out = 0.0
    for x, y in zip(a, b):
        diff = x - y
        out += diff * diff
    return out


class _UnvisitedTree:
    """A ``cKDTree`` over the points not yet visited, rebuilt when half of it is visited."""

    def __init__(self, points: np.ndarray):
        self.points = points
        self.ids = np.zeros(0, dtype=np.int64)  # point index of each tree entry
        self.tree: Any = None  # scipy.spatial.cKDTree
        self.built_at = 0  # how many points were visited when the tree was built

    def nearest_unvisited(self, current: int, visited: bytearray, n_visited: int) -> int:
        """The nearest unvisited point to ``current`` (exact distances, ties to the lowest index):
        ask the tree for the ``kk`` nearest, doubling ``kk`` while all are visited; if the
        ``kk``-th distance is within the slack of the best, fetch all points in the slack.
        ``n_visited`` = how many points are visited (the tree's visited share without a count)."""
        seen = np.frombuffer(visited, dtype=np.uint8).view(bool)
        if self.tree is None or n_visited - self.built_at > _REBUILD * len(self.ids):
            self.ids = np.flatnonzero(~seen)
            from scipy.spatial import cKDTree

            self.tree = cKDTree(self.points[self.ids])
            self.built_at = n_visited
        ids, tree = self.ids, self.tree
        size = len(ids)
        here = self.points[current]
        kk = min(16, size)
        while True:
            dist, idx = tree.query(here, k=kk)
            dist, idx = np.atleast_1d(dist), np.atleast_1d(idx)
            cand = ids[idx]
            live = ~seen[cand]
            if live.any() or kk == size:
                break
            kk = min(2 * kk, size)
        cand = cand[live]
        exact = squared_distances(self.points[cand], here)
        best = exact.min()
        radius = np.sqrt(best) * (1 + _SLACK) + 1e-300
        if kk < size and dist[-1] <= radius:  # the tree may have cut a tie off: take all within the slack
            near = ids[np.asarray(tree.query_ball_point(here, radius), dtype=np.int64)]
            cand = near[~seen[near]]
            exact = squared_distances(self.points[cand], here)
            best = exact.min()
        return int(cand[exact == best].min())


# ---------------------------------------------------------------------------- greedy grouping
def greedy_partition(
    order: np.ndarray,
    accepts: GroupPredicate,
    points: np.ndarray,
    *,
    window: int = 8,
    leftovers: str = "merge",
    extension: ExtensionStart | None = None,
) -> tuple[np.ndarray, dict]:
    """Algorithm 1's groups along ``order`` (a permutation of the rows ``0..n-1``): ``group[r]`` is
    the group of row ``r`` (numbered in order of creation), -1 if suppressed; ``points`` are the
    NPN coordinates (for the leftovers' nearest centroid). ``extension`` (the privacy model's
    optional fast path, :meth:`~cdpbench.plugin.PublishContext.extension`) judges every prefix
    from a start in one step when it offers ``accepts_prefixes``, and each leftover against all
    groups at once; it judges as ``accepts`` does, so the groups are the same with or without it.
    Returns also counts for ``Publication.info``: groups, leftovers, merged, suppressed and accepts
    calls (a prefix judgment or an ``accepts_plus`` counts as one call, a block of starts
    (:func:`_run_of_groups_running`) as one per group it closes)."""
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    group = np.full(n, -1, dtype=np.int64)
    stats = {"accepts_calls": 0, "n_groups": 0, "leftovers": 0, "merged": 0, "suppressed": 0}
    members: list[np.ndarray] = []
    prefixes = prefix_judge(extension)
    start, last = 0, 0  # last: size of the last group closed
    while start < n:
        if prefixes is not None and 0 < last <= _SMALL_GROUP:
            sizes, exhausted = _run_of_groups_running(order, start, prefixes, stats)
            for size in sizes:
                group[order[start : start + size]] = len(members)
                members.append(order[start : start + size])
                start += size
                last = size
            if exhausted:
                continue  # the next block of starts (or the end of the order)
        if start >= n:
            break
        if prefixes is not None:
            size = smallest_accepted_prefix_running(
                order, start, prefixes, accepts, window, stats, cap=_PREFIX_RECORDS, first=_FIRST_PREFIXES
            )
        else:
            size = smallest_accepted_prefix(order, start, accepts, window, stats)
        if size == 0:
            break
        group[order[start : start + size]] = len(members)
        members.append(order[start : start + size])
        start += size
        last = size
    left = order[start:]
    stats["n_groups"] = len(members)
    stats["leftovers"] = len(left)
    if leftovers == "merge" and members and len(left):
        ext = None if extension is None else extension_over(extension, members)
        centroids = _Centroids(members, points)
        if ext is not None:
            stats["merged"] = merge_leftovers_extension(
                left, group, ext, centroids.distance, stats, later_on_ties=False, block=_EXTENSION_BLOCK, joined=centroids.join
            )
        else:
            stats["merged"] = merge_leftovers(
                left, members, group, accepts, centroids.distance, stats, later_on_ties=False, joined=centroids.join
            )
    stats["suppressed"] = int((group < 0).sum())
    return group, stats


class _Centroids:
    """Step 3's distance from a leftover to each group: :func:`squared_distances` (row by row, the
    same floats whatever the rows asked) from its NPN point to the group's QI centroid over its
    current members, the centroid of group g being ``total[g] / count[g]``, refreshed when a
    leftover joins (the paper only says a valid q "exists": nearest centroid is our choice, ties
    to the lowest group index, bayframe.md §1.7 item 9)."""

    def __init__(self, members: list[np.ndarray], points: np.ndarray):
        self.points = points
        G = len(members)
        self.total = np.array([points[m].sum(axis=0) for m in members]).reshape(G, points.shape[1])
        self.count = np.array([len(m) for m in members], dtype=float)
        self.centroid = self.total / self.count[:, None]

    def distance(self, r: int) -> np.ndarray:
        return squared_distances(self.centroid, self.points[r])

    def join(self, g: int, r: int) -> None:
        self.total[g] += self.points[r]
        self.count[g] += 1
        self.centroid[g] = self.total[g] / self.count[g]  # each entry divided as total / count[:, None] does


def _run_of_groups_running(order: np.ndarray, start: int, prefixes: PrefixJudge, stats: dict) -> tuple[list[int], bool]:
    """Several groups of Algorithm 1's scan in one prefix judgment, for runs of small groups: the
    prefixes of sizes ``1.._FIRST_PREFIXES`` of each of the ``_RUN_STARTS`` starts from ``start``
    on are judged at once (every start the scan may reach in that block, whichever groups it
    closes); then the scan is followed through them: from ``start`` the smallest accepted size
    closes a group and gives the next start, and so on. Returns the sizes of the groups closed and
    whether the scan left the block (``False``: it reached a start of the block with no accepted
    size up to ``_FIRST_PREFIXES``, which the caller searches further as usual). A prefix running
    past the end of ``order`` is padded (its judgment ignored): judgments of the prefixes inside do
    not depend on what follows them."""
    n = len(order)
    B = min(_RUN_STARTS, n - start)
    L = min(_FIRST_PREFIXES, n - start)
    position = start + np.arange(B, dtype=np.int64)[:, None] + np.arange(L, dtype=np.int64)[None, :]
    inside = position < n
    ok = np.asarray(prefixes(order[np.minimum(position, n - 1)]), dtype=bool) & inside
    has = ok.any(axis=1)
    smallest = (np.argmax(ok, axis=1) + 1).tolist()
    sizes: list[int] = []
    b = 0
    while b < B and has[b]:
        sizes.append(smallest[b])
        b += smallest[b]
    stats["accepts_calls"] += max(len(sizes), 1)  # one judgment per group closed, as the plain scan asks
    return sizes, b >= B
