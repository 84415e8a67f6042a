"""The Adult cumulative scenario of BCF §6 and its increments-only twin."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.datasets.validate import validated
from cdpbench.errors import ConfigError
from cdpbench_bcf.cumulative import CumulativeParams
from cdpbench_bcf.datasets.adult_cumulative import AdultCumulative
from cdpbench_bcf.datasets.adult_increments import AdultIncrements


def releases(cls, **kw):
    d = cls(CumulativeParams(**kw))
    return list(validated(d.releases(np.random.default_rng(0)), d.scenario))


def test_sen1_200d2():
    r1, r2 = releases(AdultCumulative, attributes="sen1", d2=200)
    assert (len(r1), len(r2)) == (15_060, 15_260)
    assert np.bincount(r2.time).tolist() == [0, 15_060, 200]
    assert r2.schema.qi_names == ["workclass", "education", "marital-status", "occupation", "relationship", "race", "sex"]
    assert r2.schema.sensitive.name == "native-country" and r2.schema.sensitive.size == 41
    assert r2.respondent[:15_060].tolist() == r1.respondent.tolist() == list(range(15_060))
    assert r2.respondent[15_060:].tolist() == list(range(15_060, 15_260))  # first 200 training rows
    # first test row: 25, Private, 11th, Never-married, Machine-op-inspct, Own-child, Black, Male, United-States
    row = r1.to_frame().iloc[0]
    assert (row["workclass"], row["education"], row["relationship"], row["native-country"]) == (
        "Private", "11th", "Own-child", "United-States")
    assert all(a.kind == "categorical" for a in r1.schema.qi)
    assert r1.schema.qi[4].taxonomy.height == 2  # cdpbench's relationship tree


def test_sen3_all_d2_and_three_releases():
    (r1, r2) = releases(AdultCumulative, attributes="sen3", d2=30_162)
    assert len(r2) == 45_222 and r2.schema.sensitive.size == 1758
    assert r2.schema.qi_names == ["workclass", "marital-status", "relationship", "race", "sex"]
    first = r2.to_frame().iloc[0]["native-country+education+occupation"]
    assert first == "United-States|11th|Machine-op-inspct"
    rs = releases(AdultCumulative, attributes="sen3", d2=2000, releases=3)
    assert [len(r) for r in rs] == [15_060, 17_060, 19_060]
    assert rs[2].schema.sensitive.size == 1758  # same domain whatever d2
    inc = releases(AdultIncrements, attributes="sen1", d2=2000, releases=3)
    assert [len(r) for r in inc] == [15_060, 2000, 2000]
    assert inc[2].respondent.min() == 15_060 + 2000 and set(inc[2].time.tolist()) == {3}


@pytest.mark.parametrize(
    "kw, field",
    [({"attributes": "sen2"}, "attributes"), ({"d2": -1}, "d2"), ({"releases": 0}, "releases"),
     ({"d2": 30_162, "releases": 3}, "d2"), ({"d2": 2.5}, "d2")],
)
def test_bad_parameters(kw, field):
    with pytest.raises(ConfigError, match=field):
        CumulativeParams(**kw)
