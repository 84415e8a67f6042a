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

Every group of a batch is judged in one vectorized pass (``np.bincount`` by group).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import ConfigError, DataError, require
from cdpbench.plugin import ModelContext, PrivacyModel

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


# ---------------------------------------------------------------------------- divergence
def normalized_beliefs(beliefs: np.ndarray) -> np.ndarray:
    """Rows of ``beliefs`` scaled to sum 1; an all-zero row becomes uniform."""
    b = np.asarray(beliefs, dtype=float)
    total = b.sum(axis=1, keepdims=True)
    if (total > 0).all():
        return b / total
    m = b.shape[1]
    return np.where(total > 0, b / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))


def entropy(p: np.ndarray, base: float = 2.0) -> np.ndarray:
    """Shannon entropy in base ``base`` of each row of ``p`` (rows sum to 1; ``0 log 0 = 0``)."""
    p = np.asarray(p, dtype=float)
    if base == 2.0:
        log = np.log2(p, out=np.zeros_like(p), where=p > 0)
        return -np.einsum("ij,ij->i", p, log)
    log = np.log(p, out=np.zeros_like(p), where=p > 0)
    return -np.einsum("ij,ij->i", p, log) / math.log(base)


def js_divergence(prior: np.ndarray, segment: np.ndarray, n_groups: int, base: float = 2.0) -> np.ndarray:
    """``[n_groups]`` Jensen–Shannon divergence (Eq. 6, equal weights, logarithms in ``base``) of
    the belief rows of each group: row ``i`` of ``prior`` (scaled to sum 1) belongs to group
    ``segment[i]``. An empty group, and a group of one respondent, has divergence 0."""
    segment = np.asarray(segment, dtype=np.int64)
    p = normalized_beliefs(prior)
    m = p.shape[1]
    G = int(n_groups)
    per = np.maximum(np.bincount(segment, minlength=G), 1).astype(float)
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    mean = np.bincount(flat, weights=p.ravel(), minlength=G * m).reshape(G, m) / per[:, None]
    mean_entropy = np.bincount(segment, weights=entropy(p, base), minlength=G) / per
    return np.maximum(entropy(mean, base) - mean_entropy, 0.0)


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
        if prior is None:
            raise ConfigError(
                "privacy_model j_similarity needs the defender's (revised) prior beliefs about every record "
                "(GroupBatch.prior); set knowledge=<name>"
            )
        prior = np.asarray(prior, dtype=float)
        if prior.shape != (n, n_values):
            raise DataError(f"prior must have shape ({n}, {n_values}) (records x sensitive values); got {prior.shape}")
        if (prior < 0).any() or not np.isfinite(prior).all():
            raise DataError("prior beliefs must be finite and non-negative")
        return prior

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
