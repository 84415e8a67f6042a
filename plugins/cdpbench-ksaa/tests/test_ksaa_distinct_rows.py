"""``distinct_rows.distinct_rows`` (issue #28, scale: the rows ranked per column, one 1-D sort)
against the literal ``np.unique(key, axis=0, return_index=True, return_inverse=True)``: the same
rows, order, first indices and inverse on random matrices with many ties, signed zeros, wide
spans (the fallback), NaN (the fallback), and empty or one-column shapes."""

from __future__ import annotations

import numpy as np
import pytest
from cdpbench_ksaa.distinct_rows import distinct_rows


def literal(key):
    rows, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return rows, np.asarray(first, np.int64), np.asarray(inverse, np.int64).ravel()


def assert_same(key):
    want, got = literal(key), distinct_rows(key)
    assert got[0].shape == want[0].shape
    assert np.array_equal(got[0], want[0], equal_nan=True)
    assert np.array_equal(np.signbit(got[0]), np.signbit(want[0]))  # the first occurrence's own bits
    assert got[1].tolist() == want[1].tolist()
    assert got[2].tolist() == want[2].tolist()


@pytest.mark.parametrize("values", [2, 3, 50, 10**6])
def test_distinct_rows_equal_np_unique_on_random_matrices(values):
    rng = np.random.default_rng(values)
    for _ in range(200):
        rows, cols = int(rng.integers(1, 60)), int(rng.integers(1, 12))
        key = rng.integers(-values, values, (rows, cols)).astype(float) / 4
        if rng.random() < 0.3:  # signed zeros: equal as floats
            zero = key == 0
            key[zero & (rng.random(key.shape) < 0.5)] = -0.0
        if rng.random() < 0.3:  # repeated rows
            key = key[rng.integers(0, rows, rows)]
        assert_same(key)


def test_distinct_rows_fallbacks_and_shapes():
    rng = np.random.default_rng(0)
    wide = rng.random((300, 8))  # about 300^8 digits: more than 63 bits
    assert_same(wide)
    nan = rng.integers(0, 3, (40, 3)).astype(float)
    nan[rng.random(nan.shape) < 0.2] = np.nan
    assert_same(nan)
    assert_same(np.zeros((0, 3)))
    assert_same(np.array([[1.0], [0.0], [1.0], [-0.0]]))
