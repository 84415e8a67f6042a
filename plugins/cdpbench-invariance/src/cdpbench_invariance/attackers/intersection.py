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

_BLOCK = 1 << 14  # rows per block: a block's [rows, m] temporaries stay in cache (issue #28)


class IntersectionAttacker(Attacker):
    """Collusion attack (slicedBucket Def. 1): intersect each respondent's signature with its earlier ones."""

    uses_past_views = False  # reads only ctx.views[-1]: it keeps its own signatures of earlier views (self.past) (issue #28: the run keeps no more than it needs)

    def __init__(self, params=None):
        super().__init__(params)
        self.past: list[tuple[np.ndarray, np.ndarray]] = []  # per earlier view: (sorted ids, signatures [n, m])

    def observe(self, view: PublicView, ctx: AttackContext) -> AttackResult:
        respondent = np.asarray(view.respondent, dtype=np.int64)
        counts = view.expected_group_counts()  # [G, m] tuples of each value per group (expected, angelized)
        group = np.asarray(view.group)
        N, m = len(respondent), counts.shape[1]
        real = respondent >= 0
        # where each respondent stands in every earlier view (most recent first: ties keep the most recent
        # release); the queries go to searchsorted in increasing order, which keeps its search cache-friendly
        ascending = np.argsort(respondent, kind="stable")
        lookups = []
        for ids, past in reversed(self.past):
            if len(ids) == 0:
                continue
            pos = np.empty(N, dtype=np.int64)
            pos[ascending] = np.searchsorted(ids, respondent[ascending])
            pos = np.minimum(pos, len(ids) - 1)
            lookups.append((past, pos, real & (ids[pos] == respondent)))
        # every row's candidate set depends on its own row only: a block of rows at a time
        signature = np.empty((N, m), dtype=bool)  # S_r(v) of each candidate row
        posterior = np.empty((N, m))
        own = np.empty(N, dtype=np.int64)
        best_size = np.empty(N, dtype=np.int64)
        for lo in range(0, N, _BLOCK):
            hi = min(lo + _BLOCK, N)
            block_counts = counts[group[lo:hi]]
            block_signature = block_counts > 0
            block_own = block_signature.sum(axis=1)
            best = block_signature.copy()  # C(v): S_r(v) until a smaller non-empty intersection is found
            size_best = block_own.copy()
            for past, pos, found in lookups:
                rows = np.flatnonzero(found[lo:hi])
                inter = block_signature[rows] & past[pos[lo:hi][rows]]
                size = inter.sum(axis=1)
                better = (size > 0) & (size < size_best[rows])
                best[rows[better]] = inter[better]
                size_best[rows[better]] = size[better]
            weight = np.where(best, block_counts, 0).astype(float)
            posterior[lo:hi] = weight / weight.sum(axis=1, keepdims=True)
            signature[lo:hi], own[lo:hi], best_size[lo:hi] = block_signature, block_own, size_best
        order = np.argsort(respondent[real], kind="stable")
        self.past.append((respondent[real][order], signature[real][order]))
        n = max(int(real.sum()), 1)
        narrowed = int(((best_size > 1) & (best_size < own) & real).sum())
        extra = {"narrowed": float(narrowed), "narrowed_share": narrowed / n}
        return AttackResult(respondent=respondent.copy(), posterior=posterior, extra=extra)
