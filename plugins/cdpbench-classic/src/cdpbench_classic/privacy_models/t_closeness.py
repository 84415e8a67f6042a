"""t-closeness (Li, Li, Venkatasubramanian, ICDE 2007).

A QI-group satisfies t-closeness when the Earth Mover's Distance between its sensitive
distribution P and the distribution Q of the whole table (``ctx.table_distribution``) is at most
t. The three ground distances of the paper's §4 (how to calculate the EMD), each computed for all
groups at once from ``[G, m]`` counts:

* **equal** (every two values at distance 1): EMD = ``1/2 sum_i |p_i - q_i|`` (total variation).
* **ordered** (values ``v_1 < ... < v_m`` in the domain order, distance ``|i - j| / (m - 1)``):
  EMD = ``1/(m-1) sum_i |r_1 + ... + r_i|`` with ``r = p - q``.
* **hierarchical** (distance between two leaves = ``level(lowest common ancestor) / H`` in the
  sensitive attribute's taxonomy of height H): EMD = ``sum_N cost(N)`` over internal nodes N with
  ``cost(N) = level(N)/H * min(pos_extra(N), neg_extra(N))``, where ``extra`` of a leaf is
  ``p_i - q_i``, of an inner node the sum over its children, and ``pos_extra``/``neg_extra`` sum
  the positive / negative extras of N's children.

Every classic model here also takes a minimum group size ``k``. ``levels`` reports the smallest
group size ``k`` and the largest EMD ``t`` of a publication.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import ConfigError, DataError, require
from cdpbench.plugin import GroupExtension, ModelContext, PrivacyModel
from cdpbench.schema import Schema
from cdpbench.taxonomy import Taxonomy

DISTANCES = ("equal", "ordered", "hierarchical")
_TOL = 1e-12  # slack for float comparisons of an EMD with t


@dataclass
class TClosenessParams:
    t: float = field(default=0.2, metadata={"help": "maximum EMD between a group's and the table's sensitive distribution, in [0, 1]"})
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})
    distance: str = field(
        default="equal",
        metadata={"help": "ground distance of the EMD: 'equal', 'ordered' (domain order) or 'hierarchical' (sensitive taxonomy)"},
    )

    def __post_init__(self) -> None:
        require(
            isinstance(self.t, (int, float)) and not isinstance(self.t, bool) and 0.0 <= self.t <= 1.0,
            "t",
            "a number in [0, 1]",
            self.t,
        )
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(self.distance in DISTANCES, "distance", "one of 'equal', 'ordered', 'hierarchical'", self.distance)


# ---------------------------------------------------------------------------- EMDs, [G, m] -> [G]
def equal_emd(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """EMD with equal ground distance: half the L1 distance of each row of ``p`` to ``q``."""
    return 0.5 * np.abs(p - q).sum(axis=1)


def ordered_emd(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """EMD with ordered ground distance ``|i - j| / (m - 1)`` over the domain order."""
    m = p.shape[1]
    if m < 2:
        return np.zeros(p.shape[0])
    return np.abs(np.cumsum(p - q, axis=1)).sum(axis=1) / (m - 1)


def hierarchical_emd(p: np.ndarray, q: np.ndarray, taxonomy: Taxonomy) -> np.ndarray:
    """EMD with the height-based hierarchical ground distance of ``taxonomy`` (leaf code = column).

    Node ids of a level increase with their leaf-code range, so the children of a node are a
    contiguous run of ids of the level below and each level is one ``np.add.reduceat``.
    """
    H = taxonomy.height
    extra = p - q  # level 0: one column per leaf
    cost = np.zeros(p.shape[0])
    if H == 0:
        return cost
    for h in range(1, H + 1):
        first_child = taxonomy.node_of_leaf[h - 1, taxonomy.low[h]]  # [nodes at level h]
        pos = np.add.reduceat(np.maximum(extra, 0.0), first_child, axis=1)
        neg = np.add.reduceat(np.maximum(-extra, 0.0), first_child, axis=1)
        cost += (h / H) * np.minimum(pos, neg).sum(axis=1)
        extra = pos - neg
    return cost


class TCloseness(PrivacyModel):
    """t-closeness: EMD(group, table) <= t (equal, ordered or hierarchical ground distance)."""

    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    Params = TClosenessParams

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        self._check_ground_distance(ctx.schema)

    def _check_ground_distance(self, schema: Schema) -> None:
        s = schema.sensitive
        if self.params.distance == "hierarchical" and s.taxonomy is None:
            raise ConfigError(
                f"distance='hierarchical' needs a taxonomy for the sensitive attribute {s.name!r} "
                "(schema.sensitive.hierarchy); use distance='equal' or 'ordered' or give it a hierarchy"
            )
        if self.params.distance == "ordered" and not s.ordered:
            raise ConfigError(
                f"distance='ordered' needs an ordered sensitive attribute; {s.name!r} is not declared "
                "ordered (schema.sensitive.ordered: true)"
            )

    def distances(self, counts: np.ndarray, ctx: ModelContext) -> np.ndarray:
        """``[G]`` EMD of each group (rows of ``counts``) to ``ctx.table_distribution``."""
        self._check_ground_distance(ctx.schema)
        q = np.asarray(ctx.table_distribution, dtype=float)
        if q.shape != (counts.shape[1],):
            raise DataError(
                f"table_distribution has shape {q.shape}; the sensitive domain has {counts.shape[1]} values"
            )
        p = counts / np.maximum(counts.sum(axis=1), 1)[:, None]
        if self.params.distance == "equal":
            return equal_emd(p, q)
        if self.params.distance == "ordered":
            return ordered_emd(p, q)
        return hierarchical_emd(p, q, ctx.schema.sensitive.taxonomy)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        counts = batch.counts()
        return (counts.sum(axis=1) >= self.params.k) & (self.distances(counts, ctx) <= self.params.t + _TOL)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model t_closeness (it judges a QI group's values)")
        counts = publication.group_counts()
        if counts.shape[0] == 0:
            return {"k": 0.0, "t": 0.0}
        return {"k": float(counts.sum(axis=1).min()), "t": float(self.distances(counts, ctx).max())}

    def extension(
        self, release: Release, ctx: ModelContext, rows: np.ndarray, segment: np.ndarray, n_groups: int
    ) -> GroupExtension | None:
        """Per-group sensitive counts, so "every group plus one record" is one ``[G, m]`` EMD."""
        if type(self).accepts is not TCloseness.accepts:
            return None  # a subclass judging otherwise: let the caller ask accepts
        return ClosenessExtension(self, ctx, release.sensitive, release.n_values, rows, segment, n_groups)


class ClosenessExtension(GroupExtension):
    """Running ``[G, m]`` sensitive counts of a list of groups (see :meth:`TCloseness.extension`)
    and a ``[G, m]`` table: may group g take one more record of sensitive value v? Each entry is
    ``TCloseness.accepts`` on the count row ``counts[g] + e_v`` (integer counts, then the same EMD
    of the same row), so ``accepts_plus(row)`` is one column of the table; ``add`` refreshes the
    grown group's row of the table (m candidate rows in one EMD call)."""

    def __init__(self, model: TCloseness, ctx: ModelContext, sensitive: np.ndarray, n_values: int, rows: np.ndarray, segment: np.ndarray, n_groups: int):
        model._check_ground_distance(ctx.schema)
        self.model, self.ctx = model, ctx
        self.sensitive = np.asarray(sensitive, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        m = int(n_values)
        self.counts = GroupBatch(self.sensitive[rows], np.asarray(segment, dtype=np.int64), int(n_groups), m).counts().copy()
        self._unit = np.eye(m, dtype=self.counts.dtype)
        self.table = self._judge((self.counts[:, None, :] + self._unit[None, :, :]).reshape(-1, m)).reshape(-1, m)

    def _judge(self, counts: np.ndarray) -> np.ndarray:
        p = self.model.params
        return (counts.sum(axis=1) >= p.k) & (self.model.distances(counts, self.ctx) <= p.t + _TOL)

    def refresh(self, groups: np.ndarray) -> None:
        """Recompute the table rows of ``groups`` from their counts (what :meth:`add` does for one
        group), for a caller that grew ``counts`` in place (a compiled merge)."""
        groups = np.asarray(groups, dtype=np.int64)
        m = self._unit.shape[0]
        self.table[groups] = self._judge((self.counts[groups][:, None, :] + self._unit[None, :, :]).reshape(-1, m)).reshape(-1, m)

    def emd_terms(self) -> tuple | None:
        """What a compiled loop needs to reproduce this judgment with its own EMD sum: ``(counts``
        (the running ``[G, m]`` int64 counts, which it may grow in place, then :meth:`refresh`),
        ``sensitive``, the table distribution, the bound ``t`` + slack, ``k``, whether the ground
        distance is ``ordered``) — for this class and ``TCloseness`` themselves with the ``equal`` or
        ``ordered`` ground distance; None otherwise (hierarchical EMD, or a subclass that may judge
        differently)."""
        p = self.model.params
        if type(self) is not ClosenessExtension or type(self.model) is not TCloseness or p.distance not in ("equal", "ordered"):
            return None
        table = np.asarray(self.ctx.table_distribution, dtype=float)
        if table.shape != (self.counts.shape[1],):
            return None  # the NumPy judgment raises the model's error
        return self.counts, self.sensitive, np.ascontiguousarray(table), p.t + _TOL, p.k, p.distance == "ordered"

    def accepts_plus(self, row: int) -> np.ndarray:
        return self.table[:, self.sensitive[row]]

    def accepts_plus_among(self, row: int, groups: np.ndarray) -> np.ndarray:
        return self.table[np.asarray(groups, dtype=np.int64), self.sensitive[row]]

    def add(self, g: int, row: int) -> None:
        self.counts[g, self.sensitive[row]] += 1
        self.table[g] = self._judge(self.counts[g][None, :] + self._unit)

    def prefix_counts(self, rows: np.ndarray) -> np.ndarray:
        """``[B, L, m]`` sensitive counts of the groups ``rows[b, :l + 1]`` (integer running sums)."""
        rows = np.asarray(rows, dtype=np.int64)
        m = self._unit.shape[0]
        onehot = (self.sensitive[rows][..., None] == np.arange(m)).astype(self.counts.dtype)
        return np.cumsum(onehot, axis=1)

    def accepts_prefixes(self, rows: np.ndarray) -> np.ndarray:
        """``TCloseness.accepts`` on every prefix of every row of ``rows`` (``[B, L]``): the prefix
        counts are exact integers, then the same EMD of the same count rows."""
        counts = self.prefix_counts(rows)
        B, L, m = counts.shape
        if B * L == 0:
            return np.zeros((B, L), dtype=bool)
        return self._judge(np.ascontiguousarray(counts.reshape(B * L, m))).reshape(B, L)
