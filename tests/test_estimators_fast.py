"""The snapshot attack's fast paths (issue #28, scale) give the same bits as the forms they replaced.

Each former form is kept here literally, as it was before the scale work, and compared with
``np.testing.assert_array_equal`` on small random inputs:

* the ``permanent`` estimator's exact programme, now all groups of a chunk by levels
  (:func:`~cdpbench_classic.estimators.permanent.exact_chunk`), against the per-shape programme
  over dense ``[n + 1, Π(m_s + 1)]`` tables; its Sinkhorn scaling (one bincount a round instead of
  ``np.add.at``), beyond ``max_states``;
* the Ω-estimate and the configuration posterior (in-place ``[n, m]`` work) against their former
  expressions;
* the kernel prior (rows ranked by column keys, blocks bounded by the categorical cells) against
  ``np.unique(axis=0)`` and blocks of ``1M // U`` query points, and its blocking on its own;
* the snapshot attacker's respondent lookup (a table over the id range) against
  :func:`cdpbench.data.rows_of`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import cdpbench_classic.estimators.permanent as perm
import cdpbench_classic.knowledge.kernel as kernel
from cdpbench.data import rows_of
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.attackers.snapshot import population_rows
from cdpbench_classic.estimators.frequency import group_counts
from cdpbench_classic.estimators.omega import omega_posterior
from cdpbench_jsreduce.estimators.configuration import configuration_posterior


# ---------------------------------------------------------------------------- the former forms
def former_exact_groups(w, m):
    """The per-shape programme: dense [B, n + 1, S] forward and backward tables."""
    B, n, k = w.shape
    m = np.asarray(m, dtype=np.int64)
    radix = m + 1
    stride = np.concatenate([[1], np.cumprod(radix)[:-1]]).astype(np.int64)
    S = int(np.prod(radix))
    digits = (np.arange(S)[:, None] // stride[None, :]) % radix[None, :]
    level = digits.sum(axis=1)
    moves = []
    for s in range(k):
        src = np.flatnonzero(digits[:, s] < m[s])
        src = src[np.argsort(level[src], kind="stable")]
        cut = np.searchsorted(level[src], np.arange(n + 1))
        moves.append(([src[cut[t]:cut[t + 1]] for t in range(n)], stride[s]))
    ok = np.ones(B, dtype=bool)
    F = np.zeros((B, n + 1, S))
    F[:, 0, 0] = 1.0
    for t in range(n):
        for s, (by_level, step) in enumerate(moves):
            src = by_level[t]
            F[:, t + 1, src + step] += F[:, t, src] * w[:, t, s, None]
        total = former_sums(F[:, t + 1])
        ok &= total > 0
        F[:, t + 1] /= np.where(total > 0, total, 1.0)[:, None]
    Bw = np.zeros((B, n + 1, S))
    Bw[:, n, S - 1] = 1.0
    post = np.zeros((B, n, k))
    for t in range(n - 1, -1, -1):
        for s, (by_level, step) in enumerate(moves):
            src = by_level[t]
            Bw[:, t, src] += w[:, t, s, None] * Bw[:, t + 1, src + step]
            post[:, t, s] = w[:, t, s] * former_sums(F[:, t, src] * Bw[:, t + 1, src + step])
        Bw[:, t] /= np.maximum(Bw[:, t].max(axis=1), 1e-300)[:, None]
    rows = former_sums(post)[..., None]
    ok &= (rows > 0).all(axis=(1, 2))
    return post / np.where(rows > 0, rows, 1.0), ok


def former_sums(x):
    if x.shape[-1] == 0:
        return np.zeros(x.shape[:-1])
    return np.cumsum(x, axis=-1)[..., -1]


def former_sinkhorn(w, count, segment, n_groups, iterations, tolerance):
    m = w.shape[1]
    a = np.where(count > 0, w, 0.0)
    col = np.ones_like(a)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(iterations):
            x = a * col
            x /= np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
            sums = np.zeros((n_groups, m))
            np.add.at(sums, segment, x)
            per = sums[segment]
            if np.all(np.abs(per - count)[count > 0] <= tolerance):
                break
            col = col * np.where(per > 0, count / np.maximum(per, 1e-300), 1.0)
        x = a * col
        x = x / np.maximum(x.sum(axis=1, keepdims=True), 1e-300)
    return np.where(np.isfinite(x).all(axis=1, keepdims=True), x, 0.0)


def former_permanent(w, sensitive, segment, G, m, max_states=20_000, iterations=500, tolerance=1e-9, batch=1 << 22):
    segment = np.asarray(segment, dtype=np.int64)
    counts = group_counts(sensitive, segment, G, m)
    out = counts[segment] / np.maximum(counts.sum(axis=1)[segment], 1)[:, None]
    present = counts > 0
    k = present.sum(axis=1)
    states = np.prod(np.where(present, counts + 1, 1), axis=1, dtype=float)
    order = np.argsort(segment, kind="stable")
    start = np.searchsorted(segment[order], np.arange(G + 1))
    big = (k > 1) & (states > max_states)
    shapes: dict[tuple, list[int]] = {}
    for g in np.flatnonzero((k > 1) & ~big).tolist():
        shapes.setdefault(tuple(counts[g][present[g]].tolist()), []).append(g)
    for shape, members in shapes.items():
        m_shape = np.array(shape, dtype=np.int64)
        n_g = int(m_shape.sum())
        per_batch = max(1, batch // ((n_g + 1) * int(np.prod(m_shape + 1))))
        for i in range(0, len(members), per_batch):
            gs = np.array(members[i : i + per_batch])
            rows = order[start[gs][:, None] + np.arange(n_g)[None, :]]
            vals = np.nonzero(present[gs])[1].reshape(len(gs), len(shape))
            post, ok = former_exact_groups(w[rows[:, :, None], vals[:, None, :]], m_shape)
            out[rows[ok][:, :, None], vals[ok][:, None, :]] = post[ok]
    if big.any():
        rows = np.flatnonzero(big[segment])
        remap = np.full(G, -1, np.int64)
        remap[np.flatnonzero(big)] = np.arange(int(big.sum()))
        approx = former_sinkhorn(w[rows], counts[segment[rows]].astype(float), remap[segment[rows]], int(big.sum()),
                                 iterations, tolerance)
        ok = approx.sum(axis=1) > 0.5
        out[rows[ok]] = approx[ok]
    return out, int(big.sum())


def former_omega(w, sensitive, segment, n_groups, m):
    segment = np.asarray(segment, dtype=np.int64)
    counts = group_counts(sensitive, segment, n_groups, m).astype(float)
    sizes = counts.sum(axis=1)
    count = counts[segment]
    freq = count / np.maximum(sizes[segment], 1.0)[:, None]
    if w is None:
        return freq
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=w.ravel(), minlength=n_groups * m).reshape(n_groups, m)[segment]
    has_mass = column > 0
    omega = np.where(has_mass, count * w / np.where(has_mass, column, 1.0), freq)
    total = omega.sum(axis=1, keepdims=True)
    return np.where(total > 0, omega / np.where(total > 0, total, 1.0), freq)


def former_configuration(w, sensitive, segment, G, m):
    segment = np.asarray(segment, dtype=np.int64)
    sensitive = np.asarray(sensitive, dtype=np.int64)
    counts = np.bincount(segment * m + sensitive, minlength=G * m).reshape(G, m).astype(float)
    sizes = counts.sum(axis=1)
    count = counts[segment]
    freq = count / np.maximum(sizes, 1.0)[segment][:, None]
    if w is None:
        return freq
    flat = (segment[:, None] * m + np.arange(m)).ravel()
    column = np.bincount(flat, weights=w.ravel(), minlength=G * m).reshape(G, m)
    total = (counts * column).sum(axis=1)
    row = (w * count).sum(axis=1)
    W = total[segment][:, None]
    others = np.maximum(W - row[:, None] - column[segment] + w, 0.0)
    pairs = np.maximum(sizes[segment] - 1.0, 1.0)[:, None]
    exact = (sizes[segment] >= 2) & (total[segment] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        post = count * (w + others / pairs) / W
    post = np.where(exact[:, None], post, freq)
    return post / post.sum(axis=1, keepdims=True)


def former_kernel_prior(release, bandwidth):
    """The kernel prior with np.unique(axis=0) and blocks of 1M // U query points."""
    from scipy import sparse
    from scipy.spatial import cKDTree

    b = float(bandwidth)
    schema = release.schema
    m = release.n_values
    n = len(release)
    qi = np.asarray(release.qi, dtype=float).reshape(n, -1)
    d = qi.shape[1]
    uniq, inv = np.unique(qi, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    U = len(uniq)
    counts = np.bincount(inv * m + release.sensitive, minlength=U * m).reshape(U, m).astype(float)
    coords = np.zeros((U, max(d, 1)))
    spacing = 2.0 * b + 1.0
    numeric, categorical = [], []
    for j, a in enumerate(schema.qi):
        if a.kind == "numeric":
            if a.width > 0:
                coords[:, j] = uniq[:, j] / a.width
                numeric.append(np.ascontiguousarray(coords[:, j]))
            continue
        tax = a.taxonomy
        H = tax.height
        if H == 0:
            continue
        codes = uniq[:, j].astype(np.int64)
        level = min(H, int(math.ceil(b * H)) - 1)
        coords[:, j] = tax.node_of_leaf[level, codes] * spacing
        L = tax.size
        lo, hi = np.repeat(np.arange(L), L), np.tile(np.arange(L), L)
        categorical.append((codes, np.clip(1.0 - (tax.covering_level(lo, hi) / H / b) ** 2, 0.0, None), L))
    tree = cKDTree(coords)
    rows_per_block = max(1, 1_000_000 // U)
    weighted = np.empty((U, m))
    for start in range(0, U, rows_per_block):
        stop = min(U, start + rows_per_block)
        pairs = cKDTree(coords[start:stop]).sparse_distance_matrix(tree, b, p=np.inf, output_type="ndarray")
        i, k = pairs["i"].astype(np.int64), pairs["j"].astype(np.int64)
        w = np.ones(len(i))
        for x in numeric:
            w *= np.clip(1.0 - ((x[start:stop][i] - x[k]) / b) ** 2, 0.0, None)
        for codes, kernel_of_pair, L in categorical:
            w *= kernel_of_pair[codes[start:stop][i] * L + codes[k]]
        weighted[start:stop] = sparse.coo_matrix((w, (i, k)), shape=(stop - start, U)) @ counts
    return (weighted / weighted.sum(axis=1, keepdims=True))[inv]


# ---------------------------------------------------------------------------- random inputs
def random_publication(seed: int, most_values: int = 6, most_size: int = 9):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, most_values + 1))
    G = int(rng.integers(1, 12))
    segment = np.repeat(np.arange(G), rng.integers(1, most_size, G))
    rng.shuffle(segment)  # a group's rows need not be contiguous
    # few values (long runs of one value: wide levels) or any
    sensitive = rng.integers(0, 2 if seed % 3 == 0 else m, len(segment))
    w = rng.random((len(segment), m)) ** 3
    if seed % 4 == 0:
        w[rng.random(w.shape) < 0.3] = 0.0  # zeros: some groups with perm(W) = 0
    if seed % 7 == 0:
        w[segment == segment[0]] = 0.0  # a group with no prior mass at all
    return w, sensitive, segment, G, m


@pytest.mark.parametrize("seed", range(120))
def test_permanent_is_the_former_programme_bit_for_bit(seed, monkeypatch):
    w, sensitive, segment, G, m = random_publication(seed)
    max_states = (20_000, 40, 6)[seed % 3]  # exact everywhere, or some groups (or most) by Sinkhorn
    want, approximated = former_permanent(w, sensitive, segment, G, m, max_states)
    # chunks of every size: one group a chunk up to all at once
    monkeypatch.setattr(perm, "_BATCH_CELLS", (1, 50, 1 << 22)[(seed // 3) % 3])
    got, n_approx = perm.permanent_posterior(w, sensitive, segment, G, m, perm.PermanentParams(max_states=max_states))
    np.testing.assert_array_equal(got, want)
    assert n_approx == approximated


@pytest.mark.parametrize("seed", range(12))
def test_exact_groups_of_one_shape_is_the_former_batch(seed):
    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(1, 5))
    m = rng.integers(1, 4, k)
    B, n = int(rng.integers(1, 6)), int(m.sum())
    w = rng.random((B, n, k)) ** 2
    if seed % 3 == 0:
        w[0, :, 0] = 0.0  # value 0 ruled out in group 0: perm(W) = 0
    want, want_ok = former_exact_groups(w, m)
    got, ok = perm.exact_groups(w, m)
    np.testing.assert_array_equal(ok, want_ok)
    np.testing.assert_array_equal(got[ok], want[want_ok])


@pytest.mark.parametrize("seed", range(60))
def test_omega_and_configuration_are_the_former_expressions_bit_for_bit(seed):
    w, sensitive, segment, G, m = random_publication(seed, most_values=8, most_size=30)
    np.testing.assert_array_equal(omega_posterior(w, sensitive, segment, G, m), former_omega(w, sensitive, segment, G, m))
    np.testing.assert_array_equal(omega_posterior(None, sensitive, segment, G, m), former_omega(None, sensitive, segment, G, m))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = former_configuration(w, sensitive, segment, G, m)
    np.testing.assert_array_equal(configuration_posterior(w, sensitive, segment, G, m), want)
    np.testing.assert_array_equal(configuration_posterior(None, sensitive, segment, G, m),
                                  former_configuration(None, sensitive, segment, G, m))


# ---------------------------------------------------------------------------- the kernel prior
TAX = Taxonomy.from_paths([["x1", "X", "*"], ["x2", "X", "*"], ["y1", "Y", "*"], ["y2", "Y", "*"], ["z1", "Z", "*"]])


def random_release(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    sens = Sensitive("s", ("a", "b", "c", "d"))
    qi = [NumericQI("age", 0, 90), CategoricalQI("tax", TAX)]
    if seed % 2:
        qi.append(NumericQI("hours", 0.0, 10.0))  # non-integer values: ranked by np.unique
    schema = Schema(tuple(qi), sens)
    frame = pd.DataFrame({
        "id": np.arange(n),
        "age": rng.integers(0, 91, n) if seed % 3 else rng.integers(20, 25, n),
        "tax": rng.choice(["x1", "x2", "y1", "y2", "z1"], n),
        "hours": np.round(rng.random(n) * 10, 1),
        "s": rng.choice(list("abcd"), n),
    })
    return schema.encode(frame[schema.columns], 1)


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("bandwidth", [0.05, 0.3, 0.7, 2.0])
def test_kernel_prior_is_the_former_form_bit_for_bit_in_any_blocks(seed, bandwidth, monkeypatch):
    rel = random_release(seed)
    want = former_kernel_prior(rel, bandwidth)
    np.testing.assert_array_equal(kernel.kernel_prior(rel, bandwidth), want)
    prior, inverse = kernel.kernel_prior_by_qi(rel, bandwidth)
    np.testing.assert_array_equal(prior[inverse], want)
    monkeypatch.setattr(kernel, "_PAIRS_PER_BLOCK", 5)  # a point or a few a block
    np.testing.assert_array_equal(kernel.kernel_prior(rel, bandwidth), want)


@pytest.mark.parametrize("seed", range(20))
def test_unique_rows_is_numpys(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    x = np.column_stack([
        rng.integers(-5, 5, n).astype(float),  # whole numbers: counted
        rng.choice([0.5, 1e9, -3.25, 7.0], n),  # not whole / wide: sorted
        rng.integers(0, 3, n) * 1e6,  # whole but wide
    ])[:, : int(rng.integers(1, 4))]
    uniq, inv = kernel.unique_rows(x)
    want_uniq, want_inv = np.unique(x, axis=0, return_inverse=True)
    np.testing.assert_array_equal(uniq, want_uniq)
    np.testing.assert_array_equal(inv, want_inv.reshape(-1))


# ---------------------------------------------------------------------------- the respondent lookup
@pytest.mark.parametrize("seed", range(20))
def test_population_rows_finds_what_rows_of_finds(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    ids = rng.permutation(n * 3)[:n] if seed % 4 else rng.integers(-3, 50, n)  # distinct; or repeats, negatives
    if seed % 5 == 0:
        ids = ids * 10_000  # a wide id range: the sorted search
    wanted = np.concatenate([rng.choice(ids, 10) if n else np.zeros(0, np.int64), [-1, -7, 10**7]])
    rows, found = population_rows(ids, wanted)
    want_rows, want_found = rows_of(ids, wanted, match_negative=True)
    np.testing.assert_array_equal(found, want_found)
    np.testing.assert_array_equal(rows[found], want_rows[want_found])
