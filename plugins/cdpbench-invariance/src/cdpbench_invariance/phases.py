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
    remaining = list(range(len(items)))  # positions: counterfeits of one value are equal items
    buckets: list[tuple[int, list[int]]] = []
    while remaining:
        by_value: dict[int, list[int]] = {}
        for k in remaining:
            by_value.setdefault(value_of[items[k]], []).append(k)
        order = sorted(by_value, key=lambda v: -len(by_value[v]))  # stable: first met first on ties
        found = alpha_beta([len(by_value[v]) for v in order], m)
        if found is None:
            return buckets, [items[k] for k in remaining]
        alpha, beta = found
        chosen = order[:beta]
        anchor = points_of([items[by_value[chosen[0]][0]]])[0]
        picked: list[int] = []
        for v in chosen:
            pool = by_value[v]
            if len(pool) <= alpha:
                picked.extend(pool)
                continue
            d = ((points_of([items[k] for k in pool]) - anchor[None, :]) ** 2).sum(axis=1)
            picked.extend(pool[i] for i in np.argsort(d, kind="stable")[:alpha])
        taken = set(picked)
        buckets.append((mask(chosen), [items[k] for k in picked]))
        remaining = [k for k in remaining if k not in taken]
    return buckets, []


# ---------------------------------------------------------------------------- split
def split(sig: int, items: list[int], value_of, points_of) -> list[list[int]]:
    """Algorithm 7 (partition; Xiao & Tao's split): a bucket holding c items of each signature
    value becomes c buckets of one item per value. Recursively, along the QI column of widest
    spread among its items, each value's items are sorted (stable) and the first half (c // 2 of
    each) goes left. Items without a QI (counterfeits) sort last."""
    if not items:
        return []
    values = np.fromiter((value_of[it] for it in items), dtype=np.int64, count=len(items))
    pts = points_of(items)
    arr = np.asarray(items, dtype=np.int64)
    return [arr[part].tolist() for part in _split(values, pts, np.arange(len(items)))]


def _split(values: np.ndarray, pts: np.ndarray, idx: np.ndarray) -> list[np.ndarray]:
    v = values[idx]
    counts = np.bincount(v)
    c = int(counts[counts > 0].min())
    if c <= 1:
        return [idx]
    p = pts[idx]
    real = ~np.isnan(p).any(axis=1)
    spread = (p[real].max(axis=0) - p[real].min(axis=0)) if real.any() else np.zeros(p.shape[1])
    key = p[:, int(np.argmax(spread))]
    key = np.where(np.isnan(key), np.inf, key)
    order = np.lexsort((np.arange(len(idx)), key, v))  # by value, then key, then position (stable)
    sorted_v = v[order]
    rank = np.arange(len(order)) - np.searchsorted(sorted_v, sorted_v, side="left")  # rank within its value
    left = rank < c // 2
    ordered = idx[order]  # both halves stay sorted by value
    return _split(values, pts, ordered[left]) + _split(values, pts, ordered[~left])


# ---------------------------------------------------------------------------- publication
def publication(
    release: Release, buckets: list[list[int]], info: dict, rng: np.random.Generator | None = None
) -> Publication:
    """The release published as ``buckets`` (lists of items, see the module docstring): each
    bucket a group generalized to the tightest box of its real records (numeric: [min, max];
    categorical: the smallest taxonomy node — gender kept or *, zip its longest common prefix:
    the cell generalization of slicedBucket Algorithm 8); counterfeits and duplicates carry the
    counterfeit flag / no owner (respondent -1, row -1). Rows in no bucket are suppressed
    (not published: delayed or dropped). Within a bucket the tuples are shuffled with ``rng``
    when given (Def. 11(3)); every published cell of a bucket is the same anyway (spec §3.5.8)."""
    n = len(release)
    m = release.n_values
    group = np.full(n, -1, dtype=np.int64)
    dup_rows: list[int] = []
    dup_group: list[int] = []
    fake_value: list[int] = []
    fake_group: list[int] = []
    for g, items in enumerate(buckets):
        for it in items:
            if it >= 0:
                if group[it] >= 0:
                    raise AssertionError(f"row {it} placed in two buckets")
                group[it] = g
            elif it >= -m:
                fake_value.append(-1 - it)
                fake_group.append(g)
            else:
                dup_rows.append(-1 - m - it)
                dup_group.append(g)
    if dup_rows:  # duplicates take part in the boxes: publish over the release with their copies appended
        rows = np.asarray(dup_rows, dtype=np.int64)
        extended = Release(
            release.t,
            release.schema,
            np.concatenate([release.respondent, np.full(len(rows), -1, dtype=np.int64)]),
            np.concatenate([release.qi, release.qi[rows]]),
            np.concatenate([release.sensitive, release.sensitive[rows]]),
            None if release.time is None else np.concatenate([release.time, release.time[rows]]),
            release.truth,
        )
        group = np.concatenate([group, np.asarray(dup_group, dtype=np.int64)])
    else:
        extended = release
    if len(buckets) and not (group >= 0).any():
        raise AssertionError("buckets without a real record")
    pub = Publication.from_partition(extended, group, categorical="taxonomy", bucketized=False, info=info)
    if pub.n_groups != len(buckets):
        raise AssertionError("every bucket must hold a record of the release")
    own = pub.row >= n  # duplicates: no owner in this release
    pub.row[own] = -1
    pub.respondent[own] = -1
    pub.suppressed = release.respondent[group[:n] < 0].copy()
    if fake_value:
        k = len(fake_value)
        pub.group = np.concatenate([pub.group, np.asarray(fake_group, dtype=np.int64)])
        pub.sensitive = np.concatenate([pub.sensitive, np.asarray(fake_value, dtype=np.int64)])
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
