"""(τ,m)-slicedBucket, Algorithm 4 (classification) and Def. 11(2): an updated tuple that can reuse
no earlier signature gets a new one disjoint from ALL of its earlier signatures, not only from its
last one (specs/invariance.md §3.3 item 4 "disjoint from **all** of t's earlier signatures", §3.5
items 3-4: pairwise equal-or-disjoint over the whole history, Upd keeps every signature).

Hand-checked histories, m = 2, one QI (age) so that "nearest partner" is plain to see, values
v0..v5. Respondent P (age 30) is updated at every release:

* T1: P = v0, Q = v1 (age 31). Both new; each value held once, so each is *copied* to Cach and
  stays (Algorithm 2). Assignment: one bucket {P, Q}, Sig_1(P) = {v0, v1}.
* T2: P -> v2 (update), Q leaves, R = v3 (age 32) is new. No earlier signature of P holds v2, so P
  needs a new one avoiding {v0, v1}; its only allowed partner is R: Sig_2(P) = {v2, v3}.
* T3: P -> v4 (update), R leaves; new S1 = v0 (age 31, distance 1) and S2 = v5 (age 50,
  distance 20). Neither {v0, v1} nor {v2, v3} holds v4, so P must avoid v0..v3: its partner is
  S2, Sig_3(P) = {v4, v5}; S1 alone is not m-eligible and Cach has no tuple of another value
  for it, so S1 is delayed. Avoiding only the last signature {v2, v3} would pick the nearer S1:
  Sig_3(P) = {v0, v4}, which meets Sig_1(P) = {v0, v1} in {v0} alone (a partial intersection:
  the collusion attack of Def. 1 with i = 2).

τ-safety checks only T_{r-1} (spec §3.5 item 14): on the same history it does pair P with S1,
which shows the history tells "all earlier signatures" from "the last one".
"""

from __future__ import annotations

import numpy as np

from cdpbench.data import History, Release
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_invariance.family import InvarianceParams
from cdpbench_invariance.phases import mask
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams
from cdpbench_invariance.anonymizers.tau_safety import TauSafety
from cdpbench_invariance.history_verifier import MUniqueParams
from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel

SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("s", tuple(f"v{i}" for i in range(6))))
P, Q, R, S1, S2, Q2, A, B, C = 1, 2, 3, 4, 5, 6, 7, 8, 9

# (respondent, age, value) per release
THREE_UPDATES = [
    [(P, 30, 0), (Q, 31, 1)],
    [(P, 30, 2), (R, 32, 3)],
    [(P, 30, 4), (S1, 31, 0), (S2, 50, 5)],
]
# P returns to v0 at T3 (reusing Sig_1 = {v0, v1}, so its LAST signature is Sig_1 again, while the
# most recently added one is Sig_2 = {v2, v3}), then moves to v4 at T4 with new A = v2 (age 31),
# C = v1 (age 32) and B = v5 (age 50): only B avoids both earlier signatures.
RETURN_THEN_UPDATE = [
    [(P, 30, 0), (Q, 31, 1)],
    [(P, 30, 2), (R, 32, 3)],
    [(P, 30, 0), (Q2, 33, 1)],
    [(P, 30, 4), (A, 31, 2), (C, 32, 1), (B, 50, 5)],
]


def release(t: int, rows) -> Release:
    return Release(
        t,
        SCHEMA,
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([[r[1]] for r in rows], dtype=float),
        np.array([r[2] for r in rows], dtype=np.int64),
    )


def publish_all(anonymizer, tables):
    history, out = History(), []
    for t, rows in enumerate(tables, start=1):
        rel = release(t, rows)
        mctx = ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel)
        pub = anonymizer.publish(rel, PublishContext(None, mctx, history, np.random.default_rng(0)))
        out.append((rel, pub))
        history.releases.append(rel)
        history.publications.append(pub)
    return out


def buckets(pub) -> list[tuple[list[int], set[int]]]:
    """Each published bucket as (real respondents, signature); -1 marks a duplicate or counterfeit."""
    out = []
    for g in range(pub.n_groups):
        sel = pub.group == g
        out.append((sorted(pub.respondent[sel].tolist()), set(pub.sensitive[sel].tolist())))
    return sorted(out, key=lambda b: b[0])


def signature_of(pub, respondent: int) -> set[int]:
    (g,) = pub.group[pub.respondent == respondent]
    return set(pub.sensitive[pub.group == g].tolist())


def test_updated_tuple_avoids_every_earlier_signature():
    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False))
    (r1, t1), (r2, t2), (r3, t3) = publish_all(anon, THREE_UPDATES)
    assert buckets(t1) == [([P, Q], {0, 1})]
    assert buckets(t2) == [([P, R], {2, 3})]
    # T3: P pairs with S2 (v5, 20 years away), not with the nearer S1 (v0, in Sig_1(P))
    assert buckets(t3) == [([P, S2], {4, 5})], "P's new signature must avoid Sig_1 = {v0, v1} too"
    assert t3.suppressed.tolist() == [S1] and t3.info["delayed"] == 1
    sigs = [signature_of(t, P) for t in (t1, t2, t3)]
    assert sigs == [{0, 1}, {2, 3}, {4, 5}]
    assert all(a == b or not a & b for i, a in enumerate(sigs) for b in sigs[i + 1 :])  # pairwise equal or disjoint
    # Upd keeps the full history of P's signatures (spec §3.5 item 4)
    assert anon.signatures.history[P] == [mask([0, 1]), mask([2, 3]), mask([4, 5])]


def test_updated_tuple_avoids_an_older_signature_that_is_not_its_last():
    """P's last signature is Sig_1 again (reused at T3), its most recent new one Sig_2: the
    signature of T4 must avoid both: {v4, v5} with B, neither {v2, v4} with A (avoiding the last
    only) nor {v1, v4} with C (avoiding the most recently added only). A and C, both new and of
    two values, then form their own bucket {v1, v2} (Algorithm 6)."""
    anon = SlicedBucket(SlicedBucketParams(m=2, shuffle=False))
    pubs = [pub for _, pub in publish_all(anon, RETURN_THEN_UPDATE)]
    assert buckets(pubs[2]) == [([P, Q2], {0, 1})]  # T3: P (v0 again) reuses {v0, v1} from Upd
    assert signature_of(pubs[3], P) == {4, 5}, "P's new signature must avoid {v0, v1} and {v2, v3}"
    assert buckets(pubs[3]) == [([P, B], {4, 5}), ([A, C], {1, 2})]
    assert pubs[3].suppressed.tolist() == []
    assert [signature_of(p, P) for p in pubs] == [{0, 1}, {2, 3}, {0, 1}, {4, 5}]


def test_whole_history_verifier_finds_no_partial_intersection():
    """Def. 11(2) in the pairwise reading (spec §3.5 item 3): 0 history violations at every release."""
    for tables in (THREE_UPDATES, RETURN_THEN_UPDATE):
        model = SlicedBucketModel(MUniqueParams(m=2))
        history = History()
        for rel, pub in publish_all(SlicedBucket(SlicedBucketParams(m=2, shuffle=False)), tables):
            report = model.verify(pub, ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel))
            assert report.levels["history_violations"] == 0.0, (rel.t, report)
            assert report.satisfied, (rel.t, report)
            history.releases.append(rel)
            history.publications.append(pub)


def test_tau_safety_checking_only_the_previous_signature_pairs_p_with_s1():
    """The contrast that makes the fixture bite: τ-safety avoids Sig_2(P) = {v2, v3} only, so at
    T3 P takes the nearest allowed partner S1 (v0): {v0, v4}, meeting Sig_1(P) in {v0}; the
    whole-history verifier flags P."""
    pubs = publish_all(TauSafety(InvarianceParams(m=2, shuffle=False)), THREE_UPDATES)
    (_, t1), _, (r3, t3) = pubs
    assert signature_of(t3, P) == {0, 4}
    assert signature_of(t1, P) & signature_of(t3, P) == {0}
    history = History([pubs[0][0], pubs[1][0]], [pubs[0][1], pubs[1][1]])
    report = SlicedBucketModel(MUniqueParams(m=2)).verify(t3, ModelContext(SCHEMA, r3.sensitive_distribution(), history=history, release=r3))
    assert report.levels["history_violations"] >= 1.0
