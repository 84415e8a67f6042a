"""Bad input gives a DataError with a one-line message naming the field and what is allowed.

Per release: Schema.encode (missing / extra columns, NaN, non-finite numbers, values outside the
domain, unknown categories, non-integer ids or timestamps, duplicate respondents). Across
releases: validated() (empty releases, schema changes, numbering, cumulative timestamps and
records).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Release
from cdpbench.datasets.adult import adult_schema
from cdpbench.datasets.validate import schema_change, validated
from cdpbench.errors import ConfigError, DataError
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

SCHEMA = adult_schema(["age", "sex", "education"], "occupation")
COLUMNS = "['id', 'age', 'sex', 'education', 'occupation']"


def good() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [7, 8, 9],
            "age": [25, 38, 61],
            "sex": ["Male", "Female", "Male"],
            "education": ["Bachelors", "HS-grad", "Doctorate"],
            "occupation": ["Sales", "Tech-support", "Exec-managerial"],
        }
    )


def error(frame: pd.DataFrame, t: int = 3, schema: Schema = SCHEMA) -> str:
    with pytest.raises(DataError) as e:
        schema.encode(frame, t)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"release {t}: ")
    return msg


def test_a_good_table_encodes():
    r = SCHEMA.encode(good(), 3)
    assert r.t == 3 and r.respondent.tolist() == [7, 8, 9]
    assert r.qi[:, 0].tolist() == [25, 38, 61]
    assert r.to_frame().equals(good().astype({"age": float}))


def test_missing_column():
    msg = error(good().drop(columns="sex"))
    assert msg == f"release 3: missing column(s) ['sex']; the schema needs {COLUMNS}"


def test_extra_column():
    msg = error(good().assign(zipcode=[1, 2, 3]))
    assert msg == f"release 3: unexpected column(s) ['zipcode']; the schema allows {COLUMNS}"


def test_nan_in_a_numeric_qi():
    msg = error(good().assign(age=[25, np.nan, 61]))
    assert msg == "release 3: QI column 'age' has 1 missing value(s) (NaN)"


def test_nan_in_a_categorical_qi():
    msg = error(good().assign(education=["Bachelors", None, np.nan]))
    assert msg == "release 3: column 'education' has 2 missing value(s) (NaN)"


def test_nan_in_the_sensitive_attribute():
    msg = error(good().assign(occupation=["Sales", np.nan, "Sales"]))
    assert msg == "release 3: column 'occupation' has 1 missing value(s) (NaN)"


def test_numeric_value_outside_the_domain():
    msg = error(good().assign(age=[25, 12, 120]))
    assert msg == "release 3: QI column 'age' has value(s) [12.0, 120.0] outside its domain [17, 90]"


def test_non_numeric_value_in_a_numeric_qi():
    msg = error(good().assign(age=["25", "old", "61"]))
    assert msg == "release 3: QI column 'age' is numeric; it holds non-numbers"


def test_unknown_categorical_qi_value():
    msg = error(good().assign(sex=["Male", "M", "Female"]))
    assert msg == "release 3: column 'sex' has unknown value(s) ['M']; allowed: ['Male', 'Female']"


def test_unknown_categorical_value_lists_the_whole_domain():
    msg = error(good().assign(education=["Bachelors", "Bachelor", "PhD"]))
    assert msg.startswith("release 3: column 'education' has unknown value(s) ['Bachelor', 'PhD']; allowed: [")
    for value in SCHEMA.qi[2].values:  # the 16 education levels
        assert repr(value) in msg


def test_unknown_sensitive_value():
    msg = error(good().assign(occupation=["Sales", "Astronaut", "Sales"]))
    assert msg.startswith("release 3: column 'occupation' has unknown value(s) ['Astronaut']; allowed: [")
    assert "'Tech-support'" in msg and "'Armed-Forces'" in msg


def test_duplicate_respondents_within_a_release():
    msg = error(good().assign(id=[7, 8, 7]))
    assert msg == (
        "release 3: respondent(s) [7] appear more than once in column 'id'; a release holds one record per respondent"
    )


def test_missing_or_non_integer_respondent_id():
    assert error(good().assign(id=[7, None, 9])) == "release 3: column 'id' (respondent id) has missing values"
    assert error(good().assign(id=["a", "7", "b"])) == (
        "release 3: column 'id' (respondent id) must hold integers; got ['a', 'b']"
    )


def test_fractional_or_non_finite_respondent_ids_are_refused_not_truncated():
    # int64 conversion would turn 9999.7 into 9999 and report 4.5 as a duplicate of 4
    assert error(good().assign(id=[4, 4.5, 9999.7])) == (
        "release 3: column 'id' (respondent id) must hold integers; got [4.5, 9999.7]"
    )
    assert error(good().assign(id=[7, np.inf, -np.inf])) == (
        "release 3: column 'id' (respondent id) must hold integers; got [-inf, inf]"
    )
    assert error(good().assign(id=["7", "inf", "8.5"])) == (
        "release 3: column 'id' (respondent id) must hold integers; got ['8.5', 'inf']"
    )
    many = pd.concat([good()] * 3, ignore_index=True).assign(id=np.arange(9) + 0.5)
    assert error(many) == "release 3: column 'id' (respondent id) must hold integers; got [0.5, 1.5, 2.5, 3.5, 4.5]"


def test_integral_float_and_integer_text_respondent_ids_are_accepted():
    # pandas reads an int column with an empty cell as float: 7.0 is the integer 7
    assert SCHEMA.encode(good().assign(id=[7.0, 8.0, 9.0]), 3).respondent.tolist() == [7, 8, 9]
    assert SCHEMA.encode(good().assign(id=["7", "8", "9"]), 3).respondent.tolist() == [7, 8, 9]
    big = 2**62 + 1  # int64 ids keep every digit (no detour through float)
    assert SCHEMA.encode(good().assign(id=[big, 8, 9]), 3).respondent.tolist() == [big, 8, 9]


def test_non_finite_numbers_in_a_numeric_qi():
    # a CSV cell reading inf / nan / Infinity is text that float() accepts
    msg = error(good().assign(age=["25", "inf", "nan"]))
    assert msg == (
        "release 3: QI column 'age' has non-finite value(s) ['inf', 'nan']; a numeric QI needs finite numbers in [17, 90]"
    )
    msg = error(good().assign(age=["-inf", "Infinity", "NaN"]))
    assert msg == (
        "release 3: QI column 'age' has non-finite value(s) ['-inf', 'Infinity', 'NaN']; a numeric QI needs finite "
        "numbers in [17, 90]"
    )
    msg = error(good().assign(age=[25.0, np.inf, -np.inf]))
    assert msg == "release 3: QI column 'age' has non-finite value(s) [-inf, inf]; a numeric QI needs finite numbers in [17, 90]"


TIMED = Schema(SCHEMA.qi, SCHEMA.sensitive, time="ts")


def test_timestamps_must_be_finite_integers():
    assert TIMED.encode(good().assign(ts=[1.0, 2.0, 2.0]), 3).time.tolist() == [1, 2, 2]
    assert error(good().assign(ts=[1, None, 2]), schema=TIMED) == "release 3: column 'ts' (timestamp) has missing values"
    assert error(good().assign(ts=[1, 1.5, np.inf]), schema=TIMED) == (
        "release 3: column 'ts' (timestamp) must hold integers; got [1.5, inf]"
    )
    assert error(good().assign(ts=["1", "monday", "2"]), schema=TIMED) == (
        "release 3: column 'ts' (timestamp) must hold integers; got ['monday']"
    )


# ---------------------------------------------------------------------------- across releases
def release(t: int, schema: Schema = SCHEMA, frame: pd.DataFrame | None = None) -> Release:
    return schema.encode(good() if frame is None else frame, t)


def run(releases, scenario: str) -> list[Release]:
    return list(validated(releases, scenario))


def test_schema_change_across_releases_of_a_continuous_scenario():
    narrower = adult_schema(["age", "sex"], "occupation")
    with pytest.raises(DataError) as e:
        run([release(1), release(2, narrower, good().drop(columns="education"))], "continuous")
    msg = str(e.value)
    assert msg == (
        "release 2: the schema changed from release 1 (QI columns ['age', 'sex', 'education'] -> ['age', 'sex']); "
        "a continuous scenario keeps one schema, only a sequential one may change attribute sets"
    )
    # the same stream is fine as a sequential scenario
    assert [r.t for r in run([release(1), release(2, narrower, good().drop(columns="education"))], "sequential")] == [1, 2]


def test_schema_change_of_a_domain_or_value_set_is_described():
    wider = Schema((NumericQI("age", 0, 120), *SCHEMA.qi[1:]), SCHEMA.sensitive)
    with pytest.raises(DataError, match=r"release 2: the schema changed from release 1 \(QI 'age' domain \[17, 90\] -> \[0, 120\]\)"):
        run([release(1), release(2, wider)], "continuous")
    more_sex = Schema((SCHEMA.qi[0], CategoricalQI("sex", Taxonomy.flat(["Male", "Female", "Other"])), SCHEMA.qi[2]),
                      SCHEMA.sensitive)
    with pytest.raises(DataError, match=r"QI 'sex' values changed \(added \['Other'\], removed \[\]\)"):
        run([release(1), release(2, more_sex)], "continuous")
    occ = list(SCHEMA.sensitive.values)
    fewer = Schema(SCHEMA.qi, Sensitive("occupation", tuple(occ[:-1] + ["Astronaut"])))
    assert schema_change(SCHEMA, fewer) == (
        f"sensitive 'occupation' values changed (added ['Astronaut'], removed ['{occ[-1]}'])"
    )
    assert schema_change(SCHEMA, adult_schema(["age", "sex", "education"], "occupation")) == ""


def test_releases_must_be_numbered_1_2_3_in_order():
    with pytest.raises(DataError, match=r"^release 2: numbered t=3; releases must be numbered 1, 2, 3, \.\.\. in order$"):
        run([release(1), release(3)], "continuous")
    with pytest.raises(DataError, match=r"^release 1: numbered t=0;"):
        run([release(0)], "sequential")


def test_validated_streams_lazily_and_checks_the_scenario_name_at_once():
    def gen():
        yield release(1)
        yield release(1)

    it = validated(gen(), "continuous")
    assert next(it).t == 1  # the first release passes before the second is looked at
    with pytest.raises(DataError, match="release 2: numbered t=1"):
        next(it)
    with pytest.raises(ConfigError, match=r"scenario must be one of \['continuous', 'cumulative', 'sequential'\] \(got 'daily'\)"):
        validated([], "daily")


def timed(t: int, ids: list[int], times: list[int]) -> Release:
    schema = Schema(SCHEMA.qi, SCHEMA.sensitive, time="ts")
    frame = pd.concat([good()] * 2, ignore_index=True).iloc[: len(ids)].assign(id=ids, ts=times)
    return schema.encode(frame, t)


def test_a_cumulative_release_needs_timestamps():
    with pytest.raises(DataError) as e:
        run([release(1)], "cumulative")
    assert str(e.value) == (
        "release 1: a cumulative release needs per-record timestamps (Release.time; the schema's 'time' column)"
    )


def test_a_cumulative_release_keeps_earlier_records_and_their_timestamps():
    ok = run([timed(1, [1, 2], [1, 1]), timed(2, [1, 2, 3, 4], [1, 1, 2, 2])], "cumulative")
    assert [len(r) for r in ok] == [2, 4]
    with pytest.raises(DataError, match=r"release 2: respondent\(s\) \[2\] of release 1 are missing; a cumulative release keeps every earlier record \(1 dropped\)"):
        run([timed(1, [1, 2], [1, 1]), timed(2, [1, 3, 4], [1, 2, 2])], "cumulative")
    with pytest.raises(DataError, match=r"release 2: respondent\(s\) \[2\] changed timestamp since release 1"):
        run([timed(1, [1, 2], [1, 1]), timed(2, [3, 2, 1], [2, 2, 1])], "cumulative")
    # a continuous scenario may delete records
    assert len(run([release(1), release(2, frame=good().iloc[:1])], "continuous")) == 2


def test_internally_inconsistent_releases_from_a_plugin():
    r = release(1)
    with pytest.raises(DataError, match=r"release 1: QI matrix has shape \(3, 2\); 3 respondents and 3 QIs need \(3, 3\)"):
        run([dataclasses.replace(r, qi=r.qi[:, :2])], "continuous")
    with pytest.raises(DataError, match=r"release 1: sensitive code\(s\) \[14\] outside 0\.\.13 \(the 14 values of 'occupation'\)"):
        run([dataclasses.replace(r, sensitive=np.array([0, 14, 3]))], "continuous")
    with pytest.raises(DataError, match=r"release 1: respondent\(s\) \[8\] appear more than once"):
        run([dataclasses.replace(r, respondent=np.array([8, 8, 9]))], "continuous")
    with pytest.raises(DataError, match="release 1: the data set yielded a DataFrame, not a Release"):
        run([good()], "continuous")


def test_an_empty_release_is_refused():
    with pytest.raises(DataError) as e:
        run([release(1), release(2, frame=good().iloc[:0])], "continuous")
    assert str(e.value) == "release 2: no records; a release needs at least one record"
