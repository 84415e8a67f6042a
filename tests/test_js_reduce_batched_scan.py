"""JS-reduce's batched greedy scan and merge (issue #28 item 4) against the plain loops, on small
random inputs: ``cdpbench.greedy.smallest_accepted_prefixes`` (many starts in one prefix
judgment) against brute force; ``greedy_partition`` through the model's running statistics (the
chains of guessed starts, the merge over the groups near the leftovers) against the same function
asking ``accepts`` one start at a time (the path without running statistics), with the chains,
their widths and the merge's reach shrunk so that chains meet, starts stay undecided and the
merge falls back to more groups; the packed-key unique of the Hilbert order against
``np.unique(axis=0)``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import GroupBatch, History
from cdpbench.greedy import smallest_accepted_prefixes
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce.anonymizers import js_reduce
from cdpbench_jsreduce.anonymizers.js_reduce import _unique_points, greedy_partition, hilbert_order

REG = default_registry()


# ---------------------------------------------------------------------------- many starts at once
def random_judge(rng, n):
    """A non-monotone judgment of a group of rows (a weighted sum in a random set of residues)."""
    weight = rng.integers(1, 50, n)
    residues = set(rng.choice(13, size=int(rng.integers(1, 3)), replace=False).tolist())
    least = int(rng.integers(1, 4))
    return lambda group: len(group) >= least and int(weight[group].sum()) % 13 in residues


def prefixes_of(judge):
    def prefixes(rows):
        rows = np.asarray(rows)
        return np.array([[judge(rows[b, : l + 1].tolist()) for l in range(rows.shape[1])] for b in range(rows.shape[0])], dtype=bool).reshape(rows.shape)

    return prefixes


@pytest.mark.parametrize("seed", range(8))
def test_smallest_accepted_prefixes_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    order = rng.permutation(n).astype(np.int64)
    judge = random_judge(rng, n)
    starts = rng.integers(0, n, int(rng.integers(1, 20)))
    limits = rng.integers(1, n + 5, len(starts))
    most = int(rng.integers(1, 40))
    stats = {"accepts_calls": 0}
    got = smallest_accepted_prefixes(order, starts, limits, prefixes_of(judge), stats, most=most,
                                     first=int(rng.integers(1, 9)), budget=int(rng.integers(1, 80)))
    for s, limit, size in zip(starts.tolist(), limits.tolist(), got.tolist()):
        limit = min(limit, n - s)
        want = next((L for L in range(1, limit + 1) if judge(order[s : s + L].tolist())), 0)
        if want == 0 and limit > most or want > most:
            assert size == -1  # undecided within most
        else:
            assert size == want
    assert stats["accepts_calls"] >= 1


# ---------------------------------------------------------------------------- the whole scan and merge
def random_case(seed: int):
    """A release shaped like BKseq (QIs age, gender, weight), Dirichlet beliefs around a few
    class distributions (so that some starts are stuck), and a js_reduce model."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 160))
    m = int(rng.integers(2, 6))
    schema = Schema(
        (NumericQI("age", 45, 74), CategoricalQI("gender", Taxonomy.flat(["1", "2"])), NumericQI("weight", 60, 89)),
        Sensitive("s", tuple(f"v{i}" for i in range(m))),
    )
    klass = rng.integers(0, 4, n)
    base = rng.dirichlet(np.ones(m), size=4)
    prior = np.vstack([rng.dirichlet(20 * base[c] + 1e-3) for c in klass])
    prior[rng.random((n, m)) < 0.1] = 0.0
    frame = pd.DataFrame({"id": np.arange(n), "age": rng.integers(45, 75, n), "gender": rng.choice(["1", "2"], n),
                          "weight": rng.integers(60, 90, n), "s": [f"v{v}" for v in rng.integers(0, m, n)]})
    release = schema.encode(frame, 1)
    params = {"k": int(rng.integers(1, 4)), "j": float(rng.choice([0.1, 0.3, 0.6])), "closeness": {"t": float(rng.choice([0.3, 0.5, 1.0]))}}
    model = REG.create("privacy_model", "js_reduce", params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0), prior)
    return release, prior, model, mctx, ctx


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("tiny", [False, True])
def test_running_scan_and_near_merge_equal_the_plain_loop(seed, tiny, monkeypatch):
    if tiny:  # chains every 2 records, undecided past 3 sizes, the merge keeping 1 then 2 groups a side
        monkeypatch.setattr(js_reduce, "_CHAIN_SPACING", 2)
        monkeypatch.setattr(js_reduce, "_CHAIN_MOST", 3)
        monkeypatch.setattr(js_reduce, "_CHAIN_FIRST", 1)
        monkeypatch.setattr(js_reduce, "_MERGE_REACH", (1, 2))
    release, prior, model, mctx, ctx = random_case(seed)

    def accepts(rows, segment, n_groups):
        return model.accepts(GroupBatch(release.sensitive[rows], segment, n_groups, release.n_values, prior[rows]), mctx)

    order = hilbert_order(release)
    for max_group in (0, 1, 4, 9):
        for leftovers in ("suppress", "merge"):
            want, want_stats = greedy_partition(order, accepts, max_group=max_group, leftovers=leftovers)
            got, got_stats = greedy_partition(order, accepts, max_group=max_group, leftovers=leftovers, extension=ctx.extension(release))
            assert np.array_equal(got, want), (max_group, leftovers)
            for key in ("n_groups", "leftovers", "merged", "set_aside", "suppressed"):
                assert got_stats[key] == want_stats[key], key


def test_unique_points_equal_numpy_unique_rows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        d = int(rng.integers(1, 5))
        bits = int(rng.integers(1, 64 // d + 2))  # some past 63 bits a point: np.unique(axis=0) itself
        n = int(rng.integers(1, 120))
        top = min((1 << bits) - 1, int(rng.integers(1, 40)))
        coords = rng.integers(0, top + 1, (n, d)).astype(np.int64)
        if rng.random() < 0.3:
            coords[:, 0] = (1 << min(bits, 62)) - 1  # the highest coordinate of the grid
        points, inverse = _unique_points(coords, bits)
        want_points, want_inverse = np.unique(coords, axis=0, return_inverse=True)
        assert np.array_equal(points, want_points) and np.array_equal(inverse, want_inverse.reshape(-1))
