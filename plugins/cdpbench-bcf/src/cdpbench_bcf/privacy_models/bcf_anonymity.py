"""``bcf_anonymity``: BCF-anonymity as a privacy model with a whole-history verifier (BCF §3.2,
§7.1).

``verify`` re-checks every publication against every earlier one of the run: the micro F, C and B
attacks on each pair ``(R_i, R_n)`` and the §7.1 compositions (:mod:`~cdpbench_bcf.history`). A
violation is a class whose anonymity under one of those attacks is below ``k``: a class of an
earlier release under F (or a composition's F), a class of ``R_n`` under C or B; ``levels`` gives
FA, CA, BA (from the second release on) and ``k``, the smallest class of ``R_n`` (the only
requirement at the first release, where BCF-anonymity is k-anonymity).

``accepts`` judges single candidate groups, which carry no generalized QI and no history: it
answers ``|Q| >= k``, necessary for BCF-anonymity (every anonymity is at most the class size).
Enforcing BCF-anonymity is the ``bcf`` anonymizer's job; with ``tds`` this model is k-anonymity.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport

from ..classes import Classes
from ..history import LatestAttacks, ReleaseChain
from ..params import BCFParams


class BCFAnonymity(PrivacyModel):
    """BCF-anonymity (Fung et al. EDBT 2008): FA, CA, BA >= k against every earlier cumulative release."""

    Params = BCFParams

    def __init__(self, params=None):
        super().__init__(params)
        self.chain = ReleaseChain(phantom=self.params.phantom)
        self._last: tuple | None = None  # (publication, its classes, its attacks) of the last verify

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return batch.sizes() >= self.params.k

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        k = self.params.k
        earlier = ctx.history.publications
        if len(self.chain.classes) > len(earlier):  # a new run with this instance: start over
            self.chain, self._last = ReleaseChain(phantom=self.params.phantom), None
        for pub in earlier[len(self.chain.classes) :]:
            if self._last is not None and self._last[0] is pub:  # verified last time: reuse its attacks
                self.chain.add(self._last[1], self._last[2])
            else:
                self.chain.add(Classes.from_publication(pub))
        latest = Classes.from_publication(publication)
        att = self.chain.attack(latest) if self.chain.classes else LatestAttacks()
        self._last = (publication, latest, att)
        sizes = latest.size
        bad_now = sizes < k
        bad_earlier = 0
        for p in list(att.pairs.values()) + list(att.composed.values()):
            bad_earlier += int(np.count_nonzero(p.forward_anonymity < k))
            bad_now |= p.cross_anonymity < k
        for p in att.pairs.values():
            bad_now |= p.backward_anonymity < k
        bad = int(bad_now.sum()) + bad_earlier
        levels = {"k": float(sizes.min()) if len(sizes) else 0.0}
        if self.chain.classes:
            levels.update(FA=att.FA, CA=att.CA, BA=att.BA)
        return VerifyReport(bad == 0, bad, levels)
