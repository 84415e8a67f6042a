"""The greedy prefix scan and leftover placement shared by the Hilbert/NPN-order anonymizers:
JS-reduce (Riboni, Pareschi, Bettini, TDSC 2012, §6.4, Algorithm 4; ``cdpbench_jsreduce``'s
``js_reduce``) and BKAA (Amiri, Yazdani, Shakery, Ho, TDP 2019, §5.1, Algorithm 1;
``cdpbench_bayframe``'s ``bkaa``).

Both algorithms walk a fixed order of the records (a Hilbert curve, or the nearest-point-next
order), add one record at a time to the current set Q and close Q as a group as soon as the
privacy model accepts it (Algorithm 4 lines 8–15, Algorithm 1 lines 3–13); the records of the
last, unfinished Q are the leftovers, which BKAA places into an existing group that stays accepted
(Algorithm 1 lines 14–24) and JS-reduce suppresses (its paper) or, optionally, places likewise.
Each anonymizer keeps its own order, its loop over the starts and its notion of "the nearest
group"; this module holds the pieces they share:

* :func:`smallest_accepted_prefix` — the record-by-record loop from one start, asked in batches:
  the prefixes of sizes ``lo..hi`` in one ``accepts`` call (``1..window`` first, then doubling),
  never more than :data:`BATCH_RECORDS` records a call (:func:`largest_fitting`);
* :func:`prefix_judge` and :func:`smallest_accepted_prefix_running` — the same loop through the
  model's running-sum judgment of every prefix (``GroupExtension.accepts_prefixes``);
  :func:`smallest_accepted_prefixes` — that loop from many starts at once (one judgment for all);
* :func:`extension_over` — the model's running statistics over the closed groups;
* :func:`merge_leftovers` and :func:`merge_leftovers_extension` — each leftover, in order, into
  the nearest group (the caller's distance and tie rule) that the model accepts with it, else
  left suppressed; through ``accepts`` (nearest first, in blocks) or the running statistics.

None of the batching changes a result: every function returns what the one-record-at-a-time loop
of the papers returns (the smallest accepted size, the nearest accepted group); only the number of
model calls (``stats["accepts_calls"]``) depends on it. The batching is ours, not the papers'.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from cdpbench.plugin import GroupExtension, nearest_accepted

# accepts(rows, segment, n_groups) -> bool[n_groups]: record rows[i] is in candidate group segment[i]
GroupPredicate = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
# start(rows, segment, n_groups) -> GroupExtension | None (PublishContext.extension)
ExtensionStart = Callable[[np.ndarray, np.ndarray, int], "GroupExtension | None"]
# accepts_prefixes(rows [B, L]) -> bool [B, L]: is the group rows[b, :l + 1] accepted
PrefixJudge = Callable[[np.ndarray], np.ndarray]
# distance(row) -> [n_groups]: how far each group is from leftover ``row`` (smaller: nearer)
GroupDistance = Callable[[int], np.ndarray]
# joined(g, row): leftover ``row`` has just joined group ``g`` (the caller updates its distances)
Joined = Callable[[int, int], None]

BATCH_RECORDS = 1 << 18  # most records in one accepts call of the windowed scan
FIRST_PREFIXES = 32  # least sizes in the first prefix judgment from a start (doubles)
MERGE_BLOCK = 16  # groups asked in the first accepts call for a leftover (doubles)


# ---------------------------------------------------------------------------- the scan from a start
def smallest_accepted_prefix(order: np.ndarray, start: int, accepts: GroupPredicate, window: int, stats: dict) -> int:
    """Smallest size L such that the model accepts ``order[start : start + L]``; 0 if none: the
    group the papers' loop closes from ``start`` (Algorithm 4 lines 8–15, Algorithm 1 lines 3–13:
    add the next record of the order to Q until Q is accepted), or 0 when Q is never accepted up
    to the end of ``order`` (the caller passes a shorter ``order`` to bound the group's size).

    Judges the sizes ``lo..hi`` in one ``accepts`` call, ``1..window`` first, then the next sizes
    up to twice the last ``hi`` while none is accepted; a call holds at most
    :data:`BATCH_RECORDS` records (:func:`largest_fitting` cuts ``hi``). The smallest accepted
    size does not depend on the batching, so ``window`` changes the speed only. Each call adds one
    to ``stats["accepts_calls"]``."""
    remaining = len(order) - start
    lo, hi = 1, min(window, remaining)
    while lo <= remaining:
        hi = min(hi, largest_fitting(lo, hi))
        sizes = np.arange(lo, hi + 1, dtype=np.int64)
        segment = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        offset = np.arange(len(segment), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        stats["accepts_calls"] += 1
        ok = np.asarray(accepts(order[start + offset], segment, len(sizes)), dtype=bool)
        if ok.any():
            return int(sizes[np.argmax(ok)])
        lo, hi = hi + 1, min(2 * hi, remaining)
    return 0


def largest_fitting(lo: int, hi: int, budget: int = BATCH_RECORDS) -> int:
    """Largest ``h`` in ``[lo, hi]`` with ``lo + ... + h <= budget`` (at least ``lo``): how many
    prefix sizes one ``accepts`` call of :func:`smallest_accepted_prefix` may hold."""
    if (hi * (hi + 1) - (lo - 1) * lo) // 2 <= budget:
        return hi
    h = int(np.sqrt(0.25 + 2 * budget + (lo - 1) * lo) - 0.5)
    while h > lo and (h * (h + 1) - (lo - 1) * lo) // 2 > budget:
        h -= 1
    return max(h, lo)


def prefix_judge(extension: ExtensionStart | None) -> PrefixJudge | None:
    """The privacy model's running-sum judgment of every prefix of many sequences of records at
    once (:meth:`~cdpbench.plugin.GroupExtension.accepts_prefixes` of an extension over no
    groups), or ``None`` when the model offers none (the scan then asks ``accepts``)."""
    if extension is None:
        return None
    empty = np.zeros(0, dtype=np.int64)
    ext = extension(empty, empty, 0)
    if ext is None or ext.accepts_prefixes(np.zeros((0, 1), dtype=np.int64)) is None:
        return None
    return ext.accepts_prefixes


def smallest_accepted_prefix_running(
    order: np.ndarray,
    start: int,
    prefixes: PrefixJudge,
    accepts: GroupPredicate,
    window: int,
    stats: dict,
    *,
    cap: int,
    first: int = FIRST_PREFIXES,
) -> int:
    """:func:`smallest_accepted_prefix` through the model's prefix judgment (``prefixes``, from
    :func:`prefix_judge`): the papers' loop from ``start`` asks about every size ``1..hi`` of Q in
    one O(hi·m) step (running sums restarted at ``start``, the same floats as ``accepts``), ``hi``
    starting at ``max(window, first)`` and doubling while no size is accepted, up to the end of
    ``order``: a stuck start costs O(L·m) in all for the L records left, not O(L²·m). The smallest
    accepted size does not depend on how the sizes are batched.

    Past ``cap`` sizes (a ``[hi, m]`` running sum grows with the release) the search is handed to
    :func:`smallest_accepted_prefix` from size 1 (same answer; the calls already made stay
    counted). Each anonymizer passes its own ``cap``: JS-reduce 2^18 (its :data:`BATCH_RECORDS`,
    the bound its scan had when the prefix judgment was added), BKAA 2^22 (set when J-similarity's
    running statistics were added; no reason is recorded). Only a start stuck with more than 2^18
    records after it tells the two apart, and then only in ``stats["accepts_calls"]`` and memory,
    never in the size returned."""
    remaining = len(order) - start
    hi = min(max(window, first), remaining)
    while hi >= 1:
        if hi > cap:
            return smallest_accepted_prefix(order, start, accepts, window, stats)
        stats["accepts_calls"] += 1
        ok = np.asarray(prefixes(order[start : start + hi][None, :]), dtype=bool)[0]
        if ok.any():
            return int(np.argmax(ok)) + 1
        if hi == remaining:
            break
        hi = min(2 * hi, remaining)
    return 0


def smallest_accepted_prefixes(
    order: np.ndarray,
    starts: np.ndarray,
    limits: np.ndarray,
    prefixes: PrefixJudge,
    stats: dict,
    *,
    most: int,
    first: int = FIRST_PREFIXES,
    budget: int = BATCH_RECORDS,
) -> np.ndarray:
    """The papers' loop from many starts at once: for each ``starts[i]`` the smallest size
    ``L <= limits[i]`` such that the model accepts ``order[starts[i] : starts[i] + L]`` (what
    :func:`smallest_accepted_prefix_running` returns from that start on ``order`` cut after
    ``starts[i] + limits[i]`` records), 0 when no such size is accepted, or -1 when none of the
    sizes ``1..most`` is accepted and ``limits[i] > most`` (undecided: the caller asks the
    one-start search, or does without).

    The sizes ``1..hi`` of every start still open are judged in one ``[B, hi]`` prefix judgment
    (``prefixes``, from :func:`prefix_judge`), ``hi`` starting at ``min(first, most)`` and doubling
    up to ``most``; a start's row of the judgment is cut at its own limit (the records past it, or
    past the end of ``order``, fill the row's tail and are never read: a prefix's running sums
    depend on its own records only), and one call holds at most ``budget`` records. Each call adds
    one to ``stats["accepts_calls"]``. The smallest accepted size does not depend on the batching,
    so the answers are :func:`smallest_accepted_prefix_running`'s, bit for bit."""
    order = np.asarray(order, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    limits = np.minimum(np.asarray(limits, dtype=np.int64), len(order) - starts)
    sizes = np.full(len(starts), -1, dtype=np.int64)
    open_ = np.arange(len(starts), dtype=np.int64)
    hi = max(1, min(first, most))
    while len(open_):
        width = np.minimum(hi, limits[open_])  # sizes judged from each open start this round
        L = int(width.max())
        offsets = np.arange(L, dtype=np.int64)
        per_call = max(1, budget // L)
        for lo in range(0, len(open_), per_call):
            chunk = open_[lo : lo + per_call]
            rows = order[np.minimum(starts[chunk, None] + offsets[None, :], len(order) - 1)]
            stats["accepts_calls"] += 1
            ok = np.asarray(prefixes(rows), dtype=bool) & (offsets[None, :] < width[lo : lo + per_call, None])
            hit = ok.any(axis=1)
            sizes[chunk[hit]] = np.argmax(ok[hit], axis=1) + 1
        closed = sizes[open_] > 0
        sizes[open_[~closed & (width >= limits[open_])]] = 0  # every size up to the limit judged: none accepted
        open_ = open_[sizes[open_] < 0]
        if hi >= most:
            break
        hi = min(2 * hi, most)
    return sizes


# ---------------------------------------------------------------------------- the leftovers
def extension_over(extension: ExtensionStart, members: list[np.ndarray]) -> GroupExtension | None:
    """The privacy model's running statistics over the closed groups (``members[g]``: the rows of
    group ``g``, in order), or ``None`` when the model offers none for them."""
    sizes = [len(m) for m in members]
    return extension(np.concatenate(members), np.repeat(np.arange(len(members), dtype=np.int64), sizes), len(members))


def merge_leftovers(
    left: np.ndarray,
    members: list[np.ndarray],
    group: np.ndarray,
    accepts: GroupPredicate,
    distance: GroupDistance,
    stats: dict,
    *,
    later_on_ties: bool,
    joined: Joined | None = None,
    block: int = MERGE_BLOCK,
) -> int:
    """Place each leftover row of ``left`` (in order) into the group nearest to it among those
    the model accepts with it, else leave it suppressed (``group[r]`` stays as it is, -1):
    Algorithm 1's lines 14–24 (BKAA: "r joins a group q with q ∪ {r} accepted"; which q when
    several do is the caller's ``distance``) and JS-reduce's optional ``leftovers="merge"``.

    ``distance(r)`` gives one number per group, asked when ``r`` is judged (after the leftovers
    before it joined); ties go to the lower group index, or the later one with ``later_on_ties``.
    A group is judged with its members, the leftovers that joined it (in the order they joined)
    and ``r`` last. Groups are asked nearest first in blocks (``block``, then twice as many each
    call, one ``accepts`` call per block); the first accepted group in that order is the nearest
    accepted one. ``joined(g, r)`` is called after ``r`` joins ``g``. Returns how many leftovers
    were placed."""
    n_groups = len(members)
    placed: list[list[int]] = [[] for _ in members]  # leftovers already merged into each group
    index = np.arange(n_groups)
    tie = -index if later_on_ties else index
    merged = 0
    for r in left:
        r = int(r)
        nearest = np.lexsort((tie, distance(r)))  # nearest first, ties by the caller's rule
        lo, size = 0, block
        while lo < n_groups:
            gs = nearest[lo : lo + size]
            parts = [np.concatenate([members[g], np.asarray(placed[g] + [r], dtype=np.int64)]) for g in gs]
            segment = np.repeat(np.arange(len(gs), dtype=np.int64), [len(p) for p in parts])
            stats["accepts_calls"] += 1
            ok = np.asarray(accepts(np.concatenate(parts), segment, len(gs)), dtype=bool)
            if ok.any():
                g = int(gs[np.argmax(ok)])  # the nearest accepted group of the block
                group[r] = g
                placed[g].append(r)
                if joined is not None:
                    joined(g, r)
                merged += 1
                break
            lo, size = lo + size, 2 * size
    return merged


def merge_leftovers_extension(
    left: np.ndarray,
    group: np.ndarray,
    ext: GroupExtension,
    distance: GroupDistance,
    stats: dict,
    *,
    later_on_ties: bool,
    block: int,
    all_at_once: bool = False,
    joined: Joined | None = None,
) -> int:
    """:func:`merge_leftovers` through the privacy model's running per-group statistics ``ext``
    (:func:`extension_over` the closed groups): the same placement, since ``ext`` judges bit for
    bit as ``accepts`` does and the chosen group is again the nearest accepted one (same
    ``distance``, same tie rule). Each leftover ``r``, in order:

    * ``all_at_once``: every group ``q ∪ {r}`` judged in one step (``ext.accepts_plus``), then the
      nearest accepted group picked; one accepts call;
    * otherwise nearest first in blocks (:func:`~cdpbench.plugin.nearest_accepted`: ``block``
      groups first, four times more each time), one accepts call per block — cheaper when there
      are many groups and ``ext`` can judge a few alone (``accepts_plus_among``).

    A placed leftover joins its group's statistics (``ext.add``), then ``joined(g, r)`` is called.
    Returns how many leftovers were placed."""
    merged = 0
    for r in left:
        r = int(r)
        if all_at_once:
            stats["accepts_calls"] += 1
            candidates = np.flatnonzero(np.asarray(ext.accepts_plus(r), dtype=bool))
            if len(candidates) == 0:
                continue  # no group q with q ∪ {r} accepted: r stays suppressed
            d = np.asarray(distance(r))[candidates]
            tied = np.flatnonzero(d == d.min())
            g = int(candidates[tied[-1] if later_on_ties else tied[0]])
        else:
            g = nearest_accepted(ext, r, distance(r), block=block, later_on_ties=later_on_ties, stats=stats)
            if g < 0:
                continue
        group[r] = g
        ext.add(g, r)
        if joined is not None:
            joined(g, r)
        merged += 1
    return merged
