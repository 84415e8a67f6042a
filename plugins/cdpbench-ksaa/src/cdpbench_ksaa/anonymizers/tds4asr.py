"""``tds4asr``: TDS4ASR of Wang & Fung (KDD 2006, "Anonymizing sequential releases") as KSAA
describes it (KSAA §1): top-down under k-linkability for *two* releases — the current release is
joined with the previous one only (from the third release on, still only with the previous one),
on the plugin reference ``tds`` (``anonymizer.tds``; default the cdpbench-bcf plugin's ``tds``).
Readings and what the two baselines share: :mod:`~cdpbench_ksaa.top_down`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cdpbench.data import History, Publication, Release
from cdpbench.plugin import PublishContext, plugin_ref

from ..top_down import TopDownBaseline


@dataclass
class TDS4ASRParams:
    tds: Any = plugin_ref("anonymizer", "tds", "the top-down anonymizer run against the join with the previous release only (KSAA §1: TDS4ASR)")


class TDS4ASR(TopDownBaseline):
    """TDS4ASR (Wang & Fung 2006) as KSAA's baseline: top-down global generalization joined with the previous release only."""

    Params = TDS4ASRParams

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        h = ctx.history
        last = History(h.releases[-1:], h.publications[-1:])
        return self.tds.publish(release, replace(ctx, history=last, model_context=replace(ctx.model_context, history=last)))
