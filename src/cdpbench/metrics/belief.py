"""What each adversary's posterior beliefs reveal about the published records.

For a published record of respondent ``r`` (``Publication.owned``: not a counterfeit, not an
ownerless copy) with true sensitive value ``s``
in group ``Q`` (``|Q|`` counts every published tuple of the group, counterfeits included, as the
adversary sees them), let ``p`` be the adversary's posterior of ``r`` on ``s`` and
``a = m(s) / |Q|`` the share of ``s`` in ``Q`` (the belief of an adversary who only counts the
group's values; in an angelized publication ``m(s)`` is the expected count through the buckets,
:meth:`~cdpbench.data.Publication.expected_group_counts`). Averaged over those records:

* ``gain_rho`` — JS-reduce §7.2, the average adversary gain ``rho = mean (p - a) / (1 - a)``
  (signed: negative when background knowledge misleads). A record with ``a = 1`` (its group
  holds only ``s``) has an undefined ratio; it contributes 0, as both beliefs are then 1.
* ``gain_g`` — BayFrame §6.2 eq. 8, ``G = |p - a| / (1 - a)``, and ``|1 - p|`` when ``a = 1``.
  ``G`` lies in [0, max(a, 1 - a) / (1 - a)]: it exceeds 1 only when a posterior falls below
  ``2a - 1`` on a value holding more than half of the group.
* ``confidence`` — the average posterior on the true value, ``mean p`` (in [0, 1]).
* ``single_value_share`` — the share of those records with ``a = 1``, whose group's multiset
  holds only their own value: the records that count 0 in ``gain_rho`` by the convention above
  (JS-reduce §7.2 leaves the ratio undefined there), so that ``gain_rho / (1 -
  single_value_share)`` is the mean gain over the records where it is defined. It depends on the
  publication only, not on the beliefs: it is the same for every attacker that gives a posterior
  for every published real record (as the lab's attackers do), and is still reported with each
  attacker's keys, over the same records as its gains, so each ``gain_rho`` can be read next to it.

Risks beyond averages (attack-matrix issue): ``max_confidence``, the largest posterior on a true
value; ``share_over_50`` and ``share_over_90``, the share of those records whose posterior on
their true value exceeds 0.5 / 0.9.

Certainty and correctness, apart (trust issue): an adversary can be sure and wrong — the
collusion attack intersects a respondent's signatures, and when the value changed in between (an
update) the intersection can be a single value that is not the respondent's. So:

* ``certain`` — how many records the adversary is left with one value for: a posterior of at
  least 0.99 on some value (a one-hot posterior is the case "one value left");
  ``certain_share``, their share of the records;
* ``disclosed`` — how many of those the value is the respondent's true value at this release
  (posterior >= 0.99 on the true value; 0.99 > 0.5, so that value is the one the adversary is
  certain of); ``disclosed_share``, their share of the records. ``certain - disclosed`` are the
  confident wrong inferences;
* ``true_value_ruled_out`` — how many records the posterior gives 0 on the true value: the
  adversary has excluded the truth (a wrong intersection, a join whose assumption fails); a
  narrowing is only an inference when this stays 0.

These are counts of published real records (not of respondents an attack names): only records
have a true value at the release. Attackers leave these names to the core; an attacker's own
``extra`` may not report them (the runner fails a run on a name reported twice).

Posteriors are matched to records by respondent id; records whose respondent the attacker gives
no posterior for are left out (every value is NaN when none is left).

When the attack marks respondents whose value it was given (``AttackResult.given``, e.g.
BayFrame's compromised records, Def. 4), the same three beliefs are also reported over the other
records only (``gain_rho_unknown``, ``gain_g_unknown``, ``confidence_unknown``; BayFrame Fig. 4b)
with ``given_share``, the share of records whose value was given.
"""

from __future__ import annotations

import numpy as np

from ..data import Publication
from ..plugin import AttackResult, Metric, MetricContext

KEYS = ("gain_rho", "gain_g", "confidence", "single_value_share", "max_confidence", "share_over_50", "share_over_90",
        "certain", "certain_share", "disclosed", "disclosed_share", "true_value_ruled_out")
CERTAIN = 0.99  # a posterior at least this high on one value: the adversary is left with that value


def true_value_beliefs(publication: Publication, attack: AttackResult) -> tuple[np.ndarray, np.ndarray]:
    """``(p, a)`` for the published real records the attack has a posterior for."""
    p, a, _ = _beliefs_with_rows(publication, attack)
    return p, a


def _beliefs_with_rows(publication: Publication, attack: AttackResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, a, rows)``: as :func:`true_value_beliefs`, with each record's row in the attack's result
    (``attack.posterior[rows]`` are the records' whole posteriors)."""
    real = publication.owned  # not counterfeits, nor ownerless copies (no respondent, no true value)
    resp = publication.respondent[real]
    s = publication.sensitive[real]
    grp = publication.group[real]
    order = np.argsort(attack.respondent, kind="stable")
    known = attack.respondent[order]
    pos = np.minimum(np.searchsorted(known, resp), max(len(known) - 1, 0))
    found = (known[pos] == resp) if len(known) else np.zeros(len(resp), dtype=bool)
    rows = order[pos[found]]
    p = np.asarray(attack.posterior, dtype=float)[rows, s[found]]
    counts = publication.expected_group_counts()  # the group counts when single-partition
    sizes = publication.group_sizes()
    a = counts[grp[found], s[found]] / sizes[grp[found]]
    return p, a, rows


def gains(p: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-record ``(rho term, G)``; see the module docstring for ``a = 1``."""
    full = a >= 1.0
    denom = np.where(full, 1.0, 1.0 - a)
    rho = np.where(full, 0.0, (p - a) / denom)
    g = np.where(full, np.abs(1.0 - p), np.abs(p - a) / denom)
    return rho, g


class BeliefMetrics(Metric):
    """Adversary gain rho (JS-reduce §7.2), gain G (BayFrame eq. 8), confidence, the a = 1 share, the risks beyond averages and certain vs correct disclosures, per attacker.

    Keys, for every attacker label ``L`` whose result has a posterior: ``L.gain_rho``,
    ``L.gain_g``, ``L.confidence`` and ``L.single_value_share`` (the share of records with
    ``a = 1``, which count 0 in ``gain_rho``; module docstring), the risks, and the certain /
    disclosed / ruled-out counts (module docstring); with ``given`` marked, also
    ``L.given_share`` and the three beliefs over the other records (``..._unknown``).
    """

    uses_history = False  # reads no ctx.history: this release's publication and attacks only (issue #28: the run keeps no more than it needs)
    reads_counts = True  # a counted publication keeps its records as the hidden truth: p and a unchanged (issue #29)

    def compute(self, ctx: MetricContext) -> dict[str, float]:
        out: dict[str, float] = {}
        for label, attack in ctx.attacks.items():
            if attack.posterior is None:
                continue
            p, a, rows = _beliefs_with_rows(ctx.publication, attack)
            if len(p) == 0:
                out.update({f"{label}.{key}": np.nan for key in KEYS})
                continue
            rho, g = gains(p, a)
            out[f"{label}.gain_rho"] = float(rho.mean())
            out[f"{label}.gain_g"] = float(g.mean())
            out[f"{label}.confidence"] = float(p.mean())
            out[f"{label}.single_value_share"] = float(np.mean(a >= 1.0))
            out[f"{label}.max_confidence"] = float(p.max())
            out[f"{label}.share_over_50"] = float(np.mean(p > 0.5))
            out[f"{label}.share_over_90"] = float(np.mean(p > 0.9))
            n = len(p)
            certain = int(np.sum(np.asarray(attack.posterior, dtype=float)[rows].max(axis=1) >= CERTAIN))
            disclosed = int(np.sum(p >= CERTAIN))
            out[f"{label}.certain"] = float(certain)
            out[f"{label}.certain_share"] = certain / n
            out[f"{label}.disclosed"] = float(disclosed)
            out[f"{label}.disclosed_share"] = disclosed / n
            out[f"{label}.true_value_ruled_out"] = float(np.sum(p <= 0.0))
            if attack.given is not None:
                given = np.asarray(attack.given, dtype=bool)[rows]
                rest = ~given
                out[f"{label}.given_share"] = float(given.mean())
                for key, v in (("gain_rho", rho), ("gain_g", g), ("confidence", p)):
                    out[f"{label}.{key}_unknown"] = float(v[rest].mean()) if rest.any() else np.nan
        return out
