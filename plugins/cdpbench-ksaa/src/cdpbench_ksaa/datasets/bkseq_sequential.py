"""``bkseq_sequential``: the data set of the plugin reference ``bkseq`` (default cdpbench-jsreduce's
``bkseq``, its re-creation of JS-reduce's BKseq; its parameters are ``dataset.bkseq.<param>``,
e.g. ``dataset.bkseq.releases``) with the QIs in ``late`` (weight by default) left out of the
first release — KSAA's "the number of attributes may vary". Respondents differ from view to view
as in bkseq (an exam a week with probability ``dataset.bkseq.presence``); values follow its
disease chains.

Sequential scenarios (KSAA §1; the core's ``sequential`` scenario type): the same respondents
published release after release, each release with its own set of QI attributes, and some values
updated between releases.

All randomness comes from the run's data generator: same seed, same releases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator

import numpy as np

from cdpbench.data import Release
from cdpbench.errors import require
from cdpbench.plugin import Dataset, plugin_ref


@dataclass
class BKseqSequentialParams:
    bkseq: Any = plugin_ref(
        "dataset", "bkseq",
        "the data set giving the weekly views (JS-reduce's BKseq): dataset.bkseq.releases (views), .tuples, .presence, ...",
    )
    late: list[str] = field(default_factory=lambda: ["weight"],
                            metadata={"help": "QI columns published only from the second release on"})

    def __post_init__(self) -> None:
        allowed = ["age", "gender", "weight"]
        require(isinstance(self.late, (list, tuple)) and set(self.late) <= set(allowed) and len(set(self.late)) < 3,
                "late", f"a list of at most two of {allowed}", self.late)


class BKseqSequential(Dataset):
    """BKseq (JS-reduce's medical views, through the registry) as a sequential scenario: some QIs (weight) published from the second release on."""

    Params = BKseqSequentialParams
    scenario: ClassVar[str] = "sequential"

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        from cdpbench.schema import Schema

        p = self.params
        for rel in p.bkseq.releases(rng):
            if rel.t == 1 and p.late:
                keep = [j for j, q in enumerate(rel.schema.qi) if q.name not in set(p.late)]
                s = rel.schema
                schema = Schema(tuple(s.qi[j] for j in keep), s.sensitive, respondent=s.respondent, time=s.time)
                rel = Release(rel.t, schema, rel.respondent, rel.qi[:, keep], rel.sensitive, rel.time, rel.truth)
            yield rel
