"""The core data sets: Adult and its continuous scenario, the churn process, CSV/Parquet releases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.datasets.adult import (
    ADULT_COLUMNS,
    AdultContinuous,
    AdultContinuousParams,
    adult_schema,
    load_adult,
)
from cdpbench.datasets.churn import Churn, ChurnParams, churn_process, plan_churn
from cdpbench.datasets.csvfiles import CsvReleases, CsvReleasesParams
from cdpbench.datasets.validate import validated
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI


def ids(release) -> set[int]:
    return set(release.respondent.tolist())


def by_id(release) -> dict[int, tuple]:
    """respondent -> (QI row, sensitive code)."""
    return {int(r): (tuple(q), int(s)) for r, q, s in zip(release.respondent, release.qi, release.sensitive)}


# ---------------------------------------------------------------------------- Adult
def test_adult_loads_30162_complete_rows():
    adult = load_adult()
    assert adult.shape == (30_162, 15)
    assert list(adult.columns) == list(ADULT_COLUMNS)
    assert not (adult.astype(str) == "?").any().any()
    # the first record of adult.data, and known totals of the cleaned file
    assert adult.loc[0, ["age", "workclass", "education", "occupation", "sex"]].tolist() == [
        39, "State-gov", "Bachelors", "Adm-clerical", "Male"
    ]
    assert (adult["sex"] == "Male").sum() == 20_380
    assert adult["occupation"].nunique() == 14
    assert adult["age"].min() == 17 and adult["age"].max() == 90


def test_adult_test_split_loads_15060_complete_rows():
    test = load_adult(split="test")
    assert test.shape == (15_060, 15) and list(test.columns) == list(ADULT_COLUMNS)
    assert not (test.astype(str) == "?").any().any()
    # the first record of adult.test (after its "|1x3 Cross validator" header line)
    assert test.loc[0].tolist() == [25, "Private", 226802, "11th", 7, "Never-married", "Machine-op-inspct", "Own-child",
                                    "Black", "Male", 0, 0, 40, "United-States", "<=50K"]
    assert sorted(test["salary-class"].unique()) == ["<=50K", ">50K"]  # the test file's trailing "." dropped
    with pytest.raises(ConfigError, match="split"):
        load_adult(split="validation")
    with pytest.raises(ConfigError, match="zip"):
        load_adult(with_zip=True, split="test")


def test_relationship_uses_cdpbench_tree():
    from cdpbench.datasets.adult import adult_taxonomy

    tax = adult_taxonomy("relationship")
    assert tax.height == 2 and tax.leaves == ("Husband", "Wife", "Own-child", "Other-relative", "Not-in-family", "Unmarried")
    assert tax.names[1] == ("Spouse", "Relative", "Non-family")
    assert tax.node_of_leaf[1].tolist() == [0, 0, 1, 1, 2, 2]


def test_load_adult_returns_an_independent_copy():
    a = load_adult()
    a.loc[0, "age"] = -1
    assert load_adult().loc[0, "age"] == 39


def test_adult_schema_domains_and_hierarchies():
    s = adult_schema(["age", "sex", "education", "capital-gain"], "occupation")
    assert s.qi_names == ["age", "sex", "education", "capital-gain"]
    age, sex, edu, gain = s.qi
    assert (age.kind, age.low, age.high) == ("numeric", 17.0, 90.0)
    assert (gain.low, gain.high) == (0.0, 99_999.0)
    assert set(sex.values) == {"Male", "Female"}
    assert edu.taxonomy.size == 16 and edu.taxonomy.height == 3
    assert s.sensitive.size == 14 and s.sensitive.taxonomy is not None
    assert s.sensitive.values == s.sensitive.taxonomy.leaves and not s.sensitive.ordered
    # the whole cleaned table fits the schema (every value covered, every number in its domain)
    frame = load_adult()[s.qi_names + ["occupation"]].assign(id=np.arange(30_162))
    assert len(s.encode(frame, 1, allow_extra=False)) == 30_162
    # a numeric sensitive attribute is ordered over the values present
    n = adult_schema(["age"], "education-num").sensitive
    assert n.ordered and n.values == tuple(str(v) for v in range(1, 17))


@pytest.mark.parametrize(
    "params, field, text",
    [
        ({"releases": 0}, "releases", "releases must be an integer >= 1 (got 0)"),
        ({"initial": 0}, "initial", "initial must be an integer >= 1 (got 0)"),
        ({"deletions": -1}, "deletions", "deletions must be an integer >= 0 (got -1)"),
        ({"insertions": -5}, "insertions", "insertions must be an integer >= 0 (got -5)"),
        ({"updates": -1}, "updates", "updates must be an integer >= 0 (got -1)"),
        ({"qi": ["age", "zipcode"]}, "qi", "qi names unknown Adult column(s) ['zipcode']; allowed: ['age', 'workclass'"),
        ({"qi": []}, "qi", "qi must be a non-empty list of Adult columns"),
        ({"qi": ["age", "age"]}, "qi", "qi lists column(s) ['age'] more than once"),
        ({"sensitive": "disease"}, "sensitive", "sensitive must be an Adult column ['age'"),
        ({"sensitive": "sex"}, "sensitive", "sensitive attribute 'sex' is also listed in qi"),
    ],
)
def test_adult_params_are_validated(params, field, text):
    with pytest.raises(ConfigError) as e:
        AdultContinuousParams(**params)
    assert text in str(e.value)


def test_registry_creates_the_three_data_sets():
    reg = default_registry()
    assert {"adult", "churn", "csv"} <= set(reg.names("dataset"))
    assert isinstance(reg.create("dataset", "adult", {"releases": 2}), AdultContinuous)
    assert isinstance(reg.create("dataset", "churn", {"releases": 2}), Churn)
    with pytest.raises(ConfigError, match="releases must be an integer >= 1"):
        reg.create("dataset", "adult", {"releases": 0})
    with pytest.raises(ConfigError, match=r"base must be one of \['adult', 'synthetic'\] \(got 'census'\)"):
        reg.create("dataset", "churn", {"base": "census"})


@pytest.fixture(scope="module")
def adult_releases():
    return list(AdultContinuous().releases(np.random.default_rng(7)))


def test_adult_continuous_counts_per_release(adult_releases):
    rs = adult_releases
    assert len(rs) == 24 and [r.t for r in rs] == list(range(1, 25))
    assert all(len(r) == 4000 for r in rs)
    assert rs[0].schema.qi_names == ["age", "sex", "education"] and rs[0].schema.sensitive.name == "occupation"
    seen = ids(rs[0])
    for prev, cur in zip(rs, rs[1:]):
        gone, new = ids(prev) - ids(cur), ids(cur) - ids(prev)
        assert len(gone) == 400 and len(new) == 400
        assert not new & seen  # insertions are never-used Adult rows (no re-insertion here)
        seen |= new
        assert set(cur.truth["deleted"].tolist()) == gone and set(cur.truth["inserted"].tolist()) == new
        assert len(cur.truth["reinserted"]) == 0
        updated = set(cur.truth["updated"].tolist())
        assert len(updated) == 400 and updated <= ids(prev) & ids(cur)
        p, c = by_id(prev), by_id(cur)
        stay = ids(prev) & ids(cur)
        assert all(p[i][0] == c[i][0] for i in stay)  # QIs never change
        changed = {i for i in stay if p[i][1] != c[i][1]}
        assert changed <= updated and len(changed) <= 400
        # a uniform re-draw over 14 values keeps the old one ~1/14 of the time
        assert len(changed) >= 330


def test_adult_continuous_records_are_adult_rows(adult_releases):
    adult = load_adult()
    schema = adult_releases[0].schema
    edu = {v: i for i, v in enumerate(schema.qi[2].values)}
    occ = {v: i for i, v in enumerate(schema.sensitive.values)}
    r = adult_releases[5]
    rows = adult.iloc[r.respondent]  # respondent id = row of the cleaned table
    assert np.array_equal(r.qi[:, 0], rows["age"].to_numpy(float))
    assert np.array_equal(r.qi[:, 2], rows["education"].map(edu).to_numpy(float))
    # records never updated still carry their Adult occupation; updated ones may differ
    ever_updated = set().union(*(set(x.truth["updated"].tolist()) for x in adult_releases[1:6]))
    keep = ~np.isin(r.respondent, list(ever_updated))
    assert keep.sum() > 2000
    assert np.array_equal(r.sensitive[keep], rows["occupation"].map(occ).to_numpy()[keep])


def test_same_seed_same_releases_other_seed_different():
    params = AdultContinuousParams(releases=4, initial=500, deletions=50, insertions=50, updates=50)
    a = list(AdultContinuous(params).releases(np.random.default_rng(11)))
    b = list(AdultContinuous(params).releases(np.random.default_rng(11)))
    c = list(AdultContinuous(params).releases(np.random.default_rng(12)))
    for x, y in zip(a, b):
        assert np.array_equal(x.respondent, y.respondent)
        assert np.array_equal(x.qi, y.qi) and np.array_equal(x.sensitive, y.sensitive)
        assert all(np.array_equal(x.truth[k], y.truth[k]) for k in x.truth)
    assert not np.array_equal(a[0].respondent, c[0].respondent)
    assert not np.array_equal(a[3].respondent, c[3].respondent)


# ---------------------------------------------------------------------------- churn
def tiny_base(n: int) -> tuple[pd.DataFrame, object]:
    schema = adult_schema(["age", "sex"], "occupation")
    adult = load_adult()
    return adult.iloc[:n][["age", "sex", "occupation"]].reset_index(drop=True), schema


def test_churn_reinserted_respondents_keep_qi_and_value_at_deletion():
    base, schema = tiny_base(400)
    rs = list(
        churn_process(
            base, schema, initial=100, deletions=30, insertions=20, updates=25, reinsertions=10, releases=8,
            rng=np.random.default_rng(3),
        )
    )
    deleted_as: dict[int, tuple] = {}  # respondent -> (QI, sensitive) when last deleted
    seen = ids(rs[0])
    for prev, cur in zip(rs, rs[1:]):
        p, c = by_id(prev), by_id(cur)
        gone, new = ids(prev) - ids(cur), ids(cur) - ids(prev)
        back = set(cur.truth["reinserted"].tolist())
        fresh = set(cur.truth["inserted"].tolist())
        assert len(gone) == 30 and gone == set(cur.truth["deleted"].tolist())
        assert len(fresh) == 20 and not fresh & seen
        assert new == back | fresh and not back & fresh
        waiting = set(deleted_as)
        assert len(back) == min(10, len(waiting)) and back <= waiting
        for i in back:
            assert c[i] == deleted_as.pop(i)  # same QI and same sensitive value as when deleted
        for i in gone:
            deleted_as[i] = p[i]
        seen |= fresh
    assert [len(r.truth["reinserted"]) for r in rs] == [0, 0, 10, 10, 10, 10, 10, 10]
    assert [len(r) for r in rs] == [100, 90, 90, 90, 90, 90, 90, 90]


@settings(max_examples=40, deadline=None)
@given(
    initial=st.integers(1, 40),
    deletions=st.integers(0, 10),
    insertions=st.integers(0, 10),
    updates=st.integers(0, 10),
    reinsertions=st.integers(0, 10),
    releases=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_churn_matches_its_plan_or_refuses(initial, deletions, insertions, updates, reinsertions, releases, seed):
    base, schema = tiny_base(60)
    kw = dict(initial=initial, deletions=deletions, insertions=insertions, updates=updates,
              reinsertions=reinsertions, releases=releases)
    # brute-force oracle: replay the counts with sets
    size, waiting, ok = initial, 0, initial + (releases - 1) * insertions <= 60
    sizes = [initial]
    for _ in range(releases - 1):
        if deletions > size or updates > size - deletions:
            ok = False
            break
        back = min(reinsertions, waiting)
        waiting += deletions - back
        size += insertions + back - deletions
        sizes.append(size)
    if not ok:
        with pytest.raises(DataError):
            churn_process(base, schema, rng=np.random.default_rng(seed), **kw)
        return
    rs = list(churn_process(base, schema, rng=np.random.default_rng(seed), **kw))
    assert [len(r) for r in rs] == sizes == list(plan_churn(60, **kw).sizes)
    for prev, cur in zip(rs, rs[1:]):
        assert len(ids(prev) - ids(cur)) == deletions
        assert len(cur.truth["updated"]) == updates
        assert set(cur.truth["updated"].tolist()) <= ids(prev) & ids(cur)
        assert np.all(np.diff(cur.respondent) > 0)  # sorted by respondent id


def test_churn_base_exhaustion_error_says_how_many_releases_fit():
    base, schema = tiny_base(100)
    with pytest.raises(DataError) as e:
        churn_process(base, schema, initial=50, deletions=0, insertions=20, updates=0, reinsertions=0, releases=5,
                      rng=np.random.default_rng(0), name="base table 'tiny'")
    msg = str(e.value)
    assert "base table 'tiny' has 100 rows" in msg and "need 130 never-used rows" in msg
    assert "only 3 release(s) fit" in msg
    # the sliced-bucket paper's own counts fit Adult for 7 releases only
    with pytest.raises(DataError, match=r"only 7 release\(s\) fit"):
        Churn(ChurnParams(initial=4500, deletions=3500, insertions=4000, updates=1000, reinsertions=1000)).releases(
            np.random.default_rng(0)
        )
    with pytest.raises(DataError, match="release 2: deletions=60 exceed the 50 records of release 1"):
        churn_process(base, schema, initial=50, deletions=60, insertions=0, updates=0, reinsertions=0, releases=2,
                      rng=np.random.default_rng(0))
    with pytest.raises(DataError, match="release 2: updates=41 exceed the 40 records that stay"):
        churn_process(base, schema, initial=50, deletions=10, insertions=0, updates=41, reinsertions=0, releases=2,
                      rng=np.random.default_rng(0))


def test_churn_default_scenario_fits_adult():
    rs = list(Churn().releases(np.random.default_rng(1)))
    assert len(rs) == 20
    assert len(rs[0]) == 10_000 and len(rs[1]) == 10_125 and len(rs[-1]) == 16_875
    assert [len(r.truth["reinserted"]) for r in rs[:3]] == [0, 0, 250]
    assert all(len(r.truth["deleted"]) == 875 and len(r.truth["inserted"]) == 1000 for r in rs[1:])
    used = set().union(*(ids(r) for r in rs))
    assert len(used) == 10_000 + 19 * 1000


def test_churn_base_value_outside_schema_fails_naming_release_and_column():
    base, schema = tiny_base(50)
    base.loc[:, "age"] = 200  # every row: the first release fails
    with pytest.raises(DataError, match=r"release 1: QI column 'age' has value\(s\) \[200.0\] outside its domain \[17, 90\]"):
        next(churn_process(base, schema, initial=10, deletions=0, insertions=0, updates=0, reinsertions=0,
                           releases=1, rng=np.random.default_rng(0)))


# ---------------------------------------------------------------------------- CSV / Parquet
SCHEMA_YAML = """\
respondent: pid
qi:
  - {name: age, type: numeric, low: 0, high: 120}
  - {name: zip, type: categorical, hierarchy: hier/zip.csv}
sensitive: {name: disease, values: [flu, hiv, NA, None]}
"""


def write_scenario(tmp_path, releases, ext=".csv", names=None):
    """A schema YAML in conf/ with its hierarchy in conf/hier/, and one file per release in data/."""
    conf = tmp_path / "conf"
    (conf / "hier").mkdir(parents=True)
    (conf / "schema.yaml").write_text(SCHEMA_YAML)
    (conf / "hier" / "zip.csv").write_text("01234;012**;*\n01235;012**;*\n47906;479**;*\n")
    data = tmp_path / "data"
    data.mkdir()
    paths = []
    for i, frame in enumerate(releases):
        path = data / ((names[i] if names else f"release_{i + 1}") + ext)
        frame.to_parquet(path) if ext == ".parquet" else frame.to_csv(path, index=False)
        paths.append(path)
    return conf / "schema.yaml", paths


R1 = pd.DataFrame({"pid": [1, 2, 3], "age": [30, 41, 52], "zip": ["01234", "47906", "01235"], "disease": ["flu", "NA", "hiv"]})
R2 = pd.DataFrame({"pid": [1, 3, 4], "age": [30, 52, 19], "zip": ["01234", "01235", "47906"], "disease": ["None", "hiv", "flu"]})


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_csv_round_trip(tmp_path, monkeypatch, ext):
    schema_path, _ = write_scenario(tmp_path, [R1, R2], ext)
    monkeypatch.chdir(tmp_path / "data")  # hierarchy paths resolve against the YAML's folder, not the cwd
    ds = CsvReleases(CsvReleasesParams(files=str(tmp_path / "data" / f"release_*{ext}"), schema=str(schema_path)))
    rs = list(validated(ds.releases(np.random.default_rng(0)), ds.scenario))
    assert [r.t for r in rs] == [1, 2] and ds.scenario == "continuous"
    for r, frame in zip(rs, [R1, R2]):
        back = r.to_frame()
        assert back["pid"].tolist() == frame["pid"].tolist()
        assert back["age"].tolist() == frame["age"].astype(float).tolist()
        assert back["zip"].tolist() == frame["zip"].tolist()  # leading zeros kept: read as text
        assert back["disease"].tolist() == frame["disease"].tolist()  # "NA"/"None" are values, not missing
    zip_qi = rs[0].schema.qi[1]
    assert zip_qi.taxonomy.height == 2 and rs[0].schema.qi[0] == NumericQI("age", 0, 120)


def test_csv_glob_orders_numbers_numerically_and_lists_keep_order(tmp_path):
    frames = [R1.assign(age=a) for a in (20, 30, 40)]
    schema_path, paths = write_scenario(tmp_path, frames, names=["r10", "r2", "r1"])
    ds = CsvReleases(CsvReleasesParams(files=str(tmp_path / "data" / "r*.csv"), schema=str(schema_path)))
    assert [r.qi[0, 0] for r in ds.releases(np.random.default_rng(0))] == [40, 30, 20]  # r1, r2, r10
    listed = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=str(schema_path)))
    assert [r.qi[0, 0] for r in listed.releases(np.random.default_rng(0))] == [20, 30, 40]


def test_csv_errors_name_the_problem(tmp_path):
    schema_path, paths = write_scenario(tmp_path, [R1])
    rng = np.random.default_rng(0)

    def make(**kw):
        return CsvReleases(CsvReleasesParams(**{"files": [str(paths[0])], "schema": str(schema_path), **kw}))

    with pytest.raises(DataError, match=r"files: file '.*nope\.csv' not found"):
        make(files=[str(paths[0]), str(tmp_path / "nope.csv")]).releases(rng)
    with pytest.raises(DataError, match=r"files: no file matches the pattern '.*\*\.parquet'"):
        make(files=str(tmp_path / "data" / "*.parquet")).releases(rng)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataError, match=r"neither CSV nor Parquet; allowed endings: \['.csv', '.csv.gz', '.parquet', '.pq'\]"):
        make(files=str(tmp_path / "notes.txt")).releases(rng)
    with pytest.raises(DataError, match=r"schema: file '.*missing\.yaml' not found"):
        make(schema=str(tmp_path / "missing.yaml")).releases(rng)
    bad = tmp_path / "bad.yaml"
    bad.write_text("qi:\n  - {name: age, type: numeric\nsensitive: x\n")
    with pytest.raises(DataError, match=r"schema: '.*bad\.yaml' is not valid YAML \(line \d+, column \d+\)"):
        make(schema=str(bad)).releases(rng)
    shape = tmp_path / "shape.yaml"
    shape.write_text("qi: [age]\nsensitive: {name: d, values: [a]}\n")
    with pytest.raises(DataError, match=r"schema '.*shape\.yaml': not a valid schema"):
        make(schema=str(shape)).releases(rng)
    nohier = tmp_path / "nohier.yaml"
    nohier.write_text("qi: [{name: zip, type: categorical, hierarchy: zips.csv}]\nsensitive: {name: d, values: [a]}\n")
    with pytest.raises(DataError, match=r"hierarchy file '.*zips\.csv' not found"):
        make(schema=str(nohier)).releases(rng)
    with pytest.raises(DataError, match="a cumulative scenario needs per-record timestamps"):
        make(scenario="cumulative").releases(rng)
    with pytest.raises(DataError, match=r"2 schema YAMLs for 1 release files"):
        make(schema=[str(schema_path)] * 2, scenario="sequential").releases(rng)
    with pytest.raises(ConfigError, match=r"scenario must be one of \['continuous', 'cumulative', 'sequential'\] \(got 'daily'\)"):
        make(scenario="daily")
    with pytest.raises(ConfigError, match="files must be a non-empty list of file paths or one glob pattern"):
        make(files=[])


def test_csv_bad_record_error_names_release_and_file(tmp_path):
    bad = R2.assign(zip=["01234", "99999", "47906"])
    schema_path, paths = write_scenario(tmp_path, [R1, bad])
    ds = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=str(schema_path)))
    it = ds.releases(np.random.default_rng(0))
    assert next(it).t == 1
    with pytest.raises(DataError) as e:
        next(it)
    msg = str(e.value)
    assert msg.startswith("release 2: column 'zip' has unknown value(s) ['99999']; allowed: ['01234', '01235', '47906']")
    assert "release_2.csv" in msg and "\n" not in msg


def test_csv_extra_columns_error_unless_ignored(tmp_path):
    schema_path, paths = write_scenario(tmp_path, [R1.assign(name=["a", "b", "c"])])
    rng = np.random.default_rng(0)
    strict = CsvReleases(CsvReleasesParams(files=[str(paths[0])], schema=str(schema_path)))
    with pytest.raises(DataError, match=r"unexpected column\(s\) \['name'\]"):
        list(strict.releases(rng))
    lax = CsvReleases(CsvReleasesParams(files=[str(paths[0])], schema=str(schema_path), ignore_extra=True))
    assert len(next(lax.releases(rng))) == 3


def test_csv_sequential_scenario_with_one_schema_per_file(tmp_path):
    schema_path, paths = write_scenario(tmp_path, [R1, R2.drop(columns="age")])
    second = tmp_path / "conf" / "second.yaml"
    second.write_text(SCHEMA_YAML.replace("  - {name: age, type: numeric, low: 0, high: 120}\n", ""))
    ds = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=[str(schema_path), str(second)],
                                       scenario="sequential"))
    assert ds.scenario == "sequential"
    rs = list(validated(ds.releases(np.random.default_rng(0)), ds.scenario))
    assert [r.schema.qi_names for r in rs] == [["age", "zip"], ["zip"]]
    # the same files as a continuous scenario are refused at release 2
    cont = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=[str(schema_path), str(second)]))
    with pytest.raises(DataError, match=r"release 2: the schema changed from release 1 \(QI columns \['age', 'zip'\] -> \['zip'\]\)"):
        list(validated(cont.releases(np.random.default_rng(0)), cont.scenario))


def test_csv_literal_inf_or_nan_in_a_numeric_qi_is_refused_naming_the_file(tmp_path):
    # keep_default_na=False reads the cells 'inf', 'NaN', 'Infinity' as text that float() accepts
    schema_path, paths = write_scenario(tmp_path, [R1.assign(age=["30", "inf", "NaN"])])
    ds = CsvReleases(CsvReleasesParams(files=[str(paths[0])], schema=str(schema_path)))
    with pytest.raises(DataError) as e:
        ds.check()
    assert str(e.value) == (
        "release 1: QI column 'age' has non-finite value(s) ['NaN', 'inf']; a numeric QI needs finite numbers in "
        f"[0, 120] [file {str(paths[0])!r}]"
    )


def test_csv_fractional_respondent_id_is_refused(tmp_path):
    schema_path, paths = write_scenario(tmp_path, [R1.assign(pid=[1, 1.5, 9999.7])])
    ds = CsvReleases(CsvReleasesParams(files=[str(paths[0])], schema=str(schema_path)))
    with pytest.raises(DataError) as e:
        ds.check()
    assert str(e.value) == (
        f"release 1: column 'pid' (respondent id) must hold integers; got [1.5, 9999.7] [file {str(paths[0])!r}]"
    )


def test_csv_header_only_file_is_an_empty_release(tmp_path):
    schema_path, paths = write_scenario(tmp_path, [R1, R2.iloc[:0]])
    assert paths[1].read_text() == "pid,age,zip,disease\n"
    ds = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=str(schema_path)))
    with pytest.raises(DataError) as e:
        ds.check()
    assert str(e.value) == f"release 2: no records; a release needs at least one record [file {str(paths[1])!r}]"


def test_csv_check_reads_every_release_before_the_run(tmp_path):
    bad = R2.assign(age=[30, 52, 190])
    schema_path, paths = write_scenario(tmp_path, [R1, R2, bad])
    ds = CsvReleases(CsvReleasesParams(files=str(tmp_path / "data" / "release_*.csv"), schema=str(schema_path)))
    with pytest.raises(DataError) as e:
        ds.check()
    assert str(e.value) == (
        f"release 3: QI column 'age' has value(s) [190.0] outside its domain [0, 120] [file {str(paths[2])!r}]"
    )
    # cross-release rules too: a cumulative scenario must keep every earlier record
    timed = tmp_path / "conf" / "timed.yaml"
    timed.write_text(SCHEMA_YAML + "time: ts\n")
    frames = [R1.assign(ts=1), pd.concat([R1, R2.iloc[2:]]).assign(ts=[1, 1, 1, 2]), R2.assign(ts=[1, 1, 2])]
    for path, frame in zip(paths, frames):
        frame.to_csv(path, index=False)
    cumulative = CsvReleases(CsvReleasesParams(files=[str(p) for p in paths], schema=str(timed), scenario="cumulative"))
    with pytest.raises(DataError, match=r"^release 3: respondent\(s\) \[2\] of release 2 are missing"):
        cumulative.check()
    frames[1].to_csv(paths[2], index=False)  # nothing new, nothing dropped: fine
    assert cumulative.check() is None
    assert [len(r) for r in cumulative.releases(np.random.default_rng(0))] == [3, 4, 4]


# ---------------------------------------------------------------------------- churn at any size
def test_churn_over_a_synthetic_base_runs_past_adults_size_and_is_the_same_per_seed():
    from cdpbench.datasets.adult import load_adult

    params = ChurnParams(base="synthetic", releases=3, initial=40_000, deletions=3_500, insertions=4_000,
                         updates=1_000, reinsertions=1_000, qi=["age", "sex", "zip"])
    rs = list(Churn(params).releases(np.random.default_rng(7)))
    again = list(Churn(params).releases(np.random.default_rng(7)))
    other = list(Churn(params).releases(np.random.default_rng(8)))
    # the plan's sizes: 40,000 (> Adult's 30,162), then - 3,500 + 4,000 (+ 1,000 re-inserted from release 3)
    assert [len(r) for r in rs] == [40_000, 40_500, 42_000] == list(plan_churn(48_000, **{
        k: getattr(params, k) for k in ("initial", "deletions", "insertions", "updates", "reinsertions", "releases")
    }).sizes)
    for a, b in zip(rs, again):
        assert np.array_equal(a.respondent, b.respondent) and np.array_equal(a.qi, b.qi)
        assert np.array_equal(a.sensitive, b.sensitive)
    assert not np.array_equal(rs[0].qi, other[0].qi)
    # respondent ids are positions in the 48,000-row base (40,000 + 2 x 4,000 insertions)
    assert rs[-1].respondent.max() < 48_000 and len(set().union(*(ids(r) for r in rs))) == 48_000
    # every record is an Adult row: its (age, sex) pair occurs in Adult; the zip is the respondent's own
    adult = load_adult()
    pairs = set(zip(adult["age"], adult["sex"]))
    sex = rs[0].schema.qi[1].taxonomy.leaves
    assert all((int(a), sex[int(s)]) in pairs for a, s in rs[0].qi[:2_000, :2])
    from cdpbench.datasets.zipcodes import synthetic_zips

    zips = rs[0].schema.qi[2].taxonomy.leaves
    assert [zips[int(z)] for z in rs[0].qi[:500, 2]] == list(synthetic_zips(rs[0].respondent[:500]))
    # the sensitive values follow Adult's: the shares of the 14 occupations within 1.5 points
    share = np.bincount(rs[0].sensitive, minlength=rs[0].n_values) / len(rs[0])
    values = list(rs[0].schema.sensitive.values)
    adult_share = adult["occupation"].map(values.index).value_counts(normalize=True).reindex(range(len(values)),
                                                                                              fill_value=0)
    assert np.abs(share - adult_share.to_numpy()).max() < 0.015


def test_churn_synthetic_base_keeps_the_checks_of_the_process():
    with pytest.raises(DataError, match="release 2: deletions=60 exceed the 50 records of release 1"):
        list(Churn(ChurnParams(base="synthetic", releases=2, initial=50, deletions=60, insertions=0, updates=0,
                               reinsertions=0)).releases(np.random.default_rng(0)))
