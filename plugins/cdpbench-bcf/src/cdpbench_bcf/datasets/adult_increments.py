"""``adult_increments``: each increment of ``adult_cumulative`` published alone (release ``t`` =
``Dt``): BCF Fig. 2's "k-anonymized D2" alternative (§6), safe from correspondence attacks because
its releases hold disjoint sets of individuals (the scenario, its attribute sets and parameters:
:mod:`~cdpbench_bcf.cumulative`)."""

from __future__ import annotations

from typing import ClassVar

from ..cumulative import AdultReleases


class AdultIncrements(AdultReleases):
    """Each increment of Adult cumulative published alone (release t = Dt): BCF Fig. 2's k-anonymized D2."""

    scenario: ClassVar[str] = "continuous"
    cumulative: ClassVar[bool] = False
