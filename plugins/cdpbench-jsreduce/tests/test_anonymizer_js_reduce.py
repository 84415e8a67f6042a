"""The js_reduce anonymizer (Algorithm 4): the Hilbert order by hand, a hand-checked grouping with
suppression and merging, and properties on random releases — every publication verifies, every
record is published once or suppressed, merging never suppresses more, same input gives the same
output, and the windowed scan equals a record-by-record reference written here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import GroupBatch, History, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce.anonymizers.js_reduce import greedy_partition, hilbert_order

SETTINGS = settings(max_examples=40, deadline=None)
REG = default_registry()

# The classic 4 x 4 Hilbert curve, drawn by hand: it starts at (0,0), covers the lower-left
# quadrant first (moving along x), then upper-left, upper-right, and ends at (3,0).
HILBERT_4X4 = [
    (0, 0), (1, 0), (1, 1), (0, 1),
    (0, 2), (0, 3), (1, 3), (1, 2),
    (2, 2), (2, 3), (3, 3), (3, 2),
    (3, 1), (2, 1), (2, 0), (3, 0),
]  # fmt: skip

XY = Schema((NumericQI("x", 0, 3), NumericQI("y", 0, 3)), Sensitive("s", ("a", "b")))


def release_of(schema: Schema, rows: list[tuple]) -> Release:
    cols = ["id", *schema.qi_names, schema.sensitive.name]
    return schema.encode(pd.DataFrame([(i, *r) for i, r in enumerate(rows)], columns=cols), 1)


def publish(release: Release, model_name: str, model_params: dict, prior=None, **params):
    model = REG.create("privacy_model", model_name, model_params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    anon = REG.create("anonymizer", "js_reduce", params)
    pub = anon.publish(release, PublishContext(model, mctx, History(), np.random.default_rng(0), prior))
    return pub, model, mctx


# ---------------------------------------------------------------------------- Hilbert order
def test_hilbert_order_of_a_4x4_grid_is_the_hand_drawn_curve():
    cells = list(HILBERT_4X4)
    shuffled = [cells[i] for i in np.random.default_rng(1).permutation(16)]
    release = release_of(XY, [(x, y, "a") for x, y in shuffled])
    order = hilbert_order(release)
    assert [tuple(int(v) for v in release.qi[r]) for r in order] == HILBERT_4X4


def test_hilbert_order_uses_domain_ranks_and_keeps_ties_in_release_order():
    # x in [10, 13]: coordinates x - 10; the same 4 x 4 curve. Rows 1 and 3 share their QI values.
    schema = Schema((NumericQI("x", 10, 13), NumericQI("y", 0, 3)), Sensitive("s", ("a", "b")))
    release = release_of(schema, [(13, 0, "a"), (10, 1, "a"), (10, 0, "b"), (10, 1, "b"), (11, 0, "a")])
    # (3,0) is last; (0,0) first, then (1,0), then (0,1) twice (rows 1 then 3)
    assert hilbert_order(release).tolist() == [2, 4, 1, 3, 0]


def test_hilbert_order_on_categorical_leaf_codes_and_fractional_values():
    # categorical: leaf codes in taxonomy order; fractional numeric: rank among the release's values
    tax = Taxonomy.from_paths([["p", "P", "*"], ["q", "P", "*"], ["r", "R", "*"], ["s", "R", "*"]])
    schema = Schema((CategoricalQI("c", tax), NumericQI("w", 0, 1)), Sensitive("s", ("a", "b")))
    # w ranks: 0.1 -> 0, 0.25 -> 1, 0.7 -> 2; cells (code, rank): (3,0) (0,0) (1,1) (0,2) (2,2)
    release = release_of(schema, [("s", 0.1, "a"), ("p", 0.1, "a"), ("q", 0.25, "a"), ("p", 0.7, "a"), ("r", 0.7, "a")])
    cells = [(3, 0), (0, 0), (1, 1), (0, 2), (2, 2)]
    want = sorted(range(5), key=lambda i: HILBERT_4X4.index(cells[i]))
    assert hilbert_order(release).tolist() == want == [1, 2, 3, 4, 0]


def test_hilbert_cache_across_releases_changes_nothing():
    rng = np.random.default_rng(4)
    schema = Schema((NumericQI("x", 0, 20), CategoricalQI("c", Taxonomy.flat(list("pqr")))), Sensitive("s", ("a",)))
    cache: dict = {}
    for t in range(4):
        n = int(rng.integers(1, 60))
        release = release_of(schema, [(int(rng.integers(0, 21)), "pqr"[rng.integers(0, 3)], "a") for _ in range(n)])
        assert np.array_equal(hilbert_order(release, cache), hilbert_order(release))
    assert 0 < len(cache[(5, 2)]) <= 21 * 3  # one curve shape: 5 bits (x up to 20), 2 dimensions


def test_hilbert_order_in_three_dimensions_visits_neighbouring_cells():
    # a Hilbert curve moves to an adjacent cell at every step (on the full 8 x 8 x 8 grid)
    schema = Schema(tuple(NumericQI(c, 0, 7) for c in "xyz"), Sensitive("s", ("a",)))
    grid = np.array(np.meshgrid(*[np.arange(8)] * 3, indexing="ij")).reshape(3, -1).T
    release = release_of(schema, [(*g, "a") for g in grid[np.random.default_rng(2).permutation(len(grid))]])
    walk = release.qi[hilbert_order(release)]
    assert np.all(np.abs(np.diff(walk, axis=0)).sum(axis=1) == 1)
    assert walk[0].tolist() == [0, 0, 0]


# ---------------------------------------------------------------------------- a hand-checked run
# r0..r6 at cells whose Hilbert positions are 0, 2, 3, 4, 7, 8, 15 (so the Hilbert order is
# r0..r6; the lexicographic order would be r0, r2, r3, r1, ...). The release lists them shuffled.
CELLS = {0: (0, 0), 1: (1, 1), 2: (0, 1), 3: (0, 2), 4: (1, 2), 5: (2, 2), 6: (3, 0)}
BELIEFS = {0: [0.9, 0.1], 1: [0.1, 0.9], 2: [0.5, 0.5], 3: [0.5, 0.5], 4: [0.6, 0.4], 5: [1, 0], 6: [0, 1]}
LISTED = [4, 6, 0, 2, 5, 1, 3]  # release row i holds r_{LISTED[i]}


def hand_release():
    release = release_of(XY, [(*CELLS[r], "ab"[r % 2]) for r in LISTED])
    prior = np.array([BELIEFS[r] for r in LISTED], dtype=float)
    return release, prior


def groups_by_record(pub) -> tuple[list[set[int]], set[int]]:
    """Published groups and suppressed set, in terms of r0..r6."""
    name = {row: LISTED[row] for row in range(7)}  # release row == respondent id here
    groups = [set() for _ in range(pub.n_groups)]
    for g, rid in zip(pub.group, pub.respondent):
        groups[g].add(name[int(rid)])
    return groups, {name[int(r)] for r in pub.suppressed}


def test_hand_checked_grouping_with_js_reduce():
    # k = 2, t = 1 (t-closeness always holds), j = 0.4. Along the order:
    #   {r0, r1}: JS((.9,.1), (.1,.9)) = 1 - H(0.9) = 0.531 > 0.4 -> add r2
    #   {r0, r1, r2}: JS = 1 - (2 H(0.9) + 1)/3 = 0.354 <= 0.4 -> group 0
    #   {r3}: |Q| = 1 < 2;  {r3, r4}: JS = H(0.55) - (1 + H(0.6))/2 = 0.0073 -> group 1
    #   {r5}, {r5, r6}: JS((1,0), (0,1)) = 1 -> never closed: r5, r6 are left over.
    release, prior = hand_release()
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.4, "closeness": {"t": 1.0}}, prior)
    groups, suppressed = groups_by_record(pub)
    assert groups == [{0, 1, 2}, {3, 4}]
    assert suppressed == {5, 6}
    # generalization: group 0 spans x 0..1, y 0..1; group 1 is x 0..1, y = 2
    assert pub.low.tolist() == [[0, 0], [0, 2]] and pub.high.tolist() == [[1, 1], [1, 2]]
    assert model.verify(pub, mctx).satisfied
    assert pub.info["n_groups"] == 2 and pub.info["suppressed"] == 2

    # leftovers="merge": r5 joins the nearest group {r3, r4}: JS((.5,.5),(.6,.4),(1,0)) = 0.224;
    # r6 fits neither {r3, r4, r5} (JS 0.505) nor {r0, r1, r2} (JS 0.470): suppressed.
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.4, "closeness": {"t": 1.0}}, prior, leftovers="merge")
    groups, suppressed = groups_by_record(pub)
    assert groups == [{0, 1, 2}, {3, 4, 5}]
    assert suppressed == {6}
    assert model.verify(pub, mctx).satisfied
    assert pub.high.tolist()[1] == [2, 2]


def test_hand_checked_grouping_with_k_anonymity_and_any_window():
    release, _ = hand_release()
    for window in (1, 2, 3, 8):
        pub, _, _ = publish(release, "k_anonymity", {"k": 3}, window=window)
        assert groups_by_record(pub) == ([{0, 1, 2}, {3, 4, 5}], {6})
    pub, _, _ = publish(release, "k_anonymity", {"k": 3}, leftovers="merge")
    assert groups_by_record(pub) == ([{0, 1, 2}, {3, 4, 5, 6}], set())
    pub, _, _ = publish(release, "k_anonymity", {"k": 8})  # the whole release is too small
    assert pub.n_groups == 0 and len(pub.suppressed) == 7


def test_parameters_are_checked():
    with pytest.raises(ConfigError, match=r"anonymizer.leftovers must be 'suppress' or 'merge' \(got 'drop'\)"):
        REG.create("anonymizer", "js_reduce", {"leftovers": "drop"})
    with pytest.raises(ConfigError, match=r"anonymizer.categorical must be 'taxonomy' or 'set'"):
        REG.create("anonymizer", "js_reduce", {"categorical": "node"})
    with pytest.raises(ConfigError, match=r"anonymizer.window must be an integer >= 1 \(got 0\)"):
        REG.create("anonymizer", "js_reduce", {"window": 0})


# ---------------------------------------------------------------------------- random releases
TAX = Taxonomy.from_paths([["p", "P", "*"], ["q", "P", "*"], ["r", "R", "*"], ["s", "R", "*"], ["t", "R", "*"]])


@st.composite
def scenarios(draw):
    """A random release (integer, fractional and categorical QIs), raw random beliefs with zeros,
    and a privacy model."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(0, 45))
    m = draw(st.integers(2, 4))
    kinds = draw(st.lists(st.sampled_from(["int", "frac", "cat"]), min_size=1, max_size=3))
    qis, cols = [], {}
    for c, kind in enumerate(kinds):
        name = f"q{c}"
        if kind == "int":
            low = int(rng.integers(-5, 5))
            high = low + int(rng.integers(1, 40))
            qis.append(NumericQI(name, low, high))
            cols[name] = rng.integers(low, high + 1, n)
        elif kind == "frac":
            qis.append(NumericQI(name, 0.0, 1.0))
            cols[name] = np.round(rng.random(n), 2)
        else:
            qis.append(CategoricalQI(name, TAX))
            cols[name] = rng.choice(list(TAX.leaves), n)
    schema = Schema(tuple(qis), Sensitive("s", tuple("abcd"[:m])))
    frame = pd.DataFrame({"id": rng.permutation(1000)[:n], **cols, "s": rng.choice(list("abcd"[:m]), n, p=rng.dirichlet(np.ones(m)))})
    release = schema.encode(frame, 1)
    prior = rng.dirichlet(np.full(m, draw(st.sampled_from([0.3, 1.0, 5.0]))), size=n)
    prior[rng.random((n, m)) < 0.2] = 0.0
    prior *= rng.choice([1.0, 0.3], size=(n, 1))
    if draw(st.booleans()):
        k, t, j = draw(st.integers(1, 4)), draw(st.sampled_from([0.3, 0.5, 1.0])), draw(st.sampled_from([0.1, 0.3, 0.6, 1.0]))
        name, params = "js_reduce", {"k": k, "j": j, "closeness": {"t": t}}
    else:
        name, params = "k_anonymity", {"k": draw(st.integers(1, 6))}
    return release, prior, name, params


def naive_reference(release: Release, prior: np.ndarray, model, mctx, leftovers: str) -> np.ndarray:
    """Algorithm 4 record by record: its own Hilbert order (one curve point per record), one
    accepts call per tested group; leftovers tried against groups from the latest to the first."""
    coords, top = [], []
    for j, a in enumerate(release.schema.qi):
        x = release.qi[:, j]
        if a.kind == "categorical":
            coords.append(x.astype(int))
            top.append(a.taxonomy.size - 1)
        elif np.all(x == np.floor(x)):
            coords.append(x.astype(int) - int(np.ceil(a.low)))
            top.append(int(np.floor(a.high)) - int(np.ceil(a.low)))
        else:
            coords.append(np.searchsorted(np.unique(x), x))
            top.append(len(np.unique(x)) - 1)
    bits = max(1, max(top).bit_length())
    curve = HilbertCurve(bits, len(coords))
    # every column stretched over the whole grid 0 .. 2^bits - 1
    coords = [[v * (2**bits - 1) // t if t else 0 for v in c.tolist()] for c, t in zip(coords, top)]
    points = np.array(coords).T.tolist()
    order = sorted(range(len(release)), key=lambda r: (curve.distance_from_point(points[r]), r))

    def ok(rows: list[int]) -> bool:
        rows = np.array(rows, dtype=np.int64)
        b = GroupBatch(release.sensitive[rows], np.zeros(len(rows), dtype=np.int64), 1, release.n_values, prior[rows])
        return bool(model.accepts(b, mctx)[0])

    groups: list[list[int]] = []
    current: list[int] = []
    for r in order:
        current.append(r)
        if ok(current):
            groups.append(current)
            current = []
    group = np.full(len(release), -1, dtype=np.int64)
    for g, rows in enumerate(groups):
        group[rows] = g
    if leftovers == "merge":
        for r in current:
            for g in range(len(groups) - 1, -1, -1):
                if ok(groups[g] + [r]):
                    groups[g].append(r)
                    group[r] = g
                    break
    return group


@SETTINGS
@given(scenarios())
def test_publications_verify_and_partition_the_release(case):
    release, prior, name, params = case
    all_ids = set(release.respondent.tolist())
    suppressed = {}
    for leftovers in ("suppress", "merge"):
        pub, model, mctx = publish(release, name, params, prior, leftovers=leftovers)
        report = model.verify(pub, mctx)
        assert report.violations == 0 and report.satisfied
        published = pub.respondent.tolist()
        assert len(published) == len(set(published))  # each record at most once
        assert set(published) | set(pub.suppressed.tolist()) == all_ids
        assert not set(published) & set(pub.suppressed.tolist())
        assert np.array_equal(pub.sensitive, release.sensitive[pub.row])
        # every generalized box holds its records
        qi = release.qi[pub.row]
        assert np.all(pub.low[pub.group] <= qi) and np.all(qi <= pub.high[pub.group])
        suppressed[leftovers] = len(pub.suppressed)
    assert suppressed["merge"] <= suppressed["suppress"]


@SETTINGS
@given(scenarios(), st.sampled_from([1, 2, 5, 8, 64]))
def test_windowed_scan_equals_the_record_by_record_reference(case, window):
    release, prior, name, params = case
    model = REG.create("privacy_model", name, params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    for leftovers in ("suppress", "merge"):
        want = naive_reference(release, prior, model, mctx, leftovers)

        def accepts(rows, segment, n_groups):
            b = GroupBatch(release.sensitive[rows], segment, n_groups, release.n_values, prior[rows])
            return model.accepts(b, mctx)

        got, stats = greedy_partition(hilbert_order(release), accepts, window=window, leftovers=leftovers)
        assert np.array_equal(got, want)
        assert stats["suppressed"] == int((want < 0).sum())
        # and through publish: the same partition
        pub, _, _ = publish(release, name, params, prior, leftovers=leftovers, window=window)
        assert np.array_equal(np.sort(pub.row), np.flatnonzero(want >= 0))
        if len(pub):
            assert np.array_equal(pub.group, want[pub.row])  # groups numbered in order of creation


@SETTINGS
@given(scenarios())
def test_same_input_same_output(case):
    release, prior, name, params = case
    a, _, _ = publish(release, name, params, prior, leftovers="merge", categorical="set")
    b, _, _ = publish(release, name, params, prior.copy(), leftovers="merge", categorical="set")
    for field in ("group", "sensitive", "respondent", "row", "low", "high", "suppressed"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    for j in a.value_sets:
        assert np.array_equal(a.value_sets[j], b.value_sets[j])


def test_accepts_calls_are_about_one_per_group():
    rng = np.random.default_rng(5)
    n = 2000
    schema = Schema((NumericQI("age", 45, 74), NumericQI("weight", 60, 89)), Sensitive("s", tuple("abcde")))
    frame = pd.DataFrame({"id": np.arange(n), "age": rng.integers(45, 75, n), "weight": rng.integers(60, 90, n), "s": rng.choice(list("abcde"), n)})
    release = schema.encode(frame, 1)
    prior = rng.dirichlet(np.full(5, 20.0), size=n)
    pub, model, mctx = publish(release, "js_reduce", {"k": 3, "j": 0.6, "closeness": {"t": 0.5}}, prior)
    assert model.verify(pub, mctx).satisfied
    assert pub.info["n_groups"] > 300
    assert pub.info["accepts_calls"] <= 2 * pub.info["n_groups"] + 20


def test_merge_reaches_groups_beyond_the_nearest_block():
    # x = 0..59 (one QI: the Hilbert order is x). Beliefs: r0, r1 = (1,0); r2..r57 = (1/2,1/2);
    # r58 = (1,0), r59 = (0,1). k = 2, t = 1, j = 0.1: groups {r0,r1}, {r2,r3}, ..., {r56,r57}
    # (29 groups); {r58, r59} has JS 1 -> leftovers. r58 fits only group 0 (JS 0; any other group
    # gets H(2/3) - 2/3 = 0.25), 28 groups away; r59 fits nowhere (group 0: JS H(3/4) = 0.81).
    n = 60
    schema = Schema((NumericQI("x", 0, n - 1),), Sensitive("s", ("a", "b")))
    release = release_of(schema, [(x, "ab"[x % 2]) for x in range(n)])
    prior = np.full((n, 2), 0.5)
    prior[[0, 1, 58]] = [1.0, 0.0]
    prior[59] = [0.0, 1.0]
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.1, "closeness": {"t": 1.0}}, prior, leftovers="merge")
    assert pub.n_groups == 29
    group_of = dict(zip(pub.respondent.tolist(), pub.group.tolist()))
    assert group_of[58] == group_of[0] == 0
    assert pub.suppressed.tolist() == [59]
    assert pub.info["merged"] == 1
    assert np.array_equal(naive_reference(release, prior, model, mctx, "merge")[pub.row], pub.group)
    assert model.verify(pub, mctx).satisfied


def test_max_group_sets_a_stuck_record_aside_instead_of_the_whole_tail():
    # x = 0..39, beliefs: r0 = (0,1) conflicts with everyone else (1,0); k = 2, j = 0.1.
    # The paper's scan never closes a group starting at r0, so all 40 records are left over;
    # with max_group = 8, r0 is set aside and r1..r39 form groups (r39 is the odd one out).
    n = 40
    schema = Schema((NumericQI("x", 0, n - 1),), Sensitive("s", ("a", "b")))
    release = release_of(schema, [(x, "ab"[x % 2]) for x in range(n)])
    prior = np.tile([1.0, 0.0], (n, 1))
    prior[0] = [0.0, 1.0]
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.1, "closeness": {"t": 1.0}}, prior)
    assert len(pub.suppressed) == n and pub.n_groups == 0
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.1, "closeness": {"t": 1.0}}, prior, max_group=8)
    assert pub.info["set_aside"] == 1
    assert sorted(pub.suppressed.tolist()) == [0, 39]
    assert pub.n_groups == 19 and model.verify(pub, mctx).satisfied
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.1, "closeness": {"t": 1.0}}, prior, max_group=8, leftovers="merge")
    assert pub.suppressed.tolist() == [0] and pub.info["merged"] == 1


@SETTINGS
@given(case=scenarios(), max_group=st.integers(1, 12))
def test_max_group_publications_verify_and_partition_the_release(case, max_group):
    release, prior, name, params = case
    bounded, model, mctx = publish(release, name, params, prior, max_group=max_group, leftovers="merge")
    assert model.verify(bounded, mctx).violations == 0
    assert len(bounded) + len(bounded.suppressed) == len(release)
    assert len(np.unique(bounded.respondent)) == len(bounded)
    # the greedy groups closed by the bounded scan hold at most max_group records (merging may add)
    plain_bounded, _, _ = publish(release, name, params, prior, max_group=max_group)
    assert (plain_bounded.group_sizes() <= max_group).all()


def bounded_reference(order, accepts, max_group):
    """max_group semantics written plainly: one start, one prefix at a time."""
    n, group, start, g, aside = len(order), np.full(len(order), -1), 0, 0, []
    while start < n:
        size = next((L for L in range(1, min(max_group, n - start) + 1)
                     if accepts(order[start:start + L], np.zeros(L, dtype=np.int64), 1)[0]), 0)
        if size == 0 and start + max_group < n:
            aside.append(order[start])
            start += 1
            continue
        if size == 0:
            break
        group[order[start:start + size]] = g
        g, start = g + 1, start + size
    return group


@SETTINGS
@given(case=scenarios(), max_group=st.integers(1, 12))
def test_bounded_scan_with_block_lookahead_equals_the_plain_reference(case, max_group):
    release, prior, name, params = case
    model = REG.create("privacy_model", name, params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)

    def accepts(rows, segment, n_groups):
        return model.accepts(GroupBatch(release.sensitive[rows], segment, n_groups, release.n_values, prior[rows]), mctx)

    order = hilbert_order(release)
    got, _ = greedy_partition(order, accepts, max_group=max_group)
    assert np.array_equal(got, bounded_reference(order, accepts, max_group))


def test_merge_places_a_set_aside_record_in_the_nearest_group_along_the_order():
    # r20's beliefs conflict with everyone's: no group of <= 2 records starting with it passes
    # j = 0.95 (JS of two opposite point masses = 1), so it is set aside; a group of three with
    # two (1,0) rows has JS = H(1/3) = 0.918 and passes. The nearest groups along the order are
    # {r18, r19} and {r21, r22} (distance 1 each; ties go to the later one).
    n = 40
    schema = Schema((NumericQI("x", 0, n - 1),), Sensitive("s", ("a", "b")))
    release = release_of(schema, [(x, "ab"[x % 2]) for x in range(n)])
    prior = np.tile([1.0, 0.0], (n, 1))
    prior[20] = [0.0, 1.0]
    pub, model, mctx = publish(release, "js_reduce", {"k": 2, "j": 0.95, "closeness": {"t": 1.0}}, prior, max_group=2, leftovers="merge")
    assert pub.info["set_aside"] == 1 and len(pub.suppressed) == 0
    group_of = dict(zip(pub.respondent.tolist(), pub.group.tolist()))
    assert group_of[20] == group_of[21] == group_of[22]
    assert group_of[39] == group_of[38]  # the leftover at the end joins the latest group
    assert model.verify(pub, mctx).satisfied


def test_a_two_valued_qi_is_stretched_over_the_grid_so_the_order_rarely_switches_it():
    # age 45..74 and gender {1, 2}: stretched to 0/31, gender splits the curve's top-level
    # quadrants (LL g0 -> UL g1 -> UR g1 -> LR g0): exactly two switches along the whole order;
    # left at 0/1 it would switch at almost every step of the curve.
    schema = Schema((NumericQI("age", 45, 74), CategoricalQI("gender", Taxonomy.flat(["1", "2"]))), Sensitive("s", ("a", "b")))
    release = release_of(schema, [(age, g, "a") for age in range(45, 75) for g in ("1", "2")])
    gender = release.qi[hilbert_order(release), 1]
    assert int((np.diff(gender) != 0).sum()) == 2
