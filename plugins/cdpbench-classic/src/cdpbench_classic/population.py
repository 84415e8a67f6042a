"""Counting the records of a public population table inside generalized QI boxes (for δ-presence
and k-map, which compare a publication with the population its respondents come from).

A group's *box* is what a publication generalizes it to (:class:`~cdpbench.data.Publication`):
per QI column a closed interval ``[low, high]`` (numeric: values; categorical: leaf codes, a
taxonomy node being a contiguous range of leaf codes), or for a categorical column published as
an arbitrary set of leaves (``Publication.value_sets``, Mondrian's ``categorical=set``) that set.
A population record *matches* a box when every one of its QI values lies in the box.

:class:`PopulationIndex` answers "how many population records match each of these boxes" for many
boxes at once:

* **grid** (when the product of the columns' numbers of distinct values is at most
  :data:`GRID_CELLS`): the population counted on the grid of its distinct values, turned into a
  d-dimensional prefix sum (summed-area table); a box's count is the inclusion-exclusion sum of
  the table at its ``2**d`` corners (one ``searchsorted`` per column and ``2**d`` gathers for all
  boxes). Which population records lie in *no* box (``uncovered``) is the dual: ``+-1`` at every
  box's ``2**d`` corners of a difference grid, prefix-summed into the number of boxes covering
  each cell.
* **tuples** (otherwise, and for leaf sets that are not contiguous ranges): the population's
  distinct QI tuples with their multiplicities, matched against blocks of boxes
  (``[boxes, tuples]`` boolean blocks of at most :data:`BLOCK_CELLS` entries).

Both are exact integer counts; ``tests/test_classic_single_release_models.py`` checks them against a
record-by-record loop.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from cdpbench.errors import CdpbenchError, ConfigError

if TYPE_CHECKING:
    from cdpbench.data import Publication, Release
    from cdpbench.plugin import ModelContext
    from cdpbench.schema import Schema

#: largest summed-area table built (cells, int64 each: 4M cells = 32 MB)
GRID_CELLS = 1 << 22
#: entries of one ``[boxes, tuples]`` block of the tuple matcher
BLOCK_CELLS = 1 << 22


def population_of(ctx: "ModelContext", who: str) -> np.ndarray:
    """The public population ``[N, d]`` of the release being published (``ctx.release.population``),
    or a one-line :class:`ConfigError` naming the data set when there is none."""
    release = ctx.release
    population = None if release is None else release.population
    if population is None:
        raise ConfigError(
            f"privacy_model {who} needs the public population table (Release.population), which this dataset does not "
            "provide; use a dataset that publishes one (dataset=churn)"
        )
    return np.asarray(population, dtype=float)


class PopulationIndex:
    """The population ``[N, d]`` (QI codes as in ``Release.qi``), indexed for box counts."""

    def __init__(self, population: np.ndarray, grid_cells: int = GRID_CELLS):
        population = np.asarray(population, dtype=float)
        if population.ndim != 2:
            raise CdpbenchError(f"the population table must be a 2-D [records, QI columns] array, got shape {population.shape}")
        self.population = population
        self.n, self.d = population.shape
        # distinct values of each column, and the population's distinct tuples with multiplicities
        self.values = [np.unique(population[:, j]) for j in range(self.d)]
        self.shape = tuple(len(v) for v in self.values)
        cells = float(np.prod([float(s) for s in self.shape])) if self.d else 1.0
        if self.n and self.d and cells < 2.0**62:  # one int64 code per tuple: a 1-D unique, not a row-wise one
            codes = [np.searchsorted(self.values[j], population[:, j]) for j in range(self.d)]
            cell, weights = np.unique(np.ravel_multi_index(codes, self.shape), return_counts=True)
            self.tuples = np.column_stack([self.values[j][c] for j, c in enumerate(np.unravel_index(cell, self.shape))])
        elif self.n:
            cell = None
            self.tuples, weights = np.unique(population, axis=0, return_counts=True)
        else:
            cell, self.tuples, weights = None, np.zeros((0, self.d)), np.zeros(0, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=np.int64)
        self.grid = None  # counts per cell of the distinct-value grid
        self.prefix = None  # the summed-area table, one leading zero row per axis
        if self.n and self.d and cell is not None and np.prod([s + 1.0 for s in self.shape]) <= grid_cells:
            grid = np.zeros(self.shape, dtype=np.int64)
            grid.reshape(-1)[cell] = self.weights
            prefix = np.zeros(tuple(s + 1 for s in self.shape), dtype=np.int64)
            prefix[tuple(slice(1, None) for _ in self.shape)] = grid
            for axis in range(self.d):
                np.cumsum(prefix, axis=axis, out=prefix)
            self.grid, self.prefix = grid, prefix

    # ------------------------------------------------------------------ boxes
    def _ranges(self, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per box and column the half-open range ``[a, b)`` of distinct-value indices inside
        ``[low, high]``."""
        a = np.empty(low.shape, dtype=np.int64)
        b = np.empty(high.shape, dtype=np.int64)
        for j in range(self.d):
            a[:, j] = np.searchsorted(self.values[j], low[:, j], side="left")
            b[:, j] = np.searchsorted(self.values[j], high[:, j], side="right")
        return a, b

    def count_boxes(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """int64 ``[G]``: population records inside each closed box ``[low[g], high[g]]``."""
        low = np.asarray(low, dtype=float).reshape(-1, self.d)
        high = np.asarray(high, dtype=float).reshape(-1, self.d)
        G = len(low)
        if self.n == 0 or G == 0:
            return np.zeros(G, dtype=np.int64)
        if self.d == 0:
            return np.full(G, self.n, dtype=np.int64)
        if self.prefix is None:
            return self._count_tuples(low, high, None)
        a, b = self._ranges(low, high)
        total = np.zeros(G, dtype=np.int64)
        flat = self.prefix.reshape(-1)
        dims = self.prefix.shape
        for corner in itertools.product((0, 1), repeat=self.d):  # 2**d corners, each for every box
            upper = np.asarray(corner, dtype=bool)
            index = np.where(upper, b, a)
            sign = 1 if (self.d - int(upper.sum())) % 2 == 0 else -1
            total += sign * flat[np.ravel_multi_index(tuple(index.T), dims)]
        empty = (a >= b).any(axis=1)
        total[empty] = 0
        return total

    def count_sets(self, low: np.ndarray, high: np.ndarray, value_sets: dict[int, np.ndarray]) -> np.ndarray:
        """int64 ``[G]``: population records inside each box, a categorical column ``j`` in
        ``value_sets`` matching the leaves ``value_sets[j][g]`` (bool ``[G, L]``) instead of the
        range. Sets that are all the contiguous ranges ``[low, high]`` take the grid path."""
        low = np.asarray(low, dtype=float).reshape(-1, self.d)
        high = np.asarray(high, dtype=float).reshape(-1, self.d)
        if all(is_range(value_sets[j], low[:, j], high[:, j]) for j in value_sets):
            return self.count_boxes(low, high)
        if self.n == 0 or len(low) == 0:
            return np.zeros(len(low), dtype=np.int64)
        return self._count_tuples(low, high, value_sets)

    def _inside(self, low: np.ndarray, high: np.ndarray, value_sets: dict[int, np.ndarray] | None,
                start: int, stop: int) -> np.ndarray:
        """bool ``[stop - start, U]``: distinct tuple u inside box g (boxes ``start:stop``)."""
        inside = np.ones((stop - start, len(self.tuples)), dtype=bool)
        for j in range(self.d):
            col = self.tuples[:, j]
            if value_sets is not None and j in value_sets:
                leaves = value_sets[j][start:stop]
                code = col.astype(np.int64)
                valid = (code >= 0) & (code < leaves.shape[1])
                inside &= valid[None, :] & leaves[:, np.where(valid, code, 0)]
            else:
                inside &= (col[None, :] >= low[start:stop, j, None]) & (col[None, :] <= high[start:stop, j, None])
        return inside

    def _count_tuples(self, low: np.ndarray, high: np.ndarray, value_sets: dict[int, np.ndarray] | None) -> np.ndarray:
        G = len(low)
        out = np.zeros(G, dtype=np.int64)
        step = max(1, BLOCK_CELLS // max(len(self.tuples), 1))
        for start in range(0, G, step):
            stop = min(G, start + step)
            out[start:stop] = self._inside(low, high, value_sets, start, stop).astype(np.int64) @ self.weights
        return out

    # ------------------------------------------------------------------ coverage
    def uncovered(self, low: np.ndarray, high: np.ndarray, value_sets: dict[int, np.ndarray] | None = None) -> int:
        """Population records inside none of the boxes."""
        low = np.asarray(low, dtype=float).reshape(-1, self.d)
        high = np.asarray(high, dtype=float).reshape(-1, self.d)
        if self.n == 0:
            return 0
        if len(low) == 0:
            return self.n
        if self.d == 0:
            return 0
        contiguous = value_sets is None or all(is_range(value_sets[j], low[:, j], high[:, j]) for j in value_sets)
        if contiguous and self.grid is not None:
            a, b = self._ranges(low, high)
            keep = (a < b).all(axis=1)
            a, b = a[keep], b[keep]
            diff = np.zeros(tuple(s + 1 for s in self.shape), dtype=np.int64)
            for corner in itertools.product((0, 1), repeat=self.d):
                upper = np.asarray(corner, dtype=bool)
                index = np.where(upper, b, a)
                sign = -1 if int(upper.sum()) % 2 else 1
                np.add.at(diff.reshape(-1), np.ravel_multi_index(tuple(index.T), diff.shape), sign)
            for axis in range(self.d):
                np.cumsum(diff, axis=axis, out=diff)
            cover = diff[tuple(slice(0, s) for s in self.shape)]
            return int(self.grid[cover == 0].sum())
        sets = None if contiguous else value_sets
        covered = np.zeros(len(self.tuples), dtype=bool)
        step = max(1, BLOCK_CELLS // max(len(self.tuples), 1))
        for start in range(0, len(low), step):
            covered |= self._inside(low, high, sets, start, min(len(low), start + step)).any(axis=0)
        return int(self.weights[~covered].sum())


def is_range(leaves: np.ndarray, low: np.ndarray, high: np.ndarray) -> bool:
    """Whether every row of the leaf sets ``leaves`` (bool ``[G, L]``) is exactly the leaf codes
    ``low[g]..high[g]``."""
    code = np.arange(leaves.shape[1])
    return bool(np.array_equal(leaves, (code[None, :] >= low[:, None]) & (code[None, :] <= high[:, None])))


# ---------------------------------------------------------------------------- candidate groups
def candidate_boxes(qi: np.ndarray, segment: np.ndarray, n_groups: int, schema: "Schema", categorical: str
                    ) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """``(low, high, value_sets)``: the boxes :meth:`Publication.from_partition` would publish for
    candidate groups (record ``i`` with QI ``qi[i]`` in group ``segment[i]``): the tightest
    numeric intervals; a categorical column's smallest covering taxonomy node
    (``categorical="taxonomy"``, value sets empty) or exactly its leaves present (``"set"``)."""
    qi = np.asarray(qi, dtype=float)
    segment = np.asarray(segment, dtype=np.int64)
    d = qi.shape[1]
    low = np.full((n_groups, d), np.inf)
    high = np.full((n_groups, d), -np.inf)
    if len(segment):
        for j in range(d):  # a per-column scatter (not per record): ufunc.at on the group ids
            np.minimum.at(low[:, j], segment, qi[:, j])
            np.maximum.at(high[:, j], segment, qi[:, j])
    value_sets: dict[int, np.ndarray] = {}
    present = np.bincount(segment, minlength=n_groups) > 0
    for j in schema.categorical:
        tax = schema.qi[j].taxonomy
        if categorical == "taxonomy":
            if present.any():
                _, lo, hi = tax.covering_range(low[present, j].astype(np.int64), high[present, j].astype(np.int64))
                low[present, j], high[present, j] = lo, hi
        else:
            mask = np.zeros(n_groups * tax.size, dtype=bool)
            mask[segment * tax.size + qi[:, j].astype(np.int64)] = True
            value_sets[j] = mask.reshape(n_groups, tax.size)
    return low, high, value_sets


def publication_boxes(publication: "Publication", who: str) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """The published boxes of a generalized publication; a bucketized one (its exact QIs are
    published, no box) is refused with a one-line error naming ``who``."""
    if publication.bucketized:
        raise CdpbenchError(f"privacy_model {who} judges generalized QI boxes; a bucketized publication (exact QIs "
                            "published, e.g. anatomy or slicing) has none")
    return publication.low, publication.high, publication.value_sets


# ---------------------------------------------------------------------------- for the models
class PopulationBoxes:
    """What δ-presence and k-map share: the population index of the release being published
    (built once per population array, kept on the model instance) and the population counts of
    candidate groups and of published groups."""

    def __init__(self, who: str):
        self.who = who
        self._population: np.ndarray | None = None
        self._index: PopulationIndex | None = None

    def prepare(self, release: "Release") -> None:
        """Index the release's population before it is anonymized (the model's ``prepare``): a
        task of a partitioned anonymizer judges its groups with a model context that holds no
        release (``ModelContext.release`` None) and uses this index."""
        self._population = self._index = None
        if release.population is not None:
            self._population = np.asarray(release.population, dtype=float)
            self._index = PopulationIndex(self._population)

    def index(self, ctx: "ModelContext") -> PopulationIndex:
        if ctx.release is None and self._index is not None:  # a task's context: the prepared release's
            return self._index
        population = population_of(ctx, self.who)
        if self._index is None or population is not self._population:
            self._population, self._index = population, PopulationIndex(population)
        return self._index

    def candidate_counts(self, qi: np.ndarray | None, segment: np.ndarray, n_groups: int, ctx: "ModelContext",
                         categorical: str) -> np.ndarray:
        """int64 ``[G]``: population records inside each candidate group's box (the box
        :meth:`Publication.from_partition` gives it with ``categorical``)."""
        if qi is None:
            raise ConfigError(
                f"privacy_model {self.who} needs the candidate groups' exact QIs (GroupBatch.qi) to find their boxes; "
                "this anonymizer does not pass them (a model declaring needs_qi gets them from PublishContext.predicate)"
            )
        index = self.index(ctx)
        low, high, value_sets = candidate_boxes(qi, segment, n_groups, ctx.schema, categorical)
        return index.count_sets(low, high, value_sets) if value_sets else index.count_boxes(low, high)

    def published_counts(self, publication: "Publication", ctx: "ModelContext") -> tuple[np.ndarray, PopulationIndex]:
        """int64 ``[G]``: population records inside each published group's box, and the index."""
        low, high, value_sets = publication_boxes(publication, self.who)
        index = self.index(ctx)
        return index.count_sets(low, high, value_sets), index
