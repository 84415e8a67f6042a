"""Record linkage RL (BayFrame §6.2, eq. 7; after Domingo-Ferrer & Torra's distance-based linkage).

Every original record ``r`` is linked to the QI-group(s) nearest to its exact QI values. The
distance between ``r`` and a group's published region is the mean over the QIs of

* numeric: the gap between ``r``'s value and the group's interval (0 inside), divided by the
  width of the schema domain;
* categorical: 0 if ``r``'s value is in the group's value set, else 1.

``P_RL(r) = 1 / (n_tied |Q_r|)`` when ``r``'s own group ``Q_r`` is among the ``n_tied`` nearest
groups (the linker picks one of them at random, then one of its ``|Q_r|`` records, counterfeits
included), else 0; a suppressed record contributes 0. ``RL = sum_r P_RL(r)``.

For a bucketized publication the region of a group is the set of its records' exact QI points
and the distance to the group is the distance to its nearest point.

Vectorization: a record inside its own region (every valid publication) is at distance 0, so its
nearest groups are exactly the groups whose region contains it; they are counted by prefix sums
over the grid of the records' values (:func:`~cdpbench.metrics._regions.covering_sums`) when every
region is a box, else found block by block (:func:`~cdpbench.metrics._regions.meeting_blocks`), or
for exact points by a join on equal rows. Only records outside every region (an
anonymizer that moved a record out of its box) need the full records x regions distance matrix,
computed in chunks.
"""

from __future__ import annotations

import numpy as np

from ..data import Publication, Release
from ..plugin import Metric, MetricContext
from ._regions import DENSE_BUDGET, Regions, covering_sums, domain_widths, equal_rows, meeting_blocks, publication_regions

TIE_TOLERANCE = 1e-12


def linkage_probabilities(publication: Publication, release: Release) -> np.ndarray:
    """``P_RL`` of every row of ``release``, float ``[n]`` (0 for suppressed rows)."""
    n = len(release)
    out = np.zeros(n)
    real = publication.owned  # an ownerless copy (row -1) links to no row of the release
    rows = publication.row[real]
    own = publication.group[real]
    if len(rows) == 0:
        return out
    schema = publication.schema
    categorical = schema.categorical
    regions = publication_regions(publication)
    sizes = publication.group_sizes().astype(float)
    G = publication.n_groups
    x = release.qi[rows]
    n_contain = np.zeros(len(rows), dtype=np.int64)  # groups whose region holds the record
    own_in = np.zeros(len(rows), dtype=bool)
    if publication.bucketized:
        # a point region holds a record iff it is the record's exact QI: join on equal rows
        i, k = equal_rows(x, regions.low)
        keys = np.unique(i * G + regions.group[k])
        n_contain = np.bincount(keys // G, minlength=len(rows))
        own_in = np.isin(np.arange(len(rows)) * G + own, keys)
    else:
        counted = covering_sums(x, regions, np.ones((len(regions), 1)), categorical)
        if counted is not None:  # every region a box: count them by prefix sums over the grid
            n_contain = np.rint(counted[:, 0]).astype(np.int64)
            own_in = np.ones(len(rows), dtype=bool)  # one region per group: region = group id
            for j in range(x.shape[1]):
                if j in categorical:
                    own_in &= regions.sets[j][own, x[:, j].astype(np.int64)]
                else:
                    own_in &= (regions.low[own, j] <= x[:, j]) & (x[:, j] <= regions.high[own, j])
        else:
            for qs, regs, meets in meeting_blocks(x, x, regions, categorical):
                n_contain[qs] += meets.sum(axis=1)
                pos = np.minimum(np.searchsorted(regs, own[qs]), len(regs) - 1)
                own_in[qs] |= (regs[pos] == own[qs]) & meets[np.arange(len(qs)), pos]
    p = np.where(own_in, 1.0 / (np.maximum(n_contain, 1) * sizes[own]), 0.0)
    outside = np.flatnonzero(n_contain == 0)
    if len(outside):
        p[outside] = _nearest_probability(x[outside], own[outside], regions, schema, sizes, G)
    out[rows] = p
    return out


def _nearest_probability(x, own, regions: Regions, schema, sizes, G) -> np.ndarray:
    """P_RL for records lying outside every region: full distances, in chunks."""
    widths = domain_widths(schema)
    R = len(regions)
    order = np.argsort(regions.group, kind="stable")
    grp_sorted = regions.group[order]
    starts = np.flatnonzero(np.r_[True, grp_sorted[1:] != grp_sorted[:-1]])
    groups_present = grp_sorted[starts]
    out = np.zeros(len(x))
    chunk = max(1, DENSE_BUDGET // max(R, 1))
    for c0 in range(0, len(x), chunk):
        xc = x[c0 : c0 + chunk]
        dist = np.zeros((len(xc), R))
        for j, a in enumerate(schema.qi):
            if a.kind == "numeric":
                lo, hi = regions.low[:, j][None, :], regions.high[:, j][None, :]
                v = xc[:, j][:, None]
                dist += (np.maximum(lo - v, 0.0) + np.maximum(v - hi, 0.0)) / widths[j]
            else:
                dist += ~regions.sets[j][:, xc[:, j].astype(np.int64)].T
        dist /= max(len(schema.qi), 1)
        by_group = np.full((len(xc), G), np.inf)
        by_group[:, groups_present] = np.minimum.reduceat(dist[:, order], starts, axis=1)
        dmin = by_group.min(axis=1, keepdims=True)
        tied = by_group <= dmin + TIE_TOLERANCE
        own_c = own[c0 : c0 + chunk]
        own_tied = tied[np.arange(len(xc)), own_c]
        out[c0 : c0 + chunk] = np.where(own_tied, 1.0 / (tied.sum(axis=1) * sizes[own_c]), 0.0)
    return out


class RecordLinkage(Metric):
    """Record linkage RL (BayFrame §6.2 eq. 7): sum over records of 1/(n_tied |Q|) when the nearest group is their own.

    Keys: ``rl`` (the sum) and ``rl_norm`` = rl / ``|T|`` in [0, 1] (0 for an empty release).
    See the module docstring for the distance and the tie rule.
    """

    uses_history = False  # reads no ctx.history: this release and its publication only (issue #28: the run keeps no more than it needs)

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        p = linkage_probabilities(ctx.publication, ctx.release)
        n = len(ctx.release)
        rl = float(p.sum())
        return {"rl": rl, "rl_norm": rl / n if n else 0.0}
