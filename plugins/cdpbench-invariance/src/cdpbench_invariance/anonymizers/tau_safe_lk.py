"""τ-safe (l,k)-diversity ([12] of Khan et al., not in papers/) as the ``tau_safe_lk`` anonymizer,
in the reading Khan et al. describe (§4: "like τ-safety ... classification, balancing, assignment
and generalization"; "the assignment phase is exactly the same as in [11]"; counterfeits balance;
§1.1 Tables 2–3: the published form GT(GID, QI, BID) and BT(BID, Signature, Count)).

Reading: τ-safety's classification, balancing (counterfeits) and assignment phases with l-diverse
buckets of l distinct values (m = l) make the bucket table BT: per bucket its signature, one
tuple of each value. Then the generalization phase ("initializes the QI values with counterfeit
QI part, satisfying the k-anonymity and sorting it") makes the generalized table GT:

* **counterfeit QI part**: a counterfeit has no respondent, so it takes the QI of a real tuple of
  its bucket (the one of the lowest row of the release; every bucket holds a real tuple): it
  lands next to that tuple when sorted, as Table 3a's counterfeit C1 sits in the group of p1, the
  real tuple of its bucket;
* **sorting**: every published tuple (real and counterfeit) is sorted on its QI, lexicographically
  in the schema's column order (leaf codes for a categorical QI, whose taxonomy orders its leaves
  so that every node is a range), ties by bucket id;
* **k-anonymity**: the sorted list is cut into runs of k tuples, the last run taking the
  remainder (< k), so every QI group holds k to 2k - 1 tuples (one group if fewer than k);
* each group is generalized to the tightest box of its tuples' QI (numeric [min, max];
  categorical: the smallest taxonomy node, as every method of the family), and each tuple carries
  its bucket id (``Publication.bucket``).

This is angelization (Tao et al. 2008): the adversary sees per QI group its box and the bucket
ids of its tuples, per bucket its values, not which tuple of a group is in which bucket
(``cdpbench.data``). ``form: buckets`` publishes the buckets as the groups instead, τ-safety's
publication with m = l (what this anonymizer published before the core had a second partition).
The buckets, hence the signatures and the collusion attack on them, are the same in both forms:
the paper's own fixture (§1.1, a τ-safe (2,2)-diverse release sequence) discloses p3.

Thresholds: ``l`` null (the default) is the run's privacy model's m, read at each publish; ``k``
null is the privacy model's k when it has one (``tau_safe_lk``'s), else l. Explicit values win
over the model's. With ``form: buckets`` k <= l (a bucket of l tuples is the published group).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import PublishContext

from ..family import InvariantAnonymizer, check_threshold, is_threshold, model_threshold
from ..phases import Policy

FORMS = ("angelized", "buckets")


@dataclass
class TauSafeLKParams:
    l: int | None = field(
        default=None,
        metadata={"help": "distinct sensitive values per bucket (l-diversity; >= 2); null = the run's privacy model's m"},
    )
    k: int | None = field(
        default=None,
        metadata={"help": "tuples per generalized QI group (k-anonymity; >= 1; form=buckets: <= l); "
                          "null = the privacy model's k, else l"},
    )
    form: str = field(
        default="angelized",
        metadata={"help": "'angelized': QI groups of >= k tuples (GT) linked to the l-diverse buckets (BT), "
                          "the paper's; 'buckets': the buckets are the published groups (tau_safety's with m = l)"},
    )
    shuffle: bool = field(default=True, metadata={"help": "shuffle the tuples inside each bucket before publishing"})

    def __post_init__(self) -> None:
        check_threshold(self.l, "l", 2)
        require(self.form in FORMS, "form", "one of 'angelized', 'buckets'", self.form)
        if self.k is not None:
            require(is_threshold(self.k, 1), "k", "an integer >= 1, or null", self.k)
            if self.l is not None and self.form == "buckets":
                require(self.k <= self.l, "k", f"an integer in [1, l = {self.l}] with form=buckets (a bucket of l "
                        "distinct values is the published group)", self.k)

    @property
    def m(self) -> int | None:
        """The family's m: l (null: the privacy model's m, resolved at publish)."""
        return self.l


class TauSafeLK(InvariantAnonymizer):
    """τ-safe (l,k)-diversity: τ-safety's phases with l-diverse buckets (BT), then QI groups of >= k sorted tuples (GT)."""

    Params = TauSafeLKParams
    policy = Policy(scope="previous", filler="counterfeit")

    def threshold(self, ctx: PublishContext) -> tuple[int, str]:
        """l (the family's m) and where it comes from: ``anonymizer.l``, or when it is null the run's
        privacy model's m; with ``form: buckets`` k must not exceed it."""
        l, name = model_threshold(ctx, self.params.l, "l", 2, param="m")
        if self.params.k is not None and self.params.form == "buckets":
            require(self.params.k <= l, "anonymizer.k", f"an integer in [1, l = {l}] (l from {name}) with form=buckets",
                    self.params.k)
        return l, name

    def group_size(self, ctx: PublishContext, l: int) -> int:
        """k: ``anonymizer.k``, else the privacy model's k when it has one, else l."""
        if self.params.k is not None:
            return self.params.k
        model_k = getattr(getattr(ctx.privacy_model, "params", None), "k", None)
        if model_k is not None:
            require(is_threshold(model_k, 1), "privacy_model.k (anonymizer.k is null)", "an integer >= 1", model_k)
            return model_k
        return l

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        buckets = super().publish(release, ctx)  # τ-safety's phases with m = l: the buckets as groups
        if self.params.form == "buckets":
            return buckets
        l, _ = self.threshold(ctx)
        return angelize(release, buckets, self.group_size(ctx, l))


def angelize(release: Release, buckets: Publication, k: int) -> Publication:
    """The generalization phase of τ-safe (l,k)-diversity (module docstring): ``buckets`` (a
    single-partition publication whose groups are the buckets) published as QI groups of >= k
    tuples sorted on QI, each tuple keeping its bucket id."""
    p, d = len(buckets), release.qi.shape[1]
    bucket = buckets.group
    real = buckets.row >= 0
    qi = np.empty((p, d))
    qi[real] = release.qi[buckets.row[real]]
    if (~real).any():  # counterfeit QI part: the QI of its bucket's real tuple of the lowest row
        first = np.full(buckets.n_groups, len(release), dtype=np.int64)
        np.minimum.at(first, bucket[real], buckets.row[real])
        qi[~real] = release.qi[first[bucket[~real]]]
    order = np.lexsort((bucket, *(qi[:, j] for j in reversed(range(d)))))  # by QI (first column first), then bucket
    n_groups = max(p // k, 1)
    group = np.empty(p, dtype=np.int64)
    group[order] = np.minimum(np.arange(p) // k, n_groups - 1)
    tuples = Release(release.t, release.schema, buckets.respondent, qi, buckets.sensitive, buckets.time, release.truth)
    boxes = Publication.from_partition(tuples, group, categorical="taxonomy")
    info = dict(buckets.info, buckets=float(buckets.n_groups))
    return dataclasses.replace(buckets, group=boxes.group, low=boxes.low, high=boxes.high,
                               value_sets=boxes.value_sets, info=info, bucket=bucket)
