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
from itertools import chain

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
    split_buckets,
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

        fixed: dict[int, list[int]] = {}  # signature -> rows keeping / reusing it (table order)
        constrained: list[tuple[int, int]] = []  # (row, forbidden signature)
        resp_list = resp.tolist()
        lasts = list(map(sigs.last.get, resp_list))
        held = np.isin(resp, np.fromiter(delayed_now, dtype=np.int64)) if delayed_now else np.zeros(n, dtype=bool)
        has = np.not_equal(np.fromiter(lasts, dtype=object, count=n), None) & ~held
        seen = np.flatnonzero(has)  # published before (and not held in Cach now)
        seen_last = [lasts[i] for i in seen.tolist()]
        if n_values <= 62:  # (t, signature, value) of each as int64
            flat = np.fromiter(chain.from_iterable(seen_last), dtype=np.int64, count=3 * len(seen)).reshape(-1, 3)
            t_last, sig_last, v_last = flat[:, 0], flat[:, 1], flat[:, 2]
        else:  # signatures beyond 62 bits stay Python ints
            t_last = np.asarray([x[0] for x in seen_last], dtype=np.int64)
            sig_last = np.fromiter((x[1] for x in seen_last), dtype=object, count=len(seen))
            v_last = np.asarray([x[2] for x in seen_last], dtype=np.int64)
        v_seen = value[seen]
        keeps = (t_last == t - 1) & (v_last == v_seen) & ((sig_last >> v_seen) & 1).astype(bool)  # T_s
        prev_sig = np.zeros(n, dtype=sig_last.dtype)  # the signature of the last publication (0: none)
        prev_sig[seen] = sig_last
        new_mask = ~has & ~held  # never published
        if pol.scope == "lifespan":
            new_mask[seen[~keeps]] = True  # a new lifespan
        else:
            for i in seen[~keeps].tolist():
                r, v = resp_list[i], int(value[i])
                t_l, sig, _ = lasts[i]
                if pol.scope == "previous":
                    ref = sigs.deleted.pop(r, None) if t_l < t - 1 else None
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
        kept_rows, kept_sig = seen[keeps], sig_last[keeps]
        by_sig = np.argsort(kept_sig, kind="stable")
        kept_rows, kept_sig = kept_rows[by_sig], kept_sig[by_sig]
        cut = np.flatnonzero(kept_sig[1:] != kept_sig[:-1]) + 1
        fixed_rows: dict[int, np.ndarray] = {}
        for rows in np.split(kept_rows, cut) if len(kept_rows) else []:
            fixed_rows[int(prev_sig[rows[0]])] = rows
        for sig, rows in fixed.items():
            both = np.asarray(rows, dtype=np.int64)
            fixed_rows[sig] = np.sort(both if sig not in fixed_rows else np.concatenate([fixed_rows[sig], both]))
        new = np.flatnonzero(new_mask).tolist()

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
        for sig in sorted(fixed_rows, key=lambda s: int(resp[fixed_rows[s]].min())):
            buckets.extend(state.balance(sig, fixed_rows[sig]))
        constrained.sort(key=lambda c: int(resp[c[0]]))
        state.ask_constrained([i for i, _ in constrained])
        for i, forbidden in constrained:
            b = state.constrained(i, forbidden)
            if b is not None:
                buckets.append(b)
        buckets.extend(state.assignment())

        items, bounds = split_all(buckets, state.value_of, state.points_of)
        real = items >= 0
        keep = np.logical_or.reduceat(real, bounds[:-1]) if len(items) else np.zeros(0, dtype=bool)
        if not keep.all():  # final buckets without a real row (counterfeits, duplicates only) are dropped
            inside = np.repeat(keep, np.diff(bounds))
            items, real = items[inside], real[inside]
            bounds = np.r_[0, np.cumsum(np.diff(bounds)[keep])]
        values = state.value_of.of(items)
        rows = items[real]
        sigs.record_many(t, resp[rows], signatures_of(values, bounds)[real], values[real], prev_sig[rows])
        used = state.used_cache
        self.cache = [e for e in self.cache if id(e) not in used]
        self.present = set(row_of)
        n_fake = int(((items < 0) & (items >= -n_values)).sum())
        n_dup = int((items < -n_values).sum())
        info = {
            "anonymizer": type(self).__name__,
            "counterfeits": n_fake,
            "duplicated": n_dup,
            "delayed": n - int(real.sum()),
            "cache_size": len(self.cache),
        }
        rng = ctx.rng if self.params.shuffle else None
        return publication(release, items, bounds, info, rng)


class _Release:
    """One release's working state: per value the new tuples not yet placed (table order) and the
    Cach entries used."""

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
        # the rank of each value's pool in the order of ``pool_rows`` (ties between values' candidates)
        self.pool_rank = np.full(self.n_values, len(self.pool_rows), dtype=np.int64)
        self.pool_rank[list(self.pool_rows)] = np.arange(len(self.pool_rows))
        self.free_count = np.zeros(len(self.pool_rank), dtype=np.int64)  # per value its free rows
        for v, rows in self.pool_rows.items():
            self.free_count[v] = len(rows)
        self._near: _NearestFree | None = None
        self.cache_by_value: dict[int, list[CacheEntry]] = {}
        for e in anon.cache:
            self.cache_by_value.setdefault(e.value, []).append(e)
        self.used_cache: set[int] = set()
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
        self.free_count[v] -= len(taken)
        taken = taken.tolist()
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
        rows_value = self.value[rows]
        by_value = {v: rows[rows_value == v].tolist() for v in values}
        target = max(len(x) for x in by_value.values())
        full = target
        if self.filler == "cache":
            for v in values:
                have = len(by_value[v]) + int(self.free_count[v]) + self.cache_available(v, sig)
                full = min(full, have)
        anchor = self.pts[rows].mean(axis=0)
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
        allowed = np.zeros(len(self.pool_rank), dtype=bool)
        for w in self.pool_rows:
            allowed[w] = w != v and not (forbidden >> w) & 1
        for row in self._partners(i, anchor, allowed):
            chosen[int(self.value[row])] = [row]
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
                    self.free_count[w] -= 1
                    if self._near is not None:
                        self._near.took(x[0])
        return sig, items

    def ask_constrained(self, rows: list[int]) -> None:
        """The constrained tuples ``rows`` are next: their nearest new rows asked in one query."""
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[np.isfinite(self.pts[rows]).all(axis=1)].tolist()  # a point without QI: scanned
        if rows and len(self.pool_rows):
            self._near = _NearestFree(self.pts, self.free, self.value, self.pool_rows, self.pool_rank)
            self._near.ask(rows)

    def _partners(self, i: int, anchor: np.ndarray, allowed: np.ndarray) -> list[int]:
        """The new rows nearest ``anchor``, one per ``allowed`` value, up to m - 1 of them: the
        first row of each value met when every free new row of an allowed value is taken in the
        order (squared distance, rank of its value's pool, row), i.e. a stable argsort of the
        distances over the pools concatenated in the order of ``pool_rows``."""
        want = min(self.m - 1, int((allowed & (self.free_count > 0)).sum()))
        if want <= 0:
            return []
        if not np.isfinite(anchor).all():  # no distance order to search by: the literal scan
            cands = np.flatnonzero(self.free & allowed[self.value])  # the pools in table order ...
            cands = cands[np.argsort(self.pool_rank[self.value[cands]], kind="stable")]  # ... concatenated
            d = ((self.pts[cands] - anchor[None, :]) ** 2).sum(axis=1)
            out: dict[int, int] = {}
            for j in np.argsort(d, kind="stable").tolist():
                out.setdefault(int(self.value[cands[j]]), int(cands[j]))
                if len(out) == want:
                    break
            return list(out.values())
        if self._near is None:
            self._near = _NearestFree(self.pts, self.free, self.value, self.pool_rows, self.pool_rank)
        return self._near.partners(i, anchor, allowed, want)

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
        self.free_count[:] = 0
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
        buckets, left = assign(items, self.value_of, self.points_of, self.m)
        self._release_items(left + trimmed)
        return buckets


class _FreeTree:
    """The free rows among ``rows`` nearest a point, exactly: a k-d tree over the rows free when
    it was built (rebuilt once half of them were taken) gives the k nearest; only the rows
    strictly nearer than the k-th (less a relative 1e-9 for rounding) are *trusted* (every free
    row that near is among them, so a tie at the edge is never cut), their squared distances
    computed as the literal form computes them. Without finite QI points, below ``MIN_ROWS`` rows,
    or when k reaches the tree's size, every free row is trusted (a scan)."""

    MIN_ROWS = 4096  # fewer rows are scanned: no tree (nor the scipy import) for small releases

    def __init__(self, pts: np.ndarray, free: np.ndarray, rows: np.ndarray):
        self.pts, self.free = pts, free
        self.rows = rows[free[rows]]
        self.taken = 0
        self.tree = None
        if len(self.rows) >= self.MIN_ROWS and np.isfinite(pts[self.rows]).all():
            from scipy.spatial import cKDTree

            self.tree = cKDTree(pts[self.rows])

    def stale(self) -> bool:
        return self.taken * 2 > len(self.rows)

    def query(self, anchors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """For each of ``[q, d]`` anchors its k nearest rows ``[q, k]`` (ascending) and the bound
        under which they are trusted ``[q]`` (:meth:`nearest` of them stays exact while rows are
        taken); ``None`` when there is no tree or k is not below its size."""
        if self.tree is None or k >= len(self.rows):
            return None
        dist, idx = self.tree.query(anchors, k=[k] if k == 1 else k)
        idx, dist = idx.reshape(len(anchors), k), dist.reshape(len(anchors), k)
        return np.sort(self.rows[idx], axis=1), dist[:, -1] ** 2 * (1 - 1e-9)

    def nearest(self, anchor: np.ndarray, k: int, asked: tuple[np.ndarray, float] | None = None
                ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Trusted free rows among the k nearest (table order), their squared distances, and
        whether they are all the free rows; ``asked``: the rows and bound :meth:`query` gave."""
        if asked is not None:
            cand, thr = asked
        elif self.tree is None or k >= len(self.rows):
            cand, thr = self.rows, np.inf
        else:
            dist, idx = self.tree.query(anchor, k=[k] if k == 1 else k)
            cand, thr = np.sort(self.rows[idx]), float(dist[-1]) ** 2 * (1 - 1e-9)
        cand = cand[self.free[cand]]
        d = ((self.pts[cand] - anchor[None, :]) ** 2).sum(axis=1)
        if thr == np.inf:
            return cand, d, True
        near = d < thr
        return cand[near], d[near], False


class _NearestFree:
    """Partners of a constrained tuple (:meth:`_Release.constrained`) without scanning every new
    row: the literal form sorts all free new rows of the allowed values by (squared distance,
    rank of the row's pool, row) and takes the first row of each value. A k-d tree over all free
    new rows gives a trusted prefix of that order (:class:`_FreeTree`): the values met there come
    first, in that order; a value not met there is farther than all of them, and its nearest row
    comes from a tree over its own free rows. Trees are built at the first constrained tuple (the
    balancing is over then) and rebuilt when half their rows were taken."""

    FIRST_K = 128  # rows asked of the tree over all values first
    VALUE_K = 4  # rows asked first of a value's own tree

    def __init__(self, pts: np.ndarray, free: np.ndarray, value: np.ndarray, pool_rows: dict[int, np.ndarray],
                 pool_rank: np.ndarray):
        self.pts, self.free, self.value, self.pool_rows, self.pool_rank = pts, free, value, pool_rows, pool_rank
        self.all = _FreeTree(pts, free, np.flatnonzero(free))
        self.by_value: dict[int, _FreeTree] = {}
        self.asked: dict[int, tuple[np.ndarray, float]] = {}  # row -> its k nearest asked in advance

    def ask(self, rows: list[int]) -> None:
        """Ask the tree over all values for the constrained ``rows``' nearest in one query."""
        found = self.all.query(self.pts[np.asarray(rows, dtype=np.int64)], self.FIRST_K)
        if found is not None:
            self.asked = {i: (cand, thr) for i, cand, thr in zip(rows, found[0], found[1].tolist())}

    def took(self, row: int) -> None:
        """``row`` was taken (no longer free)."""
        self.all.taken += 1
        w = int(self.value[row])
        if w in self.by_value:
            self.by_value[w].taken += 1

    def partners(self, row: int, anchor: np.ndarray, allowed: np.ndarray, want: int) -> list[int]:
        asked = self.asked.pop(row, None)
        if asked is None and self.all.stale():
            self.all = _FreeTree(self.pts, self.free, self.all.rows)
        cand, d, complete = self.all.nearest(anchor, self.FIRST_K, asked)
        cand_value = self.value[cand]
        ok = allowed[cand_value]
        cand, d, cand_value = cand[ok], d[ok], cand_value[ok]
        order = np.lexsort((cand, self.pool_rank[cand_value], d))
        out: list[int] = []
        seen: set[int] = set()
        for row, w in zip(cand[order].tolist(), cand_value[order].tolist()):
            if w not in seen:
                seen.add(w)
                out.append(row)
                if len(out) == want:
                    return out
        if complete:
            return out
        # the values not met: each one's nearest free row, then the nearest values first
        rest = []
        for w in np.flatnonzero(allowed).tolist():
            if w not in seen:
                found = self._nearest_of(w, anchor)
                if found is not None:
                    rest.append((found[1], int(self.pool_rank[w]), found[0]))
        rest.sort()
        return out + [row for _, _, row in rest[: want - len(out)]]

    def _nearest_of(self, w: int, anchor: np.ndarray) -> tuple[int, float] | None:
        """The free row of value ``w`` nearest ``anchor`` (ties: the lowest row) and its squared
        distance; ``None`` when it has none."""
        tree = self.by_value.get(w)
        if tree is None or tree.stale():
            tree = self.by_value[w] = _FreeTree(self.pts, self.free, self.pool_rows[w] if tree is None else tree.rows)
        k = self.VALUE_K
        while True:
            cand, d, complete = tree.nearest(anchor, k)
            if len(cand):
                j = int(np.argmin(d))  # the first of the minima: the lowest row (cand in table order)
                return int(cand[j]), float(d[j])
            if complete:
                return None
            k *= 4


def split_all(buckets: list[tuple[int, list[int]]], value_of: "_ValueOf", points_of: "_PointsOf"
              ) -> tuple[np.ndarray, np.ndarray]:
    """Every bucket split (Algorithm 7, :func:`~cdpbench_invariance.phases.split_buckets`): the
    items of the final buckets, bucket after bucket in the order of ``buckets`` and of the split's
    recursion, and the bounds of each (final bucket ``g`` is ``items[bounds[g]:bounds[g + 1]]``)."""
    flat = np.fromiter((it for _, b in buckets for it in b), dtype=np.int64)
    bounds = np.r_[0, np.cumsum([len(b) for _, b in buckets], dtype=np.int64)].astype(np.int64)
    order, starts = split_buckets(bounds, value_of.of(flat), points_of(flat))
    return flat[order], np.r_[starts, len(flat)].astype(np.int64)


def signatures_of(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``[k]`` each item's bucket signature (the mask of its bucket's ``values``; buckets
    ``bounds[g]:bounds[g + 1]``, none empty): int64 while the codes fit, else Python ints."""
    sizes = np.diff(bounds)
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    if int(values.max()) < 63:
        return np.repeat(np.bitwise_or.reduceat(np.left_shift(np.int64(1), values), bounds[:-1]), sizes)
    sig = np.array([mask(part) for part in np.split(values, bounds[1:-1])] + [None], dtype=object)[:-1]
    return np.repeat(sig, sizes)


class _ValueOf:
    """``value_of[item]``: the sensitive value of a row, counterfeit or duplicate."""

    def __init__(self, value: np.ndarray, n_values: int):
        self.value, self.n_values = value, n_values

    def of(self, items: np.ndarray) -> np.ndarray:
        """``[k]`` the values of an array of items."""
        items = np.asarray(items, dtype=np.int64)
        row = np.where(items >= 0, items, -1 - self.n_values - items)  # a duplicate's row
        fake = (items < 0) & (items >= -self.n_values)
        return np.where(fake, -1 - items, self.value[np.where(fake, 0, row)])

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
        arr = np.asarray(items if isinstance(items, np.ndarray) else list(items), dtype=np.int64)
        rows = np.where(arr >= 0, arr, np.where(arr < -self.n_values, -1 - self.n_values - arr, -1))
        out = self.pts[np.maximum(rows, 0)].copy()
        out[rows < 0] = np.nan
        return out
