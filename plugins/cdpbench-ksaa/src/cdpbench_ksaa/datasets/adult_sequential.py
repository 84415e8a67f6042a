"""``adult_sequential``: the first ``records`` cleaned Adult rows (respondent id = row), released
``releases`` times. Release ``t`` publishes the QI set ``qi_sets[(t - 1) % len(qi_sets)]`` and the
sensitive attribute (occupation by default). Before each later release, a share ``update_rate`` of
the respondents, drawn afresh each time, get their sensitive value re-drawn uniformly over the
domain (it may stay the same), as in the core's Adult continuous scenario (BayFrame §6.1); QI
values do not change. Defaults (KSAA gives none): 5,000 records, 3 releases,
``[[sex, race, education], [sex, race, marital-status], [sex, education, workclass]]`` (every pair
of releases shares one or two attributes; all categorical, so the top-down baselines, which
generalize along taxonomies, run too), ``update_rate = 0.1``. Each release's ``truth``
records which respondents were updated before it (``updated``: sorted ids).

Every release carries its public population (``Release.population``, for δ-presence and k-map):
with ``base=adult`` the release's QI columns of all 30,162 cleaned Adult rows (the respondents are
its first ``records``); with ``base=synthetic`` the drawn respondents themselves (the pool is the
release: δ-presence is then 1 for every group and k-map is k-anonymity).

``base=synthetic`` runs the same scenario at any size (issue #28): the respondents are
``records`` rows drawn uniformly with replacement from Adult's complete rows by the run's
generator (:func:`cdpbench.datasets.synthetic.synthetic_adult`; not UCI data, a resample of it),
drawn before the first release, so the same seed gives the same releases.

Sequential scenarios (KSAA §1; the core's ``sequential`` scenario type): the same respondents
published release after release, each release with its own set of QI attributes, and some values
updated between releases.

All randomness comes from the run's data generator: same seed, same releases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Iterator

import numpy as np
import pandas as pd

from cdpbench.data import Release
from cdpbench.datasets.adult import ADULT_ROWS, adult_schema, check_adult_columns, load_adult
from cdpbench.datasets.synthetic import synthetic_adult
from cdpbench.errors import ConfigError, require
from cdpbench.plugin import Dataset

DEFAULT_QI_SETS = [["sex", "race", "education"], ["sex", "race", "marital-status"], ["sex", "education", "workclass"]]
BASES: tuple[str, ...] = ("adult", "synthetic")


@dataclass
class AdultSequentialParams:
    base: str = field(
        default="adult",
        metadata={
            "help": f"where the respondents come from; one of {list(BASES)}: 'adult' = the first `records` cleaned "
            f"Adult rows ({ADULT_ROWS} at most); 'synthetic' = `records` rows (any number) drawn with replacement "
            "from Adult's rows by the run's seed (not UCI data)"
        },
    )
    records: int = field(
        default=5000,
        metadata={"help": f"respondents: the first N cleaned Adult rows (1..{ADULT_ROWS}; base=synthetic: any N >= 1)"},
    )
    releases: int = field(default=3, metadata={"help": "number of releases (>= 1)"})
    qi_sets: list[list[str]] = field(
        default_factory=lambda: [list(s) for s in DEFAULT_QI_SETS],
        metadata={"help": "QI attributes of release t = qi_sets[(t-1) % len(qi_sets)]; Adult columns"},
    )
    sensitive: str = field(default="occupation", metadata={"help": "the sensitive column (in no QI set)"})
    update_rate: float = field(
        default=0.1, metadata={"help": "share of respondents whose sensitive value is re-drawn before each later release, in [0, 1]"}
    )

    def __post_init__(self) -> None:
        require(self.base in BASES, "base", f"one of {list(BASES)}", self.base)
        for name, low in (("records", 1), ("releases", 1)):
            value = getattr(self, name)
            require(isinstance(value, int) and not isinstance(value, bool) and value >= low, name, f"an integer >= {low}", value)
        if self.base == "adult":
            require(self.records <= ADULT_ROWS, "records",
                    f"at most {ADULT_ROWS} (the cleaned Adult rows; base=synthetic has any number)", self.records)
        require(isinstance(self.qi_sets, (list, tuple)) and len(self.qi_sets) >= 1, "qi_sets", "a non-empty list of QI lists", self.qi_sets)
        for i, qi in enumerate(self.qi_sets):
            try:
                check_adult_columns(list(qi), self.sensitive)
            except ConfigError as e:
                raise ConfigError(f"qi_sets[{i}]: {e}") from None
        rate = self.update_rate
        require(isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0.0 <= rate <= 1.0,
                "update_rate", "a number in [0, 1]", rate)

    def qi_columns(self) -> list[str]:
        """Every QI column of some release, each once, in order of first appearance."""
        return list(dict.fromkeys(q for qi in self.qi_sets for q in qi))


class AdultSequential(Dataset):
    """Adult sequential (KSAA setting): the same respondents, a different QI set per release, sensitive updates."""

    Params = AdultSequentialParams
    scenario: ClassVar[str] = "sequential"
    publishes_population = True  # every release carries its population's QIs (Release.population)

    def respondents(self, rng: np.random.Generator) -> pd.DataFrame:
        """The respondents (column ``id`` = row position, every QI column and the sensitive one):
        the first ``records`` Adult rows, or ``records`` rows of :func:`synthetic_adult` drawn from ``rng``."""
        p = self.params
        columns = [*p.qi_columns(), p.sensitive]
        if p.base == "adult":
            base = load_adult(with_zip="zip" in columns).head(p.records)[columns]
        else:
            base = synthetic_adult(p.records, columns, rng)
        return base.assign(id=np.arange(len(base), dtype=np.int64))

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        p = self.params
        qi_columns = p.qi_columns()
        # every column encoded once (a QI's codes do not depend on the other QIs of its schema);
        # release t takes the columns of its QI set
        whole = adult_schema(qi_columns, p.sensitive)
        encoded = whole.encode(self.respondents(rng)[whole.columns], 1)
        sensitive, m = encoded.sensitive.copy(), encoded.n_values
        if p.base == "adult":  # the public population: every Adult row, the respondents its first rows
            everyone = load_adult(with_zip="zip" in qi_columns).assign(id=lambda f: np.arange(len(f), dtype=np.int64))
            pool = whole.encode(everyone[whole.columns], 0).qi
        else:
            pool = encoded.qi
        populations: dict[tuple[str, ...], np.ndarray] = {}  # one array per QI set, shared by its releases
        for t in range(1, p.releases + 1):
            qi = list(p.qi_sets[(t - 1) % len(p.qi_sets)])
            columns = [qi_columns.index(q) for q in qi]
            population = populations.setdefault(tuple(qi), np.ascontiguousarray(pool[:, columns]))
            updated = np.zeros(0, dtype=np.int64)
            if t > 1:
                n_up = int(round(p.update_rate * len(sensitive)))
                updated = np.sort(rng.choice(len(sensitive), size=n_up, replace=False)).astype(np.int64)
                sensitive[updated] = rng.integers(0, m, size=n_up)
            yield Release(
                t=t,
                schema=adult_schema(qi, p.sensitive),
                respondent=encoded.respondent.copy(),
                qi=np.ascontiguousarray(encoded.qi[:, columns]),
                sensitive=sensitive.copy(),
                truth={"updated": encoded.respondent[updated]},
                population=population,
            )
