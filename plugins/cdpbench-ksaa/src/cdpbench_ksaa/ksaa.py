"""``ksaa``: the knowledge-based sequential anonymization algorithm (KSAA, Amiri et al., Inf. Sci.
2018, §1 — the only part of the paper that is public; the steps below are the three its
introduction names, the rest is the lab's reading, listed in the package README).

1. **Primary groups** that satisfy the privacy model in the current release: a bottom-up, local
   generalization anonymizer created through the registry (``base``, default ``js_reduce``: Hilbert
   order and greedy groups, any privacy model; ``base_params`` passes its parameters, by default
   ``leftovers: merge`` so that no record is suppressed).
2. **Check of the join** with the earlier releases: the run's privacy model, when it judges the
   history (``violating_groups``: ``k_linkability``, ``k_diversity``, ``j_similarity_join``), names
   the groups of the current release holding a respondent it finds at risk.
3. **Merge** every violating group with the group closest in QI (the nearest centre of the
   published boxes, each QI scaled by its domain width; a k-d tree, scipy's), all merges of a round
   at once (connected pairs become one group), and check again; repeat until no group violates
   the model or one group is left.

A merged group's box is the smallest box around its records (local generalization). Merging can
only add links (a wider box is consistent with more records; a larger group holds more values),
so the rounds end. ``info``: ``merge_rounds`` and ``merged_groups``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import Anonymizer, PublishContext
from cdpbench.registry import default_registry


@dataclass
class KSAAParams:
    base: str = field(default="js_reduce", metadata={"help": "anonymizer plugin giving the primary groups (bottom-up, local generalization)"})
    base_params: dict[str, Any] = field(
        default_factory=lambda: {"leftovers": "merge"},
        metadata={"help": "parameters of the base anonymizer"},
    )
    max_rounds: int = field(default=1000, metadata={"help": "merge rounds before giving up (>= 1)"})

    def __post_init__(self) -> None:
        installed = default_registry().names("anonymizer")
        require(self.base in installed and self.base != "ksaa", "base", f"an installed anonymizer other than ksaa ({', '.join(installed)})", self.base)
        require(isinstance(self.max_rounds, int) and not isinstance(self.max_rounds, bool) and self.max_rounds >= 1,
                "max_rounds", "an integer >= 1", self.max_rounds)


class KSAA(Anonymizer):
    """KSAA (Amiri et al. 2018): primary groups by a bottom-up anonymizer, then groups the join with earlier releases breaks merged with their QI-nearest group."""

    Params = KSAAParams

    def __init__(self, params=None):
        super().__init__(params)
        p = self.params
        self.base = default_registry().create("anonymizer", p.base, dict(p.base_params), "anonymizer.base_params")
        self.needs_prior = bool(getattr(self.base, "needs_prior", False))

    def publish(self, release: Release, ctx: PublishContext) -> Publication:
        primary = self.base.publish(release, ctx)
        labels = np.full(len(release), -1, dtype=np.int64)
        real = ~primary.counterfeit
        labels[primary.row[real]] = primary.group[real]
        model = ctx.privacy_model
        judge = getattr(model, "violating_groups", None)
        pub, rounds, merged = primary, 0, 0
        widths = np.where(release.schema.widths > 0, release.schema.widths, 1.0)
        while judge is not None and rounds < self.params.max_rounds:
            bad = np.asarray(judge(pub, ctx.model_context), dtype=np.int64)
            if len(bad) == 0 or pub.n_groups <= 1:
                break
            rounds += 1
            merged += len(bad)
            labels = _merge_with_nearest(labels, pub, bad, widths)
            pub = Publication.from_partition(release, labels)
            labels = np.full(len(release), -1, dtype=np.int64)
            labels[pub.row] = pub.group
        pub.info.update(primary.info)
        pub.info.update({"merge_rounds": float(rounds), "merged_groups": float(merged)})
        return pub


def _merge_with_nearest(labels: np.ndarray, pub: Publication, bad: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """New record labels after merging each group in ``bad`` with its QI-nearest other group."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    centre = (pub.low + pub.high) / 2.0 / widths
    _, nearest = cKDTree(centre).query(centre[bad], k=2)
    partner = np.where(nearest[:, 0] == bad, nearest[:, 1], nearest[:, 0])
    G = pub.n_groups
    graph = coo_matrix((np.ones(len(bad)), (bad, partner)), shape=(G, G))
    _, comp = connected_components(graph, directed=False)
    return np.where(labels >= 0, comp[np.maximum(labels, 0)], -1)
