"""The collusion attack (slicedBucket Def. 1) on the paper's fixture and against a brute-force oracle."""

import numpy as np
import pytest

from cdpbench.data import Publication, Release
from cdpbench.metrics.belief import BeliefMetrics
from cdpbench.plugin import AttackContext, MetricContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_invariance.attackers.intersection import IntersectionAttacker

DISEASES = ("Aids", "Flu", "SSM-pos", "Asthma", "Cardiac", "Dyspepsia", "Gastritis", "Bronchitis", "Glaucoma",
            "Diarrhea", "Malaria", "Pneumonia")
D = {d: i for i, d in enumerate(DISEASES)}
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("disease", DISEASES))


def publish(t, buckets):
    """The release and publication of ``buckets`` = [[(respondent, true disease), ...], ...]."""
    rows = [(r, d, b) for b, bucket in enumerate(buckets) for r, d in bucket]
    ids = np.array([r for r, _, _ in rows])
    order = np.argsort(ids, kind="stable")
    release = Release(t, SCHEMA, ids[order], np.full((len(rows), 1), 40.0),
                      np.array([D[d] for _, d, _ in rows])[order])
    group = np.array([b for _, _, b in rows])[order]
    return release, Publication.from_partition(release, group)


def attack_and_measure(tables):
    """Per release: the attack's result and the core's belief metrics of it (key without label)."""
    attacker = IntersectionAttacker()
    views, out = [], []
    for t, buckets in enumerate(tables, start=1):
        release, pub = publish(t, buckets)
        view = pub.public()
        views.append(view)
        result = attacker.observe(view, AttackContext(release, views, np.random.default_rng(0)))
        metrics = BeliefMetrics().compute(MetricContext(release, pub, {"c": result}, None, np.random.default_rng(0)))
        out.append((result, {k.removeprefix("c."): v for k, v in metrics.items()}))
    return out


def attack(tables):
    return [result for result, _ in attack_and_measure(tables)]


def belief(result, respondent):
    return dict(zip(DISEASES, result.posterior[list(result.respondent).index(respondent)]))


P = {f"p{i}": i for i in range(1, 14)}
CH = {f"ch{i}": 100 + i for i in range(1, 5)}

# slicedBucket's releases of the paper (Tables 6-8, m = 2; spec §3.1)
SLICED = [
    [[(P["p1"], "Bronchitis"), (P["p2"], "Aids")], [(P["p3"], "SSM-pos"), (P["p4"], "Asthma")],
     [(P["p5"], "Flu"), (P["p6"], "Dyspepsia")], [(P["p7"], "Gastritis"), (P["p8"], "Cardiac")]],
    [[(P["p1"], "Bronchitis"), (CH["ch1"], "Aids")], [(P["p3"], "Glaucoma"), (P["p10"], "Diarrhea")],
     [(P["p5"], "Flu"), (P["p6"], "Dyspepsia")], [(P["p7"], "Gastritis"), (CH["ch2"], "Cardiac")],
     [(P["p8"], "Dyspepsia"), (CH["ch3"], "Flu")]],
    [[(P["p1"], "Bronchitis"), (CH["ch1"], "Aids")], [(P["p3"], "SSM-pos"), (P["p4"], "Asthma")],
     [(P["p10"], "Diarrhea"), (P["p12"], "Glaucoma")], [(P["p5"], "Flu"), (P["p6"], "Dyspepsia")],
     [(CH["ch2"], "Cardiac"), (CH["ch4"], "Gastritis")], [(P["p8"], "Dyspepsia"), (CH["ch3"], "Flu")]],
]
# tau-safe (2,2)-diversity's releases as far as the paper gives them (§1.1, Tables 2-3): p3's
# signatures are {SSM-pos, Asthma}, {Glaucoma, Diarrhea}, {SSM-pos, Dyspepsia}
TAU_SAFE = [
    [[(P["p3"], "SSM-pos"), (P["p4"], "Asthma")], [(P["p1"], "Bronchitis"), (P["p2"], "Aids")]],
    [[(P["p3"], "Glaucoma"), (P["p10"], "Diarrhea")], [(P["p1"], "Bronchitis"), (CH["ch1"], "Aids")]],
    [[(P["p3"], "SSM-pos"), (P["p8"], "Dyspepsia")], [(P["p1"], "Bronchitis"), (CH["ch1"], "Aids")]],
]


def test_tau_safe_releases_disclose_p3_by_intersecting_t1_and_t3():
    (r1, m1), (r2, m2), (r3, m3) = attack_and_measure(TAU_SAFE)
    assert belief(r3, P["p3"])["SSM-pos"] == 1.0  # T1 ∩ T3 = {SSM-pos}, p3's true value at T3
    assert (m3["certain"], m3["disclosed"], m3["true_value_ruled_out"]) == (1, 1, 0)
    assert m3["disclosed_share"] == pytest.approx(1 / 4) and r3.extra["narrowed"] == 0
    # at T2 the value changed: T2 ∩ T1 is empty, the adversary keeps the current signature
    assert belief(r2, P["p3"])["Glaucoma"] == 0.5 and m2["certain"] == 0
    assert r1.extra == {"narrowed": 0.0, "narrowed_share": 0.0}
    assert (m1["certain"], m1["disclosed"]) == (0, 0)


def test_an_update_makes_a_wrong_single_value_certain_but_not_disclosed():
    """The trust issue's case: p1 had Flu in T1 (bucket {Flu, Aids}) and was updated to Asthma in
    T2 (bucket {Asthma, Aids}). T1 ∩ T2 = {Aids}: the adversary is left with one value, and it is
    not p1's. It counts as certain, not as disclosed, and the truth is ruled out."""
    tables = [
        [[(P["p1"], "Flu"), (P["p2"], "Aids")], [(P["p3"], "Asthma"), (P["p4"], "Cardiac")]],
        [[(P["p1"], "Asthma"), (P["p5"], "Aids")], [(P["p3"], "Asthma"), (P["p6"], "Cardiac")]],
    ]
    (_, m1), (r2, m2) = attack_and_measure(tables)
    assert belief(r2, P["p1"])["Aids"] == 1.0 and belief(r2, P["p1"])["Asthma"] == 0.0
    # p3 keeps {Asthma, Cardiac} (no update): the intersection is its whole signature, nothing certain
    assert belief(r2, P["p3"])["Asthma"] == 0.5
    assert (m1["certain"], m1["disclosed"]) == (0, 0)
    assert (m2["certain"], m2["disclosed"], m2["true_value_ruled_out"]) == (1, 0, 1)
    assert (m2["certain_share"], m2["disclosed_share"]) == (1 / 4, 0.0)


def test_sliced_bucket_releases_disclose_nobody():
    for result, metrics in attack_and_measure(SLICED):
        assert metrics["certain"] == 0 and metrics["disclosed"] == 0 and result.extra["narrowed"] == 0
        assert np.allclose(result.posterior.max(axis=1), 0.5)  # every bucket holds 2 distinct values


def _oracle(tables):
    """Per release, per respondent: the smallest non-empty intersection of its signature with an
    earlier one (most recent on ties), by Python sets; the records left with one value (certain),
    those whose value is their true one (disclosed), those whose truth is ruled out, and the
    narrowed ones (1 < |C| < |S|)."""
    history: dict[int, list[set]] = {}
    out = []
    for buckets in tables:
        sig = {r: {d for _, d in bucket} for bucket in buckets for r, _ in bucket}
        counts = {r: [d for _, d in bucket] for bucket in buckets for r, _ in bucket}
        truth = {r: d for bucket in buckets for r, d in bucket}
        beliefs, certain, disclosed, ruled_out, partial = {}, 0, 0, 0, 0
        for r, s in sig.items():
            best = s
            for past in reversed(history.get(r, [])):
                inter = s & past
                if inter and len(inter) < len(best):
                    best = inter
            weights = {d: counts[r].count(d) for d in best}
            total = sum(weights.values())
            beliefs[r] = {d: w / total for d, w in weights.items()}
            certain += len(best) == 1
            disclosed += best == {truth[r]}
            ruled_out += truth[r] not in best
            partial += 1 < len(best) < len(s)
        for r, s in sig.items():
            history.setdefault(r, []).append(s)
        out.append((beliefs, (certain, disclosed, ruled_out), partial))
    return out


def test_equals_a_brute_force_oracle_on_random_churn():
    rng = np.random.default_rng(7)
    for _ in range(40):
        tables = []
        population = list(range(30))
        for _t in range(int(rng.integers(2, 6))):
            present = sorted(rng.choice(population, size=int(rng.integers(4, 25)), replace=False).tolist())
            rng.shuffle(present)
            buckets, i = [], 0
            while i < len(present):
                size = int(rng.integers(1, 5))
                buckets.append([(int(r), DISEASES[int(rng.integers(0, 6))]) for r in present[i : i + size]])
                i += size
            tables.append(buckets)
        for (result, metrics), (beliefs, counts, partial) in zip(attack_and_measure(tables), _oracle(tables)):
            assert (metrics["certain"], metrics["disclosed"], metrics["true_value_ruled_out"]) == counts
            assert result.extra["narrowed"] == partial
            for r, expected in beliefs.items():
                got = belief(result, r)
                assert got == pytest.approx({d: expected.get(d, 0.0) for d in DISEASES})


def test_attacks_any_anonymizers_publications():
    """Mondrian's publications of three Adult releases: posteriors are distributions over each
    respondent's own signature, and every count is consistent."""
    reg = default_registry()
    ds = reg.create("dataset", "adult", {"releases": 3, "initial": 400, "deletions": 40, "insertions": 40, "updates": 40})
    model = reg.create("privacy_model", "l_diversity", {"l": 2})
    mondrian = reg.create("anonymizer", "mondrian")
    attacker, views = IntersectionAttacker(), []
    from cdpbench.data import History
    from cdpbench.plugin import ModelContext, PublishContext

    for release in ds.releases(np.random.default_rng(0)):
        mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
        pub = mondrian.publish(release, PublishContext(model, mctx, History(), np.random.default_rng(0)))
        view = pub.public()
        views.append(view)
        res = attacker.observe(view, AttackContext(release, views, np.random.default_rng(0)))
        assert res.posterior.sum(axis=1) == pytest.approx(1.0)
        signature = view.group_counts()[view.group] > 0
        assert not (res.posterior[~signature] > 0).any()
        assert 0 <= res.extra["narrowed"] <= len(view.respondent)
    assert res.extra["narrowed"] > 0  # Mondrian regroups: updates leak
