"""BayFrame's adversary (Amiri et al., TDP 2019, §4.3 and §5): RPD beliefs, the Bayesian
estimator, and compromised records (Def. 4–6).

Per public view, as the framework cycle of Fig. 2 runs it on the adversary's side:

1. RPD, the revised prior of every candidate respondent, from the ``bayframe`` knowledge
   (PD_sv for a new respondent, Eq. 3 for one published in the last release, its last RPD
   otherwise; :mod:`cdpbench_bayframe.knowledge`);
2. compromised records (Def. 4): each published respondent is compromised independently with
   probability ``sigma`` in each release, and the adversary learns its true value with
   confidence ``cr`` (spec reading 1.7.6: one entry CR(v, true s) = cr, no other entries). The
   true value comes from the simulation, not from the view: it is what "compromised" means;
   * ``cascading="prior"`` (Eq. 5): CR_RPD(v, s) = cr + (1 − cr)·RPD(v, s) on the true value,
     (1 − cr)·RPD(v, s') on the others, before the estimator (u then comes from CR_RPD);
   * ``cascading="posterior"`` (Def. 6 with Example 4's rule): the estimator's Dirichlet
     parameters take the entries (u from the RPD);
   * ``cascading="none"``: no compromised record (``sigma`` ignored).
   ``cr = 1`` removes the respondent and one tuple of its value from the group (Def. 4), in
   either mode.
3. PB, the posterior of every candidate respondent in its group (the Bayesian estimator,
   :mod:`cdpbench_bayframe.bayesian`, Dirichlet parameter ``a``, weights normalized over the
   group's values when ``normalize``);
4. revision: PB is stored for the next view.

The result marks the compromised respondents (``AttackResult.given``), so the belief metrics also
report the gains over the non-compromised records only (Fig. 4b); ``extra`` counts them.
The adversary never reads ``population.sensitive`` but for the records it compromises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import PublicView, Release
from cdpbench.errors import require
from cdpbench.plugin import AttackContext, Attacker, AttackResult, Estimator
from cdpbench.registry import default_registry

from .bayesian import bayesian_posterior
from .knowledge import BayFrameKnowledge, BayFrameKnowledgeParams

CASCADING = ("none", "prior", "posterior")


@dataclass
class BayFrameAttackerParams:
    steps: int = field(default=1, metadata={"help": "d of Eq. 3: 1 (FDTMM) or 2 (SDTMM)"})
    revision: str = field(default="literal", metadata={"help": "'literal' (Eq. 3-4) or 'product' (JS-reduce's revision)"})
    sv: str = field(default="model", metadata={"help": "PD_sv: 'model', 'kernel' or 'uniform'"})
    correlation: str = field(default="model", metadata={"help": "PD_cor: 'model' or 'uniform'"})
    bandwidth: float = field(default=0.3, metadata={"help": "sv=kernel: the kernel bandwidth"})
    estimator: str = field(
        default="bayesian",
        metadata={"help": "'bayesian' (Eq. 2) or another installed estimator, e.g. 'configuration' (JS-reduce's; "
                  "prior cascading only) for Fig. 11's JS-reduce+Prior"},
    )
    a: float = field(default=1.0, metadata={"help": "Dirichlet parameter a of the Bayesian estimator (> 0)"})
    normalize: bool = field(default=True, metadata={"help": "normalize RPD over the group's values (Table 9)"})
    cascading: str = field(default="none", metadata={"help": "compromised records: 'none', 'prior' (Eq. 5) or 'posterior' (Def. 6)"})
    sigma: float = field(default=0.1, metadata={"help": "probability that a published respondent is compromised, per release"})
    cr: float = field(default=0.9, metadata={"help": "confidence CR of a compromised record, in (0, 1]"})

    def __post_init__(self) -> None:
        BayFrameKnowledgeParams(self.steps, self.revision, self.sv, self.correlation, self.bandwidth)  # validates them
        require(isinstance(self.a, (int, float)) and np.isfinite(self.a) and self.a > 0, "a", "a number > 0", self.a)
        require(isinstance(self.normalize, bool), "normalize", "true or false", self.normalize)
        require(self.cascading in CASCADING, "cascading", "'none', 'prior' or 'posterior'", self.cascading)
        require(isinstance(self.sigma, (int, float)) and 0 <= self.sigma <= 1, "sigma", "a number in [0, 1]", self.sigma)
        require(isinstance(self.cr, (int, float)) and 0 < self.cr <= 1, "cr", "a number in (0, 1]", self.cr)
        if self.estimator != "bayesian":
            installed = default_registry().names("estimator")
            require(self.estimator in installed, "estimator", f"'bayesian' or an installed estimator ({', '.join(installed)})",
                    self.estimator)
            require(self.cascading != "posterior", "cascading", "'none' or 'prior' with estimator "
                    f"{self.estimator!r} (posterior-based cascading is the Bayesian estimator's)", self.cascading)


class BayFrameAttacker(Attacker):
    """BayFrame's adversary: RPD beliefs (Eq. 3), the Bayesian estimator (Eq. 2), compromised records (Def. 4–6)."""

    Params = BayFrameAttackerParams

    def __init__(self, params: BayFrameAttackerParams | None = None):
        super().__init__(params)
        p = self.params
        self.knowledge = BayFrameKnowledge(BayFrameKnowledgeParams(p.steps, p.revision, p.sv, p.correlation, p.bandwidth))
        self.other: Estimator | None = None
        if p.estimator != "bayesian":
            self.other = default_registry().create("estimator", p.estimator, None, "attacker.estimator")  # type: ignore[assignment]

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        p = self.params
        m = view.schema.sensitive.size
        respondent = np.asarray(view.respondent, dtype=np.int64)
        population = ctx.population
        rows, found = _rows_in(population.respondent, respondent)
        known = Release(  # ids and exact QIs of the view's respondents, no sensitive values
            t=view.t,
            schema=population.schema,
            respondent=respondent[found],
            qi=population.qi[rows[found]],
            sensitive=np.zeros(int(found.sum()), dtype=np.int64),
            truth=population.truth,
        )
        rpd = np.full((len(respondent), m), 1.0 / m)
        rpd[found] = self.knowledge.prior(known)
        compromised = np.zeros(len(respondent), dtype=bool)
        if p.cascading != "none" and p.sigma > 0:
            compromised = found & (ctx.rng.random(len(respondent)) < p.sigma)
        cr_rows = np.flatnonzero(compromised)
        cr_values = population.sensitive[rows[cr_rows]]  # what the compromise reveals
        weights = rpd
        entries = None
        if len(cr_rows) and p.cascading == "prior":
            weights = rpd.copy()
            weights[cr_rows] *= 1.0 - p.cr
            weights[cr_rows, cr_values] += p.cr
            certain = p.cr >= 1.0
            entries = (cr_rows, cr_values, np.ones(len(cr_rows))) if certain else None
        elif len(cr_rows) and p.cascading == "posterior":
            entries = (cr_rows, cr_values, np.full(len(cr_rows), float(p.cr)))
        if self.other is not None:
            posterior = np.asarray(self.other.posterior(weights, view.sensitive, view.group, view.n_groups, m), dtype=float)
        else:
            posterior = bayesian_posterior(
                weights, view.sensitive, view.group, view.n_groups, m,
                a=p.a, normalize=p.normalize, rng=ctx.rng, compromised=entries,
            )
        self.knowledge.revise(view, posterior, np.where(found, respondent, -1))
        extra = {"compromised": float(len(cr_rows))} if p.cascading != "none" else {}
        return AttackResult(
            respondent=respondent.copy(),
            posterior=posterior,
            extra=extra,
            given=compromised if p.cascading != "none" else None,
        )


def _rows_in(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row of each ``wanted`` id in ``ids`` and whether it is there (ids < 0 never are)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == 0:
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    order = np.argsort(ids, kind="stable")
    pos = np.minimum(np.searchsorted(ids[order], wanted), len(ids) - 1)
    found = (ids[order][pos] == wanted) & (wanted >= 0)
    return order[pos], found
