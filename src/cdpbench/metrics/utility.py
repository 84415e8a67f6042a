"""General utility of a publication: GCP/NCP, discernibility, suppression and group sizes.

* NCP, the normalized certainty penalty of a published record (Xu et al., "Utility-based
  anonymization using local recoding", KDD 2006; BayFrame §6.2; (tau,m)-slicedBucket eq. 4-6):
  ``NCP(r) = sum_j w_j NCP_j(r)`` with equal weights ``w_j = 1/d``; for a numeric QI
  ``NCP_j = (z_j - y_j) / (high_j - low_j)``, the width of the group's interval over the width of
  the schema domain; for a categorical QI ``NCP_j = |leaves(u)| / |A_j|`` when the published value
  set ``u`` stands for more than one leaf, else 0.
* GCP = sum of NCP over the published records (JS-reduce §7.5 and BayFrame §6.2 call it the
  global certainty penalty).
* Discernibility (Bayardo & Agrawal, "Data privacy through optimal k-anonymization", ICDE 2005):
  ``C_DM = sum_Q |Q|^2 + |suppressed| x |T|``.
"""

from __future__ import annotations

import numpy as np

from ..data import Publication, Release
from ..plugin import Metric, MetricContext
from ._regions import domain_widths, group_value_sets


def group_ncp(publication: Publication) -> np.ndarray:
    """NCP of each group's generalized QI region, float ``[G]`` (the NCP every record of the group
    gets). A bucketized publication publishes exact QI values: its NCP is 0."""
    schema = publication.schema
    G = publication.n_groups
    d = len(schema.qi)
    if G == 0 or d == 0 or publication.bucketized:
        return np.zeros(G)
    widths = domain_widths(schema)
    sets = group_value_sets(publication)
    per_qi = np.empty((G, d))
    for j, a in enumerate(schema.qi):
        if a.kind == "numeric":
            per_qi[:, j] = (publication.high[:, j] - publication.low[:, j]) / widths[j]
        else:
            leaves = sets[j].sum(axis=1)
            per_qi[:, j] = np.where(leaves > 1, leaves / widths[j], 0.0)
    return per_qi.mean(axis=1)


def ncp(publication: Publication) -> np.ndarray:
    """NCP of every published record (counterfeits included), float ``[p]``."""
    return group_ncp(publication)[publication.group]


def gcp(publication: Publication, release: Release) -> tuple[float, float]:
    """``(GCP, normalized GCP)``.

    GCP sums NCP over the published *real* records (counterfeits are reported separately and are
    no records of the release). The normalized value counts a suppressed record as fully
    generalized (NCP 1) and divides by ``|release|``, so it lies in [0, 1]; it is 0 for an empty
    release.
    """
    total = float(ncp(publication)[~publication.counterfeit].sum())
    n = len(release)
    return total, ((total + len(publication.suppressed)) / n if n else 0.0)


class UtilityMetrics(Metric):
    """GCP (Xu et al. 2006), discernibility (Bayardo & Agrawal 2005), suppression, counterfeits, group sizes.

    Keys: ``gcp``, ``gcp_norm`` (see :func:`gcp`), ``discernibility`` = ``sum_Q |Q|^2 +
    |suppressed| x |T|`` with ``|Q|`` the published group size (counterfeits included) and ``|T|``
    the size of the release, ``discernibility_norm`` = discernibility / ``(|T| + counterfeits)^2``
    (= / ``|T|^2`` without counterfeits; in [0, 1]), ``suppressed``, ``suppressed_fraction``
    (over ``|T|``), ``counterfeits``, ``groups``, ``group_size_min``, ``group_size_mean``
    (0 without groups).
    """

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        pub, release = ctx.publication, ctx.release
        n = len(release)
        sizes = pub.group_sizes()
        n_sup = len(pub.suppressed)
        n_fake = int(np.count_nonzero(pub.counterfeit))
        total, norm = gcp(pub, release)
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
        }
