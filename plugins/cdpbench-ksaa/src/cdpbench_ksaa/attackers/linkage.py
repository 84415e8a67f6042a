"""``linkage``: the adversary who joins sequential releases through the linkage graph, then
estimates her beliefs inside the latest release's groups (KSAA §1: "recreates the adversary's
inference ability").

Per release ``n``: the candidate values of every respondent (:mod:`~cdpbench_ksaa.linkability`, full matching
join by default, ``pruned=false`` for the natural join; more than two releases joined as ``join``
says: ``joint``, one joint assignment of all the releases, :mod:`~cdpbench_ksaa.joint_matching`,
or ``pairwise`` (the default, the weaker adversary), the latest with each earlier one separately)
restrict her prior: the knowledge plugin's
beliefs (``knowledge``, a plugin reference, ``attacker.knowledge``; ``uniform`` by default) are
set to zero on the values she cannot link the respondent to (kept as they are when no value is
left, which only happens when her assumption that values persist is wrong), then an estimator
plugin (``estimator``, a plugin reference, ``attacker.estimator``; BayFrame's ``bayesian`` by
default, its parameters ``attacker.estimator.<param>``) turns them into posteriors over the
group's published values, and finally set to zero on the values the join rules out (and
renormalized: an estimator may ignore the weights, e.g. ``frequency``). Posteriors feed the core's gain and confidence metrics; ``extra`` holds
the linkability figures: the fewest and mean candidate values and records per respondent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import PublicView, Release, rows_of
from cdpbench.errors import require
from cdpbench.plugin import AttackContext, Attacker, AttackResult, Estimator, Knowledge, plugin_ref

from ..joint_matching import JOIN_HELP, JOINS
from ..linkability import candidates
from ..transition_relation import (MIN_TRANSITION_HELP, PD_COR_HELP, TRANSITIONS, TRANSITIONS_HELP, RelationOf,
                                   check_min_transition, check_pd_cor)


@dataclass
class LinkageAttackerParams:
    transitions: str = field(default="none", metadata={"help": TRANSITIONS_HELP})
    pruned: bool = field(default=True, metadata={"help": "join with the full matching join (true) or the natural join (false)"})
    join: str = field(default="pairwise", metadata={"help": JOIN_HELP})
    knowledge: Any = plugin_ref("knowledge", "uniform", "knowledge plugin giving her prior beliefs (BK_sv)")
    estimator: Any = plugin_ref("estimator", "bayesian", "estimator plugin computing posteriors inside the groups")
    min_transition: float = field(default=0.0, metadata={"help": MIN_TRANSITION_HELP})
    pd_cor: Any = plugin_ref("knowledge", "bayframe", PD_COR_HELP)

    def __post_init__(self) -> None:
        require(self.transitions in TRANSITIONS, "transitions", f"one of {list(TRANSITIONS)}", self.transitions)
        require(isinstance(self.pruned, bool), "pruned", "true or false", self.pruned)
        require(self.join in JOINS, "join", f"one of {list(JOINS)}", self.join)
        check_min_transition(self.min_transition)

    def check_references(self) -> None:
        check_pd_cor(self)


class LinkageAttacker(Attacker):
    """Linkage attack (KSAA setting): join the releases through the linkage graph, then estimate beliefs with any estimator."""

    Params = LinkageAttackerParams

    def __init__(self, params=None):
        super().__init__(params)
        self.knowledge: Knowledge = self.params.knowledge
        self.estimator: Estimator = self.params.estimator
        self._relation = RelationOf(self.params)  # transitions (PD_cor built per release)

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        view.require_single_partition("attacker linkage (its estimator reads a QI group's values)")
        p = self.params
        m = view.schema.sensitive.size
        respondent = np.asarray(view.respondent, np.int64)
        pop = ctx.population
        # row of each respondent in the population (match_negative: an id < 0 is looked up like any
        # other, as this attack always did; a counterfeit's -1 is not there in a population of ids >= 0)
        rows, found = rows_of(pop.respondent, respondent, match_negative=True)
        rows = rows[found]
        known = Release(view.t, pop.schema, respondent[found], pop.qi[rows], np.zeros(len(rows), np.int64), truth=pop.truth)
        known_prior = np.asarray(self.knowledge.prior(known), dtype=float)
        if found.all() and known_prior.shape == (len(respondent), m):
            prior = known_prior  # every respondent in the population: her prior as it is (read only)
        else:
            prior = np.full((len(respondent), m), 1.0 / m)
            prior[found] = known_prior
        cand = candidates(ctx.views, transitions=self._relation(pop, len(ctx.views)), pruned=p.pruned, join=p.join)
        n = len(respondent)
        allowed = cand.value_table(m)
        some = allowed.any(axis=1)
        # row by row, in blocks of respondents (each row's numbers are its own: the same as on
        # the whole table, without whole-table temporaries)
        weights = np.empty((n, m))
        for rows in _blocks(n):
            weights[rows] = np.where(allowed[rows] | ~some[rows, None], prior[rows], 0.0)
        posterior = np.asarray(self.estimator.posterior(weights, view.sensitive, view.group, view.n_groups, m), dtype=float)
        # what the join rules out is certain: no mass there, whatever the estimator did with the
        # weights (frequency ignores them, bayesian keeps some mass on every tuple of the group)
        out = np.empty((n, m))
        for rows in _blocks(n):
            kept = np.where(allowed[rows], posterior[rows], 0.0)
            mass = kept.sum(axis=1, keepdims=True)
            out[rows] = np.where(some[rows, None] & (mass > 0), kept / np.where(mass > 0, mass, 1.0), posterior[rows])
        posterior = out
        self.knowledge.revise(view, posterior, np.where(found, respondent, -1))
        extra = {
            "linkable_values_min": float(cand.values.min()) if len(cand.values) else 0.0,
            "linkable_values_mean": float(cand.values.mean()) if len(cand.values) else 0.0,
            "linkable_records_min": float(cand.records.min()) if len(cand.records) else 0.0,
            "linkable_records_mean": float(cand.records.mean()) if len(cand.records) else 0.0,
        }
        return AttackResult(respondent=respondent.copy(), posterior=posterior, extra=extra)


def _blocks(n: int, size: int = 1 << 14):
    """Slices of ``size`` rows covering ``range(n)``."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))
