"""Property tests of the ``tds`` and ``bcf`` anonymizers on small random cumulative instances
(Fung, Wang, Fu, Pei, EDBT 2008, §5; specs/bcf.md §2.1-2.4).

Every instance is generated here: 2-3 categorical QIs, each with a depth-2 taxonomy (4-6 leaves
under 2-3 mid nodes under ``*``), 2-4 sensitive values, ``D1`` of 20-60 records, ``D2`` (and
``D3``) of 0-40 records; release ``i`` is ``D1 ∪ .. ∪ Di`` with the same respondent ids and
timestamps for the records it shares with the earlier releases. The increments are drawn from
their own skewed distributions so that k-anonymized second releases do break BCF-anonymity.

What is checked, each time against a recomputation that does not go through the anonymizers:

* ``tds`` + k-anonymity: class sizes >= k, global recoding (every attribute's published values
  form a cut of its taxonomy), maximality (no single further specialization keeps k-anonymity,
  by brute force over the published table) and pycanon's k;
* ``bcf`` on release 2 with ``R1 = tds(k)``: FA, CA, BA >= k by ``attack_pair`` and
  ``feasible = 1`` iff ``|D2| >= k``; otherwise the all-ANY table and ``feasible = 0``
  (Corollary 5.1; spec §2.1 closed forms); maximal w.r.t. BCF validity on some instances; an
  empty increment leaves no T2 target (BA infinite by default; literally 0, spec §2.1, and then
  infeasible with ``phantom=True``);
* ``bcf`` at release 1 is ``tds`` with k-anonymity;
* three releases: ``attack_latest`` with R1, R2 and the B-reduced R2 (built here from
  ``attack_pair``'s B cracks) gives FA, CA, BA >= k on ``bcf``'s R3 when ``|D3| >= k``;
* the ``BCFAnonymity`` verifier agrees in sign with ``attack_pair`` on every instance;
* bad parameters raise ``ConfigError`` naming the field.
* ``anonymizer.k`` null (the default) is the run's privacy model's k; an explicit k wins; with
  neither, the first publish is a one-line ``ConfigError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from pycanon import anonymity  # a test dependency (extra "test"), as in tests/test_pycanon_agreement.py

from cdpbench.data import History, Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_bcf.anonymizers.bcf import BCFAnonymizer
from cdpbench_bcf.params import BCFAnonymizerParams, BCFParams
from cdpbench_bcf.classes import Classes
from cdpbench_bcf.correspondence import attack_pair
from cdpbench_bcf.history import ReleaseChain, attack_latest
from cdpbench_bcf.anonymizers.tds import TopDownSpecialization
from cdpbench_bcf.privacy_models.bcf_anonymity import BCFAnonymity

N_INSTANCES = 300  # random two-release instances (tests 3 and 6)
N_THREE = 120  # random three-release instances (test 5)


# ---------------------------------------------------------------------------- instance generator
@dataclass
class Tax:
    """A depth-2 taxonomy as leaf-code ranges: ``mids[m] = (lo, hi)``; the root is ``(0, L-1)``."""

    n_leaves: int
    mids: list[tuple[int, int]]

    @property
    def root(self) -> tuple[int, int]:
        return (0, self.n_leaves - 1)

    def nodes(self) -> set[tuple[int, int]]:
        return {self.root, *self.mids, *((l, l) for l in range(self.n_leaves))}

    def children(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Children of node ``lo..hi``, descending through levels that do not split it (a mid
        with a single leaf is that leaf)."""
        if lo == hi:
            return []
        if (lo, hi) == self.root:
            kids = list(self.mids)
            if len(kids) == 1:
                return self.children(*kids[0])
            return kids
        assert (lo, hi) in self.mids, (lo, hi)
        return [(l, l) for l in range(lo, hi + 1)]

    def child_of(self, lo: int, hi: int, leaf: int) -> tuple[int, int]:
        (kid,) = [c for c in self.children(lo, hi) if c[0] <= leaf <= c[1]]
        return kid


@dataclass
class Instance:
    seed: int
    k: int
    taxes: list[Tax]
    schema: Schema
    releases: list[Release]  # cumulative: releases[i] covers D1 .. D(i+1)
    sizes: list[int]  # |D1|, |D2|, ...
    cache: dict = field(default_factory=dict)


def make_taxonomy(rng: np.random.Generator, j: int) -> tuple[Tax, Taxonomy]:
    n_mid = int(rng.integers(2, 4))
    n_leaves = int(rng.integers(max(4, n_mid), 7))
    # every mid gets at least one leaf, the rest at random (a mid may hold a single leaf)
    per_mid = np.ones(n_mid, dtype=int) + np.bincount(rng.integers(0, n_mid, n_leaves - n_mid), minlength=n_mid)
    mids, paths, lo = [], [], 0
    for m, c in enumerate(per_mid):
        mids.append((lo, lo + int(c) - 1))
        for i in range(int(c)):
            paths.append([f"q{j}_l{lo + i}", f"q{j}_m{m}", "*"])
        lo += int(c)
    taxonomy = Taxonomy.from_paths(paths)
    assert list(taxonomy.leaves) == [p[0] for p in paths]  # leaf codes are the order given here
    return Tax(n_leaves, mids), taxonomy


def skewed(rng: np.random.Generator, n_values: int) -> np.ndarray:
    return rng.dirichlet(np.full(n_values, 0.6))


def make_instance(seed: int, n_releases: int = 2, k: int | None = None, increments: list[int] | None = None) -> Instance:
    """``increments`` fixes ``|D2|, |D3|, ..`` (default: random in 0..40)."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 4))
    m = int(rng.integers(2, 5))
    taxes, qis = [], []
    for j in range(d):
        t, taxonomy = make_taxonomy(rng, j)
        taxes.append(t)
        qis.append(CategoricalQI(f"q{j}", taxonomy))
    schema = Schema(tuple(qis), Sensitive("s", tuple(f"s{v}" for v in range(m))), respondent="id", time="time")
    sizes = [int(rng.integers(20, 61))] + [int(rng.integers(0, 41)) for _ in range(n_releases - 1)]
    if increments is not None:
        sizes[1:] = increments
    qi_parts, s_parts = [], []
    for n in sizes:  # every increment has its own skewed distributions
        cols = [rng.choice(t.n_leaves, size=n, p=skewed(rng, t.n_leaves)) for t in taxes]
        qi_parts.append(np.stack(cols, axis=1).astype(float) if n else np.zeros((0, d)))
        s_parts.append(rng.choice(m, size=n, p=skewed(rng, m)).astype(np.int64))
    releases = []
    for i in range(n_releases):
        n = sum(sizes[: i + 1])
        time = np.concatenate([np.full(sizes[t], t + 1, dtype=np.int64) for t in range(i + 1)])
        releases.append(
            Release(
                i + 1,
                schema,
                np.arange(n, dtype=np.int64) + 1000,
                np.concatenate(qi_parts[: i + 1]),
                np.concatenate(s_parts[: i + 1]),
                time,
            )
        )
    k = int(rng.integers(2, 9)) if k is None else k
    return Instance(seed, k, taxes, schema, releases, sizes)


def k_model(k: int):
    return default_registry().create("privacy_model", "k_anonymity", {"k": k})


def publish_ctx(model, rel: Release, history: History) -> PublishContext:
    return PublishContext(model, ModelContext(rel.schema, rel.sensitive_distribution(), history, rel), history, np.random.default_rng(0))


def history_of(inst: Instance, pubs: list[Publication]) -> History:
    return History(list(inst.releases[: len(pubs)]), list(pubs))


def tds(inst: Instance, i: int) -> Publication:
    """``tds`` with k-anonymity on release ``i`` (0-based), history ignored by the anonymizer."""
    key = ("tds", i)
    if key not in inst.cache:
        rel = inst.releases[i]
        inst.cache[key] = TopDownSpecialization().publish(rel, publish_ctx(k_model(inst.k), rel, History()))
    return inst.cache[key]


def bcf(inst: Instance, i: int, earlier: list[Publication], anonymizer: BCFAnonymizer | None = None) -> Publication:
    rel = inst.releases[i]
    anonymizer = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)) if anonymizer is None else anonymizer
    return anonymizer.publish(rel, publish_ctx(k_model(inst.k), rel, history_of(inst, earlier)))


def classes(pub: Publication) -> Classes:
    return Classes.from_publication(pub)


def where(inst: Instance, extra: str = "") -> str:
    return f"seed={inst.seed} k={inst.k} sizes={inst.sizes} {extra}"


# ---------------------------------------------------------------------------- independent checks
def record_boxes(pub: Publication) -> tuple[np.ndarray, np.ndarray]:
    """Per record (publication order = release order here) its generalized value per attribute."""
    return pub.low[pub.group].astype(np.int64), pub.high[pub.group].astype(np.int64)


def assert_global_recoding(inst: Instance, rel: Release, pub: Publication) -> None:
    """Every record published once, in release order, within its class's box; every box a tuple
    of taxonomy nodes; per attribute the published nodes pairwise disjoint or equal (a cut); one
    class per distinct box."""
    n = len(rel)
    assert len(pub) == n and len(pub.suppressed) == 0
    assert np.array_equal(pub.row, np.arange(n)) and np.array_equal(pub.respondent, rel.respondent)
    assert np.array_equal(pub.sensitive, rel.sensitive) and np.array_equal(pub.time, rel.time)
    assert np.array_equal(np.unique(pub.group), np.arange(pub.n_groups))
    lo, hi = record_boxes(pub)
    leaf = rel.qi.astype(np.int64)
    assert np.all((lo <= leaf) & (leaf <= hi)), where(inst)
    boxes = {tuple(pub.low[g].tolist() + pub.high[g].tolist()) for g in range(pub.n_groups)}
    assert len(boxes) == pub.n_groups, where(inst, "two classes share a generalized QI")
    for a, t in enumerate(inst.taxes):
        used = {(int(x), int(y)) for x, y in zip(pub.low[:, a], pub.high[:, a])}
        assert used <= t.nodes(), where(inst, f"attr {a}: {used - t.nodes()} are no taxonomy nodes")
        used = sorted(used)
        for (x1, y1), (x2, y2) in zip(used, used[1:]):
            assert y1 < x2, where(inst, f"attr {a}: published values {used} overlap (not a cut)")
        # value sets agree with the ranges
        L = t.n_leaves
        leaves = np.arange(L)
        expect = (leaves[None, :] >= pub.low[:, a][:, None]) & (leaves[None, :] <= pub.high[:, a][:, None])
        assert np.array_equal(pub.value_sets[a], expect)


def specializations(inst: Instance, pub: Publication):
    """Every single further specialization of a published value (attribute ``a``, node ``lo..hi``,
    replaced by its children in every record holding it): yields ``(a, node, low, high, klass)``
    with the per-class boxes and the class of each record afterwards."""
    rec_lo, rec_hi = record_boxes(pub)
    leaf = inst.releases[pub.t - 1].qi.astype(np.int64)
    for a, t in enumerate(inst.taxes):
        for node in sorted({(int(x), int(y)) for x, y in zip(pub.low[:, a], pub.high[:, a])}):
            if node[0] == node[1]:
                continue
            lo, hi = rec_lo.copy(), rec_hi.copy()
            rows = np.flatnonzero((rec_lo[:, a] == node[0]) & (rec_hi[:, a] == node[1]))
            for r in rows:
                lo[r, a], hi[r, a] = t.child_of(node[0], node[1], int(leaf[r, a]))
            box, klass = np.unique(np.concatenate([lo, hi], axis=1), axis=0, return_inverse=True)
            d = lo.shape[1]
            yield a, node, box[:, :d].astype(float), box[:, d:].astype(float), klass.reshape(-1)


def bcf_valid(inst: Instance, earlier: list[Classes], cls: Classes) -> tuple[bool, dict]:
    """BCF validity recomputed from scratch: sizes >= k and FA, CA, BA >= k against every earlier
    release (pairs, and for three releases the composition through the B-reduced R2)."""
    k = inst.k
    levels = {"size": int(cls.size.min())}
    for i, a in enumerate(earlier):
        att = attack_pair(a, cls)
        levels.update({f"FA{i}": att.FA, f"CA{i}": att.CA, f"BA{i}": att.BA})
    for j in range(1, len(earlier)):  # compositions: B(R_i, R_j) first (only i < j), then F/C (R'_j, latest)
        cracks = [attack_pair(earlier[i], earlier[j]).backward_crack for i in range(j)]
        crack = np.max(np.stack(cracks), axis=0)
        if crack.any():
            att = attack_pair(earlier[j].with_counts(earlier[j].entry_count - crack), cls)
            levels.update({f"FAc{j}": att.FA, f"CAc{j}": att.CA})
    ok = all(v >= k for v in levels.values())
    return ok, levels


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def two_release_instances() -> list[Instance]:
    out = []
    for seed in range(N_INSTANCES):
        inst = make_instance(seed)
        r1 = tds(inst, 0)
        inst.cache["bcf2"] = bcf(inst, 1, [r1])
        out.append(inst)
    return out


# ---------------------------------------------------------------------------- 1. the generator
def test_generator_builds_cumulative_releases():
    seen_d = set()
    for seed in range(40):
        inst = make_instance(seed, n_releases=3)
        r1, r2, r3 = inst.releases
        seen_d.add(len(inst.schema.qi))
        assert 20 <= inst.sizes[0] <= 60 and all(0 <= s <= 40 for s in inst.sizes[1:])
        assert [len(r) for r in inst.releases] == np.cumsum(inst.sizes).tolist()
        n1, n2 = len(r1), len(r2)
        for older, newer in ((r1, r2), (r2, r3)):
            n = len(older)
            assert np.array_equal(newer.respondent[:n], older.respondent)
            assert np.array_equal(newer.qi[:n], older.qi) and np.array_equal(newer.sensitive[:n], older.sensitive)
            assert np.array_equal(newer.time[:n], older.time)
        assert len(set(r3.respondent.tolist())) == len(r3)
        assert r3.time.tolist() == [1] * n1 + [2] * (n2 - n1) + [3] * (len(r3) - n2)
        for a, (t, q) in enumerate(zip(inst.taxes, inst.schema.qi)):
            assert q.taxonomy.height == 2 and 4 <= t.n_leaves <= 6 and 2 <= len(t.mids) <= 3
            assert r3.qi[:, a].min() >= 0 and r3.qi[:, a].max() < t.n_leaves
            # the lab's taxonomy agrees with the ranges used here
            assert q.taxonomy.low[1].tolist() == [lo for lo, _ in t.mids]
            assert q.taxonomy.high[1].tolist() == [hi for _, hi in t.mids]
    assert seen_d == {2, 3}


# ---------------------------------------------------------------------------- 2. tds + k-anonymity
def test_tds_k_anonymous_global_recoding_maximal(two_release_instances):
    checked_splits = 0
    for inst in two_release_instances[:150]:
        for i in (0, 1):
            rel, pub = inst.releases[i], tds(inst, i)
            assert_global_recoding(inst, rel, pub)
            sizes = pub.group_sizes()
            assert sizes.min() >= inst.k, where(inst, f"release {i + 1}: class sizes {sizes.tolist()}")
            # maximal: every single further specialization breaks k-anonymity
            for a, node, low, high, klass in specializations(inst, pub):
                checked_splits += 1
                new_sizes = np.bincount(klass)
                assert new_sizes.min() < inst.k, where(
                    inst, f"release {i + 1}: specializing attr {a} node {node} keeps k-anonymity (sizes {new_sizes.tolist()})"
                )
    assert checked_splits > 200  # the maximality check is not vacuous


def test_tds_specializes_something_and_counts_steps(two_release_instances):
    """The number of specializations tds reports is the number of taxonomy nodes between ANY and
    the published cut, and not every output is the trivial all-ANY table."""
    for inst in two_release_instances[:100]:
        pub = tds(inst, 0)
        steps = 0
        for a, t in enumerate(inst.taxes):
            used = {(int(x), int(y)) for x, y in zip(pub.low[:, a], pub.high[:, a])}
            # each applied specialization replaces one node by its (non-empty) children
            internal = set()
            for lo, hi in used:
                if (lo, hi) != t.root:
                    internal.add(t.root)
                    if lo == hi and any(mlo <= lo <= mhi and mlo < mhi for mlo, mhi in t.mids):
                        internal.update((mlo, mhi) for mlo, mhi in t.mids if mlo <= lo <= mhi and mlo < mhi)
            steps += len(internal)
        assert pub.info["specializations"] == steps, where(inst)
    assert any(tds(inst, 0).n_groups > 1 for inst in two_release_instances[:100])


def test_tds_on_fewer_than_k_records_publishes_the_root():
    inst = make_instance(7)
    rel = inst.releases[0]
    small = rel.subset(np.arange(len(rel)) < 5)
    pub = TopDownSpecialization().publish(small, publish_ctx(k_model(6), small, History()))
    assert pub.n_groups == 1 and len(pub) == 5 and pub.info["specializations"] == 0
    assert pub.low[0].tolist() == [0] * len(inst.taxes) and pub.high[0].tolist() == [t.n_leaves - 1 for t in inst.taxes]
    pub = TopDownSpecialization().publish(small, publish_ctx(k_model(5), small, History()))
    assert pub.group_sizes().min() >= 5 and pub.info["validity_checks"] > 0


def test_tds_agrees_with_pycanon(two_release_instances):
    for inst in two_release_instances[:6]:
        for i in (0, 1):
            pub = tds(inst, i)
            frame = pub.to_frame()
            qi = inst.schema.qi_names
            frame[qi] = frame[qi].astype(str)
            theirs = anonymity.k_anonymity(frame[qi + ["s"]], qi)
            assert theirs == int(pub.group_sizes().min()), where(inst)
            assert theirs >= inst.k
            # and pycanon sees as many classes as we publish
            assert frame.groupby(qi).ngroups == pub.n_groups


# ---------------------------------------------------------------------------- 3. bcf on release 2
def test_bcf_release_2_is_bcf_anonymous_iff_feasible(two_release_instances):
    feasible = infeasible = 0
    ks = set()
    for inst in two_release_instances:
        k, rel2 = inst.k, inst.releases[1]
        r1, r2 = tds(inst, 0), inst.cache["bcf2"]
        ks.add(k)
        assert_global_recoding(inst, rel2, r2)
        if inst.sizes[1] == 0:
            continue  # test_empty_increment_has_no_b_target_by_default_and_is_infeasible_literally
        if inst.sizes[1] >= k:
            feasible += 1
            assert r2.info["feasible"] == 1, where(inst)
            assert r2.group_sizes().min() >= k, where(inst)
            att = attack_pair(classes(r1), classes(r2))
            assert att.FA >= k and att.CA >= k and att.BA >= k, where(inst, f"FA={att.FA} CA={att.CA} BA={att.BA}")
        else:
            infeasible += 1
            assert r2.info["feasible"] == 0, where(inst)
            assert r2.info["specializations"] == 0
            assert r2.n_groups == 1 and np.all(r2.group == 0), where(inst)
            assert r2.low[0].tolist() == [0] * len(inst.taxes)
            assert r2.high[0].tolist() == [t.n_leaves - 1 for t in inst.taxes]
            # and it does break BCF-anonymity: BA of the all-ANY table is |D2| (spec §2.1)
            assert attack_pair(classes(r1), classes(r2)).BA == inst.sizes[1]
    assert ks == set(range(2, 9))
    assert feasible >= 150 and infeasible >= 10, (feasible, infeasible)


def test_empty_increment_has_no_b_target_by_default_and_is_infeasible_literally():
    """An empty D2 (multi-purpose publishing, §1.1): every R2 record is a T1 record, so no T2
    target exists. Default reading: BA is infinite, only FA = CA >= k binds, and bcf specializes
    (the verifier agrees). Literal reading (phantom=True, specs §2.1 "with empty D2, BA = 0 for
    any R2"): nothing is BCF-anonymous, bcf publishes the all-ANY table with feasible = 0. The same
    for R3 with an empty D3."""
    split = 0
    for seed in range(3000, 3020):
        inst = make_instance(seed, n_releases=3, increments=[0, 0])
        k = inst.k
        r1 = tds(inst, 0)
        r2 = bcf(inst, 1, [r1])
        att = attack_pair(classes(r1), classes(r2))
        assert att.BA == np.inf and att.FA == att.CA >= k, where(inst, f"BA={att.BA}")
        assert r2.info["feasible"] == 1 and verify(inst, r2, [r1]).violations == 0, where(inst)
        split += r2.n_groups > 1
        literal = BCFAnonymizer(BCFAnonymizerParams(k=k, phantom=True))
        r2_lit = bcf(inst, 1, [r1], literal)
        assert attack_pair(classes(r1), classes(r2_lit), phantom=True).BA == 0, where(inst)
        assert r2_lit.info["feasible"] == 0 and r2_lit.n_groups == 1, where(inst)
        # a k-anonymized R2 of the same data (R2 = D1) is not literally BCF-anonymous either
        assert attack_pair(classes(r1), classes(tds(inst, 1)), phantom=True).BA == 0, where(inst)
    assert split > 0  # the default reading does specialize
    for seed in range(3100, 3120):
        inst = make_instance(seed, n_releases=3, increments=[30, 0])
        r1 = tds(inst, 0)
        r2 = bcf(inst, 1, [r1])
        assert r2.info["feasible"] == 1
        r3 = bcf(inst, 2, [r1, r2])
        assert attack_latest([classes(r1), classes(r2)], [None, None], classes(r3)).pairs[1].BA == np.inf, where(inst)
        assert r3.info["feasible"] == 1, where(inst)
        r3_lit = bcf(inst, 2, [r1, r2], BCFAnonymizer(BCFAnonymizerParams(k=inst.k, phantom=True)))
        assert r3_lit.info["feasible"] == 0 and r3_lit.n_groups == 1, where(inst)


def test_bcf_release_2_specializes_when_it_can(two_release_instances):
    """Feasible outputs are not all the trivial all-ANY table."""
    split = [inst for inst in two_release_instances if inst.cache["bcf2"].info["feasible"] == 1 and inst.cache["bcf2"].n_groups > 1]
    assert len(split) >= 50


def test_bcf_release_2_is_maximal(two_release_instances):
    """No single further specialization of bcf's R2 keeps every class >= k and FA, CA, BA >= k
    (recomputed from scratch)."""
    checked = 0
    for inst in two_release_instances[:150]:
        r2 = inst.cache["bcf2"]
        if not r2.info["feasible"]:
            continue
        c1 = classes(tds(inst, 0))
        rel2 = inst.releases[1]
        for a, node, low, high, klass in specializations(inst, r2):
            checked += 1
            cand = Classes.build(low, high, {}, klass, rel2.sensitive, rel2.n_values)
            ok, levels = bcf_valid(inst, [c1], cand)
            assert not ok, where(inst, f"specializing attr {a} node {node} keeps BCF validity {levels}")
    assert checked >= 200, checked


def three_bcf_releases(seeds):
    """``(instance, R1 = tds, R2 = bcf, R3 = bcf)`` for the 3-release instances whose increments
    both hold at least k records."""
    for seed in seeds:
        inst = make_instance(seed, n_releases=3)
        if min(inst.sizes[1:]) < inst.k:
            continue
        r1 = tds(inst, 0)
        r2 = bcf(inst, 1, [r1])
        yield inst, r1, r2, bcf(inst, 2, [r1, r2])


def test_bcf_release_3_is_maximal():
    checked = 0
    for inst, r1, r2, r3 in three_bcf_releases(range(1000, 1040)):
        rel3 = inst.releases[2]
        for a, node, low, high, klass in specializations(inst, r3):
            checked += 1
            cand = Classes.build(low, high, {}, klass, rel3.sensitive, rel3.n_values)
            ok, levels = bcf_valid(inst, [classes(r1), classes(r2)], cand)
            assert not ok, where(inst, f"specializing attr {a} node {node} keeps BCF validity {levels}")
    assert checked >= 50, checked


def test_bcf_and_tds_honour_the_run_privacy_model(two_release_instances):
    """With distinct 2-diversity as the run's privacy model, every class tds and bcf publish has
    two distinct sensitive values (when the all-ANY table has), and bcf's classes >= k too."""
    l_div = default_registry().create("privacy_model", "l_diversity", {"variant": "distinct", "l": 2})
    checked = 0
    for inst in two_release_instances[:80]:
        rel1, rel2 = inst.releases[0], inst.releases[1]
        if len(np.unique(rel1.sensitive)) < 2 or inst.sizes[1] < inst.k:
            continue
        r1_div = TopDownSpecialization().publish(rel1, publish_ctx(l_div, rel1, History()))
        r1 = tds(inst, 0)  # k-anonymous R1, so that R2 is feasible
        r2 = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)).publish(rel2, publish_ctx(l_div, rel2, History([rel1], [r1])))
        for pub in (r1_div, r2):
            distinct = (pub.group_counts() > 0).sum(axis=1)
            assert distinct.min() >= 2, where(inst, f"release {pub.t}: distinct values per class {distinct.tolist()}")
        assert r2.group_sizes().min() >= inst.k and r2.info["feasible"] == 1
        att = attack_pair(classes(r1), classes(r2))
        assert att.FA >= inst.k and att.BA >= inst.k, where(inst, f"FA={att.FA} BA={att.BA}")
        checked += 1
    assert checked >= 40


# ---------------------------------------------------------------------------- 4. release 1
@pytest.mark.parametrize("model_name", ["k_anonymity", "bcf_anonymity"])
def test_bcf_at_release_1_is_tds_k_anonymity(two_release_instances, model_name):
    for inst in two_release_instances[:80]:
        rel = inst.releases[0]
        model = default_registry().create("privacy_model", model_name, {"k": inst.k})
        pub = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)).publish(rel, publish_ctx(model, rel, History()))
        ref = tds(inst, 0)
        assert pub.info["feasible"] == 1
        assert np.array_equal(pub.group, ref.group), where(inst)
        assert np.array_equal(pub.low, ref.low) and np.array_equal(pub.high, ref.high), where(inst)
        assert pub.info["specializations"] == ref.info["specializations"]


# ---------------------------------------------------------------------------- 5. three releases
def test_bcf_release_3_against_history():
    checked = infeasible = composed = 0
    for seed in range(1000, 1000 + N_THREE):
        inst = make_instance(seed, n_releases=3)
        k = inst.k
        if inst.sizes[1] < k or inst.sizes[2] == 0:
            # R2 cannot be BCF-anonymous (R3 is only checked against BCF-anonymous earlier
            # releases); an empty D3 is test_empty_increment_is_infeasible's
            continue
        r1 = tds(inst, 0)
        anonymizer = BCFAnonymizer(BCFAnonymizerParams(k=k))  # one instance for the whole run, as the runner does
        r2 = bcf(inst, 1, [r1], anonymizer)
        assert r2.info["feasible"] == 1
        r3 = bcf(inst, 2, [r1, r2], anonymizer)
        fresh = bcf(inst, 2, [r1, r2])  # a new anonymizer reads the whole history: same output
        assert np.array_equal(r3.group, fresh.group) and np.array_equal(r3.low, fresh.low), where(inst)
        assert_global_recoding(inst, inst.releases[2], r3)
        c1, c2, c3 = classes(r1), classes(r2), classes(r3)
        # the B-reduced R2 built from attack_pair, and ReleaseChain's, agree
        crack = attack_pair(c1, c2).backward_crack
        chain = ReleaseChain()
        chain.add(c1)
        chain.add(c2)
        assert chain.reduced[0] is None
        if crack.any():
            assert np.array_equal(chain.reduced[1].entry_count, c2.entry_count - crack)
        else:
            assert chain.reduced[1] is None
        att = attack_latest([c1, c2], chain.reduced, c3)
        ok, levels = bcf_valid(inst, [c1, c2], c3)
        if inst.sizes[2] >= k:
            checked += 1
            composed += bool(att.composed)
            assert r3.info["feasible"] == 1, where(inst)
            assert r3.group_sizes().min() >= k
            assert att.FA >= k and att.CA >= k and att.BA >= k, where(inst, f"FA={att.FA} CA={att.CA} BA={att.BA}")
            assert att.FA_composed >= k
            assert ok, where(inst, str(levels))
        else:
            infeasible += 1
            assert r3.info["feasible"] == 0 and r3.n_groups == 1, where(inst)
            assert att.BA < k and not ok
    assert checked >= 50 and infeasible >= 3 and composed >= 10, (checked, infeasible, composed)


# ---------------------------------------------------------------------------- 6. the verifier
def verify(inst: Instance, pub: Publication, earlier: list[Publication], verifier: BCFAnonymity | None = None):
    verifier = default_registry().create("privacy_model", "bcf_anonymity", {"k": inst.k}) if verifier is None else verifier
    rel = inst.releases[pub.t - 1]
    return verifier.verify(pub, ModelContext(rel.schema, rel.sensitive_distribution(), history_of(inst, earlier), rel))


def test_verifier_agrees_with_attack_pair(two_release_instances):
    tds_broken = 0
    for inst in two_release_instances:
        k = inst.k
        r1, r2b, r2t = tds(inst, 0), inst.cache["bcf2"], tds(inst, 1)
        # one verifier through the run (release 1 with no history, then release 2), as the runner does
        verifier = BCFAnonymity(BCFAnonymity.Params(k=k))
        rep1 = verify(inst, r1, [], verifier)
        assert rep1.violations == 0 and rep1.satisfied and rep1.levels["k"] >= k
        rep = verify(inst, r2b, [r1], verifier)
        for pub, rep in ((r2b, rep), (r2t, verify(inst, r2t, [r1]))):
            att = attack_pair(classes(r1), classes(pub))
            broken = att.FA < k or att.CA < k or att.BA < k or pub.group_sizes().min() < k
            assert (rep.violations > 0) == broken == (not rep.satisfied), where(inst, f"{rep} FA={att.FA} BA={att.BA}")
            assert (rep.levels["FA"], rep.levels["CA"], rep.levels["BA"]) == (att.FA, att.CA, att.BA)
            # violations count the classes below k: R1's under F, R2's under C or B
            bad2 = (att.cross_anonymity < k) | (att.backward_anonymity < k) | (pub.group_sizes() < k)
            assert rep.violations == int(np.count_nonzero(att.forward_anonymity < k)) + int(bad2.sum())
            if pub is r2b and r2b.info["feasible"]:
                assert rep.violations == 0, where(inst, str(rep))
            else:
                tds_broken += broken
    assert tds_broken >= 1  # some k-anonymized R2 breaks BCF-anonymity
    assert tds_broken >= 20, tds_broken


def test_verifier_on_three_releases():
    checked = 0
    for inst, r1, r2, r3 in three_bcf_releases(range(2000, 2040)):
        verifier = BCFAnonymity(BCFAnonymity.Params(k=inst.k))
        for pub, earlier in ((r1, []), (r2, [r1]), (r3, [r1, r2])):
            rep = verify(inst, pub, earlier, verifier)
            assert rep.violations == 0, where(inst, f"release {pub.t}: {rep}")
        r3t = TopDownSpecialization().publish(inst.releases[2], publish_ctx(k_model(inst.k), inst.releases[2], History()))
        ok, levels = bcf_valid(inst, [classes(r1), classes(r2)], classes(r3t))
        assert (verify(inst, r3t, [r1, r2]).violations == 0) == ok, where(inst, str(levels))
        checked += 1
    assert checked >= 10


# ---------------------------------------------------------------------------- 7. bad parameters
@pytest.mark.parametrize(
    "kw, field",
    [({"k": 0}, "k"), ({"k": -3}, "k"), ({"k": True}, "k"), ({"k": 2.0}, "k"), ({"k": "5"}, "k"), ({"phantom": "yes"}, "phantom")],
)
def test_bad_bcf_parameters(kw, field):
    with pytest.raises(ConfigError, match=rf"^{field} must be"):
        BCFParams(**kw)


def test_bcf_parameters_through_the_registry():
    with pytest.raises(ConfigError, match=r"(^|\.)k must be"):
        default_registry().create("anonymizer", "bcf", {"k": 0})
    assert isinstance(default_registry().create("anonymizer", "bcf", {"k": 3}), BCFAnonymizer)


@pytest.mark.parametrize("kw", [{"k": 0}, {"k": True}, {"k": 2.0}, {"phantom": "yes"}])
def test_bad_bcf_anonymizer_parameters(kw):
    field = next(iter(kw))
    allowed = "an integer >= 1, or null for the privacy model's k" if field == "k" else "true or false"
    with pytest.raises(ConfigError, match=rf"^{field} must be {allowed}"):
        BCFAnonymizerParams(**kw)


# ---------------------------------------------------------------------------- 8. k lives in the model
class _NoK:
    """A privacy model without a k (accepts every group)."""

    params = None

    def accepts(self, batch, ctx):
        return np.ones(batch.n_groups, dtype=bool)


def _two_releases(seed: int = 0):
    for s in range(seed, seed + 100):
        inst = make_instance(s)
        if inst.sizes[1] >= inst.k:
            return inst
    raise AssertionError("no feasible instance")


def _same(a: Publication, b: Publication) -> bool:
    return (np.array_equal(a.group, b.group) and np.array_equal(a.low, b.low) and np.array_equal(a.high, b.high)
            and a.info == b.info)


def test_bcf_k_defaults_to_null_and_takes_the_privacy_models_k():
    """anonymizer.k null (the default): the k of the run's privacy model, the same numbers as that
    k given explicitly; through the registry too."""
    assert BCFAnonymizerParams().k is None and default_registry().create("anonymizer", "bcf").params.k is None
    inst = _two_releases()
    rel2, r1 = inst.releases[1], tds(inst, 0)
    for model in (k_model(inst.k), default_registry().create("privacy_model", "bcf_anonymity", {"k": inst.k})):
        ctx = publish_ctx(model, rel2, history_of(inst, [r1]))
        from_model = BCFAnonymizer().publish(rel2, ctx)
        explicit = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)).publish(rel2, ctx)
        assert _same(from_model, explicit) and from_model.info["feasible"] == 1
        assert from_model.group_sizes().min() >= inst.k
    # the model's k is what binds: a larger one publishes coarser classes
    big = inst.k + 3
    coarse = BCFAnonymizer().publish(rel2, publish_ctx(k_model(big), rel2, history_of(inst, [r1])))
    ref = BCFAnonymizer(BCFAnonymizerParams(k=big)).publish(rel2, publish_ctx(k_model(big), rel2, history_of(inst, [r1])))
    assert _same(coarse, ref)


def test_an_explicit_bcf_k_wins_over_the_privacy_models():
    inst = _two_releases(5)
    rel2, r1 = inst.releases[1], tds(inst, 0)
    against_1 = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)).publish(rel2, publish_ctx(k_model(1), rel2, history_of(inst, [r1])))
    alone = BCFAnonymizer(BCFAnonymizerParams(k=inst.k)).publish(rel2, publish_ctx(_NoK(), rel2, history_of(inst, [r1])))
    assert _same(against_1, alone) and against_1.group_sizes().min() >= inst.k


@pytest.mark.parametrize("model, which", [(None, "the run has no privacy model"), (_NoK(), "privacy model '_NoK' has no k")])
def test_bcf_with_no_k_anywhere_is_a_one_line_error_at_the_first_publish(model, which):
    inst = _two_releases()
    rel = inst.releases[0]
    ctx = PublishContext(model, ModelContext(rel.schema, rel.sensitive_distribution(), History(), rel), History(), np.random.default_rng(0))
    with pytest.raises(ConfigError, match=rf"^anonymizer\.k is null \(the privacy model's k\) but {which}: "
                                          rf"set anonymizer\.k to an integer >= 1$") as err:
        BCFAnonymizer().publish(rel, ctx)
    assert "\n" not in str(err.value)


def numeric_release(n: int = 20, t: int = 1) -> Release:
    """A categorical and a numeric QI; the first 20 records at time 1, the rest at time 2."""
    tax = Taxonomy.from_paths([["a", "x", "*"], ["b", "x", "*"], ["c", "y", "*"], ["d", "y", "*"]])
    schema = Schema((CategoricalQI("c", tax), NumericQI("age", 0, 100)), Sensitive("s", ("u", "v")), respondent="id", time="time")
    qi = np.stack([np.arange(n) % 4, (np.arange(n) * 7) % 90.0], axis=1).astype(float)
    time = np.where(np.arange(n) < 20, 1, 2).astype(np.int64)
    return Release(t, schema, np.arange(n, dtype=np.int64), qi, np.arange(n) % 2, time)


def test_numeric_qi_splits_at_the_median():
    """A numeric QI has no taxonomy: one interval of the release's values, split in two at the
    median value its records hold (global recoding). Ages 1..8, k = 2: [1-4] | [5-8], then
    [1-2] | [3-4] and [5-6] | [7-8]."""
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("s", ("u", "v")), respondent="id", time="time")
    n = 8
    rel = Release(1, schema, np.arange(n, dtype=np.int64), np.arange(1, n + 1, dtype=float)[:, None], np.arange(n) % 2,
                  np.ones(n, dtype=np.int64))
    pub = TopDownSpecialization().publish(rel, publish_ctx(k_model(2), rel, History()))
    assert sorted(zip(pub.low[:, 0].tolist(), pub.high[:, 0].tolist())) == [(1, 2), (3, 4), (5, 6), (7, 8)]
    assert pub.info["specializations"] == 3
    # with a categorical column too, bcf's second release stays BCF-anonymous
    rel1 = numeric_release()
    r1 = TopDownSpecialization().publish(rel1, publish_ctx(k_model(2), rel1, History()))
    rel2 = numeric_release(n=28, t=2)
    r2 = BCFAnonymizer(BCFAnonymizerParams(k=2)).publish(rel2, publish_ctx(k_model(2), rel2, History([rel1], [r1])))
    assert r2.info["feasible"] == 1 and r2.n_groups > 1
    att = attack_pair(classes(r1), classes(r2))
    assert min(att.FA, att.CA, att.BA) >= 2
