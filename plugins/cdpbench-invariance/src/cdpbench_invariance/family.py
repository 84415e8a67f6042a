"""The release loop the invariance family shares (one :class:`InvariantAnonymizer`, one
:class:`~cdpbench_invariance.phases.Policy` per method): classification, division and balancing,
constrained signatures for updated and re-inserted tuples, assignment, split, publication.

Per release r (slicedBucket Algorithm 1; Xiao & Tao's m-invariance for the steps it shares):

1. **Cach update** (``filler="cache"`` only; Algorithm 2 on the new tuples, Algorithm 5's first
   lines): among the new tuples (never published, not cached), for each value held by several,
   the first in table order *moves* to Cach (delayed); a value held once is *copied* to Cach and
   stays. At the releases after the first (Algorithm 5's update) the policy may move the last of
   a repeated value instead (``cache_duplicate="last"``) and hold a value held once in Cach instead
   of copying it (``cache_single="hold"``). Cach entries whose respondent left the table, or whose
   value changed, are dropped.
2. **Classification**: a respondent published at r-1 with the same value keeps its signature
   (T_s). An updated (T_u) or re-inserted (T_r) respondent keeps or reuses a signature as the
   policy's ``scope`` allows, else needs a new one that holds its value and avoids the values the
   scope forbids (for ``"lifespan"`` it simply starts a new lifespan among the new tuples).
3. **Division and balancing** (Algorithm 5): the tuples of each kept signature form one bucket;
   each value of the signature is topped up to the bucket's largest count from the new tuples
   (nearest to the bucket's centroid), then from the filler; with Cach, what cannot be filled
   is delayed (the bucket keeps as many full copies of its signature as it can).
4. **Constrained tuples**, one at a time: m - 1 partners of distinct allowed values, nearest
   first, from the new tuples, then the filler; else the tuple is delayed (Cach) or suppressed.
5. **Assignment** (Algorithm 6) of the remaining new tuples, made m-eligible first by the filler
   (counterfeits: the fewest; Cach: tuples of the rarest values, keeping ``cache_reserve`` per value);
   what cannot form a bucket is delayed (Cach) or suppressed.
6. **Split** (Algorithm 7) into buckets of one tuple per signature value; **publication** with
   each bucket's cells generalized (Algorithm 8) and its tuples shuffled.

m is the anonymizer's ``m`` when given, else (``m: null``, the default) the run's privacy model's m,
read from ``PublishContext.privacy_model`` at each publish (:func:`model_threshold`): the threshold
lives in the model, and an explicit ``anonymizer.m`` still wins.

Ties: values of equal count are taken in the order of their lowest respondent id (the paper's
example takes p1, p2, ... in that order: Tables 1c and 6); candidates at equal distance in table
order. The module keeps its state (signatures, Del, Upd, Cach) on the instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import ConfigError, require
from cdpbench.plugin import Anonymizer, PublishContext

from .phases import (
    Policy,
    Signatures,
    assign,
    counterfeits_for_eligibility,
    eligible_cap,
    m_eligible,
    mask,
    members,
    publication,
    qi_points,
    split,
)


#: the help of the anonymizers' ``m``
M_HELP = "distinct sensitive values per bucket (m-uniqueness; >= 2); null = the run's privacy model's m"


def is_threshold(value: object, least: int) -> bool:
    """``value`` is an integer (not a bool) >= ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def check_threshold(value: object, name: str, least: int) -> None:
    """A threshold parameter's check: null (the privacy model's) or an integer >= ``least``."""
    if value is not None:
        require(is_threshold(value, least), name, f"an integer >= {least}, or null for the privacy model's {name}", value)


def model_threshold(ctx: PublishContext, own: int | None, key: str, least: int, param: str | None = None) -> tuple[int, str]:
    """The threshold an anonymizer works with, and where it comes from: its own parameter
    ``anonymizer.<key>`` when given (an explicit value wins: an anonymizer may be run against
    another model on purpose), else the run's privacy model's ``<param>`` (default ``key``).
    A one-line :class:`ConfigError` naming ``anonymizer.<key>`` when neither exists."""
    param = param or key
    if own is not None:
        return own, f"anonymizer.{key}"
    model = ctx.privacy_model
    value = getattr(getattr(model, "params", None), param, None)
    if value is None:
        which = "the run has no privacy model" if model is None else (
            f"privacy model {getattr(model, 'plugin_name', type(model).__name__)!r} has no {param}")
        raise ConfigError(f"anonymizer.{key} is null (the privacy model's {param}) but {which}: "
                          f"set anonymizer.{key} to an integer >= {least}")
    require(is_threshold(value, least), f"privacy_model.{param} (anonymizer.{key} is null)", f"an integer >= {least}", value)
    return value, f"privacy_model.{param}"


@dataclass
class InvarianceParams:
    m: int | None = field(default=None, metadata={"help": M_HELP})
    shuffle: bool = field(default=True, metadata={"help": "shuffle the tuples inside each bucket before publishing"})

    def __post_init__(self) -> None:
        check_threshold(self.m, "m", 2)
        require(isinstance(self.shuffle, bool), "shuffle", "true or false", self.shuffle)


@dataclass
class CacheEntry:
    respondent: int
    value: int
    copy: bool  # a copy of a record that stays in the table (else the record itself, delayed)


class InvariantAnonymizer(Anonymizer):
    """Base of the invariance family's anonymizers (see the module docstring); subclasses set ``policy``."""

    Params = InvarianceParams
    policy: Policy = Policy("lifespan", "counterfeit")

    def __init__(self, params=None):
        super().__init__(params)
        self.signatures = Signatures()
        self.cache: list[CacheEntry] = []
        self.cache_created = False  # Cach made from a first release (Algorithm 2); later ones update it
        self.present: set[int] = set()  # respondents of the previous release's table

    def threshold(self, ctx: PublishContext) -> tuple[int, str]:
        """m for this release and where it comes from: ``anonymizer.m``, or when it is null the
        run's privacy model's m (see :func:`model_threshold`)."""
        return model_threshold(ctx, self.params.m, "m", 2)

    # ------------------------------------------------------------------ the release loop
    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        (m, name), pol = self.threshold(ctx), self.policy
        n_values = release.n_values
        if m > n_values:
            raise ConfigError(f"{name} must be at most the {n_values} sensitive values of the data set (got {m})")
        t = release.t
        n = len(release)
        resp = release.respondent.astype(np.int64)
        value = release.sensitive.astype(np.int64)
        row_of = {int(r): i for i, r in enumerate(resp.tolist())}
        pts = qi_points(release)
        sigs = self.signatures

        # Del: respondents of the previous table that left it
        for r in self.present - row_of.keys():
            if r in sigs.last and sigs.last[r][0] == t - 1:
                sigs.deleted[r] = sigs.last[r][1]
        # Cach: drop entries whose record left or changed
        self.cache = [e for e in self.cache if e.respondent in row_of and value[row_of[e.respondent]] == e.value]
        delayed_now = {e.respondent for e in self.cache if not e.copy}

        fixed: dict[int, list[int]] = {}
        constrained: list[tuple[int, int]] = []  # (row, forbidden signature)
        new: list[int] = []
        for i in range(n):
            r, v = int(resp[i]), int(value[i])
            if r in delayed_now:
                continue
            last = sigs.last.get(r)
            if last is None:
                new.append(i)
                continue
            t_last, sig, v_last = last
            if t_last == t - 1 and v_last == v and (sig >> v) & 1:
                fixed.setdefault(sig, []).append(i)  # T_s
            elif pol.scope == "lifespan":
                new.append(i)  # a new lifespan
            elif pol.scope == "previous":
                ref = sigs.deleted.pop(r, None) if t_last < t - 1 else None
                ref = sig if ref is None else ref
                if (ref >> v) & 1:
                    fixed.setdefault(ref, []).append(i)
                else:
                    constrained.append((i, ref))
            else:  # history
                reuse = None
                dsig = sigs.deleted.pop(r, None)
                if dsig is not None and (dsig >> v) & 1:
                    reuse = dsig
                else:
                    for old in reversed(sigs.history.get(r, [])):
                        if (old >> v) & 1:
                            reuse = old
                            break
                if reuse is not None:
                    fixed.setdefault(reuse, []).append(i)
                else:
                    forbidden = 0
                    for old in sigs.history.get(r, []):
                        forbidden |= old
                    constrained.append((i, forbidden))

        # Cach creation (Algorithm 2, first release) / update from the new tuples (Algorithm 5, first lines)
        if pol.filler == "cache":
            update = self.cache_created  # a later release: the policy's cache_duplicate / cache_single apply
            by_value: dict[int, list[int]] = {}
            for i in new:
                by_value.setdefault(int(value[i]), []).append(i)
            moved = set()
            for v, rows in by_value.items():
                if len(rows) > 1:
                    row = rows[-1] if update and pol.cache_duplicate == "last" else rows[0]
                    moved.add(row)
                    self.cache.append(CacheEntry(int(resp[row]), v, False))
                elif update and pol.cache_single == "hold":
                    moved.add(rows[0])
                    self.cache.append(CacheEntry(int(resp[rows[0]]), v, False))
                else:
                    self.cache.append(CacheEntry(int(resp[rows[0]]), v, True))
            new = [i for i in new if i not in moved]
            self.cache_created = True

        state = _Release(self, release, pts, value, resp, row_of, new, m)
        buckets: list[tuple[int, list[int]]] = []
        for sig in sorted(fixed, key=lambda s: min(int(resp[i]) for i in fixed[s])):
            buckets.extend(state.balance(sig, fixed[sig]))
        for i, forbidden in sorted(constrained, key=lambda c: int(resp[c[0]])):
            b = state.constrained(i, forbidden)
            if b is not None:
                buckets.append(b)
        buckets.extend(state.assignment())

        final: list[list[int]] = []
        for sig, items in buckets:
            final.extend(split(sig, items, state.value_of, state.points_of))
        final = [b for b in final if any(it >= 0 for it in b)]
        for b in final:
            sig = mask(state.value_of[it] for it in b)
            for it in b:
                if it >= 0:
                    sigs.record(t, int(resp[it]), sig, int(value[it]))
        used = state.used_cache
        self.cache = [e for e in self.cache if id(e) not in used]
        self.present = set(row_of)
        n_fake = sum(1 for b in final for it in b if -n_values <= it < 0)
        n_dup = sum(1 for b in final for it in b if it < -n_values)
        info = {
            "anonymizer": type(self).__name__,
            "counterfeits": n_fake,
            "duplicated": n_dup,
            "delayed": n - sum(1 for b in final for it in b if it >= 0),
            "cache_size": len(self.cache),
        }
        rng = ctx.rng if self.params.shuffle else None
        return publication(release, final, info, rng)


class _Release:
    """One release's working state: per value the new tuples not yet placed (table order), the
    Cach entries used, and the rows placed in a bucket."""

    def __init__(self, anon: InvariantAnonymizer, release: Release, pts, value, resp, row_of, new, m: int):
        self.anon, self.pts, self.value, self.resp, self.row_of = anon, pts, value, resp, row_of
        self.m = m  # resolved by the anonymizer's publish: its own m, else the privacy model's
        self.n_values = release.n_values
        self.free = np.zeros(len(value), dtype=bool)  # rows in the pool of new tuples, not yet placed
        self.free[np.asarray(new, dtype=np.int64)] = True
        self.pool_rows: dict[int, np.ndarray] = {}  # per value its new rows, table order (static)
        for i in new:
            self.pool_rows.setdefault(int(value[i]), []).append(i)
        self.pool_rows = {v: np.asarray(rows, dtype=np.int64) for v, rows in self.pool_rows.items()}
        self.cache_by_value: dict[int, list[CacheEntry]] = {}
        for e in anon.cache:
            self.cache_by_value.setdefault(e.value, []).append(e)
        self.used_cache: set[int] = set()
        self.placed: set[int] = set()  # rows placed in a bucket this release
        self.value_of = _ValueOf(value, self.n_values)
        self.points_of = _PointsOf(pts, self.n_values)
        self.filler = anon.policy.filler
        self.reserve = anon.policy.cache_reserve
        self.has_history = anon.signatures.history
        self._by_frequency: list[int] | None = None

    # ---------------------------------------------------------------- pools
    def _pool(self, v: int) -> np.ndarray:
        """The new rows of value ``v`` not yet placed, table order."""
        rows = self.pool_rows.get(v)
        return rows[self.free[rows]] if rows is not None else np.zeros(0, dtype=np.int64)

    def _take_new(self, v: int, count: int, anchor) -> list[int]:
        pool = self._pool(v)
        if len(pool) == 0 or count <= 0:
            return []
        if len(pool) > count:
            d = ((self.pts[pool] - anchor[None, :]) ** 2).sum(axis=1)
            taken = pool[np.sort(np.argsort(d, kind="stable")[:count])]
        else:
            taken = pool
        self.free[taken] = False
        taken = taken.tolist()
        self.placed.update(taken)
        return taken

    def _cache_entries(self, v: int, sig: int | None) -> list[CacheEntry]:
        """Unused Cach entries of value ``v`` usable in a bucket of signature ``sig`` (``None``: not
        yet known): a respondent published before only in a bucket whose signature equals or is
        disjoint from each of its earlier ones."""
        out = []
        for e in self.cache_by_value.get(v, ()):
            if id(e) in self.used_cache:
                continue
            past = self.has_history.get(e.respondent)
            if past and not e.copy:
                if sig is None or any(old != sig and old & sig for old in past):
                    continue
            out.append(e)
        return out

    def cache_available(self, v: int, sig: int | None, reserve: int = 0) -> int:
        return max(len(self._cache_entries(v, sig)) - reserve, 0)

    def _cache_items(self, v: int, count: int, anchor, sig: int | None = None, reserve: int = 0) -> list[int]:
        """Up to ``count`` Cach tuples of value ``v`` (nearest first), leaving ``reserve`` of them.
        A delayed record is published as itself; a copy as a duplicate (no owner)."""
        entries = self._cache_entries(v, sig)
        room = max(len(entries) - reserve, 0)
        if room == 0 or count <= 0:
            return []
        rows = np.asarray([self.row_of[e.respondent] for e in entries], dtype=np.int64)
        d = ((self.pts[rows] - anchor[None, :]) ** 2).sum(axis=1)
        out = []
        for j in np.argsort(d, kind="stable")[: min(count, room)]:
            e, row = entries[j], int(rows[j])
            self.used_cache.add(id(e))
            if e.copy:
                out.append(-1 - self.n_values - row)
            else:
                out.append(row)
                self.placed.add(row)
        return out

    def _release_items(self, items: list[int]) -> None:
        """Items that were taken but end up in no bucket: rows go back (new rows to Cach when
        there is one: delayed), Cach copies back to Cach; counterfeits vanish. A delayed record
        is held in Cach once, as itself: its copy (of a record that stays in T) goes."""
        delayed = set()
        if self.filler == "cache":
            delayed = {int(self.resp[it]) for it in items if it >= 0 and not self.has_history.get(int(self.resp[it]))}
            self.anon.cache = [e for e in self.anon.cache if not (e.copy and e.respondent in delayed)]
        for it in items:
            if it >= 0:
                self.placed.discard(it)
                if self.filler == "cache" and not self.has_history.get(int(self.resp[it])):
                    self.anon.cache.append(CacheEntry(int(self.resp[it]), int(self.value[it]), False))
            elif it < -self.n_values:
                row = -1 - self.n_values - it
                if int(self.resp[row]) in delayed:
                    continue
                self.anon.cache.append(CacheEntry(int(self.resp[row]), int(self.value[row]), True))

    # ---------------------------------------------------------------- phases
    def balance(self, sig: int, rows: list[int]) -> list[tuple[int, list[int]]]:
        """Division and balancing of one kept signature (Algorithm 5): every value topped up to
        the largest count from the new tuples, then the filler; with Cach, as many full copies of
        the signature as can be filled, the other tuples delayed."""
        values = members(sig)
        by_value = {v: [i for i in rows if self.value[i] == v] for v in values}
        target = max(len(x) for x in by_value.values())
        full = target
        if self.filler == "cache":
            for v in values:
                have = len(by_value[v]) + len(self._pool(v)) + self.cache_available(v, sig)
                full = min(full, have)
        anchor = self.pts[rows].mean(axis=0)
        self.placed.update(rows)
        extra: list[int] = []
        for v in values:
            if len(by_value[v]) > full:
                extra.extend(by_value[v][full:])
                by_value[v] = by_value[v][:full]
            need = full - len(by_value[v])
            if need > 0:
                got = self._take_new(v, need, anchor)
                missing = need - len(got)
                if missing:
                    got += [-1 - v] * missing if self.filler == "counterfeit" else self._cache_items(v, missing, anchor, sig)
                by_value[v] = by_value[v] + got
        for i in extra:
            self.placed.discard(i)
        items = [it for v in values for it in by_value[v]]
        if full == 0 or not any(it >= 0 for it in items):
            self._release_items(items)
            return []
        return [(sig, items)]

    def constrained(self, i: int, forbidden: int) -> tuple[int, list[int]] | None:
        """A new signature for an updated / re-inserted tuple: its value and m - 1 others, none in
        ``forbidden``; partners nearest first from the new tuples (one per value), then the filler
        (the most frequent allowed values of the table first)."""
        v = int(self.value[i])
        anchor = self.pts[i]
        chosen: dict[int, list[int]] = {v: [i]}
        pools = [self._pool(w) for w in self.pool_rows if w != v and not (forbidden >> w) & 1]
        cands = np.concatenate(pools) if pools else np.zeros(0, dtype=np.int64)
        if len(cands):
            d = ((self.pts[cands] - anchor[None, :]) ** 2).sum(axis=1)
            for j in np.argsort(d, kind="stable"):
                w = int(self.value[cands[j]])
                if w not in chosen:
                    chosen[w] = [int(cands[j])]
                    if len(chosen) == self.m:
                        break
        if len(chosen) < self.m:
            for w in self._values_by_frequency():
                if len(chosen) == self.m:
                    break
                if (forbidden >> w) & 1 or w in chosen:
                    continue
                if self.filler == "counterfeit":
                    chosen[w] = [-1 - w]
                elif self.cache_available(w, None):
                    chosen[w] = [None]  # from Cach, taken below once the signature is complete
        if len(chosen) < self.m:
            return None  # the tuple is not published now (delayed / suppressed)
        sig = mask(chosen)
        items = [i]
        for w, x in chosen.items():
            if w == v:
                continue
            if x[0] is None:
                items += self._cache_items(w, 1, anchor, sig)
            else:
                items.append(x[0])
                if x[0] >= 0:
                    self.free[x[0]] = False
        self.placed.update(it for it in items if it >= 0)
        return sig, items

    def _values_by_frequency(self) -> list[int]:
        """The values, most frequent in the release first (ties: lower code)."""
        if self._by_frequency is None:
            counts = np.bincount(self.value, minlength=self.n_values)
            self._by_frequency = [int(w) for w in np.argsort(-counts, kind="stable")]
        return self._by_frequency

    def assignment(self) -> list[tuple[int, list[int]]]:
        """Algorithm 6 on the remaining new tuples, made m-eligible by the filler first."""
        rows = np.flatnonzero(self.free)
        items = rows[np.argsort(self.resp[rows], kind="stable")].tolist()  # ties: lowest respondent id first
        self.free[:] = False
        if not items:
            return []
        counts = np.bincount(self.value[items], minlength=self.n_values)
        if not m_eligible(counts, self.m):
            anchor = self.pts[items].mean(axis=0)
            add = counterfeits_for_eligibility(counts, self.m)
            for v in np.flatnonzero(add):
                v = int(v)
                if self.filler == "counterfeit":
                    items += [-1 - v] * int(add[v])
                else:
                    items += self._cache_items(v, int(add[v]), anchor, None, self.reserve)
        trimmed: list[int] = []
        counts = np.bincount([self.value_of[it] for it in items], minlength=self.n_values)
        if not m_eligible(counts, self.m):  # the filler ran short: keep what can be m-eligible
            cap = eligible_cap(counts, self.m)
            kept, seen = [], np.zeros(self.n_values, dtype=np.int64)
            for it in items:  # each value's first ``cap`` items (lowest respondent ids first)
                v = self.value_of[it]
                if seen[v] < cap:
                    kept.append(it)
                    seen[v] += 1
                else:
                    trimmed.append(it)
            items = kept
        self.placed.update(i for i in items if i >= 0)
        buckets, left = assign(items, self.value_of, self.points_of, self.m)
        self._release_items(left + trimmed)
        return buckets


class _ValueOf:
    """``value_of[item]``: the sensitive value of a row, counterfeit or duplicate."""

    def __init__(self, value: np.ndarray, n_values: int):
        self.value, self.n_values = value, n_values

    def __getitem__(self, it: int) -> int:
        if it >= 0:
            return int(self.value[it])
        if it >= -self.n_values:
            return -1 - it
        return int(self.value[-1 - self.n_values - it])


class _PointsOf:
    """``points_of(items)``: ``[k, d]`` QI points of items (NaN for a counterfeit)."""

    def __init__(self, pts: np.ndarray, n_values: int):
        self.pts, self.n_values = pts, n_values

    def __call__(self, items) -> np.ndarray:
        arr = np.asarray(list(items), dtype=np.int64)
        rows = np.where(arr >= 0, arr, np.where(arr < -self.n_values, -1 - self.n_values - arr, -1))
        out = self.pts[np.maximum(rows, 0)].copy()
        out[rows < 0] = np.nan
        return out
