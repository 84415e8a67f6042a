"""UCI Adult as a base table, its schema, and the "Adult continuous" scenario of BayFrame.

The data files are the unmodified UCI ``adult.data`` and ``adult.test`` (gzipped, see
``data/LICENSE-NOTICE.md``); rows with a missing value (``?`` in workclass, occupation or
native-country) are dropped, leaving 30,162 training and 15,060 test rows (the test file's header
line and the ``.`` ending its class labels are dropped too). Column names come from
``adult.names``; the unnamed class column is called ``salary-class`` as in ARX. Categorical
columns are generalized along the ARX hierarchies shipped in ``data/hierarchies/``;
``relationship`` has none in ARX and uses cdpbench's own tree
(``cdpbench_hierarchy_relationship.csv``: Husband, Wife -> Spouse; Own-child, Other-relative ->
Relative; Not-in-family, Unmarried -> Non-family; -> ``*``). Numeric columns are
:class:`~cdpbench.schema.NumericQI` with fixed domains.

QI lists may also name ``zip``, a **synthetic** column that is not in UCI Adult: a 5-digit
Indiana-style code per respondent (row position), uniform over 480 codes 47001-47958, drawn from
a fixed seed and generalized by longest common prefix (``4790*``, ``479**``, ``47***``); see
:mod:`cdpbench.datasets.zipcodes`. :func:`load_adult` adds it on request (``with_zip=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Iterator

import numpy as np
import pandas as pd

from ..data import Release
from ..errors import ConfigError, require
from ..plugin import Dataset
from ..schema import CategoricalQI, NumericQI, Schema, Sensitive
from ..taxonomy import Taxonomy
from .churn_process import churn_process
from .zipcodes import ZIP_COLUMN, zip_taxonomy, zips_of_rows

DATA_DIR = Path(__file__).resolve().parent / "data"
HIERARCHY_DIR = DATA_DIR / "hierarchies"

#: Column order of ``adult.data`` (attribute list of ``adult.names``, class column last).
ADULT_COLUMNS: tuple[str, ...] = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "salary-class",
)
NUMERIC_COLUMNS: tuple[str, ...] = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
CATEGORICAL_COLUMNS: tuple[str, ...] = tuple(c for c in ADULT_COLUMNS if c not in NUMERIC_COLUMNS)
#: Columns a QI list may name: Adult's own, then the synthetic ``zip`` (:mod:`.zipcodes`).
QI_COLUMNS: tuple[str, ...] = (*ADULT_COLUMNS, ZIP_COLUMN)

#: Documented domains (adult.names / the data set's description); the others come from the data.
FIXED_DOMAINS: dict[str, tuple[float, float]] = {"age": (17, 90), "education-num": (1, 16), "hours-per-week": (1, 99)}

#: ``relationship`` has no ARX hierarchy: cdpbench's own tree (module docstring).
RELATIONSHIP_HIERARCHY = HIERARCHY_DIR / "cdpbench_hierarchy_relationship.csv"

ADULT_ROWS = 30_162  # rows of adult.data without a missing value
ADULT_TEST_ROWS = 15_060  # rows of adult.test without a missing value
SPLITS: dict[str, str] = {"train": "adult.data.gz", "test": "adult.test.gz"}


@lru_cache(maxsize=2)
def _load_adult_cached(split: str = "train") -> pd.DataFrame:
    frame = pd.read_csv(
        DATA_DIR / SPLITS[split],
        header=None,
        names=list(ADULT_COLUMNS),
        sep=",",
        skipinitialspace=True,
        skip_blank_lines=True,
        skiprows=1 if split == "test" else 0,  # adult.test opens with "|1x3 Cross validator"
        dtype={c: str for c in CATEGORICAL_COLUMNS},
    )
    complete = ~(frame[list(CATEGORICAL_COLUMNS)] == "?").any(axis=1)
    frame = frame.loc[complete].reset_index(drop=True)
    if split == "test":  # adult.test writes ">50K." where adult.data writes ">50K"
        frame["salary-class"] = frame["salary-class"].str.rstrip(".")
    for c in NUMERIC_COLUMNS:
        frame[c] = frame[c].astype(np.int64)
    return frame


def load_adult(with_zip: bool = False, split: str = "train") -> pd.DataFrame:
    """The cleaned Adult file ``split``: ``"train"`` (adult.data, 30,162 rows, the default) or
    ``"test"`` (adult.test, 15,060 rows), the 15 columns of :data:`ADULT_COLUMNS`, in file order;
    with ``with_zip`` (train only), a 16th column ``zip``: the synthetic zip code of each row
    (respondent id = row position, :func:`~cdpbench.datasets.zipcodes.synthetic_zips`; not UCI
    data).

    Parsed once per process; every call returns a fresh copy, so callers may modify it.
    """
    require(split in SPLITS, "split", f"one of {list(SPLITS)}", split)
    if with_zip and split != "train":
        raise ConfigError("the synthetic zip column exists for the training split only (split='train')")
    frame = _load_adult_cached(split).copy()
    if with_zip:
        frame[ZIP_COLUMN] = zips_of_rows(len(frame))
    return frame


@lru_cache(maxsize=None)
def adult_taxonomy(column: str) -> Taxonomy:
    """The generalization taxonomy of a categorical Adult column (ARX hierarchy or flat), or of
    the synthetic ``zip`` (its prefix taxonomy)."""
    allowed = [*CATEGORICAL_COLUMNS, ZIP_COLUMN]
    require(column in allowed, "column", f"a categorical Adult column {allowed}", column)
    if column == ZIP_COLUMN:
        return zip_taxonomy()
    if column == "relationship":
        return Taxonomy.from_arx_csv(RELATIONSHIP_HIERARCHY)
    return Taxonomy.from_arx_csv(HIERARCHY_DIR / f"adult_hierarchy_{column}.csv")


def check_adult_columns(qi: list[str] | tuple[str, ...], sensitive: str) -> None:
    """Raise :class:`ConfigError` unless ``qi`` and ``sensitive`` name distinct Adult columns
    (``qi`` may also name the synthetic ``zip``; ``sensitive`` must be one of Adult's own)."""
    allowed = list(QI_COLUMNS)
    require(
        isinstance(qi, (list, tuple)) and len(qi) >= 1 and all(isinstance(q, str) for q in qi),
        "qi",
        f"a non-empty list of Adult columns {allowed}",
        qi,
    )
    unknown = [q for q in qi if q not in QI_COLUMNS]
    if unknown:
        raise ConfigError(f"qi names unknown Adult column(s) {unknown}; allowed: {allowed}")
    twice = sorted({q for q in qi if list(qi).count(q) > 1})
    if twice:
        raise ConfigError(f"qi lists column(s) {twice} more than once")
    require(sensitive in ADULT_COLUMNS, "sensitive", f"an Adult column {list(ADULT_COLUMNS)}", sensitive)
    if sensitive in qi:
        raise ConfigError(f"sensitive attribute {sensitive!r} is also listed in qi {list(qi)}; it must not be a QI")


def adult_schema(qi: list[str] | tuple[str, ...] = ("age", "sex", "education"), sensitive: str = "occupation") -> Schema:
    """The schema of an Adult release: ``qi`` in matrix column order, one sensitive column.

    Numeric QIs: age 17..90, education-num 1..16, hours-per-week 1..99; fnlwgt, capital-gain and
    capital-loss span their range in the cleaned data. Categorical QIs use the ARX hierarchies;
    the synthetic ``zip`` (not UCI data) is categorical over its 480 codes with the prefix
    taxonomy ``47906 -> 4790* -> 479** -> 47***`` (:func:`~cdpbench.datasets.zipcodes.zip_taxonomy`).
    A categorical sensitive attribute takes its domain (and taxonomy) from its hierarchy, so the
    default, occupation, has the 14 occupations in the hierarchy's leaf order; a numeric one is
    ordered, its domain being the distinct values present in the data. The respondent id column
    is ``id``.
    """
    check_adult_columns(list(qi), sensitive)
    attrs = []
    for name in qi:
        if name == ZIP_COLUMN:
            attrs.append(CategoricalQI(name, zip_taxonomy()))
        elif name in NUMERIC_COLUMNS:
            low, high = _numeric_domain(name)
            attrs.append(NumericQI(name, low, high))
        else:
            attrs.append(CategoricalQI(name, adult_taxonomy(name)))
    if sensitive in CATEGORICAL_COLUMNS:
        tax = adult_taxonomy(sensitive)
        sens = Sensitive(sensitive, tax.leaves, ordered=False, taxonomy=tax)
    else:
        values = np.unique(_load_adult_cached()[sensitive].to_numpy())
        sens = Sensitive(sensitive, tuple(str(v) for v in values), ordered=True)
    return Schema(tuple(attrs), sens, respondent="id")


def adult_release(
    qi: list[str] | tuple[str, ...] = ("age", "sex", "education"),
    sensitive: str = "occupation",
    rows: int | None = None,
    t: int = 1,
) -> Release:
    """The first ``rows`` cleaned Adult records (all 30,162 by default) as one release with
    :func:`adult_schema` (``qi``, ``sensitive``); respondent id = row index. For tests and
    benchmarks that need a single Adult table rather than the continuous scenario. ``qi`` may
    name the synthetic ``zip``."""
    frame = load_adult(with_zip=ZIP_COLUMN in qi)
    if rows is not None:
        frame = frame.head(rows)
    schema = adult_schema(qi, sensitive)
    return schema.encode(frame.assign(id=np.arange(len(frame)))[schema.columns], t)


def _numeric_domain(name: str) -> tuple[float, float]:
    if name in FIXED_DOMAINS:
        low, high = FIXED_DOMAINS[name]
        return float(low), float(high)
    col = _load_adult_cached()[name]
    return float(col.min()), float(col.max())


# ---------------------------------------------------------------------------- the scenario
def check_counts(params: object, *names: tuple[str, int]) -> None:
    """Each ``(name, minimum)``: ``params.<name>`` is an integer >= minimum (one-line error)."""
    for name, minimum in names:
        value = getattr(params, name)
        require(isinstance(value, int) and not isinstance(value, bool) and value >= minimum, name,
                f"an integer >= {minimum}", value)


def adult_churn(p: object, rng: np.random.Generator, reinsertions: int, name: str) -> Iterator[Release]:
    """The churn process (:func:`~cdpbench.datasets.churn_process.churn_process`) over Adult with
    the parameters of ``p`` (``qi``, ``sensitive``, ``initial``, ``deletions``, ``insertions``,
    ``updates``, ``releases``): the ``adult`` and ``churn`` data sets."""
    return churn_process(
        load_adult(with_zip=ZIP_COLUMN in p.qi),
        adult_schema(p.qi, p.sensitive),
        initial=p.initial,
        deletions=p.deletions,
        insertions=p.insertions,
        updates=p.updates,
        reinsertions=reinsertions,
        releases=p.releases,
        rng=rng,
        name=name,
    )


@dataclass
class AdultContinuousParams:
    releases: int = field(default=24, metadata={"help": "number of releases T (>= 1)"})
    initial: int = field(default=4000, metadata={"help": "records in the first release |T1| (>= 1)"})
    deletions: int = field(default=400, metadata={"help": "records of T(i-1) deleted at each later release (>= 0)"})
    insertions: int = field(default=400, metadata={"help": "never-used Adult rows inserted at each later release (>= 0)"})
    updates: int = field(
        default=400,
        metadata={"help": "records kept from T(i-1) whose sensitive value is re-drawn uniformly (may stay the same) (>= 0)"},
    )
    qi: list[str] = field(
        default_factory=lambda: ["age", "sex", "education"],
        metadata={
            "help": f"quasi-identifier columns, in matrix order; any of {list(QI_COLUMNS)} ('zip' is synthetic, "
            "not UCI data: a seeded 5-digit code per respondent, see cdpbench.datasets.zipcodes)"
        },
    )
    sensitive: str = field(default="occupation", metadata={"help": "the sensitive column (an Adult column not in qi)"})

    def __post_init__(self) -> None:
        check_counts(self, ("releases", 1), ("initial", 1), ("deletions", 0), ("insertions", 0), ("updates", 0))
        check_adult_columns(self.qi, self.sensitive)


class AdultContinuous(Dataset):
    """Adult continuous (BayFrame §6.1): 4,000 records, then 400 deletions, insertions and updates a release."""

    Params = AdultContinuousParams
    scenario: ClassVar[str] = "continuous"

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        """Releases 1..T, all randomness from ``rng`` (same seed => identical releases).

        QI = age, sex, education and sensitive = occupation by default (Amiri et al., Trans. Data
        Privacy 12, 2019, §6.1). Updated records are drawn among the records that stay from
        T(i-1), so each release re-draws exactly ``updates`` values of the table it publishes;
        there are no re-insertions. The paper gives neither T nor a seed; 24 releases matches the
        length of its other data set, BKseq.
        """
        return adult_churn(self.params, rng, reinsertions=0, name="Adult")
