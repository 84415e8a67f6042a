"""Compromised records (BayFrame, TDP 2019, Def. 4, §4.4) shared by the publisher and the adversary.

Fig. 2's cycle: "If a data publisher knows who are compromised in T_i before releasing its
anonymized version (denoted as CR in Figure 2), she applies the prior-based cascading method to
compute CR_RPD distributions instead of RPD_i distributions and then anonymizes T_i according to
CR_RPD distributions" (§5). The publisher and the adversary must then agree on who is compromised:
:func:`compromised` draws it from the respondent's id and the release alone (each respondent
independently with probability σ in each release, spec 1.7.6), not from a generator whose stream
depends on the order in which each side meets the records. :func:`cascaded_prior` is Eq. 5.
"""

from __future__ import annotations

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 (wrapping arithmetic): a fixed, well-mixed hash."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def compromise_draw(respondent: np.ndarray, t: int, seed: int) -> np.ndarray:
    """A uniform number in [0, 1) per respondent id, fixed by (``seed``, release ``t``, id)."""
    ids = np.asarray(respondent, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = _splitmix64(np.uint64(seed) * np.uint64(0x100000001B3) + np.uint64(t))
        h = _splitmix64(ids ^ key)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def compromised(respondent: np.ndarray, t: int, sigma: float, seed: int = 0) -> np.ndarray:
    """Which respondents are compromised in release ``t``: each with probability ``sigma``,
    independently of the others and of the other releases, the same for every caller."""
    return compromise_draw(respondent, t, seed) < sigma


def cascaded_prior(rpd: np.ndarray, rows: np.ndarray, values: np.ndarray, cr: float) -> np.ndarray:
    """Eq. 5, prior-based cascading: CR_RPD(v, s) = cr + (1 − cr)·RPD(v, s) on the compromised
    value, (1 − cr)·RPD(v, s') on the others (total probability), for the ``rows``; a copy."""
    out = np.array(rpd, dtype=float, copy=True)
    rows = np.asarray(rows, dtype=np.int64)
    out[rows] *= 1.0 - cr
    out[rows, np.asarray(values, dtype=np.int64)] += cr
    return out
