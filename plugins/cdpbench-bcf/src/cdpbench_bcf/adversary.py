"""The adversary the correspondence attackers share (BCF §3.1, §4, §7.1): ``forward``, ``cross``,
``backward`` and ``correspondence`` (all three, plus the compositions of §7.1) are subclasses of
:class:`CorrespondenceAdversary` that choose their attacks (``cdpbench_bcf.attackers.<name>``).

The adversary reads each public view's classes (generalized QI, multiset of sensitive values) and
knows every record of ``R_i`` has a corresponding record in each later release. At release ``n``
she attacks ``R_n`` with every earlier release (:mod:`~cdpbench_bcf.history`); no posterior over
sensitive values is formed (the attacks exclude records, they do not weigh values).

Numbers per release (``<label>.<key>``; none at the first release, which has no background):

* ``FA``, ``CA``, ``BA``: the anonymities (Defs. 3.2, 3.4, 3.6) — the minimum over the attacks
  involving ``R_n``; ``FA_composed`` the F/C anonymity of the §7.1 compositions alone (from the
  third release on, when a B-attack has cracked something).
* ``below_k.F`` / ``.C`` / ``.B`` and ``below_k`` (their union, ``correspondence`` only): how many
  respondents are targets of an attack whose anonymity for them falls below ``k``: for F on
  ``(R_i, R_n)`` the records of ``R_i``'s classes with F-anonymity < k; for C the records of
  ``R_n``'s classes with C-anonymity < k that were published by ``R_i`` (timestamp <= T_i, the
  targets of a C-attack); for B those of ``R_n``'s classes with B-anonymity < k that arrived after
  ``R_i`` (the targets of a B-attack); for a composition through ``R_j``, the records of timestamp
  ``T_j`` in ``R_j``'s classes (case 1) and in ``R_n``'s (case 2) whose anonymity is < k.
  Timestamps come from the adversary's background knowledge (the population), as in §3.1.

``below_k`` counts targets whose anonymity (candidate records left) is below ``k``, not
disclosures: no value and no single record is claimed, so there is no certain / correct split to
make (trust issue). Its cracks are sound under the attacks' premise — every record of ``R_i`` has a
corresponding record in each later release, with the same sensitive value — which cumulative
releases (``D_1 ∪ … ∪ D_i``, no deletion, no update) satisfy; on a scenario with deletions or
updates the premise fails and so do the cracks.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from cdpbench.data import PublicView
from cdpbench.plugin import AttackContext, Attacker, AttackResult

from .classes import Classes
from .history import LatestAttacks, ReleaseChain
from .params import BCFParams


class CorrespondenceAdversary(Attacker):
    """The adversary of every correspondence attacker (BCF §3.1, §4, §7.1): she reads each public view's
    classes, attacks the latest release with every earlier one and reports the numbers of the
    attacks in ``attacks`` (see the module docstring). Each registered attacker is a subclass
    choosing ``attacks`` (``attackers/correspondence.py``, ``forward.py``, ``cross.py``, ``backward.py``)."""

    Params = BCFParams
    attacks: ClassVar[tuple[str, ...]] = ("F", "C", "B")

    def __init__(self, params=None):
        super().__init__(params)
        self.chain = ReleaseChain(phantom=self.params.phantom)

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        latest = Classes.from_view(view)
        result = AttackResult(respondent=np.asarray(view.respondent, dtype=np.int64).copy())
        if not self.chain.classes:
            self.chain.add(latest, LatestAttacks())
            return result
        att = self.chain.add(latest)
        result.extra = self._numbers(att, ctx)
        return result

    def _numbers(self, att: LatestAttacks, ctx: AttackContext) -> dict[str, float]:
        k = self.params.k
        views = ctx.views
        now = views[-1]
        pop = ctx.population
        order = np.argsort(pop.respondent)
        ids = pop.respondent[order]
        when = pop.time[order] if pop.time is not None else np.ones(len(ids), np.int64)

        def time_of(resp: np.ndarray) -> np.ndarray:
            pos = np.minimum(np.searchsorted(ids, resp), len(ids) - 1)
            return np.where(ids[pos] == resp, when[pos], 0)

        def flagged(view: PublicView, anonymity: np.ndarray, keep=None) -> np.ndarray:
            bad = np.asarray(anonymity) < k
            sel = bad[view.group]
            resp = view.respondent[sel]
            if keep is not None:
                resp = resp[keep(time_of(resp))]
            return resp

        hits: dict[str, list[np.ndarray]] = {"F": [], "C": [], "B": []}
        for i, p in att.pairs.items():
            t_i = views[i].t
            hits["F"].append(flagged(views[i], p.forward_anonymity))
            hits["C"].append(flagged(now, p.cross_anonymity, lambda t, t_i=t_i: t <= t_i))
            hits["B"].append(flagged(now, p.backward_anonymity, lambda t, t_i=t_i: t > t_i))
        for j, p in att.composed.items():
            t_j = views[j].t
            hits["F"].append(flagged(views[j], p.forward_anonymity, lambda t, t_j=t_j: t == t_j))
            hits["C"].append(flagged(now, p.cross_anonymity, lambda t, t_j=t_j: t == t_j))
        out: dict[str, float] = {}
        union = []
        for a in self.attacks:
            key = {"F": "FA", "C": "CA", "B": "BA"}[a]
            out[key] = float(getattr(att, key))
            resp = np.unique(np.concatenate(hits[a])) if hits[a] else np.zeros(0, np.int64)
            out[f"below_k.{a}"] = float(len(resp))
            union.append(resp)
        if len(self.attacks) == 3:
            out["below_k"] = float(len(np.unique(np.concatenate(union))))
            if att.composed:
                out["FA_composed"] = float(att.FA_composed)
        return out
