"""BayFrame's Bayesian estimator (§4.3.1, Def. 1, Eq. 2; Def. 4-6 and Example 4 for compromised
records): the paper's Examples 2-4 and Table 8 with exact numbers (specs/bayframe.md §1.1), a
brute-force enumeration of all n! permutations as the oracle of the closed form, the gain
property of §1.8, certain records, a group of 1,000 and the plugin's parameters."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench_bayframe.estimators.bayesian import (
    BayesianParams,
    CompromisedRecords,
    bayesian_posterior,
    closed_form_posterior,
    compromised_matchings,
    group_restricted_prior,
    observed_assignment,
)

# ---------------------------------------------------------------------------- Example 1 data
# QI-group 3 at t2: respondents Cayla, Dior, Elisa; tuples Cancer-II, GERD, Depression.
CII, GERD, DEP = 0, 1, 2
CAYLA, DIOR, ELISA = 0, 1, 2
GROUP3_VALUES = np.array([CII, GERD, DEP])  # row i lists the true tuple of respondent i
# Table 7, PD1_cor(to | from), columns GERD, Depression, Cancer-II
PD1 = {
    "Flu": (0.005, 0.001, 0.0001),
    "Gastric ulcer": (0.3, 0.01, 0.001),
    "Cancer-I": (0.002, 0.1, 0.6),
    "Bronchitis": (0.002, 0.003, 0.002),
    "Alzheimer": (0.002, 0.1, 0.002),
    "Diabetes-I": (0.005, 0.001, 0.0001),
}
GROUP1 = ("Bronchitis", "Alzheimer", "Cancer-I")  # Cayla's group at t1
GROUP2 = ("Gastric ulcer", "Flu", "Diabetes-I")  # Dior's and Elisa's group at t1
# Table 6, PD_sv of QI class (6*, F, 1204*)
TABLE6 = {
    "Flu": 0.12,
    "Gastric ulcer": 0.05,
    "Bronchitis": 0.05,
    "Alzheimer": 0.10,
    "Liver infection": 0.05,
    "Diabetes-I": 0.13,
    "Diabetes-II": 0.12,
    "GERD": 0.10,
    "Depression": 0.14,
    "Cancer-I": 0.09,
    "Cancer-II": 0.05,
}


def revised_prior(t1_group: tuple[str, ...]) -> np.ndarray:
    """Eq. 3 with d = 1 and the exact Table 8 posterior 1/3: RPD over (CII, GERD, Dep)."""
    gerd, dep, cii = (sum(PD1[s][k] for s in t1_group) / 3 for k in range(3))
    return np.array([cii, gerd, dep])


RAW_RPD = np.array([revised_prior(GROUP1), revised_prior(GROUP2), revised_prior(GROUP2)])
TABLE9 = RAW_RPD / RAW_RPD.sum(axis=1, keepdims=True)  # normalized over the group's values

# Table 11: the values given to (Cayla, Dior, Elisa) by each permutation
PM = np.array(
    [[CII, GERD, DEP], [CII, DEP, GERD], [GERD, CII, DEP], [GERD, DEP, CII], [DEP, CII, GERD], [DEP, GERD, CII]]
)


def gain(post_true: np.ndarray, m: np.ndarray, size: int) -> np.ndarray:
    """Eq. 8: |PB(v, s) − m/|Q|| / (1 − m/|Q|), or |1 − PB| when m = |Q|."""
    base = m / size
    return np.where(m == size, np.abs(1 - post_true), np.abs(post_true - base) / np.where(m == size, 1, 1 - base))


def group3_posterior(u_values: np.ndarray, matched: np.ndarray | None = None) -> np.ndarray:
    """Closed form for group 3 with the observed permutation injected (its values per respondent)."""
    counts = np.ones((1, 3))
    return closed_form_posterior(
        counts, np.zeros(3, dtype=np.int64), u_values, np.zeros((3, 3)) if matched is None else matched
    )


# ---------------------------------------------------------------------------- Examples 2-3, Tables 8-10
def test_example_3_table_9_normalized_revised_prior():
    assert RAW_RPD[CAYLA].tolist() == pytest.approx([0.20133, 0.00200, 0.06767], abs=5e-6)
    assert RAW_RPD[DIOR].tolist() == pytest.approx([0.00040, 0.10333, 0.00400], abs=5e-6)
    present = np.ones((3, 3), dtype=bool)
    table9 = group_restricted_prior(RAW_RPD, present)
    assert np.round(table9[CAYLA], 4).tolist() == [0.7429, 0.0074, 0.2497]
    assert np.round(table9[DIOR], 4).tolist() == [0.0037, 0.9592, 0.0371]
    assert table9[ELISA].tolist() == table9[DIOR].tolist()
    # values absent from the group (here Flu and Alzheimer with arbitrary mass) are dropped
    wide = np.hstack([RAW_RPD, np.array([[0.3, 0.0], [0.0, 0.5], [0.2, 0.2]])])
    wide_present = np.array([[True, True, True, False, False]] * 3)
    restricted = group_restricted_prior(wide, wide_present)
    assert np.allclose(restricted[:, :3], table9, atol=1e-15) and (restricted[:, 3:] == 0).all()
    # a row without mass on the group's values is uniform over them
    assert group_restricted_prior(np.array([[0.0, 0.0, 1.0]]), np.array([[True, True, False]])).tolist() == [
        [0.5, 0.5, 0.0]
    ]


def test_example_2_confidence_degrees_and_the_tie_between_pm0_and_pm1():
    cd = TABLE9[np.arange(3), PM].sum(axis=1)
    assert round(cd[0], 4) == 1.7392 and cd[1] == pytest.approx(cd[0], abs=1e-15)
    assert np.round(cd[2:], 4).tolist() == [0.0482, 0.0482, 1.2126, 1.2126]
    w = TABLE9[:, GROUP3_VALUES]  # w[i, j] = RPD of respondent i for the value of tuple j
    seen = set()
    for seed in range(20):
        u = observed_assignment(w, np.random.default_rng(seed))
        seen.add(tuple(GROUP3_VALUES[u]))
    assert seen == {tuple(PM[0]), tuple(PM[1])}  # the random relabelling reaches both maxima


def test_example_2_table_10_with_injected_u():
    post = group3_posterior(PM[0])
    assert np.allclose(post, np.where(np.eye(3, dtype=bool), 3 / 7, 2 / 7), rtol=0, atol=1e-15)
    assert post[CAYLA, CII] == pytest.approx(0.42857, abs=5e-6)
    assert np.allclose(gain(post[np.arange(3), GROUP3_VALUES], np.ones(3), 3), 1 / 7, atol=1e-15)
    swapped = group3_posterior(PM[1])  # Dior and Elisa swap, Cayla unchanged
    assert swapped[CAYLA].tolist() == post[CAYLA].tolist()
    assert swapped[DIOR, DEP] == pytest.approx(3 / 7, abs=1e-15) and swapped[ELISA, GERD] == pytest.approx(
        3 / 7, abs=1e-15
    )
    assert swapped[DIOR, GERD] == pytest.approx(2 / 7, abs=1e-15)


def test_example_2_full_estimator_gives_table_10_for_either_maximum():
    pm0, pm1 = group3_posterior(PM[0]), group3_posterior(PM[1])
    outcomes = set()
    for seed in range(20):
        for weights in (RAW_RPD, TABLE9):  # the normalization changes nothing here
            post = bayesian_posterior(weights, GROUP3_VALUES, np.zeros(3), 1, 3, rng=np.random.default_rng(seed))
            is_pm0, is_pm1 = np.allclose(post, pm0, atol=1e-15), np.allclose(post, pm1, atol=1e-15)
            assert is_pm0 or is_pm1
            outcomes.add(is_pm0)
    assert outcomes == {True, False}


def test_table_8_every_permutation_ties_at_t1_gives_uniform():
    names = list(TABLE6)
    pd_sv = np.array([TABLE6[s] for s in names])
    code = {s: k for k, s in enumerate(names)}
    sensitive = np.array([code[s] for s in GROUP1 + GROUP2])  # Alice..Cayla, Dior..Fiona
    segment = np.array([0, 0, 0, 1, 1, 1])
    weights = np.tile(pd_sv, (6, 1))  # all respondents share one PD_sv row
    for normalize in (True, False):
        post = bayesian_posterior(
            weights, sensitive, segment, 2, len(names), normalize=normalize, rng=np.random.default_rng(0)
        )
        want = np.zeros_like(post)
        for g in (0, 1):
            want[np.ix_(segment == g, sensitive[segment == g])] = 1 / 3
        assert np.array_equal(post, want)  # exactly 1/3, not 3/7 and 2/7
    w = np.tile(pd_sv[sensitive[:3]], (3, 1))
    cd = [w[np.arange(3), list(p)].sum() for p in itertools.permutations(range(3))]
    assert max(cd) - min(cd) < 1e-15  # .05 + .10 + .09 for every permutation
    assert observed_assignment(w, np.random.default_rng(0)) is None


# ---------------------------------------------------------------------------- Example 4
EXAMPLE4 = CompromisedRecords(np.array([DIOR, ELISA, ELISA]), np.array([GERD, CII, GERD]), np.array([0.97, 0.02, 0.03]))
PB_PM0 = np.array([[0.45387, 0.27214, 0.27399], [0.27214, 0.54336, 0.18450], [0.27399, 0.18450, 0.54151]])


def test_example_4_matchings_follow_def_6_with_the_extracted_entry():
    for prior in (TABLE9, RAW_RPD):  # same matchings with raw or normalized RPD (spec §1.8)
        matched = compromised_matchings(prior, np.ones((3, 3), dtype=bool), EXAMPLE4)
        want = np.zeros((3, 3))
        want[DIOR, GERD], want[ELISA, DEP] = 0.97, 0.95  # CR(Elisa, CII) = .02 > .003 is dropped too
        assert np.allclose(matched, want, atol=1e-15)
    # the Dirichlet parameters and expectations of Example 4 (u = pm0)
    alpha = 1 + 0.97 * (PM[:, DIOR] == GERD) + 0.95 * (PM[:, ELISA] == DEP)
    assert alpha.tolist() == pytest.approx([2.92, 1, 1.95, 1, 1, 1.97], abs=1e-14)
    expectation = (alpha + np.eye(6)[0]) / (alpha.sum() + 1)
    assert alpha.sum() + 1 == pytest.approx(10.84, abs=1e-14)
    assert expectation.tolist() == pytest.approx([0.36162, 0.09225, 0.17989, 0.09225, 0.09225, 0.18173], abs=5e-6)
    # Eq. 2 by summing the six permutations equals the closed form
    summed = np.array([[expectation[PM[:, v] == s].sum() for s in range(3)] for v in range(3)])
    assert np.allclose(group3_posterior(PM[0], matched), summed, atol=1e-15)


def test_example_4_posteriors_and_gains():
    matched = compromised_matchings(TABLE9, np.ones((3, 3), dtype=bool), EXAMPLE4)
    post = group3_posterior(PM[0], matched)
    assert np.allclose(post, PB_PM0, atol=5e-6)
    assert np.allclose(post.sum(axis=1), 1, atol=1e-15)
    assert gain(post[np.arange(3), GROUP3_VALUES], np.ones(3), 3).tolist() == pytest.approx(
        [0.18081, 0.31504, 0.31227], abs=5e-6
    )
    other = group3_posterior(PM[1], matched)
    assert other[DIOR, GERD] == pytest.approx(0.45111, abs=5e-6) and other[ELISA, DEP] == pytest.approx(
        0.44926, abs=5e-6
    )
    # keeping CR(Elisa, Cancer-II) = .02 as a matching would give .45221 / .54320 / .53952 instead
    kept = matched.copy()
    kept[ELISA, CII] = 0.02
    assert np.diag(group3_posterior(PM[0], kept)).tolist() == pytest.approx([0.45221, 0.54320, 0.53952], abs=5e-6)
    # the whole estimator, for every seed: u = pm0 or u = pm1
    for seed in range(10):
        full = bayesian_posterior(
            RAW_RPD, GROUP3_VALUES, np.zeros(3), 1, 3, rng=np.random.default_rng(seed), compromised=EXAMPLE4
        )
        assert np.allclose(full, post, atol=1e-15) or np.allclose(full, other, atol=1e-15)


def test_def_6_drops_equal_entries_and_spreads_the_remainder_by_rpd():
    prior = np.array([[0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]])
    present = np.ones((2, 4), dtype=bool)
    # CR(0, 0) = .2 < .4: extracted .8 over values 1..3 in proportion .3 : .2 : .1
    # CR(1, 2) = .25 = RPD: dropped, no knowledge
    entries = CompromisedRecords(np.array([0, 1]), np.array([0, 2]), np.array([0.2, 0.25]))
    matched = compromised_matchings(prior, present, entries)
    assert np.allclose(matched[0], [0, 0.4, 0.8 * 2 / 6, 0.8 / 6], atol=1e-15)
    assert (matched[1] == 0).all()
    # an extracted share not above its RPD is no matching: CR(0, 0) = .2 and CR(0, 1) = .6 give
    # a remainder .2 over values 2, 3 (2/15, 1/15), below RPD .2 and .1
    entries = CompromisedRecords(np.array([0, 0]), np.array([0, 1]), np.array([0.2, 0.6]))
    assert (compromised_matchings(prior, present, entries) == 0).all()
    # an entry on a value absent from the group neither matches nor triggers the extraction
    absent = np.array([[True, True, True, False]] * 2)
    entries = CompromisedRecords(np.array([0, 0]), np.array([3, 1]), np.array([0.05, 0.5]))
    assert np.allclose(compromised_matchings(prior, absent, entries)[0], [0, 0.5, 0, 0], atol=1e-15)


# ---------------------------------------------------------------------------- brute force
def enumerated_posteriors(prior, values, entries, a, normalize):
    """Every PB (Eq. 2) the paper's procedure may give for one group, by enumerating its n!
    permutations: one per maximal value assignment u (or the single one when all cd tie)."""
    n, m = prior.shape
    present = np.zeros(m, dtype=bool)
    present[values] = True
    rpd = prior.copy()
    if normalize:
        for v in range(n):
            total = sum(rpd[v, s] for s in range(m) if present[s])
            rpd[v] = [(rpd[v, s] / total if total > 0 else 1 / present.sum()) if present[s] else 0 for s in range(m)]
    matchings = []  # Def. 6 with Example 4's rule, respondent by respondent
    for v in range(n):
        mine = {s: c for row, s, c in entries if row == v}
        stated = {s: c for s, c in mine.items() if present[s]}
        if any(c < rpd[v, s] - 1e-12 for s, c in stated.items()):
            remainder = 1 - sum(stated.values())
            free = [s for s in range(m) if present[s] and s not in mine]
            total = sum(rpd[v, s] for s in free)
            stated = {s: remainder * (rpd[v, s] / total if total > 0 else 1 / len(free)) for s in free}
        matchings += [(v, s, c) for s, c in stated.items() if c > rpd[v, s] + 1e-12]
    perms = np.array(list(itertools.permutations(range(n))))  # perms[l, i] = tuple of respondent i
    got = values[perms]  # value respondent i receives in pm_l
    cd = rpd[np.arange(n), got].sum(axis=1)
    alpha = np.full(len(perms), float(a))
    for v, s, c in matchings:
        alpha += c * (got[:, v] == s)
    scale = np.abs(rpd[:, values]).max() * n
    if cd.max() - cd.min() <= 1e-9 * scale:
        observations = [None]  # every permutation ties: x = 0
    else:
        best = np.flatnonzero(cd >= cd.max() - 1e-9 * scale)
        _, first = np.unique(got[best], axis=0, return_index=True)
        observations = best[first].tolist()
    out = []
    for u in observations:
        x = np.zeros(len(perms)) if u is None else np.eye(len(perms))[u]
        expectation = (alpha + x) / (alpha.sum() + x.sum())  # Def. 1
        out.append(np.stack([(expectation[:, None] * (got == s)).sum(axis=0) for s in range(m)], axis=1))
    return out


def random_publication(seed: int):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 6))
    sizes = rng.integers(1, 8, int(rng.integers(1, 3)))
    segment = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(segment)  # rows of a group need not be contiguous
    N = len(segment)
    sensitive = rng.integers(0, max(1, m - int(rng.integers(0, 2))), N)  # repeats; sometimes a value absent everywhere
    weights = rng.random((N, m)) * rng.choice([1.0, 0.1, 7.0], size=(N, 1))
    weights[rng.random((N, m)) < 0.2] = 0.0
    shape = rng.integers(0, 4)
    if shape == 1:  # identical rows within the publication: every permutation ties
        weights[:] = weights[0]
    elif shape == 2:  # some identical rows: partial ties as in Example 2
        weights[rng.random(N) < 0.5] = weights[0]
    rows, values, confidences = [], [], []
    for i in range(N):
        if rng.random() < 0.6:
            k = int(rng.integers(1, min(3, m) + 1))
            rows += [i] * k
            values += rng.choice(m, k, replace=False).tolist()
            confidences += (rng.dirichlet(np.ones(k)) * rng.uniform(0.05, 0.99)).tolist()
    entries = CompromisedRecords(
        np.array(rows, dtype=np.int64), np.array(values, dtype=np.int64), np.array(confidences)
    )
    a = float(rng.choice([1.0, 0.5, 2.5]))
    return weights, sensitive, segment, len(sizes), m, entries, a, bool(rng.random() < 0.5)


def test_closed_form_equals_enumeration_of_all_permutations():
    sizes_seen = set()
    for seed in range(300):
        weights, sensitive, segment, G, m, entries, a, normalize = random_publication(seed)
        got = bayesian_posterior(
            weights,
            sensitive,
            segment,
            G,
            m,
            a=a,
            normalize=normalize,
            rng=np.random.default_rng(seed),
            compromised=entries,
        )
        assert np.allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-13)
        for g in range(G):
            members = np.flatnonzero(segment == g)
            sizes_seen.add(len(members))
            local = {int(r): k for k, r in enumerate(members)}
            group_entries = [(local[int(r)], int(s), float(c)) for r, s, c in zip(*entries) if int(r) in local]
            candidates = enumerated_posteriors(weights[members], sensitive[members], group_entries, a, normalize)
            assert any(np.allclose(got[members], want, rtol=0, atol=1e-12) for want in candidates), (seed, g)
    assert sizes_seen == set(range(1, 8))


def test_posterior_with_matchings_but_every_permutation_tied_keeps_the_cr_knowledge():
    # identical priors: x = 0, E(θ_l) = a_l / Σ a_l; a matching still moves the posterior
    weights = np.full((3, 3), 1 / 3)
    entries = CompromisedRecords(np.array([0]), np.array([2]), np.array([0.9]))
    post = bayesian_posterior(
        weights, np.array([0, 1, 2]), np.zeros(3), 1, 3, rng=np.random.default_rng(0), compromised=entries
    )
    # a_l = 1 + .9 for the 2 permutations giving respondent 0 value 2: Σ a = 6 + 1.8 = 7.8
    assert post[0, 2] == pytest.approx(2 * 1.9 / 7.8, abs=1e-15)
    assert post[1, 2] == pytest.approx(2 / 7.8, abs=1e-15) and post[1, 0] == pytest.approx(2.9 / 7.8, abs=1e-15)
    plain = bayesian_posterior(weights, np.array([0, 1, 2]), np.zeros(3), 1, 3, rng=np.random.default_rng(0))
    assert np.array_equal(plain, np.full((3, 3), 1 / 3))


# ---------------------------------------------------------------------------- the gain property
@pytest.mark.parametrize(
    "n, on_truth, expected",
    [(3, True, 1 / 7), (3, False, 1 / 14), (4, True, 1 / 25), (5, True, 1 / 121), (5, False, 1 / (4 * 121))],
)
def test_gain_without_cr_depends_only_on_whether_u_hits_the_truth(n, on_truth, expected):
    rng = np.random.default_rng(n)
    sensitive = np.arange(n)  # distinct values, row i lists respondent i's true tuple
    favourite = sensitive if on_truth else np.roll(sensitive, 1)  # u = identity or a derangement
    weights = rng.uniform(0.0, 0.1, (n, n))
    weights[np.arange(n), favourite] = rng.uniform(0.6, 0.9, n)
    post = bayesian_posterior(weights, sensitive, np.zeros(n), 1, n, rng=rng)
    g = gain(post[np.arange(n), sensitive], np.ones(n), n)
    assert np.allclose(g, expected, rtol=1e-12, atol=0)  # G = 1/(a n! + 1) resp. 1/((n−1)(a n! + 1))
    assert expected == pytest.approx(1 / ((1 if on_truth else n - 1) * (math.factorial(n) + 1)), rel=1e-15)


# ---------------------------------------------------------------------------- certain records
@pytest.mark.parametrize("certain_row, certain_value", [(2, 1), (0, 2)])
def test_certain_record_removes_the_respondent_and_one_tuple(certain_row, certain_value):
    rng = np.random.default_rng(11)
    sensitive = np.array([0, 1, 1, 2, 3, 0])
    segment = np.array([0, 0, 0, 0, 1, 1])
    weights = rng.random((6, 4))
    other = 1 if certain_row != 1 else 3  # another respondent of group 0 with an ordinary entry
    entries = CompromisedRecords(np.array([certain_row, other]), np.array([certain_value, 2]), np.array([1.0, 0.7]))
    post = bayesian_posterior(weights, sensitive, segment, 2, 4, rng=rng, compromised=entries)
    assert post[certain_row].tolist() == np.eye(4)[certain_value].tolist()
    rest = np.array([r for r in range(4) if r != certain_row])
    tuples = list(sensitive[:4])
    tuples.remove(certain_value)  # the reduced group's multiset
    local = {int(r): k for k, r in enumerate(rest)}
    reduced = bayesian_posterior(
        weights[rest],
        np.array(tuples),
        np.zeros(3),
        1,
        4,
        rng=np.random.default_rng(0),
        compromised=CompromisedRecords(np.array([local[other]]), np.array([2]), np.array([0.7])),
    )
    assert np.allclose(post[rest], reduced, rtol=0, atol=1e-15)
    assert post[rest][:, certain_value].sum() == pytest.approx(
        sensitive[:4].tolist().count(certain_value) - 1, abs=1e-12
    )
    alone = bayesian_posterior(weights[4:], sensitive[4:], np.zeros(2), 1, 4, rng=np.random.default_rng(0))
    assert np.allclose(post[4:], alone, atol=1e-15)  # the other group is untouched


def test_bad_compromised_records_are_refused_with_one_line():
    weights, sensitive, segment = np.ones((3, 3)), np.array([0, 1, 1]), np.zeros(3)
    cases = [
        ((np.array([0]), np.array([2]), np.array([1.0])), "no tuple left"),  # value 2 is not published
        ((np.array([0, 1]), np.array([1, 1]), np.array([1.0, 1.0])), None),  # two tuples of value 1: fine
        ((np.array([0, 1, 2]), np.array([1, 1, 1]), np.array([1.0, 1.0, 1.0])), "no tuple left"),
        ((np.array([0, 0]), np.array([0, 1]), np.array([0.6, 0.6])), "sum to at most 1"),
        ((np.array([0, 0]), np.array([1, 1]), np.array([0.2, 0.2])), "one entry per"),
        ((np.array([0]), np.array([0]), np.array([1.5])), "[0, 1]"),
        ((np.array([3]), np.array([0]), np.array([0.5])), "row"),
    ]
    for entries, message in cases:
        if message is None:
            post = bayesian_posterior(
                weights, sensitive, segment, 1, 3, rng=np.random.default_rng(0), compromised=entries
            )
            assert post[2].tolist() == [1.0, 0.0, 0.0]  # the only tuple left is value 0
            continue
        with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
            bayesian_posterior(weights, sensitive, segment, 1, 3, rng=np.random.default_rng(0), compromised=entries)
        assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------- u and scale
def test_observed_assignment_is_a_maximum_weight_permutation():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 7))
        w = np.round(rng.random((n, n)), 1)  # coarse values: many partial ties
        u = observed_assignment(w, rng)
        best = max(w[np.arange(n), list(p)].sum() for p in itertools.permutations(range(n)))
        if u is None:
            assert np.allclose(w - w[:, :1] - w[:1, :] + w[0, 0], 0)
        else:
            assert sorted(u.tolist()) == list(range(n)) and w[np.arange(n), u].sum() == pytest.approx(best, abs=1e-12)
    assert observed_assignment(np.add.outer([0.1, 0.5, 0.2], [0.3, 0.0, 0.7]), rng) is None  # w[i,j] = r_i + c_j ties


def test_group_of_1000_records():
    rng = np.random.default_rng(7)
    n, m = 1000, 17
    weights = rng.dirichlet(np.full(m, 0.3), size=n)
    sensitive = rng.integers(0, m, n)
    entries = CompromisedRecords(np.arange(0, n, 10), sensitive[::10], np.full(n // 10, 0.9))
    post = bayesian_posterior(weights, sensitive, np.zeros(n), 1, m, rng=rng, compromised=entries)
    assert post.shape == (n, m) and np.isfinite(post).all()
    assert np.allclose(post.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    counts = np.bincount(sensitive, minlength=m)
    assert np.allclose(post.sum(axis=0), counts, atol=1e-9)  # each tuple is someone's
    # 1/(n−1)! underflows: without CR the posterior is the frequencies exactly
    plain = bayesian_posterior(weights, sensitive, np.zeros(n), 1, m, rng=rng)
    assert np.allclose(plain, counts / n, rtol=0, atol=1e-15)


def test_many_groups_at_once_equal_each_group_alone():
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 9, 80)
    segment = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(segment)
    N, m = len(segment), 6
    weights = rng.random((N, m))  # no ties: u is unique, whatever the generator
    sensitive = rng.integers(0, m, N)
    together = bayesian_posterior(weights, sensitive, segment, len(sizes), m, rng=rng)
    for g in range(len(sizes)):
        members = np.flatnonzero(segment == g)
        alone = bayesian_posterior(weights[members], sensitive[members], np.zeros(len(members)), 1, m, rng=rng)
        assert np.allclose(together[members], alone, rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------- the plugin
def test_estimator_without_weights_gives_the_group_frequencies():
    estimator = default_registry().create("estimator", "bayesian")
    sensitive = np.array([0, 1, 1, 2, 2, 2, 3])
    segment = np.array([0, 0, 0, 1, 1, 2, 1])
    post = estimator.posterior(None, sensitive, segment, 3, 4)
    assert np.allclose(post[segment == 0], [1 / 3, 2 / 3, 0, 0], atol=1e-15)
    assert np.allclose(post[segment == 1], [0, 0, 2 / 3, 1 / 3], atol=1e-15)
    assert post[segment == 2].tolist() == [[0.0, 0.0, 1.0, 0.0]]
    with_prior = default_registry().create("estimator", "bayesian", {"a": 2.0}).posterior(RAW_RPD, GROUP3_VALUES, np.zeros(3), 1, 3)
    # a = 2: (2·2! + [u]) / (2·3! + 1) = 5/13 on the observed value
    assert with_prior[CAYLA].tolist() == pytest.approx([5 / 13, 4 / 13, 4 / 13], abs=1e-15)


def test_estimator_generator_is_seeded_on_the_instance():
    # Example 2's tie (pm0 / pm1) is broken by the instance's generator: same seed, same sequence;
    # the generator advances from call to call, so one instance reaches both maxima
    def dior_on_gerd(seed: int) -> list[bool]:
        estimator = default_registry().create("estimator", "bayesian", {"seed": seed})
        return [
            bool(estimator.posterior(RAW_RPD, GROUP3_VALUES, np.zeros(3), 1, 3)[DIOR, GERD] > 0.4) for _ in range(12)
        ]

    assert dior_on_gerd(4) == dior_on_gerd(4)
    assert set(dior_on_gerd(4)) == {True, False}


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"a": 0.0}, "a"),
        ({"a": float("inf")}, "a"),
        ({"a": True}, "a"),
        ({"normalize": 1}, "normalize"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": False}, "seed"),
    ],
)
def test_params_validation_names_the_field(kwargs, name):
    with pytest.raises(ConfigError) as err:
        BayesianParams(**kwargs)
    message = str(err.value)
    assert message.startswith(f"{name} must be") and "\n" not in message


def test_bad_weights_are_refused():
    with pytest.raises(DataError, match="weights must have shape"):
        bayesian_posterior(np.ones((2, 3)), np.array([0, 1, 2]), np.zeros(3), 1, 3, rng=np.random.default_rng(0))
    with pytest.raises(DataError, match="non-negative"):
        bayesian_posterior(-np.ones((3, 3)), np.array([0, 1, 2]), np.zeros(3), 1, 3, rng=np.random.default_rng(0))


def test_large_groups_skip_the_matching_without_changing_a_bit():
    """For n >= 20 (a = 1) the term 1/(n-1)! is below half an ulp of everything it is added to: the
    posterior computed with the observed u (forced here) equals the one without it, bit for bit."""
    rng = np.random.default_rng(11)
    for n, a in ((20, 1.0), (25, 1.0), (60, 2.5)):
        m = 6
        sensitive = rng.integers(0, m, n)
        weights = rng.dirichlet(np.ones(m), size=n)
        segment = np.zeros(n, dtype=np.int64)
        got = bayesian_posterior(weights, sensitive, segment, 1, m, a=a, rng=np.random.default_rng(0))
        counts = np.bincount(sensitive, minlength=m)[None, :]
        prior = group_restricted_prior(weights, np.broadcast_to(counts > 0, (n, m)))
        tuple_value = np.repeat(np.arange(m), counts[0])
        u = observed_assignment(prior[:, tuple_value], np.random.default_rng(0))
        assert u is not None
        forced = closed_form_posterior(counts, segment, tuple_value[u], np.zeros((n, m)), a)
        assert np.array_equal(got, forced)
    # and in a smaller group the matching matters (1/11! = 2.5e-8)
    n = 12
    sensitive = np.arange(n) % 6
    weights = np.eye(6)[sensitive] * 0.9 + 0.1 / 6
    got = bayesian_posterior(weights, sensitive, np.zeros(n, dtype=np.int64), 1, 6, rng=np.random.default_rng(0))
    counts = np.bincount(sensitive, minlength=6)[None, :]
    uniform = closed_form_posterior(counts, np.zeros(n, dtype=np.int64), np.full(n, -1), np.zeros((n, 6)), 1.0)
    assert not np.array_equal(got, uniform)


# ------------------------------------------------------------------ the paper's procedure (exact_up_to)
def _random_publication(rng, n_groups=12, m=5, low=1, high=9):
    sizes = rng.integers(low, high, n_groups)
    segment = np.repeat(np.arange(n_groups), sizes)
    sensitive = rng.integers(0, m, len(segment))
    weights = rng.dirichlet(np.ones(m), len(segment))
    return segment, sensitive, weights, sizes


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("threshold", [1, 2, 3, 5])
def test_exact_up_to_is_the_exact_form_below_and_the_omega_estimate_above(seed, threshold):
    """Groups of at most ``exact_up_to`` tuples get the exact posterior (bit for bit what the exact
    form gives those groups alone, the same generator stream for u), larger ones Li et al.'s
    Ω-estimate of the same (group-restricted) prior rows."""
    from cdpbench.registry import default_registry

    reg = default_registry()
    omega = reg.create("estimator", "omega", {})
    rng = np.random.default_rng(seed)
    segment, sensitive, weights, sizes = _random_publication(rng)
    m, G = weights.shape[1], len(sizes)
    got = bayesian_posterior(weights, sensitive, segment, G, m, rng=np.random.default_rng(7),
                             exact_up_to=threshold, large_groups=omega)
    small = sizes[segment] <= threshold
    if small.any():
        keep_groups = np.flatnonzero(sizes <= threshold)
        renumber = np.full(G, -1)
        renumber[keep_groups] = np.arange(len(keep_groups))
        exact = bayesian_posterior(weights[small], sensitive[small], renumber[segment[small]], len(keep_groups), m,
                                   rng=np.random.default_rng(7))
        np.testing.assert_array_equal(got[small], exact)
    if (~small).any():
        present = np.zeros((G, m), dtype=bool)
        present[segment, sensitive] = True
        restricted = group_restricted_prior(weights, present[segment])
        expected = omega.posterior(restricted[~small], sensitive[~small], segment[~small], G, m)
        np.testing.assert_allclose(got[~small], expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)


def test_exact_up_to_null_is_the_exact_form_bit_for_bit():
    rng = np.random.default_rng(3)
    segment, sensitive, weights, sizes = _random_publication(rng, n_groups=20, high=25)
    m, G = weights.shape[1], len(sizes)
    plain = bayesian_posterior(weights, sensitive, segment, G, m, rng=np.random.default_rng(1))
    none = bayesian_posterior(weights, sensitive, segment, G, m, rng=np.random.default_rng(1), exact_up_to=None)
    above_all = bayesian_posterior(weights, sensitive, segment, G, m, rng=np.random.default_rng(1),
                                   exact_up_to=int(sizes.max()), large_groups=object())  # never asked
    np.testing.assert_array_equal(plain, none)
    np.testing.assert_array_equal(plain, above_all)


def test_exact_up_to_with_a_certain_compromised_record_shrinks_the_group_first():
    """§4.4: a certain entry (CR = 1) leaves its group before the size is compared: a group of 3
    with one certain entry is a group of 2, exact under exact_up_to = 2."""
    from cdpbench.registry import default_registry

    omega = default_registry().create("estimator", "omega", {})
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    sensitive, segment = np.array([0, 1, 2]), np.zeros(3, dtype=int)
    certain = ([2], [2], [1.0])
    got = bayesian_posterior(weights, sensitive, segment, 1, 3, rng=np.random.default_rng(0), compromised=certain,
                             exact_up_to=2, large_groups=omega)
    exact = bayesian_posterior(weights, sensitive, segment, 1, 3, rng=np.random.default_rng(0), compromised=certain)
    np.testing.assert_array_equal(got, exact)
    omega_rows = bayesian_posterior(weights, sensitive, segment, 1, 3, rng=np.random.default_rng(0),
                                    compromised=certain, exact_up_to=1, large_groups=omega)
    np.testing.assert_array_equal(omega_rows[2], [0.0, 0.0, 1.0])  # the certain respondent, one-hot either way
    assert not np.allclose(omega_rows[:2], exact[:2])


def test_exact_up_to_from_a_config_reaches_the_attacker_and_its_estimator():
    from cdpbench.registry import default_registry

    reg = default_registry()
    est = reg.create("estimator", "bayesian", {"exact_up_to": 2, "large_groups": {"name": "frequency"}})
    assert est.params.exact_up_to == 2 and type(est.params.large_groups).__name__ == "Frequency"
    attacker = reg.create("attacker", "bayframe", {"estimator": {"name": "bayesian", "exact_up_to": 3}})
    assert attacker.params.estimator.params.exact_up_to == 3
    assert type(attacker.params.estimator.params.large_groups).__name__ == "OmegaEstimate"
    with pytest.raises(ConfigError, match=r"attacker.estimator.exact_up_to must be an integer >= 1 or null \(got 0\)"):
        reg.create("attacker", "bayframe", {"estimator": {"name": "bayesian", "exact_up_to": 0}}, "attacker")
