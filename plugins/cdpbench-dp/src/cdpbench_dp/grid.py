"""The data-independent grid of cells whose counts a DP mechanism publishes.

A differentially private count release must not choose its cells from the data (a cell present
only when someone is in it tells that someone is): the cells here come from the schema alone.

* numeric QI: ``bins`` equal-width bins over the schema's domain ``[low, high]``. When both bounds
  are integers the bins split the integers ``low..high`` (bin ``k`` holds the integers ``v`` with
  ``floor((v - low) bins / N) = k``, ``N = high - low + 1``; closed integer boxes that do not
  overlap; a fraction between two of them counts in the lower one); otherwise bin ``k`` is
  ``[low + k w, low + (k + 1) w]``, ``w = (high - low) / bins`` (a value on an inner edge goes to
  the upper bin). ``bins`` larger than the number of integers of
  an integral domain gives one bin per integer.
* categorical QI: the nodes of its taxonomy at ``level`` (0 = the leaves, the taxonomy's height =
  the root; a level above the height is the root), each a contiguous range of leaf codes.

The cells are the Cartesian product, ALL of them, empty ones included, in C order of the per-QI
bins. A grid larger than ``max_cells`` cells is refused with a one-line error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cdpbench.errors import ConfigError
from cdpbench.schema import Schema


@dataclass
class Grid:
    """Per QI the bins (``lows[j]``, ``highs[j]``: closed boxes, sorted) and the cells' boxes."""

    schema: Schema
    lows: list[np.ndarray]
    highs: list[np.ndarray]

    @classmethod
    def from_schema(cls, schema: Schema, bins: int, level: int, max_cells: int) -> "Grid":
        lows, highs = [], []
        for a in schema.qi:
            if a.kind == "numeric":
                lo, hi = float(a.low), float(a.high)
                if lo.is_integer() and hi.is_integer():
                    n = int(hi - lo) + 1
                    k = np.arange(min(bins, n) + 1)
                    edges = lo + np.ceil(k * n / min(bins, n))  # first integer of each bin, then hi + 1
                    lows.append(edges[:-1])
                    highs.append(edges[1:] - 1)
                else:
                    edges = lo + (hi - lo) * np.arange(bins + 1) / bins
                    lows.append(edges[:-1])
                    highs.append(edges[1:])
            else:
                tax = a.taxonomy
                h = min(int(level), tax.height)
                lows.append(np.asarray(tax.low[h], dtype=float))
                highs.append(np.asarray(tax.high[h], dtype=float))
        cells = int(np.prod([len(x) for x in lows], dtype=np.float64))
        if cells > max_cells:
            sizes = " x ".join(str(len(x)) for x in lows)
            raise ConfigError(f"anonymizer.bins/level: the grid has {cells} cells ({sizes}), over "
                              f"anonymizer.max_cells = {max_cells}; lower bins or raise level")
        return cls(schema, lows, highs)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(x) for x in self.lows)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def boxes(self) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """``(low, high, value_sets)`` of every cell, as :class:`~cdpbench.data.Publication` takes them."""
        index = np.indices(self.shape).reshape(len(self.shape), -1).T  # [G, d] bin of each QI
        low = np.column_stack([self.lows[j][index[:, j]] for j in range(len(self.shape))]) if self.shape else np.zeros((1, 0))
        high = np.column_stack([self.highs[j][index[:, j]] for j in range(len(self.shape))]) if self.shape else np.zeros((1, 0))
        value_sets = {}
        for j in self.schema.categorical:
            leaves = np.arange(self.schema.qi[j].taxonomy.size)
            value_sets[j] = (leaves[None, :] >= low[:, j][:, None]) & (leaves[None, :] <= high[:, j][:, None])
        return low, high, value_sets

    def cell_of(self, qi: np.ndarray) -> np.ndarray:
        """int64 ``[n]``: the cell of each QI point (-1 outside the domain)."""
        return cells_of_points(self.lows, self.highs, qi)


def cells_of_points(lows: list[np.ndarray], highs: list[np.ndarray], qi: np.ndarray) -> np.ndarray:
    """The cell (C order over the per-QI bins) of each row of ``qi``; -1 when a value lies outside
    the QI's bins (below the first, above the last). Bins of a QI are sorted and do not overlap
    but at a shared edge, where the upper bin wins; a value between two bins (a fraction in an
    integer domain's gap, 3.5 between [0, 3] and [4, 6]) goes to the lower one."""
    qi = np.asarray(qi, dtype=float)
    shape = tuple(len(x) for x in lows)
    cell = np.zeros(len(qi), dtype=np.int64)
    ok = np.ones(len(qi), dtype=bool)
    for j, (lo, hi) in enumerate(zip(lows, highs)):
        b = np.searchsorted(lo, qi[:, j], side="right") - 1
        inside = (b >= 0) & (qi[:, j] <= hi[-1])
        ok &= inside
        cell = cell * shape[j] + np.maximum(b, 0)
    return np.where(ok, cell, -1)


def grid_of_view(low: np.ndarray, high: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """From a publication's cell boxes (a Cartesian grid in any order): per QI its sorted distinct
    bins and the table from the per-QI bin indices (C order) to the cell, -1 where no cell is.
    The adversary places a respondent into a cell from her exact QI with it."""
    d = low.shape[1]
    lows, highs, index = [], [], []
    for j in range(d):
        pairs, inv = np.unique(np.column_stack([low[:, j], high[:, j]]), axis=0, return_inverse=True)
        lows.append(pairs[:, 0])
        highs.append(pairs[:, 1])
        index.append(inv.reshape(-1))
    shape = tuple(len(x) for x in lows)
    table = np.full(int(np.prod(shape, dtype=np.int64)), -1, dtype=np.int64)
    flat = np.ravel_multi_index(tuple(index), shape) if d else np.zeros(len(low), dtype=np.int64)
    table[flat] = np.arange(len(low))
    return lows, highs, table
