"""The angelized publication (GT/BT: QI groups apart from the sensitive buckets, ``Publication.bucket``):
the expected value counts against the single-partition group counts and against a brute-force
enumeration of the worlds GT and BT allow; what the public view shows; the core metrics on it."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication
from cdpbench.errors import CdpbenchError
from cdpbench.metrics.belief import true_value_beliefs
from cdpbench.metrics.kl import reconstructed_mass
from cdpbench.metrics.query import ANY_VALUE, CountQueries, query_answers
from cdpbench.plugin import AttackResult
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

VALUES = ("a", "b", "c", "d")
SCHEMA = Schema((NumericQI("age", 0, 50), CategoricalQI("sex", Taxonomy.flat(["F", "M"]))), Sensitive("s", VALUES))


def release(rng, n):
    frame = pd.DataFrame({"id": np.arange(n), "age": rng.integers(0, 51, n), "sex": rng.choice(["F", "M"], n),
                          "s": rng.choice(VALUES, n)})
    return SCHEMA.encode(frame, t=1)


def angelized(rng, n, n_groups, n_buckets):
    """A release of ``n`` records published as random QI groups and random buckets (every one used)."""
    rel = release(rng, n)
    group = np.concatenate([np.arange(n_groups), rng.integers(0, n_groups, n - n_groups)])
    rng.shuffle(group)
    pub = Publication.from_partition(rel, group)
    bucket = np.concatenate([np.arange(n_buckets), rng.integers(0, n_buckets, n - n_buckets)])
    rng.shuffle(bucket)
    return rel, dataclasses.replace(pub, bucket=bucket)


@pytest.mark.parametrize("seed", range(30))
def test_expected_counts_are_the_group_counts_of_a_single_partition_publication(seed):
    rng = np.random.default_rng(seed)
    rel = release(rng, int(rng.integers(1, 60)))
    labels = rng.integers(-1, max(len(rel) // 3, 1), len(rel))
    pub = Publication.from_partition(rel, labels)
    counts = pub.group_counts()
    assert np.array_equal(pub.expected_group_counts(), counts)
    assert np.array_equal(pub.public().expected_group_counts(), counts)
    assert np.array_equal(pub.bucket_counts(), counts) and pub.n_buckets == pub.n_groups
    # the formula itself (bucket = group given explicitly): exactly the counts, not up to rounding
    same = dataclasses.replace(pub, bucket=pub.group.copy())
    assert same.angelized
    assert np.array_equal(same.expected_group_counts(), counts)
    assert np.array_equal(same.public().expected_group_counts(), counts)
    g, b, n = same.group_bucket_counts()
    assert np.array_equal(g, b) and np.array_equal(n, pub.group_sizes()[g])


def brute_force(pub: Publication, g: int) -> np.ndarray:
    """P(value) of a respondent of group ``g``: every world GT and BT allow — its tuple any of the
    group's (each equally likely), each bucket's values in any order over the bucket's tuples —
    counted, value by value."""
    m = len(VALUES)
    rows_of_bucket = [np.flatnonzero(pub.bucket == b) for b in range(pub.n_buckets)]
    values_of_bucket = [pub.sensitive[r] for r in rows_of_bucket]
    own = np.flatnonzero(pub.group == g)
    tally = np.zeros(m)
    for orders in itertools.product(*(itertools.permutations(range(len(r))) for r in rows_of_bucket)):
        value = np.empty(len(pub), dtype=np.int64)
        for rows, vals, order in zip(rows_of_bucket, values_of_bucket, orders):
            value[rows] = vals[list(order)]
        np.add.at(tally, value[own], 1.0)  # the respondent's tuple: each of the group's
    return tally / tally.sum()


@pytest.mark.parametrize("seed", range(25))
def test_angelized_posterior_matches_brute_force_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 7))
    _, pub = angelized(rng, n, int(rng.integers(1, 4)), int(rng.integers(1, min(n, 3) + 1)))
    view = pub.public()
    expected = view.expected_group_counts()
    assert np.allclose(expected, pub.expected_group_counts(), rtol=0, atol=1e-12)
    sizes = np.bincount(pub.group, minlength=pub.n_groups)
    for g in range(pub.n_groups):
        assert expected[g] / sizes[g] == pytest.approx(brute_force(pub, g), abs=1e-12)


def test_the_oracle_tells_an_angelized_group_from_its_true_values():
    """Not vacuous: somewhere among the instances the posterior is not the group's own frequencies."""
    differs = 0
    for seed in range(25):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(3, 7))
        _, pub = angelized(rng, n, int(rng.integers(1, 4)), int(rng.integers(1, min(n, 3) + 1)))
        truth = np.zeros((pub.n_groups, len(VALUES)))
        np.add.at(truth, (pub.group, pub.sensitive), 1.0)
        differs += not np.allclose(pub.expected_group_counts(), truth)
    assert differs >= 5


def test_worked_example():
    """Two groups over two buckets: g0 = {t0 (b0), t1 (b1)}, g1 = {t2 (b0), t3 (b1)}, b0 = {a, b},
    b1 = {c, d}: each respondent a, b, c or d with 1/4 — in its true group only two of them."""
    rel = release(np.random.default_rng(0), 4)
    rel.sensitive[:] = [0, 2, 1, 3]
    pub = dataclasses.replace(Publication.from_partition(rel, np.array([0, 0, 1, 1])), bucket=np.array([0, 1, 0, 1]))
    assert np.array_equal(pub.bucket_counts(), [[1, 1, 0, 0], [0, 0, 1, 1]])
    assert np.array_equal(pub.expected_group_counts(), np.full((2, 4), 0.5))
    g, b, n = pub.group_bucket_counts()
    assert g.tolist() == [0, 0, 1, 1] and b.tolist() == [0, 1, 0, 1] and n.tolist() == [1, 1, 1, 1]


def test_the_view_shows_gt_and_bt_only():
    rng = np.random.default_rng(7)
    _, pub = angelized(rng, 12, 3, 4)
    view = pub.public()
    assert view.angelized and view.sensitive is None
    assert np.array_equal(view.bucket_value_counts, pub.bucket_counts())
    for g in range(pub.n_groups):  # per group the multiset of its tuples' bucket ids
        assert sorted(view.bucket[view.group == g]) == sorted(pub.bucket[pub.group == g])
    for who in (view, pub):
        with pytest.raises(CdpbenchError, match="group_counts .* does not support an angelized publication") as err:
            who.group_counts()
        assert "\n" not in str(err.value)
    # the link respondent -> tuple inside a group is hidden: swapping two respondents of one group
    # whose tuples are in different buckets (or hold different values) changes nothing seen
    g = int(np.argmax(np.bincount(pub.group)))
    i, j = np.flatnonzero(pub.group == g)[:2]
    swapped = dataclasses.replace(pub, respondent=pub.respondent.copy(), row=pub.row.copy())
    swapped.respondent[[i, j]] = swapped.respondent[[j, i]]
    swapped.row[[i, j]] = swapped.row[[j, i]]
    other = swapped.public()
    for name in ("group", "respondent", "bucket", "bucket_value_counts", "low", "high"):
        assert np.array_equal(getattr(view, name), getattr(other, name)), name
    assert "bucket" in pub.to_frame().columns and "bucket" not in Publication.from_partition(release(rng, 3), [0, 0, 0]).to_frame()


def test_a_bucket_id_per_record_and_no_exact_qi():
    rel = release(np.random.default_rng(1), 5)
    pub = Publication.from_partition(rel, np.zeros(5, dtype=np.int64))
    with pytest.raises(CdpbenchError, match=r"^Publication\.bucket must hold a bucket id >= 0 per published record \(5\), got 4 ids$"):
        dataclasses.replace(pub, bucket=np.zeros(4, dtype=np.int64))
    with pytest.raises(CdpbenchError, match="exclude each other"):
        dataclasses.replace(Publication.from_partition(rel, np.zeros(5, dtype=np.int64), bucketized=True), bucket=np.zeros(5, dtype=np.int64))


def test_core_metrics_read_an_angelized_publication_through_its_buckets():
    rng = np.random.default_rng(11)
    rel, pub = angelized(rng, 30, 5, 6)
    expected = pub.expected_group_counts()
    sizes = pub.group_sizes()
    # belief: a = E_g(s) / |g|; the adversary who only counts (the expected frequencies) gains nothing
    freq = expected / sizes[:, None]
    attack = AttackResult(respondent=pub.respondent.copy(), posterior=freq[pub.group])
    p, a = true_value_beliefs(pub, attack)
    assert np.allclose(p, a) and np.allclose(a, freq[pub.group, pub.sensitive])
    # KL: the reconstruction keeps every record's mass; with the buckets = the groups it is the
    # single-partition reconstruction
    single = Publication.from_partition(rel, pub.group)
    _, q_single = reconstructed_mass(single, rel)
    _, q_same = reconstructed_mass(dataclasses.replace(single, bucket=single.group.copy()), rel)
    assert np.array_equal(q_single, q_same)
    _, q = reconstructed_mass(pub, rel)
    assert np.all(q > 0) and not np.allclose(q, q_single)
    # queries with S = s over the whole domain count the tuples of value s, through the buckets
    m = len(VALUES)
    whole = CountQueries(np.tile([0.0, 0.0], (m + 1, 1)), np.tile([50.0, 1.0], (m + 1, 1)),
                         np.array([*range(m), ANY_VALUE]))
    true, est = query_answers(whole, rel, pub)
    assert np.allclose(est, true) and np.allclose(est[:m], np.bincount(pub.sensitive, minlength=m))
    narrow = CountQueries(np.array([[0.0, 0.0]]), np.array([[20.0, 0.0]]), np.array([1]))
    assert query_answers(narrow, rel, pub)[1] != query_answers(narrow, rel, single)[1]


def test_the_defenders_estimator_refuses_an_angelized_publication():
    from types import SimpleNamespace

    from cdpbench.runner import defender_posterior

    rng = np.random.default_rng(3)
    rel, pub = angelized(rng, 8, 2, 3)
    comp = SimpleNamespace(estimator=object(), names={"estimator": "omega"})
    with pytest.raises(CdpbenchError, match=r"^the defender's estimator 'omega' does not support an angelized publication"):
        defender_posterior(comp, rel, pub, np.full((len(rel), len(VALUES)), 0.25))
