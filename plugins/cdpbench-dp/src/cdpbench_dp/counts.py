"""What the two DP anonymizers share: their grid parameters, the true counts of a release on the
grid, and the counted publication they build (:attr:`cdpbench.data.Publication.noisy_counts`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import CdpbenchError, require

from .grid import Grid
from .noise import NoiseDescription

#: the horizon's default: the data set's number of releases, read from the run's config
HORIZON_FROM_DATASET = "${dataset.releases}"


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def _integer(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class CountsParams:
    """Parameters of a DP count release on a data-independent grid (:mod:`cdpbench_dp.grid`)."""

    epsilon: float = field(default=1.0, metadata={"help": "total privacy budget epsilon over the horizon (> 0)"})
    horizon: Optional[int] = field(
        default=HORIZON_FROM_DATASET,  # type: ignore[assignment] - resolved by the run's config
        metadata={"help": "number of releases T the budget is split over (>= 1); default: the data set's "
                          "dataset.releases; a release past it is refused"},
    )
    bins: int = field(default=5, metadata={"help": "equal-width bins per numeric QI over its schema domain (>= 1)"})
    level: int = field(default=0, metadata={"help": "taxonomy level of the cells of a categorical QI (0 = leaves, >= 0)"})
    max_cells: int = field(default=100_000, metadata={"help": "refuse a grid of more cells than this (>= 1)"})

    def __post_init__(self) -> None:
        require(_number(self.epsilon) and self.epsilon > 0, "epsilon", "a number > 0", self.epsilon)
        unresolved = isinstance(self.horizon, str) and self.horizon.startswith("${")
        require(self.horizon is None or unresolved or (_integer(self.horizon) and self.horizon >= 1),
                "horizon", "an integer >= 1", self.horizon)
        require(_integer(self.bins) and self.bins >= 1, "bins", "an integer >= 1", self.bins)
        require(_integer(self.level) and self.level >= 0, "level", "an integer >= 0", self.level)
        require(_integer(self.max_cells) and self.max_cells >= 1, "max_cells", "an integer >= 1", self.max_cells)

    def horizon_value(self) -> int:
        """The horizon ``T``, refusing one the config did not resolve to a number."""
        if not _integer(self.horizon):
            raise CdpbenchError("anonymizer.horizon: the data set states no number of releases "
                                "(dataset.releases); set anonymizer.horizon=T")
        return int(self.horizon)


def true_counts(release: Release, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
    """``(cell of each record, counts [G, m])``: the exact counts the noise is added to. A record
    outside the schema's domain is refused (the grid covers the domain)."""
    cell = grid.cell_of(release.qi)
    if (cell < 0).any():
        i = int(np.flatnonzero(cell < 0)[0])
        raise CdpbenchError(f"record of respondent {int(release.respondent[i])} lies outside the schema's QI domain, "
                            "so in no cell of the grid")
    m = release.n_values
    counts = np.bincount(cell * m + release.sensitive, minlength=grid.n_cells * m).reshape(grid.n_cells, m)
    return cell, counts


def counted_publication(release: Release, grid: Grid, cell: np.ndarray, noisy_counts: np.ndarray,
                        noise: NoiseDescription, info: dict[str, Any]) -> Publication:
    """The counted publication: every cell's box and noisy counts (public), and the release's
    records in their cells as the hidden truth the metrics read (nobody suppressed)."""
    low, high, value_sets = grid.boxes()
    return Publication(
        t=release.t,
        schema=release.schema,
        group=cell.astype(np.int64),
        sensitive=release.sensitive.copy(),
        respondent=release.respondent.copy(),
        counterfeit=np.zeros(len(release), dtype=bool),
        row=np.arange(len(release), dtype=np.int64),
        low=low,
        high=high,
        value_sets=value_sets,
        suppressed=np.zeros(0, dtype=np.int64),
        time=None if release.time is None else release.time.copy(),
        info=info,
        noisy_counts=np.asarray(noisy_counts, dtype=np.float64),
        noise=noise,
    )
