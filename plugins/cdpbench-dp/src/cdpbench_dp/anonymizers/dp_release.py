"""The per-release baseline: every release's (cell x value) counts with noise of their own.

Each release ``t`` publishes its true counts ``c_t`` plus fresh noise per coordinate, with the
budget split evenly over the horizon, ``epsilon_t = epsilon / T`` (and ``delta_t = delta / T``), so
that the ``T`` releases together are (epsilon, delta)-DP by basic (sequential) composition (Dwork &
Roth 2014, Thm 3.16) — the budget grows linearly with the releases, the baseline the tree improves
on (Chan, Shi & Song 2011, §1: the "naive" per-time-step mechanism).

Neighbours (user level): two data sets differing in one respondent's whole history (added or
removed from every release). One respondent changes each snapshot's counts by at most 1 in L1 and
in L2 (``Delta = 1``), so a respondent present in every release is covered by the total epsilon.

Noise (parameter ``noise``):

* ``"laplace"`` (default): discrete Laplace, ``a = exp(-epsilon_t)`` (diffprivlib ``Geometric``);
* ``"gaussian"``: discrete Gaussian calibrated to (epsilon_t, delta_t) with L2 sensitivity 1
  (diffprivlib ``GaussianDiscrete``, Canonne, Kamath & Steinke 2020).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext

from ..accountant import BudgetAccountant
from ..counts import CountsParams, counted_publication, true_counts
from ..grid import Grid
from ..noise import (
    NoiseDescription,
    discrete_gaussian_mechanism,
    discrete_gaussian_noise,
    discrete_laplace_noise,
    random_state_from,
)

NOISES = ("laplace", "gaussian")


@dataclass
class DPReleaseParams(CountsParams):
    noise: str = field(default="laplace", metadata={"help": "'laplace' (discrete Laplace, pure epsilon) or "
                                                           "'gaussian' (discrete Gaussian, needs delta)"})
    delta: float = field(default=1e-6, metadata={"help": "total delta over the horizon for noise=gaussian, in (0, 1)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.noise in NOISES, "noise", "one of 'laplace', 'gaussian'", self.noise)
        number = isinstance(self.delta, (int, float)) and not isinstance(self.delta, bool) and math.isfinite(self.delta)
        require(number and 0.0 < self.delta < 1.0, "delta", "a number in (0, 1)", self.delta)


class DPRelease(Anonymizer):
    """Per-release noisy (cell x value) counts, epsilon / T each: the baseline whose budget grows with the releases."""

    Params = DPReleaseParams
    publishes = "counts"  # a counted publication (Publication.noisy_counts), no records
    uses_history = False

    def __init__(self, params: DPReleaseParams | None = None):
        super().__init__(params)
        self.grid: Grid | None = None
        self.accountant: BudgetAccountant | None = None
        self._mechanism = None  # the discrete Gaussian, calibrated once

    def per_release(self) -> tuple[float, float]:
        """``(epsilon_t, delta_t)``."""
        T = self.params.horizon_value()
        return self.params.epsilon / T, (self.params.delta / T if self.params.noise == "gaussian" else 0.0)

    def noise_description(self) -> NoiseDescription:
        eps_t, delta_t = self.per_release()
        if self.params.noise == "laplace":
            return NoiseDescription("discrete_laplace", terms=1, alpha=math.exp(-eps_t))
        return NoiseDescription("discrete_gaussian", terms=1, sigma=float(self._gaussian()._scale))

    def _gaussian(self):
        """The discrete Gaussian mechanism, calibrated once (diffprivlib's root search, ~2 ms) on a
        RandomState of this instance that every release reseeds from ``ctx.rng``."""
        if self._mechanism is None:
            eps_t, delta_t = self.per_release()
            self._state = np.random.RandomState(0)
            self._mechanism = discrete_gaussian_mechanism(eps_t, delta_t, 1, self._state)
        return self._mechanism

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        p = self.params
        eps_t, delta_t = self.per_release()
        if self.grid is None:
            self.grid = Grid.from_schema(release.schema, p.bins, p.level, p.max_cells)
            self.accountant = BudgetAccountant(float(p.epsilon), p.horizon_value(),
                                               p.delta if p.noise == "gaussian" else 0.0)
            self._noise = self.noise_description()
        self.accountant.start_release(release.t)  # refuses t > horizon
        cell, counts = true_counts(release, self.grid)
        rs = random_state_from(ctx.rng)
        if p.noise == "laplace":
            noise = discrete_laplace_noise(counts.size, eps_t, 1, rs)
        else:
            mechanism = self._gaussian()
            self._state.set_state(rs.get_state())  # this release's seed, drawn from ctx.rng
            noise = discrete_gaussian_noise(counts.size, mechanism)
        self.accountant.charge(f"release {release.t}", eps_t, delta_t)
        spent = self.accountant.epsilon_spent()
        info = {
            "epsilon_total": float(p.epsilon),
            "epsilon_spent": spent,
            "epsilon_release": eps_t,
            "delta_spent": self.accountant.delta_spent(),
            "noise_variance": self._noise.variance(),
            "cells": float(self.grid.n_cells),
            "epsilon_user_level": spent,  # neighbours differ in a whole respondent (module docstring)
        }
        noisy = counts + noise.reshape(counts.shape)
        return counted_publication(release, self.grid, cell, noisy, self._noise, info)
