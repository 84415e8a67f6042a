"""General utility of a publication: GCP/NCP, discernibility, suppression and group sizes.

* NCP, the normalized certainty penalty of a published record (Xu et al., "Utility-based
  anonymization using local recoding", KDD 2006, cited as [27] by JS-reduce §7.5; BayFrame §6.2;
  (tau,m)-slicedBucket §6.1 eq. 4-6): ``NCP(r) = sum_j w_j NCP_j(r)`` with equal weights
  ``w_j = 1/d``. For a numeric QI ``NCP_j = (z_j - y_j) / R_j``, the width of the group's interval
  ``[y_j, z_j]`` over a range ``R_j`` chosen by the parameter ``ncp_range``:

  - ``"data"`` (default) — ``R_j = max - min`` of QI j over the release's records, suppressed
    ones included, counterfeits not: BayFrame §6.2 ("[A_j] is the range of all records on the
    attribute A_j in T_i") and Xu et al.'s NCP, which JS-reduce §7.5 uses for its GCP;
  - ``"domain"`` — ``R_j = high_j - low_j``, the schema's declared domain: (tau,m)-slicedBucket
    eq. 4 ("|QI_i| is the domain of attribute QI_i").

  A degenerate range (``R_j = 0``: every record of the release has the same value on QI j, or a
  domain of one point) gives ``NCP_j = 0`` on that QI — a group's interval spanned by such
  records has width 0 anyway. A published interval wider than ``R_j`` (not possible for boxes
  spanned by the release's records) would give ``NCP_j > 1``; it is not clipped.

  For a categorical QI ``NCP_j = |leaves(u)| / |A_j|`` when the published value set ``u`` stands
  for more than one leaf, else 0, ``|A_j|`` being the number of leaves of the taxonomy, in both
  forms. None of the papers here defines the categorical case (BayFrame §6.2 assumes numeric QIs;
  slicedBucket leaves gender and zip unspecified, specs/invariance.md note 11), and the lab's
  BayFrame notes (specs/bayframe.md, note 10) prescribe leaf count over the domain's leaves.
* GCP = sum of NCP over the published records (JS-reduce §7.5 and BayFrame §6.2 call it the
  global certainty penalty; slicedBucket eq. 6 calls it NCP(T*)).
* Discernibility (Bayardo & Agrawal, "Data privacy through optimal k-anonymization", ICDE 2005):
  ``C_DM = sum_Q |Q|^2 + |suppressed| x |T|``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data import Publication, Release
from ..errors import require
from ..plugin import Metric, MetricContext
from ._regions import group_value_sets

NCP_RANGES = ("data", "domain")


def ncp_ranges(release: Release, ncp_range: str = "data") -> np.ndarray:
    """Per QI the denominator ``R_j`` of ``NCP_j``, float ``[d]`` (module docstring): numeric QIs
    the release's ``max - min`` (``"data"``, 0 for an empty release) or the schema's
    ``high - low`` (``"domain"``); categorical QIs the taxonomy's leaf count."""
    if ncp_range not in NCP_RANGES:
        raise ValueError(f"ncp_range must be one of {NCP_RANGES}, got {ncp_range!r}")
    schema = release.schema
    out = np.empty(len(schema.qi))
    for j, a in enumerate(schema.qi):
        if a.kind != "numeric":
            out[j] = a.taxonomy.size
        elif ncp_range == "domain":
            out[j] = a.high - a.low
        else:
            col = release.qi[:, j]
            out[j] = float(col.max() - col.min()) if len(col) else 0.0
    return out


def group_ncp(publication: Publication, release: Release, ncp_range: str = "data") -> np.ndarray:
    """NCP of each group's generalized QI region, float ``[G]`` (the NCP every record of the group
    gets); ``release`` is the one ``publication`` publishes (its range for ``ncp_range="data"``).
    A bucketized publication publishes exact QI values: its NCP is 0."""
    schema = publication.schema
    G = publication.n_groups
    d = len(schema.qi)
    ranges = ncp_ranges(release, ncp_range)
    if G == 0 or d == 0 or publication.bucketized:
        return np.zeros(G)
    sets = group_value_sets(publication)
    per_qi = np.zeros((G, d))
    for j, a in enumerate(schema.qi):
        if ranges[j] <= 0:
            continue  # degenerate range: NCP_j = 0
        if a.kind == "numeric":
            per_qi[:, j] = (publication.high[:, j] - publication.low[:, j]) / ranges[j]
        else:
            leaves = sets[j].sum(axis=1)
            per_qi[:, j] = np.where(leaves > 1, leaves / ranges[j], 0.0)
    return per_qi.mean(axis=1)


def ncp(publication: Publication, release: Release, ncp_range: str = "data") -> np.ndarray:
    """NCP of every published record (counterfeits included), float ``[p]``."""
    return group_ncp(publication, release, ncp_range)[publication.group]


def gcp(publication: Publication, release: Release, ncp_range: str = "data") -> tuple[float, float]:
    """``(GCP, normalized GCP)``, NCP's numeric ranges taken as ``ncp_range`` says.

    GCP sums NCP over the published *real* records (counterfeits are reported separately and are
    no records of the release). The normalized value counts a suppressed record as fully
    generalized (NCP 1) and divides by ``|release|``, so it lies in [0, 1]; it is 0 for an empty
    release.
    """
    total = float(ncp(publication, release, ncp_range)[~publication.counterfeit].sum())
    n = len(release)
    return total, ((total + len(publication.suppressed)) / n if n else 0.0)


@dataclass
class UtilityParams:
    ncp_range: str = field(
        default="data",
        metadata={
            "help": "range a numeric QI's NCP divides by: 'data' = max - min over the release's records "
            "(BayFrame §6.2, Xu et al. as in JS-reduce §7.5), 'domain' = the schema's domain (slicedBucket eq. 4)"
        },
    )

    def __post_init__(self) -> None:
        require(self.ncp_range in NCP_RANGES, "ncp_range", "one of 'data', 'domain'", self.ncp_range)


class UtilityMetrics(Metric):
    """GCP (Xu et al. 2006), discernibility (Bayardo & Agrawal 2005), suppression, counterfeits, group sizes.

    Keys: ``gcp``, ``gcp_norm`` (see :func:`gcp`), ``discernibility`` = ``sum_Q |Q|^2 +
    |suppressed| x |T|`` with ``|Q|`` the published group size (counterfeits included) and ``|T|``
    the size of the release, ``discernibility_norm`` = discernibility / ``(|T| + counterfeits)^2``
    (= / ``|T|^2`` without counterfeits; in [0, 1]), ``suppressed``, ``suppressed_fraction``
    (over ``|T|``), ``counterfeits``, ``groups``, ``group_size_min``, ``group_size_mean``
    (0 without groups), ``ncp_mean`` = the mean NCP of the published tuples, counterfeits included
    and suppressed records not (slicedBucket's NCP %, Eqs. 4–6, divided by 100: NCP(T*) over
    |T*| with equal weights). GCP's NCP divides a numeric QI's interval by the range ``params.ncp_range``
    names (module docstring).
    """

    uses_history = False  # reads no ctx.history: this release's publication only (issue #28: the run keeps no more than it needs)
    reads_counts = True  # a counted publication's cells are boxes holding its (hidden) records: NCP unchanged (issue #29)

    Params = UtilityParams

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        pub, release = ctx.publication, ctx.release
        n = len(release)
        sizes = pub.group_sizes()
        n_sup = len(pub.suppressed)
        n_fake = int(np.count_nonzero(pub.counterfeit))
        total, norm = gcp(pub, release, self.params.ncp_range)
        per_tuple = ncp(pub, release, self.params.ncp_range) if len(pub) else np.zeros(0)
        disc = float(np.sum(sizes.astype(float) ** 2) + n_sup * n)
        scale = float(n + n_fake) ** 2
        return {
            "gcp": total,
            "gcp_norm": norm,
            "discernibility": disc,
            "discernibility_norm": disc / scale if scale else 0.0,
            "suppressed": float(n_sup),
            "suppressed_fraction": n_sup / n if n else 0.0,
            "counterfeits": float(n_fake),
            "groups": float(pub.n_groups),
            "group_size_min": float(sizes.min()) if len(sizes) else 0.0,
            "group_size_mean": float(sizes.mean()) if len(sizes) else 0.0,
            "ncp_mean": float(per_tuple.mean()) if len(per_tuple) else 0.0,
        }
