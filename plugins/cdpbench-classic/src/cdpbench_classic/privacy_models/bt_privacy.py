"""(B, t)-privacy (Li, Li & Zhang, "Modeling and Integrating Background Knowledge in Data
Anonymization", ICDE 2009).

An adversary with background knowledge of bandwidth ``B`` holds the kernel prior
``P_pri(B, q)`` on every respondent (:func:`~cdpbench_classic.knowledge.kernel.kernel_prior`);
after seeing the QI-group of a respondent the belief becomes the posterior ``P_post``, approximated
by the Ω-estimate (:func:`~cdpbench_classic.estimators.omega.omega_posterior`). A release is
(B, t)-private if for every record ``D[P_pri(B, q), P_post] <= t``. As every classic model here,
it also requires a minimum group size ``k`` (``k = 1``: no size requirement).

Distance ``D``: the Jensen–Shannon **divergence** with base-2 logarithms,

    JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M),   M = (P + Q) / 2,

not its square root (the "JS distance", a metric). Why: the paper measures the disclosure with the
JS divergence (as JS-reduce §6.2 does for its threshold ``j``), so the thresholds its experiments
report are divergence values and transfer unchanged; base 2 bounds the divergence by 1, so
``t ∈ [0, 1]`` spans all of it. The paper's base could not be checked (its body is not in
``/work/shared/papers`` nor in the stored corpora): base 2 is a choice. The square-root reading is
the same model with threshold ``t²`` (``sqrt(JS) <= t  <=>  JS <= t²``). A tolerance of 1e-12 absorbs
rounding, so ``t = 0`` accepts exactly the groups whose posterior equals every member's prior.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import ConfigError, require
from cdpbench.plugin import ModelContext, PrivacyModel

from ..knowledge.kernel import _check_bandwidth, kernel_prior
from ..estimators.frequency import group_counts
from ..estimators.omega import omega_rows

_TOLERANCE = 1e-12
_BLOCK = 1 << 14  # rows per block of the distances: a block's [rows, m] temporaries stay in cache (issue #28)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Row-wise Jensen–Shannon divergence (base 2, in [0, 1]) of two ``[n, m]`` distributions."""
    from scipy.special import rel_entr  # here, not at import: registering plugins must stay fast

    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    mid = 0.5 * (p + q)
    js = 0.5 * (rel_entr(p, mid).sum(axis=-1) + rel_entr(q, mid).sum(axis=-1)) / np.log(2.0)
    return np.clip(js, 0.0, 1.0)


def omega_distances(
    weights: np.ndarray, sensitive: np.ndarray, segment: np.ndarray, n_groups: int, n_values: int
) -> np.ndarray:
    """``[n]`` :func:`js_divergence` of each prior row ``weights[i]`` and its Ω-estimate posterior
    (:func:`cdpbench_classic.estimators.omega.omega_posterior`, the same floats), a block of rows at a time:
    a row's posterior depends on its own prior row and its group's sums only, and the per-group sums
    Σ_{r' ∈ Q} p(r', s) are one ``np.bincount`` per value (the additions of omega_posterior's flat
    ``bincount``, in row order from 0). The whole-array form allocated several fresh ``[n, m]`` arrays
    (page faults and cache misses at 10^6 records: n^1.24 from 10^5 to 10^6)."""
    segment = np.asarray(segment, dtype=np.int64)
    n, m = len(segment), int(n_values)
    G = int(n_groups)
    counts = group_counts(sensitive, segment, n_groups, m).astype(float)  # n(s) per group
    size = np.maximum(counts.sum(axis=1), 1.0)  # |Q|, 1 for an empty group
    w = np.asarray(weights, dtype=float)
    if w.shape != (n, m):
        raise ValueError(f"weights must have shape (n, n_values) = ({n}, {m}); got {w.shape}")
    column = np.empty((G, m))
    for s in range(m):
        column[:, s] = np.bincount(segment, weights=w[:, s], minlength=G)
    out = np.empty(n)
    for lo in range(0, n, _BLOCK):
        hi = min(lo + _BLOCK, n)
        prior = w[lo:hi]
        out[lo:hi] = js_divergence(prior, omega_rows(segment[lo:hi], prior, counts, column, size))
    return out


@dataclass
class BTPrivacyParams:
    B: float = field(default=0.3, metadata={"help": "adversary's kernel bandwidth B > 0 (smaller: stronger adversary)"})
    t: float = field(
        default=0.2, metadata={"help": "max JS divergence (base 2) between prior and posterior, in [0, 1]"}
    )
    k: int = field(default=1, metadata={"help": "minimum number of records per QI-group (>= 1)"})

    def __post_init__(self) -> None:
        _check_bandwidth(self.B, "B")
        require(
            isinstance(self.t, (int, float)) and not isinstance(self.t, bool) and 0.0 <= self.t <= 1.0,
            "t",
            "a number in [0, 1]",
            self.t,
        )
        k_ok = isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1
        require(k_ok, "k", "an integer >= 1", self.k)


class BTPrivacy(PrivacyModel):
    """(B,t)-privacy: JS(kernel prior, Ω-posterior) <= t for every record, and |Q| >= k."""

    uses_history = False  # reads no ctx.history: judges each publication on its own (issue #28: the run keeps no more than it needs)

    Params = BTPrivacyParams
    needs_prior: ClassVar[bool] = True

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        ctx.prior = kernel_prior(release, self.params.B)

    def distances(self, batch: GroupBatch) -> np.ndarray:
        """``[n]`` JS divergence between each record's prior and its Ω-estimate posterior."""
        if batch.prior is None:
            raise ConfigError(
                "bt_privacy needs the per-record kernel prior: call prepare(release, ctx) before "
                "accepts/verify (the group batch has no prior)"
            )
        return omega_distances(batch.prior, batch.sensitive, batch.segment, batch.n_groups, batch.n_values)

    def group_distances(self, batch: GroupBatch) -> np.ndarray:
        """``[n_groups]`` largest distance over each group's records (0 for an empty group)."""
        worst = np.zeros(batch.n_groups)
        np.maximum.at(worst, np.asarray(batch.segment, dtype=np.int64), self.distances(batch))
        return worst

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        return (self.group_distances(batch) <= self.params.t + _TOLERANCE) & (batch.sizes() >= self.params.k)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        publication.require_single_partition("privacy model bt_privacy (it judges a QI group's values)")
        sizes = publication.group_sizes()
        if not len(sizes):
            return {"k": 0.0, "t": 0.0}
        worst = self.group_distances(publication.batch(ctx.prior_for(publication)))
        return {"k": float(sizes.min()), "t": float(worst.max())}
