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

Sequential scenarios (KSAA §1; the core's ``sequential`` scenario type): the same respondents
published release after release, each release with its own set of QI attributes, and some values
updated between releases.

All randomness comes from the run's data generator: same seed, same releases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Iterator

import numpy as np

from cdpbench.data import Release
from cdpbench.datasets.adult import ADULT_ROWS, adult_schema, check_adult_columns, load_adult
from cdpbench.errors import ConfigError, require
from cdpbench.plugin import Dataset

DEFAULT_QI_SETS = [["sex", "race", "education"], ["sex", "race", "marital-status"], ["sex", "education", "workclass"]]


@dataclass
class AdultSequentialParams:
    records: int = field(default=5000, metadata={"help": f"respondents: the first N cleaned Adult rows (1..{ADULT_ROWS})"})
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
        for name, low in (("records", 1), ("releases", 1)):
            value = getattr(self, name)
            require(isinstance(value, int) and not isinstance(value, bool) and value >= low, name, f"an integer >= {low}", value)
        require(self.records <= ADULT_ROWS, "records", f"at most {ADULT_ROWS} (the cleaned Adult rows)", self.records)
        require(isinstance(self.qi_sets, (list, tuple)) and len(self.qi_sets) >= 1, "qi_sets", "a non-empty list of QI lists", self.qi_sets)
        for i, qi in enumerate(self.qi_sets):
            try:
                check_adult_columns(list(qi), self.sensitive)
            except ConfigError as e:
                raise ConfigError(f"qi_sets[{i}]: {e}") from None
        rate = self.update_rate
        require(isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0.0 <= rate <= 1.0,
                "update_rate", "a number in [0, 1]", rate)


class AdultSequential(Dataset):
    """Adult sequential (KSAA setting): the same respondents, a different QI set per release, sensitive updates."""

    Params = AdultSequentialParams
    scenario: ClassVar[str] = "sequential"

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        p = self.params
        base = load_adult(with_zip="zip" in {q for s in p.qi_sets for q in s}).head(p.records)
        base = base.assign(id=np.arange(len(base), dtype=np.int64))
        sensitive = None
        m = None
        for t in range(1, p.releases + 1):
            qi = list(p.qi_sets[(t - 1) % len(p.qi_sets)])
            schema = adult_schema(qi, p.sensitive)
            rel = schema.encode(base[schema.columns], t)
            updated = np.zeros(0, dtype=np.int64)
            if sensitive is None:
                sensitive, m = rel.sensitive.copy(), rel.n_values
            else:
                n_up = int(round(p.update_rate * len(sensitive)))
                updated = np.sort(rng.choice(len(sensitive), size=n_up, replace=False)).astype(np.int64)
                sensitive[updated] = rng.integers(0, m, size=n_up)
            rel.sensitive = sensitive.copy()
            rel.truth = {"updated": rel.respondent[updated]}
            yield rel
