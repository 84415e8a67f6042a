"""The joint matching of all the releases so far (``joint_matching``; ``join="joint"`` of
``linkability.candidates``, the linkage attacker and the linkability models) against a brute-force
enumeration of every joint assignment, record by record, on random small instances of three and
four releases; the three-release example where the pairwise join keeps a value the joint
assignment rules out, under both joins; and the properties relating the two joins."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from cdpbench_ksaa.joint_matching import JointJoin, Prepared, joint_graph, solve
from cdpbench_ksaa.linkability import candidates, group_of
from cdpbench_ksaa.linkage_graph import Nodes, linkage_graph, prune

from cdpbench.data import History, Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import AttackContext, ModelContext
from cdpbench.registry import default_registry
from cdpbench.schema import Schema

sys.path.insert(0, str(Path(__file__).parent))
from test_ksaa_linkage_graph import (  # noqa: E402  (fixtures and the independent edge oracle)
    AGE, POOL, SENS, SEX, VALUES, ZIP, expected_edges, random_pair, random_people, random_view, records, view,
)


# ------------------------------------------------------------------------------- the oracle
def patterns(views):
    """Respondent of the latest view -> the views it is published in (a tuple of indices)."""
    return {int(r): tuple(i for i, v in enumerate(views) if r in set(v.respondent.tolist()))
            for r in views[-1].respondent.tolist()}


def group_in(v, respondent):
    ids = v.respondent.tolist()
    return int(v.group[ids.index(respondent)]) if respondent in ids else -1


def brute_force(views, positions, transitions):
    """Every joint assignment of ``views[i]`` for ``i`` in ``positions``, by enumeration of record
    cliques: the records of the respondents of the latest view published in all those views are
    assigned (``c_g`` of each group ``g``: how many of them it holds; which of its records are
    theirs is not known), a clique takes one record per view, every two linked (the unpruned
    linkage graphs, ``expected_edges``: group boxes compared attribute by attribute); an assignment
    is a set of disjoint cliques, at most ``c_g`` records of each group, of the largest size.
    Returns ``(size, cliques of some joint assignment, every clique, records)``: cliques as tuples
    of record indices, ``records[p]`` the ``(node, group)`` of each record of position ``p``."""
    vs = [views[i] for i in positions]
    m = len(vs)
    nodes = [Nodes.of(v) for v in vs]
    recs = [[(x, int(n.group[x])) for x in records(n)] for n in nodes]
    links = {(p, q): expected_edges(vs[p], vs[q], transitions) for p in range(m) for q in range(p + 1, m)}
    common = [r for r in views[-1].respondent.tolist() if all(group_in(v, r) >= 0 for v in vs)]
    cap = [np.bincount([group_in(v, r) for r in common], minlength=v.n_groups) for v in vs]
    cliques = [
        k for k in itertools.product(*[range(len(r)) for r in recs])
        if all((recs[p][k[p]][0], recs[q][k[q]][0]) in links[(p, q)] for p in range(m) for q in range(p + 1, m))
    ]
    best, union = 0, set()
    used = [set() for _ in range(m)]
    load = [np.zeros(v.n_groups, np.int64) for v in vs]
    chosen: list[tuple] = []

    def extend(start):
        nonlocal best, union
        if len(chosen) > best:
            best, union = len(chosen), set(chosen)
        elif len(chosen) == best:
            union |= set(chosen)
        for i in range(start, len(cliques)):
            k = cliques[i]
            if any(k[p] in used[p] or load[p][recs[p][k[p]][1]] >= cap[p][recs[p][k[p]][1]] for p in range(m)):
                continue
            for p in range(m):
                used[p].add(k[p])
                load[p][recs[p][k[p]][1]] += 1
            chosen.append(k)
            extend(i + 1)
            chosen.pop()
            for p in range(m):
                used[p].discard(k[p])
                load[p][recs[p][k[p]][1]] -= 1

    extend(0)
    return best, union, cliques, recs


def brute_candidates(views, transitions):
    """Respondent of the latest view -> (its candidate nodes of the latest view through the joint
    matching, through the joint natural join): a node of its latest group is a candidate when
    some joint assignment (some clique) for the views the respondent is published in holds a
    record of that node together with a record of its group in every one of those views."""
    out = {}
    solved = {}
    for r, positions in patterns(views).items():
        g = [group_in(views[i], r) for i in positions]
        if len(positions) == 1:
            n = Nodes.of(views[-1])
            mine = {x for x in range(len(n.count)) if n.group[x] == g[-1]}
            out[r] = (mine, mine)
            continue
        if positions not in solved:
            solved[positions] = brute_force(views, positions, transitions)
        _, union, cliques, recs = solved[positions]

        def hits(ks):
            return {recs[-1][k[-1]][0] for k in ks if all(recs[p][k[p]][1] == g[p] for p in range(len(positions)))}

        out[r] = (hits(union), hits(cliques))
    return out


def method_candidates(views, transitions, shortcuts=True):
    """The same, from ``JointJoin`` (respondent -> (matching nodes, natural nodes));
    ``shortcuts=False``: every program solved by ``milp`` alone (no flow, no LP relaxation)."""
    resp = np.asarray(views[-1].respondent, np.int64)
    join = JointJoin(views, [group_of(v, resp) for v in views], transitions, shortcuts=shortcuts)
    out = {int(r): (set(), set()) for r in resp}
    for k, pruned in enumerate((True, False)):
        row, node = join.candidates(pruned)
        for i, x in zip(row.tolist(), node.tolist()):
            out[int(resp[i])][k].add(x)
    return out


# --------------------------------------------------------------------------- random instances
def random_releases(rng, it):
    """3 or 4 releases of a pool of 6 respondents (age, color, shape; 1..3 values), each
    release a random QI subset and 1..4 groups (``random_view``). ``it % 4``: 0, every release the
    same respondents and values (the true assignment is a perfect one); 1, the same respondents,
    some values re-drawn in later releases (often no perfect assignment); 2 and 3, each release
    its own respondents out of the pool (2: values kept; 3: some re-drawn). A few records per
    release: 2..4 with three releases, 2..3 with four."""
    n_views = 3 if it % 2 == 0 else 4
    most = 4 if n_views == 3 else 3
    pool = np.arange(6)
    qi, sens = random_people(rng, pool)
    n = int(rng.integers(2, most + 1))
    same = it % 4 in (0, 1)
    ids = rng.choice(pool, n, replace=False)
    views = []
    for t in range(1, n_views + 1):
        if not same:
            ids = rng.choice(pool, int(rng.integers(1, most + 1)), replace=False)
        if it % 4 in (1, 3) and t > 1:
            sens = sens.copy()
            flip = rng.random(len(sens)) < 0.25
            sens[flip] = rng.integers(0, 3, int(flip.sum()))
        views.append(random_view(rng, t, ids, (qi, sens)))
    return views


N_RANDOM = 520


@pytest.mark.parametrize("transitions", ["none", "any"])
def test_joint_matching_against_brute_force(transitions):
    """Every edge kept and every candidate set, on ``N_RANDOM`` random instances of 3 and 4
    releases (half each), equal to the enumeration of all joint assignments; solved as the
    default does (a flow for two views, LP relaxations first for more) and by ``milp`` alone."""
    rng = np.random.default_rng(2026 if transitions == "none" else 26)
    seen = dict.fromkeys(("views3", "views4", "perfect", "imperfect", "pruned_clique", "joint_below_pairwise",
                          "partial_respondents", "patterns"), 0)
    for it in range(N_RANDOM):
        views = random_releases(rng, it)
        where = f"instance {it}: {[len(v.respondent) for v in views]} records"
        seen[f"views{len(views)}"] += 1
        resp = np.asarray(views[-1].respondent, np.int64)
        groups = [group_of(v, resp) for v in views]
        prepared = Prepared()
        for positions in sorted(set(patterns(views).values())):
            if len(positions) == 1:
                continue
            seen["patterns"] += 1
            size, union, cliques, recs = brute_force(views, positions, transitions)
            graph = solve(joint_graph(views, groups, positions, transitions, prepared))
            exact = solve(joint_graph(views, groups, positions, transitions, prepared), shortcuts=False)
            assert graph.size == exact.size == size, (where, positions)
            common = sum(all(group_in(views[i], r) >= 0 for i in positions) for r in resp.tolist())
            seen["perfect" if size == common else "imperfect"] += 1
            seen["pruned_clique"] += len(union) < len(cliques)
            seen["partial_respondents"] += any(len(views[i].respondent) > common for i in positions)
            for p, q in itertools.combinations(range(len(positions)), 2):
                want = {(recs[p][k[p]][0], recs[q][k[q]][0]) for k in union}
                assert graph.kept_pairs(p, q) == exact.kept_pairs(p, q) == want, (where, positions, p, q)
        brute = brute_candidates(views, transitions)
        assert method_candidates(views, transitions) == method_candidates(views, transitions, shortcuts=False) == brute, where
        # through linkability.candidates: the counts of the same nodes
        nodes = Nodes.of(views[-1])
        for pruned, k in ((True, 0), (False, 1)):
            c = candidates(views, transitions=transitions, pruned=pruned, join="joint")
            assert c.values.tolist() == [len(brute[int(r)][k]) for r in resp], (where, pruned)
            assert c.records.tolist() == [int(sum(nodes.count[x] for x in brute[int(r)][k])) for r in resp], (where, pruned)
        joint = candidates(views, transitions=transitions, join="joint")
        pairwise = candidates(views, transitions=transitions, join="pairwise")
        seen["joint_below_pairwise"] += bool((joint.values < pairwise.values).any())
    # the random instances reach every case (seeded)
    print(transitions, seen)
    assert seen["views3"] + seen["views4"] == N_RANDOM and min(seen["views3"], seen["views4"]) >= 250, seen
    assert seen["perfect"] >= 200 and seen["partial_respondents"] >= 100, seen
    if transitions == "none":  # with any transitions the true assignment is always a joint one
        assert seen["imperfect"] >= 50 and seen["pruned_clique"] >= 50 and seen["joint_below_pairwise"] >= 5, seen


# ------------------------------------------------------------------- the two joins compared
def node_sets(c):
    out = {int(r): set() for r in c.respondent}
    for i, x in zip(c.row.tolist(), c.node.tolist()):
        out[int(c.respondent[i])].add(x)
    return out


@pytest.mark.parametrize("transitions", ["none", "any"])
def test_two_releases_of_the_same_respondents_joint_is_the_pairwise_join(transitions):
    """Two views publishing the same respondents: the joint matching is the full matching join
    (maximum matchings, perfect or not), edge for edge and candidate for candidate."""
    rng = np.random.default_rng(99 if transitions == "none" else 98)
    compared = imperfect = 0
    for it in range(400):
        va, vb = random_pair(rng, it)
        if set(va.respondent.tolist()) != set(vb.respondent.tolist()):
            continue
        compared += 1
        p = prune(linkage_graph(va, vb, transitions))
        imperfect += not p.perfect
        resp = np.asarray(vb.respondent, np.int64)
        graph = solve(joint_graph([va, vb], [group_of(va, resp), group_of(vb, resp)], (0, 1), transitions))
        kept = {(i, j) for i, j, k in zip(p.edge_a.tolist(), p.edge_b.tolist(), p.kept.tolist()) if k}
        assert graph.kept_pairs(0, 1) == kept, it
        assert graph.size == p.matched, it
        for pruned in (True, False):
            joint = candidates([va, vb], transitions=transitions, pruned=pruned, join="joint")
            pairwise = candidates([va, vb], transitions=transitions, pruned=pruned, join="pairwise")
            assert (joint.row.tolist(), joint.node.tolist()) == (pairwise.row.tolist(), pairwise.node.tolist()), (it, pruned)
    assert compared >= 250 and imperfect >= 50, (compared, imperfect)


def consistent_releases(rng, it):
    """3 or 4 releases of the same 8 respondents, values kept (the true assignment is a joint
    one): each release 1..2 QIs of POOL and up to 4 groups drawn at random."""
    pool = np.arange(8)
    qi, sens = random_people(rng, pool)
    views = []
    for t in range(1, 4 + it % 2):
        cols = rng.permutation(3)[: rng.integers(1, 3)]
        release = Release(t, Schema(tuple(POOL[j] for j in cols), SENS), pool, qi[:, cols], sens)
        mode = "set" if rng.random() < 0.5 else "taxonomy"
        views.append(Publication.from_partition(release, rng.integers(0, 4, len(pool)), categorical=mode).public())
    return views


@pytest.mark.parametrize("transitions", ["none", "any"])
def test_joint_never_keeps_more_than_pairwise(transitions):
    """The joint matching keeps a subset of the pairwise full matching join whenever every release
    publishes the same respondents and the true assignment is a joint one: a joint assignment is
    then perfect, and so is its restriction to each pair (V_i, V_n), a maximum matching of that
    pair, whose edges the pairwise join keeps. The joint natural join keeps a subset of the
    pairwise one on every instance (a clique links its records pairwise)."""
    rng = np.random.default_rng(7 if transitions == "none" else 8)
    strict = 0
    for it in range(600):
        views = consistent_releases(rng, it)
        joint = node_sets(candidates(views, transitions=transitions, join="joint"))
        pairwise = node_sets(candidates(views, transitions=transitions, join="pairwise"))
        assert all(joint[r] <= pairwise[r] for r in joint), it
        strict += any(joint[r] < pairwise[r] for r in joint)
        views = random_releases(rng, it)  # respondents and values may differ
        joint = node_sets(candidates(views, transitions=transitions, pruned=False, join="joint"))
        pairwise = node_sets(candidates(views, transitions=transitions, pruned=False, join="pairwise"))
        assert all(joint[r] <= pairwise[r] for r in joint), it
    if transitions == "none":
        assert strict >= 20, strict  # the joint matching rules out more, not just as much


def test_different_respondents_pairwise_matches_records_of_respondents_not_in_both():
    """Not an over-approximation when the releases publish different respondents: the pairwise
    join matches every record of the two releases, also those of respondents one of them does not
    publish, and can leave a respondent published in both with nothing (the truth ruled out); the
    joint assignment matches the records of the respondents both publish. Release 1: A0 = {9: age
    20, flu}, A1 = {1: age 30, flu}; release 2: B0 = {1, 7 (age 20, hiv)}, B1 = {5: age 30, flu}.
    The only maximum matching of all records is A0:flu-B0:flu, A1:flu-B1:flu: respondent 1 (A1, B0)
    keeps no value pairwise; only respondent 1 is in both releases, and its flu is linked."""
    people = {9: {"age": 20, "disease": "flu"}, 1: {"age": 30, "disease": "flu"},
              7: {"age": 20, "disease": "hiv"}, 5: {"age": 30, "disease": "flu"}}
    schema = Schema((AGE,), SENS)
    v1 = view(1, schema, people, [[9], [1]])
    v2 = view(2, schema, people, [[1, 7], [5]])
    pairwise = candidates([v1, v2], join="pairwise")
    joint = candidates([v1, v2], join="joint")
    assert pairwise.respondent.tolist() == [1, 7, 5]
    assert pairwise.values.tolist() == [0, 2, 1]  # 7 and 5 are in release 2 only: every value of their group
    assert joint.values.tolist() == [1, 2, 1]
    nodes = Nodes.of(v2)
    assert [VALUES[int(nodes.value[x])] for r, x in zip(joint.row.tolist(), joint.node.tolist()) if r == 0] == ["flu"]


# ----------------------------------------------------- the three-release example, both joins
FLU_HIV = {
    1: {"age": 20, "sex": "F", "zip": "47906", "disease": "flu"},
    2: {"age": 40, "sex": "M", "zip": "47906", "disease": "hiv"},
    3: {"age": 50, "sex": "M", "zip": "47907", "disease": "flu"},
}
FLU_HIV_SCHEMAS = (Schema((AGE, SEX), SENS), Schema((SEX, ZIP), SENS), Schema((ZIP, AGE), SENS))
FLU_HIV_GROUPS = ([[1], [2, 3]], [[1, 2], [3]], [[1, 2, 3]])


def flu_hiv_views():
    """test_ksaa_linkage_graph's ``test_three_releases_pairwise_pruning_over_approximates``: A0 =
    {1}: flu, F; A1 = {2, 3}: flu, hiv, M; B0 = {1, 2}: flu, hiv, sex *; B1 = {3}: flu, M; C0 =
    {1, 2, 3}: flu x2, hiv. A0's flu can only be linked to B0's (A0 is F, B1 is M), so in every
    joint assignment B0's flu is respondent 1's and respondent 2 (A1, B0, C0) holds the hiv."""
    return [view(t + 1, s, FLU_HIV, g) for t, (s, g) in enumerate(zip(FLU_HIV_SCHEMAS, FLU_HIV_GROUPS))]


def values_of(c):
    nodes = c.nodes
    return {int(c.respondent[i]): {VALUES[int(nodes.value[x])] for j, x in zip(c.row.tolist(), c.node.tolist()) if j == i}
            for i in range(len(c.respondent))}


def test_three_releases_flu_hiv_under_both_joins():
    views = flu_hiv_views()
    pairwise = candidates(views, join="pairwise")
    joint = candidates(views, join="joint")
    assert values_of(pairwise) == {1: {"flu"}, 2: {"flu", "hiv"}, 3: {"flu"}}
    assert values_of(joint) == {1: {"flu"}, 2: {"hiv"}, 3: {"flu"}}
    assert pairwise.values.tolist() == [1, 2, 1] and pairwise.records.tolist() == [2, 3, 2]
    assert joint.values.tolist() == [1, 1, 1] and joint.records.tolist() == [2, 1, 2]
    # the natural join: no matching; the joint one still needs a clique (no change here)
    assert values_of(candidates(views, pruned=False, join="joint")) == {1: {"flu"}, 2: {"flu", "hiv"}, 3: {"flu"}}
    assert values_of(candidates(views, pruned=False, join="pairwise")) == {1: {"flu"}, 2: {"flu", "hiv"}, 3: {"flu"}}
    # the joint assignments: 3 cliques, A0:flu-B0:flu-C0:flu, A1:flu-B1:flu-C0:flu, A1:hiv-B0:hiv-C0:hiv
    resp = np.asarray(views[-1].respondent, np.int64)
    graph = solve(joint_graph(views, [group_of(v, resp) for v in views], (0, 1, 2)))
    assert graph.size == 3
    n1, n2 = Nodes.of(views[0]), Nodes.of(views[1])
    name = lambda n, x, p: f"{p}{int(n.group[x])}:{VALUES[int(n.value[x])]}"  # noqa: E731
    assert {(name(n1, x, "A"), name(n2, y, "B")) for x, y in graph.kept_pairs(0, 1)} == {
        ("A0:flu", "B0:flu"), ("A1:flu", "B1:flu"), ("A1:hiv", "B0:hiv")}
    # the pairwise join never looks at the (1, 2) pair: there A1:flu-B0:flu is a link, not in any assignment
    assert ("A1:flu", "B0:flu") in {(name(n1, x, "A"), name(n2, y, "B")) for x, y in
                                    zip(linkage_graph(views[0], views[1]).edge_a.tolist(), linkage_graph(views[0], views[1]).edge_b.tolist())}


def flu_hiv_history():
    """The three releases and their publications (the groups of ``flu_hiv_views``)."""
    rels, pubs = [], []
    for t, (schema, groups) in enumerate(zip(FLU_HIV_SCHEMAS, FLU_HIV_GROUPS), start=1):
        ids = sorted(i for g in groups for i in g)
        qi = np.array([[float(q.taxonomy.code()[FLU_HIV[i][q.name]]) if q.kind == "categorical" else float(FLU_HIV[i][q.name])
                        for q in schema.qi] for i in ids])
        sens = np.array([VALUES.index(FLU_HIV[i]["disease"]) for i in ids], dtype=np.int64)
        label = {i: k for k, g in enumerate(groups) for i in g}
        release = Release(t, schema, np.array(ids, dtype=np.int64), qi, sens)
        rels.append(release)
        pubs.append(Publication.from_partition(release, np.array([label[i] for i in ids])))
    return rels, pubs


@pytest.mark.parametrize("model", ["k_diversity", "k_linkability"])
def test_three_releases_flu_hiv_models_under_both_joins(model):
    rels, pubs = flu_hiv_history()
    ctx = ModelContext(rels[2].schema, rels[2].sensitive_distribution(), History(rels[:2], pubs[:2]), rels[2])
    got = {}
    for join in ("joint", "pairwise"):
        judge = default_registry().create("privacy_model", model, {"k": 2, "join": join})
        _, cand, at_risk = judge.linked(pubs[2], ctx)
        got[join] = (cand.values.tolist(), at_risk.tolist())
        assert judge.verify(pubs[2], ctx).violations == 1  # one group: C0
    if model == "k_diversity":
        assert got == {"joint": ([1, 1, 1], [True, True, True]), "pairwise": ([1, 2, 1], [True, False, True])}
    else:  # the natural join: the same either way here
        assert got == {"joint": ([1, 2, 1], [True, False, True]), "pairwise": ([1, 2, 1], [True, False, True])}


def test_three_releases_flu_hiv_attacker_under_both_joins():
    """Respondent 2's posterior: all on hiv through the joint matching; flu and hiv pairwise."""
    rels, pubs = flu_hiv_history()
    views = [p.public() for p in pubs]
    post = {}
    for join in ("joint", "pairwise"):
        attacker = default_registry().create("attacker", "linkage", {"join": join, "estimator": "frequency"})
        result = attacker.observe(views[2], AttackContext(rels[2], list(views), np.random.default_rng(0)))
        post[join] = np.asarray(result.posterior)[list(result.respondent).index(2)]
    flu, hiv = VALUES.index("flu"), VALUES.index("hiv")
    assert post["joint"][hiv] == pytest.approx(1.0) and post["joint"][flu] == 0.0
    assert post["pairwise"][flu] > 0 and post["pairwise"][hiv] > 0


# -------------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("kind, name", [("privacy_model", "k_diversity"), ("privacy_model", "k_linkability"),
                                        ("privacy_model", "j_similarity_join"), ("attacker", "linkage")])
def test_join_parameter(kind, name):
    reg = default_registry()
    assert reg.create(kind, name, {}).params.join == "pairwise"  # the default (README: joint is much slower)
    assert reg.create(kind, name, {"join": "joint"}).params.join == "joint"
    with pytest.raises(ConfigError, match="join"):
        reg.create(kind, name, {"join": "pair"})
    with pytest.raises(ConfigError, match="join"):
        candidates(flu_hiv_views(), join="Joint")
