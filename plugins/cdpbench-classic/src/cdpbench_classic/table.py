"""The whole table's distribution of the sensitive values, as the distribution-comparing models
(β-likeness, δ-disclosure privacy) read it from their context."""

from __future__ import annotations

import numpy as np

from cdpbench.errors import DataError
from cdpbench.plugin import ModelContext


def table_distribution(ctx: ModelContext, m: int) -> np.ndarray:
    """``p(s|T)`` as ``[m]`` floats (``ctx.table_distribution``), refused when its length is not the
    sensitive domain's ``m``."""
    q = np.asarray(ctx.table_distribution, dtype=float)
    if q.shape != (m,):
        raise DataError(f"table_distribution has shape {q.shape}; the sensitive domain has {m} values")
    return q
