"""Knowledge (uniform, kernel prior) and estimators (frequency, Ω-estimate): hand-computed values
on tiny tables, a brute-force O(n²) oracle for the kernel prior, and properties."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cdpbench_classic.knowledge.kernel as knowledge_module
from cdpbench.errors import ConfigError
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.estimators.frequency import Frequency, frequency_posterior
from cdpbench_classic.knowledge.kernel import KernelPrior, KernelPriorParams, kernel_prior
from cdpbench_classic.knowledge.uniform import Uniform
from cdpbench_classic.estimators.omega import OmegaEstimate, omega_posterior

SENS = Sensitive("disease", ("a", "b", "c"))
# x1, x2 under X; y1 under Y; height 2
TAX = Taxonomy.from_paths([["x1", "X", "*"], ["x2", "X", "*"], ["y1", "Y", "*"]])


def release(qi: tuple, rows: list[tuple], sens: Sensitive = SENS):
    schema = Schema(qi, sens)
    cols = ["id", *[a.name for a in qi], sens.name]
    frame = pd.DataFrame([(i, *r) for i, r in enumerate(rows)], columns=cols)
    return schema.encode(frame, 1)


def fl(x) -> float:
    return float(x)


# ---------------------------------------------------------------------------- uniform
def test_uniform_prior_is_one_over_m_for_every_record():
    r = release((NumericQI("age", 0, 100),), [(20, "a"), (30, "b")])
    p = Uniform().prior(r)
    assert p.shape == (2, 3)
    assert np.allclose(p, 1 / 3)


# ---------------------------------------------------------------------------- kernel prior by hand
def test_kernel_prior_one_numeric_qi_by_hand():
    # ages 20, 30, 60 in [0, 100], B = 0.3: d(20,30) = 0.1 -> K = 1 - (0.1/0.3)^2 = 8/9;
    # d(30,60) = 0.3 = B -> K = 0 (edge of the support); d(20,60) = 0.4 -> 0.
    # r1: a with weight 1 (itself), b with 8/9 (r2); r2: b 1, a 8/9; r3: only itself.
    r = release((NumericQI("age", 0, 100),), [(20, "a"), (30, "b"), (60, "a")])
    p = kernel_prior(r, 0.3)
    expected = np.array([[9 / 17, 8 / 17, 0], [8 / 17, 9 / 17, 0], [1, 0, 0]])
    assert np.allclose(p, expected, atol=1e-12)


def test_kernel_prior_numeric_and_categorical_by_hand():
    # B = 0.6. age in [0, 100]; the categorical distance is LCA height / 2 (x1-x2: 0.5, x-y: 1).
    # r1 (20,x1,a) r2 (50,x2,b) r3 (20,y1,b) r4 (90,x1,c)
    # K(r1,r2) = (1 - (0.3/0.6)^2) (1 - (0.5/0.6)^2) = 3/4 * 11/36 = 11/48
    # K(r2,r4) = (1 - (0.4/0.6)^2) * 11/36 = 5/9 * 11/36 = 55/324
    # K(r1,r3) = 0 (categorical distance 1 >= B), every other pair: age distance >= 0.6 -> 0
    r = release(
        (NumericQI("age", 0, 100), CategoricalQI("tax", TAX)),
        [(20, "x1", "a"), (50, "x2", "b"), (20, "y1", "b"), (90, "x1", "c")],
    )
    p = kernel_prior(r, 0.6)
    k12, k24 = F(11, 48), F(55, 324)
    z2 = 1 + k12 + k24
    expected = [
        [F(1) / (1 + k12), k12 / (1 + k12), 0],
        [k12 / z2, 1 / z2, k24 / z2],
        [0, 1, 0],
        [0, k24 / (1 + k24), F(1) / (1 + k24)],
    ]
    assert np.allclose(p, np.array([[fl(x) for x in row] for row in expected]), atol=1e-12)
    assert np.allclose(p[0], [48 / 59, 11 / 59, 0])
    assert np.allclose(p[3], [0, 55 / 379, 324 / 379])


def test_kernel_prior_tiny_bandwidth_is_the_distribution_among_equal_qis():
    r = release(
        (NumericQI("age", 0, 100), CategoricalQI("tax", TAX)),
        [(20, "x1", "a"), (20, "x1", "a"), (20, "x1", "b"), (20, "x2", "c"), (21, "x1", "c")],
    )
    p = kernel_prior(r, 1e-6)
    assert np.allclose(p[:3], [2 / 3, 1 / 3, 0])
    assert np.allclose(p[3], [0, 0, 1])
    assert np.allclose(p[4], [0, 0, 1])


def test_kernel_prior_huge_bandwidth_tends_to_the_table_distribution():
    qi = (NumericQI("age", 0, 100), CategoricalQI("tax", TAX))
    r = release(qi, [(0, "x1", "a"), (100, "y1", "b"), (50, "x2", "b")])
    p = kernel_prior(r, 1e4)
    assert np.allclose(p, [1 / 3, 2 / 3, 0], atol=1e-6)


def test_kernel_prior_flat_taxonomy_only_equal_values_are_close_below_bandwidth_one():
    flat = Taxonomy.flat(["u", "v"])  # height 1: distance 0 or 1
    r = release((CategoricalQI("c", flat),), [("u", "a"), ("v", "b"), ("u", "c")])
    assert np.allclose(kernel_prior(r, 0.99), [[0.5, 0, 0.5], [0, 1, 0], [0.5, 0, 0.5]])
    # B = 2: distance 1 -> K = 1 - 1/4 = 3/4
    p = kernel_prior(r, 2.0)
    assert np.allclose(p[1], np.array([0.75, 1, 0.75]) / 2.5)


def test_kernel_prior_plugin_and_registry():
    r = release((NumericQI("age", 0, 100),), [(20, "a"), (30, "b"), (60, "a")])
    plugin = default_registry().create("knowledge", "kernel", {"bandwidth": 0.3})
    assert isinstance(plugin, KernelPrior)
    assert np.allclose(plugin.prior(r), kernel_prior(r, 0.3))
    assert isinstance(default_registry().create("knowledge", "uniform"), Uniform)


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf")])
def test_kernel_bandwidth_must_be_positive(bad):
    with pytest.raises(ConfigError, match=r"^bandwidth must be a number > 0 \(got") as e:
        KernelPriorParams(bandwidth=bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^knowledge\.bandwidth must be a number > 0"):
        default_registry().create("knowledge", "kernel", {"bandwidth": bad})
    r = release((NumericQI("age", 0, 100),), [(20, "a")])
    with pytest.raises(ConfigError, match="bandwidth"):
        kernel_prior(r, bad)


# ---------------------------------------------------------------------------- kernel prior vs brute force
def naive_kernel_prior(frame: pd.DataFrame, qi: list, paths: dict, values: list, b: float) -> np.ndarray:
    """O(n^2) double loop straight from the definition (LCA from the raw paths, not the Taxonomy)."""
    n, m = len(frame), len(values)
    out = np.zeros((n, m))
    for i in range(n):
        num = np.zeros(m)
        for j in range(n):
            w = 1.0
            for a in qi:
                x, y = frame[a.name].iloc[i], frame[a.name].iloc[j]
                if a.kind == "numeric":
                    d = abs(x - y) / (a.high - a.low)
                else:
                    px, py = paths[a.name][x], paths[a.name][y]
                    H = len(px) - 1
                    h = next(h for h in range(H + 1) if px[h:] == py[h:])
                    d = h / H
                w *= max(0.0, 1 - (d / b) ** 2) if d < b else 0.0
            num[values.index(frame["s"].iloc[j])] += w
        out[i] = num / num.sum()
    return out


@st.composite
def random_tables(draw):
    n_num = draw(st.integers(0, 2))
    n_cat = draw(st.integers(0 if n_num else 1, 2))
    qi, paths, cols = [], {}, {}
    n = draw(st.integers(1, 14))
    for j in range(n_num):
        a = NumericQI(f"n{j}", 0.0, float(draw(st.sampled_from([1, 10, 73]))))
        qi.append(a)
        cols[a.name] = draw(st.lists(st.integers(0, int(a.high)), min_size=n, max_size=n))
    for j in range(n_cat):
        height = draw(st.integers(1, 3))
        leaves = draw(st.integers(2, 6))
        fan = draw(st.integers(1, 3))
        ps = []
        for leaf in range(leaves):  # ancestor at level h: leaf // fan**h (root at the top)
            ps.append([f"v{leaf}"] + [f"L{h}_{leaf // fan ** h}" for h in range(1, height)] + ["*"])
        tax = Taxonomy.from_paths(ps)
        a = CategoricalQI(f"c{j}", tax)
        qi.append(a)
        paths[a.name] = {p[0]: p for p in ps}
        cols[a.name] = draw(st.lists(st.sampled_from([p[0] for p in ps]), min_size=n, max_size=n))
    m = draw(st.integers(2, 4))
    values = [f"s{i}" for i in range(m)]
    cols["s"] = draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))
    b = draw(st.sampled_from([0.05, 0.2, 1 / 3, 0.5, 0.75, 1.0, 1.5]))
    return qi, paths, values, pd.DataFrame(cols), b


@settings(max_examples=60, deadline=None)
@given(random_tables())
def test_kernel_prior_equals_brute_force(table):
    qi, paths, values, frame, b = table
    schema = Schema(tuple(qi), Sensitive("s", tuple(values)))
    frame = frame.assign(id=np.arange(len(frame)))
    rel = schema.encode(frame[schema.columns], 1)
    expected = naive_kernel_prior(frame, qi, paths, values, b)
    got = kernel_prior(rel, b)
    assert got.shape == expected.shape
    assert np.allclose(got.sum(axis=1), 1.0)
    assert np.allclose(got, expected, atol=1e-9)


def test_kernel_prior_in_small_blocks_equals_one_block(monkeypatch):
    rng = np.random.default_rng(3)
    ages, cats, values = rng.integers(0, 100, 200), rng.choice(["x1", "x2", "y1"], 200), rng.choice(list("abc"), 200)
    rows = [(int(a), str(c), str(s)) for a, c, s in zip(ages, cats, values)]
    r = release((NumericQI("age", 0, 100), CategoricalQI("tax", TAX)), rows)
    whole = kernel_prior(r, 0.4)
    monkeypatch.setattr(knowledge_module, "_PAIRS_PER_BLOCK", 7)
    assert np.allclose(kernel_prior(r, 0.4), whole, atol=1e-12)


# ---------------------------------------------------------------------------- frequency
def test_frequency_is_m_over_group_size():
    # group 0: a, a, b; group 1: c, b  (records interleaved)
    segment = np.array([0, 1, 0, 1, 0])
    sensitive = np.array([0, 2, 0, 1, 1])
    p = Frequency().posterior(None, sensitive, segment, 2, 3)
    g0, g1 = [2 / 3, 1 / 3, 0], [0, 1 / 2, 1 / 2]
    assert np.allclose(p, [g0, g1, g0, g1, g0])
    # weights are ignored
    assert np.allclose(Frequency().posterior(np.random.default_rng(0).random((5, 3)), sensitive, segment, 2, 3), p)


# ---------------------------------------------------------------------------- Ω-estimate
def test_omega_two_record_group_by_hand():
    # priors (0.8, 0.2) and (0.4, 0.6); published {a, b}: column sums a 1.2, b 0.8
    # Ω1 = (0.8/1.2, 0.2/0.8) = (2/3, 1/4) -> (8/11, 3/11); Ω2 = (1/3, 3/4) -> (4/13, 9/13)
    w = np.array([[0.8, 0.2], [0.4, 0.6]])
    p = omega_posterior(w, np.array([0, 1]), np.array([0, 0]), 1, 2)
    assert np.allclose(p, [[8 / 11, 3 / 11], [4 / 13, 9 / 13]])


def test_omega_three_record_group_and_two_groups_at_once_by_hand():
    # group 1 (three respondents) publishes {a, a, c}: n = (2, 0, 1); column sums a 0.8, c 1.3
    # Ω1 = (2*.5/.8, 0, 0) -> (1, 0, 0); Ω2 = (2*.2/.8, 0, .5/1.3) = (1/2, 0, 5/13) -> (13/23, 0, 10/23)
    # Ω3 = (2*.1/.8, 0, .8/1.3) = (1/4, 0, 8/13) -> (13/45, 0, 32/45)
    # group 0 is the two-record example above, on values a, b; rows interleaved with group 1's
    w = np.array([[0.5, 0.5, 0.0], [0.8, 0.2, 0.0], [0.2, 0.3, 0.5], [0.4, 0.6, 0.0], [0.1, 0.1, 0.8]])
    segment = np.array([1, 0, 1, 0, 1])
    sensitive = np.array([0, 0, 0, 1, 2])  # group 1: a, a, c; group 0: a, b
    p = OmegaEstimate().posterior(w, sensitive, segment, 2, 3)
    expected = [[1, 0, 0], [8 / 11, 3 / 11, 0], [13 / 23, 0, 10 / 23], [4 / 13, 9 / 13, 0], [13 / 45, 0, 32 / 45]]
    assert np.allclose(p, expected)


def test_omega_equal_priors_give_the_frequencies():
    w = np.tile([0.7, 0.2, 0.1], (4, 1))
    sensitive = np.array([1, 1, 2, 0])
    segment = np.array([0, 0, 0, 0])
    assert np.allclose(omega_posterior(w, sensitive, segment, 1, 3), [0.25, 0.5, 0.25])
    assert np.allclose(omega_posterior(None, sensitive, segment, 1, 3), [0.25, 0.5, 0.25])


def test_omega_degenerate_priors():
    # nobody in the group has prior mass on c: the c tuple is shared evenly (Ω(r, c) = 1/2)
    w = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    p = omega_posterior(w, np.array([0, 2]), np.array([0, 0]), 1, 3)
    # r1: Ω = (1, 0, 1/2) -> (2/3, 0, 1/3); r2: Ω = (0, 0, 1/2) -> (0, 0, 1)
    assert np.allclose(p, [[2 / 3, 0, 1 / 3], [0, 0, 1]])
    # r2's prior excludes both published values (a, b) -> r2 gets the group frequencies
    w = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    p = omega_posterior(w, np.array([0, 1]), np.array([0, 0]), 1, 3)
    assert np.allclose(p, [[0.5, 0.5, 0], [0.5, 0.5, 0]])


def test_omega_rejects_weights_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"weights must have shape"):
        omega_posterior(np.ones((2, 2)), np.array([0, 1, 1]), np.array([0, 0, 0]), 1, 2)


@st.composite
def random_groups(draw):
    n = draw(st.integers(1, 25))
    m = draw(st.integers(1, 5))
    G = draw(st.integers(1, min(n, 6)))
    segment = np.array(draw(st.lists(st.integers(0, G - 1), min_size=n, max_size=n)))
    sensitive = np.array(draw(st.lists(st.integers(0, m - 1), min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n * m, max_size=n * m))).reshape(n, m)
    return w, sensitive, segment, G, m


def naive_omega(w, sensitive, segment, G, m):
    """Per-group loops straight from the formula (with the documented fallbacks)."""
    out = np.zeros_like(w)
    for g in range(G):
        members = np.flatnonzero(segment == g)
        counts = np.bincount(sensitive[members], minlength=m).astype(float)
        freq = counts / len(members) if len(members) else counts
        for r in members:
            om = np.zeros(m)
            for s in range(m):
                col = w[members, s].sum()
                om[s] = counts[s] * w[r, s] / col if col > 0 else freq[s]
            out[r] = om / om.sum() if om.sum() > 0 else freq
    return out


@settings(max_examples=60, deadline=None)
@given(random_groups())
def test_omega_matches_a_per_group_loop_and_rows_sum_to_one(case):
    w, sensitive, segment, G, m = case
    p = omega_posterior(w, sensitive, segment, G, m)
    assert np.allclose(p, naive_omega(w, sensitive, segment, G, m))
    assert np.allclose(p.sum(axis=1), 1.0)
    # mass only on values published in the respondent's group
    counts = np.zeros((G, m))
    np.add.at(counts, (segment, sensitive), 1)
    assert np.all(p[counts[segment] == 0] == 0)
    # Frequency is the Ω-estimate with a uniform prior
    uniform = omega_posterior(np.ones_like(w), sensitive, segment, G, m)
    assert np.allclose(uniform, frequency_posterior(sensitive, segment, G, m))


def test_estimators_through_the_registry():
    reg = default_registry()
    assert isinstance(reg.create("estimator", "omega"), OmegaEstimate)
    assert isinstance(reg.create("estimator", "frequency"), Frequency)


# ---------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def adult():
    from cdpbench.datasets.adult import adult_release

    return adult_release(("age", "education", "marital-status", "race", "sex"), "occupation")


@pytest.mark.parametrize("b", [0.3, 0.7])
def test_kernel_prior_on_adult_matches_direct_sums_on_sampled_rows(adult, b):
    assert len(adult) == 30162
    prior = kernel_prior(adult, b)
    assert prior.shape == (30162, 14) and np.allclose(prior.sum(axis=1), 1.0)
    for i in np.random.default_rng(7).choice(len(adult), 15, replace=False):
        w = np.ones(len(adult))
        for j, a in enumerate(adult.schema.qi):
            if a.kind == "numeric":
                dist = np.abs(adult.qi[:, j] - adult.qi[i, j]) / a.width
            else:
                codes = adult.qi[:, j].astype(np.int64)
                level = a.taxonomy.covering_level(np.full(len(codes), int(adult.qi[i, j])), codes)
                dist = level / a.taxonomy.height
            w *= np.clip(1 - (dist / b) ** 2, 0, None)
        direct = np.bincount(adult.sensitive, weights=w, minlength=14)
        assert np.allclose(prior[i], direct / direct.sum(), atol=1e-12)
