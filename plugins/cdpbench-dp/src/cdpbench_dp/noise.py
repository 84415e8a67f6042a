"""The noise of a counted publication: drawn with diffprivlib, described for the adversary.

Drawing. Every noise value comes from a vetted mechanism of diffprivlib 0.6.6
(:class:`diffprivlib.mechanisms.Geometric`, the two-sided geometric = discrete Laplace mechanism of
Ghosh, Roughgarden & Sundararajan, STOC 2009, for integer counts; and
:class:`diffprivlib.mechanisms.GaussianDiscrete`, the discrete Gaussian of Canonne, Kamath &
Steinke, NeurIPS 2020), seeded from the anonymizer's numpy generator (``random_state``: an int
drawn from ``ctx.rng``), so that the same config and seed give the same counts. diffprivlib is
imported lazily (it imports scikit-learn, ~3 s); its ``randomise`` is scalar (~20 µs a value).

Describing (Kerckhoffs: the adversary knows the mechanism). :class:`NoiseDescription` is what a
counted publication publishes about its noise (``Publication.noise``): every coordinate (cell,
value) of the release carries the sum of ``terms`` i.i.d. draws of one distribution,

* ``"discrete_laplace"``: ``P(X = x) = (1 - a) / (1 + a) a^|x|``, ``a = exp(-epsilon / sensitivity)``
  (the distribution diffprivlib's ``Geometric`` samples), variance ``2a / (1 - a)^2``;
* ``"discrete_gaussian"``: ``P(X = x) ~ exp(-x^2 / (2 sigma^2))`` (``GaussianDiscrete``; sigma its
  calibrated scale);
* ``"none"``: no noise (a records publication read as exact counts).

The binary-tree mechanism releases at ``t`` the sum of ``popcount(t)`` node noises, hence ``terms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MECHANISMS = ("discrete_laplace", "discrete_gaussian", "none")
#: the noise pmf is truncated where both tails together hold less than this
TAIL = 1e-12


@dataclass(frozen=True)
class NoiseDescription:
    """The noise on every published count: the sum of ``terms`` i.i.d. draws of ``mechanism``
    (``alpha`` for the discrete Laplace, ``sigma`` for the discrete Gaussian); module docstring."""

    mechanism: str
    terms: int = 1
    alpha: float = 0.0
    sigma: float = 0.0
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"noise mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")

    def one_term_pmf(self) -> tuple[int, np.ndarray]:
        """``(w, pmf)``: the pmf of one draw on ``-w..w``, truncated where the tails hold < TAIL."""
        if self.mechanism == "none" or (self.mechanism == "discrete_laplace" and self.alpha <= 0.0) or (
            self.mechanism == "discrete_gaussian" and self.sigma <= 0.0
        ):
            return 0, np.ones(1)
        if self.mechanism == "discrete_laplace":
            a = self.alpha
            # P(|X| > w) = 2 a^(w+1) / (1 + a) < TAIL
            w = max(0, int(math.ceil(math.log(TAIL * (1 + a) / 2) / math.log(a))))
            x = np.arange(-w, w + 1)
            pmf = (1 - a) / (1 + a) * a ** np.abs(x)
        else:
            s = self.sigma
            w = int(math.ceil(s * math.sqrt(2 * math.log(1 / TAIL)))) + 1
            x = np.arange(-w, w + 1)
            pmf = np.exp(-(x.astype(float) ** 2) / (2 * s * s))
            pmf /= pmf.sum()
        return w, pmf

    def pmf(self) -> tuple[int, np.ndarray]:
        """``(w, pmf)``: the pmf of the published noise (``terms`` draws summed) on ``-w..w``."""
        if "pmf" not in self._cache:
            w1, one = self.one_term_pmf()
            pmf, w = np.ones(1), 0
            for _ in range(max(self.terms, 0)):
                pmf, w = np.convolve(pmf, one), w + w1
            if w > 0:  # cut the tails the convolution spread below TAIL
                keep = np.flatnonzero(pmf >= TAIL * pmf.max() * 1e-3)
                cut = int(min(keep[0], len(pmf) - 1 - keep[-1]))
                pmf, w = pmf[cut : len(pmf) - cut], w - cut
            self._cache["pmf"] = (w, pmf / pmf.sum())
        return self._cache["pmf"]

    def log_pmf_at(self, x: np.ndarray) -> np.ndarray:
        """``log P(noise = x)`` for integer offsets ``x`` (``-inf`` outside the kept support)."""
        w, pmf = self.pmf()
        x = np.asarray(x, dtype=np.int64)
        inside = np.abs(x) <= w
        out = np.full(x.shape, -np.inf)
        with np.errstate(divide="ignore"):
            out[inside] = np.log(pmf[x[inside] + w])
        return out

    def variance(self) -> float:
        """Variance of the published noise: ``terms`` x one draw's."""
        if self.mechanism == "discrete_laplace":
            a = self.alpha
            return self.terms * 2 * a / (1 - a) ** 2
        w, pmf = self.one_term_pmf()
        x = np.arange(-w, w + 1)
        return self.terms * float((pmf * x * x).sum())


def random_state_from(rng: np.random.Generator) -> np.random.RandomState:
    """A legacy ``RandomState`` for diffprivlib's ``random_state``, seeded by an int drawn from the
    anonymizer's generator (``ctx.rng``): reproducible from the run's seed."""
    return np.random.RandomState(int(rng.integers(0, 2**32 - 1, dtype=np.int64)))


def discrete_laplace_noise(size: int, epsilon: float, sensitivity: int, random_state: np.random.RandomState) -> np.ndarray:
    """``size`` draws of diffprivlib's ``Geometric(epsilon, sensitivity)`` (discrete Laplace with
    ``a = exp(-epsilon / sensitivity)``) around 0, int64."""
    from diffprivlib.mechanisms import Geometric

    mech = Geometric(epsilon=float(epsilon), sensitivity=int(sensitivity), random_state=random_state)
    return np.fromiter((mech.randomise(0) for _ in range(size)), dtype=np.int64, count=size)


def discrete_gaussian_mechanism(epsilon: float, delta: float, sensitivity: int, random_state=None):
    """diffprivlib's ``GaussianDiscrete(epsilon, delta, sensitivity)``: its ``_scale`` is the sigma it
    calibrated (Canonne, Kamath & Steinke 2020)."""
    from diffprivlib.mechanisms import GaussianDiscrete

    return GaussianDiscrete(epsilon=float(epsilon), delta=float(delta), sensitivity=int(sensitivity),
                            random_state=random_state)


def discrete_gaussian_noise(size: int, mechanism) -> np.ndarray:
    """``size`` draws of a diffprivlib ``GaussianDiscrete`` around 0, int64."""
    return np.fromiter((mechanism.randomise(0) for _ in range(size)), dtype=np.int64, count=size)
