"""``cell``: CELL(FMJ) of Shmueli & Tassa (Inf. Sci. 2015) as KSAA describes it (KSAA §1): top-down
global generalization under k-linkability or k-diversity joined with *every* earlier release, on
the plugin reference ``tds`` (``anonymizer.tds``; default the cdpbench-bcf plugin's ``tds``). A
specialization is kept only if the run's privacy model accepts the whole publication it gives
(``PrivacyModel.accepts_publication``: ``k_linkability`` / ``k_diversity`` join the history).
Readings and what the two baselines share: :mod:`~cdpbench_ksaa.top_down`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdpbench.data import Publication, Release
from cdpbench.plugin import PublishContext, plugin_ref

from ..top_down import TopDownBaseline


@dataclass
class CellParams:
    tds: Any = plugin_ref("anonymizer", "tds", "the top-down anonymizer run against the join with every earlier release (KSAA §1: CELL(FMJ))")


class Cell(TopDownBaseline):
    """CELL(FMJ) as KSAA's baseline: top-down global generalization, each step checked against the join with every earlier release."""

    Params = CellParams

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        return self.tds.publish(release, ctx)
