"""BKAA through J-similarity's running per-group statistics (``JSimilarity.extension``): the scan
(``accepts_prefixes``: every prefix from a start, also a stuck start up to the end of the NPN order,
and blocks of starts) and the leftover merge (``accepts_plus`` / ``add``: every group plus one
record) close exactly the groups and place exactly the leftovers the paths through ``accepts`` do,
and never ask ``accepts`` — on bkseq releases with the defender's BayFrame beliefs (stuck scans,
thousands of leftovers) and on random releases with random Dirichlet / raw / zero / point-mass
beliefs, J and β set a hair around the divergences and gains that actually occur, tables with
values foreign to the release, both leftover modes. The judgments themselves equal ``accepts`` bit
for bit on random groups, before and after records join them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdpbench.data import GroupBatch, History, Release
from cdpbench.plugin import GroupExtension, ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench.greedy import prefix_judge as _prefix_judge
from cdpbench_bayframe.anonymizers.bkaa import BKAA, greedy_partition, npn_coordinates, npn_order
from cdpbench_bayframe.privacy_models.j_similarity import JSimilarity, JSimilarityExtension, JSimilarityParams, js_divergence, likeness_gain

KEYS = ("n_groups", "leftovers", "merged", "suppressed")


def counting(accepts):
    calls = {"n": 0}

    def wrapped(rows, segment, n_groups):
        calls["n"] += 1
        return accepts(rows, segment, n_groups)

    return wrapped, calls


class MergeOnly(GroupExtension):
    """An extension that merges through running statistics but offers no prefix judgments."""

    def __init__(self, inner):
        self.inner = inner

    def accepts_plus(self, row):
        return self.inner.accepts_plus(row)

    def add(self, g, row):
        self.inner.add(g, row)


def merge_only(start):
    def old_contract(rows, segment, n_groups):
        inner = start(rows, segment, n_groups)
        return None if inner is None else MergeOnly(inner)

    return old_contract


def same_partition(release: Release, ctx: PublishContext, leftovers: str, window: int = 8) -> dict:
    """The partition through ``accepts`` equals the one through the extension (which never asks
    ``accepts``) and the one with the merge alone through the extension; returns the counts."""
    points = npn_coordinates(release)
    order = npn_order(points)
    accepts, start = ctx.predicate(release), ctx.extension(release)
    assert start is not None and _prefix_judge(start) is not None
    old, old_stats = greedy_partition(order, accepts, points, window=window, leftovers=leftovers)
    wrapped, calls = counting(accepts)
    new, new_stats = greedy_partition(order, wrapped, points, window=window, leftovers=leftovers, extension=start)
    assert calls["n"] == 0, "the fast path never asks accepts"
    np.testing.assert_array_equal(new, old)  # every group, and every suppressed row (-1)
    for key in KEYS:
        assert new_stats[key] == old_stats[key], key
    if leftovers == "merge":
        mixed, _ = greedy_partition(order, accepts, points, window=window, leftovers=leftovers, extension=merge_only(start))
        np.testing.assert_array_equal(mixed, old)
    return new_stats


def contexts(release: Release, prior: np.ndarray, params: JSimilarityParams, table: np.ndarray | None = None) -> PublishContext:
    table = release.sensitive_distribution() if table is None else table
    mctx = ModelContext(release.schema, table, release=release, prior=prior)
    return PublishContext(JSimilarity(params), mctx, History(), np.random.default_rng(0), prior)


# ---------------------------------------------------------------------------- bkseq, BayFrame beliefs
def test_extension_equals_accepts_on_bkseq_releases_with_bayframe_beliefs():
    reg = default_registry()
    dataset = reg.create("dataset", "bkseq", {"releases": 4, "tuples": 1500})
    # absent=last_prior: the beliefs under which this scenario exercises every path (stuck scans,
    # merged and suppressed leftovers); under the default reading nothing is suppressed here
    knowledge = reg.create("knowledge", "bayframe", {"absent": "last_prior"})
    estimator = reg.create("estimator", "bayesian")
    # j = 0.5 (was 0.6): with bkseq's exact first-appearance BK_sv (deaths/discharges possible at a
    # first tuple) the beliefs diverge less and j = 0.6 no longer gets stuck or suppresses anything
    params = JSimilarityParams(k=3, beta=5.0, j=0.5)
    seen = dict.fromkeys(("releases", "stuck", "groups", "merged", "suppressed"), 0)
    for release in dataset.releases(np.random.default_rng(0)):
        prior = knowledge.prior(release)
        ctx = contexts(release, prior, params)
        for leftovers in ("suppress", "merge"):
            stats = same_partition(release, ctx, leftovers)
        seen["releases"] += 1
        seen["stuck"] += stats["leftovers"] > 50
        seen["groups"] += stats["n_groups"]
        seen["merged"] += stats["merged"]
        seen["suppressed"] += stats["suppressed"]
        pub = BKAA().publish(release, ctx)  # the real publication (with the extension) feeds the beliefs
        posterior = estimator.posterior(prior[np.maximum(pub.row, 0)], pub.sensitive, pub.group, pub.n_groups, release.n_values)
        knowledge.revise(pub.public(), posterior, pub.respondent)
    assert seen["releases"] == 4
    assert min(seen.values()) > 0, seen  # stuck scans, groups, merged leftovers all exercised


# ---------------------------------------------------------------------------- random releases
EDU = Taxonomy.from_paths([[f"e{i}", f"g{i // 4}", "*"] for i in range(8)])


def random_beliefs(rng: np.random.Generator, n: int, m: int, alpha: float, zeros: float, hot: bool) -> np.ndarray:
    """Dirichlet beliefs, some entries (or whole rows: uniform) zero, optionally point masses with
    signed zeros, every row scaled (raw, unnormalized beliefs)."""
    prior = rng.dirichlet(np.full(m, alpha), size=n)
    prior[rng.random((n, m)) < zeros] = 0.0
    if hot:
        mass = rng.random(n) < 0.5
        prior[mass] = np.eye(m)[rng.integers(0, m, int(mass.sum()))]
        prior[prior == 0.0] = -0.0
    return prior * rng.choice([1.0, 0.3, 7.0, 1e-3], size=(n, 1))


def near(value: float, rng: np.random.Generator) -> float:
    """A threshold a hair around ``value - 1e-12`` (so that ``threshold + 1e-12`` lands on the
    value give or take the last bits, where a different float would flip the decision)."""
    return float(value - 1e-12 + rng.choice([0.0, 0.0, 1e-17, -1e-17, 1e-16, -1e-16]))


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, 160))
    m = draw(st.integers(1, 9))
    schema = Schema(
        (NumericQI("age", 0, 40), CategoricalQI("edu", EDU)),
        Sensitive("s", tuple(f"v{i}" for i in range(m))),
    )
    qi = np.column_stack([rng.integers(0, int(rng.integers(1, 41)), n), rng.integers(0, 8, n)]).astype(float)
    sensitive = rng.choice(m, n, p=rng.dirichlet(np.full(m, draw(st.sampled_from([0.3, 3.0])))))
    release = Release(1, schema, np.arange(n, dtype=np.int64), qi, sensitive)
    prior = random_beliefs(
        rng, n, m, draw(st.sampled_from([0.05, 0.3, 1.0, 5.0, 50.0])), draw(st.sampled_from([0.0, 0.3, 0.7])), draw(st.booleans())
    )
    table = None
    if draw(st.booleans()):  # a table of its own: some values of the release may have p_s = 0
        table = rng.dirichlet(np.ones(m))
        table[rng.random(m) < 0.2] = 0.0
    k = draw(st.integers(1, 6))
    base = draw(st.sampled_from([2.0, math.e]))
    # J and beta a hair around the divergence and gain of a random run of the records
    length = int(rng.integers(1, n + 1))
    rows = rng.permutation(n)[:length]
    mctx = ModelContext(schema, release.sensitive_distribution() if table is None else table, release=release, prior=prior)
    top = math.log(2.0) / math.log(base)
    jsd = float(js_divergence(prior[rows], np.zeros(length, dtype=np.int64), 1, base)[0])
    j = draw(st.sampled_from(["near", "0", "top", "mid"]))
    j = {"near": min(max(near(jsd, rng), 0.0), top), "0": 0.0, "top": top, "mid": 0.3 * top}[j]
    counts = np.bincount(sensitive[rows], minlength=m)[None, :]
    gain = float(likeness_gain(counts, mctx.table_distribution)[0])
    beta = draw(st.sampled_from(["near", "small", "large"]))
    beta = {"near": near(gain, rng) if 1e-9 < gain < np.inf else 0.5, "small": 0.25, "large": 8.0}[beta]
    return release, prior, table, JSimilarityParams(k=k, j=j, beta=beta, log_base=base)


@settings(max_examples=150, deadline=None)
@given(cases(), st.sampled_from([1, 8]), st.sampled_from(["suppress", "merge"]))
def test_extension_equals_accepts_on_random_beliefs(case, window, leftovers):
    release, prior, table, params = case
    same_partition(release, contexts(release, prior, params, table), leftovers, window)


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_judgments_equal_accepts_on_random_groups(case, length, seed):
    """``accepts_prefixes`` on random (also repeated-record) sequences is ``accepts`` on every
    prefix; ``accepts_plus`` is ``accepts`` on every group plus the record, before and after
    random records join random groups with ``add``."""
    release, prior, table, params = case
    ctx = contexts(release, prior, params, table)
    accepts = ctx.predicate(release)
    n = len(release)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, size=(int(rng.integers(1, 5)), length))
    B, L = rows.shape
    segment = np.repeat(np.arange(B * L), np.tile(np.arange(1, L + 1), B))
    flat = np.concatenate([r[:l] for r in rows for l in range(1, L + 1)])
    empty = np.zeros(0, dtype=np.int64)
    start = ctx.extension(release)
    np.testing.assert_array_equal(start(empty, empty, 0).accepts_prefixes(rows), accepts(flat, segment, B * L).reshape(B, L))

    # a sequence of (record, group it joins) on random groups; J and beta a hair around the
    # divergence and gain of one group plus its record somewhere in the sequence
    G = int(rng.integers(1, 12))
    initial = [list(rng.integers(0, n, int(rng.integers(0, 8)))) for _ in range(G)]  # empty groups too
    steps = [(int(rng.integers(0, n)), int(rng.integers(0, G))) for _ in range(12)]
    members = [list(part) for part in initial]
    target = int(rng.integers(0, len(steps)))
    for i, (row, g) in enumerate(steps):
        if i == target:
            probe = np.asarray(members[int(rng.integers(0, G))] + [row], dtype=np.int64)
        members[g].append(row)
    top = math.log(2.0) / math.log(params.log_base)
    jsd = float(js_divergence(prior[probe], np.zeros(len(probe), dtype=np.int64), 1, params.log_base)[0])
    gain = float(likeness_gain(np.bincount(release.sensitive[probe], minlength=release.n_values)[None, :], ctx.model_context.table_distribution)[0])
    j = min(max(near(jsd, rng), 0.0), top)
    beta = near(gain, rng) if 1e-9 < gain < np.inf else params.beta
    ctx = contexts(release, prior, JSimilarityParams(k=params.k, j=j, beta=beta, log_base=params.log_base), table)
    accepts = ctx.predicate(release)
    members = [list(part) for part in initial]
    ext = ctx.extension(release)(
        np.asarray([r for part in members for r in part], dtype=np.int64),
        np.repeat(np.arange(G), [len(part) for part in members]),
        G,
    )
    assert isinstance(ext, JSimilarityExtension)
    for row, g in steps:
        parts = [part + [row] for part in members]
        expected = accepts(np.asarray([r for part in parts for r in part], dtype=np.int64), np.repeat(np.arange(G), [len(p) for p in parts]), G)
        np.testing.assert_array_equal(ext.accepts_plus(row), expected)
        ext.add(g, row)
        members[g].append(row)


def test_a_stuck_scan_and_many_leftovers_on_a_larger_release():
    """Dirichlet(1) beliefs and a strict J: the scan gets stuck and hundreds of leftovers are
    merged one by one into growing groups (sequential semantics, centroids included)."""
    rng = np.random.default_rng(7)
    n, m = 1200, 5
    schema = Schema((NumericQI("age", 17, 90), CategoricalQI("edu", EDU)), Sensitive("s", tuple("abcde")))
    qi = np.column_stack([rng.integers(17, 91, n), rng.integers(0, 8, n)]).astype(float)
    release = Release(1, schema, np.arange(n, dtype=np.int64), qi, rng.choice(m, n))
    prior = rng.dirichlet(np.ones(m), size=n)
    for j, beta in ((0.3, 3.0), (0.45, 1.5), (0.6, 5.0)):
        ctx = contexts(release, prior, JSimilarityParams(k=3, j=j, beta=beta))
        stats = same_partition(release, ctx, "merge")
        same_partition(release, ctx, "suppress")
        assert stats["n_groups"] > 0
    assert stats["leftovers"] > 0


# ---------------------------------------------------------------------------- who gets the fast path
def test_only_j_similarity_itself_offers_the_extension():
    schema = Schema((NumericQI("x", 0, 9),), Sensitive("s", ("a", "b")))
    release = Release(1, schema, np.arange(6), np.arange(6, dtype=float)[:, None], np.array([0, 1] * 3))
    prior = np.full((6, 2), 0.5)
    mctx = ModelContext(schema, release.sensitive_distribution(), release=release, prior=prior)
    k2 = default_registry().create("privacy_model", "k_anonymity", {"k": 2})
    assert PublishContext(k2, mctx, History(), np.random.default_rng(0)).extension(release) is None
    assert PublishContext(JSimilarity(), mctx, History(), np.random.default_rng(0)).extension(release) is not None

    class Stricter(JSimilarity):
        def accepts(self, batch: GroupBatch, ctx: ModelContext) -> np.ndarray:  # judges otherwise: no fast path
            return super().accepts(batch, ctx) & False

    start = PublishContext(Stricter(), mctx, History(), np.random.default_rng(0)).extension(release)
    assert start(np.arange(6), np.repeat(np.arange(3), 2), 3) is None and _prefix_judge(start) is None
    # and BKAA then asks accepts: nothing is ever accepted, everything suppressed
    pub = BKAA().publish(release, PublishContext(Stricter(), mctx, History(), np.random.default_rng(0)))
    assert pub.n_groups == 0 and len(pub.suppressed) == 6


@pytest.mark.parametrize("leftovers", ["merge", "suppress"])
def test_publication_is_the_same_with_and_without_the_extension(leftovers):
    """Through ``BKAA.publish``: the same publication whether the context offers the extension."""
    rng = np.random.default_rng(5)
    n, m = 600, 4
    schema = Schema((NumericQI("age", 17, 90), CategoricalQI("edu", EDU)), Sensitive("s", tuple("abcd")))
    qi = np.column_stack([rng.integers(17, 91, n), rng.integers(0, 8, n)]).astype(float)
    release = Release(1, schema, np.arange(n, dtype=np.int64), qi, rng.choice(m, n))
    prior = rng.dirichlet(np.full(m, 0.7), size=n)
    ctx = contexts(release, prior, JSimilarityParams(k=3, j=0.35, beta=2.0))

    class Plain(PublishContext):
        def extension(self, release):
            return None

    plain = Plain(ctx.privacy_model, ctx.model_context, History(), np.random.default_rng(0), prior)
    anonymizer = BKAA(BKAA.Params(leftovers=leftovers))
    fast, slow = anonymizer.publish(release, ctx), anonymizer.publish(release, plain)
    np.testing.assert_array_equal(fast.group, slow.group)
    np.testing.assert_array_equal(fast.row, slow.row)
    np.testing.assert_array_equal(fast.suppressed, slow.suppressed)
    np.testing.assert_array_equal(fast.low, slow.low)
    np.testing.assert_array_equal(fast.high, slow.high)
    assert fast.info["leftovers"] > 0 and fast.info["n_groups"] > 0


def test_groups_without_records_grow_through_add():
    """An extension over empty groups (float sums from the first record on) judges as accepts."""
    rng = np.random.default_rng(2)
    n, m = 30, 3
    schema = Schema((NumericQI("x", 0, 9),), Sensitive("s", ("a", "b", "c")))
    release = Release(1, schema, np.arange(n), rng.integers(0, 10, (n, 1)).astype(float), rng.integers(0, m, n))
    prior = rng.dirichlet(np.ones(m), size=n)
    ctx = contexts(release, prior, JSimilarityParams(k=2, j=0.2, beta=1.0))
    accepts = ctx.predicate(release)
    empty = np.zeros(0, dtype=np.int64)
    ext = ctx.extension(release)(empty, empty, 3)
    members: list[list[int]] = [[], [], []]
    for row in rng.integers(0, n, 20).tolist():
        parts = [part + [row] for part in members]
        expected = accepts(np.asarray([r for p in parts for r in p]), np.repeat(np.arange(3), [len(p) for p in parts]), 3)
        np.testing.assert_array_equal(ext.accepts_plus(row), expected)
        g = row % 3
        ext.add(g, row)
        members[g].append(row)
