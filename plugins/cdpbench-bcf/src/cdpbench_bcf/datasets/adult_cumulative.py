"""``adult_cumulative``: Adult as a cumulative scenario (BCF §6 and §7.1): release ``t`` publishes
``D1 ∪ ... ∪ Dt`` with every record's timestamp, D1 = adult.test, D2, D3, ... consecutive slices of
``d2`` records of adult.data (the scenario, its attribute sets and parameters:
:mod:`~cdpbench_bcf.cumulative`)."""

from __future__ import annotations

from typing import ClassVar

from ..cumulative import AdultReleases


class AdultCumulative(AdultReleases):
    """Adult cumulative (BCF §6): R1 = adult.test, each later release adds the next d2 records of adult.data."""

    scenario: ClassVar[str] = "cumulative"
    cumulative: ClassVar[bool] = True
