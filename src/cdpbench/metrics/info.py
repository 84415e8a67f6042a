"""The anonymizer's own numbers per release, as metrics.

An anonymizer may report counts in ``Publication.info`` (BKAA its accepts calls, the invariance
family its counterfeits, delayed and duplicated records, the size of its cache table). Every
number there (int, float or bool; not strings) becomes the metric ``info.<key>``.
"""

from __future__ import annotations

import math
from numbers import Real

from ..plugin import Metric, MetricContext


class PublicationInfo(Metric):
    """The numbers a publication reports about itself (``Publication.info``), as ``info.<key>``."""

    uses_history = False  # reads no ctx.history: this release's publication only (issue #28: the run keeps no more than it needs)
    reads_counts = True  # Publication.info only

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        out = {}
        for key, value in ctx.publication.info.items():
            if isinstance(value, Real) and math.isfinite(float(value)):
                out[f"info.{key}"] = float(value)
        return out
