"""δ-presence (Nergiz, Atzori & Clifton, "Hiding the presence of individuals from shared
databases", SIGMOD 2007).

Given a public population table P (``Release.population``) with the published table T ⊆ P and its
generalization T*, T* is (δmin, δmax)-present when every population record p has

    δmin <= P(p ∈ T | T*) <= δmax .

For a publication of groups (equivalence classes) with generalized boxes, a population record
inside group E's box is in T with probability

    δ(E) = |E| / |{p in P : QI(p) in box(E)}|

(the group's published records over the population records its box matches: under the paper's
global recodings, the count of a generalized tuple in T* over its count in P generalized the same
way), so the model is a predicate on groups:
``δmin <= δ(E) <= δmax`` for every E (``accepts``; ``violations`` counts groups failing it).

Reading where the paper's global recoding and a local one (Mondrian) differ:

* A population record inside **no** box has ``P(p ∈ T | T*) = 0``: the publication shows it is
  absent. With ``δmin > 0`` that violates the model; no group can be blamed for it, so it is not
  a group violation, but ``verify`` is then not ``satisfied`` and ``levels`` report the number of
  such records as ``uncovered``. With ``δmin = 0`` (the default) it is allowed.
* Overlapping boxes (local recoding): each group is judged on its own box, δ(E) as above.

``accepts`` judges candidate groups through the box :meth:`Publication.from_partition` gives them
(``categorical`` as in ``k_map``); ``verify`` judges the boxes published. The population must
contain the release (P ⊇ T), as in the paper. Every classic model here also takes a minimum group
size ``k``. A bucketized publication (exact QIs) is refused.

``levels``: ``k`` (smallest group), ``delta_min`` / ``delta_max`` (smallest / largest δ(E)) and
``uncovered`` (population records in no box).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport

from ..population import PopulationBoxes

CATEGORICAL = ("taxonomy", "set")
_TOL = 1e-12  # slack for a ratio equal to a bound (1/4 against 0.25)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class DeltaPresenceParams:
    delta_min: float = field(default=0.0, metadata={"help": "lower bound δmin on P(p in T | T*) for every population record, 0 <= δmin <= δmax"})
    delta_max: float = field(default=0.5, metadata={"help": "upper bound δmax on P(p in T | T*), δmin <= δmax <= 1"})
    categorical: str = field(
        default="taxonomy",
        metadata={"help": "the box accepts() judges for a categorical QI: 'taxonomy' (covering node) or 'set' (the "
                          "values present); match the anonymizer's categorical"},
    )
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        require(_is_number(self.delta_min) and 0 <= self.delta_min <= 1, "delta_min", "a number in [0, 1]", self.delta_min)
        require(_is_number(self.delta_max) and 0 <= self.delta_max <= 1, "delta_max", "a number in [0, 1]", self.delta_max)
        require(self.delta_min <= self.delta_max, "delta_min", f"<= delta_max ({self.delta_max})", self.delta_min)
        require(self.categorical in CATEGORICAL, "categorical", "one of 'taxonomy', 'set'", self.categorical)
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)


def presence(sizes: np.ndarray, matches: np.ndarray) -> np.ndarray:
    """``[G]`` δ(E) = |E| / (population records in E's box); ``inf`` for a box matching none
    (a population that does not contain the release)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(matches > 0, sizes / np.maximum(matches, 1), np.inf)


class DeltaPresence(PrivacyModel):
    """δ-presence: δmin <= |E| / |population records in E's box| <= δmax for every QI-group E."""

    Params = DeltaPresenceParams
    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)
    needs_qi: ClassVar[bool] = True  # a candidate group's box comes from its records' exact QIs
    needs_population: ClassVar[bool] = True  # the run refuses a data set without Release.population

    def __init__(self, params=None):
        super().__init__(params)
        self.boxes = PopulationBoxes("delta_presence")

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        self.boxes.prepare(release)  # the population indexed once a release

    def _ok(self, sizes: np.ndarray, matches: np.ndarray) -> np.ndarray:
        p = self.params
        delta = presence(sizes, matches)
        return (delta >= p.delta_min - _TOL) & (delta <= p.delta_max + _TOL) & (sizes >= p.k)

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        matches = self.boxes.candidate_counts(batch.qi, batch.segment, batch.n_groups, ctx, self.params.categorical)
        return self._ok(batch.sizes(), matches)

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        matches, index = self.boxes.published_counts(publication, ctx)
        sizes = publication.group_sizes()
        levels = self._levels(publication, sizes, matches, index)
        bad = int((~self._ok(sizes, matches)).sum())
        absent_shown = self.params.delta_min > 0 and levels["uncovered"] > 0
        return VerifyReport(bad == 0 and not absent_shown, bad, levels)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        matches, index = self.boxes.published_counts(publication, ctx)
        return self._levels(publication, publication.group_sizes(), matches, index)

    @staticmethod
    def _levels(publication: Publication, sizes: np.ndarray, matches: np.ndarray, index) -> dict[str, float]:
        uncovered = float(index.uncovered(publication.low, publication.high, publication.value_sets))
        if len(sizes) == 0:
            return {"k": 0.0, "delta_min": 0.0, "delta_max": 0.0, "uncovered": uncovered}
        delta = presence(sizes, matches)
        return {"k": float(sizes.min()), "delta_min": float(delta.min()), "delta_max": float(delta.max()),
                "uncovered": uncovered}
