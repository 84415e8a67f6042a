"""``j_similarity_join``: KSAA's privacy model as its introduction states it — J-similarity
(BayFrame, TDP 2019, Def. 7: k-anonymity, similar beliefs inside each group, basic β-likeness)
"extended ... to be used in sequential releases": the beliefs judged are the defender's beliefs
about each respondent *after the join* of the releases so far.

The lab's reading: the defender's prior of each published record (the run's knowledge,
``GroupBatch.prior``) is restricted to the values its respondent can be linked to through the
join (:mod:`~cdpbench_ksaa.linkability`, full matching join by default; more than two releases
joined as ``join`` says, ``joint`` or ``pairwise``, the default) and renormalized (kept as it is when
the join links the respondent to nothing), then the model of the plugin reference ``inner``
(default: cdpbench-bayframe's ``j_similarity``; its k, J and beta are ``privacy_model.inner.k``,
``.j``, ``.beta``) judges every group with those beliefs. ``accepts`` (single candidate groups,
no history) is the inner model's own; ``accepts_publication``, ``violating_groups`` and
``verify`` use the joined beliefs. At the first release there is nothing to join: it is the inner
model (``j_similarity``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport, plugin_ref

from ..joint_matching import JOIN_HELP, JOINS
from ..linkability import candidates
from ..transition_relation import (MIN_TRANSITION_HELP, PD_COR_HELP, TRANSITIONS, TRANSITIONS_HELP, RelationOf,
                                   check_min_transition, check_pd_cor)

_BLOCK = 1 << 14  # rows a block in joined_batch


@dataclass
class JSimilarityJoinParams:
    inner: Any = plugin_ref(
        "privacy_model", "j_similarity",
        "the model judging each group on the joined beliefs (BayFrame Def. 7 J-similarity; privacy_model.inner.k, "
        ".j (largest JS divergence of the joined beliefs in a group, bits), .beta (basic beta-likeness))",
    )
    transitions: str = field(default="none", metadata={"help": TRANSITIONS_HELP})
    pruned: bool = field(default=True, metadata={"help": "join with the full matching join (true) or the natural join (false)"})
    join: str = field(default="pairwise", metadata={"help": JOIN_HELP})
    min_transition: float = field(default=0.0, metadata={"help": MIN_TRANSITION_HELP})
    pd_cor: Any = plugin_ref("knowledge", "bayframe", PD_COR_HELP)

    def __post_init__(self) -> None:
        require(self.transitions in TRANSITIONS, "transitions", f"one of {list(TRANSITIONS)}", self.transitions)
        require(isinstance(self.pruned, bool), "pruned", "true or false", self.pruned)
        require(self.join in JOINS, "join", f"one of {list(JOINS)}", self.join)
        check_min_transition(self.min_transition)

    def check_references(self) -> None:
        check_pd_cor(self)


class JSimilarityJoin(PrivacyModel):
    """J-similarity over the joined releases (KSAA's model, lab reading): the defender's beliefs restricted by the linkage, then j_similarity."""

    Params = JSimilarityJoinParams
    needs_prior = True

    def __init__(self, params=None):
        super().__init__(params)
        self.inner: PrivacyModel = self.params.inner
        self._relation = RelationOf(self.params)  # transitions (PD_cor built per release)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return self.inner.accepts(batch, ctx)

    def joined_batch(self, publication: Publication, ctx: ModelContext) -> GroupBatch:
        """The publication's groups with each record's prior restricted by the join."""
        prior = ctx.prior_for(publication)
        if prior is None or not ctx.history.publications:
            return publication.batch(prior)
        views = [q.public() for q in ctx.history.publications] + [publication.public()]
        cand = candidates(views, transitions=self._relation(ctx.release, len(views)), pruned=self.params.pruned, join=self.params.join)
        allowed = cand.value_table(prior.shape[1])
        order = np.argsort(cand.respondent)
        pos = np.minimum(np.searchsorted(cand.respondent[order], publication.respondent), len(order) - 1)
        found = cand.respondent[order][pos] == publication.respondent
        rows = np.where(found, order[pos], -1)
        out = np.empty(prior.shape)
        for start in range(0, len(rows), _BLOCK):  # row by row: the same floats without [N, m] temporaries
            here = slice(start, start + _BLOCK)
            mask = np.where(rows[here, None] >= 0, allowed[np.maximum(rows[here], 0)], True)
            joined = np.where(mask, prior[here], 0.0)
            mass = joined.sum(axis=1, keepdims=True)
            out[here] = np.where(mass > 0, joined / np.where(mass > 0, mass, 1.0), prior[here])
        return publication.batch(out)

    def violating_groups(self, publication: Publication, ctx: ModelContext) -> np.ndarray:
        if publication.n_groups == 0:
            return np.zeros(0, np.int64)
        return np.flatnonzero(~np.asarray(self.inner.accepts(self.joined_batch(publication, ctx), ctx), dtype=bool))

    def accepts_publication(self, publication: Publication, ctx: ModelContext) -> bool:
        return len(self.violating_groups(publication, ctx)) == 0

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        bad = len(self.violating_groups(publication, ctx))
        return VerifyReport(bad == 0, bad, self.inner.levels(publication, ctx))
