"""The JS-reduce generalization procedure (Riboni, Pareschi, Bettini, TDSC 2012, §6.4, Algorithm 4).

1. **Hilbert order** (after Ghinita et al., VLDB 2007). Every QI is mapped to integer grid
   coordinates: a numeric QI whose values in the release are all integers to the rank of the value
   among the domain's integer values (``value − ceil(low)``); a numeric QI with fractional values
   to the rank of the value among the distinct values of the release; a categorical QI to its
   taxonomy leaf code (so siblings are adjacent). The curve has as many dimensions as QIs (in
   schema order) and ``p`` bits per dimension, ``p`` = enough for the largest coordinate the
   domain allows (for rank-mapped columns: the largest rank in the release); every column is then
   stretched linearly over ``0 .. 2^p - 1`` (our choice: the paper does not say how QIs are
   scaled; unstretched, bkseq's gender 0/1 sits inside one cell of a 32-wide grid and nearly
   every group mixes both genders, which costs a third of the GCP). Indices come from the
   ``hilbertcurve`` package, computed once per *unique* QI combination (and remembered across
   releases by the anonymizer instance). Records are sorted by
   Hilbert index; records with the same QI values keep their release order.
2. **Greedy grouping** (Algorithm 4, lines 8–15). Walk the order, adding one record at a time to
   the current group Q; as soon as the privacy model accepts Q, publish it and start a new group.
   Any privacy model works (it is asked through ``accepts``; with ``js_reduce`` it checks
   |Q| >= k, t-closeness and the JS divergence of the defender's beliefs, passed in
   ``GroupBatch.prior``). The records left in the unfinished last group are suppressed (the
   paper's choice) or, with ``leftovers="merge"``, each is placed into the nearest group along the
   order (by distance in the Hilbert order; at the end of the order that is the latest group
   first, then earlier ones) that the model still accepts with it;
   a leftover no group accepts is suppressed. As in the paper's pseudocode, by default the current
   group is never abandoned: if no prefix from some start is ever accepted, every record from
   there to the end of the order is left over. With ``max_group = M > 0`` (not in the paper) a
   start record that no group of at most M records starting with it satisfies is set aside as a
   leftover and the scan resumes at the next record, so one hard record cannot drag the rest of
   the order into suppression.
3. **Generalization**: each group is published with the tightest interval per numeric QI and the
   smallest taxonomy node (or the exact value set) per categorical QI
   (:meth:`~cdpbench.data.Publication.from_partition`).

The scan does not ask the model about one record at a time. From a start position it asks, in one
``accepts`` call, about all prefixes of the remaining order with sizes ``lo..hi`` (a window that
starts at ``1..window`` and doubles while no prefix is accepted), and takes the smallest accepted
size — exactly the group the record-by-record loop would close, with about one call per group.
Large windows are split so that one call never holds more than ``cdpbench.greedy.BATCH_RECORDS``
records (the scan and the merge are the core's :mod:`cdpbench.greedy`, shared with BKAA).
When the privacy model offers prefix judgments (``GroupExtension.accepts_prefixes``: running
sums along the order restarted at each start, the same floats as ``accepts``), the scan and the
search past a stuck start ask those instead, judging every prefix of many starts in one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hilbertcurve.hilbertcurve import HilbertCurve

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.greedy import (
    ExtensionStart,
    GroupDistance,
    GroupPredicate,
    PrefixJudge,
    extension_over,
    merge_leftovers,
    merge_leftovers_extension,
    prefix_judge,
    smallest_accepted_prefix,
    smallest_accepted_prefix_running,
)
from cdpbench.plugin import Anonymizer, GroupExtension, PublishContext

# most sizes in one prefix judgment (a [hi, m] running sum); past it, accepts (BKAA's is 2^22; see
# cdpbench.greedy.smallest_accepted_prefix_running)
_PREFIX_RECORDS = 1 << 18


@dataclass
class JSReduceParams:
    leftovers: str = field(
        default="suppress",
        metadata={
            "help": "records no group can be closed with at the end of the Hilbert order: 'suppress' "
            "(the paper) or 'merge' (into the nearest group along the order that stays valid, else suppress)"
        },
    )
    categorical: str = field(
        default="taxonomy",
        metadata={
            "help": "how a group's categorical QI is published: 'taxonomy' (the smallest taxonomy node "
            "covering its values) or 'set' (exactly the values present)"
        },
    )
    max_group: int = field(
        default=0,
        metadata={
            "help": "0 = the paper: never abandon the current group; M > 0: set a start record aside as a "
            "leftover when no group of at most M records starting with it is accepted, and go on"
        },
    )
    window: int = field(
        default=8,
        metadata={"help": "candidate group sizes asked in the first accepts call from each start (doubles while none is accepted); speed only, never the result"},
    )

    def __post_init__(self) -> None:
        require(self.leftovers in ("suppress", "merge"), "leftovers", "'suppress' or 'merge'", self.leftovers)
        require(self.categorical in ("taxonomy", "set"), "categorical", "'taxonomy' or 'set'", self.categorical)
        require(isinstance(self.window, int) and not isinstance(self.window, bool) and self.window >= 1, "window", "an integer >= 1", self.window)
        require(isinstance(self.max_group, int) and self.max_group >= 0, "max_group", "an integer >= 0", self.max_group)


class JSReduce(Anonymizer):
    """JS-reduce generalization (TDSC 2012, Algorithm 4): Hilbert order, greedy groups, any privacy model."""

    Params = JSReduceParams

    def __init__(self, params: JSReduceParams | None = None):
        super().__init__(params)
        self._hilbert: dict = {}  # Hilbert indices of the grid points seen so far (see hilbert_order)

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        model = ctx.privacy_model
        accepts = ctx.predicate(release)
        order = hilbert_order(release, self._hilbert)
        group, stats = greedy_partition(
            order,
            accepts,
            window=self.params.window,
            leftovers=self.params.leftovers,
            max_group=self.params.max_group,
            extension=ctx.extension(release),
        )
        name = getattr(model, "plugin_name", type(model).__name__)
        info = {"anonymizer": "js_reduce", "privacy_model": name, **stats}
        return Publication.from_partition(release, group, categorical=self.params.categorical, info=info)


# ---------------------------------------------------------------------------- Hilbert order
def grid_coordinates(release: Release) -> tuple[np.ndarray, np.ndarray]:
    """``[n, d]`` non-negative integer coordinates of every record (see the module docstring) and
    ``[d]`` the largest coordinate each column can take."""
    qi = np.asarray(release.qi, dtype=float)
    n, d = qi.shape
    coords = np.zeros((n, d), dtype=np.int64)
    top = np.zeros(d, dtype=np.int64)
    for j, a in enumerate(release.schema.qi):
        x = qi[:, j]
        if a.kind == "categorical":
            coords[:, j] = x.astype(np.int64)
            top[j] = a.taxonomy.size - 1
        elif np.all(x == np.floor(x)):
            low = int(np.ceil(a.low))
            coords[:, j] = x.astype(np.int64) - low
            top[j] = max(int(np.floor(a.high)) - low, 0)
        else:
            values, coords[:, j] = np.unique(x, return_inverse=True)
            top[j] = len(values) - 1
    return coords, top


def hilbert_order(release: Release, cache: dict | None = None) -> np.ndarray:
    """Row indices of ``release`` sorted by the Hilbert index of their QI values; records with the
    same QI values keep their release order. ``cache`` (a dict kept by the caller across releases)
    remembers the index of every grid point already seen, per curve shape."""
    n = len(release)
    coords, top = grid_coordinates(release)
    d = coords.shape[1]
    if n == 0 or d == 0:
        return np.arange(n, dtype=np.int64)
    bits = max(1, int(top.max()).bit_length())
    # stretch every column over the whole grid, so that each QI is split at the curve's top
    # levels (a 2-valued QI left at 0/1 would sit inside one cell and almost every group would mix it)
    span = (1 << bits) - 1
    coords = np.where(top > 0, coords * span // np.maximum(top, 1), 0)
    combos, inverse = np.unique(coords, axis=0, return_inverse=True)
    known = {} if cache is None else cache.setdefault((bits, d), {})
    points = [tuple(c) for c in combos.tolist()]
    new = [p for p in points if p not in known]
    if new:
        known.update(zip(new, HilbertCurve(bits, d).distances_from_points(new)))
    distance = [known[p] for p in points]  # Python ints: may exceed 64 bits
    rank = np.empty(len(combos), dtype=np.int64)
    rank[sorted(range(len(combos)), key=distance.__getitem__)] = np.arange(len(combos))
    return np.argsort(rank[inverse.reshape(-1)], kind="stable").astype(np.int64)


# ---------------------------------------------------------------------------- greedy grouping
def greedy_partition(
    order: np.ndarray,
    accepts: GroupPredicate,
    *,
    window: int = 8,
    leftovers: str = "suppress",
    max_group: int = 0,
    extension: ExtensionStart | None = None,
) -> tuple[np.ndarray, dict]:
    """Algorithm 4's groups along ``order``: ``group[r]`` is the group of row ``r`` (numbered in
    order of creation), -1 if suppressed. ``max_group > 0`` sets aside start records no group of
    at most that many records satisfies (see the module docstring). ``extension`` (the privacy
    model's optional fast path, :meth:`~cdpbench.plugin.PublishContext.extension`) judges the
    leftovers to merge against all groups at once and, when it offers ``accepts_prefixes``, every
    prefix of many starts at once in the scan (running sums restarted at each start); it must
    judge as ``accepts`` does, so the result is the same with or without it. Returns also counts for ``Publication.info``."""
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    group = np.full(n, -1, dtype=np.int64)
    stats = {"accepts_calls": 0, "n_groups": 0, "leftovers": 0, "merged": 0, "set_aside": 0}
    members: list[np.ndarray] = []  # the rows of each group, in order of creation
    aside: list[int] = []  # start records set aside (max_group > 0)
    prefixes = prefix_judge(extension)
    start = 0
    while start < n:
        if max_group > 0:
            if prefixes is not None:
                size = smallest_accepted_prefix_running(
                    order[: min(n, start + max_group)], start, prefixes, accepts, window, stats, cap=_PREFIX_RECORDS
                )
            else:
                size = smallest_accepted_prefix(order[: min(n, start + max_group)], start, accepts, window, stats)
            if size == 0 and start + max_group < n:
                # stuck: judge the next starts in blocks, every prefix up to max_group in one call
                if prefixes is not None:
                    nxt, size = _first_unstuck_start_running(order, start + 1, prefixes, max_group, stats)
                else:
                    nxt, size = _first_unstuck_start(order, start + 1, accepts, max_group, stats)
                aside.extend(int(r) for r in order[start:nxt])
                start = nxt
                if size == 0:
                    continue
        elif prefixes is not None:
            size = smallest_accepted_prefix_running(order, start, prefixes, accepts, window, stats, cap=_PREFIX_RECORDS)
        else:
            size = smallest_accepted_prefix(order, start, accepts, window, stats)
        if size == 0:
            break
        group[order[start : start + size]] = len(members)
        members.append(order[start : start + size])
        start += size
    stats["n_groups"] = len(members)
    stats["set_aside"] = len(aside)
    left = np.concatenate([np.asarray(aside, dtype=np.int64), order[start:]])
    stats["leftovers"] = len(left)
    if leftovers == "merge" and members and len(left):
        ext = None if extension is None else extension_over(extension, members)
        distance = _distance_along_order(order, members)
        if ext is not None:
            # many groups (a large release): judge them nearest first, in blocks, where the extension
            # can judge a few groups alone; few groups: one judgment of all is cheaper than several
            blocks = len(members) > _NEAREST_FIRST_FROM and type(ext).accepts_plus_among is not GroupExtension.accepts_plus_among
            stats["merged"] = merge_leftovers_extension(
                left, group, ext, distance, stats, later_on_ties=True, block=_NEAREST_BLOCK, all_at_once=not blocks
            )
        else:
            stats["merged"] = merge_leftovers(left, members, group, accepts, distance, stats, later_on_ties=True)
    stats["suppressed"] = int((group < 0).sum())
    return group, stats


def _first_unstuck_start(
    order: np.ndarray, start: int, accepts: GroupPredicate, max_group: int, stats: dict, block: int = 8
) -> tuple[int, int]:
    """After a stuck start: the first start ``s >= start`` from which some prefix of at most
    ``max_group`` records is accepted, and the smallest such size — or ``(s, 0)`` at the first
    ``s`` with ``s + max_group >= len(order)`` (the end of the order, handled by the plain scan).
    Asks about ``block`` starts per call (each with all its prefix sizes), so a run of stuck
    records costs one call per block instead of several per record."""
    n = len(order)
    sizes = np.arange(1, max_group + 1, dtype=np.int64)
    per_start = int(sizes.sum())
    seg_one = np.repeat(np.arange(max_group, dtype=np.int64), sizes)  # prefix index per position
    offset_one = np.arange(per_start, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    while start < n and start + max_group < n:
        starts = np.arange(start, min(start + block, n - max_group), dtype=np.int64)
        b = len(starts)
        rows = order[(starts[:, None] + offset_one[None, :]).reshape(-1)]
        segment = (np.arange(b, dtype=np.int64)[:, None] * max_group + seg_one[None, :]).reshape(-1)
        stats["accepts_calls"] += 1
        ok = np.asarray(accepts(rows, segment, b * max_group), dtype=bool).reshape(b, max_group)
        hit = ok.any(axis=1)
        if hit.any():
            i = int(np.argmax(hit))
            return int(starts[i]), int(sizes[np.argmax(ok[i])])
        start = int(starts[-1]) + 1
    return start, 0


_RUNNING_BLOCK = 512  # most starts judged in one call of _first_unstuck_start_running


def _first_unstuck_start_running(
    order: np.ndarray, start: int, prefixes: PrefixJudge, max_group: int, stats: dict, block: int = 8
) -> tuple[int, int]:
    """:func:`_first_unstuck_start` through the model's prefix judgment: every prefix size
    ``1..max_group`` of ``block`` starts in one call (the block doubles up to
    ``_RUNNING_BLOCK`` while no start is unstuck). Same answer: the first unstuck start and its
    smallest accepted size, or ``(s, 0)`` at the first ``s`` with ``s + max_group >= len(order)``."""
    n = len(order)
    offsets = np.arange(max_group, dtype=np.int64)
    while start < n and start + max_group < n:
        starts = np.arange(start, min(start + block, n - max_group), dtype=np.int64)
        stats["accepts_calls"] += 1
        ok = np.asarray(prefixes(order[starts[:, None] + offsets[None, :]]), dtype=bool)
        hit = ok.any(axis=1)
        if hit.any():
            i = int(np.argmax(hit))
            return int(starts[i]), int(np.argmax(ok[i])) + 1
        start = int(starts[-1]) + 1
        block = min(2 * block, _RUNNING_BLOCK)
    return start, 0


def _distance_along_order(order: np.ndarray, members: list[np.ndarray]) -> GroupDistance:
    """The merge's distance from a leftover to each group (``leftovers="merge"``, not in the
    paper): from the leftover's position in the Hilbert order to the span of positions of the
    group's own members (0 inside it; merged leftovers do not widen it); the merge breaks ties
    towards the later group (``later_on_ties``). A leftover at the end of the order thus tries the
    latest group first, then earlier ones."""
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order), dtype=np.int64)
    first = np.array([position[m[0]] for m in members], dtype=np.int64)
    last = np.array([position[m[-1]] for m in members], dtype=np.int64)

    def distance(r: int) -> np.ndarray:
        q = position[r]
        return np.maximum(np.maximum(first - q, q - last), 0)

    return distance


_NEAREST_FIRST_FROM = 2048  # groups above which the merge judges nearest first (measured: bkseq's few hundred groups are faster all at once)
_NEAREST_BLOCK = 8  # groups judged first (then 4 times more each time)
