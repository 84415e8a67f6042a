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

from typing import Iterator

import numpy as np

from cdpbench.data import PublicView
from cdpbench.plugin import AttackContext, Attacker, AttackResult

_BLOCK = 256  # respondents judged together


def covering(view: PublicView, qi: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(rows, groups, inside)``: ``inside[a, b]`` says whether group ``groups[b]``'s
    generalized cell covers row ``rows[a]`` of ``qi``; every row is yielded once, and groups not
    yielded with a row do not cover it.

    Rows are taken in blocks of ``_BLOCK`` along their first numeric column; a block is compared
    only with the groups whose interval on that column meets the block's range (generalized
    groups are local, so most are skipped), then cell by cell."""
    n, G = len(qi), view.n_groups
    if n == 0 or G == 0:
        return
    categorical = set(view.value_sets)
    numeric = [j for j in range(qi.shape[1]) if j not in categorical]
    order = np.argsort(qi[:, numeric[0]], kind="stable") if numeric else np.arange(n)
    for a in range(0, n, _BLOCK):
        rows = order[a : a + _BLOCK]
        x = qi[rows]
        if numeric:
            j0 = numeric[0]
            groups = np.flatnonzero((view.low[:, j0] <= x[:, j0].max()) & (view.high[:, j0] >= x[:, j0].min()))
        else:
            groups = np.arange(G)
        inside = np.ones((len(rows), len(groups)), dtype=bool)
        for j in range(qi.shape[1]):
            if j in categorical:
                inside &= view.value_sets[j][np.ix_(groups, x[:, j].astype(np.int64))].T
            else:
                lo, hi = view.low[groups, j][None, :], view.high[groups, j][None, :]
                inside &= (x[:, j][:, None] >= lo) & (x[:, j][:, None] <= hi)
        yield rows, groups, inside


class MembershipAttacker(Attacker):
    """Membership attack (slicedBucket Def. 2): map each respondent's QI to the groups covering it."""

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        respondent = np.unique(view.respondent[view.respondent >= 0])
        pop = ctx.population
        order = np.argsort(pop.respondent, kind="stable")
        pos = order[np.searchsorted(pop.respondent, respondent, sorter=order)]
        counts = view.group_counts().astype(float)  # [G, m]
        weight = np.zeros((len(respondent), counts.shape[1]))  # tuples of each value in the covering groups
        n_cover = np.zeros(len(respondent), dtype=np.int64)
        for rows, groups, inside in covering(view, pop.qi[pos]):
            weight[rows] = inside.astype(float) @ counts[groups]
            n_cover[rows] = inside.sum(axis=1)
        total = weight.sum(axis=1, keepdims=True)
        m = counts.shape[1]
        posterior = np.where(total > 0, weight / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))
        n = max(len(respondent), 1)
        mapped = int((n_cover == 1).sum())
        disclosed = int(((weight > 0).sum(axis=1) == 1).sum())
        extra = {"mapped": float(mapped), "disclosed": float(disclosed), "mapped_share": mapped / n,
                 "disclosed_share": disclosed / n}
        return AttackResult(respondent=respondent, posterior=posterior, extra=extra)
