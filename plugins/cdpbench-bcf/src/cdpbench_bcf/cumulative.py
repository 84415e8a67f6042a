"""Adult as a cumulative scenario (BCF §6 and §7.1): D1 = adult.test, D2, D3, ... = consecutive
slices of adult.data, both without missing values.

Release ``t`` of ``adult_cumulative`` publishes ``D1 ∪ ... ∪ Dt`` with every record's timestamp
(the ``time`` column: the release its record arrived in). D1 is the 15,060 test records; each
later increment is the next ``d2`` training records in file order (the paper's 200D2, 2000D2 and
allD2 are ``d2=200``, ``2000`` and ``30162`` with ``releases=2``). ``adult_increments`` publishes
each increment alone (release ``t`` = ``Dt``): Fig. 2's "k-anonymized D2" alternative, safe from
correspondence attacks because its releases hold disjoint sets of individuals.

Attribute sets (§6): ``sen1`` — sensitive native-country, QI workclass, education,
marital-status, occupation, relationship, race, sex; ``sen3`` — sensitive the triple
(native-country, education, occupation) as one value ``country|education|occupation``, QI
workclass, marital-status, relationship, race, sex. Every QI is categorical and generalizes along
the core's Adult taxonomies (ARX's, and cdpbench's own tree for relationship). Sen3's domain is
every triple present in adult.test ∪ adult.data, so it is the same whatever ``d2``.

Respondent ids: test row ``i`` is ``i``; training row ``i`` is ``15060 + i``. Nothing is random.

``base=synthetic`` runs the same scenario at any size (issue #28): R1 is ``r1`` records and each
later increment ``d2`` records, every one a training row drawn uniformly with replacement by the
run's generator (:func:`cdpbench.datasets.synthetic.synthetic_adult`; not UCI data, a resample of
adult.data), all drawn before the first release, so the same seed gives the same releases.
Respondent ids are the row positions (R1's records ``0 .. r1 - 1``, then D2's, ...); the schema,
Sen3's domain included, is ``base=adult``'s.

The two data sets are subclasses of :class:`AdultReleases` (``cdpbench_bcf.datasets.adult_cumulative``
and ``cdpbench_bcf.datasets.adult_increments``); this module holds what they share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Iterator

import numpy as np
import pandas as pd

from cdpbench.data import Release
from cdpbench.datasets.adult import ADULT_ROWS, ADULT_TEST_ROWS, adult_taxonomy, load_adult
from cdpbench.datasets.synthetic import synthetic_adult
from cdpbench.errors import require
from cdpbench.plugin import Dataset
from cdpbench.schema import CategoricalQI, Schema, Sensitive

SEN3_PARTS: tuple[str, ...] = ("native-country", "education", "occupation")
ATTRIBUTE_SETS: dict[str, tuple[tuple[str, ...], str]] = {
    "sen1": (("workclass", "education", "marital-status", "occupation", "relationship", "race", "sex"), "native-country"),
    "sen3": (("workclass", "marital-status", "relationship", "race", "sex"), "+".join(SEN3_PARTS)),
}
BASES: tuple[str, ...] = ("adult", "synthetic")


def sen3_values(frame: pd.DataFrame) -> pd.Series:
    """Sen3's sensitive value of every row: ``country|education|occupation`` (each distinct
    triple's text built once: a synthetic base repeats Adult's triples over up to millions of rows)."""
    codes, names = zip(*(pd.factorize(frame[c]) for c in SEN3_PARTS))
    triple, distinct = pd.factorize(np.ravel_multi_index(codes, [len(n) for n in names]))
    parts = np.unravel_index(distinct, [len(n) for n in names])
    text = np.array(["|".join(str(n[i]) for n, i in zip(names, row)) for row in zip(*parts)], dtype=object)
    return pd.Series(text[triple], index=frame.index)


@lru_cache(maxsize=2)
def cumulative_table(attributes: str) -> tuple[Schema, pd.DataFrame]:
    """The schema of ``attributes`` and every record (test rows first, then training rows) with
    columns id, the QIs and the sensitive attribute (no time yet)."""
    qi, sensitive = ATTRIBUTE_SETS[attributes]
    frame = pd.concat([load_adult(split="test"), load_adult(split="train")], ignore_index=True)
    frame["id"] = np.arange(len(frame), dtype=np.int64)
    if attributes == "sen3":
        frame[sensitive] = sen3_values(frame)
        sens = Sensitive(sensitive, tuple(sorted(frame[sensitive].unique())))
    else:
        tax = adult_taxonomy(sensitive)
        sens = Sensitive(sensitive, tax.leaves, taxonomy=tax)
    schema = Schema(tuple(CategoricalQI(a, adult_taxonomy(a)) for a in qi), sens, respondent="id", time="time")
    return schema, frame[["id", *qi, sensitive]]


@dataclass
class CumulativeParams:
    attributes: str = field(default="sen1", metadata={"help": "attribute set: 'sen1' or 'sen3' (BCF §6)"})
    base: str = field(
        default="adult",
        metadata={
            "help": f"where the records come from; one of {list(BASES)}: 'adult' = D1 is adult.test's "
            f"{ADULT_TEST_ROWS:,} records, D2, D3, ... the next d2 records of adult.data (BCF §6); 'synthetic' = "
            "R1 of r1 records and increments of d2, each drawn with replacement from adult.data's rows by the "
            "run's seed (any sizes; not UCI data)"
        },
    )
    d2: int = field(
        default=200,
        metadata={"help": f"training records per later increment D2, D3, ... (200, 2000 or {ADULT_ROWS} = allD2 in the paper; "
                  "base=synthetic: any number)"},
    )
    r1: int | None = field(
        default=None,
        metadata={"help": f"records of R1 = D1, used only with base=synthetic (an integer >= 1; null = {ADULT_TEST_ROWS}, "
                  "adult.test's size); base=adult's D1 is adult.test"},
    )
    releases: int = field(default=2, metadata={"help": "number of releases (2 in the paper's experiments, more for §7.1)"})

    def __post_init__(self) -> None:
        require(self.attributes in ATTRIBUTE_SETS, "attributes", f"one of {list(ATTRIBUTE_SETS)}", self.attributes)
        require(self.base in BASES, "base", f"one of {list(BASES)}", self.base)
        require(isinstance(self.releases, int) and not isinstance(self.releases, bool) and self.releases >= 1,
                "releases", "an integer >= 1", self.releases)
        require(isinstance(self.d2, int) and not isinstance(self.d2, bool) and self.d2 >= 0, "d2", "an integer >= 0", self.d2)
        if self.base == "synthetic":
            require(self.r1 is None or (isinstance(self.r1, int) and not isinstance(self.r1, bool) and self.r1 >= 1),
                    "r1", "an integer >= 1 or null", self.r1)
            return
        require(self.r1 is None, "r1", f"null with base=adult (its D1 is adult.test's {ADULT_TEST_ROWS} records; "
                "r1 sizes R1 of base=synthetic)", self.r1)
        need = (self.releases - 1) * self.d2
        require(need <= ADULT_ROWS, "d2",
                f"at most {ADULT_ROWS // max(self.releases - 1, 1)} with releases={self.releases} "
                f"((releases - 1) x d2 training records; adult.data has {ADULT_ROWS}; base=synthetic has any number)", self.d2)

    @property
    def first(self) -> int:
        """Records of R1 = D1."""
        return ADULT_TEST_ROWS if self.r1 is None else self.r1


class AdultReleases(Dataset):
    """The releases both Adult data sets of BCF §6 draw from: D1 = adult.test, then increments of
    d2 records of adult.data; release t is D1 ∪ .. ∪ Dt (``cumulative``) or Dt alone. The
    registered data sets are its subclasses (``cdpbench_bcf.datasets.adult_cumulative``,
    ``adult_increments``)."""

    Params = CumulativeParams
    cumulative: ClassVar[bool]  # True: release t = D1 ∪ .. ∪ Dt; False: Dt alone

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        p = self.params
        schema, frame = cumulative_table(p.attributes) if p.base == "adult" else self.synthetic_table(rng)
        time = self._times(len(frame))
        encoded = schema.encode(frame.assign(time=time), 1, allow_extra=False)
        for t in range(1, p.releases + 1):
            keep = (time >= 1) & (time <= t) if self.cumulative else time == t
            rel = encoded.subset(keep)
            rel.t = t
            yield rel

    def _times(self, n: int) -> np.ndarray:
        """Release in which each record arrives (0: never published)."""
        p = self.params
        time = np.zeros(n, dtype=np.int64)
        time[: p.first] = 1
        for t in range(2, p.releases + 1):
            start = p.first + (t - 2) * p.d2
            time[start : start + p.d2] = t
        return time

    def synthetic_table(self, rng: np.random.Generator) -> tuple[Schema, pd.DataFrame]:
        """``base=synthetic``: the schema of ``base=adult`` and the ``r1 + (releases - 1) * d2``
        records of every release (row position = respondent id), drawn by :func:`synthetic_adult`."""
        p = self.params
        schema, _ = cumulative_table(p.attributes)
        qi, sensitive = ATTRIBUTE_SETS[p.attributes]
        parts = list(SEN3_PARTS) if p.attributes == "sen3" else [sensitive]
        rows = p.first + (p.releases - 1) * p.d2
        frame = synthetic_adult(rows, [*qi, *parts], rng)
        if p.attributes == "sen3":
            frame[sensitive] = sen3_values(frame)
        frame["id"] = np.arange(rows, dtype=np.int64)
        return schema, frame[["id", *qi, sensitive]]
