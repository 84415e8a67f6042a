"""The ``permanent`` estimator's compiled exact programme (numba,
:mod:`cdpbench_classic.permanent_kernel`; issue #28, scale) gives the same bits as its
NumPy / scipy passes and as the former per-shape programme over dense tables (the oracle kept in
``tests/test_estimators_fast.py``), on random publications: groups of 1..40 records, up to 14
values, exact everywhere or partly / mostly by Sinkhorn, priors with zeros (perm(W) = 0) and tiny
scales (underflow, the 1e-300 floor of the backward rescaling). The kernel is imported only when
the programme runs, and a missing numba falls back to NumPy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import cdpbench_classic.estimators.permanent as perm
from test_estimators_fast import former_exact_groups, former_permanent

pytest.importorskip("numba")


def both_paths(monkeypatch, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` by the compiled kernel, then by the NumPy / scipy passes."""
    monkeypatch.setattr(perm, "COMPILED", True)
    assert perm.compiled_programme() is not None, "numba is installed: the kernel must load"
    compiled = fn(*args, **kwargs)
    monkeypatch.setattr(perm, "COMPILED", False)
    assert perm.compiled_programme() is None
    plain = fn(*args, **kwargs)
    monkeypatch.setattr(perm, "COMPILED", True)
    return compiled, plain


def random_publication(seed: int):
    """Groups of 1..40 records over up to 14 values; few values a group (wide levels, exact) or
    many (big state counts, Sinkhorn)."""
    rng = np.random.default_rng(1000 + seed)
    m = int(rng.integers(2, 15))
    G = int(rng.integers(1, 10))
    sizes = rng.integers(1, 41 if seed % 2 == 0 else 12, G)
    segment = np.repeat(np.arange(G), sizes)
    rng.shuffle(segment)
    spread = (2, 3, m)[seed % 3]  # values a group draws from
    offset = rng.integers(0, m - min(spread, m) + 1, G)
    sensitive = offset[segment] + rng.integers(0, min(spread, m), len(segment))
    w = rng.random((len(segment), m)) ** int(rng.integers(1, 4))
    if seed % 4 == 0:
        w[rng.random(w.shape) < 0.3] = 0.0  # some groups with perm(W) = 0
    if seed % 5 == 0:
        w *= 10.0 ** rng.uniform(-300, 0, (len(segment), 1))  # tiny rows: underflow, the 1e-300 floor
    return w, sensitive, segment, G, m


@pytest.mark.parametrize("seed", range(60))
def test_compiled_permanent_is_the_numpy_programme_and_the_former_one_bit_for_bit(seed, monkeypatch):
    w, sensitive, segment, G, m = random_publication(seed)
    max_states = (20_000, 300, 12)[seed % 3]  # exact everywhere, or some groups (or most) by Sinkhorn
    params = perm.PermanentParams(max_states=max_states)
    monkeypatch.setattr(perm, "_BATCH_CELLS", (1, 200, 1 << 22)[(seed // 3) % 3])  # chunks of any size
    (got, n_got), (plain, n_plain) = both_paths(monkeypatch, perm.permanent_posterior, w, sensitive, segment, G, m,
                                                params)
    np.testing.assert_array_equal(got, plain)
    assert n_got == n_plain
    want, n_want = former_permanent(w, sensitive, segment, G, m, max_states)
    np.testing.assert_array_equal(got, want)
    assert n_got == n_want


@pytest.mark.parametrize("seed", range(40))
def test_compiled_chunk_is_the_numpy_chunk_bit_for_bit(seed, monkeypatch):
    """Groups of any shapes in one chunk (values padded with 0 counts), up to 40 records and 14
    values, with their ok flags."""
    rng = np.random.default_rng(2000 + seed)
    k = int(rng.integers(1, 15))
    G = int(rng.integers(1, 8))
    cnt = np.zeros((G, k), dtype=np.int64)
    for g in range(G):
        values = int(rng.integers(1, min(k, 5) + 1))
        cnt[g, :values] = rng.integers(1, 41 // values + 1 if seed % 2 else 4, values)
    w = rng.random((int(cnt.sum()), k)) ** 2
    if seed % 3 == 0:
        w[rng.random(w.shape) < 0.4] = 0.0
    if seed % 4 == 1:
        w *= 10.0 ** rng.uniform(-300, -200, (len(w), 1))
    (got, ok), (plain, plain_ok) = both_paths(monkeypatch, perm.exact_chunk, w, cnt)
    np.testing.assert_array_equal(ok, plain_ok)
    np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("seed", range(12))
def test_compiled_groups_of_one_shape_are_the_former_batch(seed, monkeypatch):
    rng = np.random.default_rng(3000 + seed)
    k = int(rng.integers(1, 6))
    m = rng.integers(1, 6, k)
    B, n = int(rng.integers(1, 5)), int(m.sum())
    w = rng.random((B, n, k)) ** 2
    if seed % 3 == 0:
        w[0, :, 0] = 0.0  # value 0 ruled out in group 0: perm(W) = 0
    want, want_ok = former_exact_groups(w, m)
    (got, ok), (plain, plain_ok) = both_paths(monkeypatch, perm.exact_groups, w, m)
    np.testing.assert_array_equal(ok, want_ok)
    np.testing.assert_array_equal(plain_ok, want_ok)
    np.testing.assert_array_equal(got[ok], want[want_ok])
    np.testing.assert_array_equal(got, plain)


def test_a_missing_numba_falls_back_to_numpy(monkeypatch):
    w, sensitive, segment, G, m = random_publication(3)
    want, _ = perm.permanent_posterior(w, sensitive, segment, G, m)
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "cdpbench_classic.permanent_kernel", raising=False)
    monkeypatch.setattr(perm, "_KERNEL", [])
    assert perm.compiled_programme() is None
    got, _ = perm.permanent_posterior(w, sensitive, segment, G, m)
    np.testing.assert_array_equal(got, want)


def test_numba_is_imported_only_when_the_programme_runs():
    code = ("import sys, cdpbench_classic\n"
            "from cdpbench.registry import Registry\n"
            "est = Registry().create('estimator', 'permanent')\n"
            "print('numba' in sys.modules)\n"
            "import numpy as np\n"
            "est.posterior(np.ones((2, 2)), np.array([0, 1]), np.array([0, 0]), 1, 2)\n"
            "print('numba' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
