"""JS-reduce's compiled leftover merge (:mod:`cdpbench_jsreduce.merge_kernel`, issue #28): the groups,
the suppressed rows and the counts are those of the NumPy loop
(:func:`cdpbench.greedy.merge_leftovers_extension`, kept as the oracle) and of the path through
``accepts`` — on seeded random releases (raw, zero and point-mass beliefs, the equal and ordered
ground distances the kernel judges, the hierarchical one it leaves to NumPy) and on the real bkseq
views of the release loop; a decision within the kernel's margin of its bound goes to NumPy (a
forced near tie, and a margin so wide that every leftover goes); without numba the NumPy loop
places them; numba is imported only when a merge runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import History
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_jsreduce import merge_kernel
from cdpbench_jsreduce.anonymizers import js_reduce
from cdpbench_jsreduce.anonymizers.js_reduce import greedy_partition, hilbert_order

REG = default_registry()
CONF = Path(__file__).resolve().parents[3] / "conf"
SENSITIVE_TAX = Taxonomy.from_paths([["a", "A", "*"], ["b", "A", "*"], ["c", "C", "*"], ["d", "C", "*"], ["e", "C", "*"]])


def random_case(seed: int, distance: str | None = None):
    """A release of 20..300 records on a 2-D grid with random beliefs, and js_reduce's parameters."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 301))
    distance = distance or ["equal", "ordered", "hierarchical"][seed % 3]
    if distance == "hierarchical":
        sensitive = Sensitive("s", SENSITIVE_TAX.leaves, taxonomy=SENSITIVE_TAX)
    else:
        sensitive = Sensitive("s", tuple("abcdefghij"[: int(rng.integers(2, 11))]), ordered=True)
    m = sensitive.size
    schema = Schema((NumericQI("x", 0, 30), NumericQI("y", 0, 30)), sensitive)
    frame = pd.DataFrame({"id": np.arange(n), "x": rng.integers(0, 31, n), "y": rng.integers(0, 31, n),
                          "s": rng.choice(list(sensitive.values), n, p=rng.dirichlet(np.ones(m)))})
    release = schema.encode(frame, 1)
    prior = rng.dirichlet(np.full(m, rng.choice([0.05, 0.2, 1.0, 5.0, 50.0])), size=n)
    prior[rng.random((n, m)) < rng.choice([0.0, 0.3, 0.7])] = 0.0  # some rows all zero: uniform
    if seed % 4 == 0:  # point masses (entropy -0.0) and signed zeros
        hot = rng.random(n) < 0.5
        prior[hot] = np.eye(m)[rng.integers(0, m, hot.sum())]
        prior[prior == 0.0] = -0.0
    prior *= rng.choice([1.0, 0.3, 7.0, 1e-3], size=(n, 1))  # raw, unnormalized beliefs
    params = {"k": int(rng.integers(1, 6)), "j": float(rng.choice([0.0, 0.05, 0.2, 0.4, 0.6, 1.0])),
              "closeness": {"t": float(rng.choice([0.1, 0.2, 0.35, 0.5, 1.0])), "distance": distance}}
    return release, prior, params


def contexts(release, prior, params):
    model = REG.create("privacy_model", "js_reduce", params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release, prior=prior)
    model.prepare(release, mctx)
    return PublishContext(model, mctx, History(), np.random.default_rng(0), prior)


def partition(order, accepts, extension, monkeypatch, compiled: bool, **opts):
    monkeypatch.setattr(js_reduce, "COMPILED", compiled)
    return greedy_partition(order, accepts, extension=extension, **opts)


def both_paths(release, prior, params, monkeypatch, **opts):
    """The partition with the compiled merge, with the NumPy loop and through ``accepts``: all
    identical (every group, every suppressed row, every count); returns the compiled run's stats
    and how many leftovers the kernel placed and handed to NumPy."""
    ctx = contexts(release, prior, params)
    order, accepts, extension = hilbert_order(release), ctx.predicate(release), ctx.extension(release)
    opts = {"window": 8, "leftovers": "merge", **opts}
    before = dict(js_reduce.MERGE_COUNTS)
    new, new_stats = partition(order, accepts, extension, monkeypatch, True, **opts)
    placed = {key: js_reduce.MERGE_COUNTS[key] - before[key] for key in before}
    old, old_stats = partition(order, accepts, extension, monkeypatch, False, **opts)
    plain, plain_stats = greedy_partition(order, accepts, **opts)
    np.testing.assert_array_equal(new, old)
    np.testing.assert_array_equal(new, plain)
    assert new_stats == old_stats  # accepts_calls included
    for key in ("n_groups", "leftovers", "merged", "set_aside", "suppressed"):
        assert new_stats[key] == plain_stats[key], key
    return new_stats, placed


def test_the_kernel_imports():
    assert js_reduce.compiled_merge() is merge_kernel.merge_run


@pytest.mark.parametrize("margin", [merge_kernel.MARGIN, 1e9])
def test_compiled_prefix_judgment_equals_numpys(margin, monkeypatch):
    """The scan's judgment of every prefix of many sequences (``JSExtension.accepts_prefixes``), by
    the compiled loop: the same booleans; an undecided row is judged again by NumPy (every row
    with a margin of 1e9)."""
    monkeypatch.setattr(merge_kernel, "MARGIN", margin)
    judged = {"rows": 0, "accepted": 0, "numpy": 0, "kernel": 0}
    for seed in range(40):
        release, prior, params = random_case(seed)
        ctx = contexts(release, prior, params)
        empty = np.zeros(0, dtype=np.int64)
        numpy_judge = ctx.extension(release)(empty, empty, 0).accepts_prefixes
        compiled_judge = js_reduce._compiled_prefixes(numpy_judge)
        hierarchical = params["closeness"]["distance"] == "hierarchical"
        assert (compiled_judge is numpy_judge) == hierarchical
        rng = np.random.default_rng(seed)
        n = len(release)
        for B, L in ((1, 1), (3, min(n, 40)), (17, min(n, 9))):
            rows = np.stack([rng.permutation(n)[:L] for _ in range(B)])
            before = js_reduce.MERGE_COUNTS["prefix_fallback"]
            got = compiled_judge(rows)
            again = js_reduce.MERGE_COUNTS["prefix_fallback"] - before
            np.testing.assert_array_equal(got, numpy_judge(rows))
            judged["rows"] += B
            judged["accepted"] += int(got.sum())
            judged["numpy" if again else "kernel"] += again if again else (0 if hierarchical else B)
    assert judged["accepted"] > 100
    if margin > 1:
        assert judged["numpy"] > 100  # every row with a prefix of k records and more went to NumPy
    else:
        assert judged["kernel"] > judged["numpy"]


@pytest.mark.parametrize("block", range(4))
def test_compiled_merge_equals_the_numpy_loop_on_random_releases(block, monkeypatch):
    used = {"compiled": 0, "fallback": 0, "merged": 0, "hierarchical": 0}
    for seed in range(60 * block, 60 * (block + 1)):
        release, prior, params = random_case(seed)
        max_group = [0, 2, 5, 32][seed % 4]
        stats, placed = both_paths(release, prior, params, monkeypatch, max_group=max_group)
        for key in ("compiled", "fallback"):
            used[key] += placed[key]
        used["merged"] += stats["merged"]
        if params["closeness"]["distance"] == "hierarchical":
            assert placed == {"compiled": 0, "fallback": 0, "prefix_fallback": 0}  # a ground distance the kernel does not judge: NumPy
            used["hierarchical"] += stats["leftovers"]
    # the kernel placed leftovers, merged some and left some to NumPy (j = 0 ties: see below)
    assert used["compiled"] > 100 and used["merged"] > 50 and used["hierarchical"] > 0
    assert used["fallback"] < used["compiled"]


def grid_release(seed: int, n: int = 3000):
    """``n`` records on a 31 x 31 grid of two numeric QIs, six ordered values, and Dirichlet priors:
    hundreds of groups, with leftovers all along the order."""
    rng = np.random.default_rng(seed)
    schema = Schema((NumericQI("x", 0, 30), NumericQI("y", 0, 30)), Sensitive("s", tuple("abcdef"), ordered=True))
    frame = pd.DataFrame({"id": np.arange(n), "x": rng.integers(0, 31, n), "y": rng.integers(0, 31, n),
                          "s": rng.choice(list("abcdef"), n)})
    return schema.encode(frame, 1), rng.dirichlet(np.full(6, 2.0), size=n)


def test_many_groups_merge_the_same(monkeypatch):
    """A release large enough that the merge keeps only the groups near the leftovers first
    (``_MERGE_REACH``), with stuck starts set aside all along the order (hundreds of groups and of leftovers)."""
    release, prior = grid_release(1)
    for distance in ("equal", "ordered"):
        params = {"k": 3, "j": 0.2, "closeness": {"t": 0.4, "distance": distance}}
        stats, placed = both_paths(release, prior, params, monkeypatch, max_group=16)
        assert stats["n_groups"] > 2 * js_reduce._MERGE_REACH[-1] and stats["merged"] > 300
        assert placed["compiled"] >= stats["leftovers"]  # every pass of the merge went through the kernel


@pytest.mark.parametrize("margin", [merge_kernel.MARGIN, 1e9])
def test_compiled_merge_in_blocks_counts_as_the_numpy_loop(margin, monkeypatch):
    """A merge over more groups than ``_NEAREST_FIRST_FROM`` (here: any) runs the NumPy loop
    nearest first in blocks; the kernel places the same leftovers and counts the same accepts calls
    (one per block asked, ties at a block's bound inside it), on random releases, on many groups
    with leftovers all along the order, and with a margin so wide that NumPy judges every leftover."""
    monkeypatch.setattr(js_reduce, "_NEAREST_FIRST_FROM", 0)
    monkeypatch.setattr(merge_kernel, "MARGIN", margin)
    used = {"compiled": 0, "fallback": 0}
    for seed in range(40):
        release, prior, params = random_case(seed)
        if params["closeness"]["distance"] == "hierarchical":
            continue
        stats, placed = both_paths(release, prior, params, monkeypatch, max_group=[2, 5, 32][seed % 3])
        used["compiled"] += placed["compiled"]
        used["fallback"] += placed["fallback"]
    release, prior = grid_release(11)
    for distance in ("equal", "ordered"):
        params = {"k": 3, "j": 0.2, "closeness": {"t": 0.4, "distance": distance}}
        stats, placed = both_paths(release, prior, params, monkeypatch, max_group=16)
        used["compiled"] += placed["compiled"]
        used["fallback"] += placed["fallback"]
    if margin > 1:
        assert used["fallback"] > 100
    else:
        assert used["compiled"] > 300 and used["fallback"] < used["compiled"]


@pytest.mark.parametrize("margin", [merge_kernel.MARGIN, 1e9])
@pytest.mark.parametrize("seed", [7, 21, 22, 25, 28, 33])  # releases with groups and leftovers (equal, ordered)
def test_running_statistics_end_bit_for_bit_as_the_numpy_loops(seed, margin, monkeypatch):
    """The compiled merge updates the extension's running sums in place with the additions of
    ``JSExtension.add``: after it, every sum, count and t-closeness table entry is the NumPy loop's,
    bit for bit (with the kernel's margin, and with one so wide that NumPy judges every leftover)."""
    from cdpbench.greedy import extension_over, merge_leftovers_extension

    release, prior, params = random_case(seed)
    ctx = contexts(release, prior, params)
    order, extension = hilbert_order(release), ctx.extension(release)
    group, _ = greedy_partition(order, ctx.predicate(release), extension=extension, leftovers="suppress", max_group=3)
    in_order = group[order]
    members = [order[in_order == g] for g in range(int(group.max()) + 1)]
    left = order[in_order < 0]
    assert len(members) and len(left)
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order), dtype=np.int64)
    first = np.array([position[m[0]] for m in members])
    last = np.array([position[m[-1]] for m in members])
    distance = js_reduce._distance_along_order(order, members)
    monkeypatch.setattr(merge_kernel, "MARGIN", margin)
    compiled_ext, numpy_ext = extension_over(extension, members), extension_over(extension, members)
    compiled, numpy_ = np.full(len(order), -1), np.full(len(order), -1)
    compiled_stats, numpy_stats = {"accepts_calls": 0}, {"accepts_calls": 0}
    done = js_reduce._merge_compiled(left, compiled, compiled_ext, position, first, last, distance, compiled_stats)
    merge_leftovers_extension(left, numpy_, numpy_ext, distance, numpy_stats, later_on_ties=True, block=8, all_at_once=True)
    assert done
    np.testing.assert_array_equal(compiled, numpy_)
    assert compiled_stats == numpy_stats
    for a, b in ((compiled_ext, numpy_ext), (compiled_ext.sums, numpy_ext.sums), (compiled_ext.closeness, numpy_ext.closeness)):
        for name in ("large_plus", "mass", "entropy_sum", "size_plus", "counts", "table"):
            if hasattr(a, name):
                assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name


def test_a_near_tie_is_judged_by_numpy(monkeypatch):
    """j = 0 and identical beliefs: every divergence is 0.0 (NumPy's and the kernel's), 1e-12 under
    the bound j + 1e-12, inside the kernel's margin: each such leftover is judged by NumPy, and the
    groups are NumPy's."""
    rng = np.random.default_rng(3)
    n = 200
    schema = Schema((NumericQI("x", 0, 30), NumericQI("y", 0, 30)), Sensitive("s", tuple("abc")))
    frame = pd.DataFrame({"id": np.arange(n), "x": rng.integers(0, 31, n), "y": rng.integers(0, 31, n),
                          "s": rng.choice(list("abc"), n, p=[0.6, 0.3, 0.1])})
    release = schema.encode(frame, 1)
    prior = np.tile([0.5, 0.3, 0.2], (n, 1))
    prior[::7] = [0.2, 0.2, 0.6]  # records no group of equal beliefs takes: set aside, then merged
    stats, placed = both_paths(release, prior, {"k": 2, "j": 0.0, "closeness": {"t": 0.3}}, monkeypatch, max_group=4)
    assert stats["merged"] > 0 and placed["fallback"] > 0
    assert placed["fallback"] + placed["compiled"] >= stats["leftovers"]


def test_a_wide_margin_sends_every_leftover_to_numpy(monkeypatch):
    release, prior, params = random_case(5, distance="equal")
    params["j"], params["closeness"]["t"] = 0.6, 0.5
    monkeypatch.setattr(merge_kernel, "MARGIN", 1e9)
    stats, placed = both_paths(release, prior, params, monkeypatch, max_group=5)
    assert stats["leftovers"] > 0
    # every leftover with a candidate group of size >= k is undecided; the others none accepts
    assert placed["fallback"] > 0 and placed["fallback"] + placed["compiled"] >= stats["leftovers"]


def test_a_missing_numba_falls_back_to_the_numpy_loop(monkeypatch):
    release, prior, params = random_case(9, distance="equal")
    want, _ = both_paths(release, prior, params, monkeypatch, max_group=5)
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "cdpbench_jsreduce.merge_kernel", raising=False)
    monkeypatch.setattr(js_reduce, "_KERNEL", [])
    assert js_reduce.compiled_merge() is None
    got, placed = both_paths(release, prior, params, monkeypatch, max_group=5)
    assert placed == {"compiled": 0, "fallback": 0, "prefix_fallback": 0} and got == want


def test_compiled_merge_equals_the_numpy_loop_on_bkseq_views(monkeypatch):
    """The release loop of the matrix preset (defender DK 3-step beliefs) on bkseq's first 8 views
    (from view 4 on, a thousand and more leftovers a view)."""
    from hydra import compose, initialize_config_dir

    from cdpbench import runner
    from cdpbench.registry import register_configs

    seen = {"views": 0, "merged": 0, "compiled": 0}
    real = js_reduce.greedy_partition

    def checking(order, accepts, *, extension=None, **params):
        assert params["leftovers"] == "merge" and extension is not None
        before = dict(js_reduce.MERGE_COUNTS)
        js_reduce.COMPILED = True
        new, new_stats = real(order, accepts, extension=extension, **params)
        seen["compiled"] += js_reduce.MERGE_COUNTS["compiled"] - before["compiled"]
        js_reduce.COMPILED = False
        old, old_stats = real(order, accepts, extension=extension, **params)
        js_reduce.COMPILED = True
        np.testing.assert_array_equal(new, old)
        assert new_stats == old_stats
        seen["views"] += 1
        seen["merged"] += new_stats["merged"]
        return new, new_stats

    monkeypatch.setattr(js_reduce, "greedy_partition", checking)
    monkeypatch.setattr(js_reduce, "COMPILED", True)
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=["dataset=bkseq", "+experiment/matrix/defense=js_reduce", "attacker=none",
                                           "dataset.releases=8"])
    runner.run_releases(cfg, runner.build(cfg), progress=False)
    assert seen["views"] == 8 and seen["merged"] > 5000 and seen["compiled"] >= seen["merged"]


def test_numba_is_imported_only_when_a_merge_runs():
    code = ("import sys, cdpbench_jsreduce\n"
            "from cdpbench.registry import Registry\n"
            "reg = Registry()\n"
            "anon = reg.create('anonymizer', 'js_reduce', {'leftovers': 'merge'})\n"
            "model = reg.create('privacy_model', 'js_reduce')\n"
            "print('numba' in sys.modules)\n"
            "from cdpbench_jsreduce.anonymizers import js_reduce\n"
            "print(js_reduce.compiled_merge() is not None, 'numba' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "True"]
