"""Ground-truth (DK) knowledge must not exclude what actually happened.

The attack matrix `matrix/bkseq` shows the DK adversaries (``sequential``, ``knowledge: dk``) giving
posterior exactly 0 to the TRUE value of ~9-14 records per release (``true_value_ruled_out``).
Root cause (traced in-process): bkseq's BK_sv (``BKseqModel.bk_sv``) was the law of an ADMISSION
exam, with probability 0 on ``deceased`` and ``discharged``. But the attacker uses BK_sv for every
FIRST APPEARANCE (JS-reduce §4.5: "no tuples of r appeared in H*_{i-1} ... BK^sv is used"), and a
patient admitted before view 1 (burn-in) who had no exam in the earlier views is first seen with
its death or discharge, which is always recorded. Its prior was 0 on its true value; the Ω-estimate
then gave it posterior 0 whenever another respondent of the group (a revised one) had mass on that
value. (The snapshot adversary escaped only through the Ω-estimate's degenerate case: when nobody in
the group has mass on a published value it is shared evenly.)
Fixed: ``bk_sv(qi, t)`` is now the exact law of a first tuple in view t (admission exams mixed with
the first observed tuple of the patients admitted before view 1; ``test_jsreduce_bkseq_first_appearance.py``).

A second, minor channel (3-step revision only): Algorithm 3's P(λ) = Π_j PK_j (§5.3) multiplies
posteriors that already contain each other, so a wrong belief's mass on the truth decays like
10^(-tribonacci) and underflows float64 to exactly 0 after ~20 releases.
"""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from cdpbench import runner
from cdpbench_jsreduce.datasets.bkseq import BKseq, BKseqParams
from cdpbench_jsreduce.sequential_knowledge import revised_prior


def test_bk_sv_gives_every_first_appearance_positive_probability():
    """Every respondent's first tuple in the views must be in the support of BK_sv (the knowledge
    the attacker uses for it), pre-view-1 patients first seen at their discharge/death included."""
    data = BKseq(BKseqParams(releases=4, tuples=1000))
    seen: set[int] = set()
    excluded = []
    for release in data.releases(np.random.default_rng(0)):
        first = np.array([r not in seen for r in release.respondent.tolist()], dtype=bool)
        seen.update(release.respondent.tolist())
        if not first.any():
            continue
        bk = data.model.bk_sv(release.qi[first], release.t)
        p = bk[np.arange(int(first.sum())), release.sensitive[first]]
        values = np.asarray(data.model.values, dtype=object)[release.sensitive[first][p <= 0]]
        excluded += [(release.t, v) for v in values]
    assert excluded == [], f"{len(excluded)} first appearances outside BK_sv's support, e.g. {excluded[:5]}"


def _cfg(steps: int, releases: int = 4, tuples: int = 1000):
    return OmegaConf.create(
        {
            "dataset": {"name": "bkseq", "releases": releases, "tuples": tuples},
            "anonymizer": {"name": "mondrian", "categorical": "taxonomy"},
            "privacy_model": {"name": "l_diversity", "variant": "distinct", "l": 2},
            "knowledge": {"name": "none"},
            "attacker": {"name": "sequential", "knowledge": "dk", "steps": steps, "estimator": "omega", "label": "dk"},
            "extra_attackers": {"snapshot": {"name": "sequential", "knowledge": "bksv", "estimator": "omega"}},
            "metrics": {"belief": {"enabled": True}},
            "seed": 0,
        }
    )


def test_dk1_attacker_never_rules_out_the_true_value():
    """matrix/bkseq in small: Mondrian + distinct 2-diversity, DK 1-step with the Ω-estimate.
    Failed from release 2 on with the admission law as BK_sv (first appearances at
    discharge/death, see the module docstring)."""
    cfg = _cfg(steps=1)
    comp = runner.build(cfg)
    df = runner.run_releases(cfg, comp, progress=False)
    assert (df["snapshot.true_value_ruled_out"] == 0).all()
    ruled_out = df["dk.true_value_ruled_out"]
    assert (ruled_out == 0).all(), f"DK 1-step rules out the truth: {ruled_out.to_dict()}"


@pytest.mark.xfail(
    strict=True,
    reason="property of Algorithm 3 (P(λ) = Π_j PK_j, JS-reduce §5.3) plus float64 underflow: the true "
    "value's revised mass is ~1e-450, a positive number, but is computed as exactly 0",
)
def test_three_step_revision_keeps_a_tiny_but_positive_mass_on_a_possible_history():
    """Three stored posteriors each giving 1e-150 to the (true) value 0 and the rest to value 1; two
    values that stay, of two tracks (a mixed history is impossible). Mathematically RBK(0) = 1e-450 / (1e-450 + ~1) > 0;
    the product of the posteriors underflows, so the value is ruled out (dk3 at releases 20-24 of
    the matrix: respondent 6265, true ``sepsis:no-sirs`` throughout)."""
    m = 2
    pk = np.array([1e-150, 1.0 - 1e-150])
    history = np.broadcast_to(pk, (1, 3, m)).copy()
    # 3-step DK table of two values of different tracks that both stay: T[c,c,c,s] = [c == s]; a
    # history mixing the two tracks is impossible (zero row, as bkseq's tables, Algorithm 5)
    table = np.zeros((m,) * 4)
    for c in range(m):
        table[c, c, c, c] = 1.0
    rbk = revised_prior(history, table)[0]
    assert rbk[0] > 0.0
