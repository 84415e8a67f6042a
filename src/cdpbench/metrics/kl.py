"""KL divergence between the original table and the one reconstructed from a publication.

Kifer & Gehrke ("Injecting utility into anonymized datasets", SIGMOD 2006) and the
(tau,m)-slicedBucket paper §6.1(ii), eq. 7: ``KL(P_orig || P_rec) = sum_c P_orig(c) log(P_orig(c)
/ P_rec(c))`` over the cells ``c = (QI values, sensitive value)`` of the joint domain.

* ``P_orig`` is the empirical distribution of the release's records (suppressed ones included).
* ``P_rec`` spreads every published record (counterfeits included), with its sensitive value,
  uniformly over its group's generalized QI region: a numeric QI over the integers in
  ``[low, high]`` when its domain is integral (schema bounds and all release values are integers;
  Adult's are), otherwise over ``[low, high]`` by length, each original value owning the cell
  between the midpoints to its neighbouring distinct values (a point interval puts all its mass
  on the cell containing it); a categorical QI over its value set. A suppressed record is fully
  generalized: spread over the whole QI domain with its sensitive value. In an angelized
  publication (GT/BT) a group's records carry its expected value counts through the buckets
  (:meth:`~cdpbench.data.Publication.expected_group_counts`). Each record has mass
  ``1 / (|published| + |suppressed|)``.
* A bucketized publication publishes exact QI points: every point of a bucket carries the
  bucket's sensitive distribution, ``P_rec(q, s) ~ sum_bucket #{points of the bucket at q} x
  count_bucket(s) / |bucket|`` (Xiao & Tao's anatomy reconstruction).

Only cells with ``P_orig > 0`` contribute; ``P_rec`` is computed on those cells only, block by
block over the (cell, region) pairs whose intervals meet
(:func:`~cdpbench.metrics._regions.meeting_blocks`). KL is ``inf`` if the publication gives such a cell no
mass (impossible when every record lies in its own group's region).
"""

from __future__ import annotations

import numpy as np

from ..data import Publication, Release
from ..plugin import Metric, MetricContext
from ._regions import covering_sums, equal_rows, integer_count, integral_columns, meeting_blocks, publication_regions, suppressed_rows


def reconstructed_mass(publication: Publication, release: Release) -> tuple[np.ndarray, np.ndarray]:
    """``(P_orig, P_rec)`` on the distinct (QI, sensitive) cells of ``release``."""
    schema = publication.schema
    n = len(release)
    d = len(schema.qi)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    joint = np.column_stack([release.qi, release.sensitive.astype(float)])
    cells, counts = np.unique(joint, axis=0, return_counts=True)
    cell_qi = cells[:, :d]
    cell_s = cells[:, d].astype(np.int64)
    p_orig = counts / n

    integral = integral_columns(release)
    categorical = schema.categorical
    # query intervals per cell: points, except the value cells of non-integral numeric columns
    q_low = cell_qi.copy()
    q_high = cell_qi.copy()
    member_high = cell_qi.copy()  # right end used to place a point interval (last cell closed)
    dom_factor = np.ones(len(cells))
    cell_index: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # column -> (cell's value index, left ends)
    for j, a in enumerate(schema.qi):
        if a.kind == "categorical":
            dom_factor /= a.taxonomy.size
        elif integral[j]:
            dom_factor /= max(float(integer_count(np.array(a.low), np.array(a.high))), 1.0)
        else:
            values = np.unique(release.qi[:, j])
            mids = (values[:-1] + values[1:]) / 2.0
            left = np.concatenate([[a.low], mids])
            right = np.concatenate([mids, [a.high]])
            idx = np.searchsorted(values, cell_qi[:, j])
            cell_index[j] = (idx, left)
            q_low[:, j] = left[idx]
            q_high[:, j] = right[idx]
            member_high[:, j] = np.where(idx == len(values) - 1, np.inf, right[idx])
            width = a.high - a.low
            dom_factor *= (right[idx] - left[idx]) / width if width > 0 else 1.0

    mass = np.zeros(len(cells))
    if len(publication):
        regions = publication_regions(publication)
        # per-region factors of the integral and categorical columns: 1 / number of values
        region_factor = np.ones(len(regions))
        for j, a in enumerate(schema.qi):
            if a.kind == "categorical":
                region_factor /= np.maximum(regions.sets[j].sum(axis=1), 1)
            elif integral[j]:
                region_factor /= np.maximum(integer_count(regions.low[:, j], regions.high[:, j]), 1.0)
        real_valued = [j for j, a in enumerate(schema.qi) if a.kind == "numeric" and not integral[j]]
        gcounts = publication.expected_group_counts()  # the group counts when single-partition
        if publication.bucketized:
            sizes = np.maximum(publication.group_sizes(), 1)
            per_region = gcounts[regions.group] / sizes[regions.group][:, None]
        else:
            per_region = gcounts
        if publication.bucketized:
            # exact points: a point gives all its mass to the cell holding it; real-valued
            # columns are compared by cell index (left <= v < right, the last cell closed)
            cell_key = cell_qi.copy()
            point_key = regions.low.copy()
            for j in real_valued:
                cell_key[:, j] = cell_index[j][0]
                point_key[:, j] = np.searchsorted(cell_index[j][1], point_key[:, j], side="right") - 1
            c, k = equal_rows(cell_key, point_key)
            mass += np.bincount(c, weights=per_region[k, cell_s[c]], minlength=len(cells))
        summed = None
        if not publication.bucketized and not real_valued:  # cells are points: prefix sums over the grid
            weights = region_factor[:, None] * per_region
            summed = covering_sums(q_low, regions, weights, categorical)
            if summed is not None:
                mass += summed[np.arange(len(cells)), cell_s]
        blocks = [] if publication.bucketized or summed is not None else meeting_blocks(q_low, q_high, regions, categorical)
        for qs, regs, meets in blocks:
            share = meets * region_factor[regs][None, :] * per_region[regs][:, cell_s[qs]].T
            for j in real_valued:
                lo, hi = regions.low[regs, j][None, :], regions.high[regs, j][None, :]
                c_lo, c_hi = q_low[qs, j][:, None], q_high[qs, j][:, None]
                length = hi - lo
                overlap = np.maximum(np.minimum(hi, c_hi) - np.maximum(lo, c_lo), 0.0)
                point = (lo >= c_lo) & (lo < member_high[qs, j][:, None])
                share *= np.where(length > 0, overlap / np.where(length > 0, length, 1.0), point)
            mass[qs] += share.sum(axis=1)
    sup = suppressed_rows(release, publication)
    sup_by_value = np.bincount(release.sensitive[sup], minlength=schema.sensitive.size).astype(float)
    mass += sup_by_value[cell_s] * dom_factor
    total = len(publication) + len(publication.suppressed)
    return p_orig, mass / max(total, 1)


def kl_divergence(publication: Publication, release: Release) -> float:
    """``KL(P_orig || P_rec)`` in nats (0 for an empty release)."""
    p, q = reconstructed_mass(publication, release)
    if len(p) == 0:
        return 0.0
    if np.any(q <= 0):
        return float("inf")
    kl = float(np.sum(p * np.log(p / q)))
    return 0.0 if -1e-12 < kl < 0.0 else kl  # rounding only; a larger negative value stays visible


class KLDivergence(Metric):
    """KL divergence between the original and the reconstructed table over QI x S (Kifer & Gehrke 2006).

    Key: ``kl`` (nats, >= 0). See the module docstring for the reconstruction.
    """

    uses_history = False  # reads no ctx.history: this release and its publication only (issue #28: the run keeps no more than it needs)

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        return {"kl": kl_divergence(ctx.publication, ctx.release)}
