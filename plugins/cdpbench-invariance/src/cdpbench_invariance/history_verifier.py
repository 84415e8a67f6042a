"""The whole-history verifier the invariance family's privacy models share (``m_invariance``,
``tau_safety``, ``tau_safe_lk``, ``sliced_bucket``: :mod:`cdpbench_invariance.privacy_models`).

Each judges a candidate group as m-unique (Def. 7: at least m tuples, all of distinct sensitive
values), so it also serves as a predicate for any anonymizer, and :meth:`verify` re-checks the
new publication against every earlier one of the run (``ModelContext.history``). A respondent's
*signature* in a release is the set of values of the bucket it was published in: its group, or in
an angelized publication (GT/BT, τ-safe (l,k)-diversity) its sensitive bucket
(``Publication.bucket``), where m-uniqueness is judged on the buckets too.

* ``m_invariance`` (Def. 8): a respondent published in consecutive releases with the same value
  (one lifespan) keeps its signature.
* ``tau_safety`` (reading of [11], see :mod:`cdpbench_invariance.anonymizers.tau_safety`): against the
  respondent's previous publication only, the signature is equal when the value lies in the
  previous signature, disjoint otherwise.
* ``tau_safe_lk`` (reading of [12]): ``tau_safety``'s rule, and every QI group of >= k tuples.
* ``sliced_bucket`` (Def. 11, pairwise reading, spec §3.5 item 3): every two signatures of a
  respondent are equal or disjoint.

``violations`` = groups that are not m-unique + respondents breaking the history rule; levels:
``m`` (the fewest distinct values in a group) and ``history_violations``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport


@dataclass
class MUniqueParams:
    m: int = field(default=2, metadata={"help": "distinct sensitive values per group (m-uniqueness; >= 2)"})

    def __post_init__(self) -> None:
        require(isinstance(self.m, int) and not isinstance(self.m, bool) and self.m >= 2, "m", "an integer >= 2", self.m)


@dataclass
class Signed:
    """A publication's real tuples: respondent ids (sorted), their signatures ``[n, m]`` and true values."""

    respondent: np.ndarray
    signature: np.ndarray
    value: np.ndarray


def signed(publication: Publication) -> Signed:
    counts = publication.bucket_counts()  # the group counts when single-partition
    real = publication.respondent >= 0
    order = np.argsort(publication.respondent[real], kind="stable")
    resp = publication.respondent[real][order]
    sig = counts[publication.bucket_of_record()[real][order]] > 0
    return Signed(resp, sig, publication.sensitive[real][order])


def align(now: Signed, before: Signed) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``now`` whose respondent is in ``before``, and their rows there."""
    if len(before.respondent) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pos = np.minimum(np.searchsorted(before.respondent, now.respondent), len(before.respondent) - 1)
    hit = np.flatnonzero(before.respondent[pos] == now.respondent)
    return hit, pos[hit]


class _Invariance(PrivacyModel):
    Params = MUniqueParams

    def __init__(self, params=None):
        super().__init__(params)
        self._signed: dict[int, Signed] = {}  # id(publication) -> its signatures

    def _of(self, publication: Publication) -> Signed:
        key = id(publication)
        if key not in self._signed:
            self._signed[key] = signed(publication)
        return self._signed[key]

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        counts = batch.counts()
        return (batch.sizes() >= self.params.m) & (counts.max(axis=1, initial=0) <= 1)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        counts = publication.bucket_counts()  # the group counts when single-partition
        distinct = (counts > 0).sum(axis=1)
        return {"m": float(distinct.min()) if len(distinct) else 0.0}

    def history_violations(self, now: Signed, history: list[Signed]) -> np.ndarray:
        raise NotImplementedError

    def buckets(self, publication: Publication) -> GroupBatch:
        """The publication's buckets as a :class:`GroupBatch` (its groups when single-partition)."""
        return GroupBatch(publication.sensitive, publication.bucket_of_record(), publication.n_buckets,
                          publication.schema.sensitive.size)

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        groups = self.buckets(publication)
        ok = self.accepts(groups, ctx) if publication.n_buckets else np.ones(0, bool)
        now = self._of(publication)
        past = [self._of(p) for p in ctx.history.publications]
        bad_history = int(self.history_violations(now, past).sum()) if past else 0
        bad = int((~ok).sum()) + bad_history
        levels = self.levels(publication, ctx)
        levels["history_violations"] = float(bad_history)
        return VerifyReport(bad == 0, bad, levels)
