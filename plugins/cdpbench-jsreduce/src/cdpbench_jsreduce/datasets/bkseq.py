"""BKseq: a synthetic re-creation of the medical-exam data set of JS-reduce (§7.1).

Riboni, Pareschi, Bettini, "JS-Reduce: Defending your data from sequential background knowledge
attacks", IEEE TDSC 9(3), 2012, §7.1: weekly views of the results of medical exams, 24 views of
5,000 tuples, 16,160 individuals in at least one view, at most one exam per person per week; QI age
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
      cirrhosis **by age** (A, MED, PLoS One 2011 e26783 Table 1: per-stage fibrosis progression
      per 6 months for men aged 40–49 / 50–59 / 60–69 / ≥70: 0.0266 / 0.0606 / 0.1046 / 0.1397):
      four stages F0..F3 crossed at the group's rate, one exit with the hazard 1/Σ mean sojourns
      (0.013 / 0.031 / 0.054 / 0.072 a year for ages 45–49 / 50–59 / 60–69 / 70–74).
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

QI-dependent transitions (``seq_class``: 4 transition classes, the age groups above)
    Of the QI effects on progression the paper names (§7.1: age, gender and weight), the sources
    collected in TRANSITIONS.md give a number for one: fibrosis progression rises with age (above;
    the table is for men and is applied to both genders). Men dying more in mild Alzheimer's
    disease (Fuh 2004) has no number in the sources; no source gives a weight effect. Both are
    left out, not invented. So the chronic-hepatitis row differs across the 4 age groups and every
    other row is the same.

Higher-order dependence: none by default (``momentum = 1``, a first-order weekly chain)
    The paper says the probabilities depend "on the past evolution of the disease" (1-, 2- and
    3-step knowledge); no source in TRANSITIONS.md gives a number for it (Di Biase 2007's
    semi-Markov sojourns were not retrieved). So the paper's finding that 3-step knowledge beats
    2-step beats 1-step cannot be reproduced from public numbers: with a first-order chain the
    n-step tables differ only on histories the chain cannot produce (zero rows). The option
    ``momentum`` (C, no source) adds one: in the window (x, y, z) of the last three WEEKS (z = the
    latest), each progression (a move to a later stage of the same track) among x→y, y→z
    multiplies the weekly probability of moving on from z by ``momentum``, each regression the
    probability of moving back; the extra mass comes out of staying in z (at most half of it),
    death and discharge unchanged. A patient with fewer than 3 weeks has the window padded with its
    admission value (as if stable before).

Exam schedule, discharge and arrivals (C; TRANSITIONS.md §5.2: the sources give no rates)
    The paper: "each view contains the records of exams performed during that week", at most one
    per person, and its §2 example has respondents leave and arrive between weeks; it does not say
    how often a patient has an exam. The institute has a fixed active population. Every week each
    active patient moves on one weekly step; a surviving patient is discharged with one weekly
    probability ``discharge`` (all stages alike). A "deceased" or "discharged" tuple is always in
    the week's view (the event is recorded) and is the patient's last; as many new patients are
    admitted the same week, and the admission exam is in the view; every other active patient has
    an exam — a tuple of its current stage — with probability ``presence`` (default 0.5, C: one
    exam every other week on average; 1 = every week). The institute runs ``BURN_IN = 104`` weeks
    before view 1, so view 1 is a view of a running process (it holds deaths, discharges and
    patients admitted earlier) and all views have the same expected size. For a given presence the
    discharge probability is solved on the exact expected counts (``calibrate_discharge``) so that
    the expected number of individuals over 24 views is 16,160 per 5,000 expected tuples a view
    (the paper's history), whatever ``releases`` and ``tuples`` are; the active population is then
    sized so that views hold ``tuples`` tuples in expectation. Calibrated values (presence:
    discharge, active patients for 5,000 tuples, share of a view's respondents in the previous
    view): 1.0: 0.1040, 4,515, 0.90; 0.75: 0.0681, 5,958, 0.70; 0.5: 0.0293, 9,120, 0.49; 0.35:
    0.0045, 13,827, 0.35; below about 0.31 no discharge rate reaches 16,160 (the population alone
    is larger). ``test_dataset_bkseq.py`` prints the table with simulated totals (5 seeds, within 0.5 %)
    and view sizes (within 5 % of 5,000).

New individuals and their admission exam (C; ``bk_sv_table``; BK_sv itself: below)
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

Exposed knowledge (``BKseqModel``, the :class:`~cdpbench_jsreduce.sequence_model.SequenceModel` of every
release's ``truth["model"]``)
    ``bk_sv(qi, t)``: the exact class distribution of a respondent's FIRST tuple in the views,
    that tuple being in view t (:func:`first_appearance_tables`). It mixes the admission exams
    of week t with the first observed tuple of the patients active before view 1 and not seen
    yet — an exam, or their death or discharge, which is always recorded. The second share shrinks
    like (1 - presence)^(t-1), so the law depends on t and tends to the admission law
    (``admission_sv(qi)``, :func:`bk_sv_table`). It gives every value, deceased and discharged
    included, positive probability (presence < 1).
    ``bk_seq(steps, seq_class)``: WEEKLY tables per age group — 3 steps: the exact generator
    transition on a 3-week window; 1 and 2: its exact marginals over the weekly histories of views
    2..``releases`` (expected counts propagated week by week; the process is linear in
    expectation); without ``seq_class``, pooled over the groups. Histories the generator cannot
    produce (values of two tracks, a move the weekly matrix forbids, anything after
    deceased/discharged) have zero rows, as in Algorithm 5. ``observed``: the probability that a
    week's value is in the view (``presence`` for a stage, 1 for deceased/discharged). Knowledge
    composes the weekly tables over the weeks between two observations and weights the last week
    by ``observed`` (``sequential_knowledge.over_weeks``): for a respondent seen in consecutive weeks this is
    the exact law of its next tuple. ``corpus(views, tuples, seed)``: an external history of the
    same process.
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


#: transition classes: the age groups of the fibrosis-progression table (PLoS One 2011 e26783,
#: Table 1, men 40-49 / 50-59 / 60-69 / >=70), cut to bkseq's ages 45..74
AGE_GROUPS: tuple[tuple[int, int], ...] = ((45, 49), (50, 59), (60, 69), (70, 74))
#: per-stage fibrosis progression probability per 6 months in those age groups (A, MED)
FIBROSIS_6_MONTHS = (0.0266, 0.0606, 0.1046, 0.1397)
N_SEQ_CLASSES = len(AGE_GROUPS)


def _fibrosis_to_cirrhosis_annual(group: int) -> float:
    """Chronic hepatitis (F0-F3) -> compensated cirrhosis, annual, in age group ``group``: four
    fibrosis stages crossed at the group's per-stage 6-month probability (PLoS One 2011), one exit
    with the hazard 1 / (sum of the four mean sojourns)."""
    per_stage_annual = 1.0 - (1.0 - FIBROSIS_6_MONTHS[group]) ** 2
    years = 4 * (-1.0 / np.log1p(-per_stage_annual))
    return float(1.0 - np.exp(-1.0 / years))


def seq_class(qi: np.ndarray) -> np.ndarray:
    """Transition class 0..3 of QI rows (age, gender code, weight): the age group of
    :data:`AGE_GROUPS` (the only QI effect on transitions the sources report with numbers)."""
    age = np.asarray(qi, dtype=float)
    age = age[:, 0] if age.ndim == 2 else age
    bounds = np.array([hi for _, hi in AGE_GROUPS[:-1]], dtype=float)
    return np.searchsorted(bounds, age, side="left").astype(np.int64)


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


def weekly_disease_matrix(group: int = 1) -> np.ndarray:
    """``[17, 18]``: P(next week's stage or death | this week's stage) for a patient of age group
    ``group`` (:data:`AGE_GROUPS`; only the chronic hepatitis row depends on it), first order,
    no discharge.

    Rows sum to 1; entries outside an individual's track are 0 (see the module docstring for
    every number and its source)."""
    D = np.zeros((LIVING, LIVING + 1))
    liver = {
        0: {1: _fibrosis_to_cirrhosis_annual(group)},
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
    """``[18, 19]``: P(admission exam's value | class), class as in :func:`qi_class` (see the
    docstring): a new patient's first value (a stage, never deceased/discharged). The law of a
    first tuple in the views (BK_sv) mixes it with the patients admitted before view 1:
    :func:`first_appearance_tables`."""
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


# ---------------------------------------------------------------------------- expected process counts
#: weeks the institute runs before view 1 (C): the study observes a running process, so view 1
#: holds patients admitted earlier and every view has the same expected size
BURN_IN = 104


def class_entry() -> tuple[np.ndarray, np.ndarray]:
    """``(shares [4], entry [4, 19])``: the share of each transition class (age group) among new
    patients (uniform ages) and its admission-exam distribution (:func:`bk_sv_table` averaged
    over the group's ages, both genders and the three weight bands)."""
    sv = bk_sv_table().reshape(3, 3, 2, N_VALUES)  # age band, weight band, gender
    ages = np.arange(AGE[0], AGE[1] + 1)
    groups = seq_class(ages.astype(float))
    bands = (ages - AGE[0]) // 10
    shares = np.bincount(groups, minlength=N_SEQ_CLASSES) / len(ages)
    entry = np.zeros((N_SEQ_CLASSES, N_VALUES))
    np.add.at(entry, groups, sv[bands].mean(axis=(1, 2)))
    entry /= entry.sum(axis=1, keepdims=True)
    return shares, entry


def qi_entry() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(qi_classes [K], groups [K], shares [K], entry [K, 19])``: the (QI class, transition
    class) pairs new patients fall in (an age band of 10 ages spans two age groups of
    :data:`AGE_GROUPS`: K = 36), each pair's share among new patients (uniform QI) and its
    admission law (the QI class's row of :func:`bk_sv_table`). Grouped by transition class they
    give :func:`class_entry`."""
    sv = bk_sv_table()
    ages = np.arange(AGE[0], AGE[1] + 1)
    band, group = (ages - AGE[0]) // 10, seq_class(ages.astype(float))
    cells = np.array(
        [(a * 6 + w * 2 + g, grp) for a, grp in zip(band, group) for w in range(3) for g in range(2)], dtype=np.int64
    )
    pairs, counts = np.unique(cells, axis=0, return_counts=True)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), counts / counts.sum(), sv[pairs[:, 0]]


def first_appearance_tables(T: np.ndarray, presence: float, views: int, burn_in: int = BURN_IN) -> np.ndarray:
    """``[views, 18, 19]``: P(value of a respondent's first tuple in the views | its QI class,
    the first tuple is in view t), t = 1..``views`` — the exact BK_sv of the first appearances.

    ``T``: ``[4, 19, 19, 19, 19]`` the transition classes' tensors. The process is propagated in
    expectation per (QI class, age group) pair (:func:`qi_entry`; the same process as
    :func:`expected_process_counts` per age group, which it refines), its expected first
    appearances (``ProcessCounts.first``: the week's admission exams plus the patients active
    before view 1 first seen that week) summed per QI class and normalized. A mixture of the
    admission law (weight ~ the week's admissions) and of the law of a not-yet-seen burn-in
    patient's next value (weight ~ (1 - presence)^(t-1) times its survival), so deceased and
    discharged have positive probability at every t (when presence < 1; with presence = 1 every
    active patient is seen in view 1 and BK_sv is the admission law from view 2 on)."""
    classes, groups, shares, entry = qi_entry()
    L = LIVING
    T = np.asarray(T)[:, :L, :L, :L]  # only living windows occur
    counts = expected_process_counts(T[groups], shares, entry, views, presence, burn_in, histories=False)
    first = np.zeros((views, N_CLASSES, N_VALUES))
    np.add.at(first, (slice(None), classes), counts.first)
    return first / first.sum(axis=2, keepdims=True)


@dataclass
class ProcessCounts:
    """Expected counts of the process, per patient of the active population (see
    :func:`expected_process_counts`). ``pairs[c, z, s]``, ``triples[c, y, z, s]``: expected weekly
    transitions of class-``c`` patients from the last value z (last two y, z; patients with at least
    two values) to s, pooled over views 2..``views``; ``quads[x, y, z, s]``: the same over patients
    with at least three values, all classes; ``view``: mean expected view size; ``individuals``:
    expected patients appearing in at least one of the views; ``first[t-1, c, s]``: expected
    class-``c`` patients whose FIRST tuple in the views is in view t and reads s (the patients
    admitted that week, and those active before view 1 first seen then, see
    :func:`expected_process_counts`)."""

    pairs: np.ndarray
    triples: np.ndarray
    quads: np.ndarray
    view: float
    individuals: float
    first: np.ndarray


def expected_process_counts(
    T: np.ndarray,
    shares: np.ndarray,
    entry: np.ndarray,
    views: int,
    presence: float,
    burn_in: int = BURN_IN,
    histories: bool = True,
) -> ProcessCounts:
    """Propagate the expected number of patients in each history state week by week, per class.

    ``T``: ``[4, 19, 19, 19, 19]`` the classes' transitions. The active population is 1: it is
    admitted ``burn_in`` weeks before view 1 (first values ~ ``entry``); every week each patient
    moves on by its class's ``T``, those who die or are discharged leave (their tuple is in that
    week's view) and as many new patients are admitted the same week (classes ~ ``shares``, first
    values ~ ``entry``; their admission exam is in the view); every other patient has an exam with
    probability ``presence``. So view t has expected size ``presence * (1 - L_t) + 2 L_t`` (L_t:
    leavers), and a patient active at view 1 never appears iff it stays through the ``views`` weeks
    without an exam: probability ``S (1 - presence)^views`` with S its survival. History states:
    one value (window padded to (a, a, a)), two ((a, a, b)), three or more ((x, y, z)).
    ``histories=False`` skips the transition counts (the calibration needs the sizes only).

    First appearances (``first``). A patient admitted in week u >= 1 is first seen at u (its
    admission exam); a patient active at view 1 (the burn-in ``cohort``) is first seen in the
    first week t whose value is observed — it stayed through weeks 1..t-1 without an exam
    (probability (1 - presence)^(t-1), independent of its values) and at week t moved to s, then
    observed with probability ``presence`` (a stage) or 1 (deceased/discharged). So, per class c::

        first[t-1, c, s] = L_t shares[c] entry[c, s] + (1 - presence)^(t-1) R_t[c, s] o[s]

    with L_t the week's leavers (= admissions), R_t[c, s] the cohort's expected moves to s in
    week t (the cohort propagated without admissions: survival included) and o = (presence, ..,
    presence, 1, 1)."""
    L, m, C = LIVING, N_VALUES, len(shares)
    T = np.asarray(T)[:, :L, :L, :L]  # only living windows occur
    diag = np.arange(L)
    t1 = T[:, diag, diag, diag]  # [C, L, m]: window (z, z, z)
    t2 = T[:, diag[:, None], diag[:, None], diag[None, :]]  # [C, L, L, m]: window (y, y, z)
    flat3 = T.reshape(C, L**3, m)
    by_window = np.ascontiguousarray(T.reshape(C, L, L * L, m).transpose(0, 2, 1, 3))  # [C, (y, z), x, s]
    pairs = np.zeros((C, m, m))
    triples = np.zeros((C, m, m, m))
    quads = np.zeros((m, m, m, m))

    def step(state, admit: bool, count: bool, moves: list | None = None):
        c1, c2, c3 = state
        r1 = c1[..., None] * t1  # [C, L, m]
        r2 = c2[..., None] * t2  # [C, L, L, m]
        if count:
            r3full = (c3.reshape(C, L**3, 1) * flat3).reshape(C, L, L, L, m)
            r3 = r3full.sum(axis=1)  # [C, L, L, m]: (y, z, s)
        else:  # the same sum over x as one batched product
            x_first = c3.reshape(C, L, L * L).transpose(0, 2, 1)[:, :, None, :]  # [C, (y, z), 1, x]
            r3 = np.matmul(x_first, by_window).reshape(C, L, L, m)
        leaving = r1[..., L:].sum() + r2[..., L:].sum() + r3[..., L:].sum()
        if count:
            pairs[:, :L] += r1 + r2.sum(axis=1) + r3.sum(axis=1)
            triples[:, :L, :L] += r2 + r3
            quads[:L, :L, :L] += r3full.sum(axis=0)
        if moves is not None:  # [C, m]: expected moves to each value this week
            moves.append(r1.sum(axis=1) + r2.sum(axis=(1, 2)) + r3.sum(axis=(1, 2)))
        new1 = (leaving * shares[:, None] * entry[:, :L]) if admit else np.zeros((C, L))
        return (new1, r1[..., :L], r3[..., :L] + r2[..., :L]), leaving

    state = (shares[:, None] * entry[:, :L], np.zeros((C, L, L)), np.zeros((C, L, L, L)))
    for _ in range(burn_in):
        state, _ = step(state, True, False)
    cohort = state
    sizes, admitted = [], 0.0
    observed = np.full(m, presence)
    observed[L:] = 1.0  # deaths and discharges are always recorded
    first = np.zeros((views, C, m))
    for t in range(1, views + 1):
        state, leaving = step(state, True, histories and t >= 2)
        moves: list[np.ndarray] = []
        cohort, _ = step(cohort, False, False, moves)
        sizes.append(presence * (1.0 - leaving) + 2.0 * leaving)
        admitted += leaving
        first[t - 1] = leaving * shares[:, None] * entry + (1.0 - presence) ** (t - 1) * moves[0] * observed
    survivors = sum(float(c.sum()) for c in cohort)
    individuals = 1.0 - survivors * (1.0 - presence) ** views + admitted
    return ProcessCounts(pairs, triples, quads, float(np.mean(sizes)), float(individuals), first)


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
    individuals per view tuple with no discharge and with (almost) certain discharge."""

    def __init__(self, low: float, high: float):
        super().__init__(f"expected individuals per view tuple must lie in [{low:.4f}, {high:.4f}]")
        self.low, self.high = low, high


def transition_tensors(momentum: float, discharge: float) -> np.ndarray:
    """``[4, 19, 19, 19, 19]``: :func:`transition_tensor` of every transition class."""
    return np.stack([transition_tensor(weekly_disease_matrix(g), momentum, discharge) for g in range(N_SEQ_CLASSES)])


def calibrate_discharge(momentum: float, presence: float, views: int, target: float) -> float:
    """The weekly discharge probability at which the expected number of individuals over ``views``
    views is ``target`` times the mean expected view size (root of the exact expected counts of
    :func:`expected_process_counts`). Raises :class:`CalibrationError` when no probability in
    [0, 1) reaches it."""
    shares, entry = class_entry()

    def ratio(discharge: float) -> float:
        T = transition_tensors(momentum, discharge)
        c = expected_process_counts(T, shares, entry, views, presence, histories=False)
        return c.individuals / c.view

    from scipy.optimize import brentq  # here, not at import: registering plugins must stay fast

    almost_one = 1.0 - 1e-9
    low, high = ratio(0.0), ratio(almost_one)
    if not (low <= target <= high):
        raise CalibrationError(low, high)
    if target == low:
        return 0.0
    return float(brentq(lambda d: ratio(d) - target, 0.0, almost_one, xtol=1e-10, rtol=1e-10))


# ---------------------------------------------------------------------------- the model
@dataclass
class Simulation:
    """One simulated history: per view the respondent ids (increasing) and value codes; per
    individual (id = row) its QI (age, gender code, weight). Only individuals with a tuple in some
    view are numbered (ids 0.. in order of admission); ``admitted[id]`` is the week of admission
    (view numbers; ``<= 0`` before view 1, when the first tuple is not the admission exam)."""

    ids: list[np.ndarray]
    codes: list[np.ndarray]
    qi: np.ndarray
    admitted: np.ndarray

    def history(self) -> np.ndarray:
        """``[individuals, views]`` int64 codes, ``-1`` where the individual has no tuple."""
        out = np.full((len(self.qi), len(self.ids)), -1, dtype=np.int64)
        for t, (ids, codes) in enumerate(zip(self.ids, self.codes)):
            out[ids, t] = codes
        return out


class BKseqModel:
    """The generator of BKseq and its exact knowledge (a :class:`SequenceModel`).

    Attributes: ``values`` (19 codes), ``max_order = 3``, ``n_seq_classes = 4`` (the age groups
    transitions depend on), ``discharge`` (the calibrated weekly discharge probability),
    ``momentum``, ``presence`` (weekly exam probability), ``horizon`` (views over which the
    marginals are pooled), ``population_per_tuple`` (active patients per expected view tuple),
    ``expected_individuals_per_tuple`` (over ``horizon`` views), ``observed`` (``[19]``: the
    probability that a week's value is in its view: ``presence`` for a stage, 1 for
    deceased/discharged), ``disease`` (``[4, 17, 18]``,
    :func:`weekly_disease_matrix` per class). Arrays returned are read-only views; copy them to
    modify."""

    values: tuple[str, ...] = VALUES
    max_order: int = 3
    n_seq_classes: int = N_SEQ_CLASSES

    def __init__(self, discharge: float, momentum: float = 1.0, presence: float = 1.0, horizon: int = 24):
        self.discharge = float(discharge)
        self.momentum = float(momentum)
        self.presence = float(presence)
        self.horizon = int(horizon)
        self.disease = _readonly(np.stack([weekly_disease_matrix(g) for g in range(N_SEQ_CLASSES)]))
        self._sv = bk_sv_table()
        shares, entry = class_entry()
        self._sv_cum = np.cumsum(self._sv, axis=1)
        t3 = transition_tensors(self.momentum, self.discharge)
        self._t3 = _readonly(t3)
        self._first: np.ndarray | None = None  # BK_sv per release, computed on first use (about 1 s)
        counts = expected_process_counts(t3, shares, entry, max(self.horizon, 2), self.presence)
        producible = producible_windows(self.disease[1])[..., None]  # the classes share one support
        self._seq = {
            1: _readonly(conditional_rows(counts.pairs.sum(axis=0))),
            2: _readonly(conditional_rows(counts.triples.sum(axis=0))),
            3: _readonly(conditional_rows(counts.quads)),
        }
        self._seq_class = {
            1: _readonly(conditional_rows(counts.pairs)),
            2: _readonly(conditional_rows(counts.triples)),
            3: _readonly(np.where(producible, t3, 0.0)),
        }
        observed = np.full(N_VALUES, self.presence)
        observed[LIVING:] = 1.0  # deaths and discharges are always recorded
        self.observed = _readonly(observed)
        self.population_per_tuple = 1.0 / counts.view
        self.expected_individuals_per_tuple = counts.individuals / counts.view
        self._cum = np.cumsum(t3.reshape(-1, N_VALUES), axis=1)
        self._sv = _readonly(self._sv)

    # ------------------------------------------------------------------ SequenceModel
    def bk_sv(self, qi: np.ndarray, t: int) -> np.ndarray:
        """BK_sv (Def. 1): ``[n, 19]`` P(value of a respondent's FIRST tuple in the views | the
        class of its QI row, that tuple is in view ``t``) — columns age, gender code (0 = "1",
        1 = "2"), weight, as in the schema; ``t`` = 1, 2, ... the release. Exact
        (:func:`first_appearance_tables`): a mixture of the admission exams of week t and of the
        patients admitted before view 1 and seen for the first time in week t (an exam, or their
        death or discharge, always recorded), whose share shrinks with t. So every value,
        deceased and discharged included, has positive probability (presence < 1). The law
        depends on t: the knowledge passes the release's time (``release.t``)."""
        require(
            isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 1, "t", "a release number >= 1", t
        )
        if self._first is None or t > len(self._first):  # first use, or beyond: propagate (deterministic)
            views = max(int(t), max(self.horizon, 2) if self._first is None else 2 * len(self._first))
            self._first = _readonly(first_appearance_tables(self._t3, self.presence, views))
        return self._first[int(t) - 1][qi_class(qi)]

    def admission_sv(self, qi: np.ndarray) -> np.ndarray:
        """``[n, 19]`` P(value of the admission exam | class of the QI row) (:func:`bk_sv_table`):
        the first value of a new patient; deceased/discharged have probability 0. The first tuple
        in the views of a patient admitted during the views; :meth:`bk_sv` is the law of every
        first tuple."""
        return self._sv[qi_class(qi)]

    def seq_class(self, qi: np.ndarray) -> np.ndarray:
        """Transition class (age group, :data:`AGE_GROUPS`) of QI rows."""
        qi_class(qi)  # validates the rows
        return seq_class(qi)

    def bk_seq(self, steps: int, seq_class: int | None = None) -> np.ndarray:
        """n-step BK_seq (Def. 2) of one WEEK: ``[19] * steps + [19]``, P(value in week t | the
        values of weeks t-steps..t-1). With ``seq_class`` (0..3, :meth:`seq_class`) that class's
        table — 3 = its exact generator transition, 1 and 2 = its marginals over the weekly
        histories of views 2..``horizon`` —; without, all classes pooled (for 3 steps: over the
        patients with three weeks of history). A history the generator never produces (stages of
        two tracks, a move the weekly matrix forbids, anything after deceased/discharged) has a zero
        row: it has no next value, as an unseen history has none in Algorithm 5 (line 10).
        Knowledge composes these weekly tables over the weeks between two observations."""
        require(isinstance(steps, (int, np.integer)) and 1 <= steps <= 3, "steps", "1, 2 or 3", steps)
        if seq_class is None:
            return self._seq[int(steps)]
        require(
            isinstance(seq_class, (int, np.integer)) and 0 <= seq_class < N_SEQ_CLASSES, "seq_class", "0..3", seq_class
        )
        return self._seq_class[int(steps)][int(seq_class)]

    def corpus(self, views: int, tuples: int, seed: int) -> np.ndarray:
        """An external history of ``views`` views of about ``tuples`` tuples from
        ``default_rng(seed)``: ``[individuals, views]`` int64 codes, ``-1`` where the individual
        has no tuple."""
        require(isinstance(views, (int, np.integer)) and views >= 1, "views", "an integer >= 1", views)
        require(isinstance(tuples, (int, np.integer)) and tuples >= 1, "tuples", "an integer >= 1", tuples)
        return self.simulate(int(views), int(tuples), np.random.default_rng(seed)).history()

    # ------------------------------------------------------------------ generation
    def simulate(self, views: int, tuples: int, rng: np.random.Generator) -> Simulation:
        """Run the process (:func:`expected_process_counts` describes it) with an active population
        of ``round(tuples * population_per_tuple)`` patients: vectorized over patients, one step
        per week, ``BURN_IN`` weeks before view 1."""
        qi_blocks: list[np.ndarray] = []
        weeks: list[np.ndarray] = []

        def admit(n: int, week: int) -> tuple[np.ndarray, np.ndarray]:
            qi = np.column_stack(
                (
                    rng.integers(AGE[0], AGE[1] + 1, n),
                    rng.integers(0, 2, n),
                    rng.integers(WEIGHT[0], WEIGHT[1] + 1, n),
                )
            ).astype(float)
            qi_blocks.append(qi)
            weeks.append(np.full(n, week, dtype=np.int64))
            first = _inverse_cdf(self._sv_cum[qi_class(qi)], rng.random(n))
            return np.repeat(first[:, None], 3, axis=1), seq_class(qi)

        population = max(1, round(tuples * self.population_per_tuple))
        ids = np.arange(population, dtype=np.int64)
        window, cls = admit(population, -BURN_IN)
        next_id = population
        out_ids: list[np.ndarray] = []
        out_codes: list[np.ndarray] = []
        for week in range(1 - BURN_IN, views + 1):
            flat = ((cls * N_VALUES + window[:, 0]) * N_VALUES + window[:, 1]) * N_VALUES + window[:, 2]
            nxt = _inverse_cdf(self._cum[flat], rng.random(len(ids)))
            window = np.column_stack((window[:, 1], window[:, 2], nxt))
            leaving = nxt >= LIVING
            exam = rng.random(len(ids)) < self.presence
            n_new = int(leaving.sum())
            new_ids = np.arange(next_id, next_id + n_new, dtype=np.int64)
            new_window, new_cls = admit(n_new, week)
            next_id += n_new
            if week >= 1:
                shown = leaving | exam
                out_ids.append(np.concatenate((ids[shown], new_ids)))
                out_codes.append(np.concatenate((nxt[shown], new_window[:, 2])))
            stay = ~leaving
            ids = np.concatenate((ids[stay], new_ids))
            window = np.concatenate((window[stay], new_window))
            cls = np.concatenate((cls[stay], new_cls))
        qi = np.concatenate(qi_blocks)
        appeared = np.unique(np.concatenate(out_ids)) if out_ids else np.zeros(0, np.int64)
        renumber = np.full(next_id, -1, dtype=np.int64)
        renumber[appeared] = np.arange(len(appeared))
        admitted = np.concatenate(weeks)[appeared]
        return Simulation([renumber[i] for i in out_ids], out_codes, qi[appeared], admitted)


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
    momentum: float = 1.0,
    presence: float = 1.0,
    calibration_views: int = PAPER_VIEWS,
    individuals_per_tuple: float = PAPER_INDIVIDUALS_PER_TUPLE,
) -> BKseqModel:
    """The model whose discharge probability gives ``individuals_per_tuple`` expected individuals
    per expected view tuple over ``calibration_views`` views, with marginals pooled over
    ``horizon`` views (cached: a model is immutable and deterministic in its arguments)."""
    discharge = cached_discharge(momentum, presence, calibration_views, individuals_per_tuple)
    return BKseqModel(discharge, momentum, presence, horizon)


def cached_discharge(momentum: float, presence: float, views: int, target: float) -> float:
    """:func:`calibrate_discharge`, remembered across processes (``cdpbench.disk_cache``): the
    root takes about 0.8 s here (brentq over the exact expected counts), which every job of a sweep and
    every single run would pay again. The entry is keyed by the arguments and fingerprinted by
    this module's source and the numpy/scipy versions, so it is the very float the calibration
    gives here; a :class:`CalibrationError` is not remembered."""
    import scipy

    from cdpbench.disk_cache import file_fingerprint, memo

    key = {"momentum": float(momentum), "presence": float(presence), "views": int(views), "target": float(target)}
    fingerprint = file_fingerprint(__file__, extra=f"numpy {np.__version__} scipy {scipy.__version__}")
    return memo(
        "bkseq-discharge",
        key,
        lambda: calibrate_discharge(momentum, presence, views, target),
        fingerprint=fingerprint,
        valid=lambda v: isinstance(v, float) and 0.0 <= v < 1.0,
    )


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
        metadata={"help": "expected tuples in every view (>= 1): the active population is sized for it"},
    )
    presence: float = field(
        default=0.5,
        metadata={
            "help": "weekly probability that an active patient has an exam, i.e. a tuple in the week's view "
            "((0, 1]; admissions, deaths and discharges are always in the view)"
        },
    )
    individuals: int | None = field(
        default=None,
        metadata={
            "help": "expected individuals appearing in at least one of the views; calibrates the weekly "
            "discharge probability. null = the paper's process: the discharge probability that gives 16,160 "
            "individuals over 24 views of 5,000, whatever releases and tuples"
        },
    )
    momentum: float = field(
        default=1.0,
        metadata={
            "help": "factor on the probability of moving on (back) per recent progression (regression) in the "
            "last 3 weeks (>= 1; 1 = a first-order chain, the default: no source gives a higher-order effect)"
        },
    )

    def __post_init__(self) -> None:
        _positive_int(self.releases, "releases", 1)
        _positive_int(self.tuples, "tuples", 1)
        require(
            isinstance(self.presence, (int, float)) and not isinstance(self.presence, bool) and 0.0 < self.presence <= 1.0,
            "presence",
            "a number in (0, 1]",
            self.presence,
        )
        self.presence = float(self.presence)
        require(
            isinstance(self.momentum, (int, float)) and not isinstance(self.momentum, bool) and 1.0 <= self.momentum <= 10.0,
            "momentum",
            "a number in [1, 10]",
            self.momentum,
        )
        self.momentum = float(self.momentum)
        if self.individuals is not None:
            _positive_int(self.individuals, "individuals", 1)
        try:
            self.model()
        except CalibrationError as e:
            views = self.releases if self.individuals is not None else PAPER_VIEWS
            target = self.individuals if self.individuals is not None else round(PAPER_INDIVIDUALS_PER_TUPLE * self.tuples)
            low, high = self.tuples * e.low, self.tuples * e.high
            field_name, value = ("individuals", self.individuals) if self.individuals is not None else ("presence", self.presence)
            hint = "" if self.individuals is not None else "; the paper's 16,160 over 24 views of 5,000 needs presence above about 0.31"
            require(
                False,
                field_name,
                f"a value at which {views} views of {self.tuples} tuples can hold {target} individuals: with "
                f"presence={self.presence:g} they hold {int(np.ceil(low))} to {int(np.floor(high))}{hint}",
                value,
            )

    def model(self) -> BKseqModel:
        """The (cached) model of these parameters."""
        horizon = max(self.releases, 2)
        if self.individuals is None:
            return build_model(horizon, self.momentum, self.presence)
        return build_model(horizon, self.momentum, self.presence, self.releases, self.individuals / self.tuples)


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
        ``model`` (the same :class:`BKseqModel` for every release), ``inserted`` (individuals in
        their first view) and ``deleted`` (individuals whose previous tuple read deceased or
        discharged)."""
        p = self.params
        sim = self.model.simulate(p.releases, p.tuples, rng)
        gender = np.asarray(GENDERS, dtype=object)
        values = np.asarray(VALUES, dtype=object)
        seen = np.zeros(len(sim.qi), dtype=bool)
        deleted = np.zeros(0, np.int64)
        for t, (ids, codes) in enumerate(zip(sim.ids, sim.codes), start=1):
            order = np.argsort(ids, kind="stable")
            ids, codes = ids[order], codes[order]
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
            inserted = ids[~seen[ids]]
            seen[ids] = True
            truth = {"model": self.model, "inserted": inserted.copy(), "deleted": deleted.copy()}
            yield self.schema.encode(frame, t, truth=truth)
            deleted = ids[codes >= LIVING]
