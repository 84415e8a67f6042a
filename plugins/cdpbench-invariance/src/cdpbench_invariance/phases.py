"""The phases the invariance family shares: classification, division, balancing, assignment and
split over signatures (Xiao & Tao, m-invariance, SIGMOD 2007; Khan et al., (τ,m)-slicedBucket,
Algorithms 3–7), and the publication of the resulting buckets.

The four anonymizers of this package differ only in a :class:`Policy`:

* which earlier signatures a respondent may keep or reuse (``scope``): its lifespan only
  (m-invariance), its previous release and its Del entry (τ-safety), or its whole history
  (slicedBucket: any earlier signature holding the new value, else one disjoint from all);
* what fills a bucket when the new tuples cannot (``filler``): counterfeits (m-invariance,
  τ-safety, τ-safe (l,k)) or the Cach table of real records, delaying what cannot be filled
  (slicedBucket).

A release's tuples are *items*: a row of the release (``>= 0``), a counterfeit of value ``v``
(``-1 - v``) or a published Cach copy of row ``r`` whose respondent is published anyway
(``-1 - m - r``, a *duplicate*). A bucket is a signature (an ``int`` bit mask of sensitive value
codes) and its items, the same number of each signature value; after :func:`split` one of each
(m-unique when the signature has ``>= m`` values).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release


# ---------------------------------------------------------------------------- signatures
def mask(values) -> int:
    """The signature (bit mask) of an iterable of value codes."""
    out = 0
    for v in values:
        out |= 1 << int(v)
    return out


def members(sig: int) -> list[int]:
    """The value codes of a signature, ascending."""
    out, v = [], 0
    while sig:
        if sig & 1:
            out.append(v)
        sig >>= 1
        v += 1
    return out


# ---------------------------------------------------------------------------- policy and state
@dataclass(frozen=True)
class Policy:
    """What distinguishes one member of the family from another (module docstring).

    ``scope``: ``"lifespan"`` — a respondent keeps its signature while present in consecutive
    releases with the same value, and starts afresh otherwise (m-invariance, Def. 8); ``"previous"``
    — an updated respondent gets a signature disjoint from its previous one, a re-inserted one its
    Del signature when that holds its value, else one disjoint from it (τ-safety: only T_{r-1}
    is checked); ``"history"`` — an updated or re-inserted respondent reuses an earlier signature
    holding its value (Upd, Del), else gets one disjoint from every earlier one (slicedBucket).
    ``filler``: ``"counterfeit"`` or ``"cache"``. ``cache_duplicate`` and ``cache_single``: the
    Cach update of the releases after the first (slicedBucket's parameters of the same names)."""

    scope: str
    filler: str
    cache_reserve: int = 0  # Cach tuples kept per value when Cach is asked for eligibility (spec §3.5.5)
    cache_duplicate: str = "first"  # which new tuple of a repeated value moves to Cach: "first" | "last"
    cache_single: str = "copy"  # a value held by one new tuple: "copy" it to Cach | "hold" the tuple in Cach


@dataclass
class Signatures:
    """Per respondent: the signature and value of its last publication and the release of it, and
    every signature it was published with (Upd keeps the full history, spec §3.5.4)."""

    last: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # respondent -> (t, sig, value)
    history: dict[int, list[int]] = field(default_factory=dict)  # respondent -> distinct signatures, in order
    deleted: dict[int, int] = field(default_factory=dict)  # Del: respondent -> signature when it left

    def record(self, t: int, respondent: int, sig: int, value: int) -> None:
        self.last[respondent] = (t, sig, value)
        past = self.history.setdefault(respondent, [])
        if sig not in past:
            past.append(sig)

    def record_many(self, t: int, respondents: np.ndarray, sigs: np.ndarray, values: np.ndarray,
                    previous: np.ndarray) -> None:
        """:meth:`record` for each respondent in turn; ``previous`` is each one's signature in
        ``last`` before (0 when none): a respondent published again with it has it in its history."""
        resp, sig = respondents.tolist(), sigs.tolist()
        self.last.update(zip(resp, zip([t] * len(resp), sig, values.tolist())))
        for j in np.flatnonzero(previous != sigs).tolist():
            past = self.history.setdefault(resp[j], [])
            if sig[j] not in past:
                past.append(sig[j])


# ---------------------------------------------------------------------------- QI geometry
def qi_points(release: Release) -> np.ndarray:
    """``[n, d]`` QI scaled to [0, 1] per column by the schema's width (leaf codes for categorical
    columns: a taxonomy orders its leaves so that each node is a range), for nearest-tuple
    choices and splits."""
    widths = np.maximum(np.asarray(release.schema.widths, dtype=float), 1e-12)
    return release.qi / widths[None, :]


# ---------------------------------------------------------------------------- assignment
def alpha_beta(counts: list[int], m: int) -> tuple[int, int] | None:
    """Xiao & Tao's assignment step (slicedBucket Algorithm 6, lines 5–13): with the per-value
    counts sorted descending (sv_1 >= sv_2 >= ...) and γ their sum, the smallest β >= m for which
    some α >= 1 satisfies α <= sv_β, sv_1 - α <= (γ - αβ)/m and sv_{β+1} <= (γ - αβ)/m, with the
    largest such α. ``None`` when no β works (fewer than m values, or not m-eligible)."""
    sv = sorted((c for c in counts if c > 0), reverse=True)
    gamma = sum(sv)
    lam = len(sv)
    for beta in range(m, lam + 1):
        nxt = sv[beta] if beta < lam else 0
        for alpha in range(sv[beta - 1], 0, -1):
            rest = gamma - alpha * beta
            if (sv[0] - alpha) * m <= rest and nxt * m <= rest:
                return alpha, beta
    return None


def m_eligible(counts: np.ndarray, m: int) -> bool:
    """No value holds more than 1/m of the tuples, and there are tuples of at least m values (or none)."""
    total = int(counts.sum())
    return total == 0 or (int(counts.max()) * m <= total and int((counts > 0).sum()) >= m)


def counterfeits_for_eligibility(counts: np.ndarray, m: int) -> np.ndarray:
    """``[n_values]`` counterfeits per value that make ``counts`` m-eligible with the fewest
    counterfeits: the values are topped up, fewest first (ties: lower code), to the largest count
    until the total reaches m times it. Needs ``m <= n_values``."""
    counts = np.asarray(counts, dtype=np.int64)
    add = np.zeros_like(counts)
    top = int(counts.max()) if len(counts) else 0
    if top == 0:
        return add
    need = m * top - int(counts.sum())
    for v in np.argsort(counts, kind="stable"):
        if need <= 0:
            break
        room = top - int(counts[v])
        take = min(room, need)
        add[v] += take
        need -= take
    return add


def eligible_cap(counts: np.ndarray, m: int) -> int:
    """The largest cap c such that, each value's count cut to c, the tuples are m-eligible
    (``m * c <= sum(min(count, c))`` with at least m values); 0 if none."""
    counts = np.asarray(counts, dtype=np.int64)
    best = 0
    for cap in range(1, int(counts.max(initial=0)) + 1):
        cut = np.minimum(counts, cap)
        if m * cap <= int(cut.sum()) and int((cut > 0).sum()) >= m:
            best = cap
    return best


def assign(
    items: list[int], value_of: dict[int, int], points_of, m: int
) -> tuple[list[tuple[int, list[int]]], list[int]]:
    """Algorithm 6 (Xiao & Tao's assignment) on m-eligible ``items``: buckets of the β most
    frequent values (ties: the value met first among ``items``), α items of each, the α nearest
    to the bucket's seed (the first remaining item of its first value). Returns the buckets
    (signature, items) and the items left when no (α, β) exists (none if ``items`` was m-eligible)."""
    items = list(items)
    if not items:
        return [], []
    # positions: counterfeits of one value are equal items; the remaining ones in table order
    values = np.fromiter((value_of[it] for it in items), dtype=np.int64, count=len(items))
    points = points_of(items)
    by_value = np.argsort(values, kind="stable")
    cuts = np.flatnonzero(np.r_[True, values[by_value][1:] != values[by_value][:-1]])
    positions = {int(values[p[0]]): p for p in np.split(by_value, cuts[1:])}  # per value its positions, ascending
    count = {v: len(p) for v, p in positions.items()}
    head = dict.fromkeys(positions, 0)  # per value the index of its first remaining position
    alive = np.ones(len(items), dtype=bool)
    buckets: list[tuple[int, list[int]]] = []
    while any(count.values()):
        first: dict[int, int] = {}
        for v, p in positions.items():
            if count[v]:
                h = head[v]
                while not alive[p[h]]:
                    h += 1
                head[v], first[v] = h, int(p[h])
        order = sorted(first, key=lambda v: (-count[v], first[v]))  # ties: the value met first
        found = alpha_beta([count[v] for v in order], m)
        if found is None:
            return buckets, [items[k] for k in np.flatnonzero(alive).tolist()]
        alpha, beta = found
        chosen = order[:beta]
        anchor = points[first[chosen[0]]]
        picked: list[int] = []
        for v in chosen:
            pool = positions[v][alive[positions[v]]]
            if len(pool) > alpha:
                d = ((points[pool] - anchor[None, :]) ** 2).sum(axis=1)
                pool = pool[np.argsort(d, kind="stable")[:alpha]]
            picked.extend(pool.tolist())
            count[v] -= len(pool)
        alive[picked] = False
        buckets.append((mask(chosen), [items[k] for k in picked]))
    return buckets, []


# ---------------------------------------------------------------------------- split
def split(sig: int, items: list[int], value_of, points_of) -> list[list[int]]:
    """Algorithm 7 (partition; Xiao & Tao's split): a bucket holding c items of each signature
    value becomes c buckets of one item per value. Recursively, along the QI column of widest
    spread among its items, each value's items are sorted (stable) and the first half (c // 2 of
    each) goes left. Items without a QI (counterfeits) sort last. (One bucket of
    :func:`split_buckets`.)"""
    if not items:
        return []
    arr = np.asarray(items, dtype=np.int64)
    values = np.fromiter((value_of[it] for it in items), dtype=np.int64, count=len(items))
    order, starts = split_buckets(np.asarray([0, len(arr)]), values, points_of(items))
    return [part.tolist() for part in np.split(arr[order], starts[1:])]


def split_buckets(bounds: np.ndarray, values: np.ndarray, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`split` of many buckets at once, one recursion level of every bucket per step.

    The items of bucket ``b`` are positions ``bounds[b]:bounds[b + 1]`` of ``values`` (their
    sensitive values, ``>= 0``) and ``pts`` (their ``[k, d]`` QI points, NaN rows for
    counterfeits). Returns ``(order, starts)``: ``order`` permutes the positions so that every
    final bucket is a contiguous run starting at one of ``starts``, the final buckets in the
    order of the recursion (bucket by bucket, left half before right half) and the items of each
    in the order the recursion leaves them. Each part of a bucket keeps the slice the bucket
    held, its left half first, so the order of the slices is the recursion's."""
    bounds = np.asarray(bounds, dtype=np.int64)
    n = int(bounds[-1]) if len(bounds) else 0
    at = np.arange(n)  # at[position] = the item at that position
    lo = np.repeat(bounds[:-1], np.diff(bounds))  # the first position of each position's part
    if n == 0:
        return at, np.zeros(0, dtype=np.int64)
    n_values = int(values.max()) + 1
    real = ~np.isnan(pts).any(axis=1)
    # per column (contiguous): a part without a real item gets spread -inf everywhere, so column 0
    high = [np.where(real, pts[:, j], -np.inf) for j in range(pts.shape[1])]
    low = [np.where(real, pts[:, j], np.inf) for j in range(pts.shape[1])]
    # each column's sort key (NaN: last) as its rank among the items: one integer key per level
    ranks = np.empty(pts.shape, dtype=np.int64)
    for j in range(pts.shape[1]):
        ranks[:, j] = np.unique(np.where(np.isnan(pts[:, j]), np.inf, pts[:, j]), return_inverse=True)[1].ravel()
    n_ranks = int(ranks.max()) + 1 if ranks.size else 1
    active = np.arange(n)  # positions of the parts still split, ascending (whole parts)
    while len(active):
        idx, part_lo = at[active], lo[active]
        first = np.flatnonzero(np.r_[True, part_lo[1:] != part_lo[:-1]])
        part = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(active)]))
        spread = np.column_stack([np.maximum.reduceat(h[idx], first) - np.minimum.reduceat(lw[idx], first)
                                  for h, lw in zip(high, low)])
        group = part * n_values + values[idx]
        key = ranks[idx, np.argmax(spread, axis=1)[part]]
        if len(first) * n_values * n_ranks < 2**62:  # by part, value, key, then position (stable)
            order = np.argsort(group * n_ranks + key, kind="stable")
        else:
            order = np.lexsort((key, group))
        g_sorted = group[order]
        run = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
        run_len = np.diff(np.r_[run, len(order)])
        run_part = part[order][run]
        c = np.minimum.reduceat(run_len, np.flatnonzero(np.r_[True, run_part[1:] != run_part[:-1]]))
        rank = np.arange(len(order)) - np.repeat(run, run_len)  # rank within its value
        part_sorted = part[order]
        right = rank >= c[part_sorted] // 2
        regroup = np.argsort(part_sorted * 2 + right, kind="stable")  # each part: its left half, then its right half
        goes = c[part] > 1  # per position (parts keep their slices); c <= 1: the part is final as it is
        at[active[goes]] = idx[order][regroup][goes]
        n_left = np.bincount(part_sorted[~right], minlength=len(first))
        right_new = right[regroup]
        lo[active] = np.where(goes, part_lo + right_new * n_left[part], part_lo)
        active = active[goes]
    return at, np.flatnonzero(np.r_[True, lo[1:] != lo[:-1]])


# ---------------------------------------------------------------------------- publication
def publication(
    release: Release, items: np.ndarray, bounds: np.ndarray, info: dict, rng: np.random.Generator | None = None
) -> Publication:
    """The release published as buckets: bucket ``g`` holds ``items[bounds[g]:bounds[g + 1]]``
    (items: see the module docstring), each bucket a group generalized to the tightest box of its
    real records (numeric: [min, max]; categorical: the smallest taxonomy node — gender kept or *,
    zip its longest common prefix: the cell generalization of slicedBucket Algorithm 8);
    counterfeits and duplicates carry the counterfeit flag / no owner (respondent -1, row -1). Rows
    in no bucket are suppressed (not published: delayed or dropped). Within a bucket the tuples
    are shuffled with ``rng`` when given (Def. 11(3)); every published cell of a bucket is the
    same anyway (spec §3.5.8)."""
    n = len(release)
    m = release.n_values
    items = np.asarray(items, dtype=np.int64)
    n_buckets = len(bounds) - 1
    of = np.repeat(np.arange(n_buckets, dtype=np.int64), np.diff(bounds))  # each item's bucket
    group = np.full(n, -1, dtype=np.int64)
    real = items >= 0
    placed = np.bincount(items[real], minlength=n)
    if len(placed) and placed.max() > 1:
        raise AssertionError(f"row {int(np.argmax(placed))} placed in two buckets")
    group[items[real]] = of[real]
    fake = ~real & (items >= -m)
    fake_value, fake_group = -1 - items[fake], of[fake]
    dup = items < -m
    dup_rows, dup_group = -1 - m - items[dup], of[dup]
    if len(dup_rows):  # duplicates take part in the boxes: publish over the release with their copies appended
        rows = dup_rows
        extended = Release(
            release.t,
            release.schema,
            np.concatenate([release.respondent, np.full(len(rows), -1, dtype=np.int64)]),
            np.concatenate([release.qi, release.qi[rows]]),
            np.concatenate([release.sensitive, release.sensitive[rows]]),
            None if release.time is None else np.concatenate([release.time, release.time[rows]]),
            release.truth,
        )
        group = np.concatenate([group, dup_group])
    else:
        extended = release
    if n_buckets and not (group >= 0).any():
        raise AssertionError("buckets without a real record")
    pub = Publication.from_partition(extended, group, categorical="taxonomy", bucketized=False, info=info)
    if pub.n_groups != n_buckets:
        raise AssertionError("every bucket must hold a record of the release")
    own = pub.row >= n  # duplicates: no owner in this release
    pub.row[own] = -1
    pub.respondent[own] = -1
    pub.suppressed = release.respondent[group[:n] < 0].copy()
    if len(fake_value):
        k = len(fake_value)
        pub.group = np.concatenate([pub.group, fake_group])
        pub.sensitive = np.concatenate([pub.sensitive, fake_value])
        pub.respondent = np.concatenate([pub.respondent, np.full(k, -1, dtype=np.int64)])
        pub.row = np.concatenate([pub.row, np.full(k, -1, dtype=np.int64)])
        pub.counterfeit = np.concatenate([pub.counterfeit, np.ones(k, dtype=bool)])
        if pub.time is not None:
            pub.time = np.concatenate([pub.time, np.zeros(k, dtype=np.int64)])
    order = np.argsort(pub.group, kind="stable")
    if rng is not None:  # shuffle inside each bucket: random keys, then by group
        order = np.lexsort((rng.random(len(pub.group)), pub.group))
    for name in ("group", "sensitive", "respondent", "row", "counterfeit"):
        setattr(pub, name, getattr(pub, name)[order])
    if pub.time is not None:
        pub.time = pub.time[order]
    return pub
