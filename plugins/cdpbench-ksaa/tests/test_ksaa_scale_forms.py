"""The linear forms of the pairwise join (issue #28, scale) against the former code, kept here as
the oracle: the same numbers bit for bit.

* ``Nodes.of`` counted with one ``bincount`` over ``(group, value)`` (former: ``np.unique``);
* ``candidate_masks`` reading each respondent's mask from a table of the pairs of groups (former:
  every respondent's pair computed);
* ``candidates`` (pairwise join) listing the candidate nodes from the bit masks (former: every node
  of the respondent's group tested through ``_linked``: searches and ``isin`` over every pair);
* ``k_linkability`` / ``k_diversity``'s ``violating_groups`` on the defender's own, unsorted view,
  the earlier groups of the respondents kept between candidates (former: the public view, sorted);
* the ``linkage`` attacker (the candidate-value table of the join, row blocks; former: the
  table scattered from the candidate pairs, whole-table temporaries).

Random small instances (the fixtures of the linkage-graph and joint-matching tests, transitions
none, any and a PD_cor relation) and a realistic case: KSAA's Adult sequential scenario over the
synthetic base, 10^4 respondents, three releases, CELL under k-diversity and the two attackers.
"""

from __future__ import annotations

import sys
from types import MethodType
from pathlib import Path

import numpy as np
import pytest
from cdpbench_ksaa import linkability
from cdpbench_ksaa.attackers.linkage import LinkageAttacker
from cdpbench_ksaa.datasets.adult_sequential import AdultSequential, AdultSequentialParams
from cdpbench_ksaa.linkability import GroupLookup, candidate_masks, candidates, groups_at_risk
from cdpbench_ksaa.linkability_models import LinkabilityModel
from cdpbench_ksaa.linkage_graph import LinkageGraph, Nodes, linkage_graph, prune, segments
from cdpbench_ksaa.transition_relation import TransitionRelation

from cdpbench.data import History, Publication, Release, rows_of
from cdpbench.plugin import AttackContext, AttackResult, ModelContext, PublishContext
from cdpbench.registry import default_registry

sys.path.insert(0, str(Path(__file__).parent))
from test_ksaa_joint_matching import random_releases  # noqa: E402
from test_ksaa_linkage_graph import random_pair  # noqa: E402


# ------------------------------------------------------------------------ the former code (oracle)
def former_nodes_of(view) -> Nodes:
    m = view.schema.sensitive.size
    key, count = np.unique(np.asarray(view.group, np.int64) * m + np.asarray(view.sensitive, np.int64), return_counts=True)
    return Nodes(key // m, key % m, count.astype(np.int64), view.n_groups)


def former_linked(graph: LinkageGraph, group_then: np.ndarray, node: np.ndarray) -> np.ndarray:
    a = graph.a
    n_tb = len(graph.twins_b.count)
    kept = np.unique(graph.cedge_a[graph.ckept] * n_tb + graph.cedge_b[graph.ckept])
    out = np.zeros(len(node), dtype=bool)
    ok = group_then >= 0
    if not ok.any():
        return out
    idx = np.flatnonzero(ok)
    g, x = group_then[idx], node[idx]
    tb = graph.twin_b[x]
    if graph.transitions == "none":
        m = int(max(a.value.max(initial=0), graph.b.value.max(initial=0))) + 1
        key_a = a.group * m + a.value
        want = g * m + graph.b.value[x]
        pos = np.minimum(np.searchsorted(key_a, want), max(len(key_a) - 1, 0))
        has = (key_a[pos] == want) if len(key_a) else np.zeros(len(want), bool)
        out[idx[has]] = np.isin(graph.twin_a[pos[has]] * n_tb + tb[has], kept)
        return out
    ptr = a.ptr
    rep, ya = segments(ptr[g], ptr[g + 1] - ptr[g])
    hit = np.isin(graph.twin_a[ya] * n_tb + tb[rep], kept)
    out[idx[np.unique(rep[hit])]] = True
    return out


def former_candidates(views, transitions="none", pruned=True):
    """The former pairwise ``candidates``: ``(row, node, values, records)``."""
    latest = views[-1]
    nodes = former_nodes_of(latest)
    respondent = np.asarray(latest.respondent, np.int64)
    g_now = np.asarray(latest.group, np.int64)
    ptr = nodes.ptr
    row, node = segments(ptr[g_now], ptr[g_now + 1] - ptr[g_now])
    alive = np.ones(len(row), dtype=bool)
    graphs = []
    for earlier in views[:-1]:
        g = linkage_graph(earlier, latest, transitions)
        graphs.append(prune(g) if pruned else g)
    for earlier, graph in zip(views[:-1], graphs):
        g_then = GroupLookup(earlier)(respondent)
        alive &= former_linked(graph, g_then[row], node) | (g_then[row] < 0)
    row, node = row[alive], node[alive]
    values = np.bincount(row, minlength=len(respondent)).astype(np.int64)
    records = np.bincount(row, weights=nodes.count[node], minlength=len(respondent)).astype(np.int64)
    return row, node, values, records


def former_candidate_masks(views, graphs, lookups=None):
    latest = views[-1]
    respondent = np.asarray(latest.respondent, np.int64)
    g_now = np.asarray(latest.group, np.int64)
    m = max(int(v.schema.sensitive.size) for v in views)
    words = (m + 63) // 64
    b = former_nodes_of(latest) if not graphs else graphs[0].b
    mask = linkability._value_masks(b, words)[g_now]
    if lookups is None:
        lookups = [GroupLookup(v) for v in views[:-1]]
    for lookup, graph in zip(lookups, graphs):
        g_then = lookup(respondent)
        seen = g_then >= 0
        mask[seen] &= linkability._linked_masks(graph, g_then[seen], g_now[seen], words)
    return mask


def former_violating_groups(model: LinkabilityModel, publication: Publication, ctx: ModelContext) -> np.ndarray:
    """The former pairwise ``violating_groups``: public views, per-respondent masks, ``np.unique``."""
    views = [p.public() for p in ctx.history.publications] + [publication.public()]
    t = model._relation(ctx.release, len(views))
    natural_graphs = [linkage_graph(v, views[-1], t) for v in views[:-1]]
    count = lambda gs: np.bitwise_count(former_candidate_masks(views, gs)).sum(axis=1).astype(np.int64)  # noqa: E731
    natural = count(natural_graphs)
    values = count([prune(g) for g in natural_graphs]) if model.pruned else natural
    at_risk = (natural >= 1) & (values < model.params.k)
    return np.unique(np.asarray(views[-1].group)[at_risk])


def former_verify(model: LinkabilityModel, publication: Publication, ctx: ModelContext):
    """The former pairwise ``verify`` on the public views: ``(satisfied, violations, levels)``."""
    views = [p.public() for p in ctx.history.publications] + [publication.public()]
    t = model._relation(ctx.release, len(views))
    natural_graphs = [linkage_graph(v, views[-1], t) for v in views[:-1]]
    natural, records = linkability.candidate_counts(views, natural_graphs)
    values = natural
    if model.pruned:
        values, records = linkability.candidate_counts(views, [prune(g) for g in natural_graphs])
    at_risk = (natural >= 1) & (values < model.params.k)
    groups = np.unique(np.asarray(views[-1].group)[at_risk])
    placed = values > 0
    levels = {
        "linkable_values": float(values[placed].min()) if placed.any() else 0.0,
        "linkable_records": float(records[placed].min()) if placed.any() else 0.0,
        "unplaced": float((~placed).sum()),
    }
    return len(groups) == 0, int(len(groups)), levels


def former_observe(self, view, ctx):
    """The former ``LinkageAttacker.observe`` (its candidates through the former pairwise join)."""
    p = self.params
    m = view.schema.sensitive.size
    respondent = np.asarray(view.respondent, np.int64)
    pop = ctx.population
    rows, found = rows_of(pop.respondent, respondent, match_negative=True)
    rows = rows[found]
    known = Release(view.t, pop.schema, respondent[found], pop.qi[rows], np.zeros(len(rows), np.int64), truth=pop.truth)
    prior = np.full((len(respondent), m), 1.0 / m)
    prior[found] = self.knowledge.prior(known)
    row, node, values, records = former_candidates(ctx.views, self._relation(pop, len(ctx.views)), p.pruned)
    nodes = former_nodes_of(ctx.views[-1])
    allowed = np.zeros((len(respondent), m), dtype=bool)
    allowed[row, nodes.value[node]] = True
    some = allowed.any(axis=1)
    weights = np.where(allowed | ~some[:, None], prior, 0.0)
    posterior = np.asarray(self.estimator.posterior(weights, view.sensitive, view.group, view.n_groups, m), dtype=float)
    kept = np.where(allowed, posterior, 0.0)
    mass = kept.sum(axis=1, keepdims=True)
    posterior = np.where(some[:, None] & (mass > 0), kept / np.where(mass > 0, mass, 1.0), posterior)
    self.knowledge.revise(view, posterior, np.where(found, respondent, -1))
    extra = {
        "linkable_values_min": float(values.min()) if len(values) else 0.0,
        "linkable_values_mean": float(values.mean()) if len(values) else 0.0,
        "linkable_records_min": float(records.min()) if len(records) else 0.0,
        "linkable_records_mean": float(records.mean()) if len(records) else 0.0,
    }
    return AttackResult(respondent=respondent.copy(), posterior=posterior, extra=extra)


def former_attacker(params: dict) -> LinkageAttacker:
    attacker = default_registry().create("attacker", "linkage", params)
    attacker.observe = MethodType(former_observe, attacker)
    return attacker


# ------------------------------------------------------------------------------ random instances
def random_table(rng, m):
    t = rng.random((m, m)) * (rng.random((m, m)) > 0.3)
    t[np.arange(m), np.arange(m)] += 0.1
    return t / t.sum(axis=1, keepdims=True)


def instances(seed: int, count: int):
    """``(views, transitions)``: two-view pairs and 3-4-view instances, transitions none, any and
    a PD_cor relation in turn."""
    rng = np.random.default_rng(seed)
    for it in range(count):
        views = list(random_pair(rng, it)) if it % 2 == 0 else random_releases(rng, it)
        kind = it % 3
        if kind == 0:
            yield views, "none"
        elif kind == 1:
            yield views, "any"
        else:
            tables = np.stack([random_table(rng, 3) for _ in range(max(len(views) - 1, 1))])
            yield views, TransitionRelation("knowledge", tables, float(rng.choice([0.0, 0.2])))


def test_nodes_counted_over_the_keys_are_the_unique_keys():
    checked = 0
    for views, _ in instances(3, 120):
        for v in views:
            new, old = Nodes.of(v), former_nodes_of(v)
            for f in ("group", "value", "count"):
                assert np.array_equal(getattr(new, f), getattr(old, f)) and getattr(new, f).dtype == np.int64
            assert new.n_groups == old.n_groups
            checked += 1
    # the sort fallback: a key range far larger than the records
    rng = np.random.default_rng(4)
    group, value = rng.integers(0, 10**6, 50), rng.integers(0, 7, 50)
    a = Nodes.of_pairs(group, value, 10**6, 7)
    key, count = np.unique(group * 7 + value, return_counts=True)
    assert np.array_equal(a.group * 7 + a.value, key) and np.array_equal(a.count, count)
    assert checked > 300


@pytest.mark.parametrize("floor", [linkability.PAIR_TABLE_FLOOR, 0])
def test_candidate_masks_equal_the_per_respondent_masks(floor, monkeypatch):
    """The pair table (default floor) and the per-respondent fallback (floor 0, tables larger
    than the respondents) both equal the former masks, natural and pruned graphs."""
    monkeypatch.setattr(linkability, "PAIR_TABLE_FLOOR", floor)
    checked = nonzero = 0
    for views, transitions in instances(5, 240):
        if len(views) < 2:
            continue
        natural = [linkage_graph(v, views[-1], transitions) for v in views[:-1]]
        for graphs in (natural, [prune(g) for g in natural]):
            new, old = candidate_masks(views, graphs), former_candidate_masks(views, graphs)
            assert new.dtype == old.dtype == np.uint64 and np.array_equal(new, old)
            nonzero += int(new.any())
            checked += 1
    assert checked == 480 and nonzero > 300


def test_candidates_from_the_masks_equal_the_former_pairwise_join():
    checked = differ = 0
    for views, transitions in instances(9, 300):
        for pruned in (True, False):
            c = candidates(views, transitions=transitions, pruned=pruned)
            row, node, values, records = former_candidates(views, transitions, pruned)
            assert np.array_equal(c.row, row) and np.array_equal(c.node, node)
            assert np.array_equal(c.values, values) and np.array_equal(c.records, records)
            if c.allowed is not None:
                table = np.zeros(c.allowed.shape, bool)
                table[row, c.nodes.value[node]] = True
                assert np.array_equal(c.allowed, table)
            checked += 1
        # the join rules something out on some instances (the comparison is not all-pass)
        ptr = former_nodes_of(views[-1]).ptr
        g_now = np.asarray(views[-1].group, np.int64)
        differ += int(len(row) < int((ptr[g_now + 1] - ptr[g_now]).sum()))
    assert checked == 600 and differ > 20


def test_groups_at_risk_counted_per_combination_equal_the_per_respondent_counts():
    """Random instances, k = 1..3, the natural join against itself and against the pruned one."""
    checked = risky = 0
    for views, transitions in instances(17, 240):
        if len(views) < 2:
            continue
        resp = np.asarray(views[-1].respondent, np.int64)
        groups_then = [GroupLookup(v)(resp) for v in views[:-1]]
        natural = [linkage_graph(v, views[-1], transitions) for v in views[:-1]]
        count = lambda gs: np.bitwise_count(former_candidate_masks(views, gs)).sum(axis=1)  # noqa: E731
        for graphs in (natural, [prune(g) for g in natural]):
            for k in (1, 2, 3):
                new = groups_at_risk(views, natural, graphs, k, groups_then)
                at_risk = (count(natural) >= 1) & (count(graphs) < k)
                old = np.unique(np.asarray(views[-1].group)[at_risk])
                assert new is not None and new.dtype == old.dtype and np.array_equal(new, old)
                risky += int(len(old) > 0)
                checked += 1
    assert checked == 1440 and risky > 200


# ------------------------------------------------------------------ the realistic case, 10^4
def realistic(records: int = 10_000):
    """KSAA's Adult sequential scenario over the synthetic base: its three releases (three QI sets)."""
    params = AdultSequentialParams(base="synthetic", records=records, releases=3)
    return list(AdultSequential(params).releases(np.random.default_rng(0)))


def candidate_publications(release: Release, rng) -> list[Publication]:
    """Publications of ``release`` a top-down run may ask about: the groups of one to all of its
    QIs' exact values, and random partitions."""
    out = []
    qi = release.qi
    for d in range(1, qi.shape[1] + 1):
        _, label = np.unique(qi[:, :d], axis=0, return_inverse=True)
        out.append(Publication.from_partition(release, np.asarray(label).ravel()))
    for groups in (3, 40):
        out.append(Publication.from_partition(release, rng.integers(0, groups, len(release))))
    return out


@pytest.fixture(scope="module")
def realistic_run():
    """CELL under k-diversity (k = 4) over the three releases, with the history of each."""
    reg = default_registry()
    rels = realistic()
    model = reg.create("privacy_model", "k_diversity", {"k": 4})
    anon = reg.create("anonymizer", "cell", {})
    history, steps = History(), []
    for release in rels:
        mctx = ModelContext(release.schema, release.sensitive_distribution(), history, release)
        pub = anon.publish(release, PublishContext(model, mctx, History(list(history.releases), list(history.publications)),
                                                   np.random.default_rng(0)))
        steps.append((release, History(list(history.releases), list(history.publications)), pub))
        history.releases.append(release)
        history.publications.append(pub)
    return steps


@pytest.mark.parametrize("floor", [linkability.PAIR_TABLE_FLOOR, 0])
@pytest.mark.parametrize("name", ["k_diversity", "k_linkability"])
def test_violating_groups_equal_the_former_on_the_realistic_case(realistic_run, name, floor, monkeypatch):
    """Per combination of groups (default) and, floor 0, the per-respondent masks where the
    combinations outnumber the respondents."""
    monkeypatch.setattr(linkability, "PAIR_TABLE_FLOOR", floor)
    reg = default_registry()
    model = reg.create("privacy_model", name, {"k": 4})
    rng = np.random.default_rng(1)
    checked = violating = 0
    for release, history, pub in realistic_run[1:]:
        ctx = ModelContext(release.schema, release.sensitive_distribution(), history, release)
        for cand in [pub, *candidate_publications(release, rng)]:  # one model: its kept groups reused between candidates
            new = model.violating_groups(cand, ctx)
            old = former_violating_groups(model, cand, ctx)
            assert new.dtype == old.dtype and np.array_equal(new, old)
            assert model.accepts_publication(cand, ctx) == (len(old) == 0)
            report = model.verify(cand, ctx)
            assert (report.satisfied, report.violations, report.levels) == former_verify(model, cand, ctx)
            violating += int(len(old) > 0)
            checked += 1
    assert checked == 2 * 6 and violating >= 3


def test_cell_publishes_the_same_release_with_the_former_model(realistic_run):
    """Release 3 of the realistic case: CELL's publication with the former check is the same."""
    release, history, pub = realistic_run[2]
    model = default_registry().create("privacy_model", "k_diversity", {"k": 4})
    model.violating_groups = MethodType(former_violating_groups, model)
    anon = default_registry().create("anonymizer", "cell", {})
    mctx = ModelContext(release.schema, release.sensitive_distribution(), history, release)
    old = anon.publish(release, PublishContext(model, mctx, history, np.random.default_rng(0)))
    assert old.info == pub.info and old.info["validity_checks"] > 3
    for f in ("group", "sensitive", "respondent", "row", "low", "high", "suppressed"):
        assert np.array_equal(getattr(old, f), getattr(pub, f)), f
    assert all(np.array_equal(old.value_sets[j], pub.value_sets[j]) for j in pub.value_sets)


@pytest.mark.parametrize("pruned", [True, False])
def test_linkage_attacker_posteriors_equal_the_former_bit_for_bit(realistic_run, pruned):
    reg = default_registry()
    new = reg.create("attacker", "linkage", {"pruned": pruned})
    old = former_attacker({"pruned": pruned})
    views = []
    ruled_out = 0
    for release, _, pub in realistic_run:
        views.append(pub.public())
        a = new.observe(views[-1], AttackContext(release, list(views), np.random.default_rng(3)))
        b = old.observe(views[-1], AttackContext(release, list(views), np.random.default_rng(3)))
        assert np.array_equal(a.respondent, b.respondent)
        assert a.posterior.dtype == b.posterior.dtype and np.array_equal(a.posterior, b.posterior)
        assert a.extra == b.extra
        ruled_out += int(a.extra["linkable_values_mean"] < 14)
    assert ruled_out >= 1


def test_linkage_attacker_posteriors_equal_the_former_on_small_instances():
    """Random small instances (views as populations' releases), every transitions kind."""
    reg = default_registry()
    checked = 0
    for views, transitions in instances(13, 90):
        if isinstance(transitions, TransitionRelation):
            continue
        latest = views[-1]
        pop = Release(latest.t, latest.schema, np.asarray(latest.respondent, np.int64),
                      np.zeros((len(latest.respondent), len(latest.schema.qi))),
                      np.zeros(len(latest.respondent), np.int64))
        for pruned in (True, False):
            for estimator in ("bayesian", "frequency"):
                kw = {"pruned": pruned, "transitions": transitions}
                new = reg.create("attacker", "linkage", {**kw, "estimator": estimator})
                old = former_attacker({**kw, "estimator": estimator})
                a = new.observe(latest, AttackContext(pop, list(views), np.random.default_rng(1)))
                b = old.observe(latest, AttackContext(pop, list(views), np.random.default_rng(1)))
                assert np.array_equal(a.posterior, b.posterior) and a.extra == b.extra
                checked += 1
    assert checked == 240
