"""BKseq: a synthetic re-creation of the medical-exam data set of JS-reduce (§7.1).

Riboni, Pareschi, Bettini, "JS-Reduce: Defending your data from sequential background knowledge
attacks", IEEE TDSC 9(3), 2012, §7.1: weekly views of the results of medical exams, 24 views of
5,000 tuples, 16,160 individuals in at least one view, one exam per person per week; QI age
45–74, gender 1–2, weight 60–89; the sensitive attribute Ex-res holds stages of four diseases
plus "deceased" and "discharged"; BK_sv differs across 18 age × weight × gender classes and the
stage transitions depend on the past evolution of the disease (attacks use 1-, 2- and 3-step
BK_seq). The original file is not available (``shared/datasets/bkseq/TRANSITIONS.md``), so the
process is re-synthesised from the published numbers collected there. Every number below says
where it comes from: (A) a published number (with its source), (C) an assumption of ours.

Sensitive domain (19 values, codes in this order)
    liver (5, Remis 2002's outcome stages): chronic hepatitis C (fibrosis F0–F3), compensated
    cirrhosis, decompensated cirrhosis, hepatocellular carcinoma, liver transplant; HIV (4, the
    stages of the Markov model of Longini et al. 1989 — the numbers TRANSITIONS.md found;
    JS-reduce cites Di Biase 2007, whose tables were not retrieved): 1 infected antibody-negative,
    2 asymptomatic, 3 pre-AIDS, 4 AIDS; Alzheimer's disease (3, CDR): mild, moderate, severe;
    sepsis (5): no SIRS (recovering), SIRS, sepsis, severe sepsis, septic shock; then deceased,
    discharged. The paper's text reads "17 different values associated to stages ... as well as
    two sensitive values to describe the deceased and discharged events", i.e. 5+4+3+5 = 17 stages
    + 2 = **19 values**; the project issue says "17 sensitive values" — we follow the paper.

Weekly disease transitions, first order (``weekly_disease_matrix``; rows: a living stage, columns:
the 17 stages + deceased; other tracks 0: an individual keeps one disease track)
    * Liver (A, HEP-SIM Table 1, annual): F4→DC 0.039, F4→HCC 0.014, DC→HCC 0.068, DC→death 0.182
      (first-year value), HCC→death 0.427, transplant→death 0.116 (first-year value). Chronic →
      cirrhosis (derived, MED): one exit with the hazard 1/Σ mean sojourns of F0..F3 (HEP-SIM
      F0→F1 0.117, F1→F2 0.085, F2→F3 0.120, F3→F4 0.116: 35.2 years in all, 0.028 a year).
      DC→transplant 0.05 and HCC→transplant 0.04 a year (C, LOW: the order of magnitude used by
      published HCV cost models; no number in the documented sources). Deaths from other causes
      are ignored (C).
    * HIV (A, Longini et al.: mean waiting times 2.2, 52.6, 62.9, 23.6 months in stages 1–4):
      stage k → k+1 (stage 4 → deceased) with weekly probability 1 − exp(−7 / mean days)
      (exponential sojourn, C).
    * Alzheimer (A, Spackman et al. 2012, NACC-UDS, annual): mild → moderate 0.158 (by
      subtraction), → severe 0.013, → death 0.055; moderate → mild 0.07, → severe 0.214 (by
      subtraction), → death 0.215; severe → death 0.480.
    * Annual rows become weekly rows by competing constant hazards (C): a row with annual exit
      probabilities p_j leaves the stage with weekly probability 1 − (1 − Σp_j)^(1/52), split in
      proportion to p_j (TRANSITIONS.md §2(C), generalised to competing exits).
    * Sepsis (A, Rangel-Frausto et al. 1998, 1-day Markov model): stay 0.65 / 0.68 / 0.61 in
      sepsis / severe sepsis / septic shock; sepsis → severe 0.09, severe → shock 0.026; death
      0.005 / 0.009 / 0.079. (C): the rest of each row (0.255 / 0.285 / 0.311) goes one stage down
      (the abstract does not split it; skipping stages is not modelled); SIRS stays with
      probability 0.65 (the published stays average 0.65), moves to sepsis with 0.0107 a day (26 %
      of SIRS patients developed sepsis over the 28-day follow-up of the companion JAMA 1995
      cohort, A: 1 − 0.74^(1/28)), dies with 0.0026 (7 % 28-day SIRS mortality, LOW) and otherwise
      recovers (no SIRS); no SIRS relapses to SIRS with 0.05 a day, no death (C, LOW). The weekly
      matrix is the 7th power of this daily matrix (Markov, TRANSITIONS.md §1(C)). Consequence
      of the published 1-day stays (mean sojourn ≈ 3 days): most sepsis patients are found
      recovering ("no SIRS") one week later.

Dependence on the last 3 results (max_order = 3, ``transition_tensor``; C — the paper says the
probabilities depend "on the past evolution of the disease", the sources give no number)
    In the window (x, y, z) of an individual's last three values (z = the latest), count the
    progressions (a move to a later stage of the same track) and regressions among x→y and y→z.
    *Momentum*: the weekly probability of moving on to any later stage from z is multiplied by
    ``momentum ** progressions`` and that of moving back to an earlier stage by ``momentum **
    regressions`` (default momentum 1.5: after one recent progression the chance of progressing
    again is 1.5 times the first-order one, after two 2.25 times; 1.0 gives a first-order chain).
    The extra mass comes out of the probability of staying in z, at most half of it (the extras
    are scaled down when they would exceed it), so every row keeps the first-order support; death
    and discharge probabilities are not changed. A window reaches back to an individual's first
    value only: an individual seen k < 3 times has the window padded by repeating its first value
    (x = y = first value), i.e. it arrives as if it had been stable in its entry stage — so the
    exact transition of a respondent with one past value a is ``bk_seq(3)[a, a, a]`` and with two
    past values (a, b) ``bk_seq(3)[a, a, b]`` (not ``bk_seq(1)``/``bk_seq(2)``, which are
    population marginals).

Discharge and arrivals (C; TRANSITIONS.md §5.2: the sources give no discharge rate)
    Every living individual who survives the week is discharged with one weekly probability
    ``discharge`` (all stages alike): the tuple of that week reads "discharged". A tuple reading
    "deceased" or "discharged" is the individual's last one (absorbing: it leaves all later
    views). **Every active individual has an exam every week**, so an individual's tuples are
    consecutive views, and the individuals who left are replaced by new ones: every view has
    exactly ``tuples`` tuples (the paper: "24 views, each one containing 5,000 tuples"). A
    deceased/discharged tuple fills its slot in the view where it appears; the next view gives
    the slot to a new individual. View 1 holds ``tuples`` new individuals (the study starts
    there; nobody has a history yet), so view 2 has no newcomers. The discharge probability is
    solved (``calibrate_discharge``, on the exact expected counts): by default on the paper's
    history — 16,160 expected individuals over 24 views of 5,000, i.e. 11,160 newcomers in views
    3..24 (≈ 507 a week) — which gives a weekly discharge probability of 0.1084
    (``BKseq().model.discharge``) whatever ``releases`` and ``tuples`` are (a 12-view run is the
    first 12 weeks of the same process); with ``individuals`` set, on the run's own views. About
    0.2–0.4 % of a view's tuples read "deceased" (1.2 % in view 2: septic shock) and 9.5–10.5 %
    "discharged". Over 20 seeds the number of
    individuals was 16,141 ± 70 (mean ± sd).

New individuals and BK_sv (C; ``bk_sv_table``)
    QI drawn independently and uniformly: age 45..74, gender "1"/"2" (ISO/IEC 5218: 1 = male,
    2 = female), weight 60..89 (integers, fixed per individual for the 24 weeks). The first value of
    a new individual (its disease track and entry stage) depends on its class: age band (45–54,
    55–64, 65–74) × weight band (60–69, 70–79, 80–89) × gender (the paper's 18 classes). Track
    weights (relative, multiplied): liver 1.0 × age (1.2, 1.0, 0.7) × male 1.5 × weight (0.9, 1.0,
    1.2) — HCV concentrated in the 1945–65 birth cohorts and in men, heavier patients progress
    more; HIV 1.0 × age (1.6, 0.9, 0.4) × male 2.5 × weight (1.4, 1.0, 0.7) — younger, mostly
    male patients, wasting; Alzheimer 1.0 × age (0.15, 0.6, 1.8) × female 1.4 × weight (1.2, 1.0,
    0.8) — steep age gradient, more women, weight loss; sepsis 1.0 × age (0.6, 1.0, 1.6) × male
    1.2 × weight (1.2, 1.0, 1.1) — incidence rises with age, slightly more men, U-shaped in weight.
    Entry stage within the track: base distribution liver (0.55, 0.25, 0.08, 0.06, 0.06), HIV
    (0.05, 0.45, 0.35, 0.15), Alzheimer (0.50, 0.35, 0.15), sepsis (0.05, 0.69, 0.08, 0.14, 0.04)
    — sepsis: the highest stage reached in the JAMA 1995 SIRS cohort (26 % developed sepsis, 18 %
    severe sepsis, 4 % septic shock, nested: SIRS only 74 %, sepsis 8 %, severe 14 %, shock 4 %),
    5 points of the SIRS share entering as recovering —, each stage weight
    multiplied by 1.25^(severity × age band) (older patients arrive at later stages) and, for the
    liver, by 1.2^severity for men (faster fibrosis in men). Severity ranks: liver (0, 1, 2, 3, 0
    — transplant not tilted), HIV (0, 1, 2, 3), Alzheimer (0, 1, 2), sepsis (0, 0, 1, 2, 3).
    Transitions do not depend on the QI (the sources' age/sex effects on transitions — men die
    more in mild AD, fibrosis progresses faster with age — are left out), so that BK_seq, which
    JS-reduce defines without QI (Def. 2), is exact.

Exposed knowledge (``BKseqModel``, the :class:`~cdpbench_jsreduce.model.SequenceModel` of every
release's ``truth["model"]``)
    ``bk_sv(qi)``: the exact class distribution of a first value. ``bk_seq(3)``: the exact
    generator transition on a 3-value window (histories the generator cannot produce — values of
    two tracks, a value after "deceased"/"discharged", a move the first-order matrix forbids —
    have zero rows, as in Algorithm 5). ``bk_seq(2)`` and ``bk_seq(1)``: its exact marginals, P(next | last 2 / 1
    values) pooled over all transitions of a run of ``releases`` views (the expected number of
    individuals in every history state is propagated week by week — the process is linear in
    expectation — and each history's rows are weighted by its expected count; histories with
    fewer real values than steps count only in the shorter tables, as when Algorithm 5 mines a
    corpus). ``corpus(views, tuples, seed)``: an external history of the same process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Iterator

import numpy as np
import pandas as pd

from cdpbench.data import Release
from cdpbench.errors import DataError, require
from cdpbench.plugin import Dataset
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

# ---------------------------------------------------------------------------- the domain
VALUES: tuple[str, ...] = (
    "liver:chronic-hepatitis",
    "liver:compensated-cirrhosis",
    "liver:decompensated-cirrhosis",
    "liver:hepatocellular-carcinoma",
    "liver:transplant",
    "hiv:1-acute",
    "hiv:2-asymptomatic",
    "hiv:3-pre-aids",
    "hiv:4-aids",
    "alzheimer:mild",
    "alzheimer:moderate",
    "alzheimer:severe",
    "sepsis:no-sirs",
    "sepsis:sirs",
    "sepsis:sepsis",
    "sepsis:severe-sepsis",
    "sepsis:septic-shock",
    "deceased",
    "discharged",
)
N_VALUES = len(VALUES)  # 19
LIVING = 17  # codes 0..16 are disease stages
DECEASED = 17
DISCHARGED = 18
TRACKS: dict[str, tuple[int, ...]] = {
    "liver": (0, 1, 2, 3, 4),
    "hiv": (5, 6, 7, 8),
    "alzheimer": (9, 10, 11),
    "sepsis": (12, 13, 14, 15, 16),
}
#: track index (0..3) of every living stage
TRACK_OF = np.repeat(np.arange(4), [len(c) for c in TRACKS.values()])

AGE = (45, 74)
WEIGHT = (60, 89)
GENDERS = ("1", "2")  # ISO/IEC 5218: 1 = male, 2 = female
N_CLASSES = 18  # 3 age bands x 3 weight bands x 2 genders

#: the paper's history: 24 views of 5,000 tuples, 16,160 individuals (calibrates the default discharge)
PAPER_VIEWS = 24
PAPER_INDIVIDUALS_PER_TUPLE = 16_160 / 5_000

WEEKS_PER_YEAR = 52.0
DAYS_PER_MONTH = 365.25 / 12


def bkseq_schema() -> Schema:
    """QI age (numeric 45..74), gender (categorical "1"/"2", flat taxonomy), weight (numeric
    60..89); sensitive ``exam_result`` (the 19 values of :data:`VALUES`); respondent ``id``."""
    return Schema(
        (
            NumericQI("age", float(AGE[0]), float(AGE[1])),
            CategoricalQI("gender", Taxonomy.flat(GENDERS)),
            NumericQI("weight", float(WEIGHT[0]), float(WEIGHT[1])),
        ),
        Sensitive("exam_result", VALUES, ordered=False),
        respondent="id",
    )


# ---------------------------------------------------------------------------- first-order weekly matrix
def _annual_row(exits: dict[int, float]) -> dict[int, float]:
    """Competing constant hazards: annual exit probabilities -> weekly ones (same split)."""
    total = sum(exits.values())
    weekly = 1.0 - (1.0 - total) ** (1.0 / WEEKS_PER_YEAR)
    return {dest: weekly * p / total for dest, p in exits.items()}


def _fibrosis_to_cirrhosis_annual() -> float:
    """HEP-SIM F0->F1 .. F3->F4 annual probabilities -> one chronic -> cirrhosis annual probability
    with the hazard 1 / (sum of the mean sojourns)."""
    years = sum(-1.0 / np.log1p(-p) for p in (0.117, 0.085, 0.120, 0.116))
    return float(1.0 - np.exp(-1.0 / years))


def sepsis_daily_matrix() -> np.ndarray:
    """``[6, 6]`` daily matrix over (no SIRS, SIRS, sepsis, severe sepsis, septic shock, death)."""
    to_sepsis = 1.0 - (1.0 - 0.26) ** (1.0 / 28)  # 26 % of SIRS patients developed sepsis in 28 days
    sirs_death = 1.0 - (1.0 - 0.07) ** (1.0 / 28)  # 7 % 28-day SIRS mortality (LOW)
    P = np.zeros((6, 6))
    P[0, :2] = (0.95, 0.05)  # assumption: relapse to SIRS 0.05 a day, no death
    P[1] = (1.0 - 0.65 - to_sepsis - sirs_death, 0.65, to_sepsis, 0.0, 0.0, sirs_death)
    P[2] = (0.0, 1.0 - 0.65 - 0.09 - 0.005, 0.65, 0.09, 0.0, 0.005)  # Rangel-Frausto 1998
    P[3] = (0.0, 0.0, 1.0 - 0.68 - 0.026 - 0.009, 0.68, 0.026, 0.009)
    P[4] = (0.0, 0.0, 0.0, 1.0 - 0.61 - 0.079, 0.61, 0.079)
    P[5, 5] = 1.0
    return P


def weekly_disease_matrix() -> np.ndarray:
    """``[17, 18]``: P(next week's stage or death | this week's stage), first order, no discharge.

    Rows sum to 1; entries outside an individual's track are 0 (see the module docstring for
    every number and its source)."""
    D = np.zeros((LIVING, LIVING + 1))
    liver = {
        0: {1: _fibrosis_to_cirrhosis_annual()},
        1: {2: 0.039, 3: 0.014},
        2: {3: 0.068, DECEASED: 0.182, 4: 0.05},
        3: {DECEASED: 0.427, 4: 0.04},
        4: {DECEASED: 0.116},
    }
    alzheimer = {
        9: {10: 1.0 - 0.774 - 0.055 - 0.013, 11: 0.013, DECEASED: 0.055},
        10: {9: 0.07, 11: 1.0 - 0.501 - 0.215 - 0.07, DECEASED: 0.215},
        11: {DECEASED: 0.480},
    }
    for stage, exits in {**liver, **alzheimer}.items():
        for dest, p in _annual_row(exits).items():
            D[stage, dest] = p
    hiv_months = (2.2, 52.6, 62.9, 23.6)  # Longini et al.: mean waiting time per stage
    for k, months in enumerate(hiv_months):
        stage = 5 + k
        D[stage, stage + 1 if k < 3 else DECEASED] = 1.0 - np.exp(-7.0 / (months * DAYS_PER_MONTH))
    week = np.linalg.matrix_power(sepsis_daily_matrix(), 7)
    sepsis = list(TRACKS["sepsis"]) + [DECEASED]
    D[np.ix_(TRACKS["sepsis"], sepsis)] = week[:5]
    for stage in range(LIVING):
        if stage not in TRACKS["sepsis"]:
            D[stage, stage] = 1.0 - D[stage].sum()
    return D


# ---------------------------------------------------------------------------- the 3-step transition
def transition_tensor(disease: np.ndarray, momentum: float, discharge: float) -> np.ndarray:
    """``[19, 19, 19, 19]``: P(next value | window x, y, z), the generator's exact transition.

    ``disease`` is :func:`weekly_disease_matrix`; the momentum rule and the discharge are those of
    the module docstring. Histories the generator cannot produce get uniform rows here, so that
    sampling never meets an empty row; :meth:`BKseqModel.bk_seq` exposes them as zero rows."""
    m, L = N_VALUES, LIVING
    x, y, z = np.meshgrid(np.arange(L), np.arange(L), np.arange(L), indexing="ij")
    track = TRACK_OF
    possible = (track[x] == track[z]) & (track[y] == track[z]) & (disease[x, y] > 0) & (disease[y, z] > 0)
    up = (y > x).astype(int) + (z > y).astype(int)
    down = (y < x).astype(int) + (z < y).astype(int)
    stage = np.arange(L)
    same = track[:, None] == track[None, :]  # [from, to] among living stages
    later = np.zeros((L, L + 1), bool)
    earlier = np.zeros((L, L + 1), bool)
    later[:, :L] = same & (stage[None, :] > stage[:, None])
    earlier[:, :L] = same & (stage[None, :] < stage[:, None])
    rows = disease[z]  # [L, L, L, L+1]
    prog_mask, reg_mask = later[z], earlier[z]
    prog = (rows * prog_mask).sum(-1)
    reg = (rows * reg_mask).sum(-1)
    stay = disease[z, z]
    gain_p = momentum**up - 1.0
    gain_r = momentum**down - 1.0
    extra = prog * gain_p + reg * gain_r
    cap = stay / 2.0
    scale = np.where(extra > cap, cap / np.where(extra > 0, extra, 1.0), 1.0)
    rows = rows * (1.0 + prog_mask * (gain_p * scale)[..., None] + reg_mask * (gain_r * scale)[..., None])
    rows[x, y, z, z] = stay - extra * scale
    full = np.full((m, m, m, m), 1.0 / m)
    rule = np.empty((L, L, L, m))
    rule[..., :L] = rows[..., :L] * (1.0 - discharge)
    rule[..., DECEASED] = rows[..., L]
    rule[..., DISCHARGED] = discharge * (1.0 - rows[..., L])
    sub = full[:L, :L, :L]
    sub[possible] = rule[possible]
    return full


# ---------------------------------------------------------------------------- BK_sv
def qi_class(qi: np.ndarray) -> np.ndarray:
    """Class 0..17 of QI rows (age, gender code 0/1, weight): ``age_band * 6 + weight_band * 2 +
    gender`` with bands of 10 values (45–54, 55–64, 65–74; 60–69, 70–79, 80–89)."""
    qi = np.asarray(qi, dtype=float)
    if qi.ndim != 2 or qi.shape[1] != 3:
        raise DataError(f"bkseq: QI rows must have shape [n, 3] (age, gender, weight); got {qi.shape}")
    age, gender, weight = qi[:, 0], qi[:, 1], qi[:, 2]
    bad = (age < AGE[0]) | (age > AGE[1]) | (weight < WEIGHT[0]) | (weight > WEIGHT[1]) | ~np.isin(gender, (0, 1))
    if bad.any():
        raise DataError(
            f"bkseq: {int(bad.sum())} QI row(s) outside the domain (age {AGE[0]}..{AGE[1]}, gender code 0/1, "
            f"weight {WEIGHT[0]}..{WEIGHT[1]}), e.g. {qi[bad][0].tolist()}"
        )
    age_band = ((age - AGE[0]) // 10).astype(np.int64)
    weight_band = ((weight - WEIGHT[0]) // 10).astype(np.int64)
    return age_band * 6 + weight_band * 2 + gender.astype(np.int64)


def bk_sv_table() -> np.ndarray:
    """``[18, 19]``: P(first value | class), class as in :func:`qi_class` (see the docstring)."""
    track_age = np.array([[1.2, 1.0, 0.7], [1.6, 0.9, 0.4], [0.15, 0.6, 1.8], [0.6, 1.0, 1.6]])
    track_weight = np.array([[0.9, 1.0, 1.2], [1.4, 1.0, 0.7], [1.2, 1.0, 0.8], [1.2, 1.0, 1.1]])
    track_sex = np.array([[1.5, 1.0], [2.5, 1.0], [1.0, 1.4], [1.2, 1.0]])  # (male, female)
    base = [(0.55, 0.25, 0.08, 0.06, 0.06), (0.05, 0.45, 0.35, 0.15), (0.50, 0.35, 0.15), (0.05, 0.69, 0.08, 0.14, 0.04)]
    severity = [(0, 1, 2, 3, 0), (0, 1, 2, 3), (0, 1, 2), (0, 0, 1, 2, 3)]
    table = np.zeros((N_CLASSES, N_VALUES))
    for a in range(3):
        for w in range(3):
            for g in range(2):
                cls = a * 6 + w * 2 + g
                weights = track_age[:, a] * track_weight[:, w] * track_sex[:, g]
                weights = weights / weights.sum()
                for k, codes in enumerate(TRACKS.values()):
                    sev = np.asarray(severity[k], dtype=float)
                    stage = np.asarray(base[k]) * 1.25 ** (sev * a)
                    if k == 0 and g == 0:
                        stage = stage * 1.2**sev
                    table[cls, list(codes)] = weights[k] * stage / stage.sum()
    return table


# ---------------------------------------------------------------------------- expected history counts
@dataclass
class HistoryCounts:
    """Expected counts, per unit of view size, over a run of ``views`` views.

    ``pairs[z, s]`` / ``triples[y, z, s]``: expected transitions from a last value z (last two
    values y, z; only individuals with at least two values) to s; ``individuals``: expected number
    of individuals over the run per tuple of a view."""

    pairs: np.ndarray
    triples: np.ndarray
    individuals: float


def expected_history_counts(T: np.ndarray, entry: np.ndarray, views: int) -> HistoryCounts:
    """Propagate the expected number of individuals in each history state week by week.

    States: one value seen (window padded to (a, a, a)), two seen ((a, a, b)), three or more
    ((x, y, z)). Individuals with a living value move on by ``T``; a deceased/discharged tuple
    still fills its slot in the view where it appears, and the next view gives that slot to a new
    individual whose first value is distributed as ``entry`` (the QI-averaged BK_sv) — what the
    simulation's replacement does in expectation (view 1 has no leavers, so view 2 no newcomers).
    View size = 1."""
    L = LIVING
    T = T[:L, :L, :L]  # only living windows occur
    diag = np.arange(L)
    t1 = T[diag, diag, diag]  # [L, m]: window (z, z, z)
    t2 = T[diag[:, None], diag[:, None], diag[None, :]]  # [L, L, m]: window (y, y, z)
    c1 = entry[:L].copy()
    c2 = np.zeros((L, L))
    c3 = np.zeros((L, L, L))
    pairs = np.zeros((N_VALUES, N_VALUES))
    triples = np.zeros((N_VALUES, N_VALUES, N_VALUES))
    individuals = 1.0
    leaving = 0.0  # deceased/discharged tuples of the current view: their slots go to new individuals
    for _ in range(views - 1):
        r1 = c1[:, None] * t1
        r2 = c2[..., None] * t2
        r3 = np.einsum("xyz,xyzs->yzs", c3, T)
        pairs[:L] += r1 + r2.sum(0) + r3.sum(0)
        triples[:L, :L] += r2 + r3
        individuals += leaving
        c3 = r3[..., :L] + r2[..., :L]
        c2 = r1[:, :L]
        c1 = leaving * entry[:L]
        leaving = r1[:, L:].sum() + r2[..., L:].sum() + r3[..., L:].sum()
    return HistoryCounts(pairs, triples, float(individuals))


def producible_windows(disease: np.ndarray) -> np.ndarray:
    """``[19, 19, 19]`` bool: the windows (x, y, z) of living stages the generator can produce
    (one track, each step allowed by the weekly matrix) — :func:`transition_tensor`'s mask."""
    L = LIVING
    x, y, z = np.meshgrid(np.arange(L), np.arange(L), np.arange(L), indexing="ij")
    ok = np.zeros((N_VALUES,) * 3, dtype=bool)
    ok[:L, :L, :L] = (TRACK_OF[x] == TRACK_OF[z]) & (TRACK_OF[y] == TRACK_OF[z]) & (disease[x, y] > 0) & (disease[y, z] > 0)
    return ok


def conditional_rows(counts: np.ndarray) -> np.ndarray:
    """Rows of ``counts`` normalized to conditional distributions; a history never produced
    (count 0) keeps a zero row (Algorithm 5, line 10: no probability for an unseen history)."""
    total = counts.sum(-1, keepdims=True)
    return counts / np.where(total > 0, total, 1.0)


class CalibrationError(ValueError):
    """No discharge probability reaches the asked turnover; ``low``/``high`` = the expected
    individuals per tuple of a view with no discharge and with (almost) certain discharge."""

    def __init__(self, low: float, high: float):
        super().__init__(f"expected individuals per view tuple must lie in [{low:.4f}, {high:.4f}]")
        self.low, self.high = low, high


def calibrate_discharge(disease: np.ndarray, momentum: float, entry: np.ndarray, views: int, target: float) -> float:
    """The weekly discharge probability at which the expected number of individuals over ``views``
    views is ``target`` times the view size (root of the exact expected counts). Raises
    :class:`CalibrationError` when no probability in [0, 1) reaches it."""

    def expected(discharge: float) -> float:
        T = transition_tensor(disease, momentum, discharge)
        return expected_history_counts(T, entry, views).individuals

    from scipy.optimize import brentq  # here, not at import: registering plugins must stay fast

    almost_one = 1.0 - 1e-9
    low, high = expected(0.0), expected(almost_one)
    if not (low <= target <= high):
        raise CalibrationError(low, high)
    if target == low:
        return 0.0
    return float(brentq(lambda d: expected(d) - target, 0.0, almost_one, xtol=1e-13, rtol=1e-12))


# ---------------------------------------------------------------------------- the model
@dataclass
class Simulation:
    """One simulated history: per view the respondent ids (increasing) and value codes; per
    individual (id = row) its QI (age, gender code, weight)."""

    ids: list[np.ndarray]
    codes: list[np.ndarray]
    qi: np.ndarray


class BKseqModel:
    """The generator of BKseq and its exact knowledge (a :class:`SequenceModel`).

    Attributes: ``values`` (19 codes), ``max_order = 3``, ``discharge`` (the calibrated weekly
    discharge probability), ``momentum``, ``horizon`` (views over which the 1/2-step marginals are
    pooled), ``expected_individuals_per_tuple`` (over ``horizon`` views),
    ``disease`` (:func:`weekly_disease_matrix`). Arrays returned are read-only views; copy them
    to modify."""

    values: tuple[str, ...] = VALUES
    max_order: int = 3

    def __init__(self, discharge: float, momentum: float = 1.5, horizon: int = 24):
        self.discharge = float(discharge)
        self.momentum = float(momentum)
        self.horizon = int(horizon)
        self.disease = _readonly(weekly_disease_matrix())
        self._sv = bk_sv_table()
        self.entry = _readonly(self._sv.mean(axis=0))  # uniform QI: every class has weight 1/18
        self._sv_cum = np.cumsum(self._sv, axis=1)
        t3 = transition_tensor(self.disease, self.momentum, self.discharge)
        counts = expected_history_counts(t3, self.entry, max(self.horizon, 2))
        seq1 = conditional_rows(counts.pairs)
        seq2 = conditional_rows(counts.triples)
        seq3 = np.where(producible_windows(self.disease)[..., None], t3, 0.0)
        self._seq = {1: _readonly(seq1), 2: _readonly(seq2), 3: _readonly(seq3)}
        self.expected_individuals_per_tuple = counts.individuals
        self._cum = np.cumsum(t3.reshape(-1, N_VALUES), axis=1)
        self._sv = _readonly(self._sv)

    # ------------------------------------------------------------------ SequenceModel
    def bk_sv(self, qi: np.ndarray) -> np.ndarray:
        """BK_sv (Def. 1): ``[n, 19]`` P(first value | class of the QI row) — columns age, gender
        code (0 = "1", 1 = "2"), weight, as in the schema. Deceased/discharged have probability 0."""
        return self._sv[qi_class(qi)]

    def bk_seq(self, steps: int) -> np.ndarray:
        """n-step BK_seq (Def. 2): ``[19] * steps + [19]``; 3 = the exact generator transition,
        1 and 2 = its marginals over the histories of a run of ``horizon`` views (module docstring).
        A history the generator never produces (stages of two tracks, a move the weekly matrix
        forbids, anything after deceased/discharged) has a zero row: it has no next value, as an
        unseen history has none in Algorithm 5 (line 10). Knowledge may back off instead
        (``knowledge.unseen=backoff``)."""
        require(isinstance(steps, (int, np.integer)) and 1 <= steps <= 3, "steps", "1, 2 or 3", steps)
        return self._seq[int(steps)]

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        """An external history of ``views`` views of ``tuples`` tuples from ``default_rng(seed)``:
        ``[individuals, views]`` int64 codes, ``-1`` where the individual has no tuple."""
        require(isinstance(views, (int, np.integer)) and views >= 1, "views", "an integer >= 1", views)
        require(isinstance(tuples, (int, np.integer)) and tuples >= 1, "tuples", "an integer >= 1", tuples)
        sim = self.simulate(int(views), int(tuples), np.random.default_rng(seed))
        out = np.full((len(sim.qi), views), -1, dtype=np.int64)
        for t, (ids, codes) in enumerate(zip(sim.ids, sim.codes)):
            out[ids, t] = codes
        return out

    # ------------------------------------------------------------------ generation
    def simulate(self, views: int, tuples: int, rng: np.random.Generator) -> Simulation:
        """Run the process: vectorized over individuals, one step per week."""
        qi_blocks: list[np.ndarray] = []

        def arrivals(n: int) -> np.ndarray:
            qi = np.column_stack(
                (
                    rng.integers(AGE[0], AGE[1] + 1, n),
                    rng.integers(0, 2, n),
                    rng.integers(WEIGHT[0], WEIGHT[1] + 1, n),
                )
            ).astype(float)
            qi_blocks.append(qi)
            cum = self._sv_cum[qi_class(qi)]
            first = _inverse_cdf(cum, rng.random(n))
            return np.repeat(first[:, None], 3, axis=1)

        ids = np.arange(tuples, dtype=np.int64)
        window = arrivals(tuples)
        next_id = tuples
        out_ids, out_codes = [ids], [window[:, 2].copy()]
        for _ in range(1, views):
            stay = window[:, 2] < LIVING
            ids, window = ids[stay], window[stay]
            flat = (window[:, 0] * N_VALUES + window[:, 1]) * N_VALUES + window[:, 2]
            nxt = _inverse_cdf(self._cum[flat], rng.random(len(ids)))
            window = np.column_stack((window[:, 1], window[:, 2], nxt))
            new = tuples - len(ids)
            ids = np.concatenate((ids, np.arange(next_id, next_id + new, dtype=np.int64)))
            window = np.concatenate((window, arrivals(new)))
            next_id += new
            out_ids.append(ids)
            out_codes.append(window[:, 2].copy())
        return Simulation(out_ids, out_codes, np.concatenate(qi_blocks))


def _inverse_cdf(cum: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row-wise inverse-CDF sampling: the first column whose cumulative probability exceeds u."""
    return np.minimum((cum <= u[:, None]).sum(axis=1), cum.shape[1] - 1).astype(np.int64)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    a.setflags(write=False)
    return a


@lru_cache(maxsize=16)
def build_model(
    horizon: int,
    momentum: float = 1.5,
    calibration_views: int = PAPER_VIEWS,
    individuals_per_tuple: float = PAPER_INDIVIDUALS_PER_TUPLE,
) -> BKseqModel:
    """The model whose discharge probability gives ``individuals_per_tuple`` expected individuals
    per view tuple over ``calibration_views`` views, with marginals pooled over ``horizon`` views
    (cached: a model is immutable and deterministic in its arguments)."""
    disease = weekly_disease_matrix()
    entry = bk_sv_table().mean(axis=0)
    discharge = calibrate_discharge(disease, momentum, entry, calibration_views, individuals_per_tuple)
    return BKseqModel(discharge, momentum, horizon)


# ---------------------------------------------------------------------------- the data set
def _positive_int(value: object, name: str, minimum: int) -> None:
    require(
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum,
        name,
        f"an integer >= {minimum}",
        value,
    )


@dataclass
class BKseqParams:
    releases: int = field(default=24, metadata={"help": "number of weekly views (>= 1)"})
    tuples: int = field(
        default=5000,
        metadata={"help": "tuples in every view (>= 1): individuals who leave are replaced by new ones"},
    )
    individuals: int | None = field(
        default=None,
        metadata={
            "help": "expected individuals appearing in at least one of the views; calibrates the weekly "
            "discharge probability (needs releases >= 3). null = the paper's process: the discharge "
            "probability that gives 16,160 individuals over 24 views of 5,000, whatever releases and tuples"
        },
    )
    momentum: float = field(
        default=1.5,
        metadata={
            "help": "factor on the probability of moving on (back) per recent progression (regression) in the "
            "last 3 values (>= 1; 1 = a first-order chain)"
        },
    )

    def __post_init__(self) -> None:
        _positive_int(self.releases, "releases", 1)
        _positive_int(self.tuples, "tuples", 1)
        require(
            isinstance(self.momentum, (int, float)) and not isinstance(self.momentum, bool) and 1.0 <= self.momentum <= 10.0,
            "momentum",
            "a number in [1, 10]",
            self.momentum,
        )
        self.momentum = float(self.momentum)
        if self.individuals is not None:
            # view 1 has no leavers, so the first newcomers arrive in view 3
            require(self.releases >= 3, "individuals", "null for fewer than 3 releases (no newcomer before view 3)", self.individuals)
            _positive_int(self.individuals, "individuals", self.tuples)
        try:
            self.model()
        except CalibrationError as e:
            low, high = self.tuples * e.low, self.tuples * e.high
            require(
                False,
                "individuals",
                f"between {int(np.ceil(low))} and {int(np.floor(high))} for {self.releases} views of {self.tuples} "
                f"tuples (deaths alone replace {low - self.tuples:.0f} individuals)",
                self.individuals,
            )

    def model(self) -> BKseqModel:
        """The (cached) model of these parameters."""
        horizon = max(self.releases, 2)
        if self.individuals is None:
            return build_model(horizon, self.momentum)
        return build_model(horizon, self.momentum, self.releases, self.individuals / self.tuples)


class BKseq(Dataset):
    """BKseq (JS-reduce §7.1): weekly exam results of ~5,000 patients, sequences of disease stages."""

    Params = BKseqParams
    scenario: ClassVar[str] = "continuous"

    def __init__(self, params: BKseqParams | None = None):
        super().__init__(params)
        self.model = self.params.model()
        self.schema = bkseq_schema()

    def releases(self, rng: np.random.Generator) -> Iterator[Release]:
        """Views 1..releases (all randomness from ``rng``). Each release's ``truth`` holds
        ``model`` (the same :class:`BKseqModel` for every release), ``inserted`` (new individuals)
        and ``deleted`` (individuals whose previous tuple was deceased/discharged)."""
        p = self.params
        sim = self.model.simulate(p.releases, p.tuples, rng)
        gender = np.asarray(GENDERS, dtype=object)
        values = np.asarray(VALUES, dtype=object)
        previous: np.ndarray | None = None
        previous_codes: np.ndarray | None = None
        for t, (ids, codes) in enumerate(zip(sim.ids, sim.codes), start=1):
            qi = sim.qi[ids]
            frame = pd.DataFrame(
                {
                    "id": ids,
                    "age": qi[:, 0],
                    "gender": gender[qi[:, 1].astype(np.int64)],
                    "weight": qi[:, 2],
                    "exam_result": values[codes],
                }
            )
            if previous is None:
                inserted, deleted = ids, np.zeros(0, np.int64)
            else:  # ids increase with arrival: newcomers have ids above every earlier one
                deleted = previous[previous_codes >= LIVING]
                inserted = ids[ids > previous.max()]
            truth = {"model": self.model, "inserted": inserted.copy(), "deleted": deleted.copy()}
            yield self.schema.encode(frame, t, truth=truth)
            previous, previous_codes = ids, codes
