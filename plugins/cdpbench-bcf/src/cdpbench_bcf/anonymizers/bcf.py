"""``bcf``: the BCF-anonymizer (BCF §5.2, Algorithm 1).

Release ``R_n`` (covering ``D_1 ∪ .. ∪ D_n``) is specialized top-down from ANY along the taxonomies
(:mod:`~cdpbench_bcf.specialization`: Score = Σ|qid|², highest first, invalid candidates dropped
for good). A specialization is valid when, on the classes it would produce,

* FA >= k and BA >= k against every earlier release (CA = FA, Theorem 4.5), including the
  compositions of §7.1 (:mod:`~cdpbench_bcf.history`); for the first release, with no history, this
  is k-anonymity (the paper's R1 is k-anonymized by the same algorithm);
* every new class has at least k records, and the run's privacy model accepts every new class
  (§7.2: further requirements on top of BCF-anonymity; with ``privacy_model=bcf_anonymity`` that
  is |qid| >= k again).

Reading: FA and BA are recomputed exactly for each candidate state (vectorized, against the
fixed earlier releases) instead of the paper's incremental Procedures 2–3. Procedure 2 keeps
F(qid1) as a running maximum, which can report a lower FA than the exact value because FA is not
anti-monotone in corner cases (specs/bcf.md §2.6 item 1); Procedure 3's case 1 updates B only for
the new classes, but specializing ``w`` also removes records from ``G2`` of groups in other
classes that were comparable through the same ``qid1``, which raises their crack. The exact
recomputation makes every accepted step satisfy FA, CA, BA >= k by construction.

k is ``anonymizer.k`` when given, else (null, the default) the run's privacy model's k
(``bcf_anonymity``'s in the presets), read from ``PublishContext.privacy_model`` at each publish.

Corollary 5.1: a BCF-anonymous ``R_n`` exists iff the most general one is; for two releases that
is ``|D_2| >= k`` (BA of the all-ANY table = |D_2|; FA = CA = the smallest class of R1). With an
empty ``D_2`` no T2 target exists and, by default, only FA = CA >= k binds; with ``phantom=true``
the literal BA is 0 and nothing is feasible (``cdpbench_bcf.correspondence``'s readings). When the most
general table fails, it is published, ``info.feasible = 0``, and the verifier reports the
violations.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.plugin import Anonymizer, PublishContext

from ..classes import Classes
from ..history import ReleaseChain
from ..params import BCFAnonymizerParams, anonymizer_k
from ..specialization import CutState, Split


class BCFAnonymizer(Anonymizer):
    """BCF-anonymizer (Fung et al. EDBT 2008, Algorithm 1): top-down specialization keeping FA, CA, BA >= k against every earlier release."""

    Params = BCFAnonymizerParams

    def __init__(self, params=None):
        super().__init__(params)
        self.chain = ReleaseChain(phantom=self.params.phantom)

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        k = anonymizer_k(self.params.k, ctx)  # null: the run's privacy model's k
        for pub in ctx.history.publications[len(self.chain.classes) :]:
            self.chain.add(Classes.from_publication(pub))
        state = CutState(release)
        accepts = ctx.predicate(release)
        calls = 0

        def bcf_ok(classes: Classes) -> bool:
            if np.any(classes.size < k):
                return False
            att = self.chain.attack(classes)
            return att.FA >= k and att.BA >= k

        def valid(s: Split) -> bool:
            nonlocal calls
            calls += 1
            if np.any(np.bincount(s.segment, minlength=s.n_new) < k):
                return False
            if not np.all(accepts(s.rows, s.segment, s.n_new)):
                return False
            return bcf_ok(state.classes(s))

        feasible = len(release) > 0 and bcf_ok(state.classes())
        steps = state.run(valid) if feasible else 0
        return state.publication({"specializations": steps, "validity_checks": calls, "feasible": float(feasible)})
