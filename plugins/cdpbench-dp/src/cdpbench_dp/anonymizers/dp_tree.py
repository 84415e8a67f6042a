"""The binary-tree (hierarchical) mechanism for continual counting, per (cell, value) coordinate.

Chan, Shi & Song, "Private and continual release of statistics", ACM TISSEC 14(3), 2011, §3.4 (the
Binary Mechanism B, Thm 3.5); Dwork, Naor, Pitassi & Rothblum, "Differential privacy under
continual observation", STOC 2010, §4 (the same tree counter).

Stream. For each coordinate ``(g, s)`` (cell ``g`` of the data-independent grid,
:mod:`cdpbench_dp.grid`, sensitive value ``s``) the stream of changes of the true count,
``Delta_t = c_t - c_{t-1}`` (``c_0 = 0``), over the horizon of ``T`` releases. The count released at
``t`` is the noisy prefix sum ``sum_{s <= t} Delta_s``.

Tree. The dyadic node ``[k 2^j + 1, (k + 1) 2^j]`` of level ``j`` sums ``Delta`` over its range;
``L = floor(log2 T) + 1`` levels, and every ``Delta_t`` lies in exactly one node per level. Each
node gets its own noise, discrete Laplace with ``a = exp(-epsilon / (L Delta1))`` per coordinate
(diffprivlib ``Geometric(epsilon / L, sensitivity = Delta1)``). The count released at ``t`` is the
sum of the noisy nodes of ``t``'s dyadic decomposition (one node per set bit of ``t``, so
``popcount(t)`` noises, variance ``popcount(t) 2a / (1 - a)^2``). At ``t`` the node of level
``ctz(t)`` ending at ``t`` completes; it is the only node drawn at ``t`` (the lower ones ending at
``t`` are never used by a prefix sum; not releasing them is post-processing).

Privacy (event level). An *event* (parameter ``event``):

* ``"update"`` (default): one respondent's record inserted, deleted, or moved to another
  coordinate (another cell or another value) between two consecutive releases. It changes one
  ``Delta_t`` by at most ``Delta1 = 2`` in L1 (-1 at the old coordinate, +1 at the new one);
* ``"insert_delete"``: one insertion or one deletion, ``Delta1 = 1`` (a move is then two events).

Two change streams differing in one event differ in ``L`` nodes by ``Delta1`` in L1 each, so the
whole sequence of ``T`` releases is epsilon-DP at the event level (Laplace mechanism on the ``L``
nodes containing it, basic composition over the levels). User level: a respondent with at most
``K`` events over the horizon gets ``K epsilon`` (group privacy). ``K`` is measured on the data (the
most events any respondent has had so far) and reported with the ``K epsilon`` it implies
(``info.max_events_per_respondent``, ``info.epsilon_user_level``), not assumed.

The accountant (:mod:`cdpbench_dp.accountant`) charges ``epsilon / L`` per node, in parallel within a
level; the spend after release ``t`` is ``(floor(log2 t) + 1) epsilon / L``, epsilon at ``T``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release, rows_of
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext

from ..accountant import BudgetAccountant
from ..counts import CountsParams, counted_publication, true_counts
from ..grid import Grid
from ..noise import NoiseDescription, discrete_laplace_noise, random_state_from

EVENTS = {"update": 2, "insert_delete": 1}


def tree_levels(horizon: int) -> int:
    """``L = floor(log2 T) + 1``: the levels of the dyadic tree over ``T`` releases."""
    return int(horizon).bit_length()


def popcount(t: int) -> int:
    return bin(int(t)).count("1")


class BinaryTreeCounter:
    """The Binary Mechanism over ``n`` coordinates (module docstring): ``release(t, c_t, rs)``
    returns the noisy prefix counts at ``t`` given the true counts ``c_t``."""

    def __init__(self, n: int, horizon: int, epsilon: float, sensitivity: int, accountant: BudgetAccountant | None = None):
        self.n, self.horizon, self.epsilon, self.sensitivity = n, int(horizon), float(epsilon), int(sensitivity)
        self.levels = tree_levels(horizon)
        self.accountant = accountant
        self.true_prefix: list[np.ndarray] = [np.zeros(n, dtype=np.int64)]  # c_0 .. c_t
        self.node: dict[int, np.ndarray] = {}  # level -> the latest noisy node of that level

    @property
    def alpha(self) -> float:
        """``a = exp(-epsilon / (L Delta1))`` of every node's discrete Laplace noise."""
        return math.exp(-self.epsilon / (self.levels * self.sensitivity))

    def release(self, t: int, counts: np.ndarray, random_state: np.random.RandomState) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if t != len(self.true_prefix):
            raise ValueError(f"the tree counter expected release {len(self.true_prefix)}, got {t}")
        if t > self.horizon:
            raise ValueError(f"release {t} is past the tree's horizon of {self.horizon}")
        self.true_prefix.append(counts)
        j = (t & -t).bit_length() - 1  # ctz(t): the level of the node completing at t
        true_node = counts - self.true_prefix[t - (1 << j)]
        noise = discrete_laplace_noise(self.n, self.epsilon / self.levels, self.sensitivity, random_state)
        self.node[j] = true_node + noise
        if self.accountant is not None:
            self.accountant.charge(f"level {j}", self.epsilon / self.levels)
        return np.sum([self.node[b] for b in range(self.levels) if t >> b & 1], axis=0).astype(np.int64)

    def noise(self, t: int) -> NoiseDescription:
        """The noise on the counts released at ``t``: ``popcount(t)`` discrete Laplace draws."""
        return NoiseDescription("discrete_laplace", terms=popcount(t), alpha=self.alpha)


@dataclass
class DPTreeParams(CountsParams):
    event: str = field(default="update", metadata={"help": "the event-level neighbours: 'update' (insert, delete "
                                                           "or move of one record, Delta1 = 2) or 'insert_delete' "
                                                           "(Delta1 = 1)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.event in EVENTS, "event", "one of 'update', 'insert_delete'", self.event)


class DPTree(Anonymizer):
    """Binary-tree mechanism: noisy (cell x value) counts under continual observation, epsilon event-level over the horizon (Chan, Shi & Song 2011; Dwork et al. 2010)."""

    Params = DPTreeParams
    publishes = "counts"  # a counted publication (Publication.noisy_counts), no records
    uses_history = False  # keeps its own state (the tree) on the instance

    def __init__(self, params: DPTreeParams | None = None):
        super().__init__(params)
        self.grid: Grid | None = None
        self.tree: BinaryTreeCounter | None = None
        self.accountant: BudgetAccountant | None = None
        self._last_ids = np.zeros(0, dtype=np.int64)  # respondents of the previous release
        self._last_coord = np.zeros(0, dtype=np.int64)  # and their coordinate (cell x m + value)
        self._event_ids = np.zeros(0, dtype=np.int64)  # respondents with an event so far, sorted
        self._events = np.zeros(0, dtype=np.int64)  # and how many

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        p = self.params
        if self.grid is None:
            horizon = p.horizon_value()
            self.grid = Grid.from_schema(release.schema, p.bins, p.level, p.max_cells)
            self.accountant = BudgetAccountant(float(p.epsilon), horizon)
            self.tree = BinaryTreeCounter(self.grid.n_cells * release.n_values, horizon, p.epsilon,
                                          EVENTS[p.event], self.accountant)
        self.accountant.start_release(release.t)  # refuses t > horizon
        cell, counts = true_counts(release, self.grid)
        noisy = self.tree.release(release.t, counts, random_state_from(ctx.rng)).reshape(counts.shape)
        events = self._count_events(release, cell * release.n_values + release.sensitive)
        spent = self.accountant.epsilon_spent()
        info = {
            "epsilon_total": float(p.epsilon),
            "epsilon_spent": spent,
            "epsilon_release": self.accountant.release_spend(release.t),
            "tree_levels": float(self.tree.levels),
            "noise_terms": float(popcount(release.t)),
            "noise_variance": self.tree.noise(release.t).variance(),
            "cells": float(self.grid.n_cells),
            "max_events_per_respondent": float(events),
            "epsilon_user_level": float(events) * spent,
        }
        return counted_publication(release, self.grid, cell, noisy, self.tree.noise(release.t), info)

    def _count_events(self, release: Release, coord: np.ndarray) -> int:
        """Add this release's events (module docstring) to each respondent's count; the largest."""
        ids = release.respondent.astype(np.int64)
        rows, found = rows_of(self._last_ids, ids)
        moved = found & (self._last_coord[rows] != coord) if len(self._last_ids) else np.zeros(len(ids), dtype=bool)
        inserted = ~found
        _, still = rows_of(ids, self._last_ids)
        deleted = self._last_ids[~still]
        per_move = 1 if self.params.event == "update" else 2
        who = np.concatenate([ids[inserted], deleted, ids[moved], self._event_ids])
        weight = np.concatenate([np.ones(int(inserted.sum()) + len(deleted), dtype=np.int64),
                                 np.full(int(moved.sum()), per_move, dtype=np.int64), self._events])
        self._event_ids, inverse = np.unique(who, return_inverse=True)
        self._events = np.bincount(inverse.reshape(-1), weights=weight, minlength=len(self._event_ids)).astype(np.int64)
        self._last_ids, self._last_coord = ids.copy(), np.asarray(coord, dtype=np.int64).copy()
        return int(self._events.max()) if len(self._events) else 0
