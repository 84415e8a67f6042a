"""BayFrame's adversary (Amiri et al., TDP 2019, §4.3 and §5): RPD beliefs, the Bayesian
estimator, and compromised records (Def. 4–6).

Per public view, as the framework cycle of Fig. 2 runs it on the adversary's side:

1. RPD, the revised prior of every candidate respondent, from the ``knowledge`` reference, by
   default the ``bayframe`` knowledge (:mod:`cdpbench_bayframe.knowledge.bayframe`): PD_sv for a
   new respondent, Eq. 3 on its last posteriors for one published before (§4.3's "last computed
   RPD" for one absent from the last release: ``attacker.knowledge.absent``), with d, the
   revision, PD_sv and PD_cor at ``attacker.knowledge.steps`` / ``.revision`` / ``.sv`` /
   ``.correlation``. The knowledge is given the view's respondents as the population holds them
   (ids, exact QIs and sensitive values): a PD_sv mined from the table (``sv=kernel``, BayFrame
   §6.1's Adult, "PD_sv is extracted as in JS-reduce") is mined from the data to be released, as
   JS-reduce §5.1 extracts BK_sv ("from the same data that are going to be generalized and
   released, as done in [17]"), the worst case classic's ``snapshot`` adversary takes too; the
   ``model`` and ``uniform`` PD_sv and the revision (Eq. 3) read no sensitive value;
2. compromised records (Def. 4): each published respondent is compromised independently with
   probability ``sigma`` in each release (drawn from the release and its id,
   :func:`cdpbench_bayframe.compromise.compromised`, so that a publisher with the same sigma and
   ``compromise_seed`` knows the same records, Fig. 2), and the adversary learns its true value with
   confidence ``cr`` (spec reading 1.7.6: one entry CR(v, true s) = cr, no other entries). The
   true value comes from the simulation, not from the view: it is what "compromised" means;
   * ``cascading="prior"`` (Eq. 5): CR_RPD(v, s) = cr + (1 − cr)·RPD(v, s) on the true value,
     (1 − cr)·RPD(v, s') on the others, before the estimator (u then comes from CR_RPD);
   * ``cascading="posterior"`` (Def. 6 with Example 4's rule): the estimator's Dirichlet
     parameters take the entries (u from the RPD);
   * ``cascading="none"``: no compromised record (``sigma`` ignored).
   ``cr = 1`` removes the respondent and one tuple of its value from the group (Def. 4), in
   either mode.
3. PB, the posterior of every candidate respondent in its group, from the ``estimator``
   reference: by default the Bayesian estimator (Eq. 2,
   :mod:`cdpbench_bayframe.estimators.bayesian`) with its own Dirichlet parameter
   ``attacker.estimator.a``, the weights normalized over the group's values when
   ``attacker.estimator.normalize``, the compromised records passed on, ties in u
   broken with the attack's generator (``attacker.estimator.seed`` is not used). Another
   estimator (e.g. JS-reduce's ``configuration``, Fig. 11's JS-reduce+Prior) is asked for its
   posterior from the weights; posterior-based cascading needs the Bayesian one;
4. revision: PB is stored for the next view.

The result marks the compromised respondents (``AttackResult.given``), so the belief metrics also
report the gains over the non-compromised records only (Fig. 4b); ``extra`` counts them.
The adversary reads ``population.sensitive`` only for the records it compromises and, with
``sv=kernel``, to mine PD_sv (step 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import PublicView, Release, rows_of
from cdpbench.errors import require
from cdpbench.plugin import AttackContext, Attacker, AttackResult, Estimator, Knowledge, plugin_ref

from ..compromise import cascaded_prior
from ..compromise import compromised as is_compromised
from ..estimators.bayesian import BayesianEstimator

CASCADING = ("none", "prior", "posterior")


@dataclass
class BayFrameAttackerParams:
    knowledge: Any = plugin_ref(
        "knowledge", "bayframe",
        "the adversary's RPD (Eq. 3): attacker.knowledge.steps (d: 1 FDTMM, 2 SDTMM), .revision, .sv, .correlation",
    )
    estimator: Any = plugin_ref(
        "estimator", "bayesian",
        "PB: 'bayesian' (Eq. 2; attacker.estimator.a, attacker.estimator.normalize) or another estimator, e.g. "
        "'configuration' (JS-reduce's; prior cascading only) for Fig. 11's JS-reduce+Prior",
    )
    cascading: str = field(default="none", metadata={"help": "compromised records: 'none', 'prior' (Eq. 5) or 'posterior' (Def. 6)"})
    sigma: float = field(default=0.1, metadata={"help": "probability that a published respondent is compromised, per release"})
    cr: float = field(default=0.9, metadata={"help": "confidence CR of a compromised record, in (0, 1]"})
    compromise_seed: int = field(
        default=0,
        metadata={"help": "which respondents are compromised is drawn from (this seed, the release, the id): the same "
                  "records as a publisher with knowledge.sigma and the same seed (>= 0)"},
    )

    def __post_init__(self) -> None:  # knowledge, estimator: plugin references, validated and built by the core
        require(self.cascading in CASCADING, "cascading", "'none', 'prior' or 'posterior'", self.cascading)
        require(isinstance(self.sigma, (int, float)) and 0 <= self.sigma <= 1, "sigma", "a number in [0, 1]", self.sigma)
        require(isinstance(self.cr, (int, float)) and 0 < self.cr <= 1, "cr", "a number in (0, 1]", self.cr)
        require(isinstance(self.compromise_seed, int) and not isinstance(self.compromise_seed, bool)
                and self.compromise_seed >= 0, "compromise_seed", "an integer >= 0", self.compromise_seed)

    def check_references(self) -> None:
        """Posterior-based cascading (Def. 6) is the Bayesian estimator's (Eq. 2); the adversary's
        compromised records are its own sigma / cr, not its knowledge's (the publisher's)."""
        sigma = getattr(getattr(self.knowledge, "params", None), "sigma", 0)
        require(sigma == 0, "knowledge.sigma", "0 for an adversary (its compromised records are attacker.sigma / "
                "attacker.cr; knowledge.sigma is the publisher's)", sigma)
        name = getattr(self.estimator, "plugin_name", type(self.estimator).__name__)
        require(isinstance(self.estimator, BayesianEstimator) or self.cascading != "posterior", "cascading",
                f"'none' or 'prior' with estimator {name!r} (posterior-based cascading needs the Bayesian estimator, "
                "estimator=bayesian)", self.cascading)


class BayFrameAttacker(Attacker):
    """BayFrame's adversary: RPD beliefs (Eq. 3), the Bayesian estimator (Eq. 2), compromised records (Def. 4–6)."""

    uses_past_views = False  # reads only ctx.views[-1]: each view on its own (issue #28: the run keeps no more than it needs)

    Params = BayFrameAttackerParams

    def __init__(self, params: BayFrameAttackerParams | None = None):
        super().__init__(params)
        p = self.params
        self.knowledge: Knowledge = p.knowledge
        #: the Bayesian estimator (Eq. 2), asked with the compromised records and the attack's
        #: generator; None: another estimator, asked for its posterior from the weights
        self.bayesian: BayesianEstimator | None = p.estimator if isinstance(p.estimator, BayesianEstimator) else None

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        view.require_single_partition("attacker bayframe (its estimator reads a QI group's values)")
        p = self.params
        m = view.schema.sensitive.size
        respondent = np.asarray(view.respondent, dtype=np.int64)
        population = ctx.population
        rows, found = rows_of(population.respondent, respondent)
        known = Release(  # the view's respondents as the population holds them (step 1)
            t=view.t,
            schema=population.schema,
            respondent=respondent[found],
            qi=population.qi[rows[found]],
            sensitive=population.sensitive[rows[found]],
            truth=population.truth,
        )
        rpd = np.full((len(respondent), m), 1.0 / m)
        rpd[found] = self.knowledge.prior(known)
        compromised = np.zeros(len(respondent), dtype=bool)
        if p.cascading != "none" and p.sigma > 0:  # the publisher's draw too (compromise.compromised)
            compromised = found & is_compromised(respondent, view.t, p.sigma, p.compromise_seed)
        cr_rows = np.flatnonzero(compromised)
        cr_values = population.sensitive[rows[cr_rows]]  # what the compromise reveals
        weights = rpd
        entries = None
        if len(cr_rows) and p.cascading == "prior":
            weights = cascaded_prior(rpd, cr_rows, cr_values, p.cr)
            certain = p.cr >= 1.0
            entries = (cr_rows, cr_values, np.ones(len(cr_rows))) if certain else None
        elif len(cr_rows) and p.cascading == "posterior":
            entries = (cr_rows, cr_values, np.full(len(cr_rows), float(p.cr)))
        if self.bayesian is None:
            other: Estimator = p.estimator
            posterior = np.asarray(other.posterior(weights, view.sensitive, view.group, view.n_groups, m), dtype=float)
        else:
            posterior = self.bayesian.posterior(weights, view.sensitive, view.group, view.n_groups, m,
                                                compromised=entries, rng=ctx.rng)
        self.knowledge.revise(view, posterior, np.where(found, respondent, -1))
        extra = {"compromised": float(len(cr_rows))} if p.cascading != "none" else {}
        return AttackResult(
            respondent=respondent.copy(),
            posterior=posterior,
            extra=extra,
            given=compromised if p.cascading != "none" else None,
        )
