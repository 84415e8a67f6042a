"""BayFrame's background knowledge and its revision (Amiri et al., TDP 2019, §4.3, Eqs. 3–4).

The knowledge keeps, per respondent, the posterior beliefs PB computed on the publications it
appeared in (the last two, with their release times) and the last prior it was given. For the
records of a new release T_i, :meth:`BayFrameKnowledge.prior` returns the revised prior
RPD(v, s, t_i):

* a respondent never seen: PD_sv, the prior given its QI (``sv``: ``model``, the data set's
  ground-truth model ``release.truth["model"].bk_sv(qi, t)``, bkseq's law of a first appearance
  in release ``t``; ``kernel``, the knowledge plugin of the ``kernel`` reference, by default
  classic's ``kernel`` (Li et al.'s estimate mined from the table, its bandwidth B at
  ``knowledge.kernel.bandwidth`` / ``attacker.knowledge.kernel.bandwidth``): the choice for
  Adult, where "PD_sv is extracted as in JS-reduce"; or ``uniform``);
* a respondent published in T_{i-1}: Eq. 3 with ``steps = d``. The paper's literal reading
  (``revision="literal"``, §4.3): only the OLDEST posterior of the window enters, chained through
  the correlation model,

      d = 1:  RPD(v, s) = Σ_a PB(v, a, t_{i-1}) · PD1_cor(s | a)
      d = 2:  RPD(v, s) = Σ_{a,b} PB(v, a, t_{i-2}) · PD1_cor(b | a) · PD2_cor(s | a, b)

  (Eq. 4: PD^{d'}_cor for the intermediate steps is approximated by PD1_cor). ``d = 2`` needs the
  respondent in T_{i-2} as well; one published in T_{i-1} only is revised with ``d = 1``.
  ``revision="product"`` uses JS-reduce's revision instead (§5.3 there): every posterior of the
  window enters, RPD(v, s) = Σ_{a,b} PB(v, a, t_{i-2}) · PB(v, b, t_{i-1}) · PD2_cor(s | a, b).
* a respondent seen before but absent from T_{i-1}: "the last computed RPD" (§4.3). The paper's
  adversary "computes RPD_2 for the observed respondents" of T_1* and, for each respondent
  observed in T_i*, "the posterior belief at t_i and the revised prior belief at t_{i+1}" (§5), so
  the last RPD computed for a respondent last published at t' is Eq. 3 applied to its posteriors
  up to t' (``absent="revised"``, the default): the revision above, as at t'+1 (d = 2 when it was
  also published at t'−1), not chained across the releases it missed. ``absent="last_prior"`` is
  the lab's earlier reading: the prior it was given at its last appearance, which ignores the
  posterior of that appearance. A respondent never published (suppressed whenever it was in a
  release) has no posterior: it keeps the last prior it was given (PD_sv if none).

Correlation knowledge (``correlation``): ``model`` — the data set's exact weekly tables
(``model.bk_seq(j)``, by transition class when the model has ``n_seq_classes``, conditioned on
the value being observed when the model says how likely that is, ``model.observed``: the
respondent is known to be in the release); ``uniform`` — every transition 1/m (the paper's Adult
setting: Adult has no sequential knowledge, so a returning respondent's RPD is uniform).

The publisher's compromised records (Fig. 2, §5: "If a data publisher knows who are compromised
in T_i before releasing its anonymized version, she applies the prior-based cascading method to
compute CR_RPD distributions instead of RPD_i distributions and then anonymizes T_i according to
CR_RPD distributions"): with ``sigma > 0`` each respondent of the release is compromised with
probability ``sigma`` (the adversary's draw, :func:`cdpbench_bayframe.compromise.compromised`, with
the same ``compromise_seed``) and :meth:`prior` returns CR_RPD (Eq. 5, confidence ``cr``, on the
release's true value) for it; what is remembered as its RPD is the uncascaded one. Only for the
publisher's knowledge (it reads the release's values): an adversary's must keep ``sigma = 0``.

Rows are normalized to sum 1; a row that sums to 0 (every history its posterior allows is one
the model never produces) falls back to PD_sv. Works with any data set; ``sv="model"`` and
``correlation="model"`` need one that exposes a ground-truth model (bkseq).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cdpbench.data import PublicView, Release, rows_of
from cdpbench.errors import DataError, require
from cdpbench.plugin import Knowledge, plugin_ref

from ..compromise import cascaded_prior, compromised

SV = ("model", "kernel", "uniform")
CORRELATION = ("model", "uniform")
REVISION = ("literal", "product")
ABSENT = ("revised", "last_prior")


@dataclass
class BayFrameKnowledgeParams:
    steps: int = field(default=1, metadata={"help": "d of Eq. 3: 1 (FDTMM, 1-step PD_cor) or 2 (SDTMM, 2-step)"})
    revision: str = field(
        default="literal",
        metadata={"help": "'literal' (Eq. 3-4: oldest posterior chained through PD1_cor) or 'product' "
                  "(JS-reduce's product of the window's posteriors)"},
    )
    absent: str = field(
        default="revised",
        metadata={"help": "a respondent absent from the previous release: 'revised' = the RPD computed after its last "
                  "publication (Eq. 3 on its last posteriors, §4.3/§5's 'last computed RPD'); 'last_prior' = the "
                  "prior it was given at its last appearance (the lab's earlier reading)"},
    )
    sv: str = field(
        default="model",
        metadata={"help": "PD_sv of new respondents: 'model' (data set's ground truth), 'kernel' (the kernel reference), 'uniform'"},
    )
    correlation: str = field(
        default="model", metadata={"help": "PD_cor: 'model' (data set's exact weekly tables) or 'uniform' (the paper's Adult setting)"}
    )
    sigma: float = field(
        default=0.0,
        metadata={"help": "the publisher's compromised records (Fig. 2, prior-based cascading): each respondent of the "
                  "release is compromised with this probability and gets CR_RPD (Eq. 5); 0: none. The publisher's "
                  "knowledge only (an adversary's compromised records are attacker.sigma)"},
    )
    cr: float = field(default=0.9, metadata={"help": "confidence CR of the publisher's compromised records, in (0, 1]"})
    compromise_seed: int = field(
        default=0,
        metadata={"help": "the draw of the compromised records: the same as an adversary's with the same seed (>= 0)"},
    )
    kernel: Any = plugin_ref(
        "knowledge", "kernel",
        "sv=kernel: the knowledge plugin giving PD_sv (default: classic's kernel estimate, mined from the table; "
        "its bandwidth B: <where>.kernel.bandwidth)",
    )

    def __post_init__(self) -> None:
        require(
            isinstance(self.steps, int) and not isinstance(self.steps, bool) and self.steps in (1, 2),
            "steps", "1 or 2", self.steps,
        )
        require(self.revision in REVISION, "revision", "'literal' or 'product'", self.revision)
        require(self.absent in ABSENT, "absent", "'revised' or 'last_prior'", self.absent)
        require(self.sv in SV, "sv", "'model', 'kernel' or 'uniform'", self.sv)
        require(self.correlation in CORRELATION, "correlation", "'model' or 'uniform'", self.correlation)
        require(isinstance(self.sigma, (int, float)) and not isinstance(self.sigma, bool) and 0 <= self.sigma <= 1,
                "sigma", "a number in [0, 1]", self.sigma)
        require(isinstance(self.cr, (int, float)) and not isinstance(self.cr, bool) and 0 < self.cr <= 1,
                "cr", "a number in (0, 1]", self.cr)
        require(isinstance(self.compromise_seed, int) and not isinstance(self.compromise_seed, bool)
                and self.compromise_seed >= 0, "compromise_seed", "an integer >= 0", self.compromise_seed)
        # kernel: a plugin reference, validated and built by the core


class Memory:
    """Per respondent: the posteriors of its last two publications with their times, and the last
    prior it was given. Rows are slots in append-only arrays with spare capacity (a new respondent
    gets the next free slot; growing copies the arrays only when the capacity is used up, doubling
    it), found through the sorted ids and the slot of each (``ids``, ``slot``): the time of adding
    respondents is that of the new ones, not of the whole memory (issue #28)."""

    NEVER = np.iinfo(np.int64).min // 2

    def __init__(self, m: int):
        self.m = m
        self.ids = np.empty(0, dtype=np.int64)  # sorted
        self.slot = np.empty(0, dtype=np.int64)  # row of each sorted id
        self.size = 0
        self.post = np.zeros((0, 2, m))  # [:, 0] the last posterior, [:, 1] the one before
        self.time = np.full((0, 2), self.NEVER, dtype=np.int64)
        self.prior = np.zeros((0, m))
        self.has_prior = np.zeros(0, dtype=bool)

    def _reserve(self, need: int) -> None:
        cap = len(self.time)
        if need <= cap:
            return
        cap = max(need, 2 * cap) if cap else 2 * need  # np.zeros pages unused rows lazily
        size, m = self.size, self.m
        post, prior = np.zeros((cap, 2, m)), np.zeros((cap, m))
        time, has_prior = np.full((cap, 2), self.NEVER, dtype=np.int64), np.zeros(cap, dtype=bool)
        post[:size], prior[:size] = self.post[:size], self.prior[:size]
        time[:size], has_prior[:size] = self.time[:size], self.has_prior[:size]
        self.post, self.prior, self.time, self.has_prior = post, prior, time, has_prior

    def rows(self, ids: np.ndarray, add: bool = False) -> np.ndarray:
        """Row of each id (-1 when unknown; with ``add``, unknown ids get new rows)."""
        ids = np.asarray(ids, dtype=np.int64)
        if add:
            new = np.setdiff1d(ids, self.ids)
            if len(new):
                grow = len(new)
                self._reserve(self.size + grow)
                slots = np.arange(self.size, self.size + grow, dtype=np.int64)
                self.size += grow
                merged = np.concatenate([self.ids, new])
                order = np.argsort(merged, kind="stable")
                self.ids = merged[order]
                self.slot = np.concatenate([self.slot, slots])[order]
        if len(self.ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return np.where(self.ids[pos] == ids, self.slot[pos], -1)


class BayFrameKnowledge(Knowledge):
    """RPD (BayFrame Eqs. 3–4): PD_sv for new respondents, the d-step revision of their last posteriors."""

    Params = BayFrameKnowledgeParams

    def __init__(self, params: BayFrameKnowledgeParams | None = None):
        super().__init__(params)
        self.memory: Memory | None = None
        self._tables: dict[int, list[np.ndarray]] = {}

    # -- sources ------------------------------------------------------------------------------
    def model(self, release: Release) -> Any:
        model = (release.truth or {}).get("model")
        if model is None:
            raise DataError(
                "knowledge 'bayframe': sv=model and correlation=model need the data set's ground-truth model "
                "(release.truth['model']; the 'bkseq' data set has one); for other data sets use "
                "knowledge.sv=kernel (or uniform) and knowledge.correlation=uniform"
            )
        if len(model.values) != release.n_values:
            raise DataError(f"knowledge 'bayframe': the model knows {len(model.values)} sensitive values, "
                            f"the release has {release.n_values}")
        return model

    def sv_prior(self, release: Release) -> np.ndarray:
        """PD_sv ``[n, m]`` of every record of ``release``."""
        n, m = len(release), release.n_values
        if self.params.sv == "uniform":
            return np.full((n, m), 1.0 / m)
        if self.params.sv == "kernel":
            return np.asarray(self.params.kernel.prior(release), dtype=float)
        prior = np.asarray(self.model(release).bk_sv(release.qi, release.t), dtype=float)
        if prior.shape != (n, m):
            raise DataError(f"knowledge 'bayframe': model.bk_sv returned shape {prior.shape}, expected {(n, m)}")
        return prior

    def classes(self, release: Release) -> np.ndarray:
        if self.params.correlation == "model":
            model = self.model(release)
            if int(getattr(model, "n_seq_classes", 1)) > 1:
                return np.asarray(model.seq_class(release.qi), dtype=np.int64)
        return np.zeros(len(release), dtype=np.int64)

    def tables(self, release: Release, cls: int) -> list[np.ndarray]:
        """``[PD1_cor, PD2_cor]`` (up to ``steps``) of transition class ``cls``: shapes ``[m, m]``
        and ``[m, m, m]``, oldest value first, rows conditioned on the value being observed."""
        if cls in self._tables:
            return self._tables[cls]
        m = release.n_values
        if self.params.correlation == "uniform":
            out = [np.full((m,) * (j + 1), 1.0 / m) for j in range(1, self.params.steps + 1)]
        else:
            model = self.model(release)
            by_class = int(getattr(model, "n_seq_classes", 1)) > 1
            observed = getattr(model, "observed", None)
            out = []
            for j in range(1, self.params.steps + 1):
                t = np.asarray(model.bk_seq(j, seq_class=cls) if by_class else model.bk_seq(j), dtype=float)
                if t.shape != (m,) * (j + 1):
                    raise DataError(f"knowledge 'bayframe': model.bk_seq({j}) has shape {t.shape}, expected {(m,) * (j + 1)}")
                if observed is not None:  # the respondent is in the release: weigh by P(observed | value)
                    t = t * np.asarray(observed, dtype=float)
                    total = t.sum(axis=-1, keepdims=True)
                    t = np.divide(t, total, out=np.zeros_like(t), where=total > 0)
                out.append(t)
        self._tables[cls] = out
        return out

    # -- the Knowledge contract ---------------------------------------------------------------
    def prior(self, release: Release) -> np.ndarray:
        """RPD ``[n, m]`` for every record of ``release`` (see the module docstring)."""
        m = release.n_values
        if self.memory is None:
            self.memory = Memory(m)
        mem = self.memory
        beliefs = self.sv_prior(release)
        sv = beliefs.copy()
        rows = mem.rows(release.respondent)
        known = rows >= 0
        # seen before but not revisable here (absent="last_prior", or never published): the last RPD it was given
        keep = np.zeros(len(release), dtype=bool)
        keep[known] = mem.has_prior[rows[known]]
        last_t = np.full(len(release), np.iinfo(np.int64).min // 2, dtype=np.int64)
        prev_t = last_t.copy()
        last_t[known] = mem.time[rows[known], 0]
        prev_t[known] = mem.time[rows[known], 1]
        fresh = known & (last_t == release.t - 1)
        if self.params.absent == "revised":  # also revise those last published before t-1 (as at last_t + 1)
            fresh = known & (last_t > np.iinfo(np.int64).min // 2) & (last_t < release.t)
        beliefs[keep & ~fresh] = mem.prior[rows[keep & ~fresh]]
        if fresh.any():
            classes = self.classes(release)
            two = fresh & (prev_t == last_t - 1) & (self.params.steps == 2)
            for cls in np.unique(classes[fresh]):
                tables = self.tables(release, int(cls))
                for use_two in (False, True):
                    sel = np.flatnonzero(fresh & (classes == cls) & (two == use_two))
                    if len(sel) == 0:
                        continue
                    last = mem.post[rows[sel], 0]
                    if not use_two:
                        revised = last @ tables[0]
                    elif self.params.revision == "literal":
                        oldest = mem.post[rows[sel], 1]
                        # Σ_{a,b} PB(a, t-2) PD1(b|a) PD2(s|a,b)
                        revised = np.einsum("ra,ab,abs->rs", oldest, tables[0], tables[1], optimize=True)
                    else:
                        oldest = mem.post[rows[sel], 1]
                        revised = np.einsum("ra,rb,abs->rs", oldest, last, tables[1], optimize=True)
                    total = revised.sum(axis=1, keepdims=True)
                    ok = total[:, 0] > 0
                    revised = np.where(ok[:, None], revised / np.where(ok, total[:, 0], 1.0)[:, None], sv[sel])
                    beliefs[sel] = revised
        # remember what each respondent was given (its "last computed RPD")
        rows = mem.rows(release.respondent, add=True)
        mem.prior[rows] = beliefs
        mem.has_prior[rows] = True
        if self.params.sigma > 0:  # the publisher's compromised records: CR_RPD (Eq. 5)
            hit = np.flatnonzero(compromised(release.respondent, release.t, self.params.sigma, self.params.compromise_seed))
            return cascaded_prior(beliefs, hit, release.sensitive[hit], self.params.cr)
        return beliefs

    def revise(self, view: PublicView, posterior: np.ndarray | None, respondent: np.ndarray) -> None:
        """Store PB(v, ·, t) for each published respondent (counterfeits, id < 0, skipped).
        ``posterior=None`` (no estimator): the group's value frequencies."""
        m = view.schema.sensitive.size
        respondent = np.asarray(respondent, dtype=np.int64)
        if posterior is None:  # the group's value frequencies, found through the view's candidates
            counts = view.group_counts().astype(float)
            freq = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
            rows, found = rows_of(view.respondent, respondent, match_negative=True)  # (ids < 0 skipped below)
            posterior = np.where(found[:, None], freq[view.group[rows]], 1.0 / m)
        posterior = np.asarray(posterior, dtype=float)
        if posterior.shape != (len(respondent), m):
            raise ValueError(f"posterior must have shape {(len(respondent), m)}; got {posterior.shape}")
        if self.memory is None:
            self.memory = Memory(m)
        real = respondent >= 0
        rows = self.memory.rows(respondent[real], add=True)
        mem = self.memory
        moved = mem.time[rows, 0] != view.t  # a second posterior in the same release replaces the first
        mem.post[rows[moved], 1] = mem.post[rows[moved], 0]
        mem.time[rows[moved], 1] = mem.time[rows[moved], 0]
        mem.post[rows, 0] = posterior[real]
        mem.time[rows, 0] = view.t
