"""The continuous churn process: deletions, insertions, sensitive-value updates and re-insertions
over a static base table, and the (tau, m)-slicedBucket scenario built on it.

Continuous publishing papers turn a static table into a changing one this way (the footnote of
BayFrame §6.1: records of a static set assigned to releases). :func:`churn_process` implements the
common process; :class:`Churn` is its (tau, m)-slicedBucket configuration (Adult, §6 "Experiment and
analysis" of that paper: external updates = deletions and insertions, internal updates = sensitive
updates and re-insertions of deleted records).

The paper's QIs are age, gender and zip code; Adult has no zip code, so ``qi`` may name a
**synthetic** ``zip`` column (not UCI data): one 5-digit code per respondent (= row of the base
table), uniform over 480 Indiana-style codes 47001-47958 (``47`` + area 0-9 + district 0-5 +
final digit 1-8), a pure function of the respondent id and the fixed seed ``ZIP_SEED = 47906``
(never of the run's ``rng``), so a respondent keeps its zip across releases, runs and processes.
It generalizes by longest common prefix: ``47906 -> 4790* -> 479** -> 47***``. Details:
:mod:`cdpbench.datasets.zipcodes`. Use ``dataset.qi=[age,sex,zip]`` for the paper's QIs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Iterator

import numpy as np
import pandas as pd

from ..data import Release
from ..errors import require
from ..plugin import Dataset
from ..schema import Schema
from .adult import QI_COLUMNS, ZIP_COLUMN, adult_schema, check_adult_columns, check_counts, load_adult
from .churn_process import ChurnPlan, churn_process, plan_churn  # noqa: F401 - re-exported
from .synthetic import synthetic_adult


# ---------------------------------------------------------------------------- the scenario
BASES: tuple[str, ...] = ("adult", "synthetic")


@dataclass
class ChurnParams:
    base: str = field(
        default="adult",
        metadata={
            "help": f"base table the releases are drawn from; one of {list(BASES)}: 'adult' = UCI Adult's 30,162 "
            "complete rows; 'synthetic' = exactly the rows the process uses (initial + (releases-1) x insertions), "
            "each drawn with replacement from Adult's rows by the run's seed (any size; not UCI data)"
        },
    )
    releases: int = field(default=20, metadata={"help": "number of releases T (>= 1)"})
    initial: int = field(default=10_000, metadata={"help": "records in the first release |T1| (>= 1)"})
    deletions: int = field(default=875, metadata={"help": "records of T(i-1) deleted at each later release (>= 0)"})
    insertions: int = field(default=1_000, metadata={"help": "never-used base rows inserted at each later release (>= 0)"})
    updates: int = field(
        default=250,
        metadata={"help": "records kept from T(i-1) whose sensitive value is re-drawn uniformly (may stay the same) (>= 0)"},
    )
    reinsertions: int = field(
        default=250,
        metadata={
            "help": "records deleted earlier re-inserted at each later release, with the QI and sensitive value they "
            "had when deleted (>= 0)"
        },
    )
    qi: list[str] = field(
        default_factory=lambda: ["age", "sex", "education"],
        metadata={
            "help": f"quasi-identifier columns, in matrix order; any of {list(QI_COLUMNS)}. 'zip' is synthetic "
            "(not in UCI Adult): a 5-digit code per respondent, uniform over 480 codes 47001-47958, fixed by the "
            "seed 47906 (the same in every run), generalized by longest common prefix (4790*, 479**, 47***); "
            "qi=[age,sex,zip] gives the paper's QIs"
        },
    )
    sensitive: str = field(default="occupation", metadata={"help": "the sensitive column (a base column not in qi)"})

    def __post_init__(self) -> None:
        require(self.base in BASES, "base", f"one of {list(BASES)}", self.base)
        check_counts(self, ("releases", 1), ("initial", 1), ("deletions", 0), ("insertions", 0), ("updates", 0),
                     ("reinsertions", 0))
        check_adult_columns(self.qi, self.sensitive)


class Churn(Dataset):
    """(tau, m)-slicedBucket churn over Adult: deletions, insertions, updates and re-insertions a release."""

    Params = ChurnParams
    scenario: ClassVar[str] = "continuous"
    publishes_population = True  # every release carries the base table's QIs (Release.population)

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        """Releases 1..T of the churn process (:func:`churn_process`) over the base table.

        The paper ((tau, m)-slicedBucket, §6) draws 20 releases from 60,000 Adult tuples with about
        3,500 deletions, 4,000 insertions, 1,000 sensitive updates and 1,000 re-insertions per
        release, and QI age, gender, zip code / sensitive occupation. Those counts cannot run 20
        releases on Adult (19 x 4,000 insertions alone exceed its 30,162 complete rows, and the
        paper's 60,000), so the defaults keep their proportions at a quarter of the size: 875
        deletions, 1,000 insertions, 250 updates, 250 re-insertions, T1 = 10,000 records (the
        paper does not give |T1|), 20 releases; 29,000 rows are used and the table grows from
        10,000 to 16,875 records (+125 at release 2, which has nothing to re-insert, then +375 a
        release). The paper's own counts run with ``releases=7`` (and ``initial >= 4,500``).
        Adult has no zip code: the QIs default to age, sex, education; ``qi=[age, sex, zip]``
        uses the synthetic ``zip`` (see the module docstring) for the paper's age, gender, zip code.

        ``base=synthetic`` runs the same process at any size: the base table is exactly the
        ``initial + (releases - 1) * insertions`` rows the process uses, each a uniformly drawn
        Adult row (:func:`~cdpbench.datasets.synthetic.synthetic_adult`), drawn from ``rng`` before
        the first release.

        Every release carries the public population (``Release.population``): the QIs of every
        row of the base table (the pool the respondents are drawn from, a superset of each
        release), one array shared by all releases, for δ-presence and k-map.
        """
        p = self.params
        schema = adult_schema(p.qi, p.sensitive)
        if p.base == "adult":
            base = load_adult(with_zip=ZIP_COLUMN in p.qi)
            name = "base table 'adult'"
        else:
            rows = p.initial + (p.releases - 1) * p.insertions
            base = synthetic_adult(rows, [*p.qi, p.sensitive], rng)
            name = "the synthetic base table"
        releases = churn_process(
            base,
            schema,
            initial=p.initial,
            deletions=p.deletions,
            insertions=p.insertions,
            updates=p.updates,
            reinsertions=p.reinsertions,
            releases=p.releases,
            rng=rng,
            name=name,
        )
        return with_population(releases, population_qi(base, schema))


def population_qi(base: pd.DataFrame, schema: Schema) -> np.ndarray:
    """float64 ``[N, d]``: the QI columns of every row of ``base``, encoded as a release's ``qi``
    (:meth:`Schema.encode`; respondent id = row position, as in :func:`churn_process`)."""
    frame = base[[*schema.qi_names, schema.sensitive.name]].reset_index(drop=True)
    frame.insert(0, schema.respondent, np.arange(len(frame), dtype=np.int64))
    qi = schema.encode(frame, 0).qi
    qi.flags.writeable = False  # one array shared by every release
    return qi


def with_population(releases: Iterator[Release], population: np.ndarray) -> Iterator[Release]:
    """The releases, each with ``population`` as its public population table."""
    for release in releases:
        release.population = population
        yield release
