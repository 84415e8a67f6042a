"""Releases read from files: one CSV or Parquet file per release, described by a schema YAML.

Example (``dataset=csv``)::

    dataset.files='data/release_*.csv' dataset.schema=data/schema.yaml dataset.scenario=continuous

with ``schema.yaml`` in the format of :meth:`Schema.from_dict <cdpbench.schema.Schema.from_dict>`
(hierarchy files relative to the YAML's folder). Release t is the t-th file. Each file holds the
schema's columns: the respondent id (same id = same person across releases), the QIs, the
sensitive attribute and, for a cumulative scenario, the timestamp column. :meth:`CsvReleases.check`
reads and validates every file before a run starts (the README's "Your own data" section).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import yaml

from ..data import Release
from ..errors import DataError, require
from ..plugin import Dataset
from ..schema import Schema
from .validate import SCENARIOS, validated

#: File formats by (lower-case) file name ending.
FORMATS: dict[str, str] = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _is_pattern(path: str) -> bool:
    return any(c in path for c in "*?[")


def _natural_key(path: str) -> list[Any]:
    """Sort key comparing digit runs as numbers: release_2 before release_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _string_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value] if value else None
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    return None


@dataclass
class CsvReleasesParams:
    files: Any = field(
        default_factory=list,
        metadata={
            "help": "release files in release order: a list of paths or one glob pattern (matches sorted by name, "
            "numbers compared as numbers); CSV (.csv, .csv.gz) or Parquet (.parquet, .pq) by extension"
        },
    )
    schema: Any = field(
        default="",
        metadata={
            "help": "schema YAML (see Schema.from_dict; hierarchy paths relative to the YAML's folder), or one YAML "
            "per file for a sequential scenario whose attribute sets change"
        },
    )
    scenario: str = field(default="continuous", metadata={"help": f"the release scenario; one of {list(SCENARIOS)}"})
    ignore_extra: bool = field(
        default=False, metadata={"help": "ignore columns the schema does not name (default: they are an error)"}
    )

    def __post_init__(self) -> None:
        files = _string_list(self.files)
        require(files is not None, "files", "a non-empty list of file paths or one glob pattern", self.files)
        schema = _string_list(self.schema)
        require(schema is not None, "schema", "the path of a schema YAML (or a list of one per file)", self.schema)
        require(self.scenario in SCENARIOS, "scenario", f"one of {list(SCENARIOS)}", self.scenario)
        require(isinstance(self.ignore_extra, bool), "ignore_extra", "true or false", self.ignore_extra)
        self.files = files
        self.schema = schema[0] if isinstance(self.schema, str) else schema


class CsvReleases(Dataset):
    """Releases read from CSV or Parquet files (one per release) with a schema YAML."""

    Params = CsvReleasesParams

    def __init__(self, params: CsvReleasesParams | None = None):
        super().__init__(params)
        self.scenario = self.params.scenario  # an instance attribute: the scenario is a parameter here

    def resolve(self) -> tuple[list[Path], list[Schema]]:
        """The release files in order and the schema of each; :class:`DataError` for a missing
        file, a pattern matching nothing, an unknown format or a bad schema YAML."""
        paths: list[Path] = []
        for entry in self.params.files:
            expanded = os.path.expanduser(entry)
            if _is_pattern(expanded):
                matches = sorted(glob.glob(expanded), key=_natural_key)
                if not matches:
                    raise DataError(f"files: no file matches the pattern {entry!r}")
                for m in matches:  # a folder among the matches is refused, never skipped (releases would shift)
                    if not os.path.isfile(m):
                        raise DataError(f"files: {m!r} (matched by {entry!r}) is {_not_a_file(m)}; a release is a "
                                        f"file: move it away or narrow the pattern")
                paths.extend(Path(m) for m in matches)
            else:
                path = Path(expanded)
                if not path.exists():
                    raise DataError(f"files: file {entry!r} not found")
                if not path.is_file():
                    raise DataError(f"files: {entry!r} is {_not_a_file(expanded)}; a release is a file")
                paths.append(path)
        for path in paths:
            if _format(path) is None:
                raise DataError(f"files: {str(path)!r} is neither CSV nor Parquet; allowed endings: {list(FORMATS)}")
        seen: dict[Path, int] = {}
        for i, path in enumerate(paths):
            if path.resolve() in seen:
                raise DataError(f"files: {str(path)!r} is listed as release {seen[path.resolve()] + 1} and {i + 1}")
            seen[path.resolve()] = i
        if isinstance(self.params.schema, str):
            schemas = [load_schema(self.params.schema)] * len(paths)
        else:
            if len(self.params.schema) != len(paths):
                raise DataError(
                    f"schema: {len(self.params.schema)} schema YAMLs for {len(paths)} release files; give one "
                    f"schema, or one per file"
                )
            schemas = [load_schema(s) for s in self.params.schema]
        if self.scenario == "cumulative" and any(s.time is None for s in schemas):
            raise DataError("schema: a cumulative scenario needs per-record timestamps; name the column with 'time:'")
        return paths, schemas

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        """Read release t from the t-th file (files and schemas are checked before the first one)."""
        paths, schemas = self.resolve()
        return self._read(paths, schemas)

    def input_files(self) -> list[Path]:
        """The release files in order, then each schema YAML once and the hierarchy files it names."""
        paths, _ = self.resolve()
        schemas = [self.params.schema] if isinstance(self.params.schema, str) else list(self.params.schema)
        extra: list[Path] = []
        for s in schemas:
            path = Path(os.path.expanduser(str(s)))
            spec = yaml.safe_load(path.read_text(encoding="utf-8")) or {}  # resolve() read it already
            named = [q.get("hierarchy") for q in spec.get("qi") or [] if isinstance(q, dict)]
            named.append((spec.get("sensitive") or {}).get("hierarchy"))
            for f in [path, *(path.parent / h for h in named if h)]:
                if f not in extra:
                    extra.append(f)
        return [*paths, *extra]

    def check(self) -> None:
        """Read, encode and validate every release now, as the run would (same rules across
        releases, same errors), so that a bad file stops the job before release 1 is computed.
        Releases are read one at a time and dropped: at most two are held at once."""
        paths, schemas = self.resolve()
        for _ in validated(self._read(paths, schemas), self.scenario):
            pass

    def _read(self, paths: list[Path], schemas: list[Schema]) -> Iterator[Release]:
        for t, (path, schema) in enumerate(zip(paths, schemas), start=1):
            frame = read_table(path, schema)
            try:
                release = schema.encode(frame, t, allow_extra=self.params.ignore_extra)
                if not len(release):  # validated() refuses it too, but here the error names the file
                    raise DataError(f"release {t}: no records; a release needs at least one record")
            except DataError as e:
                raise DataError(f"{e} [file {str(path)!r}]") from None
            yield release


def _not_a_file(path: str) -> str:
    return "a folder" if os.path.isdir(path) else "not a regular file"


def _format(path: Path) -> str | None:
    name = path.name.lower()
    for ending, kind in FORMATS.items():
        if name.endswith(ending):
            return kind
    return None


def read_table(path: str | Path, schema: Schema) -> pd.DataFrame:
    """One release file as a table. In a CSV only empty cells are missing values (so a category
    named "NA" or "None" stays a value), and categorical columns are read as text."""
    path = Path(path)
    try:
        if _format(path) == "parquet":
            return pd.read_parquet(path)
        text_columns = [a.name for a in schema.qi if a.kind == "categorical"] + [schema.sensitive.name]
        return pd.read_csv(path, dtype={c: str for c in text_columns}, keep_default_na=False, na_values=[""])
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"files: cannot read {str(path)!r}: {first}") from None


def load_schema(path: str | Path) -> Schema:
    """A schema from a YAML file (:meth:`Schema.from_dict`, hierarchies relative to its folder)."""
    path = Path(os.path.expanduser(str(path)))
    if not path.is_file():
        raise DataError(f"schema: file {str(path)!r} not found")
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DataError(f"schema: {str(path)!r} is not valid YAML{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"schema: cannot read {str(path)!r}: {e}") from None
    try:
        return Schema.from_dict(spec, base_dir=path.parent)
    except DataError as e:
        raise DataError(f"schema {str(path)!r}: {e}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise DataError(
            f"schema {str(path)!r}: not a valid schema ({type(e).__name__}: {e}); expected keys 'respondent', "
            f"'time', 'qi' (a list of {{name, type, ...}}) and 'sensitive' ({{name, values or hierarchy}})"
        ) from None
