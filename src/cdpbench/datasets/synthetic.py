"""A synthetic Adult-like base table of any size, for the churn scenario at scale (``churn``'s
``base=synthetic``).

Each row is a uniformly drawn row of UCI Adult's 30,162 complete training rows (a bootstrap: the
rows keep Adult's joint distribution of every column, so QIs and the sensitive value stay as
correlated as in Adult), drawn from the run's generator, so the same seed gives the same table.
The synthetic ``zip`` (:mod:`~cdpbench.datasets.zipcodes`) is, as over Adult, a function of the
row position (= respondent id) alone. Not UCI data: a resample of it. Drawing 3.3 million rows
takes well under a second; what a release costs is the churn process's own encoding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .adult import _load_adult_cached
from .zipcodes import ZIP_COLUMN, zips_of_rows


def synthetic_adult(rows: int, columns: list[str], rng: np.random.Generator) -> pd.DataFrame:
    """``rows`` rows drawn uniformly with replacement from Adult's complete training rows, with
    ``columns`` (Adult's own, or the synthetic ``zip``, given per row position)."""
    adult = _load_adult_cached()
    picks = rng.integers(len(adult), size=rows)
    own = [c for c in columns if c != ZIP_COLUMN]
    frame = pd.DataFrame({c: adult[c].to_numpy()[picks] for c in own})
    if ZIP_COLUMN in columns:
        frame[ZIP_COLUMN] = zips_of_rows(rows)
    return frame
