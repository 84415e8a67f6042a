"""l-diversity (Machanavajjhala, Kifer, Gehrke, Venkitasubramaniam, TKDD 2007).

A QI-group (the paper's q*-block) is, by the instantiations of the l-diversity principle (§4),

* **distinct** l-diverse when it holds at least ``l`` distinct sensitive values;
* **entropy** l-diverse when ``-sum_s p(s) log p(s) >= log l``, ``p(s)`` being the
  fraction of the group's records with value ``s``;
* **recursive (c,l)**-diverse when ``r_1 < c (r_l + r_{l+1} + ... + r_m)``,
  ``r_i`` being the count of the i-th *most* frequent value in the group.

Every classic model here also takes a minimum group size ``k`` so that experiments can sweep
``privacy_model.k`` across models.

Achieved levels (``levels``), following pycanon 1.3.6's conventions where it has one:
``l_distinct`` = min number of distinct values per group; ``l_entropy`` = ``exp`` of the minimum
group entropy (pycanon reports its integer part); ``c_recursive`` = the smallest *integer* c with
``r_1 < c (r_l + ... + r_m)`` in every group at the configured ``l`` (``floor(r_1 / tail) + 1``,
the quantity pycanon computes), ``inf`` when some group has fewer than ``l`` distinct values.
Note: pycanon 1.3.6 sorts the counts *ascending* before taking ``r_1``, which is not the paper's
definition; this module follows the paper (descending).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cdpbench.data import GroupBatch, Publication
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel

VARIANTS = ("distinct", "entropy", "recursive")
_TOL = 1e-12  # slack for float comparisons of entropies (uniform groups hit log l exactly)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class LDiversityParams:
    variant: str = field(
        default="distinct",
        metadata={"help": "which l-diversity: 'distinct', 'entropy' or 'recursive' ((c,l)-diversity)"},
    )
    l: float = field(
        default=2.0,
        metadata={"help": "diversity level l >= 1 (distinct: a count of values; recursive: a whole number)"},
    )
    c: float = field(default=1.0, metadata={"help": "constant c > 0 of recursive (c,l)-diversity"})
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(self.variant in VARIANTS, "variant", "one of 'distinct', 'entropy', 'recursive'", self.variant)
        require(_is_number(self.l) and self.l >= 1, "l", "a number >= 1", self.l)
        require(
            self.variant != "recursive" or float(self.l).is_integer(),
            "l",
            "a whole number for variant 'recursive' (r_l is the l-th largest count)",
            self.l,
        )
        require(_is_number(self.c) and self.c > 0, "c", "a number > 0", self.c)
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)


# ---------------------------------------------------------------------------- per-group statistics
def distinct_values(counts: np.ndarray) -> np.ndarray:
    """``[G]`` number of distinct sensitive values per group from ``[G, m]`` counts."""
    return np.count_nonzero(counts, axis=1)


def entropies(counts: np.ndarray) -> np.ndarray:
    """``[G]`` entropy ``-sum p log p`` (natural log) of each group's sensitive distribution."""
    from scipy.special import xlogy  # here, not at import: registering plugins must stay fast

    sizes = counts.sum(axis=1)
    p = counts / np.maximum(sizes, 1)[:, None]
    return -xlogy(p, p).sum(axis=1)


def recursive_tail(counts: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r_1, r_l + ... + r_m)`` per group, ``r`` the counts sorted in *descending* order."""
    desc = -np.sort(-counts, axis=1)
    return desc[:, 0], desc[:, l - 1 :].sum(axis=1)


def smallest_integer_c(counts: np.ndarray, l: int) -> np.ndarray:
    """``[G]`` smallest integer c with ``r_1 < c (r_l + ... + r_m)``; ``inf`` if the tail is 0."""
    r1, tail = recursive_tail(counts, l)
    c = np.full(len(r1), np.inf)
    pos = tail > 0
    c[pos] = r1[pos] // tail[pos] + 1
    return c


class LDiversity(PrivacyModel):
    """l-diversity (distinct, entropy or recursive (c,l)) with a minimum group size k."""

    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    Params = LDiversityParams

    @property
    def _l_index(self) -> int:
        """The configured l as an index into the sorted counts (a count of values rounds up)."""
        return int(math.ceil(self.params.l))

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        p = self.params
        counts = batch.counts()
        ok = counts.sum(axis=1) >= p.k
        if p.variant == "distinct":
            ok &= distinct_values(counts) >= p.l
        elif p.variant == "entropy":
            ok &= entropies(counts) >= math.log(p.l) - _TOL
        else:
            r1, tail = recursive_tail(counts, self._l_index)
            ok &= r1 < p.c * tail
        return ok

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model l_diversity (it judges a QI group's values)")
        counts = publication.group_counts()
        if counts.shape[0] == 0:
            return {"k": 0.0, "l_distinct": 0.0, "l_entropy": 0.0, "c_recursive": float("nan")}
        return {
            "k": float(counts.sum(axis=1).min()),
            "l_distinct": float(distinct_values(counts).min()),
            "l_entropy": float(np.exp(entropies(counts).min())),
            "c_recursive": float(smallest_integer_c(counts, self._l_index).max()),
        }
