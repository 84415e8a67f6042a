"""The continuous churn process over any base table: deletions, insertions, sensitive-value
updates and re-insertions of deleted records, release after release (the footnote of BayFrame
§6.1: records of a static set assigned to releases). Used by the ``adult`` data set (no
re-insertions) and the ``churn`` scenario of (tau, m)-slicedBucket
(:mod:`cdpbench.datasets.churn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from ..data import Release
from ..errors import DataError
from ..schema import Schema


@dataclass(frozen=True)
class ChurnPlan:
    """The release sizes a churn configuration leads to, fixed before any random draw.

    ``sizes[t-1]`` = |T_t|; ``reinserted[t-1]`` = re-insertions at release t (fewer than asked
    while fewer deleted records wait: none at release 2, since nothing was deleted before it).
    """

    sizes: tuple[int, ...]
    reinserted: tuple[int, ...]
    rows_used: int


def plan_churn(
    n_base: int,
    *,
    initial: int,
    deletions: int,
    insertions: int,
    updates: int,
    reinsertions: int,
    releases: int,
    name: str = "the base table",
) -> ChurnPlan:
    """Check that a churn configuration fits a base table of ``n_base`` rows; raise
    :class:`DataError` saying what does not fit (and how many releases would)."""
    for label, value, minimum in (
        ("releases", releases, 1),
        ("initial", initial, 1),
        ("deletions", deletions, 0),
        ("insertions", insertions, 0),
        ("updates", updates, 0),
        ("reinsertions", reinsertions, 0),
    ):
        if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum):
            raise DataError(f"churn: {label} must be an integer >= {minimum} (got {value!r})")
    rows_used = initial + (releases - 1) * insertions
    if rows_used > n_base:
        if initial > n_base:
            fit = "not even the first release fits"
        else:
            fit = f"only {1 + (n_base - initial) // insertions} release(s) fit"
        raise DataError(
            f"{name} has {n_base:,} rows but initial={initial:,} plus insertions={insertions:,} for each of the "
            f"{releases - 1} later releases need {rows_used:,} never-used rows; {fit} "
            f"(lower releases, initial or insertions)"
        )
    sizes, reinserted = [initial], [0]
    waiting = 0  # deleted records that may be re-inserted
    for t in range(2, releases + 1):
        size = sizes[-1]
        if deletions > size:
            raise DataError(f"release {t}: deletions={deletions:,} exceed the {size:,} records of release {t - 1}")
        if updates > size - deletions:
            raise DataError(
                f"release {t}: updates={updates:,} exceed the {size - deletions:,} records that stay from release "
                f"{t - 1} after {deletions:,} deletions"
            )
        back = min(reinsertions, waiting)
        waiting += deletions - back
        sizes.append(size - deletions + back + insertions)
        reinserted.append(back)
    return ChurnPlan(tuple(sizes), tuple(reinserted), rows_used)


def churn_process(
    base: pd.DataFrame,
    schema: Schema,
    *,
    initial: int,
    deletions: int,
    insertions: int,
    updates: int,
    reinsertions: int,
    releases: int,
    rng: np.random.Generator,
    name: str = "the base table",
) -> Iterator[Release]:
    """Yield releases 1..``releases`` of a continuous scenario drawn from ``base``.

    * Respondent id = row position in ``base`` (0..n-1); a record's QI never changes.
    * T1 = ``initial`` random rows of ``base``.
    * Release t >= 2, from T(t-1): delete ``deletions`` random records; among the records that
      stay, re-draw the sensitive value of ``updates`` records uniformly from the schema's domain
      (the value may stay the same, BayFrame §6.1); re-insert ``reinsertions`` records deleted at
      an earlier release, with the same respondent id, QI and the sensitive value they had when
      deleted (the Del table of (tau, m)-slicedBucket §5.2: p4 returns as "Asthma", Table 8);
      insert ``insertions`` rows of ``base`` never used before. Re-insertions start at release 3
      and are fewer than asked while fewer deleted records wait (see :func:`plan_churn`).
    * Records are sorted by respondent id (a random order of arrival, so position says nothing
      about when a record arrived); ``Release.truth`` lists the respondent ids ``deleted``,
      ``inserted``, ``reinserted`` and ``updated`` at that release (release 1: all inserted).

    Every release is built with :meth:`Schema.encode`, so a base value outside the schema fails
    naming the release. Everything is checked against the base size before the first release
    (:class:`DataError` if the base runs out of never-used rows). All randomness comes from ``rng``.
    """
    n_base = len(base)
    plan = plan_churn(
        n_base,
        initial=initial,
        deletions=deletions,
        insertions=insertions,
        updates=updates,
        reinsertions=reinsertions,
        releases=releases,
        name=name,
    )
    if schema.time is not None:
        raise DataError(
            f"churn releases are continuous snapshots; the schema must not name a time column (got {schema.time!r})"
        )
    needed = [*schema.qi_names, schema.sensitive.name]
    missing = [c for c in needed if c not in base.columns]
    if missing:
        raise DataError(f"{name} lacks column(s) {missing}; the schema needs {needed}")
    return _churn(base, schema, plan, deletions, insertions, updates, reinsertions, rng)


def _churn(
    base: pd.DataFrame,
    schema: Schema,
    plan: ChurnPlan,
    deletions: int,
    insertions: int,
    updates: int,
    reinsertions: int,
    rng: np.random.Generator,
) -> Iterator[Release]:
    qi_frame = base[schema.qi_names].reset_index(drop=True)
    sens_name = schema.sensitive.name
    # current sensitive value of every base row (kept for deleted rows: re-inserted as deleted)
    sensitive = base[sens_name].to_numpy(dtype=object).copy()
    domain = np.asarray(schema.sensitive.values, dtype=object)
    arrival = rng.permutation(len(base))  # rows in order of first use
    cursor = plan.sizes[0]
    current = np.sort(arrival[:cursor])
    waiting = np.empty(0, dtype=np.int64)  # deleted rows, sorted
    empty = np.empty(0, dtype=np.int64)
    truth = {"deleted": empty, "inserted": current.copy(), "reinserted": empty, "updated": empty}
    for t in range(1, len(plan.sizes) + 1):
        if t > 1:
            deleted = np.sort(rng.choice(current, size=deletions, replace=False))
            stay = np.setdiff1d(current, deleted, assume_unique=True)
            updated = np.sort(rng.choice(stay, size=updates, replace=False))
            sensitive[updated] = domain[rng.integers(len(domain), size=updates)]
            back = plan.reinserted[t - 1]
            reinserted = np.sort(rng.choice(waiting, size=back, replace=False)) if back else empty
            waiting = np.union1d(np.setdiff1d(waiting, reinserted, assume_unique=True), deleted)
            inserted = np.sort(arrival[cursor : cursor + insertions])
            cursor += insertions
            current = np.sort(np.concatenate([stay, reinserted, inserted]))
            truth = {"deleted": deleted, "inserted": inserted, "reinserted": reinserted, "updated": updated}
        frame = qi_frame.iloc[current].reset_index(drop=True)
        frame.insert(0, schema.respondent, current)
        frame[sens_name] = sensitive[current]
        yield schema.encode(frame, t, truth={k: v.astype(np.int64) for k, v in truth.items()})
