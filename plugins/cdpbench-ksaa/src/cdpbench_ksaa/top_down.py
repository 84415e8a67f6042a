"""The top-down, global-generalization baselines KSAA compares with (KSAA §1), on a plugin
reference ``tds`` (``anonymizer.tds``; default the cdpbench-bcf plugin's ``tds``: top-down
specialization from ANY, global recoding along the taxonomies, Score = Σ|qid|²), never imported:

* ``cell``: CELL(FMJ) of Shmueli & Tassa (Inf. Sci. 2015), as KSAA describes it: top-down global
  generalization under k-linkability or k-diversity joined with *every* earlier release. A
  specialization is kept only if the run's privacy model accepts the whole publication it gives
  (``PrivacyModel.accepts_publication``: ``k_linkability`` / ``k_diversity`` join the history).
* ``tds4asr``: TDS4ASR of Wang & Fung (KDD 2006, "Anonymizing sequential releases"), as KSAA
  describes it: top-down under k-linkability for *two* releases — the current release is joined
  with the previous one only (from the third release on, still only with the previous one).

Readings (the papers are not in papers/): both use the lab's ``tds`` loop and Score, not their
papers' own search metrics (CELL's cell generalization, TDS4ASR's InfoGain / AnonymityLoss);
``tds`` generalizes categorical QIs along their taxonomies and splits numeric ones at the median.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cdpbench.data import History, Publication, Release
from cdpbench.plugin import Anonymizer, PublishContext, plugin_ref


@dataclass
class CellParams:
    tds: Any = plugin_ref("anonymizer", "tds", "the top-down anonymizer run against the join with every earlier release (KSAA §1: CELL(FMJ))")


class Cell(Anonymizer):
    """CELL(FMJ) as KSAA's baseline: top-down global generalization, each step checked against the join with every earlier release."""

    Params = CellParams

    def __init__(self, params=None):
        super().__init__(params)
        self.tds: Anonymizer = self.params.tds

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        return self.tds.publish(release, ctx)


@dataclass
class TDS4ASRParams:
    tds: Any = plugin_ref("anonymizer", "tds", "the top-down anonymizer run against the join with the previous release only (KSAA §1: TDS4ASR)")


class TDS4ASR(Anonymizer):
    """TDS4ASR (Wang & Fung 2006) as KSAA's baseline: top-down global generalization joined with the previous release only."""

    Params = TDS4ASRParams

    def __init__(self, params=None):
        super().__init__(params)
        self.tds: Anonymizer = self.params.tds

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        h = ctx.history
        last = History(h.releases[-1:], h.publications[-1:])
        return self.tds.publish(release, replace(ctx, history=last, model_context=replace(ctx.model_context, history=last)))
