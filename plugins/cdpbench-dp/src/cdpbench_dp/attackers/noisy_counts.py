"""The Bayesian adversary on noisy counts: a posterior over each respondent's sensitive value.

Setting (one release, each cell on its own). The adversary knows every respondent's exact QI and
membership (the population of the release, ``AttackContext.population``, as every attacker of the
lab does) and so which cell ``g`` of the published grid each respondent falls in and the cell's
size ``n_g``. She sees the cell's noisy counts ``c^_g`` (one per value ``v``) and the noise's
distribution (``view.noise``, Kerckhoffs): ``c^_{g,v} = c_{g,v} + N_v``, the ``N_v`` i.i.d. with pmf
``f`` (for the tree, the convolution of the discrete Laplace pmfs of the nodes of ``t``'s
decomposition, truncated where the tails hold < 1e-12).

Model. The other ``n_g - 1`` respondents of the cell have i.i.d. values with prior ``p``
(parameter ``prior``: ``"table"``, the noisy totals over all cells clipped at 0, plus one
(add-one smoothing, so that no value is ruled out because its noisy total fell to 0), normalized —
what the publication itself says about the value distribution; or ``"uniform"``); respondent
``r``'s own prior is ``p`` as well. Then, with ``c`` the others' counts,

    P(S_r = s | c^_g) ~ p_s sum_{c: |c| = n_g - 1} Mult(c; n_g - 1, p) prod_v f(c^_v - c_v - [v = s])

(``model="exact"``, default). The sum is the coefficient of ``x^(n_g - 1)`` in
``prod_{v != s} A_v(x) B_s(x)`` with ``A_v[k] = p_v^k / k! f(c^_v - k)`` and
``B_s[k] = p_s^k / k! f(c^_s - k - 1)`` (the multinomial's ``(n_g - 1)!`` is common to every ``s``):
prefix and suffix products of the ``A_v`` give every ``s`` with ``3m`` polynomial products of degree
``n_g - 1`` (the last, ``prefix_s B_s``, then one dot product with ``suffix_(s+1)`` at degree
``n_g - 1``), each kept to its band of non-zero coefficients (``A_v`` is non-zero only where the
noise pmf is), so a product costs ``O((m w)^2)`` for noise of half-width ``w`` — not ``O(n_g^2)``,
and a records view (``w = 0``) costs ``O(m)`` products of single coefficients. Numerics: every sequence is tilted by the common ``(n_g - 1)^k`` (the same factor
``(n_g - 1)^(n_g - 1)`` on every term of degree ``n_g - 1``, so the posterior is unchanged; without it
``p^k / k!`` spans more than double range over a cell of a few hundred) and rescaled to its maximum,
log offsets kept apart (checked against a log-space convolution in the tests).

``model="poisson"`` (an approximation, named as such): the others' counts independent Poisson
``(n_g - 1) p_v``, so the values decouple and ``P(S_r = s | c^) ~ p_s f_s(c^_s - 1) / f_s(c^_s)`` with
``f_s(x) = sum_k Pois(k; (n_g - 1) p_s) f(x - k)``. It tends to the exact posterior as the cell
grows (the multinomial's counts become independent) and, with no noise, equals it exactly.

Records (a syntactic defense's single-partition view, ``view.noise`` None): the group's exact
value counts with zero noise and the group's listed candidates as its respondents. Then the
exact posterior is ``p_s Mult(c - e_s; n - 1, p) ~ c_s`` — the frequency posterior ``c_s / n`` for
any prior with full support (the test checks this algebra).

Every respondent of a cell gets the cell's posterior (the posterior depends on the cell only). If
the noisy counts are impossible under the model (every term 0: a count off the truncated noise
support), the cell's posterior is the prior ``p``.

Output: a posterior row per respondent placed in a cell (``AttackResult.respondent``: population
respondents for a counted view, the listed candidates for a records view), which the core's belief
metrics match to the published records by respondent id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln, logsumexp

from cdpbench.errors import CdpbenchError, require
from cdpbench.plugin import AttackContext, Attacker, AttackResult
from cdpbench.data import PublicView

from ..grid import cells_of_points, grid_of_view
from ..noise import NoiseDescription

PRIORS = ("table", "uniform")
MODELS = ("exact", "poisson")
NO_NOISE = NoiseDescription("none")


@dataclass
class NoisyCountsParams:
    prior: str = field(default="table", metadata={"help": "the others' value distribution p: 'table' (noisy totals "
                                                           "over all cells, clipped at 0, normalized) or 'uniform'"})
    model: str = field(default="exact", metadata={"help": "'exact' (multinomial convolution) or 'poisson' "
                                                           "(independent Poisson counts: an approximation)"})

    def __post_init__(self) -> None:
        require(self.prior in PRIORS, "prior", "one of 'table', 'uniform'", self.prior)
        require(self.model in MODELS, "model", "one of 'exact', 'poisson'", self.model)


def value_prior(counts: np.ndarray, prior: str) -> np.ndarray:
    """``p`` [m]: the noisy totals over all cells clipped at 0, plus one (add-one smoothing: a
    value whose noisy total fell to 0 or below keeps a positive prior instead of being ruled out
    for everybody), normalized (``"table"``); or uniform."""
    m = counts.shape[1]
    if prior == "table":
        totals = np.clip(counts.sum(axis=0), 0.0, None) + 1.0
        return totals / totals.sum()
    return np.full(m, 1.0 / m)


def _log_k_terms(n_others: int, log_p: float) -> np.ndarray:
    """``k log p - log k!`` for ``k = 0..n_others`` (``k log 0`` = -inf for k > 0, 0 for k = 0)."""
    k = np.arange(n_others + 1)
    with np.errstate(invalid="ignore"):
        kp = np.where(k == 0, 0.0, k * log_p)
    return kp - gammaln(k + 1)


class _Scaled:
    """A polynomial ``sum_i exp(offset) coef[i] x^(start + i)`` with ``max(coef) = 1``; empty (no
    coefficient, offset -inf) when zero. Only the band of non-zero coefficients is kept: a value's
    sequence is non-zero only where the noise pmf is (``|c^_v - k| <= w``), so the products cost
    ``O((m w)^2)`` whatever the cell's size, not ``O(n^2)``."""

    __slots__ = ("coef", "offset", "start")

    def __init__(self, log_coef: np.ndarray, start: int = 0):
        finite = np.flatnonzero(np.isfinite(log_coef))
        if len(finite) == 0:
            self.coef, self.offset, self.start = np.zeros(0), -np.inf, 0
            return
        band = log_coef[finite[0] : finite[-1] + 1]
        top = float(band.max())
        self.coef, self.offset, self.start = np.exp(band - top), top, start + int(finite[0])

    @classmethod
    def one(cls) -> "_Scaled":
        return cls(np.zeros(1))

    @classmethod
    def _of(cls, coef: np.ndarray, offset: float, start: int) -> "_Scaled":
        out = cls.__new__(cls)
        nonzero = np.flatnonzero(coef > 0)
        if len(nonzero) == 0 or not np.isfinite(offset):
            out.coef, out.offset, out.start = np.zeros(0), -np.inf, 0
            return out
        band = coef[nonzero[0] : nonzero[-1] + 1]
        top = float(band.max())
        out.coef, out.offset, out.start = band / top, offset + math.log(top), start + int(nonzero[0])
        return out

    def times(self, other: "_Scaled", degree: int) -> "_Scaled":
        """The product, truncated above ``degree``."""
        start = self.start + other.start
        if len(self.coef) == 0 or len(other.coef) == 0 or start > degree:
            return _Scaled._of(np.zeros(0), -np.inf, 0)
        prod = np.convolve(self.coef, other.coef)[: degree - start + 1]
        return _Scaled._of(prod, self.offset + other.offset, start)

    def log_coefficient(self, other: "_Scaled", degree: int) -> float:
        """``log`` of the coefficient of ``x^degree`` in the product (``-inf`` when 0)."""
        if len(self.coef) == 0 or len(other.coef) == 0:
            return -np.inf
        j = np.arange(len(other.coef))
        i = degree - self.start - other.start - j  # self's index paired with other's j
        ok = (i >= 0) & (i < len(self.coef))
        total = float(np.dot(self.coef[i[ok]], other.coef[j[ok]]))
        return self.offset + other.offset + math.log(total) if total > 0 else -np.inf


def exact_posterior(noisy: np.ndarray, n: int, p: np.ndarray, noise: NoiseDescription) -> np.ndarray:
    """``[m]``: ``P(S_r = s | c^)`` for a respondent of a cell of ``n`` respondents with noisy counts
    ``noisy`` (module docstring, ``model="exact"``)."""
    m = len(p)
    k = np.arange(n)  # the others' count of a value: 0..n-1
    noisy = np.rint(np.asarray(noisy, dtype=float)).astype(np.int64)
    with np.errstate(divide="ignore"):
        log_p = np.log(p)
    # k log((n - 1) p_v) - log k!: the common tilt (n - 1)^k multiplies every term of degree n - 1 by
    # the same (n - 1)^(n - 1), and centres each sequence near its Poisson mean (n - 1) p_v, so the
    # terms that matter stay within double range of each sequence's maximum
    tilt = math.log(n - 1) if n > 1 else 0.0
    A, log_b = [], []
    for v in range(m):
        base = _log_k_terms(n - 1, log_p[v] + tilt)
        A.append(_Scaled(base + noise.log_pmf_at(noisy[v] - k)))
        log_b.append(base + noise.log_pmf_at(noisy[v] - k - 1))
    prefix = [_Scaled.one()]
    for v in range(m):
        prefix.append(prefix[-1].times(A[v], n - 1))
    suffix = [_Scaled.one()]
    for v in reversed(range(m)):
        suffix.append(A[v].times(suffix[-1], n - 1))
    suffix.reverse()  # suffix[v] = prod_{u >= v} A_u
    log_term = np.full(m, -np.inf)
    for s in range(m):
        if not np.isfinite(log_p[s]):
            continue
        # the coefficient of x^(n-1) in prefix_s B_s suffix_(s+1): prefix x B_s first (B_s's band is
        # short), then one dot product with the suffix (prefix x suffix in full would cost their
        # bands' product, 19 values x 2 w each on bkseq)
        with_own = prefix[s].times(_Scaled(log_b[s]), n - 1)
        log_term[s] = log_p[s] + with_own.log_coefficient(suffix[s + 1], n - 1)
    return _normalized(log_term, p)


def poisson_posterior(noisy: np.ndarray, n: int, p: np.ndarray, noise: NoiseDescription) -> np.ndarray:
    """``[m]``: the independent-Poisson approximation (module docstring, ``model="poisson"``)."""
    m = len(p)
    noisy = np.rint(np.asarray(noisy, dtype=float)).astype(np.int64)
    log_term = np.full(m, -np.inf)
    for s in range(m):
        if p[s] <= 0:
            continue
        lam = (n - 1) * p[s]
        top = int(math.ceil(lam + 12 * math.sqrt(lam) + 30))
        k = np.arange(top + 1)
        log_pois = (k * math.log(lam) - lam - gammaln(k + 1)) if lam > 0 else np.where(k == 0, 0.0, -np.inf)
        num = logsumexp(log_pois + noise.log_pmf_at(noisy[s] - 1 - k))
        den = logsumexp(log_pois + noise.log_pmf_at(noisy[s] - k))
        if np.isfinite(num) and np.isfinite(den):
            log_term[s] = math.log(p[s]) + num - den
    return _normalized(log_term, p)


def _normalized(log_term: np.ndarray, p: np.ndarray) -> np.ndarray:
    if not np.isfinite(log_term).any():
        return p.copy()  # counts impossible under the model: the prior (module docstring)
    w = np.exp(log_term - log_term.max())
    return w / w.sum()


class NoisyCountsAttacker(Attacker):
    """Bayesian posterior of each respondent's value from her cell's noisy counts and the published noise (exact multinomial convolution or Poisson approximation)."""

    Params = NoisyCountsParams
    reads_counts = True
    uses_past_views = False  # each release on its own

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        m = view.schema.sensitive.size
        if view.counted:
            counts = np.asarray(view.noisy_counts, dtype=float)
            noise = view.noise if view.noise is not None else NO_NOISE
            lows, highs, table = grid_of_view(view.low, view.high)
            at = cells_of_points(lows, highs, ctx.population.qi)
            cell = np.where(at >= 0, table[np.maximum(at, 0)], -1)
            placed = cell >= 0
            respondent = ctx.population.respondent[placed].astype(np.int64)
            cell = cell[placed]
            sizes = np.bincount(cell, minlength=view.n_groups)
        else:
            view.require_single_partition("attacker noisy_counts")
            counts = view.group_counts().astype(float)
            noise = NO_NOISE
            sizes = view.group_sizes()
            real = view.respondent >= 0
            respondent, cell = view.respondent[real].astype(np.int64), view.group[real].astype(np.int64)
        p = value_prior(counts, self.params.prior)
        solve = exact_posterior if self.params.model == "exact" else poisson_posterior
        per_cell = np.zeros((view.n_groups, m))
        for g in np.unique(cell):
            per_cell[g] = solve(counts[g], int(sizes[g]), p, noise)
        if len(cell) and not np.isfinite(per_cell[cell]).all():  # pragma: no cover - a defect, not an input
            raise CdpbenchError("attacker noisy_counts: a posterior is not finite")
        return AttackResult(respondent, per_cell[cell])
