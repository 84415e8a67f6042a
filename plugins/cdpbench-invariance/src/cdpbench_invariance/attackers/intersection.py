"""The collusion attack: intersecting a respondent's signatures across releases (Khan et al.,
(τ,m)-slicedBucket, Def. 1; specs/invariance.md §3.2 and §3.5 item 3).

A respondent's *signature* in a release is the set of sensitive values published in its group
(bucket): the adversary knows the respondent is in that group (its QI, or the bucket's ids), not
which tuple is its own. In an angelized publication (GT/BT, τ-safe (l,k)-diversity) she knows the
respondent's QI group, not which of its tuples, hence which bucket, is its own: its signature is
the union of the signatures of the group's buckets (the values of positive expected count,
:meth:`~cdpbench.data.PublicView.expected_group_counts`). Following one respondent through the releases, she intersects its current
signature with each earlier one: if the value did not change in between, it lies in both. Def. 1
names the alternate-release case (Sig_r(t) ∩ Sig_{r-i}(t), i >= 2) that τ-safety's check of the
previous release alone misses; this attacker tries every earlier release (i >= 1), so it attacks
any anonymizer's publications — m-invariance's, slicedBucket's, Mondrian's, JS-reduce's.

Per view (release r), for each candidate respondent v with signature S_r(v):

* the candidate set C(v) is the smallest non-empty intersection S_r(v) ∩ S_j(v) over the earlier
  releases j in which v was published (ties: the most recent j); S_r(v) itself when there is none
  (first publication, or every intersection empty — the value changed);
* the posterior spreads over C(v) in proportion to the tuples of each value in v's group (uniform
  when the bucket's values are distinct, as in m-unique buckets: confidence 1/|C(v)|, spec §3.5.3;
  angelized: in proportion to the group's expected count of each value through its buckets);
* ``narrowed``: 1 < |C(v)| < |S_r(v)|, the intersection left fewer values than the signature but
  more than one; a count per release in ``extra``, with ``narrowed_share`` of the view's
  respondents.

|C(v)| = 1 leaves the adversary one value (a one-hot posterior): the core's belief metric counts
it as ``certain``, and as ``disclosed`` only when that value is the respondent's true value at
this release. The two differ: when v's value was updated between the releases, the intersection
of its old and new signatures can be a single value that v never had (``tests/test_attacker_intersection.py``
builds that history). The adversary cannot tell the two apart; only the truth the metrics hold
can, which is why this attacker reports no disclosure count of its own.

Under m-invariance and slicedBucket (signatures of a respondent equal or disjoint across releases,
the pairwise reading of Def. 11) no one is left with one value within a lifespan; under τ-safe
(l,k)-diversity the paper's fixture discloses p3 by intersecting T1 and T3
(``tests/test_attacker_intersection.py``).
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import PublicView
from cdpbench.plugin import AttackContext, Attacker, AttackResult


class IntersectionAttacker(Attacker):
    """Collusion attack (slicedBucket Def. 1): intersect each respondent's signature with its earlier ones."""

    def __init__(self, params=None):
        super().__init__(params)
        self.past: list[tuple[np.ndarray, np.ndarray]] = []  # per earlier view: (sorted ids, signatures [n, m])

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        respondent = np.asarray(view.respondent, dtype=np.int64)
        counts = view.expected_group_counts()  # [G, m] tuples of each value per group (expected, angelized)
        signature = counts[view.group] > 0  # [p, m] S_r(v) of each candidate row
        own = signature.sum(axis=1)
        best = signature.copy()  # C(v): S_r(v) until a smaller non-empty intersection is found
        best_size = own.copy()
        real = respondent >= 0
        for ids, past in reversed(self.past):  # most recent first: ties keep the most recent release
            if len(ids) == 0:
                continue
            pos = np.minimum(np.searchsorted(ids, respondent), len(ids) - 1)
            found = real & (ids[pos] == respondent)
            rows = np.flatnonzero(found)
            inter = signature[rows] & past[pos[rows]]
            size = inter.sum(axis=1)
            better = (size > 0) & (size < best_size[rows])
            best[rows[better]] = inter[better]
            best_size[rows[better]] = size[better]
        weight = np.where(best, counts[view.group], 0).astype(float)
        posterior = weight / weight.sum(axis=1, keepdims=True)
        order = np.argsort(respondent[real], kind="stable")
        self.past.append((respondent[real][order], signature[real][order]))
        n = max(int(real.sum()), 1)
        narrowed = int(((best_size > 1) & (best_size < own) & real).sum())
        extra = {"narrowed": float(narrowed), "narrowed_share": narrowed / n}
        return AttackResult(respondent=respondent.copy(), posterior=posterior, extra=extra)
