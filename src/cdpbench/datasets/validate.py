"""Checks on the stream of releases a data set yields, whatever plugin produced it.

:meth:`Schema.encode <cdpbench.schema.Schema.encode>` validates each table on its own; what it
cannot see is how releases relate to each other. :func:`validated` checks that, release by
release as they stream (the runner wraps every data set with it):

* releases are numbered t = 1, 2, 3, ... in order;
* every release is internally consistent (at least one record, array shapes, one record per
  respondent, sensitive codes inside the domain) — a plugin may build releases without
  ``Schema.encode``;
* continuous and cumulative scenarios keep one schema; only a sequential scenario (KSAA,
  k-linkability) may change attribute sets between releases;
* a cumulative release (BCF, EDBT 2008 §1: R_i covers D_1 ∪ … ∪ D_i) carries per-record
  timestamps and keeps every record of the previous release, with its timestamp: published
  records become part of the history and cannot be deleted.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from ..data import Release
from ..errors import DataError, require
from ..schema import Schema

SCENARIOS: tuple[str, ...] = ("continuous", "cumulative", "sequential")


def validated(releases: Iterable[Release], scenario: str) -> Iterator[Release]:
    """Yield ``releases`` unchanged, raising :class:`DataError` at the first one that breaks the
    rules of ``scenario`` (see the module docstring). An unknown scenario is a ConfigError,
    raised at once."""
    require(scenario in SCENARIOS, "scenario", f"one of {list(SCENARIOS)}", scenario)
    return _validated(iter(releases), scenario)


def _validated(releases: Iterator[Release], scenario: str) -> Iterator[Release]:
    previous: Release | None = None
    for expected, release in enumerate(releases, start=1):
        if not isinstance(release, Release):
            raise DataError(f"release {expected}: the data set yielded a {type(release).__name__}, not a Release")
        if release.t != expected:
            raise DataError(
                f"release {expected}: numbered t={release.t!r}; releases must be numbered 1, 2, 3, ... in order"
            )
        _check_consistent(release)
        where = f"release {release.t}"
        if scenario == "cumulative" and release.time is None:
            raise DataError(
                f"{where}: a cumulative release needs per-record timestamps (Release.time; the schema's 'time' column)"
            )
        if previous is not None and scenario in ("continuous", "cumulative"):
            change = schema_change(previous.schema, release.schema)
            if change:
                raise DataError(
                    f"{where}: the schema changed from release {previous.t} ({change}); a {scenario} scenario keeps "
                    f"one schema, only a sequential one may change attribute sets"
                )
        if previous is not None and scenario == "cumulative":
            _check_cumulative(previous, release)
        previous = release
        yield release


def _check_consistent(release: Release) -> None:
    where = f"release {release.t}"
    n = len(release.respondent)
    if n == 0:
        raise DataError(f"{where}: no records; a release needs at least one record")
    d = len(release.schema.qi)
    if release.qi.shape != (n, d):
        raise DataError(f"{where}: QI matrix has shape {release.qi.shape}; {n} respondents and {d} QIs need ({n}, {d})")
    if release.sensitive.shape != (n,):
        raise DataError(f"{where}: {release.sensitive.shape[0]} sensitive values for {n} respondents")
    if release.time is not None and release.time.shape != (n,):
        raise DataError(f"{where}: {release.time.shape[0]} timestamps for {n} respondents")
    ids, counts = np.unique(release.respondent, return_counts=True)
    if (counts > 1).any():
        raise DataError(
            f"{where}: respondent(s) {ids[counts > 1][:5].tolist()} appear more than once; a release holds one "
            f"record per respondent"
        )
    m = release.schema.sensitive.size
    if release.sensitive.min() < 0 or release.sensitive.max() >= m:
        bad = np.unique(release.sensitive[(release.sensitive < 0) | (release.sensitive >= m)])
        raise DataError(
            f"{where}: sensitive code(s) {bad[:5].tolist()} outside 0..{m - 1} "
            f"(the {m} values of {release.schema.sensitive.name!r})"
        )


def _check_cumulative(previous: Release, release: Release) -> None:
    where = f"release {release.t}"
    present = np.isin(previous.respondent, release.respondent)
    if not present.all():
        gone = np.sort(previous.respondent[~present])
        raise DataError(
            f"{where}: respondent(s) {gone[:5].tolist()} of release {previous.t} are missing; a cumulative release "
            f"keeps every earlier record ({len(gone)} dropped)"
        )
    order = np.argsort(release.respondent)
    pos = order[np.searchsorted(release.respondent, previous.respondent, sorter=order)]
    moved = release.time[pos] != previous.time
    if moved.any():
        raise DataError(
            f"{where}: respondent(s) {np.sort(previous.respondent[moved])[:5].tolist()} changed timestamp since "
            f"release {previous.t}; a record keeps the timestamp it was collected with"
        )


def schema_change(a: Schema, b: Schema) -> str:
    """A short description of the first difference between two schemas ('' if they are equal)."""
    if a == b:
        return ""
    if a.qi_names != b.qi_names:
        return f"QI columns {a.qi_names} -> {b.qi_names}"
    for qa, qb in zip(a.qi, b.qi):
        if qa == qb:
            continue
        if qa.kind != qb.kind:
            return f"QI {qa.name!r} is {qa.kind} -> {qb.kind}"
        if qa.kind == "numeric":
            return f"QI {qa.name!r} domain [{qa.low:g}, {qa.high:g}] -> [{qb.low:g}, {qb.high:g}]"
        return f"QI {qa.name!r} values {_values_change(qa.values, qb.values)}"
    sa, sb = a.sensitive, b.sensitive
    if sa.name != sb.name:
        return f"sensitive attribute {sa.name!r} -> {sb.name!r}"
    if tuple(sa.values) != tuple(sb.values):
        return f"sensitive {sa.name!r} values {_values_change(sa.values, sb.values)}"
    if sa.ordered != sb.ordered:
        return f"sensitive {sa.name!r} ordered {sa.ordered} -> {sb.ordered}"
    if a.respondent != b.respondent:
        return f"respondent column {a.respondent!r} -> {b.respondent!r}"
    return f"time column {a.time!r} -> {b.time!r}"


def _values_change(old: tuple[str, ...], new: tuple[str, ...]) -> str:
    old_set, new_set = set(old), set(new)
    added = [v for v in new if v not in old_set]
    removed = [v for v in old if v not in new_set]
    if added or removed:
        return f"changed (added {added[:5]}, removed {removed[:5]})"
    return "reordered"
