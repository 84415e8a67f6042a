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

Both are :class:`TopDownBaseline` (they run ``anonymizer.tds``), each with its own history:
``cdpbench_ksaa.anonymizers.cell`` and ``cdpbench_ksaa.anonymizers.tds4asr``.
"""

from __future__ import annotations

from cdpbench.plugin import Anonymizer


class TopDownBaseline(Anonymizer):
    """A top-down baseline: the plugin reference ``tds`` (``anonymizer.tds``) publishes, against the
    history the baseline gives it (``cell``: every earlier release; ``tds4asr``: the previous one)."""

    def __init__(self, params=None):
        super().__init__(params)
        self.tds: Anonymizer = self.params.tds
