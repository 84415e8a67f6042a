"""Schemas: quasi-identifiers, the sensitive attribute and the respondent id of a release.

Inside the lab every release is encoded into NumPy arrays: a ``[n, d]`` float matrix of QI values
(numeric values as they are, categorical values as taxonomy leaf codes), an int array of sensitive
value codes and an int array of respondent ids. :meth:`Schema.encode` does that and is where bad
input is caught, with an error that names the field and what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from .data import Release
from .errors import DataError
from .taxonomy import Taxonomy


@dataclass(frozen=True, eq=False)
class NumericQI:
    """A numeric quasi-identifier with its domain range ``[low, high]``."""

    name: str
    low: float
    high: float
    kind: str = field(default="numeric", init=False)

    @property
    def width(self) -> float:
        return float(self.high - self.low)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumericQI) and (self.name, self.low, self.high) == (other.name, other.low, other.high)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class CategoricalQI:
    """A categorical quasi-identifier generalized along a taxonomy (leaf codes 0..L-1)."""

    name: str
    taxonomy: Taxonomy
    kind: str = field(default="categorical", init=False)

    @property
    def width(self) -> float:
        return float(self.taxonomy.size - 1)

    @property
    def values(self) -> tuple[str, ...]:
        return self.taxonomy.leaves

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CategoricalQI) and self.name == other.name and self.values == other.values

    __hash__ = None  # type: ignore[assignment]


QI = Union[NumericQI, CategoricalQI]


@dataclass(frozen=True, eq=False)
class Sensitive:
    """The sensitive attribute: its domain (codes 0..m-1), optionally ordered or with a taxonomy.

    With a taxonomy, the domain order is the taxonomy's leaf order (hierarchical EMD needs it);
    ``ordered`` means the domain order is meaningful (ordered-distance EMD).
    """

    name: str
    values: tuple[str, ...]
    ordered: bool = False
    taxonomy: Taxonomy | None = None

    def __post_init__(self) -> None:
        if self.taxonomy is not None and tuple(self.values) != self.taxonomy.leaves:
            object.__setattr__(self, "values", self.taxonomy.leaves)
        if len(set(self.values)) != len(self.values):
            raise DataError(f"sensitive attribute {self.name!r} lists a value twice")

    @property
    def size(self) -> int:
        return len(self.values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sensitive) and (self.name, tuple(self.values), self.ordered) == (
            other.name,
            tuple(other.values),
            other.ordered,
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class Schema:
    """QIs (in matrix column order), the sensitive attribute, the respondent id column and,
    for cumulative releases, the column holding each record's timestamp."""

    qi: tuple[QI, ...]
    sensitive: Sensitive
    respondent: str = "id"
    time: str | None = None

    def __post_init__(self) -> None:
        names = [a.name for a in self.qi] + [self.sensitive.name, self.respondent] + ([self.time] if self.time else [])
        if len(set(names)) != len(names):
            raise DataError(f"schema names a column twice: {names}")

    # ------------------------------------------------------------------ introspection
    @property
    def qi_names(self) -> list[str]:
        return [a.name for a in self.qi]

    @property
    def columns(self) -> list[str]:
        return [self.respondent, *([self.time] if self.time else []), *self.qi_names, self.sensitive.name]

    @property
    def widths(self) -> np.ndarray:
        """Domain width per QI column (numeric: high-low; categorical: L-1)."""
        return np.array([a.width for a in self.qi], dtype=float)

    @property
    def categorical(self) -> list[int]:
        return [j for j, a in enumerate(self.qi) if a.kind == "categorical"]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Schema)
            and list(self.qi) == list(other.qi)
            and self.sensitive == other.sensitive
            and (self.respondent, self.time) == (other.respondent, other.time)
        )

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ encoding
    def encode(self, frame: pd.DataFrame, t: int, *, allow_extra: bool = False, truth: dict | None = None):
        """Validate a raw table and encode it into a :class:`~cdpbench.data.Release`.

        Raises :class:`DataError` for missing or extra columns, NaN in a QI or the sensitive
        attribute, non-finite numbers or values outside the domain of a numeric QI, respondent
        ids or timestamps that are not integers and respondents appearing twice.
        """
        where = f"release {t}"
        cols = self.columns
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DataError(f"{where}: missing column(s) {missing}; the schema needs {cols}")
        extra = [c for c in frame.columns if c not in cols]
        if extra and not allow_extra:
            raise DataError(f"{where}: unexpected column(s) {extra}; the schema allows {cols}")
        n = len(frame)
        respondent = _encode_integers(frame[self.respondent], f"column {self.respondent!r} (respondent id)", where)
        dup = pd.Index(respondent).duplicated()
        if dup.any():
            raise DataError(
                f"{where}: respondent(s) {sorted(set(respondent[dup].tolist()))[:5]} appear more than once "
                f"in column {self.respondent!r}; a release holds one record per respondent"
            )
        qi = np.empty((n, len(self.qi)), dtype=float)
        for j, a in enumerate(self.qi):
            qi[:, j] = _encode_qi(frame[a.name], a, where)
        sensitive = _encode_categorical(frame[self.sensitive.name], self.sensitive.values, self.sensitive.name, where)
        time = _encode_integers(frame[self.time], f"column {self.time!r} (timestamp)", where) if self.time else None
        return Release(t=t, schema=self, respondent=respondent, qi=qi, sensitive=sensitive, time=time, truth=truth or {})

    # ------------------------------------------------------------------ (de)serialization
    @classmethod
    def from_dict(cls, spec: dict[str, Any], base_dir: str | Path = ".") -> "Schema":
        """Build a schema from a mapping (the ``csv`` data set's schema YAML)::

            respondent: id
            time: null
            qi:
              - {name: age, type: numeric, low: 17, high: 90}
              - {name: education, type: categorical, hierarchy: edu.csv}   # or values: [...]
            sensitive: {name: occupation, values: [...], ordered: false, hierarchy: null}
        """
        base = Path(base_dir)
        if not isinstance(spec, dict) or "qi" not in spec or "sensitive" not in spec:
            raise DataError("schema must be a mapping with keys 'qi' (a list) and 'sensitive'")
        qis: list[QI] = []
        for i, q in enumerate(spec["qi"]):
            name = q.get("name")
            kind = q.get("type", "numeric")
            if not name:
                raise DataError(f"schema.qi[{i}] needs a 'name'")
            if kind == "numeric":
                if "low" not in q or "high" not in q:
                    raise DataError(f"schema.qi[{i}] ({name}): a numeric QI needs 'low' and 'high'")
                if not float(q["low"]) < float(q["high"]):
                    raise DataError(f"schema.qi[{i}] ({name}): 'low' must be below 'high'")
                qis.append(NumericQI(name, float(q["low"]), float(q["high"])))
            elif kind == "categorical":
                qis.append(CategoricalQI(name, _taxonomy_from_spec(q, base, f"schema.qi[{i}] ({name})")))
            else:
                raise DataError(f"schema.qi[{i}] ({name}): type must be 'numeric' or 'categorical' (got {kind!r})")
        s = spec["sensitive"]
        tax = _taxonomy_from_spec(s, base, "schema.sensitive") if s.get("hierarchy") else None
        values = tax.leaves if tax else tuple(str(v) for v in s.get("values") or [])
        if not values:
            raise DataError("schema.sensitive needs 'values' (a list) or 'hierarchy' (an ARX CSV)")
        sens = Sensitive(str(s["name"]), values, bool(s.get("ordered", False)), tax)
        return cls(tuple(qis), sens, str(spec.get("respondent", "id")), spec.get("time"))


def _taxonomy_from_spec(q: dict, base: Path, where: str) -> Taxonomy:
    if q.get("hierarchy"):
        path = base / q["hierarchy"]
        if not path.exists():
            raise DataError(f"{where}: hierarchy file {str(path)!r} not found")
        return Taxonomy.from_arx_csv(path)
    if q.get("values"):
        return Taxonomy.flat([str(v) for v in q["values"]])
    raise DataError(f"{where}: a categorical attribute needs 'values' or 'hierarchy'")


def _encode_qi(col: pd.Series, a: QI, where: str) -> np.ndarray:
    if a.kind == "numeric":
        if col.isna().any():
            raise DataError(f"{where}: QI column {a.name!r} has {int(col.isna().sum())} missing value(s) (NaN)")
        try:
            x = col.to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise DataError(f"{where}: QI column {a.name!r} is numeric; it holds non-numbers") from None
        finite = np.isfinite(x)
        if not finite.all():
            raise DataError(
                f"{where}: QI column {a.name!r} has non-finite value(s) {_some(col[~finite])}; a numeric QI needs "
                f"finite numbers in [{a.low:g}, {a.high:g}]"
            )
        bad = (x < a.low) | (x > a.high)
        if bad.any():
            raise DataError(
                f"{where}: QI column {a.name!r} has value(s) {sorted(set(x[bad].tolist()))[:5]} outside "
                f"its domain [{a.low:g}, {a.high:g}]"
            )
        return x
    return _encode_categorical(col, a.values, a.name, where).astype(float)


def _encode_categorical(col: pd.Series, values: tuple[str, ...], name: str, where: str) -> np.ndarray:
    """Codes into ``values`` of a column's values as text, stripped. Each distinct value is
    converted and looked up once (a column of a million rows has a few dozen distinct values)."""
    rows, distinct = pd.factorize(col)  # a missing value (None, NaN) -> -1
    if (rows < 0).any():
        raise DataError(f"{where}: column {name!r} has {int((rows < 0).sum())} missing value(s) (NaN)")
    strings = pd.Index(distinct, dtype=object).astype(str).str.strip()
    codes = pd.Categorical(strings, categories=list(values)).codes.astype(np.int64)
    if (codes < 0).any():
        unknown = sorted(set(strings[codes < 0].tolist()))
        shown = list(values) if len(values) <= 20 else list(values[:20]) + ["..."]
        raise DataError(f"{where}: column {name!r} has unknown value(s) {unknown[:5]}; allowed: {shown}")
    return codes[rows]


def _encode_integers(col: pd.Series, what: str, where: str) -> np.ndarray:
    """An int64 array from a column of integers; integral floats (``7.0``: pandas reads an int
    column with a missing cell as float) and integer strings pass, anything else is refused."""
    if col.isna().any():
        raise DataError(f"{where}: {what} has missing values")
    if pd.api.types.is_integer_dtype(col):
        return col.to_numpy(dtype=np.int64)
    numbers = pd.to_numeric(col, errors="coerce")  # text that is no number -> NaN
    if pd.api.types.is_integer_dtype(numbers):
        return numbers.to_numpy(dtype=np.int64)
    x = numbers.to_numpy(dtype=float)
    ok = np.isfinite(x) & (np.trunc(x) == x) & (np.abs(x) < 2.0**63)
    if not ok.all():
        raise DataError(f"{where}: {what} must hold integers; got {_some(col[~ok])}")
    return x.astype(np.int64)


def _some(values: pd.Series) -> list:
    """Up to 5 distinct values for an error message, smallest first (by text if types are mixed)."""
    try:
        distinct = pd.unique(values).tolist()
    except TypeError:  # unhashable cells (a Parquet list column): show them as text
        distinct = pd.unique(values.astype(str)).tolist()
    try:
        shown = sorted(distinct)[:5]
    except TypeError:
        shown = sorted(distinct, key=str)[:5]
    return [v.item() if isinstance(v, np.generic) else v for v in shown]  # 1.5, not np.float64(1.5)
