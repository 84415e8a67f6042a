"""Synthetic zip codes: a fixed, documented ``zip`` quasi-identifier for tables that have none.

The (tau, m)-slicedBucket paper (Khan et al.) runs on UCI Adult with QI = age, gender, zip code,
but Adult has no zip code. :func:`synthetic_zips` gives every respondent one, in the style of the
paper's Indiana examples (47302-47955). The codes are **synthetic**: they come from no data set,
carry no geography (some may not exist as real US zip codes) and are independent of every real
column, so the paper's phi^2 attribute grouping puts ``zip`` in a column group of its own, as the
paper does ({age, gender}, {zip}, {disease}).

**Domain** (:data:`ZIP_CODES`, 480 codes): ``47ADC`` with area ``A`` in 0-9 (the ten 3-digit
areas 470-479), district ``D`` in 0-5 and final digit ``C`` in 1-8, i.e. 10 x 6 x 8 codes from
47001 to 47958. It holds every zip the paper prints (47302-47308, 47407, 47901-47907, 47915,
47921, 47955).

**Distribution**: uniform over the 480 codes (equivalently: area uniform over 10, district
uniform over 6 within the area, final digit uniform over 8 within the district), drawn
independently per respondent. On the 30,162 cleaned Adult rows every code occurs (about 63
respondents each).

**Determinism**: the zip of respondent ``i`` is ``ZIP_CODES[splitmix64(ZIP_SEED + (i + 1) *
0x9E3779B97F4A7C15) mod 480]`` (the SplitMix64 finalizer, in unsigned 64-bit arithmetic), with the
fixed seed :data:`ZIP_SEED` = 47906. It depends on the respondent id alone: not on the run's
random generator, the table's length, the process or the NumPy version, so a respondent keeps
its zip in every release and every run.

**Taxonomy** (:func:`zip_taxonomy`): the prefix hierarchy the paper generalizes by, the longest
common prefix padded with ``*``: ``47906 -> 4790* -> 479** -> 47***`` (height 3: 480 codes, 60
districts, 10 areas, root ``47***``). ``4****`` and ``*`` are left out because every code starts
with 47: they would cover exactly what ``47***`` covers (see :meth:`Taxonomy.from_prefixes`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import DataError
from ..taxonomy import Taxonomy

#: Name of the synthetic column.
ZIP_COLUMN = "zip"
#: Fixed seed of the respondent -> zip draw (the first zip of the paper's Table 1a).
ZIP_SEED = 47_906
ZIP_AREAS = "0123456789"  # third digit: the 3-digit areas 470..479
ZIP_DISTRICTS = "012345"  # fourth digit
ZIP_FINAL = "12345678"  # fifth digit
#: The 480 codes of the domain, sorted (= leaf order of :func:`zip_taxonomy`).
ZIP_CODES: tuple[str, ...] = tuple(f"47{a}{d}{c}" for a in ZIP_AREAS for d in ZIP_DISTRICTS for c in ZIP_FINAL)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(ids: np.ndarray, seed: int) -> np.ndarray:
    """SplitMix64 output number ``i + 1`` of the stream started at ``seed``, for every ``i`` in ``ids``."""
    z = np.uint64(seed) + (ids.astype(np.uint64) + np.uint64(1)) * _GOLDEN  # wraps mod 2^64
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def synthetic_zips(ids: np.ndarray | list[int] | range) -> np.ndarray:
    """The synthetic zip code (a 5-character string) of every respondent id in ``ids``.

    Uniform over :data:`ZIP_CODES`, a pure function of the id and :data:`ZIP_SEED` (see the
    module docstring). Ids must be integers >= 0.
    """
    ids = np.asarray(ids)
    if ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0):
        raise DataError(f"synthetic zip codes need respondent ids that are integers >= 0 (got dtype {ids.dtype})")
    index = _splitmix64(ids.astype(np.int64), ZIP_SEED) % np.uint64(len(ZIP_CODES))
    return np.asarray(ZIP_CODES, dtype=object)[index.astype(np.int64)]


@lru_cache(maxsize=4)
def _zips_of_rows(n: int) -> np.ndarray:
    zips = synthetic_zips(np.arange(n))
    zips.flags.writeable = False
    return zips


def zips_of_rows(n: int) -> np.ndarray:
    """The zips of respondents ``0..n-1`` (row positions of a base table); built once per ``n``
    and process, returned as a fresh copy."""
    return _zips_of_rows(int(n)).copy()


@lru_cache(maxsize=1)
def zip_taxonomy() -> Taxonomy:
    """Prefix taxonomy over :data:`ZIP_CODES`: levels 5 digits, ``4790*``, ``479**``, root ``47***``."""
    return Taxonomy.from_prefixes(ZIP_CODES)
