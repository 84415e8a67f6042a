"""PD_cor narrowing (``transitions="knowledge"``, :mod:`cdpbench_ksaa.transition_relation`): a link
between records of values ``a`` (earlier) and ``b`` (later) is removed when the adversary's
knowledge gives ``a -> b`` over the releases between them a probability <= ``min_transition``.

A hand example with every candidate written out (pairwise and joint joins, the models and the
attacker built by the registry with ``pd_cor=dk`` / ``bayframe`` reading a data set's transition
model); the property that threshold 0 with a knowledge allowing every transition is
``transitions="any"`` on random instances; monotonicity of the candidates in the threshold (the
natural join always; the full matching join whenever the higher threshold leaves a perfect
assignment, and the pinned counterexample when it does not)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from cdpbench_ksaa.joint_matching import JointJoin
from cdpbench_ksaa.linkability import candidates, group_of
from cdpbench_ksaa.linkage_graph import linkage_graph, prune
from cdpbench_ksaa.transition_relation import TransitionRelation

from cdpbench.data import History, Publication, Release
from cdpbench.errors import ConfigError, DataError
from cdpbench.plugin import AttackContext, ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import Schema

sys.path.insert(0, str(Path(__file__).parent))
from test_ksaa_joint_matching import random_releases  # noqa: E402
from test_ksaa_linkage_graph import AGE, SENS, SEX, VALUES, random_pair  # noqa: E402

FLU, HIV, COLD = (VALUES.index(v) for v in ("flu", "hiv", "cold"))

# one release to the next: flu never becomes hiv directly (through cold it can: 0.5 * 0.3)
TABLE = np.array([
    [0.5, 0.0, 0.5],  # flu -> flu, hiv, cold
    [0.0, 1.0, 0.0],  # hiv
    [0.2, 0.3, 0.5],  # cold
])


class TableModel:
    """A data set's transition model (the SequenceModel members the knowledge plugins read)."""

    values = VALUES
    max_order = 1

    def __init__(self, table):
        self.table = np.asarray(table, dtype=float)

    def bk_seq(self, steps):
        assert steps == 1
        return self.table

    def bk_sv(self, qi, t):
        return np.full((len(qi), len(VALUES)), 1.0 / len(VALUES))


# ------------------------------------------------------------------------------ the hand example
SCHEMA = Schema((AGE, SEX), SENS)


def release(t, values, truth=None):
    """Respondents 1 (age 20, F) and 2 (age 60, M) with the given values."""
    qi = np.array([[20.0, float(SEX.taxonomy.code()["F"])], [60.0, float(SEX.taxonomy.code()["M"])]])
    return Release(t, SCHEMA, np.array([1, 2], np.int64), qi, np.array(values, np.int64), truth=truth)


def hand_history(t2=2, table=TABLE):
    """Release ``t = 1``: two groups, A0 = {1: flu}, A1 = {2: cold}; release ``t2``: one group
    B0 = {1: cold, 2: hiv} (1 went flu -> cold, 2 cold -> hiv)."""
    truth = {"model": TableModel(table)}
    r1, r2 = release(1, [FLU, COLD], truth), release(t2, [COLD, HIV], truth)
    p1 = Publication.from_partition(r1, np.array([0, 1]))
    p2 = Publication.from_partition(r2, np.array([0, 0]))
    return [r1, r2], [p1, p2]


def values_by_respondent(c):
    out = {int(r): set() for r in c.respondent.tolist()}
    for i, x in zip(c.row.tolist(), c.node.tolist()):
        out[int(c.respondent[i])].add(VALUES[int(c.nodes.value[x])])
    return out


KNOWLEDGE = TransitionRelation("knowledge", TABLE[None])


@pytest.mark.parametrize("join", ["pairwise", "joint"])
def test_hand_example_an_impossible_transition_removes_an_edge(join):
    """Under ``any`` respondent 1 (A0: flu) can be either record of B0 (cold or hiv), and so can
    2 (A1: cold). PD_cor says flu never becomes hiv in one release: the link A0:flu - B0:hiv goes,
    1 is cold (even on the natural join); on the full matching join B0:cold is then 1's, so 2 is
    hiv. Under ``none`` 1 (flu) links to nothing and 2 to cold."""
    _, pubs = hand_history()
    views = [p.public() for p in pubs]
    got = {}
    for name, t in (("any", "any"), ("knowledge", KNOWLEDGE), ("none", "none")):
        for pruned in (True, False):
            c = candidates(views, transitions=t, pruned=pruned, join=join)
            got[(name, pruned)] = (values_by_respondent(c), c.values.tolist(), c.records.tolist())
    assert got[("any", True)] == got[("any", False)] == ({1: {"cold", "hiv"}, 2: {"cold", "hiv"}}, [2, 2], [2, 2])
    assert got[("knowledge", False)] == ({1: {"cold"}, 2: {"cold", "hiv"}}, [1, 2], [1, 2])
    assert got[("knowledge", True)] == ({1: {"cold"}, 2: {"hiv"}}, [1, 1], [1, 1])
    assert got[("none", True)] == got[("none", False)] == ({1: set(), 2: {"cold"}}, [0, 1], [0, 1])


def test_hand_example_edges_and_steps():
    """The edge removed, and the matrix power over the releases between the two views: two
    releases apart flu -> hiv is 0.5 * 0.3 = 0.15 (through cold), so the link stays unless
    ``min_transition`` >= 0.15."""
    _, pubs = hand_history()
    views = [p.public() for p in pubs]
    g = linkage_graph(views[0], views[1], KNOWLEDGE)
    pairs = {(VALUES[int(g.a.value[i])], VALUES[int(g.b.value[j])]) for i, j in zip(g.edge_a.tolist(), g.edge_b.tolist())}
    assert pairs == {("flu", "cold"), ("cold", "cold"), ("cold", "hiv")}
    kept = prune(g)
    assert {(VALUES[int(kept.a.value[i])], VALUES[int(kept.b.value[j])])
            for i, j, k in zip(kept.edge_a.tolist(), kept.edge_b.tolist(), kept.kept.tolist()) if k} == {("flu", "cold"), ("cold", "hiv")}
    assert KNOWLEDGE.probability(2)[FLU, HIV] == pytest.approx(0.15)
    _, later = hand_history(t2=3)
    far = [p.public() for p in later]
    for threshold, one in ((0.0, True), (0.14, True), (0.15, False)):
        rel = TransitionRelation("knowledge", TABLE[None], threshold)
        c = candidates(far, transitions=rel, pruned=False)
        assert ("hiv" in values_by_respondent(c)[1]) is one, threshold


@pytest.mark.parametrize("join", ["pairwise", "joint"])
@pytest.mark.parametrize("pd_cor", ["dk", {"name": "bayframe", "correlation": "model"}])
def test_hand_example_through_the_plugins(join, pd_cor):
    """k_diversity / k_linkability / j_similarity_join and the linkage attacker built by the
    registry, PD_cor read from the data set's model by the knowledge plugin ``pd_cor``."""
    rels, pubs = hand_history()
    ctx = ModelContext(rels[1].schema, rels[1].sensitive_distribution(), History(rels[:1], pubs[:1]), rels[1])
    reg = default_registry()
    params = {"k": 2, "join": join, "transitions": "knowledge", "pd_cor": pd_cor}
    kd = reg.create("privacy_model", "k_diversity", params)
    kl = reg.create("privacy_model", "k_linkability", params)
    _, cand, at_risk = kd.linked(pubs[1], ctx)
    assert cand.values.tolist() == [1, 1] and at_risk.tolist() == [True, True]
    _, cand, at_risk = kl.linked(pubs[1], ctx)
    assert cand.values.tolist() == [1, 2] and at_risk.tolist() == [True, False]
    assert kd.violating_groups(pubs[1], ctx).tolist() == [0] == kl.violating_groups(pubs[1], ctx).tolist()
    for name in ("k_diversity", "k_linkability"):  # the same publication under 'any': nobody below 2
        same = reg.create("privacy_model", name, {"k": 2, "join": join, "transitions": "any"})
        assert same.violating_groups(pubs[1], ctx).tolist() == []
    # KSAA's model: the joined beliefs (uniform prior restricted to the candidates)
    js = reg.create("privacy_model", "j_similarity_join", {"join": join, "transitions": "knowledge", "pd_cor": pd_cor,
                                                            "inner": {"name": "j_similarity", "k": 1, "j": 0.5, "beta": 100.0}})
    jctx = ModelContext(rels[1].schema, rels[1].sensitive_distribution(), History(rels[:1], pubs[:1]), rels[1],
                        prior=np.full((2, 3), 1.0 / 3))
    beliefs = js.joined_batch(pubs[1], jctx).prior
    row_of = {int(r): i for i, r in enumerate(pubs[1].respondent.tolist())}
    assert beliefs[row_of[1]].tolist() == [0.0, 0.0, 1.0] and beliefs[row_of[2]].tolist() == [0.0, 1.0, 0.0]
    assert js.violating_groups(pubs[1], jctx).tolist() == [0]  # two point masses: JSD 1 bit > 0.5
    # the attacker: respondent 1 is cold with certainty, 2 hiv (frequency estimator)
    attacker = reg.create("attacker", "linkage", {"join": join, "transitions": "knowledge", "pd_cor": pd_cor,
                                                  "estimator": "frequency"})
    views = [p.public() for p in pubs]
    res = attacker.observe(views[1], AttackContext(rels[1], views, np.random.default_rng(0)))
    post = {int(r): np.asarray(res.posterior)[i] for i, r in enumerate(res.respondent.tolist())}
    assert post[1].tolist() == [0.0, 0.0, 1.0] and post[2].tolist() == [0.0, 1.0, 0.0]


def test_no_transition_model_is_a_one_line_error():
    """adult_sequential has no transition model: the default pd_cor (bayframe, correlation=model)
    says so in one line; a knowledge without tables is refused when the plugin is built."""
    rels, pubs = hand_history()
    bare = [Release(r.t, r.schema, r.respondent, r.qi, r.sensitive) for r in rels]  # no truth
    ctx = ModelContext(bare[1].schema, bare[1].sensitive_distribution(), History(bare[:1], pubs[:1]), bare[1])
    kd = default_registry().create("privacy_model", "k_diversity", {"k": 2, "transitions": "knowledge"})
    with pytest.raises(DataError, match=r"^transitions='knowledge': the data set gives the pd_cor knowledge .* no transition model") as e:
        kd.violating_groups(pubs[1], ctx)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="pd_cor"):
        default_registry().create("attacker", "linkage", {"transitions": "knowledge", "pd_cor": "uniform"})
    with pytest.raises(ConfigError, match="min_transition"):
        default_registry().create("privacy_model", "k_diversity", {"transitions": "knowledge", "min_transition": 1.0})
    with pytest.raises(ConfigError, match="transitions"):
        default_registry().create("privacy_model", "j_similarity_join", {"transitions": "pd_cor"})


def test_uniform_correlation_on_a_data_set_without_model_is_any():
    """pd_cor.correlation=uniform (BayFrame's Adult setting): every transition 1/m, so threshold 0
    is ``any`` — through the registry, on the hand example without a model."""
    rels, pubs = hand_history()
    bare = [Release(r.t, r.schema, r.respondent, r.qi, r.sensitive) for r in rels]
    ctx = ModelContext(bare[1].schema, bare[1].sensitive_distribution(), History(bare[:1], pubs[:1]), bare[1])
    reg = default_registry()
    uni = reg.create("privacy_model", "k_diversity", {"k": 2, "transitions": "knowledge",
                                                      "pd_cor": {"name": "bayframe", "correlation": "uniform"}})
    anyt = reg.create("privacy_model", "k_diversity", {"k": 2, "transitions": "any"})
    assert uni.linked(pubs[1], ctx)[1].values.tolist() == anyt.linked(pubs[1], ctx)[1].values.tolist() == [2, 2]


# ------------------------------------------------------------------------------------- properties
def candidate_pairs(c):
    return set(zip(c.respondent[c.row].tolist(), c.nodes.value[c.node].tolist()))


def random_table(rng, m, zeros=0.0):
    """A row-stochastic ``[m, m]`` table; ``zeros``: the share of entries set to 0 (each row
    keeps one positive entry)."""
    t = rng.random((m, m)) + 0.05
    t[rng.random((m, m)) < zeros] = 0.0
    t[np.arange(m), rng.integers(0, m, m)] += 0.1
    return t / t.sum(axis=1, keepdims=True)


def test_threshold_zero_with_every_transition_possible_is_any():
    """Random two-release pairs (pairwise) and 3-4-release instances (joint and pairwise): a
    knowledge with every transition positive, at threshold 0, gives the candidates of ``any``."""
    rng = np.random.default_rng(7)
    checked = 0
    for it in range(120):
        views = list(random_pair(rng, it)) if it % 2 == 0 else random_releases(rng, it)
        rel = TransitionRelation("knowledge", np.stack([random_table(rng, 3), random_table(rng, 3)]), 0.0)
        for join in ("pairwise", "joint"):
            for pruned in (True, False):
                a = candidates(views, transitions="any", pruned=pruned, join=join)
                k = candidates(views, transitions=rel, pruned=pruned, join=join)
                assert candidate_pairs(a) == candidate_pairs(k), (it, join, pruned)
                assert a.values.tolist() == k.values.tolist() and a.records.tolist() == k.records.tolist()
                checked += 1
    assert checked == 480


THRESHOLDS = (0.0, 0.15, 0.3, 0.45, 0.6)


def joint_perfect(views, rel):
    """Every joint assignment of the joint join under ``rel`` is perfect (one clique per
    respondent published in all the views of its pattern)."""
    resp = np.asarray(views[-1].respondent, np.int64)
    join = JointJoin(views, [group_of(v, resp) for v in views], rel)
    join.candidates(True)
    return all(g.size == int(g.class_cap[0].sum()) for g in join.graphs)


def pairwise_perfect(views, rel):
    return all(prune(linkage_graph(v, views[-1], rel)).perfect for v in views[:-1])


def test_a_higher_threshold_never_adds_a_candidate():
    """The natural join: removing links never adds a clique, so never a candidate (both joins,
    every instance). The full matching join: whenever the higher threshold still leaves a
    perfect assignment (the releases are consistent with the adversary's knowledge), every one
    of its assignments is one of the lower threshold's, so neither. (Otherwise it can: the pinned
    counterexample below.)"""
    rng = np.random.default_rng(11)
    seen = {"natural": 0, "matching": 0, "matching_skipped": 0, "removed_some": 0}
    for it in range(120):
        views = list(random_pair(rng, it)) if it % 2 == 0 else random_releases(rng, it)
        tables = np.stack([random_table(rng, 3, zeros=0.2)])
        for join in ("pairwise", "joint"):
            perfect = pairwise_perfect if join == "pairwise" else joint_perfect
            before_nat = before_match = None
            for th in THRESHOLDS:
                rel = TransitionRelation("knowledge", tables, th)
                nat = candidate_pairs(candidates(views, transitions=rel, pruned=False, join=join))
                match = candidate_pairs(candidates(views, transitions=rel, pruned=True, join=join))
                if before_nat is not None:
                    assert nat <= before_nat, (it, join, th)
                    seen["natural"] += 1
                    seen["removed_some"] += nat < before_nat
                    if perfect(views, rel) and same_respondents(views):
                        assert match <= before_match, (it, join, th)
                        seen["matching"] += 1
                    else:
                        seen["matching_skipped"] += 1
                before_nat, before_match = nat, match
    assert seen["natural"] == 120 * 2 * (len(THRESHOLDS) - 1)
    assert seen["removed_some"] >= 50 and seen["matching"] >= 100, seen


def same_respondents(views):
    ids = set(views[-1].respondent.tolist())
    return all(set(v.respondent.tolist()) == ids for v in views)


def test_full_matching_join_counterexample_when_no_perfect_assignment_is_left():
    """Why the full matching join is not monotone in the threshold: A0 = {1: flu}, A1 = {2: cold}
    then B0 = {1: flu, 2: hiv}. Threshold 0: links A0:flu-B0:flu, A0:flu-B0:hiv, A1:cold-B0:hiv;
    the one perfect matching pairs A1 with hiv, so respondent 1 is flu. Threshold 0.3 removes
    cold -> hiv (0.2), the true transition of 2: no perfect matching is left, the maximum ones
    (one edge) use either of A0's links, and 1's candidates grow to {flu, hiv} — while 2 links to
    nothing (unplaced: the models do not count it at risk)."""
    table = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.2, 0.8]])
    r1 = release(1, [FLU, COLD])
    r2 = release(2, [FLU, HIV])
    views = [Publication.from_partition(r1, np.array([0, 1])).public(), Publication.from_partition(r2, np.array([0, 0])).public()]
    got = {}
    for join in ("pairwise", "joint"):
        for th in (0.0, 0.3):
            c = candidates(views, transitions=TransitionRelation("knowledge", table[None], th), join=join)
            got[(join, th)] = values_by_respondent(c)
    for join in ("pairwise", "joint"):
        assert got[(join, 0.0)] == {1: {"flu"}, 2: {"hiv"}}
        assert got[(join, 0.3)] == {1: {"flu", "hiv"}, 2: set()}


def test_joint_join_with_pd_cor_against_brute_force(monkeypatch):
    """The joint join under PD_cor, candidate by candidate, against test_ksaa_joint_matching's
    enumeration of every joint assignment with the links of ``any`` filtered by the relation (the
    oracle's edges), on random 3-4-release instances with some transitions impossible."""
    import test_ksaa_joint_matching as tjm
    from cdpbench_ksaa.linkage_graph import Nodes

    rng = np.random.default_rng(5)
    original = tjm.expected_edges
    seen = {"differs_from_any": 0, "instances": 0}
    for it in range(160):
        views = random_releases(rng, it)
        rel = TransitionRelation("knowledge", np.stack([random_table(rng, 3, zeros=0.35)]), float(rng.choice([0.0, 0.25])))

        def filtered(va, vb, transitions, rel=rel):
            a, b = Nodes.of(va), Nodes.of(vb)
            ok = rel.allowed(int(vb.t) - int(va.t), 3)
            return {(i, j) for i, j in original(va, vb, "any") if ok[a.value[i], b.value[j]]}

        monkeypatch.setattr(tjm, "expected_edges", filtered)
        brute = tjm.brute_candidates(views, "any")
        monkeypatch.setattr(tjm, "expected_edges", original)
        assert tjm.method_candidates(views, rel) == tjm.method_candidates(views, rel, shortcuts=False) == brute, it
        seen["instances"] += 1
        seen["differs_from_any"] += tjm.method_candidates(views, "any") != brute
    assert seen["instances"] == 160 and seen["differs_from_any"] >= 40, seen


def test_bkseq_sequential_natural_join_never_rules_out_a_true_value_at_threshold_zero():
    """On bkseq_sequential (its first release without weight, which bkseq's transition classes
    need: every class is used there), ksaa under k_diversity with PD_cor from the default pd_cor
    (bayframe: the data set's weekly tables) runs; at threshold 0 every true transition is
    possible, so the natural join (both joins) keeps every respondent's true value, while
    ``none`` rules some out; and PD_cor keeps no value ``any`` does not."""
    reg = default_registry()
    data = reg.create("dataset", "bkseq_sequential", {"bkseq": {"releases": 3, "tuples": 300}})
    rels = list(data.releases(np.random.default_rng(0)))
    model = reg.create("privacy_model", "k_diversity", {"k": 2, "transitions": "knowledge"})
    anon = reg.create("anonymizer", "ksaa", {"base": {"name": "js_reduce", "leftovers": "merge"}})
    from cdpbench.plugin import PublishContext

    history, views, ruled_out_none = History(), [], 0
    for r in rels:
        mctx = ModelContext(r.schema, r.sensitive_distribution(), history, r)
        pub = anon.publish(r, PublishContext(model, mctx, history, np.random.default_rng(0)))
        assert model.verify(pub, mctx).satisfied
        views.append(pub.public())
        history = History(history.releases + [r], history.publications + [pub])
        if len(views) == 1:
            continue
        rel = model._relation(r, len(views))
        truth = dict(zip(r.respondent.tolist(), r.sensitive.tolist()))
        for join in ("pairwise", "joint"):
            k = candidates(views, transitions=rel, pruned=False, join=join)
            a = candidate_pairs(candidates(views, transitions="any", pruned=False, join=join))
            pairs = candidate_pairs(k)
            assert pairs <= a
            assert all((v, truth[v]) in pairs for v in k.respondent.tolist()), (r.t, join)
            n = candidate_pairs(candidates(views, transitions="none", pruned=False, join=join))
            ruled_out_none += sum((v, truth[v]) not in n for v in k.respondent.tolist())
    assert ruled_out_none > 0
