"""The JS-reduce privacy model (Riboni, Pareschi, Bettini, TDSC 2012, §6.1–§6.3).

A QI-group Q is accepted when

* |Q| >= k (k-anonymity),
* the EMD between Q's sensitive distribution and the whole release's is at most t (t-closeness:
  the privacy model ``closeness``, a plugin reference, by default classic's ``t_closeness``, whose
  ``t`` is the paper's t and ``distance`` the EMD's ground distance, e.g.
  ``privacy_model.closeness.t=0.5``; its own minimum group size ``k`` must stay 1, the group size
  being this model's ``k``), and
* the Jensen–Shannon divergence of the beliefs the defender holds about Q's respondents
  (RBK^sv, or BK^sv for respondents seen for the first time: ``GroupBatch.prior``) is at most j.

Jensen–Shannon divergence (§6.2, after Lin 1991) of distributions p^1..p^u with weights π^i:

    JS(P) = H(Σ_i π^i p^i) − Σ_i π^i H(p^i),

H the Shannon entropy. The paper gives every respondent the same weight (π^i = 1/|Q|: the beliefs
already carry the adversary's confidence). Entropies here are in **bits (log base 2)**, so the
JS of two distributions lies in [0, 1] (1 for two disjoint point masses). For a group of u > 2
respondents the divergence can exceed 1: its maximum is log2(min(u, m)) (e.g. log2 3 for three
disjoint point masses), so j = 1 does not switch the condition off.

Each belief row is normalized to sum 1 before the divergence is computed (revised beliefs may be
raw, not normalized: §5.3 and Table 4b); a row with no mass at all (knowledge that rules out every
value) is taken as the uniform distribution. ``0 · log 0 = 0``.

The beliefs toolkit (normalized beliefs, entropy, the divergence in bits, its running sums and the
check of the prior) is the core's :mod:`cdpbench.beliefs`, shared with BayFrame's J-similarity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.beliefs import BeliefSums, checked_prior, js_divergence
from cdpbench.data import GroupBatch, Publication, Release
from cdpbench.errors import require
from cdpbench.plugin import GroupExtension, ModelContext, PrivacyModel, plugin_ref

_TOL = 1e-12  # slack for float comparisons of a divergence with j


@dataclass
class JSReduceParams:
    k: int = field(default=3, metadata={"help": "minimum number of records per QI-group (>= 1)"})
    j: float = field(default=0.6, metadata={"help": "maximum Jensen-Shannon divergence (bits, equal weights) of the beliefs about a group's respondents, in [0, 1]"})
    closeness: Any = plugin_ref(
        "privacy_model", "t_closeness",
        "the t-closeness condition (§6.1): closeness.t is the paper's t (its default is t_closeness's 0.2; the "
        "presets set Table 5's 0.5), closeness.distance the EMD's ground distance; closeness.k must stay 1 "
        "(the group size is privacy_model.k)",
    )

    def __post_init__(self) -> None:
        require(isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 1, "k", "an integer >= 1", self.k)
        require(isinstance(self.j, (int, float)) and not isinstance(self.j, bool) and 0.0 <= self.j <= 1.0, "j", "a number in [0, 1]", self.j)
        # closeness: a plugin reference, validated and built by the core (check_references)

    def check_references(self) -> None:
        inner_k = getattr(self.closeness.params, "k", 1)
        require(inner_k == 1, "closeness.k", "1 (the minimum group size is privacy_model.k)", inner_k)


class JSReduceModel(PrivacyModel):
    """JS-reduce (TDSC 2012): |Q| >= k, t-closeness <= t, JS divergence of the group's beliefs <= j."""

    Params = JSReduceParams
    needs_prior = True

    def __init__(self, params: JSReduceParams | None = None):
        super().__init__(params)
        self.closeness: PrivacyModel = self.params.closeness  # built by the core from privacy_model.closeness

    def prepare(self, release: Release, ctx: ModelContext) -> None:
        self.closeness.prepare(release, ctx)

    def _divergence(self, prior: np.ndarray | None, segment: np.ndarray, n_groups: int, n_values: int) -> np.ndarray:
        return js_divergence(self._checked_prior(prior, len(segment), n_values), segment, n_groups)

    @staticmethod
    def _checked_prior(prior: np.ndarray | None, n: int, n_values: int) -> np.ndarray:
        return checked_prior(prior, n, n_values, model="js_reduce", example="dk")

    def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:
        js = self._divergence(batch.prior, batch.segment, batch.n_groups, batch.n_values)
        ok = batch.sizes() >= self.params.k
        ok &= np.asarray(self.closeness.accepts(batch, ctx), dtype=bool)
        return ok & (js <= self.params.j + _TOL)

    def extension(
        self, release: Release, ctx: ModelContext, rows: np.ndarray, segment: np.ndarray, n_groups: int
    ) -> GroupExtension | None:
        """Running statistics per group (size; sum of normalized belief rows and of their entropies;
        the t-closeness model's sensitive counts), so that "every group plus one record" is judged
        for all groups in one ``[G, m]`` step, bit for bit as :meth:`accepts` would judge it."""
        if type(self).accepts is not JSReduceModel.accepts:
            return None  # a subclass judging otherwise: let the caller ask accepts
        closeness = self.closeness.extension(release, ctx, rows, segment, n_groups)
        if closeness is None:
            return None
        prior = self._checked_prior(ctx.prior, len(release), release.n_values)  # the checks accepts makes
        return JSExtension(self.params, prior, closeness, rows, segment, n_groups)

    def levels(self, publication: Publication, ctx: ModelContext) -> dict[str, float]:
        if publication.n_groups == 0:
            return {"k": 0.0, "t": 0.0, "j": 0.0}
        js = self._divergence(ctx.prior_for(publication), publication.group, publication.n_groups, publication.schema.sensitive.size)
        out = {"k": float(publication.group_sizes().min())}
        inner = self.closeness.levels(publication, ctx)
        if "t" in inner:  # t_closeness reports the largest EMD
            out["t"] = float(inner["t"])
        out["j"] = float(js.max())
        return out


class JSExtension(GroupExtension):
    """Running per-group statistics of the JS-reduce model (see :meth:`JSReduceModel.extension`).

    The group sizes, the sums of the normalized belief rows and of their entropies are the core's
    running sums (``sums``, a :class:`cdpbench.beliefs.BeliefSums` in bits): :func:`js_divergence`
    sums a group's normalized belief rows and their entropies with ``np.bincount``, i.e. one float
    addition per record in the group's record order, starting at 0; the running sums are built the
    same way (``bincount`` over the initial groups, then one addition per appended record), and
    each normalized row and its entropy depend on that row alone, so ``accepts_plus`` computes the
    very same floats as ``accepts`` on the grown groups. The t-closeness condition is the
    ``closeness`` model's own extension.
    """

    def __init__(self, params: JSReduceParams, prior: np.ndarray, closeness: GroupExtension, rows: np.ndarray, segment: np.ndarray, n_groups: int):
        self.k, self.j = params.k, params.j
        self.closeness = closeness
        self.sums = BeliefSums(prior, rows, segment, n_groups)  # bits
        self.large_plus = self.sums.size_plus >= self.k  # |Q| + 1 >= k

    def accepts_plus(self, row: int) -> np.ndarray:
        return self._plus(row, slice(None), self.closeness.accepts_plus(row))

    def accepts_plus_among(self, row: int, groups: np.ndarray) -> np.ndarray:
        """``accepts_plus(row)[groups]`` with only those groups judged: every quantity is a row of
        its own (the mean row, its entropy, the group's size and t-closeness entry), so the floats
        are the ones ``accepts_plus`` computes."""
        groups = np.asarray(groups, dtype=np.int64)
        return self._plus(row, groups, self.closeness.accepts_plus_among(row, groups))

    def _plus(self, row: int, at, closeness: np.ndarray) -> np.ndarray:
        js = self.sums.divergence_plus(row, at)
        ok = self.large_plus[at] & np.asarray(closeness, dtype=bool)
        return ok & (js <= self.j + _TOL)

    def add(self, g: int, row: int) -> None:
        self.sums.add(g, row)
        self.large_plus[g] = self.sums.size_plus[g] >= self.k
        self.closeness.add(g, row)

    def accepts_prefixes(self, rows: np.ndarray) -> np.ndarray | None:
        """``accepts`` on every prefix ``rows[b, :l + 1]`` of every row of ``rows`` (``[B, L]``).

        The divergences are :meth:`BeliefSums.divergence_prefixes`: running sums along each row of
        ``rows`` restarted at its first record (``np.cumsum``: the very additions ``np.bincount``
        makes in :func:`js_divergence`), never differences of sums, so every float is the one
        ``accepts`` computes."""
        closeness = self.closeness.accepts_prefixes(rows)
        if closeness is None:
            return None
        rows = np.asarray(rows, dtype=np.int64)
        B, L = rows.shape
        if B * L == 0:
            return np.zeros((B, L), dtype=bool)
        js = self.sums.divergence_prefixes(rows)
        ok = (np.arange(1, L + 1) >= self.k)[None, :] & np.asarray(closeness, dtype=bool)
        return ok & (js <= self.j + _TOL)
