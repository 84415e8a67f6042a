"""τ-safe (l,k)-diversity's own publication (GT/BT, angelization; issue #26 item 2): its buckets are
τ-safety's with m = l, its QI groups are k sorted tuples apart from them, its whole-history
verifier (``tau_safe_lk``) against a brute-force oracle."""

import sys
from pathlib import Path

import numpy as np
import pytest

from cdpbench.data import Publication
from cdpbench.metrics.kl import kl_divergence
from cdpbench.metrics.utility import ncp
from cdpbench_invariance.anonymizers.tau_safe_lk import TauSafeLK, TauSafeLKParams
from cdpbench_invariance.anonymizers.tau_safety import TauSafety
from cdpbench_invariance.family import InvarianceParams
from cdpbench_invariance.privacy_models.tau_safe_lk import TauSafeLKModel, TauSafeLKModelParams

sys.path.insert(0, str(Path(__file__).parent))
from test_invariance_properties import publish_all, scenario, verify_all  # noqa: E402


def buckets_of(pub: Publication, of=None) -> list:
    """The partition ``of`` (default: the buckets) as sorted (respondents, counterfeit values) per part."""
    part = pub.bucket_of_record() if of is None else of
    out = []
    for b in np.unique(part):
        rows = part == b
        real = pub.respondent[rows & (pub.respondent >= 0)]
        fake = pub.sensitive[rows & pub.counterfeit]
        out.append((tuple(sorted(real.tolist())), tuple(sorted(fake.tolist()))))
    return sorted(out)


@pytest.mark.parametrize("seed,m", [(0, 2), (1, 3), (3, 4)])
def test_the_buckets_are_tau_safetys_and_the_groups_are_not(seed, m):
    releases = scenario(seed, updates=10, reinsertions=6, releases=6)
    tau = publish_all(TauSafety(InvarianceParams(m=m)), releases)
    lk = publish_all(TauSafeLK(TauSafeLKParams(l=m)), releases)
    old = publish_all(TauSafeLK(TauSafeLKParams(l=m, form="buckets")), releases)
    for rel, a, b, c in zip(releases, tau, lk, old):
        assert b.angelized and not a.angelized and not c.angelized
        assert buckets_of(b) == buckets_of(a)  # BT: τ-safety's buckets, counterfeits included
        assert buckets_of(b, b.group) != buckets_of(a)  # GT: other groups
        for name in ("group", "respondent", "sensitive", "counterfeit", "low", "high"):  # form=buckets: τ-safety's
            assert np.array_equal(getattr(a, name), getattr(c, name)), name
        assert (b.group_sizes() >= m).all() and (b.group_sizes() < 2 * m).all()
        # the cells differ, so do the metrics that read them
        assert ncp(b, rel, "domain").mean() != ncp(a, rel, "domain").mean()
        assert kl_divergence(b, rel) != kl_divergence(a, rel)


def test_sorted_groups_and_the_counterfeits_qi_part():
    """GT's groups are runs of the tuples sorted on QI (age, then gender code), each counterfeit
    taking the QI of its bucket's real tuple of the lowest row."""
    releases = scenario(7, updates=10, reinsertions=6, releases=8)
    pubs = publish_all(TauSafeLK(TauSafeLKParams(l=3, k=4)), releases)
    fakes = 0
    for rel, pub in zip(releases, pubs):
        qi = np.empty((len(pub), rel.qi.shape[1]))
        real = pub.row >= 0
        qi[real] = rel.qi[pub.row[real]]
        for i in np.flatnonzero(~real):
            qi[i] = rel.qi[pub.row[(pub.bucket == pub.bucket[i]) & real].min()]
        fakes += int((~real).sum())
        assert ((qi >= pub.low[pub.group]) & (qi <= pub.high[pub.group])).all()  # every tuple in its box
        order = np.lexsort((pub.bucket, qi[:, 1], qi[:, 0]))
        assert (np.diff(pub.group[order]) >= 0).all()  # groups are consecutive runs of the sort
        sizes = pub.group_sizes()
        assert (sizes[:-1] == 4).all() and 4 <= sizes[-1] < 8
    assert fakes > 0  # the counterfeits' QI part is exercised


# ---------------------------------------------------------------------------- the verifier
def random_angelized(rng, rel):
    """A random angelized publication of ``rel``: random QI groups and random buckets, some records suppressed."""
    labels = rng.integers(0, max(len(rel) // 4, 1), len(rel))
    labels[rng.random(len(rel)) < 0.1] = -1
    pub = Publication.from_partition(rel, labels)
    n_buckets = max(len(pub) // 3, 1)
    bucket = np.concatenate([np.arange(min(n_buckets, len(pub))), rng.integers(0, n_buckets, max(len(pub) - n_buckets, 0))])
    rng.shuffle(bucket)
    pub.bucket = bucket[: len(pub)]
    return pub


def oracle(pubs, t, m, k):
    """Violations of τ-safe (l,k) at release t, one record and one bucket / group at a time."""
    def sigs(pub):
        out = {}
        for r, b in zip(pub.respondent, pub.bucket):
            if r >= 0:
                out[int(r)] = frozenset(int(v) for v in pub.sensitive[pub.bucket == b])
        return out

    def values(pub):
        return {int(r): int(s) for r, s in zip(pub.respondent, pub.sensitive) if r >= 0}

    now, nv = sigs(pubs[t]), values(pubs[t])
    history = 0
    for r, sig in now.items():
        last = next((p for p in reversed(pubs[:t]) if r in sigs(p)), None)
        if last is not None:
            old = sigs(last)[r]
            history += (old != sig) if nv[r] in old else bool(old & sig)
    pub = pubs[t]
    bad_buckets = sum(1 for b in range(pub.n_buckets)
                      if (pub.bucket == b).sum() < m or len(set(pub.sensitive[pub.bucket == b].tolist())) < (pub.bucket == b).sum())
    bad_groups = sum(1 for g in range(pub.n_groups) if (pub.group == g).sum() < k)
    return history, bad_buckets + bad_groups


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [None, 4])
def test_the_verifier_matches_brute_force_on_random_angelized_publications(seed, k):
    rng = np.random.default_rng(seed)
    releases = scenario(seed)
    pubs = [random_angelized(rng, rel) for rel in releases]
    model = TauSafeLKModel(TauSafeLKModelParams(m=2, k=k))
    total_history = total_other = 0
    for t, report in enumerate(verify_all(model, releases, pubs)):
        history, other = oracle(pubs, t, 2, 2 if k is None else k)
        assert report.levels["history_violations"] == history
        assert report.violations == history + other
        assert report.levels["k"] == pubs[t].group_sizes().min()
        total_history += history
        total_other += other
    assert total_history > 0 and total_other > 0  # the oracle is exercised


def test_the_verifier_flags_a_group_below_k():
    releases = scenario(2, releases=2)
    pubs = publish_all(TauSafeLK(TauSafeLKParams(l=2, k=2)), releases)
    assert all(r.satisfied for r in verify_all(TauSafeLKModel(TauSafeLKModelParams(m=2, k=2)), releases, pubs))
    reports = verify_all(TauSafeLKModel(TauSafeLKModelParams(m=2, k=3)), releases, pubs)
    assert not any(r.satisfied for r in reports)
    assert [r.violations for r in reports] == [int((p.group_sizes() < 3).sum()) for p in pubs]
