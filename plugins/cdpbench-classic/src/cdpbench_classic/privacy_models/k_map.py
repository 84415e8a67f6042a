"""k-map (Sweeney, "Computational disclosure control", PhD thesis, MIT 2001; El Emam & Dankar,
"Protecting privacy using k-anonymity", JAMIA 15(5), 2008).

k-anonymity counts the records of the *published* table that share a QI-group; k-map counts the
individuals of the *population* (the identification database an adversary re-identifies
against) that the group's generalized QIs match: every group E of the publication must match at
least k population records,

    |{p in P : QI(p) in box(E)}| >= k,

``box(E)`` being the group's published generalization (per QI an interval; a categorical QI its
taxonomy node, or the set of leaves it stands for, ``Publication.value_sets``). The population is
the release's public population table (``Release.population``, e.g. the churn data set's base
table); a data set without one gets a one-line error naming the data set. Since P contains the
release, k-map with k is implied by k-anonymity with k, not conversely.

``accepts`` judges candidate groups through the box :meth:`Publication.from_partition` gives them
(``categorical``: ``taxonomy`` — the covering taxonomy node, Mondrian's default — or ``set`` — the
leaves present; match it to the anonymizer's own ``categorical``); ``verify`` judges the boxes
actually published. Counting: :mod:`cdpbench_classic.population` (a summed-area table of the
population, vectorized over all boxes). A bucketized publication (exact QIs) is refused.

``levels``: ``k_map`` (fewest population records a group matches) and ``k`` (smallest group).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import ModelContext, PrivacyModel, VerifyReport

from ..population import PopulationBoxes

CATEGORICAL = ("taxonomy", "set")


@dataclass
class KMapParams:
    k: int = field(default=2, metadata={"help": "minimum number of population records each published QI-group matches (>= 1)"})
    categorical: str = field(
        default="taxonomy",
        metadata={"help": "the box accepts() judges for a categorical QI: 'taxonomy' (covering node) or 'set' (the "
                          "values present); match the anonymizer's categorical"},
    )

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(self.categorical in CATEGORICAL, "categorical", "one of 'taxonomy', 'set'", self.categorical)


class KMap(PrivacyModel):
    """k-map: every published QI-group matches at least k records of the public population."""

    Params = KMapParams
    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)
    needs_qi: ClassVar[bool] = True  # a candidate group's box comes from its records' exact QIs
    needs_population: ClassVar[bool] = True  # the run refuses a data set without Release.population

    def __init__(self, params=None):
        super().__init__(params)
        self.boxes = PopulationBoxes("k_map")

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        self.boxes.prepare(release)  # the population indexed once a release

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        matches = self.boxes.candidate_counts(batch.qi, batch.segment, batch.n_groups, ctx, self.params.categorical)
        return matches >= self.params.k

    def verify(self, publication: Publication, ctx: ModelContext) -> VerifyReport:
        matches, _ = self.boxes.published_counts(publication, ctx)
        bad = int((matches < self.params.k).sum())
        return VerifyReport(bad == 0, bad, self._levels(publication, matches))

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        return self._levels(publication, self.boxes.published_counts(publication, ctx)[0])

    @staticmethod
    def _levels(publication: Publication, matches: np.ndarray) -> dict[str, float]:
        sizes = publication.group_sizes()
        if len(sizes) == 0:
            return {"k_map": 0.0, "k": 0.0}
        return {"k_map": float(matches.min()), "k": float(sizes.min())}
