"""Properties of the invariance family on random churn scenarios (inserts, deletes, updates,
re-inserts), and the whole-history verifiers against brute-force oracles."""


import numpy as np
import pandas as pd
import pytest

from cdpbench.data import History, Publication
from cdpbench.datasets.churn import churn_process
from cdpbench.plugin import AttackContext, ModelContext, PublishContext
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_invariance.attackers.intersection import IntersectionAttacker
from cdpbench_invariance.anonymizers.m_invariance import MInvariance
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, affinity
from cdpbench_invariance.family import InvarianceParams
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucketParams
from cdpbench_invariance.anonymizers.tau_safe_lk import TauSafeLK, TauSafeLKParams
from cdpbench_invariance.anonymizers.tau_safety import TauSafety
from cdpbench_invariance.privacy_models.m_invariance import MInvarianceModel
from cdpbench_invariance.history_verifier import MUniqueParams
from cdpbench_invariance.privacy_models.sliced_bucket import SlicedBucketModel
from cdpbench_invariance.privacy_models.tau_safe_lk import TauSafeLKModel, TauSafeLKModelParams
from cdpbench_invariance.privacy_models.tau_safety import TauSafetyModel

VALUES = tuple(f"v{i}" for i in range(7))
SCHEMA = Schema(
    (NumericQI("age", 0, 100), CategoricalQI("gender", Taxonomy.flat(["F", "M"]))),
    Sensitive("s", VALUES),
)


def scenario(seed, *, updates=5, reinsertions=4, releases=6):
    rng = np.random.default_rng(seed)
    n = 200
    base = pd.DataFrame({
        "age": rng.integers(18, 80, n),
        "gender": rng.choice(["F", "M"], n),
        "s": rng.choice(VALUES, n, p=[0.3, 0.2, 0.15, 0.15, 0.1, 0.05, 0.05]),
    })
    return list(churn_process(base, SCHEMA, initial=60, deletions=8, insertions=12, updates=updates,
                              reinsertions=reinsertions, releases=releases, rng=rng))


def publish_all(anonymizer, releases, model=None):
    """Every release through ``anonymizer``, given ``model`` as its privacy model."""
    history, pubs = History(), []
    for rel in releases:
        mctx = ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel)
        pubs.append(anonymizer.publish(rel, PublishContext(model, mctx, history, np.random.default_rng(rel.t))))
        history.releases.append(rel)
        history.publications.append(pubs[-1])
    return pubs


def verify_all(model, releases, pubs):
    history, reports = History(), []
    for rel, pub in zip(releases, pubs):
        reports.append(model.verify(pub, ModelContext(SCHEMA, rel.sensitive_distribution(), history=history, release=rel)))
        history.releases.append(rel)
        history.publications.append(pub)
    return reports


def shrunk(res, view) -> int:
    """Respondents whose intersected candidate set is smaller than their own signature (left with
    one value, or narrowed)."""
    signature = view.expected_group_counts()[view.group] > 0  # angelized: the union of the group's buckets
    real = res.respondent >= 0
    return int((((res.posterior > 0).sum(axis=1) < signature.sum(axis=1)) & real).sum())


def disclosures(releases, pubs):
    attacker, views, out = IntersectionAttacker(), [], []
    for rel, pub in zip(releases, pubs):
        views.append(pub.public())
        res = attacker.observe(views[-1], AttackContext(rel, views, np.random.default_rng(0)))
        out.append(shrunk(res, views[-1]))
    return out


METHODS = {
    "m_invariance": (lambda m: MInvariance(InvarianceParams(m=m)), lambda m: MInvarianceModel(MUniqueParams(m=m))),
    "tau_safety": (lambda m: TauSafety(InvarianceParams(m=m)), lambda m: TauSafetyModel(MUniqueParams(m=m))),
    "tau_safe_lk": (lambda m: TauSafeLK(TauSafeLKParams(l=m, k=m)), lambda m: TauSafeLKModel(TauSafeLKModelParams(m=m))),
    "tau_safe_lk_k3": (lambda m: TauSafeLK(TauSafeLKParams(l=m, k=3)), lambda m: TauSafeLKModel(TauSafeLKModelParams(m=m, k=3))),
    "tau_safe_lk_buckets": (lambda m: TauSafeLK(TauSafeLKParams(l=m, k=m, form="buckets")),
                            lambda m: TauSafeLKModel(TauSafeLKModelParams(m=m))),
    "sliced_bucket": (lambda m: SlicedBucket(SlicedBucketParams(m=m)), lambda m: SlicedBucketModel(MUniqueParams(m=m))),
}


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("seed,m", [(0, 2), (1, 3), (2, 2), (3, 4)])
def test_every_publication_passes_its_whole_history_verifier(name, seed, m):
    releases = scenario(seed)
    make, model = METHODS[name]
    pubs = publish_all(make(m), releases)
    for rel, pub, report in zip(releases, pubs, verify_all(model(m), releases, pubs)):
        assert report.satisfied, (name, rel.t, report)
        real = pub.respondent[pub.respondent >= 0]
        assert len(np.unique(real)) == len(real)  # a respondent at most once
        assert set(real) | set(pub.suppressed.tolist()) == set(rel.respondent.tolist())
        assert not set(real) & set(pub.suppressed.tolist())
        counts = pub.bucket_counts()  # the groups, but for τ-safe (l,k)'s angelized form
        assert ((counts > 0).sum(axis=1) >= m).all() and counts.max() <= 1  # m-unique
        assert pub.angelized == (name in ("tau_safe_lk", "tau_safe_lk_k3"))
        if pub.angelized:  # GT: QI groups of k to 2k - 1 tuples (one group if fewer than k)
            k = 3 if name == "tau_safe_lk_k3" else m
            sizes = pub.group_sizes()
            assert (sizes >= min(k, len(pub))).all() and (sizes < 2 * k).all() or pub.n_groups == 1
            assert report.levels["k"] == sizes.min()
        if name == "sliced_bucket":
            assert not pub.counterfeit.any()


@pytest.mark.parametrize("seed,m", [(0, 2), (1, 3), (2, 2), (3, 4), (4, 3)])
def test_sliced_bucket_discloses_no_one(seed, m):
    releases = scenario(seed)
    assert disclosures(releases, publish_all(SlicedBucket(SlicedBucketParams(m=m)), releases)) == [0.0] * len(releases)


@pytest.mark.parametrize("seed,m", [(0, 2), (1, 3), (5, 2)])
def test_m_invariance_discloses_no_one_without_internal_updates(seed, m):
    """Within one lifespan m-invariance keeps every signature; the collusion attack needs a
    respondent whose value changed or who came back (a new lifespan)."""
    releases = scenario(seed, updates=0, reinsertions=0)
    assert disclosures(releases, publish_all(MInvariance(InvarianceParams(m=m)), releases)) == [0.0] * len(releases)


def test_tau_safety_and_m_invariance_are_exposed_on_churn():
    """With updates and re-insertions, lifespans restart (m-invariance) and only the previous
    signature is avoided (τ-safety): over a few seeds the attack finds partial intersections."""
    total = {"m_invariance": 0.0, "tau_safety": 0.0}
    for seed in range(4):
        releases = scenario(seed, updates=10, reinsertions=6, releases=8)
        for name in total:
            total[name] += sum(disclosures(releases, publish_all(METHODS[name][0](2), releases)))
    assert total["m_invariance"] > 0 and total["tau_safety"] > 0


# ---------------------------------------------------------------------------- verifier oracles
def random_publications(seed, releases):
    """Random partitions of each release into groups (not m-unique on purpose)."""
    rng = np.random.default_rng(seed)
    out = []
    for rel in releases:
        groups = rng.integers(0, max(len(rel) // 3, 1), len(rel))
        groups[rng.random(len(rel)) < 0.1] = -1
        out.append(Publication.from_partition(rel, groups))
    return out


def signatures(pub):
    counts = pub.group_counts()
    return {int(r): frozenset(np.flatnonzero(counts[g]).tolist()) for r, g in zip(pub.respondent, pub.group) if r >= 0}


def values(pub):
    return {int(r): int(s) for r, s in zip(pub.respondent, pub.sensitive) if r >= 0}


def brute_force(kind, pubs, t):
    now, nv = signatures(pubs[t]), values(pubs[t])
    bad = 0
    for r, sig in now.items():
        if kind == "sliced_bucket":
            bad += any(r in signatures(p) and signatures(p)[r] != sig and signatures(p)[r] & sig for p in pubs[:t])
        elif kind == "m_invariance":
            if t and r in signatures(pubs[t - 1]) and values(pubs[t - 1])[r] == nv[r]:
                bad += signatures(pubs[t - 1])[r] != sig
        else:
            last = next((p for p in reversed(pubs[:t]) if r in signatures(p)), None)
            if last is not None:
                old = signatures(last)[r]
                bad += (old != sig) if nv[r] in old else bool(old & sig)
    groups = pubs[t].group_counts()
    return bad, int((~(((groups > 0).sum(axis=1) >= 2) & (groups.max(axis=1) <= 1))).sum())


@pytest.mark.parametrize("kind,model", [("sliced_bucket", SlicedBucketModel), ("m_invariance", MInvarianceModel),
                                        ("tau_safety", TauSafetyModel)])
@pytest.mark.parametrize("seed", range(4))
def test_verifiers_match_brute_force(kind, model, seed):
    releases = scenario(seed)
    pubs = random_publications(seed, releases)
    for t, report in enumerate(verify_all(model(MUniqueParams(m=2)), releases, pubs)):
        history_bad, groups_bad = brute_force(kind, pubs, t)
        assert report.levels["history_violations"] == history_bad
        assert report.violations == history_bad + groups_bad
    assert sum(brute_force(kind, pubs, t)[0] for t in range(len(pubs))) > 0  # the oracle is exercised


def test_affinity_eq3():
    a = np.array([0, 0, 1, 1] * 5)
    assert affinity(a, a) == pytest.approx(1.0)
    assert affinity(a, np.array([0, 1, 0, 1] * 5)) == pytest.approx(0.0)
    assert affinity(a, np.zeros(20)) == 0.0
    # brute force over a random table: sum of squared deviations over expected, scaled
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 3, 200), rng.integers(0, 4, 200)
    f = np.array([[np.mean((x == i) & (y == j)) for j in range(4)] for i in range(3)])
    e = np.outer(f.sum(1), f.sum(0))
    assert affinity(x, y) == pytest.approx(((f - e) ** 2 / e).sum() / 2)


def test_assign_places_repeated_counterfeits():
    """Counterfeits of one value are equal items: each must still be placed once (a set of the
    taken items once dropped them all and left the real tuples unassigned)."""
    from cdpbench_invariance.phases import assign

    value = {0: 0, 1: 0, 2: 0, 3: 1, -1 - 2: 2, -1 - 3: 3}
    items = [0, 1, 2, 3, -3, -3, -3, -4, -4]
    buckets, left = assign(items, value, lambda its: np.zeros((len(list(its)), 1)), 3)
    assert left == []
    assert sorted(it for _, b in buckets for it in b) == sorted(items)
    assert all(len({value[it] for it in b}) * (len(b) // len({value[it] for it in b})) == len(b) for _, b in buckets)


@pytest.mark.parametrize("name", ["m_invariance", "tau_safety", "tau_safe_lk"])
def test_counterfeit_methods_publish_everyone(name):
    """With counterfeits at hand nothing is delayed: every record of every release is published,
    also when the values are skewed enough that the new tuples need counterfeits to be m-eligible.
    (m = 3 of 7 values: with m = 4 an updated tuple whose previous signature had 4 values has only
    2 values left for its 3 partners and is rightly not published.)"""
    releases = scenario(7, updates=10, reinsertions=6, releases=8)
    pubs = publish_all(METHODS[name][0](3), releases)
    assert all(len(p.suppressed) == 0 for p in pubs)
    assert sum(int(p.counterfeit.sum()) for p in pubs) > 0


def test_affinity_groups_merge_the_most_associated_columns():
    from cdpbench_invariance.anonymizers.sliced_bucket import affinity_groups

    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 500)
    qi = np.column_stack([a, rng.integers(0, 3, 500), a // 2, rng.integers(0, 5, 500)]).astype(float)
    names = ["w", "x", "y", "z"]
    assert affinity_groups(qi, names, 3) == [["w", "y"], ["x"], ["z"]]  # y is a function of w: φ² = 1
    assert affinity_groups(qi, names, 1) == [names]
    assert affinity_groups(qi, names, 4) == [["w"], ["x"], ["y"], ["z"]]


def test_sliced_bucket_reports_its_column_grouping():
    releases = scenario(0, releases=1)
    for params, expected in [(SlicedBucketParams(m=2), "age,gender"), (SlicedBucketParams(m=2, grouping="affinity", column_count=1), "age,gender"),
                             (SlicedBucketParams(m=2, columns=[["age"], ["gender"]]), "age | gender")]:
        pub = publish_all(SlicedBucket(params), releases)[0]
        assert pub.info["columns"] == expected


@pytest.mark.parametrize("make, name", [(lambda: SlicedBucket(SlicedBucketParams(m=8)), "anonymizer.m"),
                                        (lambda: TauSafeLK(TauSafeLKParams(l=8, k=2)), "anonymizer.l")])
def test_more_distinct_values_than_the_domain_has_is_a_one_line_error(make, name):
    from cdpbench.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"^{name} must be at most the 7 sensitive values of the data set \(got 8\)$"):
        publish_all(make(), scenario(0, releases=1))
    with pytest.raises(ConfigError, match=r"^anonymizer\.columns must be QI column names among \['age', 'gender'\]"):
        publish_all(SlicedBucket(SlicedBucketParams(m=2, columns=[["age"], ["zip"]])), scenario(0, releases=1))
