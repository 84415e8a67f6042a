"""J-similarity, BayFrame's privacy model (Amiri, Yazdani, Shakery, Ho, TDP 2019, §5, Def. 7).

A QI-group Q satisfies J-similarity when

(a) **k-anonymity**: |Q| >= k;
(b) **similar beliefs**: the Jensen–Shannon divergence (Eq. 6) of the defender's revised prior
    beliefs RPD_sv about Q's respondents (``GroupBatch.prior``; PD_sv at the first release) is at
    most J, with equal weights w_i = 1/|Q| (§5: "we assume the same value for all w_i"):

        JSD(rho_1..rho_u) = H(sum_i w_i rho_i) - sum_i w_i H(rho_i),   H the Shannon entropy;

(c) **basic β-likeness** against the sensitive distribution P of the whole release
    (``ctx.table_distribution``): with q the group's sensitive frequencies, every value s with
    q_s > p_s has relative gain (q_s - p_s) / p_s <= β. A value with p_s = 0 < q_s (a record
    foreign to the table) has an infinite gain. Since q_s <= 1, a value with p_s >= 1/(1+β) can
    never violate (e.g. p_s >= 1/6 for the default β = 5).

Readings (bayframe.md §1.7 item 7, §1.7 item 2):

* Entropies are taken in base ``log_base`` (default 2: bits). The JSD of *two* distributions lies
  in [0, log_b 2] (= [0, 1] in bits), so ``j`` is accepted in [0, log_b 2], i.e. the bit range
  [0, 1] rescaled to base b (``j`` in bits times log_b 2; about [0, 0.693] in nats). For a group of
  u > 2 respondents the divergence can exceed that bound: its maximum is log_b(min(u, m)) (three
  disjoint point masses: log2 3 bits), so the largest ``j`` does not switch condition (b) off.
* Each belief row is scaled to sum 1 before the divergence is computed (a revised prior from
  Eq. 3 need not sum to 1 over D[S]); a row with no mass at all counts as the uniform
  distribution. ``0 · log 0 = 0``.
* Comparisons with J and β allow a slack of 1e-12 for float rounding.

Every group of a batch is judged in one vectorized pass (``np.bincount`` by group). For greedy
anonymizers the model also offers running per-group statistics (:meth:`JSimilarity.extension`,
:class:`JSimilarityExtension`) that judge "each group plus one record" and "every prefix of a
sequence of records" with the very floats :meth:`JSimilarity.accepts` computes.

The beliefs toolkit (normalized beliefs, entropy, the divergence, its running sums and the check
of the prior) is the core's :mod:`cdpbench.beliefs`, shared with JS-reduce's model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.beliefs import BeliefSums, checked_prior, entropy, js_divergence
from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import DataError, require
from cdpbench.plugin import GroupExtension, ModelContext, PrivacyModel, VerifyReport

_TOL = 1e-12  # slack for float comparisons of a divergence with J and of a gain with β


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class JSimilarityParams:
    k: int = field(default=3, metadata={"help": "minimum number of records per QI-group (>= 1)"})
    j: float = field(
        default=0.6,
        metadata={"help": "maximum Jensen-Shannon divergence (equal weights) of the revised priors of a group's respondents, in [0, log_base(2)] (= [0, 1] in bits)"},
    )
    beta: float = field(default=5.0, metadata={"help": "basic beta-likeness: maximum relative gain (q_s - p_s)/p_s of a sensitive value in a group (> 0)"})
    log_base: float = field(default=2.0, metadata={"help": "base of the logarithm of the entropies (> 1; 2 = bits)"})

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(_is_number(self.log_base) and self.log_base > 1, "log_base", "a number > 1", self.log_base)
        top = math.log(2.0) / math.log(self.log_base)  # log_b 2: 1 bit in base b
        require(
            _is_number(self.j) and 0.0 <= self.j <= top + _TOL,
            "j",
            f"a number in [0, log_{self.log_base:g}(2) = {top:.6g}]",
            self.j,
        )
        require(_is_number(self.beta) and self.beta > 0, "beta", "a number > 0", self.beta)


# ---------------------------------------------------------------------------- beta-likeness
def likeness_gain(counts: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``[G]`` the largest relative gain ``(q_s - p_s) / p_s`` over the values with ``q_s > p_s``
    of each group (``counts``: ``[G, m]`` sensitive counts, ``table``: the release's ``[m]``
    distribution P); 0 when no value gains, ``inf`` for a value with ``p_s = 0 < q_s``."""
    counts = np.asarray(counts, dtype=float)
    table = np.asarray(table, dtype=float)
    q = counts / np.maximum(counts.sum(axis=1), 1.0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(q > table, (q - table) / table, 0.0)  # p_s = 0 < q_s gives +inf
    return gain.max(axis=1, initial=0.0)


# ---------------------------------------------------------------------------- the model
class JSimilarity(PrivacyModel):
    """J-similarity (BayFrame, TDP 2019, Def. 7): |Q| >= k, JSD of the revised priors <= J, basic beta-likeness."""

    Params = JSimilarityParams
    needs_prior = True

    def _prior(self, prior: np.ndarray | None, n: int, n_values: int) -> np.ndarray:
        return checked_prior(prior, n, n_values, model="j_similarity", beliefs="(revised) prior beliefs")

    @staticmethod
    def _table(ctx: ModelContext, n_values: int) -> np.ndarray:
        table = np.asarray(ctx.table_distribution, dtype=float)
        if table.shape != (n_values,):
            raise DataError(f"table_distribution has shape {table.shape}; the sensitive domain has {n_values} values")
        return table

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        p = self.params
        prior = self._prior(batch.prior, len(batch.segment), batch.n_values)
        ok = batch.sizes() >= p.k  # (a)
        ok &= js_divergence(prior, batch.segment, batch.n_groups, p.log_base) <= p.j + _TOL  # (b)
        ok &= likeness_gain(batch.counts(), self._table(ctx, batch.n_values)) <= p.beta + _TOL  # (c)
        return ok

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        """:meth:`PrivacyModel.verify` (``accepts`` on the publication's groups, then ``levels``) with the
        prior rows and the divergences computed once for both (the publication's batch holds the very
        rows and groups ``levels`` reads: ``prior_for(publication)``, ``publication.group``)."""
        if (publication.n_groups == 0 or type(self).accepts is not JSimilarity.accepts
                or type(self).levels is not JSimilarity.levels):
            return super().verify(publication, ctx)
        p = self.params
        batch = publication.batch(ctx.prior_for(publication))
        prior = self._prior(batch.prior, len(batch.segment), batch.n_values)
        jsd = js_divergence(prior, batch.segment, batch.n_groups, p.log_base)
        table = self._table(ctx, batch.n_values)
        ok = batch.sizes() >= p.k  # (a)
        ok &= jsd <= p.j + _TOL  # (b)
        ok &= likeness_gain(batch.counts(), table) <= p.beta + _TOL  # (c)
        bad = int((~ok).sum())
        gain = likeness_gain(publication.group_counts(), table)
        levels = {"k": float(publication.group_sizes().min()), "jsd": float(jsd.max()), "beta": float(gain.max())}
        return VerifyReport(bad == 0, bad, levels)

    def extension(
        self, release: Release, ctx: ModelContext, rows: np.ndarray, segment: np.ndarray, n_groups: int
    ) -> GroupExtension | None:
        """Running statistics of the groups Q given as :meth:`accepts` takes them (record ``rows[i]``
        in group ``segment[i]``): |Q|, the sensitive counts, the sum of the normalized belief rows
        rho_i and of their entropies H(rho_i), so that conditions (a)–(c) of Def. 7 for "every
        group plus one record" are judged in one ``[G, m]`` step, bit for bit as :meth:`accepts`
        (see :class:`JSimilarityExtension`). ``None`` for a subclass that judges otherwise."""
        if type(self).accepts is not JSimilarity.accepts:
            return None  # a subclass judging otherwise: let the caller ask accepts
        m = release.n_values
        prior = self._prior(ctx.prior, len(release), m)  # the checks accepts makes (on every record)
        return JSimilarityExtension(self.params, prior, self._table(ctx, m), release.sensitive, rows, segment, n_groups)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        """Achieved levels: ``k`` = smallest group, ``jsd`` = largest divergence of a group,
        ``beta`` = largest relative gain of a value in a group (all 0 without groups)."""
        if publication.n_groups == 0:
            return {"k": 0.0, "jsd": 0.0, "beta": 0.0}
        m = publication.schema.sensitive.size
        prior = self._prior(ctx.prior_for(publication), len(publication), m)
        jsd = js_divergence(prior, publication.group, publication.n_groups, self.params.log_base)
        gain = likeness_gain(publication.group_counts(), self._table(ctx, m))
        return {"k": float(publication.group_sizes().min()), "jsd": float(jsd.max()), "beta": float(gain.max())}


# ---------------------------------------------------------------------------- running statistics
class JSimilarityExtension(GroupExtension):
    """Running per-group statistics of J-similarity (Def. 7; see :meth:`JSimilarity.extension`).

    Per group Q: the size |Q| (condition (a)), the sum of the normalized belief rows
    ``mass = sum_i rho_i`` and of their entropies ``entropy_sum = sum_i H(rho_i)`` (condition (b):
    JSD = H(mass / |Q|) - entropy_sum / |Q|, Eq. 6 with w_i = 1/|Q|) and the sensitive counts
    (condition (c): q = counts / |Q| against the table distribution P).

    Conditions (a) and (b) read the core's running sums (``sums``, a
    :class:`cdpbench.beliefs.BeliefSums` in base ``log_base``: |Q| + 1, ``mass``,
    ``entropy_sum``), whose divergences are the floats :func:`js_divergence` computes in
    :meth:`JSimilarity.accepts` (BeliefSums' docstring says why); the comparison with J + 1e-12 is the
    same operation on the same numbers.

    β-likeness (c) is decided column by column with the float operations of
    :func:`likeness_gain`: q_s = c_s / |Q| (an exact count over the exact size), gain
    ``(q_s - p_s) / p_s``; Q fails iff some column's gain exceeds β + 1e-12. A column with
    p_s > 0 is *watched* only if it can fail at all: the computed gain is non-decreasing in q_s
    (IEEE rounding is monotone) and q_s <= 1, so a column whose gain at q_s = 1 is within the bound
    never fails (e.g. p_s >= 1/6 for β = 5). A column with p_s = 0 fails as soon as its count is
    positive (infinite gain); a column with p_s < 0 or NaN never does (likeness_gain's
    ``where(q > p, ...)`` gives a gain <= 0 or 0). For "each group plus one record" the verdict of
    every watched column at size |Q| + 1 is kept per group, with and without one more record of
    that value, so :meth:`accepts_plus` judges (c) in O(G) and :meth:`add` refreshes one group.
    """

    def __init__(
        self,
        params: JSimilarityParams,
        prior: np.ndarray,
        table: np.ndarray,
        sensitive: np.ndarray,
        rows: np.ndarray,
        segment: np.ndarray,
        n_groups: int,
    ):
        self.k, self.j, self.base = params.k, params.j, params.log_base
        self.max_gain = params.beta + _TOL  # the bound of likeness_gain's comparison
        self.sensitive = np.asarray(sensitive, dtype=np.int64)  # [n] sensitive code of each record
        rows = np.asarray(rows, dtype=np.int64)
        segment = np.asarray(segment, dtype=np.int64)
        # (b): rho_i, H(rho_i) per record; |Q| + 1, sum_i rho_i, sum_i H(rho_i) per group
        self.sums = BeliefSums(prior, rows, segment, n_groups, self.base)
        m = self.sums.rho.shape[1]
        table = np.asarray(table, dtype=float)
        positive = table > 0
        gain_at_one = np.divide(1.0 - table, table, out=np.zeros(m), where=positive)  # likeness_gain's ops at q_s = 1
        self.watched = np.flatnonzero(positive & (gain_at_one > self.max_gain))  # columns that can fail (c)
        self.watched_p = table[self.watched]
        self.foreign_value = table == 0  # [m] a value whose record fails (c) in any group (infinite gain)
        self.column = np.full(m, -1, dtype=np.int64)  # [m] index of a value among the watched columns, -1
        self.column[self.watched] = np.arange(len(self.watched))

        G = int(n_groups)
        counts = np.bincount(segment * m + self.sensitive[rows], minlength=G * m).reshape(G, m)
        self.size_plus = self.sums.size_plus  # |Q| + 1 of each group, as float (exact; kept by sums)
        self.per_plus = self.size_plus[:, None]  # a [G, 1] view of it
        self.large_plus = self.size_plus >= self.k  # (a) for each group plus one record
        self.foreign = counts[:, self.foreign_value].sum(axis=1) > 0  # [G] holds a value with p_s = 0
        self.watched_counts = np.ascontiguousarray(counts[:, self.watched])  # [G, w]
        # (c) at |Q| + 1 per watched column: fails with the group's count / with one more record of it
        self.fails_plus = self._fails(self.watched_counts, self.per_plus)
        self.fails_plus_one = self._fails(self.watched_counts + 1, self.per_plus)
        # [G] how many conditions of (c) fail at |Q| + 1 without the new record's column: the failing
        # watched columns, plus one for a value with p_s = 0 in the group
        self.n_fails_plus = self.fails_plus.sum(axis=1) + self.foreign
        self._zero_one = np.arange(2, dtype=np.int64)[:, None]  # the group's counts, and one more
        self._sensitive = self.sensitive.tolist()
        self._column = self.column.tolist()
        self._max_jsd = self.j + _TOL

    def _fails(self, counts: np.ndarray, size: np.ndarray | float) -> np.ndarray:
        """bool per watched column: fails (c) with these counts in a group of this size (``size``
        broadcast against ``counts``): ``(q_s - p_s) / p_s > β + 1e-12`` with ``q_s = c_s / |Q|``
        (likeness_gain's operations)."""
        q = counts / size
        return (q - self.watched_p) / self.watched_p > self.max_gain

    def accepts_plus(self, row: int) -> np.ndarray:
        """``[G]`` bool: Def. 7 for each group Q ∪ {row} (all groups at once)."""
        return self._plus(row, slice(None))

    def accepts_plus_among(self, row: int, groups: np.ndarray) -> np.ndarray:
        """``accepts_plus(row)[groups]``, judging only those groups (every quantity is computed
        group by group, so the answers are the same bits)."""
        return self._plus(row, np.asarray(groups, dtype=np.int64))

    def _plus(self, row: int, at) -> np.ndarray:
        s = self._sensitive[row]
        size_plus = self.size_plus[at]
        if self.foreign_value[s]:
            return np.zeros(len(size_plus), dtype=bool)  # (c): an infinite gain in every group
        ok = self.sums.divergence_plus(row, at) <= self._max_jsd  # (b)
        ok &= self.large_plus[at]  # (a)
        c = self._column[s]
        n_fails_plus = self.n_fails_plus[at]
        if c < 0:
            ok &= n_fails_plus == 0  # (c): the other columns at |Q| + 1
        else:
            ok &= n_fails_plus == self.fails_plus[at, c]
            ok &= ~self.fails_plus_one[at, c]
        return ok

    def add(self, g: int, row: int) -> None:
        """Q_g := Q_g ∪ {row} for good."""
        s = self._sensitive[row]
        self.sums.add(g, row)  # |Q| + 1, mass, entropy sum
        size_plus = self.size_plus[g]
        self.large_plus[g] = size_plus >= self.k
        self.foreign[g] |= bool(self.foreign_value[s])
        c = self._column[s]
        if c >= 0:
            self.watched_counts[g, c] += 1
        both = self._fails(self.watched_counts[g] + self._zero_one, size_plus)
        self.fails_plus[g], self.fails_plus_one[g] = both
        self.n_fails_plus[g] = both[0].sum() + self.foreign[g]

    def accepts_prefixes(self, rows: np.ndarray) -> np.ndarray:
        """``[B, L]`` bool: Def. 7 for the group of records ``rows[b, :l + 1]``, every prefix of
        every row of ``rows`` at once, in O(B·L·m).

        The divergences are :meth:`BeliefSums.divergence_prefixes` (running sums along each row of
        ``rows`` restarted at its first record, the very additions of :func:`js_divergence`); the
        counts of (c) are running counts of the watched values."""
        rows = np.asarray(rows, dtype=np.int64)
        B, L = rows.shape
        if B * L == 0:
            return np.zeros((B, L), dtype=bool)
        jsd = self.sums.divergence_prefixes(rows)
        size = np.arange(1, L + 1, dtype=np.int64)  # |Q| of each prefix
        per = size.astype(float)
        ok = (size >= self.k)[None, :] & (jsd <= self.j + _TOL)  # (a), (b)
        values = self.sensitive[rows]  # [B, L]
        ok &= np.cumsum(self.foreign_value[values], axis=1) == 0  # (c): no value with p_s = 0
        if len(self.watched):
            counts = np.cumsum(values[:, :, None] == self.watched[None, None, :], axis=1, dtype=np.int64)
            fails = self._fails(counts, per[None, :, None])  # [B, L, w]
            ok &= ~fails.any(axis=2)  # (c): the watched columns
        return ok
