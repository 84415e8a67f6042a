"""The bkseq data set (JS-reduce §7.1 re-created): the calibration to the paper's history, the
exam schedule, the documented numbers, and the exactness of the knowledge it exposes (BK_sv,
1/2/3-step weekly BK_seq per age group, composed over gaps) against simulations and hand
computations from the published numbers.

Statistical checks use fixed seeds. Their tolerances: a frequency f estimated from n transitions
of a row whose exact probability is p is compared with |f - p| <= 5 sqrt(p (1 - p) / n) on rows
with n >= 200 (5 binomial standard deviations; the largest deviation measured was 3.0 sd over
the ~1,800 cells compared, while a first-order generator or a discharge probability 10 % off
gives 9-16 sd), and transitions of probability 0 must never occur. Chi-square tests of BK_sv
require p-value > 1e-4 per class.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from cdpbench.datasets.validate import validated
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench_jsreduce.datasets.bkseq import (
    DECEASED,
    DISCHARGED,
    LIVING,
    TRACKS,
    VALUES,
    AGE_GROUPS,
    FIBROSIS_6_MONTHS,
    BKseq,
    BKseqParams,
    bk_sv_table,
    build_model,
    class_entry,
    expected_process_counts,
    producible_windows,
    qi_class,
    seq_class,
    sepsis_daily_matrix,
    transition_tensors,
    weekly_disease_matrix,
)
from cdpbench_jsreduce.sequential_knowledge import over_weeks

M = len(VALUES)


@pytest.fixture(scope="module")
def dataset() -> BKseq:
    return BKseq()


@pytest.fixture(scope="module")
def releases(dataset):
    return list(validated(dataset.releases(np.random.default_rng(2012)), dataset.scenario))


def history(model, views: int, tuples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``([individuals, views] codes, -1 = no tuple; [individuals] transition class)``."""
    sim = model.simulate(views, tuples, np.random.default_rng(seed))
    return sim.history(), seq_class(sim.qi)


def ngram_counts(corpus: np.ndarray, steps: int, gap: int = 1) -> np.ndarray:
    """Counts of (``steps`` values in consecutive views, the value ``gap`` views after the last
    of them with no tuple in between), shape [19] * (steps + 1)."""
    flats = []
    for t in range(corpus.shape[1] - steps - gap + 1):
        block = corpus[:, t : t + steps]
        nxt = corpus[:, t + steps - 1 + gap]
        between = corpus[:, t + steps : t + steps - 1 + gap]
        ok = (block >= 0).all(axis=1) & (nxt >= 0) & (between < 0).all(axis=1)
        flat = np.zeros(int(ok.sum()), dtype=np.int64)
        for j in range(steps):
            flat = flat * M + block[ok, j]
        flats.append(flat * M + nxt[ok])
    return np.bincount(np.concatenate(flats), minlength=M ** (steps + 1)).reshape([M] * (steps + 1))


def assert_frequencies_match(counts: np.ndarray, exact: np.ndarray, min_rows: int = 200) -> int:
    """Compare row frequencies to exact rows (tolerance in the module docstring); returns the
    number of rows compared."""
    n = counts.sum(axis=-1, keepdims=True).astype(float)
    freq = counts / np.maximum(n, 1.0)
    big = n[..., 0] >= min_rows
    p, f, nb = exact[big], freq[big], np.broadcast_to(n, counts.shape)[big]
    assert (f[p == 0] == 0).all(), "a transition of probability 0 occurred"
    sd = np.sqrt(p * (1 - p) / nb)
    worst = np.abs(f - p) / np.where(sd > 0, sd, np.inf)
    assert worst.max() <= 5.0, f"frequency {worst.max():.1f} sd away from the exact row"
    return int(big.sum())


# ---------------------------------------------------------------------------- calibration and schedule
def test_calibration_to_the_papers_history_for_several_presences():
    """Acceptance: the defaults give 16,160 individuals over 24 views of ~5,000 (every view within
    5 %), and the share of a view's respondents present in the previous view is reported. Run with
    ``-s`` to see the table (it is in BKSEQ.md). Simulated totals are compared with the exact
    expectation (5 seeds: sd of one run ~80, so the mean is within 160 = 4.5 sd)."""
    print("\npresence  discharge  population  E[individuals]  mean of 5 seeds  views (min..max)  in previous view")
    for presence in (1.0, 0.75, 0.5, 0.35):
        model = build_model(24, 1.0, presence)
        expected = model.expected_individuals_per_tuple * 5000
        assert expected == pytest.approx(16_160, abs=1e-3)
        totals, sizes, shares = [], [], []
        for seed in range(5):
            sim = model.simulate(24, 5000, np.random.default_rng(seed))
            totals.append(len(sim.qi))
            sizes += [len(ids) for ids in sim.ids]
            shares += [np.isin(b, a).mean() for a, b in zip(sim.ids[:-1], sim.ids[1:])]
        assert abs(np.mean(totals) - 16_160) <= 160
        assert 4750 <= min(sizes) and max(sizes) <= 5250  # views of 5,000 +- 5 %
        assert abs(np.mean(sizes) - 5000) <= 50  # views of a run are correlated: 1 %
        print(f"{presence:8.2f}  {model.discharge:9.4f}  {model.population_per_tuple * 5000:10.0f}  {expected:14.0f}  "
              f"{np.mean(totals):15.0f}  {min(sizes):5d}..{max(sizes):5d}     {np.mean(shares):.3f}")
    assert BKseq().params.presence == 0.5  # the default is one of the rows above


def test_presence_is_the_share_of_weeks_with_an_exam(dataset):
    """Between two tuples of a respondent it was active (leaving is always recorded): the share of
    those interior weeks with a tuple estimates ``presence`` (binomial, 5 sd)."""
    corpus, _ = history(dataset.model, 24, 5000, 3)
    present = corpus >= 0
    first = present.argmax(axis=1)
    last = corpus.shape[1] - 1 - present[:, ::-1].argmax(axis=1)
    weeks = np.arange(corpus.shape[1])
    interior = (weeks[None, :] > first[:, None]) & (weeks[None, :] < last[:, None])
    n = interior.sum()
    share = present[interior].mean()
    assert abs(share - 0.5) <= 5 * np.sqrt(0.25 / n)
    # ... and with presence 1 every active individual has a tuple every week (no gap)
    full, _ = history(BKseq(BKseqParams(presence=1.0)).model, 24, 2000, 3)
    on = full >= 0
    f = on.argmax(axis=1)
    l_ = full.shape[1] - 1 - on[:, ::-1].argmax(axis=1)
    assert (on.sum(axis=1) == l_ - f + 1).all()


def test_views_hold_one_tuple_per_respondent_and_leaving_ends_a_history(releases):
    last_code: dict[int, int] = {}
    gaps = 0
    last_t: dict[int, int] = {}
    for r in releases:
        assert len(np.unique(r.respondent)) == len(r)
        assert (np.diff(r.respondent) > 0).all()
        for rid, code in zip(r.respondent.tolist(), r.sensitive.tolist()):
            if rid in last_code:
                assert last_code[rid] < LIVING, f"respondent {rid} has a tuple after {VALUES[last_code[rid]]}"
                gaps += r.t - last_t[rid] > 1
            last_code[rid], last_t[rid] = code, r.t
    assert gaps > 10_000  # presence 0.5: most respondents skip weeks
    # view 1 is a view of a running institute: it already holds deaths and discharges
    assert (releases[0].sensitive >= LIVING).sum() > 100


def test_truth_lists_the_model_inserted_and_deleted(releases, dataset):
    assert all(r.truth["model"] is dataset.model for r in releases)
    np.testing.assert_array_equal(releases[0].truth["inserted"], releases[0].respondent)
    seen = set(releases[0].respondent.tolist())
    for prev, cur in zip(releases, releases[1:]):
        np.testing.assert_array_equal(cur.truth["deleted"], prev.respondent[prev.sensitive >= LIVING])
        new = [r for r in cur.respondent.tolist() if r not in seen]
        assert cur.truth["inserted"].tolist() == new
        seen.update(new)


def test_qi_domains_and_fixed_per_individual(releases):
    schema = releases[0].schema
    assert schema.qi_names == ["age", "gender", "weight"]
    assert schema.qi[1].values == ("1", "2")
    assert schema.sensitive.values == VALUES and len(VALUES) == 19
    qi_of: dict[int, np.ndarray] = {}
    for r in releases:
        age, gender, weight = r.qi.T
        assert set(np.unique(age)) == set(range(45, 75))
        assert set(np.unique(gender)) == {0.0, 1.0}
        assert set(np.unique(weight)) == set(range(60, 90))
        for rid, row in zip(r.respondent[::50], r.qi[::50]):
            np.testing.assert_array_equal(qi_of.setdefault(int(rid), row), row)
    frame = releases[3].to_frame()
    assert list(frame.columns) == ["id", "age", "gender", "weight", "exam_result"]
    assert set(frame["gender"]) == {"1", "2"}


def test_same_seed_same_releases_other_seed_other_releases(dataset):
    a = list(dataset.releases(np.random.default_rng(5)))
    b = list(BKseq().releases(np.random.default_rng(5)))
    c = list(dataset.releases(np.random.default_rng(6)))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.respondent, y.respondent)
        np.testing.assert_array_equal(x.qi, y.qi)
        np.testing.assert_array_equal(x.sensitive, y.sensitive)
    assert not np.array_equal(a[0].sensitive, c[0].sensitive)


def test_registry_creates_it_with_validated_parameters():
    ds = default_registry().create("dataset", "bkseq", {"releases": 3, "tuples": 300, "individuals": 560})
    assert ds.model.expected_individuals_per_tuple * 300 == pytest.approx(560)
    assert ds.scenario == "continuous"
    assert all(abs(len(r) - 300) <= 60 for r in ds.releases(np.random.default_rng(0)))


def test_default_process_does_not_depend_on_the_run_length():
    # individuals=null: the discharge probability is the paper's calibration for any length
    d24 = BKseq().model.discharge
    for releases in (1, 2, 12):
        assert BKseq(BKseqParams(releases=releases, tuples=100)).model.discharge == d24
    # a set total calibrates on the run's own views: more individuals, more discharge
    assert BKseq(BKseqParams(releases=12, individuals=14_000)).model.discharge > d24
    # less presence, more patients per view tuple, less discharge for the same 16,160
    assert BKseq(BKseqParams(presence=1.0)).model.discharge > d24 > BKseq(BKseqParams(presence=0.35)).model.discharge


@pytest.mark.parametrize(
    "values, message",
    [
        ({"releases": 0}, "releases must be an integer >= 1 (got 0)"),
        ({"tuples": -5}, "tuples must be an integer >= 1 (got -5)"),
        ({"momentum": 0.5}, "momentum must be a number in [1, 10] (got 0.5)"),
        ({"presence": 0}, "presence must be a number in (0, 1] (got 0)"),
        ({"presence": 1.5}, "presence must be a number in (0, 1] (got 1.5)"),
        ({"presence": 0.3}, "presence must be a value at which 24 views of 5000 tuples can hold 16160 individuals: with presence=0.3 they hold 17376 to"),
        ({"individuals": 0}, "individuals must be an integer >= 1 (got 0)"),
        ({"releases": 3, "individuals": 100_000}, "individuals must be a value at which 3 views of 5000 tuples can hold 100000 individuals"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(values, message):
    escaped = message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(ConfigError, match=escaped):
        BKseqParams(**values)


def test_expected_counts_match_the_simulated_process():
    """The exact expected counts that calibrate the process against a simulation of it: mean view
    size and the number of weekly transitions seen in consecutive views (presence^2 of the weekly
    transitions of patients present both weeks, plus the admissions and leavers always seen)."""
    model = build_model(24, 1.0, 0.5)
    shares, entry = class_entry()
    counts = expected_process_counts(transition_tensors(1.0, model.discharge), shares, entry, 24, 0.5)
    assert counts.view * model.population_per_tuple == pytest.approx(1.0)
    sizes = [len(i) for i in model.simulate(24, 20_000, np.random.default_rng(1)).ids]
    assert np.mean(sizes) == pytest.approx(20_000, rel=0.003)


# ---------------------------------------------------------------------------- documented numbers
def test_weekly_matrix_reproduces_the_published_numbers():
    D = weekly_disease_matrix()
    assert D.shape == (17, 18)
    np.testing.assert_allclose(D.sum(axis=1), 1.0, atol=1e-12)
    # HIV (Longini): stage 2 mean 52.6 months -> 1 - exp(-7 / (52.6 * 30.4375 days)) = 0.00436
    assert D[6, 7] == pytest.approx(0.004362, abs=2e-6)
    assert D[8, DECEASED] == pytest.approx(1 - np.exp(-7 / (23.6 * 365.25 / 12)))
    # Alzheimer (Spackman): severe, annual death 0.480 -> weekly 1 - 0.52^(1/52) = 0.01250
    assert D[11, DECEASED] == pytest.approx(0.012496, abs=1e-6)
    # moderate: exits 0.07 + 0.214 + 0.215 = 0.499 a year, split in proportion
    weekly = 1 - 0.501 ** (1 / 52)
    assert D[10, 9] == pytest.approx(weekly * 0.07 / 0.499)
    assert D[10, DECEASED] == pytest.approx(weekly * 0.215 / 0.499)
    # liver: HCC -> death 0.427 and -> transplant 0.04 a year (competing)
    weekly = 1 - (1 - 0.467) ** (1 / 52)
    assert D[3, DECEASED] == pytest.approx(weekly * 0.427 / 0.467)
    # chronic -> cirrhosis, age 50-59 (the default group): 4 fibrosis stages at 0.0606 per 6 months
    # (PLoS One 2011): annual per stage 1 - 0.9394^2 = 0.1175, sojourn 8.0 years a stage, 32.0 in all
    assert D[0, 1] == pytest.approx(1 - np.exp(-1 / 32.0 / 52), rel=2e-3)
    # sepsis: Rangel-Frausto 1-day numbers, weekly = 7th power
    P = sepsis_daily_matrix()
    assert (P[2, 2], P[3, 3], P[4, 4]) == (0.65, 0.68, 0.61)
    assert (P[2, 3], P[3, 4], P[2, 5], P[3, 5], P[4, 5]) == (0.09, 0.026, 0.005, 0.009, 0.079)
    np.testing.assert_allclose(D[12:17][:, [12, 13, 14, 15, 16, DECEASED]], np.linalg.matrix_power(P, 7)[:5])
    # an individual keeps its track
    tracks = np.repeat(np.arange(4), [5, 4, 3, 5])
    assert (D[:, :17][tracks[:, None] != tracks[None, :]] == 0).all()


def test_bk_sv_table_rows_and_documented_class_effects():
    sv = bk_sv_table()
    assert sv.shape == (18, 19)
    np.testing.assert_allclose(sv.sum(axis=1), 1.0)
    assert (sv[:, :LIVING] > 0).all() and (sv[:, LIVING:] == 0).all()  # first exams: a stage
    share = {k: sv[:, list(c)].sum(axis=1).reshape(3, 3, 2) for k, c in TRACKS.items()}  # [age, weight, gender]
    assert (np.diff(share["alzheimer"], axis=0) > 0).all()  # Alzheimer rises with age
    assert (np.diff(share["hiv"], axis=0) < 0).all()  # HIV falls with age
    assert (share["hiv"][..., 0] > share["hiv"][..., 1]).all()  # more HIV among men ("1")
    assert (share["alzheimer"][..., 1] > share["alzheimer"][..., 0]).all()  # more Alzheimer among women
    # the 18 classes are clearly different: total variation >= 0.02 between any two
    tv = 0.5 * np.abs(sv[:, None, :] - sv[None, :, :]).sum(-1)
    assert tv[~np.eye(18, dtype=bool)].min() >= 0.02


def test_qi_class_bands_and_domain_errors(dataset):
    qi = np.array([[45, 0, 60], [54, 1, 69], [55, 0, 70], [64, 1, 79], [65, 0, 80], [74, 1, 89]], float)
    np.testing.assert_array_equal(qi_class(qi), [0, 1, 8, 9, 16, 17])
    np.testing.assert_array_equal(dataset.model.admission_sv(qi), bk_sv_table()[[0, 1, 8, 9, 16, 17]])
    # BK_sv, the law of a first tuple in view t (test_jsreduce_bkseq_first_appearance.py), is per class too
    same_class = qi + np.array([[9, 0, 9], [-9, 0, -9]] * 3)
    np.testing.assert_array_equal(dataset.model.bk_sv(same_class, 3), dataset.model.bk_sv(qi, 3))
    with pytest.raises(DataError, match="outside the domain"):
        qi_class(np.array([[44.0, 0, 60]]))
    with pytest.raises(DataError, match=r"shape \[n, 3\]"):
        qi_class(np.zeros((2, 2)))


def test_transitions_depend_on_age_through_fibrosis_only():
    """The only QI effect on transitions with a published number: fibrosis progression by age
    group (PLoS One 2011, men 40-49 / 50-59 / 60-69 / >=70; applied to both genders)."""
    Ds = [weekly_disease_matrix(g) for g in range(4)]
    for g, D in enumerate(Ds):
        annual_stage = 1 - (1 - FIBROSIS_6_MONTHS[g]) ** 2
        years = 4 / -np.log(1 - annual_stage)
        assert D[0, 1] == pytest.approx(1 - np.exp(-1 / years / 52), rel=1e-9)
        np.testing.assert_array_equal(np.delete(D, 0, axis=0), np.delete(Ds[0], 0, axis=0))  # nothing else moves
    assert Ds[0][0, 1] < Ds[1][0, 1] < Ds[2][0, 1] < Ds[3][0, 1]
    assert [a for a, _ in AGE_GROUPS] == [45, 50, 60, 70]
    ages = np.arange(45, 75, dtype=float)
    np.testing.assert_array_equal(seq_class(ages), np.repeat([0, 1, 2, 3], [5, 10, 10, 5]))


# ---------------------------------------------------------------------------- the exposed knowledge
def test_bk_seq_shapes_rows_and_read_only(dataset):
    model = dataset.model
    assert model.values == VALUES and model.max_order == 3 and model.n_seq_classes == 4
    for steps in (1, 2, 3):
        for cls in (None, 0, 1, 2, 3):
            table = model.bk_seq(steps, cls)
            assert table.shape == (19,) * (steps + 1)
            sums = table.sum(axis=-1)  # a distribution for a producible history, a zero row otherwise (Algorithm 5)
            assert np.all(np.isclose(sums, 1.0, atol=1e-12) | (sums == 0.0))
            assert (table >= 0).all()
            with pytest.raises(ValueError):
                table[(0,) * (steps + 1)] = 0.5
    # nothing follows "deceased" or "discharged"; a cross-track window (liver 0, then HIV 5, 5) and a
    # never-seen pair (liver 0 -> HIV 5) are impossible: zero rows, not backed off
    assert np.flatnonzero(model.bk_seq(1).sum(axis=-1) == 0).tolist() == [DECEASED, DECEASED + 1]
    assert not model.bk_seq(3)[0, 5, 5].any() and not model.bk_seq(2)[0, 5].any()
    assert np.array_equal(model.bk_seq(3, 1).sum(axis=-1) > 0, producible_windows(model.disease[1]))
    with pytest.raises(ConfigError, match="steps must be 1, 2 or 3"):
        model.bk_seq(4)
    with pytest.raises(ConfigError, match="seq_class must be 0..3"):
        model.bk_seq(1, 4)
    np.testing.assert_array_equal(model.observed, [0.5] * 17 + [1.0, 1.0])


def weekly_matrix(D: np.ndarray, discharge: float) -> np.ndarray:
    """``[19, 19]`` the first-order weekly chain by hand: a stage moves by D unless discharged."""
    W = np.zeros((M, M))
    W[:LIVING, :LIVING] = D[:, :LIVING] * (1 - discharge)
    W[:LIVING, DECEASED] = D[:, LIVING]
    W[:LIVING, DISCHARGED] = discharge * (1 - D[:, LIVING])
    return W


def test_default_chain_is_first_order_and_its_gap_tables_are_hand_computed(dataset):
    """No source gives a higher-order effect, so the default is a first-order weekly chain: every
    producible window ending in z has the row of z, and DK's table across g weeks is the g-week
    chain by hand (hidden weeks among the stages, the last week's stage seen with probability
    ``presence``, deaths and discharges always), renormalized."""
    model = dataset.model
    for cls in range(4):
        W = weekly_matrix(model.disease[cls], model.discharge)
        T3, T1 = model.bk_seq(3, cls), model.bk_seq(1, cls)
        np.testing.assert_allclose(T3[5, 6, 7], T3[7, 7, 7], atol=1e-15)
        np.testing.assert_allclose(T1[:LIVING], W[:LIVING], atol=1e-12)
        for g in (1, 2, 5):
            hand = np.linalg.matrix_power(W[:LIVING, :LIVING], g - 1) @ W[:LIVING] * model.observed
            hand /= hand.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(over_weeks(T1, g, model.observed)[:LIVING], hand, atol=1e-12)


def test_momentum_option_gives_a_hand_computed_three_step_dependence():
    """``momentum`` (an option; no source gives a number) multiplies the chance of moving on after
    recent progressions."""
    model = BKseq(BKseqParams(momentum=1.5)).model
    d = model.discharge
    T3, D = model.bk_seq(3, 1), model.disease[1]
    p = D[7, 8]  # HIV stage 3 -> AIDS: first-order p, x1.5 after one progression, x2.25 after two
    assert T3[7, 7, 7, 8] == pytest.approx(p * (1 - d))
    assert T3[6, 6, 7, 8] == pytest.approx(1.5 * p * (1 - d))
    assert T3[5, 6, 7, 8] == pytest.approx(2.25 * p * (1 - d))
    assert T3[5, 6, 7, 7] == pytest.approx((D[7, 7] - 1.25 * p) * (1 - d))  # the extra comes from staying
    assert T3[5, 6, 7, DISCHARGED] == pytest.approx(d * (1 - D[7, DECEASED]))
    assert T3[9, 9, 10, 11] == pytest.approx(1.5 * T3[10, 10, 10, 11])


def test_observed_transitions_per_age_group_match_the_knowledge():
    """What an adversary can see — a value, then the respondent's next tuple g views later — against
    DK's table for the respondent's age group composed over g weeks, on a large simulation
    (24 views of 40,000; tolerance in the module docstring). The same frequencies differ from the
    uncomposed weekly table (g = 2) and from the table without the exam schedule (g = 1)."""
    model = BKseq().model
    corpus, cls = history(model, 24, 40_000, 7)
    compared = 0
    for c in range(4):
        mine = corpus[cls == c]
        for g in (1, 2):
            table = over_weeks(model.bk_seq(1, c), g, model.observed)
            compared += assert_frequencies_match(ngram_counts(mine, 1, g), table)
    assert compared >= 40
    counts = ngram_counts(corpus[cls == 1], 1, 2)
    with pytest.raises(AssertionError):
        assert_frequencies_match(counts, over_weeks(model.bk_seq(1, 1), 1, model.observed))
    with pytest.raises(AssertionError):
        assert_frequencies_match(ngram_counts(corpus[cls == 1], 1, 1), model.bk_seq(1, 1))


def test_three_consecutive_values_give_the_exact_three_step_row():
    """With momentum, three tuples in consecutive weeks are the true window: the next week's value
    follows the class's exact 3-step row (weighted by the exam schedule)."""
    model = BKseq(BKseqParams(momentum=1.5, presence=0.75)).model
    corpus, cls = history(model, 24, 40_000, 8)
    compared = sum(
        assert_frequencies_match(ngram_counts(corpus[cls == c], 3), over_weeks(model.bk_seq(3, c), 1, model.observed))
        for c in range(4)
    )
    assert compared >= 40


def test_first_values_follow_bk_sv_per_class(dataset):
    model = dataset.model
    sim = model.simulate(6, 40_000, np.random.default_rng(11))  # ~8,000 admissions a week at presence 0.5
    first = np.full(len(sim.qi), -1)
    for ids, codes in zip(sim.ids[::-1], sim.codes[::-1]):  # ends with each individual's first tuple
        first[ids] = codes
    admitted = sim.admitted >= 1  # admitted during the views: the first tuple is the admission exam
    assert admitted.sum() > 5_000
    classes = qi_class(sim.qi[admitted])
    values = first[admitted]
    sv = bk_sv_table()
    for c in range(18):
        observed = np.bincount(values[classes == c], minlength=19)[:LIVING]
        expected = sv[c, :LIVING] * observed.sum()
        small = expected < 5
        obs = np.append(observed[~small], observed[small].sum())
        exp = np.append(expected[~small], expected[small].sum())
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-4, f"class {c}"


def test_corpus_shape_codes_and_seed(dataset):
    a = dataset.model.corpus(6, 500, 3)
    assert a.dtype == np.int64 and a.shape[1] == 6
    assert ((a >= -1) & (a < 19)).all()
    assert (np.abs((a >= 0).sum(axis=0) - 500) <= 100).all()  # views of about 500 tuples
    assert ((a >= 0).any(axis=1)).all()  # every individual has a tuple
    np.testing.assert_array_equal(a, dataset.model.corpus(6, 500, 3))
    assert not np.array_equal(a[:300], dataset.model.corpus(6, 500, 4)[:300])


def test_calibration_is_remembered_across_processes_as_the_same_float(tmp_path, monkeypatch):
    import cdpbench_jsreduce.datasets.bkseq as bkseq

    monkeypatch.setenv("CDPBENCH_CACHE_DIR", str(tmp_path))
    args = (1.0, 0.5, 24, 16_160 / 5_000)
    exact = bkseq.calibrate_discharge(*args)
    assert bkseq.cached_discharge(*args) == exact  # computed and stored
    assert len(list(tmp_path.rglob("*.json"))) == 1

    def refuse(*a):
        raise AssertionError("calibrated again although remembered")

    monkeypatch.setattr(bkseq, "calibrate_discharge", refuse)
    assert bkseq.cached_discharge(*args) == exact  # read back, bit for bit
    with pytest.raises(AssertionError):
        bkseq.cached_discharge(1.0, 0.6, 24, 16_160 / 5_000)  # another key is not found
