"""The membership attack (Khan et al., (τ,m)-slicedBucket, Def. 2) as the ``membership`` attacker.

Def. 2: the adversary "maps the known QI attribute of an individual to an EC, to identify the
sensitive value". Reading: she knows each published respondent's exact QI (``ctx.population``,
e.g. a voter list) and finds the groups whose generalized cell covers it (numeric: inside
[low, high]; categorical: a leaf the group stands for). The respondent's tuple is one of those
groups' tuples, each equally likely, so the posterior is the value distribution over the tuples of
the covering groups (counterfeits included: she cannot tell them apart). In an angelized
publication (GT/BT) a group's values are its expected counts through its buckets
(:meth:`~cdpbench.data.PublicView.expected_group_counts`).

Extra numbers per release: ``mapped`` (respondents whose QI one group alone covers: the EC is
found) and ``mapped_share`` of the published respondents. When the covering groups hold a single
value the posterior is one-hot: the core's belief metric counts the record ``certain``, and
``disclosed`` when the value is its true one (it is unless the adversary's QI for the respondent
is not the one published, e.g. a stale voter list). Def. 11(3)'s shuffle inside a bucket changes nothing here:
with cells generalized bucket by bucket every tuple of a bucket shows the same cell (spec §3.5
item 8), and m-unique buckets hold m values, so an m-unique release discloses no one by mapping.
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import PublicView
from cdpbench.plugin import AttackContext, Attacker, AttackResult
from cdpbench.regions import covering_sums, meeting_blocks, view_regions


class MembershipAttacker(Attacker):
    """Membership attack (slicedBucket Def. 2): map each respondent's QI to the groups covering it."""

    uses_past_views = False  # reads only ctx.views[-1]: each release on its own (issue #28: the run keeps no more than it needs)

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        respondent = np.unique(view.respondent[view.respondent >= 0])
        pop = ctx.population
        order = np.argsort(pop.respondent, kind="stable")
        pos = order[np.searchsorted(pop.respondent, respondent, sorter=order)]
        counts = view.expected_group_counts()  # [G, m] (expected through the buckets, angelized)
        weight = np.zeros((len(respondent), counts.shape[1]))  # tuples of each value in the covering groups
        n_cover = np.zeros(len(respondent), dtype=np.int64)
        qi = pop.qi[pos]
        if len(qi) and view.n_groups:
            regions = view_regions(view)
            ones = np.ones((len(counts), 1))
            summed = covering_sums(qi, regions, np.hstack([counts, ones]), view.schema.categorical)
            if summed is not None:  # every cell a box: prefix sums over the grid of QI values
                weight, n_cover = summed[:, :-1], np.rint(summed[:, -1]).astype(np.int64)
            else:  # each respondent's QI as a point query against the groups' cells, block by block
                for rows, groups, inside in meeting_blocks(qi, qi, regions, view.schema.categorical):
                    weight[rows] = inside.astype(float) @ counts[groups]
                    n_cover[rows] = inside.sum(axis=1)
        total = weight.sum(axis=1, keepdims=True)
        m = counts.shape[1]
        posterior = np.where(total > 0, weight / np.where(total > 0, total, 1.0), 1.0 / max(m, 1))
        n = max(len(respondent), 1)
        mapped = int((n_cover == 1).sum())
        extra = {"mapped": float(mapped), "mapped_share": mapped / n}
        return AttackResult(respondent=respondent, posterior=posterior, extra=extra)
