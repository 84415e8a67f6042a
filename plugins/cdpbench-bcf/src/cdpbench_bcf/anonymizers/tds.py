"""``tds``: top-down specialization from ANY with the run's privacy model as the validity test —
the k-anonymized baselines of BCF §6 ("R1 and R2 are k-anonymized separately by ... the
algorithm in Section 5 [modified] to enforce the k-anonymity on a single table").

A specialization is valid when the configured privacy model accepts every class it creates
(``privacy_model=k_anonymity privacy_model.k=40`` for the paper's baselines; any model of the lab
works: l-diversity, t-closeness, ...) and, when the model judges whole publications
(``PrivacyModel.accepts_publication``, e.g. the sequential-release models that join the earlier
releases), the publication the specialization would give. Each release is generalized on its own,
with global recoding along the taxonomies; only such a model looks at the history. See :mod:`~cdpbench_bcf.specialization` for the
loop, Score and tie-breaks.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.plugin import Anonymizer, PrivacyModel, PublishContext

from ..specialization import CutState, Split


class TopDownSpecialization(Anonymizer):
    """Top-down specialization (Fung et al. ICDE 2005; BCF §5–6 baseline): global recoding, Score = Σ|qid|², any privacy model."""

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        state = CutState(release)
        accepts = ctx.predicate(release)
        model, mctx = ctx.privacy_model, ctx.model_context
        whole = type(model).accepts_publication is not PrivacyModel.accepts_publication
        calls = 0

        def valid(s: Split) -> bool:
            nonlocal calls
            calls += 1
            if not np.all(accepts(s.rows, s.segment, s.n_new)):
                return False
            return not whole or bool(model.accepts_publication(state.publication(split=s), mctx))

        if len(release) and not np.all(accepts(np.arange(len(release)), np.zeros(len(release), np.int64), 1)):
            steps = 0  # the most general table already fails: publish it (the verifier reports it)
        else:
            steps = state.run(valid)
        return state.publication({"specializations": steps, "validity_checks": calls})
