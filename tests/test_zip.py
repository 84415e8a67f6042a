"""The synthetic ``zip`` QI of Adult (tau, m)-slicedBucket: determinism, domain, prefix taxonomy, churn."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter
from os.path import commonprefix

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication
from cdpbench.datasets import zipcodes
from cdpbench.datasets.adult import (
    ADULT_COLUMNS,
    ADULT_ROWS,
    AdultContinuousParams,
    adult_release,
    adult_schema,
    adult_taxonomy,
    load_adult,
)
from cdpbench.datasets.churn import Churn, ChurnParams
from cdpbench.datasets.zipcodes import ZIP_CODES, ZIP_SEED, synthetic_zips, zip_taxonomy, zips_of_rows
from cdpbench.errors import ConfigError, DataError
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

#: Every zip the (tau, m)-slicedBucket paper prints (Tables 1-8).
PAPER_ZIPS = ["47302", "47303", "47304", "47305", "47308", "47407", "47901", "47902", "47905", "47906", "47907",
              "47915", "47921", "47955"]
#: Pinned draws: respondents 0..7 and one far id (changing the generator must fail here).
FIRST_ZIPS = ["47442", "47417", "47141", "47006", "47355", "47135", "47153", "47754"]


def zips_of_release(release) -> np.ndarray:
    j = release.schema.qi_names.index("zip")
    return np.asarray(release.schema.qi[j].values, dtype=object)[release.qi[:, j].astype(np.int64)]


def cover_label(tax: Taxonomy, codes: list[str]) -> tuple[str, set[str]]:
    """Generalize a set of codes the way a publication does (the node covering min..max leaf
    code): the node's label and the leaves it stands for."""
    index = tax.code()
    c = [index[z] for z in codes]
    level, lo, hi = tax.covering_range(np.array([min(c)]), np.array([max(c)]))
    label = tax.names[level[0]][tax.node_of_leaf[level[0], lo[0]]]
    return label, set(tax.leaves[lo[0] : hi[0] + 1])


def lcp_label(codes: list[str]) -> str:
    prefix = commonprefix(codes)
    return prefix + "*" * (5 - len(prefix))


# ---------------------------------------------------------------------------- domain and draw
def test_domain_is_480_sorted_indiana_codes_holding_the_papers_zips():
    assert len(ZIP_CODES) == 480 == len(set(ZIP_CODES))
    assert list(ZIP_CODES) == sorted(ZIP_CODES)
    assert ZIP_CODES[0] == "47001" and ZIP_CODES[-1] == "47958"
    assert all(len(z) == 5 and z.isdigit() and z.startswith("47") and z[3] in "012345" and z[4] in "12345678"
               for z in ZIP_CODES)
    assert set(PAPER_ZIPS) <= set(ZIP_CODES)
    assert ZIP_SEED == 47906


def test_zips_are_pinned_and_a_function_of_the_respondent_id_only():
    assert synthetic_zips(range(8)).tolist() == FIRST_ZIPS
    # order, length and other ids of the request do not matter
    assert synthetic_zips([7, 0, 3]).tolist() == [FIRST_ZIPS[7], FIRST_ZIPS[0], FIRST_ZIPS[3]]
    assert synthetic_zips(np.array([5], dtype=np.int32)).tolist() == [FIRST_ZIPS[5]]
    far = synthetic_zips([10**12, 30_161]).tolist()
    assert synthetic_zips([30_161, 10**12]).tolist() == far[::-1]
    assert np.array_equal(zips_of_rows(100), synthetic_zips(np.arange(100)))
    assert synthetic_zips([]).tolist() == []
    with pytest.raises(DataError, match="integers >= 0"):
        synthetic_zips([-1])
    with pytest.raises(DataError, match="integers >= 0"):
        synthetic_zips([1.5])


def test_two_independent_loads_and_a_fresh_process_give_the_same_zips():
    first = load_adult(with_zip=True)["zip"].tolist()
    first[0] = "mutated"  # callers get a copy
    zipcodes._zips_of_rows.cache_clear()
    again = load_adult(with_zip=True)["zip"].tolist()
    assert again[:8] == FIRST_ZIPS and again[1:] == first[1:]
    digest = hashlib.sha256(",".join(again).encode()).hexdigest()
    code = (
        "import hashlib; from cdpbench.datasets.adult import load_adult; "
        "print(hashlib.sha256(','.join(load_adult(with_zip=True)['zip']).encode()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}  # no dependence on str hashing either
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=300)
    assert out.stdout.strip() == digest


def test_adult_uses_every_code_about_uniformly():
    adult = load_adult(with_zip=True)
    assert adult.shape == (ADULT_ROWS, 16) and list(adult.columns) == [*ADULT_COLUMNS, "zip"]
    assert load_adult().shape == (ADULT_ROWS, 15)  # no zip unless asked for
    counts = Counter(adult["zip"])
    assert len(counts) == 480 and set(counts) == set(ZIP_CODES)
    assert (min(counts.values()), max(counts.values())) == (40, 84)  # expected 62.8 per code
    areas = Counter(z[:3] for z in adult["zip"])
    assert len(areas) == 10 and all(2_800 < c < 3_250 for c in areas.values())  # expected 3,016
    # independent of the real columns: the share of women is about the same in every area
    women = adult.assign(area=adult["zip"].str[:3]).groupby("area")["sex"].apply(lambda s: (s == "Female").mean())
    assert women.between(0.29, 0.36).all()


# ---------------------------------------------------------------------------- taxonomy
def test_zip_taxonomy_levels_labels_and_contiguous_prefixes():
    tax = zip_taxonomy()
    assert adult_taxonomy("zip") is tax
    assert tax.leaves == ZIP_CODES and tax.height == 3
    assert [len(n) for n in tax.names] == [480, 60, 10, 1]
    assert tax.names[3] == ("47***",)
    assert tax.names[2] == tuple(f"47{a}**" for a in "0123456789")
    assert tax.names[1][:7] == ("4700*", "4701*", "4702*", "4703*", "4704*", "4705*", "4710*")
    for h in range(tax.height + 1):
        for node, label in enumerate(tax.names[h]):
            prefix = label.rstrip("*")
            members = np.flatnonzero(tax.node_of_leaf[h] == node)
            assert members.tolist() == list(range(tax.low[h][node], tax.high[h][node] + 1))  # contiguous
            assert [tax.leaves[i] for i in members] == [z for z in ZIP_CODES if z.startswith(prefix)]


@pytest.mark.parametrize(
    "codes, label",
    [
        (["47907", "47303"], "47***"),  # T1: p1, p2
        (["47906", "47902"], "4790*"),  # T1: p5, p6
        (["47905", "47905"], "47905"),  # T1: p3, p4
        (["47308", "47308"], "47308"),  # T1: p7, p8
        (["47302", "47304"], "4730*"),  # T3: ch2, ch4
        (["47901", "47407"], "47***"),  # T3: p10, p12
        (["47915", "47955", "47921"], "479**"),
    ],
)
def test_paper_examples_generalize_to_the_longest_common_prefix(codes, label):
    got, covered = cover_label(zip_taxonomy(), codes)
    assert got == label
    assert covered == {z for z in ZIP_CODES if z.startswith(label.rstrip("*"))}


def test_covering_node_of_random_subsets_is_the_longest_common_prefix():
    tax = zip_taxonomy()
    rng = np.random.default_rng(0)
    seen = Counter()
    for _ in range(2_000):
        # draw inside a random prefix so that every level is hit often
        prefix = ZIP_CODES[rng.integers(480)][: rng.integers(2, 6)]
        pool = [z for z in ZIP_CODES if z.startswith(prefix)]
        codes = list(rng.choice(pool, size=rng.integers(1, 7)))
        label, covered = cover_label(tax, codes)
        expected = lcp_label(codes)
        assert label == expected
        assert covered == {z for z in ZIP_CODES if z.startswith(expected.rstrip("*"))}
        seen[expected.count("*")] += 1
    assert set(seen) == {0, 1, 2, 3}


def test_publication_of_the_papers_table_6_prints_its_zip_cells():
    """T1* of the paper (Table 6): p1..p8 in buckets {p1,p2} {p3,p4} {p5,p6} {p7,p8}."""
    rows = [(21, "47907", "Bronchitis"), (27, "47303", "Aids"), (33, "47905", "SSM-pos"), (58, "47905", "Asthma"),
            (54, "47906", "Flu"), (54, "47902", "Dyspepsia"), (64, "47308", "Gastritis"), (65, "47308", "Cardiac")]
    diseases = tuple(r[2] for r in rows)
    schema = Schema((NumericQI("age", 17, 90), CategoricalQI("zip", zip_taxonomy())), Sensitive("disease", diseases))
    frame = pd.DataFrame({"id": range(1, 9), "age": [r[0] for r in rows], "zip": [r[1] for r in rows],
                          "disease": list(diseases)})
    pub = Publication.from_partition(schema.encode(frame, 1), np.array([0, 0, 1, 1, 2, 2, 3, 3]))
    tax = zip_taxonomy()
    level, _, _ = tax.covering_range(pub.low[:, 1].astype(np.int64), pub.high[:, 1].astype(np.int64))
    labels = [tax.names[h][tax.node_of_leaf[h, int(lo)]] for h, lo in zip(level, pub.low[:, 1])]
    assert labels == ["47***", "47905", "4790*", "47308"]
    assert pub.value_sets[1].sum(axis=1).tolist() == [480, 1, 8, 1]  # leaves each cell stands for


def test_from_prefixes_drops_levels_that_merge_nothing():
    tax = Taxonomy.from_prefixes(["47906", "01235", "01234"])
    assert tax.leaves == ("01234", "01235", "47906")
    # 4 digits merge 01234/01235; 3, 2 and 1 digits add nothing; the root * splits 0.... from 4....
    assert tax.names == (("01234", "01235", "47906"), ("0123*", "4790*"), ("*",))
    assert Taxonomy.from_prefixes(["47906"]).names == (("47906",),)
    with pytest.raises(DataError, match="equal length"):
        Taxonomy.from_prefixes(["47906", "4790"])
    with pytest.raises(DataError, match="more than once"):
        Taxonomy.from_prefixes(["47906", "47906"])


# ---------------------------------------------------------------------------- schema and churn
def test_adult_schema_and_release_with_zip():
    s = adult_schema(["age", "sex", "zip"], "occupation")
    assert s.qi_names == ["age", "sex", "zip"]
    assert s.qi[2] == CategoricalQI("zip", zip_taxonomy()) and s.widths.tolist() == [73.0, 1.0, 479.0]
    r = adult_release(("age", "sex", "zip"), rows=50)
    assert zips_of_release(r).tolist() == synthetic_zips(range(50)).tolist()


def test_churn_with_age_sex_zip_keeps_every_respondents_zip():
    params = dict(qi=["age", "sex", "zip"], releases=4, initial=2_000, deletions=200, insertions=250, updates=100,
                  reinsertions=100)
    rs = list(Churn(ChurnParams(**params)).releases(np.random.default_rng(5)))
    assert [len(r) for r in rs] == [2_000, 2_050, 2_200, 2_350]
    assert [len(r.truth["reinserted"]) for r in rs] == [0, 0, 100, 100]
    zip_of = {}
    for r in rs:
        assert r.schema.qi_names == ["age", "sex", "zip"] and r.schema.sensitive.name == "occupation"
        zips = zips_of_release(r)
        assert zips.tolist() == synthetic_zips(r.respondent).tolist()
        for i, z in zip(r.respondent.tolist(), zips.tolist()):
            assert zip_of.setdefault(i, z) == z  # also for re-inserted respondents
    assert len(zip_of) == 2_000 + 3 * 250
    # another run (other seed, other respondents drawn) gives the shared respondents the same zips
    other = list(Churn(ChurnParams(**params)).releases(np.random.default_rng(6)))[-1]
    shared = [(i, z) for i, z in zip(other.respondent.tolist(), zips_of_release(other).tolist()) if i in zip_of]
    assert len(shared) > 100 and all(zip_of[i] == z for i, z in shared)
    # the Adult continuous scenario accepts zip too
    reg = default_registry()
    adult = reg.create("dataset", "adult", {"qi": ["zip", "age"], "releases": 2, "initial": 300, "deletions": 30,
                                            "insertions": 30, "updates": 30})
    a = list(adult.releases(np.random.default_rng(0)))
    assert a[1].schema.qi_names == ["zip", "age"]
    assert zips_of_release(a[1]).tolist() == synthetic_zips(a[1].respondent).tolist()


def test_unknown_qi_names_list_zip_among_the_allowed_columns():
    allowed = [*ADULT_COLUMNS, "zip"]
    with pytest.raises(ConfigError) as e:
        ChurnParams(qi=["age", "sex", "zipcode"])
    assert str(e.value) == f"qi names unknown Adult column(s) ['zipcode']; allowed: {allowed}"
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"qi lists column\(s\) \['zip'\] more than once"):
        ChurnParams(qi=["zip", "age", "zip"])
    # zip is a QI only: it cannot be the sensitive attribute
    with pytest.raises(ConfigError, match=r"sensitive must be an Adult column \['age'.*'salary-class'\] \(got 'zip'\)"):
        AdultContinuousParams(qi=["age"], sensitive="zip")
    with pytest.raises(ConfigError, match=r"qi names unknown Adult column\(s\) \['ZIP'\]"):
        default_registry().create("dataset", "churn", {"qi": ["age", "ZIP"]})
