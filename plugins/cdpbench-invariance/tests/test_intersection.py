"""The collusion attack (slicedBucket Def. 1) on the paper's fixture and against a brute-force oracle."""

import numpy as np
import pytest

from cdpbench.data import Publication, Release
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench_invariance.intersection import IntersectionAttacker

DISEASES = ("Aids", "Flu", "SSM-pos", "Asthma", "Cardiac", "Dyspepsia", "Gastritis", "Bronchitis", "Glaucoma",
            "Diarrhea", "Malaria", "Pneumonia")
D = {d: i for i, d in enumerate(DISEASES)}
SCHEMA = Schema((NumericQI("age", 0, 100),), Sensitive("disease", DISEASES))


def view_of(t, buckets):
    """A publication of ``buckets`` = [[(respondent, disease), ...], ...] and its public view."""
    rows = [(r, d, b) for b, bucket in enumerate(buckets) for r, d in bucket]
    ids = np.array([r for r, _, _ in rows])
    order = np.argsort(ids, kind="stable")
    release = Release(t, SCHEMA, ids[order], np.full((len(rows), 1), 40.0),
                      np.array([D[d] for _, d, _ in rows])[order])
    group = np.array([b for _, _, b in rows])[order]
    return release, Publication.from_partition(release, group).public()


def attack(tables):
    attacker = IntersectionAttacker()
    views, results = [], []
    for t, buckets in enumerate(tables, start=1):
        release, view = view_of(t, buckets)
        views.append(view)
        results.append(attacker.observe(view, AttackContext(release, views, np.random.default_rng(0))))
    return results


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
    r1, r2, r3 = attack(TAU_SAFE)
    assert belief(r3, P["p3"])["SSM-pos"] == 1.0  # T1 ∩ T3 = {SSM-pos}: disclosed
    assert r3.extra["disclosed"] == 1 and r3.extra["partially_disclosed"] == 0
    # at T2 the value changed: T2 ∩ T1 is empty, the adversary keeps the current signature
    assert belief(r2, P["p3"])["Glaucoma"] == 0.5 and r2.extra["disclosed"] == 0
    assert r1.extra == {"disclosed": 0.0, "partially_disclosed": 0.0, "disclosed_share": 0.0,
                        "partially_disclosed_share": 0.0}


def test_sliced_bucket_releases_disclose_nobody():
    for result in attack(SLICED):
        assert result.extra["disclosed"] == 0 and result.extra["partially_disclosed"] == 0
        assert np.allclose(result.posterior.max(axis=1), 0.5)  # every bucket holds 2 distinct values


def _oracle(tables):
    """Per release, per respondent: the smallest non-empty intersection of its signature with an
    earlier one (most recent on ties), by Python sets; disclosed / partially disclosed counts."""
    history: dict[int, list[set]] = {}
    out = []
    for buckets in tables:
        sig = {r: {d for _, d in bucket} for bucket in buckets for r, _ in bucket}
        counts = {r: [d for _, d in bucket] for bucket in buckets for r, _ in bucket}
        beliefs, disclosed, partial = {}, 0, 0
        for r, s in sig.items():
            best = s
            for past in reversed(history.get(r, [])):
                inter = s & past
                if inter and len(inter) < len(best):
                    best = inter
            weights = {d: counts[r].count(d) for d in best}
            total = sum(weights.values())
            beliefs[r] = {d: w / total for d, w in weights.items()}
            disclosed += len(best) == 1 < len(s)
            partial += 1 < len(best) < len(s)
        for r, s in sig.items():
            history.setdefault(r, []).append(s)
        out.append((beliefs, disclosed, partial))
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
        for result, (beliefs, disclosed, partial) in zip(attack(tables), _oracle(tables)):
            assert result.extra["disclosed"] == disclosed and result.extra["partially_disclosed"] == partial
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
        assert 0 <= res.extra["disclosed"] + res.extra["partially_disclosed"] <= len(view.respondent)
    assert res.extra["disclosed"] + res.extra["partially_disclosed"] > 0  # Mondrian regroups: updates leak
