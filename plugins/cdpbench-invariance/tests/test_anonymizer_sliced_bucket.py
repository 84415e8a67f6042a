"""(τ,m)-slicedBucket: a record is held in Cach once. A new tuple whose value it holds alone is
*copied* to Cach (Algorithm 2, Algorithm 5's first lines: "Cach consists of two different types of
records, (i) single record from repeated same SA values (ii) copy of a single occurred SA record");
when it then cannot join a bucket it is *delayed*: "Since there is no tuple for p13 to create
signature, it is stored in Cach for publishing in next release" (§5.4 (iv)). Table 1b, the
cumulative Cach, lists p13 (52 M 47915 Pneumonia) once, and p9 (also copied, then "cached in Cach
table till next release", §5.2) once. A delayed record is no longer a record "that stays in T", so
its copy does not stay beside it: Cach holds it once, as the record itself, and the next release
publishes it at most once (as itself when Cach fills a bucket with it).

Hand-checked history, m = 2, one QI (age), values v0..v5 (THREE_UPDATES of
test_invariance_all_earlier_signatures.py, then a fourth release):

* T1: P = v0 (30), Q = v1 (31): each value held once -> both copied; bucket {P, Q}.
  Cach = {P v0 copy, Q v1 copy}.
* T2: P -> v2, Q leaves, R = v3 (32) new. P's and Q's copies drop (value changed / left); R is
  copied; P (must avoid {v0, v1}) pairs with R. Cach = {R v3 copy}.
* T3: P -> v4, R leaves; S1 = v0 (31), S2 = v5 (50) new, both copied. P (must avoid v0..v3) pairs
  with S2; S1 alone is not m-eligible and Cach holds no other value for it: S1 is delayed.
  Cach = {S2 v5 copy, S1 v0 delayed} -- not S1's copy as well.
* T4a: P, S1, S2 unchanged, new Y = v1 (32) (copied). {P, S2} kept (T_s). Y alone is not
  m-eligible: one v0 from Cach makes it so -- S1 itself, the only Cach entry of v0. Buckets
  {P, S2} {v4, v5} and {S1, Y} {v0, v1}; no duplicate, nothing delayed. Cach = {S2 copy, Y copy}.
  (With S1 in Cach twice, its copy, listed first, is taken: a duplicate of S1 is published while
  S1 itself stays delayed, to be published later as itself.)
* T4b: P, S1, S2 unchanged, new Y1, Y2, Y3 = v1 (32, 33, 34). Y1 moves to Cach (first of a
  repeated value); Y2, Y3 need two v0 for eligibility; Cach has one (S1): cut to one per value,
  bucket {S1, Y2}, Y3 delayed. Cach = {S2 v5 copy, Y1 v1 delayed, Y3 v1 delayed}.
  (With S1 in Cach twice, both entries are taken: S1's value is published twice in the release,
  as S1 and as its ownerless duplicate.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import History
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams

sys.path.insert(0, str(Path(__file__).parent))
from test_invariance_all_earlier_signatures import P, Q, R, S1, S2, SCHEMA, THREE_UPDATES, buckets, release  # noqa: E402

Y, Y1, Y2, Y3 = 11, 12, 13, 14
T4A = [(P, 30, 4), (S1, 31, 0), (S2, 50, 5), (Y, 32, 1)]
T4B = [(P, 30, 4), (S1, 31, 0), (S2, 50, 5), (Y1, 32, 1), (Y2, 33, 1), (Y3, 34, 1)]


def run(tables, **params):
    """Publish ``tables`` in order (``params``: further anonymizer parameters); per release the
    publication and Cach after it as sorted (respondent, value, copy) triples."""
    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False, **params))
    history, out = History(), []
    for t, rows in enumerate(tables, start=1):
        rel = release(t, rows)
        mctx = ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel)
        pub = anon.publish(rel, PublishContext(None, mctx, history, np.random.default_rng(0)))
        history.releases.append(rel)
        history.publications.append(pub)
        out.append((pub, sorted((e.respondent, e.value, e.copy) for e in anon.cache)))
    return out


def test_delayed_new_tuple_is_held_in_cach_once():
    (t1, c1), (t2, c2), (t3, c3) = run(THREE_UPDATES)
    assert buckets(t1) == [([P, Q], {0, 1})] and c1 == [(P, 0, True), (Q, 1, True)]
    assert buckets(t2) == [([P, R], {2, 3})] and c2 == [(R, 3, True)]
    assert buckets(t3) == [([P, S2], {4, 5})]
    assert t3.suppressed.tolist() == [S1] and t3.info["delayed"] == 1
    assert c3 == [(S1, 0, False), (S2, 5, True)], "S1 is delayed: Cach holds it once, as itself (no copy beside it)"
    assert t3.info["cache_size"] == 2


def test_next_release_publishes_the_delayed_tuple_as_itself_not_its_copy():
    *_, (t4, c4) = run(THREE_UPDATES + [T4A])
    assert buckets(t4) == [([P, S2], {4, 5}), ([S1, Y], {0, 1})], "S1 leaves Cach as itself, not as a duplicate"
    assert t4.suppressed.tolist() == []
    assert (t4.info["duplicated"], t4.info["delayed"], t4.info["counterfeits"]) == (0, 0, 0)
    assert c4 == [(S2, 5, True), (Y, 1, True)]


def test_next_release_does_not_publish_the_delayed_value_twice():
    *_, (t4, c4) = run(THREE_UPDATES + [T4B])
    assert buckets(t4) == [([P, S2], {4, 5}), ([S1, Y2], {0, 1})], "S1's value once: no duplicate of S1 beside S1"
    assert (t4.sensitive == 0).sum() == 1
    assert sorted(t4.suppressed.tolist()) == [Y1, Y3]
    assert (t4.info["duplicated"], t4.info["delayed"]) == (0, 2)
    assert c4 == [(S2, 5, True), (Y1, 1, False), (Y3, 1, False)]


def test_paper_p13_is_cached_once():
    """The paper's own case (§5.4 (iv), Table 1b): p13 = Pneumonia, new at T3 and held once, is
    copied to Cach, cannot form a signature and "is stored in Cach for publishing in next release";
    Table 1b lists it once."""
    import test_invariance_sliced_bucket_fixture as fx

    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False))
    fx.run(anon)
    p13 = [(e.value, e.copy) for e in anon.cache if e.respondent == fx.IDS["p13"]]
    assert p13 == [(fx.DISEASES.index("Pneumonia"), False)]


# ---------------------------------------------------------------------------- Cach update readings
# cache_duplicate / cache_single (README, "Readings chosen where the paper is ambiguous"): how the
# Cach update of each release after the first treats the new tuples; the first release's Cach
# creation (Algorithm 2, Table 1a -> 1b) never changes.


def test_cache_duplicate_last_moves_the_last_new_tuple_of_a_repeated_value():
    """T4b with ``cache_duplicate: last``: of Y1, Y2, Y3 (v1) Y3 moves to Cach, not Y1 (§5.2: of p10
    and p11, "say p11"); Y1, Y2 need two v0, Cach has one (S1): bucket {S1, Y1}, Y2 delayed."""
    *_, (t4, c4) = run(THREE_UPDATES + [T4B], cache_duplicate="last")
    assert buckets(t4) == [([P, S2], {4, 5}), ([S1, Y1], {0, 1})]
    assert sorted(t4.suppressed.tolist()) == [Y2, Y3]
    assert c4 == [(S2, 5, True), (Y2, 1, False), (Y3, 1, False)]


def test_cache_single_hold_holds_a_lone_new_value_in_cach():
    """``cache_single: hold``: a value held by one new tuple moves the tuple itself to Cach, no copy
    (§5.2: p9 "is cached in Cach table till next release"); it is published only when a bucket
    takes it from Cach. T1 (the Cach creation) still copies P and Q. T2: R is held; P's new
    signature takes R from Cach, as itself: the same bucket as by default, and Cach keeps no copy.
    T3: S1 and S2 are held; P takes S2; S1 stays delayed. T4a: Y is held too. Held records form no
    bucket among themselves (assignment runs on the new tuples, Cach only tops them up), so S1 and
    Y, which the default publishes together, both stay delayed."""
    (t1, c1), (t2, c2), (t3, c3), (t4, c4) = run(THREE_UPDATES + [T4A], cache_single="hold")
    assert buckets(t1) == [([P, Q], {0, 1})] and c1 == [(P, 0, True), (Q, 1, True)]
    assert buckets(t2) == [([P, R], {2, 3})] and c2 == []
    assert buckets(t3) == [([P, S2], {4, 5})] and t3.suppressed.tolist() == [S1] and c3 == [(S1, 0, False)]
    assert buckets(t4) == [([P, S2], {4, 5})] and sorted(t4.suppressed.tolist()) == [S1, Y]
    assert c4 == [(S1, 0, False), (Y, 1, False)]
    assert [t.info["duplicated"] for t in (t1, t2, t3, t4)] == [0, 0, 0, 0]


@pytest.mark.parametrize("field, bad, allowed", [("cache_duplicate", "middle", "'first', 'last'"),
                                                 ("cache_single", "move", "'copy', 'hold'")])
def test_cache_reading_parameters_are_checked(field, bad, allowed):
    with pytest.raises(ConfigError, match=rf"^{field} must be one of {allowed} \(got '{bad}'\)$"):
        SlicedBucketParams(**{field: bad})


@pytest.mark.parametrize("params", [{"cache_duplicate": "last"}, {"cache_single": "hold"},
                                    {"cache_duplicate": "last", "cache_single": "hold"}])
@pytest.mark.parametrize("seed, m", [(0, 2), (1, 3), (3, 4)])
def test_cache_readings_keep_the_guarantees_on_churn(params, seed, m):
    """On random churn the other readings still verify (m-unique, signatures equal or disjoint over
    each history), use no counterfeit, and the collusion attack narrows no one."""
    from test_invariance_properties import disclosures, publish_all, scenario, verify_all
    from cdpbench_invariance.history_verifier import MUniqueParams
    from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel

    releases = scenario(seed)
    pubs = publish_all(SlicedBucket(SlicedBucketParams(m=m, **params)), releases)
    assert all(r.satisfied for r in verify_all(SlicedBucketModel(MUniqueParams(m=m)), releases, pubs))
    assert not any(p.counterfeit.any() for p in pubs)
    assert disclosures(releases, pubs) == [0] * len(releases)
