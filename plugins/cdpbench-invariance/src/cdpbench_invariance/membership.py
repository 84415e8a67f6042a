"""The membership attack (Khan et al., (τ,m)-slicedBucket, Def. 2) as the ``membership`` attacker.

Def. 2: the adversary "maps the known QI attribute of an individual to an EC, to identify the
sensitive value". Reading: she knows each published respondent's exact QI (``ctx.population``,
e.g. a voter list) and finds the groups whose generalized cell covers it (numeric: inside
[low, high]; categorical: a leaf the group stands for). The respondent's tuple is one of those
groups' tuples, each equally likely, so the posterior is the value distribution over the tuples of
the covering groups (counterfeits included: she cannot tell them apart).

Extra numbers per release: ``mapped`` (respondents whose QI one group alone covers: the EC is
found), ``disclosed`` (the covering groups hold a single value: the value is found), and their
shares of the published respondents. Def. 11(3)'s shuffle inside a bucket changes nothing here:
with cells generalized bucket by bucket every tuple of a bucket shows the same cell (spec §3.5
item 8), and m-unique buckets hold m values, so an m-unique release discloses no one by mapping.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import PublicView
from cdpbench.plugin import AttackContext, Attacker, AttackResult

_BUDGET = 4_000_000  # respondent x group cells judged at once


def covering(view: PublicView, qi: np.ndarray) -> np.ndarray:
    """``[n, G]`` bool: group g's generalized cell covers row i of ``qi``."""
    n, G = len(qi), view.n_groups
    out = np.zeros((n, G), dtype=bool)
    if n == 0 or G == 0:
        return out
    categorical = set(view.value_sets)
    chunk = max(1, _BUDGET // G)
    for a in range(0, n, chunk):
        x = qi[a : a + chunk]
        inside = np.ones((len(x), G), dtype=bool)
        for j in range(qi.shape[1]):
            if j in categorical:
                inside &= view.value_sets[j][:, x[:, j].astype(np.int64)].T
            else:
                inside &= (x[:, j][:, None] >= view.low[None, :, j]) & (x[:, j][:, None] <= view.high[None, :, j])
        out[a : a + chunk] = inside
    return out


class MembershipAttacker(Attacker):
    """Membership attack (slicedBucket Def. 2): map each respondent's QI to the groups covering it."""

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        respondent = np.unique(view.respondent[view.respondent >= 0])
        pop = ctx.population
        order = np.argsort(pop.respondent, kind="stable")
        pos = order[np.searchsorted(pop.respondent, respondent, sorter=order)]
        cover = covering(view, pop.qi[pos])
        counts = view.group_counts().astype(float)  # [G, m]
        weight = cover.astype(float) @ counts  # [n, m] tuples of each value in the covering groups
        total = weight.sum(axis=1, keepdims=True)
        m = counts.shape[1]
        posterior = np.where(total > 0, weight / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))
        n = max(len(respondent), 1)
        mapped = int((cover.sum(axis=1) == 1).sum())
        disclosed = int(((weight > 0).sum(axis=1) == 1).sum())
        extra = {"mapped": float(mapped), "disclosed": float(disclosed), "mapped_share": mapped / n,
                 "disclosed_share": disclosed / n}
        return AttackResult(respondent=respondent, posterior=posterior, extra=extra)
