"""JS-reduce's leftover merge (``leftovers="merge"``, not in the paper; JS-reduce §6.4, Algorithm 4)
as a compiled loop (numba; issue #28, scale): each leftover, in order, into the nearest group along
the Hilbert order that the ``js_reduce`` model accepts with it (ties to the later group), judged
through the model's running statistics — the loop of
:func:`cdpbench.greedy.merge_leftovers_extension` (``all_at_once``, or nearest first in blocks as for
more than 2,048 groups: the same placements, and the kernel counts the ``accepts_calls`` of either) over a
:class:`~cdpbench_jsreduce.privacy_models.js_reduce.JSExtension` whose t-closeness condition is
classic's ``t_closeness`` with the ``equal`` or ``ordered`` ground distance (:func:`merge_run`);
and the scan's judgment of every prefix of many sequences of records
(``JSExtension.accepts_prefixes``, :func:`judge_prefixes`), for the same model.

Imported only by :func:`cdpbench_jsreduce.anonymizers.js_reduce.compiled_merge` when a scan runs
(never at package import: registering plugins must stay fast and must not need numba); the
compilation is cached on disk (``cache=True``: ``__pycache__`` next to this file, or
``NUMBA_CACHE_DIR``).

What is the same bits and what is not:

* the running statistics (a group's size + 1, the sums of its members' normalized belief rows and
  of their entropies, its sensitive counts) are updated with the very additions of
  ``JSExtension.add`` (one float addition per joining record, in the order they join), in place in
  the extension's own arrays, so they stay bit for bit those of the NumPy loop;
* the size condition |Q| + 1 >= k and the counts are exact;
* the EMD of Q ∪ {r} to the table (t-closeness, §6.1) and the entropy of the mean belief row
  (the JS divergence, §6.2) are computed here with a sequential sum and the C library's ``log2``;
  NumPy sums pairwise and takes its own (SIMD) ``log2``, so these two numbers may differ from
  NumPy's in the last bits (|error| ~ m · 1e-16 for values <= log2 m).

A condition is therefore taken from the compiled number only when that number is farther than
``margin`` (:data:`MARGIN`, relative to the bound, at least 1e-9 absolute) from its bound (``t +
1e-12``, ``j + 1e-12``); a group is *surely rejected* when one condition surely fails, *surely
accepted* when all surely hold, and undecided otherwise. The groups are walked nearest first (the
spans of the groups along the order are disjoint and sorted, so the nearest order is two pointers
walking away from the leftover, the later group first on a tie); the first group not surely
rejected is the answer when it is surely accepted, and when it is undecided the loop stops and
hands that leftover to the caller, which judges it with the NumPy code (the same decision as
before, bit for bit) and resumes the loop after it. The published groups are thus exactly the
NumPy loop's as long as the margin exceeds the difference of the two computations (about 1e-15
against 1e-9; tested on random releases and bkseq's views); a wider margin only asks NumPy more
often. On bkseq's 24 views (about 70,000 leftovers placed) NumPy is asked about 2 leftovers and 1
prefix row.

No ``fastmath``: LLVM then neither reorders the additions of the running sums nor fuses them.
"""

from __future__ import annotations

import math

import numba
import numpy as np

MARGIN = 1e-9  # a compiled EMD / divergence this close to its bound (relative, >= 1e-9 absolute) is left to NumPy


@numba.njit(cache=True)
def emd_to_table(counts, plus, per, table, ordered):
    """The EMD of a group's value distribution to the table's (t-closeness, §6.1; classic's
    ``equal`` or ``ordered`` ground distance): ``counts`` the group's value counts, with one more
    record of value ``plus`` (-1: none), over ``per`` records; a sequential sum."""
    m = table.shape[0]
    emd = 0.0
    run = 0.0
    for v in range(m):
        c = counts[v] + (1 if v == plus else 0)
        diff = c / per - table[v]
        if ordered:
            run += diff
            emd += abs(run)
        else:
            emd += abs(diff)
    if ordered:
        return emd / (m - 1) if m >= 2 else 0.0
    return 0.5 * emd


@numba.njit(cache=True)
def merge_run(
    rest,
    start,
    position,
    first,
    last,
    rho,
    rho_entropy,
    mass,
    entropy_sum,
    size_plus,
    large_plus,
    k,
    js_bound,
    counts,
    sensitive,
    table,
    emd_bound,
    inner_k,
    ordered,
    margin,
    chosen,
    dirty,
    block,
    calls,
):
    """Place the leftovers ``rest[start:]`` in turn (see the module docstring); ``chosen[i]`` the
    group (index into ``first``/``last``) of ``rest[i]``, -1 none. Returns the index of the first
    leftover with an undecided nearest candidate (not placed: the caller judges it), or
    ``len(rest)``. Updates in place: ``mass``, ``entropy_sum``, ``size_plus``, ``large_plus`` (the
    js_reduce extension's running sums), ``counts`` (t-closeness's) and marks ``dirty[g]`` for each
    group grown (its row of t-closeness's judgment table is then stale).

    ``calls[i]``: the accepts calls the NumPy loop counts for ``rest[i]`` — 1 when ``block`` is 0
    (``all_at_once``: every group judged in one step), else the blocks
    :func:`cdpbench.plugin.nearest_accepted` asks (``block`` nearest groups with every group tied
    at the block's bound, then four times more each time) up to the one holding the chosen group,
    or all of them when none is chosen. The walk below visits the groups in that very order
    (distance, the later group first on a tie), so a block ends at the first group farther than
    the distance of its ``b``-th group."""
    G, m = mass.shape
    js_margin = margin * max(1.0, abs(js_bound))
    emd_margin = margin * max(1.0, abs(emd_bound))
    for i in range(start, len(rest)):
        r = rest[i]
        q = position[r]
        s = sensitive[r]
        h_r = rho_entropy[r]
        # the first group at or after q along the order: groups before it are to the left
        lo, hi = 0, G
        while lo < hi:
            mid = (lo + hi) // 2
            if first[mid] < q:
                lo = mid + 1
            else:
                hi = mid
        left, right = lo - 1, lo
        choice = -1
        undecided = False
        # the blocks of nearest_accepted along the walk: this one starts at walk index `opened`,
        # holds `size_block` groups and every group tied with its last (`bound`, known once reached)
        walked = 0
        opened = 0
        size_block = block
        rounds = 1
        bound_known = False
        bound = 0
        while left >= 0 or right < G:
            if right < G and left >= 0:
                d_left = max(max(first[left] - q, q - last[left]), 0)
                d_right = max(max(first[right] - q, q - last[right]), 0)
                take_right = d_right <= d_left  # a tie goes to the later group
            else:
                take_right = right < G
            if take_right:
                g = right
                right += 1
            else:
                g = left
                left -= 1
            if block > 0:
                d_g = max(max(first[g] - q, q - last[g]), 0)
                if bound_known and d_g > bound:  # past the block: the next one opens here
                    opened = walked
                    size_block *= 4
                    rounds += 1
                    bound_known = False
                if not bound_known and walked == opened + size_block - 1:
                    bound = d_g
                    bound_known = True
                walked += 1
            # |Q| + 1 >= k (exact)
            if not (size_plus[g] >= k):
                continue
            # t-closeness of Q ∪ {r}: exact counts, then the EMD to the table
            total = 1
            for v in range(m):
                total += counts[g, v]
            if total < inner_k:
                continue
            emd = emd_to_table(counts[g], s, float(max(total, 1)), table, ordered)
            if emd > emd_bound + emd_margin:
                continue
            unsure = emd > emd_bound - emd_margin
            # JS divergence of Q ∪ {r}: H(mean row) - mean entropy
            size = size_plus[g]
            h_mean = 0.0
            for v in range(m):
                p = (mass[g, v] + rho[r, v]) / size
                if p > 0.0:
                    h_mean -= p * math.log2(p)
            js = h_mean - (entropy_sum[g] + h_r) / size
            if js > js_bound + js_margin:
                continue
            if unsure or js > js_bound - js_margin:
                undecided = True
            else:
                choice = g
            break
        if undecided:
            return i
        chosen[i] = choice
        calls[i] = rounds if block > 0 else 1
        if choice >= 0:  # JSExtension.add: the same additions, in place
            g = choice
            size_plus[g] += 1.0
            for v in range(m):
                mass[g, v] += rho[r, v]
            entropy_sum[g] += h_r
            large_plus[g] = size_plus[g] >= k
            counts[g, s] += 1
            dirty[g] = True
    return len(rest)


@numba.njit(cache=True)
def judge_prefixes(rows, rho, rho_entropy, k, js_bound, sensitive, table, emd_bound, inner_k, ordered, margin, out):
    """The scan's prefix judgment (``JSExtension.accepts_prefixes``: is the group ``rows[b, :l + 1]``
    accepted, every prefix of every row of ``rows`` ``[B, L]``) with the kernel's margin: ``out[b, l]``
    1 surely accepted, 0 surely rejected, 2 undecided (the caller asks NumPy). The running sums
    along each row are ``np.cumsum``'s additions (from 0, in record order) and the counts exact, so
    only the EMD's sum and the entropy of the mean row differ from NumPy's, as in :func:`merge_run`."""
    B, L = rows.shape
    m = rho.shape[1]
    js_margin = margin * max(1.0, abs(js_bound))
    emd_margin = margin * max(1.0, abs(emd_bound))
    mass = np.empty(m)
    counts = np.empty(m, dtype=np.int64)
    for b in range(B):
        for v in range(m):
            mass[v] = 0.0
            counts[v] = 0
        entropy_sum = 0.0
        for l in range(L):
            r = rows[b, l]
            for v in range(m):
                mass[v] += rho[r, v]
            entropy_sum += rho_entropy[r]
            counts[sensitive[r]] += 1
            size = l + 1
            if size < k or size < inner_k:
                out[b, l] = 0
                continue
            per = float(size)
            emd = emd_to_table(counts, -1, per, table, ordered)
            if emd > emd_bound + emd_margin:
                out[b, l] = 0
                continue
            unsure = emd > emd_bound - emd_margin
            h_mean = 0.0
            for v in range(m):
                p = mass[v] / per
                if p > 0.0:
                    h_mean -= p * math.log2(p)
            js = h_mean - entropy_sum / per
            if js > js_bound + js_margin:
                out[b, l] = 0
            elif unsure or js > js_bound - js_margin:
                out[b, l] = 2
            else:
                out[b, l] = 1
