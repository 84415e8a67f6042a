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
sums along the order restarted at each start, the same floats as ``accepts``), the scan asks
those instead, for many starts in one step: the starts are guessed by chains of the scan begun
every few hundred records and advanced together, and the scan from the first record reads the
sizes they judged (:func:`_greedy_starts_running`; the same groups). The merge then keeps the
model's running statistics over the groups near the leftovers only, with more groups when a
placement cannot be proven to be the one over all groups (:func:`_merge_leftovers_near`).

With the ``js_reduce`` model and classic's t-closeness (``equal`` or ``ordered`` ground distance),
the prefix judgment and the leftover merge (the loop over the leftovers, one after the other) run
as compiled loops (:mod:`cdpbench_jsreduce.merge_kernel`, numba, imported when a scan runs, its
compilation cached on disk; issue #28: one bkseq view <= 0.2 s). They keep the running sums with
NumPy's very additions; only an EMD and an entropy are computed otherwise (a sequential sum, the C
library's ``log2``), so a decision is taken from them only when they are farther than a margin
from their bound, and any other is made by the NumPy code (:data:`MERGE_COUNTS` counts those):
the groups are the same, bit for bit. Without numba (or with :data:`COMPILED` off) the NumPy code
does it all.
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
    smallest_accepted_prefixes,
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
    combos, inverse = _unique_points(coords, bits)
    known = {} if cache is None else cache.setdefault((bits, d), {})
    points = [tuple(c) for c in combos.tolist()]
    new = [p for p in points if p not in known]
    if new:
        known.update(zip(new, HilbertCurve(bits, d).distances_from_points(new)))
    distance = [known[p] for p in points]  # Python ints: may exceed 64 bits
    rank = np.empty(len(combos), dtype=np.int64)
    rank[sorted(range(len(combos)), key=distance.__getitem__)] = np.arange(len(combos))
    return np.argsort(rank[inverse.reshape(-1)], kind="stable").astype(np.int64)


def _unique_points(coords: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(coords, axis=0, return_inverse=True)`` for ``[n, d]`` coordinates below
    ``2^bits``: the distinct points in lexicographic order and each record's point. When a point
    fits in 63 bits its columns are packed into one integer key (column 0 highest, so the keys
    sort as the points do) and the keys are made unique: a sort of n integers instead of n rows."""
    n, d = coords.shape
    if bits * d > 63:
        combos, inverse = np.unique(coords, axis=0, return_inverse=True)
        return combos, inverse.reshape(-1)
    shift = bits * np.arange(d - 1, -1, -1, dtype=np.int64)
    keys, inverse = np.unique((coords << shift).sum(axis=1), return_inverse=True)
    combos = (keys[:, None] >> shift) & ((1 << bits) - 1)
    return combos, inverse.reshape(-1)


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
    prefixes = _compiled_prefixes(prefix_judge(extension))
    if prefixes is not None:  # the model judges every prefix of many starts at once
        starts, sizes, at_aside, start = _greedy_starts_running(order, prefixes, accepts, window, max_group, stats)
        group[order[_spans(np.asarray(starts, dtype=np.int64), np.asarray(sizes, dtype=np.int64))]] = np.repeat(
            np.arange(len(starts), dtype=np.int64), sizes
        )
        members = [order[s : s + size] for s, size in zip(starts, sizes)]
        aside = order[np.asarray(at_aside, dtype=np.int64)].tolist()
    else:
        start = _greedy_scan(order, accepts, window, max_group, stats, group, members, aside)
    stats["n_groups"] = len(members)
    stats["set_aside"] = len(aside)
    left = np.concatenate([np.asarray(aside, dtype=np.int64), order[start:]])
    stats["leftovers"] = len(left)
    if leftovers == "merge" and members and len(left):
        merged = None if extension is None else _merge_leftovers_near(order, members, left, group, extension, stats)
        if merged is None:  # no running statistics: ask accepts
            distance = _distance_along_order(order, members)
            merged = merge_leftovers(left, members, group, accepts, distance, stats, later_on_ties=True)
        stats["merged"] = merged
    stats["suppressed"] = int((group < 0).sum())
    return group, stats


def _greedy_scan(
    order: np.ndarray, accepts: GroupPredicate, window: int, max_group: int, stats: dict, group: np.ndarray,
    members: list[np.ndarray], aside: list[int],
) -> int:
    """The scan of :func:`greedy_partition` through ``accepts`` (a model without prefix
    judgments): fills ``group``, ``members`` and ``aside`` (rows set aside); returns the position
    where it stops (``len(order)``, or the first record of the leftover tail)."""
    n = len(order)
    start = 0
    while start < n:
        if max_group > 0:
            size = smallest_accepted_prefix(order[: min(n, start + max_group)], start, accepts, window, stats)
            if size == 0 and start + max_group < n:
                # stuck: judge the next starts in blocks, every prefix up to max_group in one call
                nxt, size = _first_unstuck_start(order, start + 1, accepts, max_group, stats)
                aside.extend(int(r) for r in order[start:nxt])
                start = nxt
                if size == 0:
                    continue
        else:
            size = smallest_accepted_prefix(order, start, accepts, window, stats)
        if size == 0:
            break
        group[order[start : start + size]] = len(members)
        members.append(order[start : start + size])
        start += size
    return start


def _greedy_starts_running(
    order: np.ndarray, prefixes: PrefixJudge, accepts: GroupPredicate, window: int, max_group: int, stats: dict
) -> tuple[list[int], list[int], list[int], int]:
    """The scan of :func:`greedy_partition` through the model's prefix judgment, many starts judged
    at once: the positions (in ``order``) and sizes of the groups it closes, the positions of the
    start records it sets aside (``max_group > 0``) and the position where it stops (``len(order)``,
    or the first record of the leftover tail).

    The greedy walk is sequential (the next start is the current start plus its group's size, or
    plus one past a record set aside), so the starts are guessed: chains of the walk begin every
    ``_CHAIN_SPACING`` records (closer in a short order: at least ``_CHAINS_LEAST`` chains), all
    advanced one start per round, each round one :func:`~cdpbench.greedy.smallest_accepted_prefixes`
    call for the starts of every chain; a chain ends on a start already judged (from there it
    follows the chain that judged it), at a start the walk would stop at, or (``max_group=0``) at
    one with no accepted size up to ``_CHAIN_MOST``. The walk from position 0 then reads the
    judged sizes; a start no chain judged (after a group longer than ``_CHAIN_MOST``) begins a new
    chain, an undecided one is searched alone as the plain loop does
    (:func:`~cdpbench.greedy.smallest_accepted_prefix_running`). A chain sharing a start with the
    walk makes the same groups from there on, so the walk is the plain loop's, group for group;
    only the number of judgments and their batching differ."""
    n = len(order)
    judged = np.full(n, _UNJUDGED, dtype=np.int64)  # per position: smallest accepted size, 0 none, -1 undecided
    most = max_group if max_group > 0 else _CHAIN_MOST  # max_group > 0: every start decided
    first = min(max(window, _CHAIN_FIRST), most)

    def run_chains(pos: np.ndarray) -> None:
        while len(pos):
            pos = np.unique(pos)
            pos = pos[judged[pos] == _UNJUDGED]  # the others joined a chain already walked from there
            if len(pos) == 0:
                break
            limits = np.minimum(max_group, n - pos) if max_group > 0 else n - pos
            sizes = smallest_accepted_prefixes(order, pos, limits, prefixes, stats, most=most, first=first)
            judged[pos] = sizes
            step = np.maximum(sizes, 0)
            if max_group > 0:
                step[(sizes == 0) & (pos + max_group < n)] = 1  # set aside: the next record starts
            pos = (pos + step)[(step > 0) & (pos + step < n)]

    run_chains(np.arange(0, n, max(1, min(_CHAIN_SPACING, n // _CHAINS_LEAST)), dtype=np.int64))
    starts: list[int] = []
    sizes: list[int] = []
    aside: list[int] = []
    s = 0
    while s < n:
        size = int(judged[s])
        if size == _UNJUDGED:
            run_chains(np.array([s], dtype=np.int64))
            size = int(judged[s])
        if size < 0:  # undecided within _CHAIN_MOST: the one-start search, as the plain loop
            cut = order[: min(n, s + max_group)] if max_group > 0 else order
            size = smallest_accepted_prefix_running(cut, s, prefixes, accepts, window, stats, cap=_PREFIX_RECORDS)
            judged[s] = size
        if size > 0:
            starts.append(s)
            sizes.append(size)
            s += size
        elif max_group > 0 and s + max_group < n:
            aside.append(s)
            s += 1
        else:
            break
    return starts, sizes, aside, s


def _spans(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + sizes[i] - 1`` of every span, span after span."""
    return np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)


_UNJUDGED = -2  # a position no chain has judged as a start
_CHAIN_SPACING = 256  # most records between the first starts of the scan's chains
_CHAINS_LEAST = 64  # least chains (a short order: closer starts, fewer rounds when records are set aside one by one)
_CHAIN_FIRST = 16  # least sizes judged from a chain's start in the first round (doubles)
_CHAIN_MOST = 64  # most sizes a chain judges from one start (then the start is undecided)


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


def _merge_leftovers_near(
    order: np.ndarray, members: list[np.ndarray], left: np.ndarray, group: np.ndarray, extension: ExtensionStart, stats: dict
) -> int | None:
    """``leftovers="merge"`` through the model's running statistics
    (:func:`~cdpbench.greedy.merge_leftovers_extension` with :func:`_distance_along_order`), the
    statistics kept over the groups near the leftovers only, not over every group of the release.

    The leftovers still to place are merged into the ``reach`` groups on either side of each one's
    position (``_MERGE_REACH``; then every group) with the leftovers already placed in them. A
    leftover placed in a group at distance d, with every group at distance <= d among those kept
    (ties included), has the group the merge over all groups gives it: the nearer groups were all
    judged, with the same members in the same order. The leftovers up to the first one without
    that proof (or placed nowhere while some group was not kept) are taken, and the merge goes on
    from that one with the next reach. Returns how many leftovers were placed, or ``None`` when
    the model offers no running statistics."""
    n_groups = len(members)
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order), dtype=np.int64)
    sizes = np.fromiter(map(len, members), dtype=np.int64, count=n_groups)
    every = np.concatenate(members)  # the groups' rows, group after group (one array op, not a loop over 10^5 groups)
    ends = np.cumsum(sizes)
    first = position[every[ends - sizes]]  # increasing: the groups follow the order
    last = position[every[ends - 1]]
    joined: dict[int, list[int]] = {}  # leftovers placed so far, per group, in the order they joined
    reaches = [r for r in _MERGE_REACH if 2 * r < n_groups] + [n_groups]
    done = 0
    for reach in reaches:
        rest = left[done:]
        q = position[rest]
        if reach < n_groups:
            at = np.searchsorted(first, q)  # the first group after each leftover
            near = np.unique(np.clip(at[:, None] + np.arange(-reach, reach, dtype=np.int64)[None, :], 0, n_groups - 1))
        else:
            near = np.arange(n_groups, dtype=np.int64)
        kept = [members[g] for g in near]
        if joined:
            ext = extension_over(extension, [np.concatenate([m, np.asarray(joined.get(int(g), []), dtype=np.int64)]) for g, m in zip(near, kept)])
        else:  # what extension_over passes, without a loop over the kept groups
            ext = extension(np.concatenate(kept), np.repeat(np.arange(len(near), dtype=np.int64), sizes[near]), len(near))
        if ext is None:
            return None
        local = np.full(len(group), -1, dtype=np.int64)
        # many groups (a large release): judge them nearest first, in blocks, where the extension
        # can judge a few groups alone; few groups: one judgment of all is cheaper than several.
        # The compiled loop places the leftovers either way (walking the groups nearest first) and
        # counts the accepts calls of the NumPy loop it stands for (issue #28: at 10^6 records the
        # NumPy loop in blocks cost ~0.1 ms a leftover, a scan over all groups each)
        blocks = len(near) > _NEAREST_FIRST_FROM and type(ext).accepts_plus_among is not GroupExtension.accepts_plus_among
        distance = _distance_from_spans(position, first[near], last[near])
        if not _merge_compiled(rest, local, ext, position, first[near], last[near], distance, stats, blocks=blocks):
            merge_leftovers_extension(
                rest, local, ext, distance, stats, later_on_ties=True, block=_NEAREST_BLOCK, all_at_once=not blocks
            )
        chosen = local[rest]
        good = len(rest)
        if len(near) < n_groups:
            g = near[np.maximum(chosen, 0)]
            d = np.maximum(np.maximum(first[g] - q, q - last[g]), 0)
            within = np.searchsorted(first, q + d, side="right") - np.searchsorted(last, q - d)
            within_kept = np.searchsorted(first[near], q + d, side="right") - np.searchsorted(last[near], q - d)
            proven = (chosen >= 0) & (within == within_kept)
            good = len(rest) if proven.all() else int(np.argmin(proven))
        for r, c in zip(rest[:good].tolist(), chosen[:good].tolist()):
            if c >= 0:
                group[r] = int(near[c])
                joined.setdefault(int(near[c]), []).append(r)
        done += good
        if done == len(left):
            break
    return sum(len(v) for v in joined.values())


# per process: leftovers placed by the compiled merge ("compiled") and handed to the NumPy judgment (a near
# tie: "fallback"); rows of the scan's prefix judgment judged again by NumPy ("prefix_fallback")
MERGE_COUNTS = {"compiled": 0, "fallback": 0, "prefix_fallback": 0}
_MERGE_REACH = (8, 64)  # groups kept on either side of each leftover for the merge (then all)


COMPILED = True  # the scan's prefix judgment and the merge by the compiled loops when numba imports (False: NumPy)
_KERNEL: list = []  # the imported kernel (or None when numba is missing), once per process


def compiled_merge():
    """:func:`~cdpbench_jsreduce.merge_kernel.merge_run` (numba, imported on first use, its
    compilation cached on disk), or None when :data:`COMPILED` is off or numba does not import:
    the NumPy loop (:func:`~cdpbench.greedy.merge_leftovers_extension`) then places the leftovers
    and the model's own ``accepts_prefixes`` judges the scan's prefixes."""
    if not COMPILED:
        return None
    if not _KERNEL:
        try:
            from ..merge_kernel import merge_run
        except Exception:  # numba missing or broken: the NumPy loop gives the same groups
            merge_run = None
        _KERNEL.append(merge_run)
    return _KERNEL[0]


def _kernel_state(ext: GroupExtension) -> tuple | None:
    """The arrays and bounds the compiled loops read (and the merge updates in place), from the
    js_reduce model's running statistics with a closeness extension that states its EMD terms
    (``emd_terms``: classic's t-closeness with the ``equal`` or ``ordered`` ground distance) — or
    None for any other extension (a subclass, another model or ground distance): the NumPy code
    then judges."""
    from ..privacy_models import js_reduce as js

    if type(ext) is not js.JSExtension:
        return None
    terms = getattr(ext.closeness, "emd_terms", None)
    terms = terms() if callable(terms) else None
    if terms is None:
        return None
    counts, sensitive, table, emd_bound, inner_k, ordered = terms
    sums = ext.sums
    if sums.base != 2.0 or counts.dtype != np.int64 or counts.shape != sums.mass.shape:
        return None
    return (
        np.ascontiguousarray(sums.rho), np.ascontiguousarray(sums.rho_entropy), sums.mass, sums.entropy_sum, sums.size_plus,
        ext.large_plus, ext.k, ext.j + js._TOL, counts, np.ascontiguousarray(sensitive, dtype=np.int64),
        table, emd_bound, inner_k, ordered,
    )


def _compiled_prefixes(prefixes: PrefixJudge | None) -> PrefixJudge | None:
    """The model's prefix judgment (``JSExtension.accepts_prefixes``) by the compiled loop
    (:func:`~cdpbench_jsreduce.merge_kernel.judge_prefixes`) when numba imports and the extension is
    one the kernel knows, else ``prefixes`` itself. A row of the judgment with an undecided prefix
    (an EMD or divergence within the kernel's margin of its bound) is judged again by ``prefixes``
    (NumPy; a row's running sums depend on its own records only, so its floats are those of the
    whole judgment): the same booleans, bit for bit. :data:`MERGE_COUNTS` counts those rows."""
    ext = getattr(prefixes, "__self__", None)
    state = None if ext is None else _kernel_state(ext)
    if state is None or compiled_merge() is None:
        return prefixes
    from .. import merge_kernel

    rho, rho_entropy, *_, k, js_bound, _counts, sensitive, table, emd_bound, inner_k, ordered = state

    def judge(rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        out = np.empty(rows.shape, dtype=np.int8)
        merge_kernel.judge_prefixes(rows, rho, rho_entropy, k, js_bound, sensitive, table, emd_bound, inner_k, ordered, merge_kernel.MARGIN, out)
        ok = out == 1
        for b in np.flatnonzero((out == 2).any(axis=1)):
            ok[b] = np.asarray(prefixes(rows[b : b + 1]), dtype=bool)[0]
            MERGE_COUNTS["prefix_fallback"] += 1
        return ok

    return judge


def _refresh_closeness(ext: GroupExtension, dirty: np.ndarray) -> None:
    """The closeness table rows (may group g take one more record of value v) of the groups the
    compiled merge grew, refreshed by the extension itself (``refresh``)."""
    grown = np.flatnonzero(dirty)
    if len(grown):
        ext.closeness.refresh(grown)
        dirty[grown] = False


def _merge_compiled(
    rest: np.ndarray, local: np.ndarray, ext: GroupExtension, position: np.ndarray, first: np.ndarray, last: np.ndarray,
    distance: GroupDistance, stats: dict, *, blocks: bool = False,
) -> bool:
    """:func:`~cdpbench.greedy.merge_leftovers_extension` (``all_at_once``, ties to the later
    group) by the compiled loop (:mod:`cdpbench_jsreduce.merge_kernel`): ``local[r]`` the group of
    each leftover ``r`` of ``rest`` (index into the groups of ``ext``; -1 none), the same groups bit
    for bit. A leftover whose nearest candidate group the compiled floats cannot decide (a
    divergence or EMD within the kernel's margin of its bound) is judged by the NumPy loop itself,
    then the compiled loop goes on; :data:`MERGE_COUNTS` counts both. ``blocks``: the loop
    ``merge_leftovers_extension`` runs nearest first in blocks (``block=_NEAREST_BLOCK``; a large
    release), whose placements are the same and whose ``accepts_calls`` (one per block asked) the
    kernel counts as that loop does. ``first``/``last``: the
    positions along the order of each group's first and last member. Returns False (nothing done)
    when numba does not import or the extension is not one the kernel knows."""
    state = _kernel_state(ext)
    kernel = None if state is None or len(first) == 0 else compiled_merge()
    if kernel is None:
        return False
    if not ((first <= last).all() and (last[:-1] < first[1:]).all()):
        return False  # the nearest-first walk needs disjoint spans in order (the scan's groups are)
    from ..merge_kernel import MARGIN

    rest = np.ascontiguousarray(rest, dtype=np.int64)
    chosen = np.full(len(rest), -1, dtype=np.int64)
    dirty = np.zeros(len(first), dtype=bool)
    first = np.ascontiguousarray(first, dtype=np.int64)
    last = np.ascontiguousarray(last, dtype=np.int64)
    calls = np.zeros(len(rest), dtype=np.int64)  # per leftover placed by the kernel: accepts calls the NumPy loop counts
    block = _NEAREST_BLOCK if blocks else 0
    fallbacks = 0
    i = 0
    while i < len(rest):
        i = kernel(rest, i, position, first, last, *state, MARGIN, chosen, dirty, block, calls)
        if i == len(rest):
            break
        _refresh_closeness(ext, dirty)  # the NumPy judgment reads the table
        merge_leftovers_extension(
            rest[i : i + 1], local, ext, distance, stats, later_on_ties=True, block=_NEAREST_BLOCK, all_at_once=not blocks
        )
        chosen[i] = local[rest[i]]
        fallbacks += 1
        i += 1
    _refresh_closeness(ext, dirty)
    local[rest] = chosen
    stats["accepts_calls"] += int(calls.sum())  # the NumPy loop's count (its own fallbacks counted themselves)
    MERGE_COUNTS["compiled"] += len(rest) - fallbacks
    MERGE_COUNTS["fallback"] += fallbacks
    return True


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
    return _distance_from_spans(position, first, last)


def _distance_from_spans(position: np.ndarray, first: np.ndarray, last: np.ndarray) -> GroupDistance:
    """:func:`_distance_along_order` from the groups' spans: ``position[r]`` the position of row ``r``
    along the order, ``first``/``last`` the positions of each group's first and last member."""

    def distance(r: int) -> np.ndarray:
        q = position[r]
        return np.maximum(np.maximum(first - q, q - last), 0)

    return distance


_NEAREST_FIRST_FROM = 2048  # groups above which the merge judges nearest first (measured: bkseq's few hundred groups are faster all at once)
_NEAREST_BLOCK = 8  # groups judged first (then 4 times more each time)
