"""``base=synthetic`` of KSAA's ``adult_sequential`` and BCF's ``adult_cumulative`` /
``adult_increments`` (issue #28: every scenario at any size): the respondents are rows of
:func:`cdpbench.datasets.synthetic.synthetic_adult` drawn from the run's generator; ``base=adult``
(the default) gives the releases it always gave."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cdpbench.datasets.adult import ADULT_ROWS, ADULT_TEST_ROWS, adult_schema, load_adult
from cdpbench.datasets.synthetic import synthetic_adult
from cdpbench.datasets.validate import validated
from cdpbench.errors import ConfigError
from cdpbench.registry import Registry
from cdpbench_bcf.cumulative import ATTRIBUTE_SETS, SEN3_PARTS, CumulativeParams, cumulative_table
from cdpbench_bcf.datasets.adult_cumulative import AdultCumulative
from cdpbench_bcf.datasets.adult_increments import AdultIncrements
from cdpbench_ksaa.datasets.adult_sequential import DEFAULT_QI_SETS, AdultSequential, AdultSequentialParams

ABOVE_ADULT = 40_000  # more respondents than Adult's 30,162 complete rows


def sequential(seed: int = 0, **kw) -> list:
    d = AdultSequential(AdultSequentialParams(**kw))
    return list(validated(d.releases(np.random.default_rng(seed)), d.scenario))


def bcf(cls, seed: int = 0, **kw) -> list:
    d = cls(CumulativeParams(**kw))
    return list(validated(d.releases(np.random.default_rng(seed)), d.scenario))


def same(a: list, b: list) -> bool:
    """Two lists of releases hold the same records, schemas and truth."""
    return len(a) == len(b) and all(
        x.t == y.t and x.schema == y.schema and np.array_equal(x.respondent, y.respondent)
        and np.array_equal(x.qi, y.qi) and np.array_equal(x.sensitive, y.sensitive)
        and (x.time is None) == (y.time is None) and (x.time is None or np.array_equal(x.time, y.time))
        and x.truth.keys() == y.truth.keys() and all(np.array_equal(x.truth[k], y.truth[k]) for k in x.truth)
        for x, y in zip(a, b)
    )


# ---------------------------------------------------------------------------- adult_sequential
def literal_sequential(records: int, releases: int, qi_sets, sensitive: str, update_rate: float, seed: int) -> list:
    """``base=adult`` as written before the synthetic base: the first ``records`` Adult rows, each
    release encoded on its own, the updates drawn from the generator release by release."""
    rng = np.random.default_rng(seed)
    base = load_adult(with_zip="zip" in {q for s in qi_sets for q in s}).head(records)
    base = base.assign(id=np.arange(len(base), dtype=np.int64))
    out, values = [], None
    for t in range(1, releases + 1):
        schema = adult_schema(list(qi_sets[(t - 1) % len(qi_sets)]), sensitive)
        rel = schema.encode(base[schema.columns], t)
        updated = np.zeros(0, dtype=np.int64)
        if values is None:
            values = rel.sensitive.copy()
        else:
            n_up = int(round(update_rate * len(values)))
            updated = np.sort(rng.choice(len(values), size=n_up, replace=False)).astype(np.int64)
            values[updated] = rng.integers(0, rel.n_values, size=n_up)
        rel.sensitive = values.copy()
        rel.truth = {"updated": rel.respondent[updated]}
        out.append(rel)
    return out


@pytest.mark.parametrize(
    "kw",
    [{}, {"records": 700, "releases": 4, "update_rate": 0.5},
     {"records": 300, "qi_sets": [["age", "zip"], ["zip", "sex", "race"]], "sensitive": "salary-class"}],
)
def test_sequential_adult_base_is_unchanged(kw):
    p = AdultSequentialParams(**kw)
    assert p.base == "adult"
    for seed in (0, 5):
        assert same(sequential(seed, **kw), literal_sequential(p.records, p.releases, p.qi_sets, p.sensitive,
                                                               p.update_rate, seed))
    assert same(sequential(1, base="adult", **kw), sequential(1, **kw))


def test_sequential_synthetic_above_adult_size():
    rs = sequential(3, base="synthetic", records=ABOVE_ADULT, releases=4)
    assert [len(r) for r in rs] == [ABOVE_ADULT] * 4
    assert [r.schema.qi_names for r in rs] == [*DEFAULT_QI_SETS, DEFAULT_QI_SETS[0]]
    assert all(r.schema.sensitive.name == "occupation" and r.respondent.tolist() == list(range(ABOVE_ADULT))
               for r in rs)
    # the respondents are synthetic_adult's rows drawn first from the run's generator
    columns = ["sex", "race", "education", "marital-status", "workclass", "occupation"]
    drawn = synthetic_adult(ABOVE_ADULT, columns, np.random.default_rng(3))
    for r in rs:
        frame = r.to_frame()
        for q in r.schema.qi_names:
            assert frame[q].tolist() == drawn[q].tolist()
    assert rs[0].to_frame()["occupation"].tolist() == drawn["occupation"].tolist()
    # before each later release, round(0.1 n) respondents re-drawn; nobody else changes
    for before, after in zip(rs, rs[1:]):
        updated = after.truth["updated"]
        assert len(updated) == ABOVE_ADULT // 10 and np.all(np.diff(updated) > 0)
        changed = np.flatnonzero(before.sensitive != after.sensitive)
        assert np.isin(changed, updated).all() and len(changed) > 0.8 * len(updated)  # 14 occupations


def test_sequential_synthetic_same_seed_same_releases_and_zip():
    kw = {"base": "synthetic", "records": 2_000, "qi_sets": [["age", "zip"], ["sex", "zip"]], "releases": 3}
    a, b, c = sequential(7, **kw), sequential(7, **kw), sequential(8, **kw)
    assert same(a, b) and not same(a, c)
    drawn = synthetic_adult(2_000, ["age", "zip", "sex", "occupation"], np.random.default_rng(7))
    frame = a[1].to_frame()
    assert frame["zip"].tolist() == drawn["zip"].tolist() and frame["sex"].tolist() == drawn["sex"].tolist()
    assert a[0].to_frame()["age"].tolist() == drawn["age"].astype(float).tolist()


def test_sequential_synthetic_one_respondent():
    (r,) = sequential(0, base="synthetic", records=1, releases=1)
    assert len(r) == 1 and r.respondent.tolist() == [0]


@pytest.mark.parametrize(
    "kw, field",
    [({"base": "uci"}, "base"), ({"base": "synthetic", "records": 0}, "records"),
     ({"base": "synthetic", "records": 1.5}, "records"), ({"records": ADULT_ROWS + 1}, "records"),
     ({"base": "adult", "records": ABOVE_ADULT}, "records")],
)
def test_sequential_bad_values(kw, field):
    with pytest.raises(ConfigError) as e:
        AdultSequentialParams(**kw)
    msg = str(e.value)
    assert msg.startswith(f"{field} must be") and "\n" not in msg, msg
    if kw.get("records") == ABOVE_ADULT:
        assert "base=synthetic" in msg  # says where a larger table comes from


def test_sequential_synthetic_through_the_registry():
    d = Registry().create("dataset", "adult_sequential", {"base": "synthetic", "records": ABOVE_ADULT})
    assert d.params.base == "synthetic" and d.params.records == ABOVE_ADULT
    with pytest.raises(ConfigError, match=r"^dataset\.base must be one of \['adult', 'synthetic'\]"):
        Registry().create("dataset", "adult_sequential", {"base": "bootstrap"})


# ---------------------------------------------------------------------------- adult_cumulative / adult_increments
def test_cumulative_synthetic_sizes_times_and_rows():
    rs = bcf(AdultCumulative, 2, base="synthetic", r1=ABOVE_ADULT, d2=4_000, releases=3)
    assert [len(r) for r in rs] == [ABOVE_ADULT, 44_000, 48_000]
    assert np.bincount(rs[2].time).tolist() == [0, ABOVE_ADULT, 4_000, 4_000]
    assert rs[2].respondent.tolist() == list(range(48_000))
    assert rs[1].respondent.tolist() == list(range(44_000)) and rs[0].respondent.tolist() == list(range(ABOVE_ADULT))
    schema, _ = cumulative_table("sen1")
    assert all(r.schema == schema for r in rs)
    qi, sensitive = ATTRIBUTE_SETS["sen1"]
    drawn = synthetic_adult(48_000, [*qi, sensitive], np.random.default_rng(2))
    frame = rs[2].to_frame()
    for c in (*qi, sensitive):
        assert frame[c].tolist() == drawn[c].tolist()
    inc = bcf(AdultIncrements, 2, base="synthetic", r1=ABOVE_ADULT, d2=4_000, releases=3)
    assert [len(r) for r in inc] == [ABOVE_ADULT, 4_000, 4_000]
    assert inc[2].respondent.tolist() == list(range(44_000, 48_000)) and set(inc[2].time.tolist()) == {3}
    assert np.array_equal(inc[1].qi, rs[1].qi[rs[1].time == 2])


def test_cumulative_synthetic_sen3_and_default_r1():
    rs = bcf(AdultCumulative, 4, base="synthetic", attributes="sen3", d2=50)
    assert [len(r) for r in rs] == [ADULT_TEST_ROWS, ADULT_TEST_ROWS + 50]  # r1 null: adult.test's size
    assert rs[1].schema.sensitive.size == 1758  # base=adult's domain
    qi, sensitive = ATTRIBUTE_SETS["sen3"]
    drawn = synthetic_adult(ADULT_TEST_ROWS + 50, [*qi, *SEN3_PARTS], np.random.default_rng(4))
    triples = drawn[list(SEN3_PARTS)].agg("|".join, axis=1)
    frame = rs[1].to_frame()
    assert frame[sensitive].tolist() == triples.tolist()
    assert frame["workclass"].tolist() == drawn["workclass"].tolist()


def test_cumulative_synthetic_same_seed_same_releases_any_d2():
    kw = {"base": "synthetic", "r1": 500, "d2": 20_000, "releases": 3}  # (releases - 1) x d2 > adult.data
    a, b, c = bcf(AdultCumulative, 9, **kw), bcf(AdultCumulative, 9, **kw), bcf(AdultCumulative, 10, **kw)
    assert same(a, b) and not same(a, c)
    assert [len(r) for r in a] == [500, 20_500, 40_500]
    (only,) = bcf(AdultIncrements, 9, base="synthetic", r1=1, d2=0, releases=1)
    assert len(only) == 1


def test_cumulative_adult_base_is_unchanged():
    """base=adult ignores the generator: D1 = adult.test, D2 = the first d2 rows of adult.data."""
    for attributes in ("sen1", "sen3"):
        schema, frame = cumulative_table(attributes)
        rs = bcf(AdultCumulative, 0, attributes=attributes, d2=300, releases=3)
        assert same(rs, bcf(AdultCumulative, 1, base="adult", attributes=attributes, d2=300, releases=3))
        expected = schema.encode(frame.head(ADULT_TEST_ROWS + 600).assign(
            time=np.repeat([1, 2, 3], [ADULT_TEST_ROWS, 300, 300])), 3)
        assert np.array_equal(rs[2].qi, expected.qi) and np.array_equal(rs[2].sensitive, expected.sensitive)
        assert np.array_equal(rs[2].respondent, np.arange(ADULT_TEST_ROWS + 600))
    test, train = load_adult(split="test"), load_adult(split="train")
    sen3 = cumulative_table("sen3")[1]["native-country+education+occupation"]
    both = pd.concat([test, train], ignore_index=True)
    assert sen3.tolist() == (both["native-country"] + "|" + both["education"] + "|" + both["occupation"]).tolist()


@pytest.mark.parametrize(
    "kw, field",
    [({"base": "uci"}, "base"), ({"base": "synthetic", "r1": 0}, "r1"), ({"base": "synthetic", "r1": 2.5}, "r1"),
     ({"base": "synthetic", "r1": True}, "r1"), ({"base": "synthetic", "d2": -1}, "d2"), ({"r1": 5_000}, "r1"),
     ({"base": "adult", "d2": 30_162, "releases": 3}, "d2")],
)
def test_cumulative_bad_values(kw, field):
    with pytest.raises(ConfigError) as e:
        CumulativeParams(**kw)
    msg = str(e.value)
    assert msg.startswith(f"{field} must be") and "\n" not in msg, msg


def test_cumulative_params_help_names_the_synthetic_base():
    helps = {f: CumulativeParams.__dataclass_fields__[f].metadata["help"] for f in ("base", "r1", "d2")}
    assert "synthetic" in helps["base"] and "only with base=synthetic" in helps["r1"]
    assert "synthetic" in AdultSequentialParams.__dataclass_fields__["base"].metadata["help"]
