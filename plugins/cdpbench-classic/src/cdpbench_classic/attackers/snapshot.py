"""The snapshot attack: BK_sv only, every release on its own (JS-reduce, TDSC 2012, §7).

The adversary knows the population of the release (every respondent with the exact QI, e.g. from
a voter list) and sees the public view of the publication: per QI-group its candidate respondents
and the multiset of its sensitive values, the link between them removed. The background
knowledge BK_sv is a knowledge plugin's prior over the population (default: the kernel estimate
of Li, Li & Zhang, ICDE 2009, :func:`~cdpbench_classic.knowledge.kernel.kernel_prior`), and the
posterior inside each group comes from an estimator plugin (default: the Ω-estimate). No history is
used and nothing is revised: that is what makes it the *snapshot* attack, JS-reduce's baseline
adversary (its §7 finds the gain over the plain frequencies "negligible").

Worst case on purpose: the kernel prior is mined from the population table *with its sensitive
values* — the adversary's BK_sv is the kernel estimate over the very data being published. That
is the papers' worst case: Li et al. model the adversary's knowledge as the kernel estimate over
the original table, and JS-reduce §5.1 names extracting BK_sv "from the same data that are going
to be generalized and released, as done in [17]" (the Li et al. paper). This is the only place the
attacker touches ``population.sensitive`` (which :class:`~cdpbench.plugin.AttackContext` otherwise
keeps off limits), and only through the knowledge plugin; with ``knowledge=uniform`` it is never
read.

Published tuples whose respondent is not in the population (counterfeits, respondent -1) get a
uniform prior row; the result still has one row per entry of ``view.respondent``.

An angelized view (GT/BT: QI groups apart from the sensitive buckets) goes to the estimator's
``angelized_posterior(weights, view)``: ``frequency`` gives the expected frequencies through the
buckets; ``omega`` and ``permanent`` with priors, and an estimator without that method, refuse
with one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cdpbench.data import PublicView, Release, rows_of
from cdpbench.errors import CdpbenchError
from cdpbench.plugin import AttackContext, Attacker, AttackResult, Estimator, Knowledge, plugin_ref


@dataclass
class SnapshotParams:
    knowledge: Any = plugin_ref("knowledge", "kernel", "knowledge plugin giving the adversary's BK_sv prior "
                                "(attacker.knowledge.bandwidth: the kernel's bandwidth B)")
    estimator: Any = plugin_ref("estimator", "omega", "estimator plugin computing the posterior in each group")


def population_rows(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, found)`` as :func:`~cdpbench.data.rows_of` with ``match_negative`` gives them
    (``ids[rows[i]] == wanted[i]`` where ``found[i]``; elsewhere ``rows`` is 0): by a table over
    the id range when the ids are distinct, non-negative and at most a few times their number
    (respondent ids usually are), else by ``rows_of``'s sort and binary search."""
    ids = np.asarray(ids, dtype=np.int64)
    wanted = np.asarray(wanted, dtype=np.int64)
    n = len(ids)
    if n == 0 or ids.min() < 0 or ids.max() > 4 * n + 1024:
        rows, found = rows_of(ids, wanted, match_negative=True)
        return np.where(found, rows, 0), found
    top = int(ids.max())
    table = np.full(top + 1, -1, dtype=np.int64)
    table[ids] = np.arange(n)
    if not np.array_equal(table[ids], np.arange(n)):  # an id listed twice: rows_of finds its first row
        rows, found = rows_of(ids, wanted, match_negative=True)
        return np.where(found, rows, 0), found
    inside = (wanted >= 0) & (wanted <= top)
    rows = table[np.where(inside, wanted, 0)]
    found = inside & (rows >= 0)
    return np.where(found, rows, 0), found


class Snapshot(Attacker):
    """Snapshot attack: BK_sv prior + per-group posterior, each release on its own (JS-reduce §7)."""

    uses_past_views = False  # reads only ctx.views[-1]: each release on its own (issue #28: the run keeps no more than it needs)

    Params = SnapshotParams

    def __init__(self, params: SnapshotParams | None = None):
        super().__init__(params)
        self.knowledge: Knowledge = self.params.knowledge
        self.estimator: Estimator = self.params.estimator
        self._population: Release | None = None  # the population whose prior is cached
        self._prior: np.ndarray | None = None

    def population_prior(self, population: Release) -> np.ndarray:
        """``[n_pop, m]`` BK_sv prior of the population (computed once per population object)."""
        if self._population is not population or self._prior is None:
            self._prior = np.asarray(self.knowledge.prior(population), dtype=float)
            self._population = population
        return self._prior

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        view.require_records("attacker snapshot")  # a counted view (noisy counts, issue #29) has no group values
        population = ctx.population
        m = view.schema.sensitive.size
        prior = self.population_prior(population)
        respondent = np.asarray(view.respondent, dtype=np.int64)
        # row of each candidate respondent in the population (not there: e.g. a counterfeit, -1;
        # match_negative: an id < 0 is looked up like any other, as this attack always did)
        rows, found = population_rows(population.respondent, respondent)
        if found.all():
            weights = prior[rows]
        else:
            weights = np.full((len(respondent), m), 1.0 / m)
            weights[found] = prior[rows[found]]
        if view.angelized:
            angelized = getattr(self.estimator, "angelized_posterior", None)
            if angelized is None:
                name = getattr(self.estimator, "plugin_name", type(self.estimator).__name__)
                raise CdpbenchError(f"attacker snapshot: estimator {name!r} does not support an angelized publication "
                                    "(QI groups published apart from the sensitive buckets, GT/BT)")
            posterior = angelized(weights, view)
        else:
            posterior = self.estimator.posterior(weights, view.sensitive, view.group, view.n_groups, m)
        return AttackResult(respondent=respondent.copy(), posterior=np.asarray(posterior, dtype=float))
