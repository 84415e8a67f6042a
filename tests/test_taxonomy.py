"""Taxonomy: ARX loading, contiguous leaf codes, covering nodes (checked against brute force)."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.errors import DataError
from cdpbench.taxonomy import Taxonomy

HIER = Path(__file__).resolve().parents[1] / "src" / "cdpbench" / "datasets" / "data" / "hierarchies"


def test_adult_education_hierarchy_loads_with_contiguous_nodes():
    tax = Taxonomy.from_arx_csv(HIER / "adult_hierarchy_education.csv")
    assert tax.size == 16 and tax.height == 3
    # every node of every level covers exactly the leaves whose ancestor it is, contiguously
    for h in range(tax.height + 1):
        for node, (lo, hi) in enumerate(zip(tax.low[h], tax.high[h])):
            members = np.flatnonzero(tax.node_of_leaf[h] == node)
            assert members.tolist() == list(range(lo, hi + 1))
    assert tax.names[3] == ("*",)
    assert set(tax.names[2]) == {"Higher education", "Secondary education", "Primary education"}


def test_covering_range_of_two_undergraduate_values_is_their_parent():
    tax = Taxonomy.from_arx_csv(HIER / "adult_hierarchy_education.csv")
    code = tax.code()
    level, lo, hi = tax.covering_range(np.array([code["Bachelors"]]), np.array([code["Some-college"]]))
    assert level[0] == 1
    assert {tax.leaves[i] for i in range(lo[0], hi[0] + 1)} == {"Bachelors", "Some-college"}
    level, lo, hi = tax.covering_range(np.array([code["Bachelors"]]), np.array([code["Preschool"]]))
    assert level[0] == 3 and (lo[0], hi[0]) == (0, 15)


def test_flat_taxonomy_and_children_cuts():
    tax = Taxonomy.flat(["a", "b", "c"])
    assert tax.height == 1 and tax.leaves == ("a", "b", "c")
    assert tax.children_cuts(0, 2).tolist() == [1, 2]
    assert tax.children_cuts(1, 1).tolist() == []


def test_bad_rows_are_rejected(tmp_path):
    with pytest.raises(DataError, match="levels"):
        Taxonomy.from_paths([["a", "x", "*"], ["b", "*"]])
    with pytest.raises(DataError, match="more than once"):
        Taxonomy.from_paths([["a", "*"], ["a", "*"]])
    f = tmp_path / "h.csv"
    f.write_text("a;x\nb;x\n")
    with pytest.raises(DataError, match=r"'\*'"):
        Taxonomy.from_arx_csv(f)


@st.composite
def random_tree(draw):
    n = draw(st.integers(1, 12))
    p1 = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    p2 = [draw(st.integers(0, 1)) * 10 + x // 2 for x in p1]  # level-2 nodes group level-1 nodes
    rows = [[f"v{i}", f"a{a}_{b}", f"b{b}", "*"] for i, (a, b) in enumerate(zip(p1, p2))]
    order = draw(st.permutations(range(n)))
    return [rows[i] for i in order]


@settings(max_examples=60, deadline=None)
@given(random_tree(), st.data())
def test_covering_level_matches_brute_force(rows, data):
    tax = Taxonomy.from_paths(rows)
    path = {r[0]: r for r in rows}
    i = data.draw(st.integers(0, tax.size - 1))
    j = data.draw(st.integers(i, tax.size - 1))
    leaves = tax.leaves[i : j + 1]
    # brute force: the lowest level at which all chosen leaves share an ancestor path
    expected = next(h for h in range(tax.height + 1) if len({tuple(path[v][h:]) for v in leaves}) == 1)
    level, lo, hi = tax.covering_range(np.array([i]), np.array([j]))
    assert level[0] == expected
    covered = {v for v in tax.leaves if tuple(path[v][expected:]) == tuple(path[leaves[0]][expected:])}
    assert set(tax.leaves[lo[0] : hi[0] + 1]) == covered
