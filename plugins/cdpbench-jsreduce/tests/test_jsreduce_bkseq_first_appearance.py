"""bkseq's BK_sv is the exact law of a respondent's FIRST tuple in the views (per QI class and release).

``BKseqModel.bk_sv(qi, t)`` mixes the admission exams of week t with the first observed tuple of
the patients admitted before view 1 (burn-in) and not yet seen — an exam, or their death or
discharge, which is always recorded (``first_appearance_tables``). These tests check that it is a
distribution, that it never excludes a first appearance the generator produces, that it matches a
Monte-Carlo estimate of the first appearances (several seeds, tolerances from the standard error)
at release 1 (mostly patients admitted before the views) and later releases (mostly admissions),
and that the knowledge plugins pass it the release time.
"""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.errors import ConfigError
from cdpbench.registry import default_registry
from cdpbench_jsreduce.datasets.bkseq import (
    DECEASED,
    DISCHARGED,
    LIVING,
    N_CLASSES,
    N_VALUES,
    BKseq,
    BKseqParams,
    bk_sv_table,
    class_entry,
    expected_process_counts,
    first_appearance_tables,
    qi_class,
    qi_entry,
)

SEEDS = (101, 102, 103, 104)
MC_TUPLES = 20_000
MC_RELEASES = 8


def class_rows() -> np.ndarray:
    """One QI row (age, gender code, weight) per class 0..17, in class order."""
    rows = np.array([(45 + 10 * a, g, 60 + 10 * w) for a in range(3) for w in range(3) for g in range(2)], float)
    assert (qi_class(rows) == np.arange(N_CLASSES)).all()
    return rows


@pytest.fixture(scope="module")
def model():
    return BKseqParams(releases=24, tuples=1000).model()


@pytest.fixture(scope="module")
def first_appearances(model):
    """Per release t = 1..MC_RELEASES: ``[18, 19]`` counts of first tuples (QI class, value) over
    the Monte-Carlo seeds (the generator itself, ``model.simulate``)."""
    counts = np.zeros((MC_RELEASES, N_CLASSES, N_VALUES), dtype=np.int64)
    for seed in SEEDS:
        sim = model.simulate(MC_RELEASES, MC_TUPLES, np.random.default_rng(seed))
        seen = np.zeros(len(sim.qi), dtype=bool)
        for t, (ids, codes) in enumerate(zip(sim.ids, sim.codes)):
            new = ~seen[ids]
            seen[ids] = True
            np.add.at(counts[t], (qi_class(sim.qi[ids[new]]), codes[new]), 1)
    return counts


# ---------------------------------------------------------------------------- a distribution
def test_bk_sv_rows_sum_to_one_and_give_every_value_positive_probability(model):
    qi = class_rows()
    for t in (1, 2, 8, 24):
        bk = model.bk_sv(qi, t)
        assert bk.shape == (N_CLASSES, N_VALUES)
        np.testing.assert_allclose(bk.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert (bk > 0).all(), f"release {t}: a value has probability 0"
    # the share of never-seen pre-view patients shrinks: deaths/discharges among first tuples fall
    leaving = [model.bk_sv(qi, t)[:, LIVING:].sum() for t in range(1, 25)]
    assert all(a > b for a, b in zip(leaving, leaving[1:]))


def test_bk_sv_beyond_the_horizon_tends_to_the_admission_law():
    m = BKseqParams(releases=4, tuples=1000).model()
    qi = class_rows()
    early = m.bk_sv(qi, 3)
    late = m.bk_sv(qi, 10)  # past the model's horizon (4): propagated further
    np.testing.assert_allclose(late.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(late, first_appearance_tables(m._t3, m.presence, 10)[9])
    np.testing.assert_array_equal(m.bk_sv(qi, 3), early)  # extending does not move earlier releases
    # long after view 1 every patient has been seen: only admission exams are first tuples
    np.testing.assert_allclose(m.bk_sv(qi, 100), bk_sv_table(), atol=1e-12)
    np.testing.assert_array_equal(m.admission_sv(qi), bk_sv_table())


def test_bk_sv_needs_a_valid_release_time(model):
    qi = class_rows()
    with pytest.raises(TypeError):
        model.bk_sv(qi)  # the law depends on the release: no silent default
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="release number"):
            model.bk_sv(qi, bad)


def test_with_weekly_exams_every_patient_is_seen_in_view_1():
    """presence = 1: every active patient has a tuple in view 1, so from view 2 on a first tuple is
    an admission exam (deaths and discharges have probability 0 there, as they should)."""
    m = BKseqParams(releases=4, tuples=1000, presence=1.0).model()
    qi = class_rows()
    assert (m.bk_sv(qi, 1)[:, LIVING:] > 0).all()
    for t in (2, 3, 4):
        np.testing.assert_allclose(m.bk_sv(qi, t), bk_sv_table(), atol=1e-12)


def test_qi_pairs_refine_the_age_group_process(model):
    """The (QI class, age group) propagation behind BK_sv is the calibrated process itself: the
    same view size and individuals, the same first appearances once summed per age group."""
    classes, groups, shares, entry = qi_entry()
    assert len(classes) == 36 and shares.sum() == pytest.approx(1.0)
    g_shares, g_entry = class_entry()
    np.testing.assert_allclose(np.bincount(groups, weights=shares), g_shares, atol=1e-15)
    four = expected_process_counts(model._t3, g_shares, g_entry, 24, model.presence, histories=False)
    pairs = expected_process_counts(model._t3[groups], shares, entry, 24, model.presence, histories=False)
    assert pairs.view == pytest.approx(four.view, rel=1e-12)
    assert pairs.individuals == pytest.approx(four.individuals, rel=1e-12)
    summed = np.zeros_like(four.first)
    np.add.at(summed, (slice(None), groups), pairs.first)
    np.testing.assert_allclose(summed, four.first, rtol=1e-10, atol=1e-15)
    # expected first appearances over the views + the never-seen survivors = the individuals
    assert four.first.sum() == pytest.approx(four.individuals, rel=1e-10)


# ---------------------------------------------------------------------------- support
def test_every_first_appearance_of_a_24_release_run_has_positive_bk_sv():
    data = BKseq(BKseqParams(releases=24, tuples=1000))
    seen: set[int] = set()
    checked, leaving, excluded = 0, 0, []
    for release in data.releases(np.random.default_rng(7)):
        first = np.array([r not in seen for r in release.respondent.tolist()], dtype=bool)
        seen.update(release.respondent.tolist())
        bk = data.model.bk_sv(release.qi[first], release.t)
        p = bk[np.arange(int(first.sum())), release.sensitive[first]]
        excluded += [(release.t, int(v)) for v in release.sensitive[first][p <= 0]]
        checked += int(first.sum())
        leaving += int((release.sensitive[first] >= LIVING).sum())
    assert checked > 3_000 and leaving > 0  # ~3,230 individuals; first seen at a death or discharge: some
    assert excluded == [], f"{len(excluded)} first appearances outside BK_sv's support, e.g. {excluded[:5]}"


# ---------------------------------------------------------------------------- Monte Carlo
def z_scores(observed: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(observed - n p) / sqrt(n p (1 - p)), with the binomial SE floored at one count's worth
    (a cell expecting far less than one tuple may hold one)."""
    expected = n * p
    se = np.sqrt(np.maximum(n * p * (1.0 - p), 1.0))
    return (observed - expected) / se


@pytest.mark.parametrize("t", [1, 2, 5, 8])
def test_bk_sv_matches_monte_carlo_first_appearances(model, first_appearances, t):
    """Per QI class and value: the first tuples of view t over 4 seeds of 20,000-tuple views
    against ``bk_sv(·, t)`` — every cell within 5 binomial standard errors, and pooled over the
    classes (per value, Poisson-binomial SE) within 4.5. The admission law fails the same test
    (at release 1 massively; later through the deaths and discharges it excludes)."""
    counts = first_appearances[t - 1]
    n = counts.sum(axis=1, keepdims=True)
    assert n.min() >= (2_000 if t == 1 else 100)
    bk = model.bk_sv(class_rows(), t)
    cell = z_scores(counts, n, bk)
    worst = np.unravel_index(np.abs(cell).argmax(), cell.shape)
    assert np.abs(cell).max() < 5.0, f"release {t}: cell (class, value) {worst} z={cell[worst]:.2f}"
    pooled_obs = counts.sum(axis=0)
    pooled_exp = (n * bk).sum(axis=0)
    pooled_sd = np.sqrt(np.maximum((n * bk * (1.0 - bk)).sum(axis=0), 1.0))
    pooled = (pooled_obs - pooled_exp) / pooled_sd
    assert np.abs(pooled).max() < 4.5, f"release {t}: pooled z {np.round(pooled, 2).tolist()}"
    # power: the first tuples include deaths and discharges, which the admission law excludes
    assert pooled_obs[DISCHARGED] > 0 and pooled_obs[[DECEASED, DISCHARGED]].sum() >= (1_000 if t == 1 else 5)
    admission = bk_sv_table()
    assert (admission[:, LIVING:] == 0).all()
    assert np.abs(z_scores(counts, n, admission)).max() > 5.0  # measured: 261, 137, 28, 6.8 at t = 1, 2, 5, 8


# ---------------------------------------------------------------------------- the knowledge passes t
def test_knowledge_plugins_give_first_appearances_the_law_of_their_release():
    data = BKseq(BKseqParams(releases=3, tuples=300))
    releases = list(data.releases(np.random.default_rng(3)))
    registry = default_registry()
    for name in ("dk", "bayframe"):
        if name not in registry.names("knowledge"):
            continue
        for release in releases:
            k = registry.create("knowledge", name, {})  # nobody seen yet: every prior is BK_sv
            expected = data.model.bk_sv(release.qi, release.t)
            np.testing.assert_array_equal(k.prior(release), expected, err_msg=f"{name} t={release.t}")
