"""The KSAA plugin's anonymizers (``ksaa``, ``cell``, ``tds4asr``) against its privacy models
(``k_linkability``, ``k_diversity``) on random small sequential scenarios, plus the linkage
attacker and parameter validation.

Every release loop here is run by hand, as the core's runner does: for each release a
``ModelContext`` over the history so far, ``publish``, ``verify``, then the release and its
publication are appended to the history.

Honest exceptions to "every output satisfies its model" (test 1):

* when even the most general table (one group holding the whole release) fails the model against
  the history, no anonymizer can help: such a (configuration, release) is skipped and counted;
  skips must stay a minority;
* ``tds4asr`` joins with the previous release only, by design: its outputs are verified with a
  history holding only the previous release. How often the whole-history verifier still finds
  violations on its outputs in 3-release scenarios is recorded (printed), not asserted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from itertools import product

import numpy as np
import pytest
from cdpbench_ksaa.linkability import candidates
from cdpbench_ksaa.linkability_models import LinkabilityParams
from cdpbench_ksaa.datasets.adult_sequential import AdultSequential, AdultSequentialParams

from cdpbench.data import History, Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import AttackContext, ModelContext, PublishContext
from cdpbench.registry import default_registry

CATEGORICAL = ["sex", "race", "education", "marital-status", "workclass", "relationship"]
ANONYMIZERS = ("ksaa", "cell", "tds4asr")
# ksaa's base as the presets set it (preset ksaa/anonymizer/ksaa): js_reduce, leftovers merged
KSAA = {"base": {"name": "js_reduce", "leftovers": "merge"}}
ANONYMIZER_PARAMS = {"ksaa": KSAA, "cell": {}, "tds4asr": {}}
MODELS = ("k_linkability", "k_diversity")
KS = (2, 3, 4)
TRANSITIONS = ("none", "any")
# (update_rate, releases) per scenario seed; records and QI sets are drawn at random from the seed
SCENARIO_SHAPES = [(0.0, 2), (0.1, 2), (0.0, 3), (0.1, 3), (0.0, 3), (0.1, 3)]


def reg():
    return default_registry()


@cache
def scenario(seed: int) -> tuple[tuple[Release, ...], AdultSequentialParams]:
    """A random small sequential scenario: 150..600 records, 2..3 releases, 2..3 categorical QIs
    per release (each release its own set), update rate 0 or 0.1."""
    rng = np.random.default_rng(1000 + seed)
    update_rate, releases = SCENARIO_SHAPES[seed]
    records = int(rng.integers(150, 601))
    qi_sets = [[str(q) for q in rng.choice(CATEGORICAL, size=int(rng.integers(2, 4)), replace=False)] for _ in range(releases)]
    params = AdultSequentialParams(records=records, releases=releases, qi_sets=qi_sets, update_rate=update_rate)
    rels = tuple(AdultSequential(params).releases(np.random.default_rng(seed)))
    assert len(rels) == releases and all(len(r) == records for r in rels)
    return rels, params


def context(release: Release, history: History) -> ModelContext:
    return ModelContext(release.schema, release.sensitive_distribution(), history, release)


def previous_only(history: History) -> History:
    return History(history.releases[-1:], history.publications[-1:])


def one_group(release: Release) -> Publication:
    return Publication.from_partition(release, np.zeros(len(release), dtype=np.int64))


@dataclass
class Step:
    """One release of one configuration's loop."""

    t: int
    publication: Publication
    own_violations: int  # the run's model, with the history the anonymizer is meant to honour
    general_violations: int  # the one-group table under the same model and history
    full_violations: dict[str, int] = field(default_factory=dict)  # both models, whole history


@cache
def run(seed: int, anonymizer: str, model_name: str, k: int, transitions: str) -> tuple[Step, ...]:
    """The release loop by hand; each output is also verified under both models (same k and
    transitions) against the whole history."""
    rels, _ = scenario(seed)
    r = reg()
    model = r.create("privacy_model", model_name, {"k": k, "transitions": transitions})
    judges = {name: r.create("privacy_model", name, {"k": k, "transitions": transitions}) for name in MODELS}
    anon = r.create("anonymizer", anonymizer, ANONYMIZER_PARAMS[anonymizer])
    history = History()
    steps = []
    for release in rels:
        mctx = context(release, history)
        pub = anon.publish(release, PublishContext(model, mctx, history, np.random.default_rng(0)))
        own_ctx = context(release, previous_only(history)) if anonymizer == "tds4asr" else mctx
        own = model.verify(pub, own_ctx)
        assert own.satisfied == (own.violations == 0)
        general = model.verify(one_group(release), own_ctx)
        full = {name: judge.verify(pub, mctx).violations for name, judge in judges.items()}
        steps.append(Step(release.t, pub, own.violations, general.violations, full))
        history.releases.append(release)
        history.publications.append(pub)
    return tuple(steps)


CONFIGS = list(product(range(len(SCENARIO_SHAPES)), ANONYMIZERS, MODELS, KS, TRANSITIONS))


# ---------------------------------------------------------------------------- 1. acceptance
def test_every_output_satisfies_its_model_unless_even_the_most_general_table_cannot():
    checked = skipped = 0
    failures = []
    skips = []
    tds4asr_full_bad = tds4asr_full_total = 0
    for cfg in CONFIGS:
        seed, anonymizer, model_name, _, _ = cfg
        _, params = scenario(seed)
        for step in run(*cfg):
            if step.general_violations > 0:
                skipped += 1
                skips.append((cfg, step.t, step.general_violations))
                continue
            checked += 1
            if step.own_violations != 0:
                failures.append((cfg, step.t, step.own_violations, params))
        if anonymizer == "tds4asr" and params.releases == 3:
            step3 = run(*cfg)[2]
            tds4asr_full_total += 1
            tds4asr_full_bad += step3.full_violations[model_name] > 0
    print(f"\nacceptance: {checked} (configuration, release) pairs checked, {skipped} skipped "
          f"(the one-group table fails too): {skips}")
    # tds4asr by design ignores releases before the previous one: recorded, not asserted
    print(f"tds4asr: the whole-history verifier finds violations at release 3 in {tds4asr_full_bad} "
          f"of {tds4asr_full_total} 3-release configurations")
    assert not failures, failures[:5]
    assert checked > 0 and skipped < checked, (checked, skipped)


def test_the_acceptance_check_is_not_vacuous():
    """The loop really meets the history: ksaa merges groups somewhere, and publishing js_reduce's
    primary groups alone (what ksaa starts from) breaks the join somewhere."""
    merges = sum(step.publication.info["merge_rounds"] > 0 for cfg in CONFIGS if cfg[1] == "ksaa" for step in run(*cfg))
    assert merges > 0
    r = reg()
    broken = 0
    for seed in range(len(SCENARIO_SHAPES)):
        model = r.create("privacy_model", "k_diversity", {"k": 3, "transitions": "none"})
        base = r.create("anonymizer", "js_reduce", {"leftovers": "merge"})
        history = History()
        for release in scenario(seed)[0]:
            mctx = context(release, history)
            pub = base.publish(release, PublishContext(model, mctx, history, np.random.default_rng(0)))
            broken += model.verify(pub, mctx).violations > 0
            history.releases.append(release)
            history.publications.append(pub)
    assert broken > 0


# ---------------------------------------------------------------------------- 2. k_diversity is the stricter
def test_k_diversity_counts_at_least_as_many_violating_groups_as_k_linkability():
    worse = []
    compared = 0
    for cfg in CONFIGS:
        for step in run(*cfg):
            compared += 1
            if step.full_violations["k_diversity"] < step.full_violations["k_linkability"]:
                worse.append((cfg, step.t, step.full_violations))
    assert compared > 0
    assert not worse, worse[:5]


def test_k_diversity_is_at_least_as_strict_on_a_four_record_update():
    """The smallest instance a random search found (4 records, 2 releases, k = 2, transitions
    "none"). Release 1 publishes race; groups {1: White/Exec-managerial, 3: Black/Handlers-cleaners}
    and {0: White/Adm-clerical, 2: White/Handlers-cleaners}. Before release 2 respondent 1's value
    is updated to Craft-repair; release 2 publishes sex, race in groups {3} and {0, 1, 2}.
    The natural join links respondent 1 to Handlers-cleaners only (1 value: at risk, so
    k_linkability counts 2 groups); the full matching join drops that edge (it lies on no maximum
    matching), respondent 1 is linked to nothing, "unplaced", not counted: k_diversity counts 1."""
    base = list(AdultSequential(AdultSequentialParams(records=4, releases=2, qi_sets=[["race"], ["sex", "race"]],
                                                      update_rate=0.0)).releases(np.random.default_rng(0)))
    r1, r2 = base
    values = list(r1.schema.sensitive.values)
    names = ["Adm-clerical", "Exec-managerial", "Handlers-cleaners", "Handlers-cleaners"]
    assert [values[v] for v in r1.sensitive] == names  # the first 4 Adult rows
    assert list(r1.to_frame()["race"]) == ["White", "White", "White", "Black"]
    sens2 = r2.sensitive.copy()
    sens2[1] = values.index("Craft-repair")
    r2 = Release(r2.t, r2.schema, r2.respondent, r2.qi, sens2, truth={"updated": np.array([1])})
    p1 = Publication.from_partition(r1, np.array([1, 0, 1, 0]), categorical="set")
    p2 = Publication.from_partition(r2, np.array([1, 1, 1, 0]), categorical="set")
    ctx = context(r2, History([r1], [p1]))
    kl = reg().create("privacy_model", "k_linkability", {"k": 2, "transitions": "none"}).verify(p2, ctx)
    kd = reg().create("privacy_model", "k_diversity", {"k": 2, "transitions": "none"}).verify(p2, ctx)
    assert kd.violations >= kl.violations, (kl, kd)


def test_pruned_join_links_each_respondent_to_no_more_values_than_the_natural_join():
    """The per-respondent fact behind test 2 (candidate values under the full matching join are
    a subset of those under the natural join), on every publication of the 3-release ksaa runs."""
    for seed, transitions in product((2, 3), TRANSITIONS):
        steps = run(seed, "ksaa", "k_diversity", 3, transitions)
        views = [s.publication.public() for s in steps]
        for t in range(2, len(views) + 1):
            nat = candidates(views[:t], transitions=transitions, pruned=False)
            fmj = candidates(views[:t], transitions=transitions, pruned=True)
            assert np.array_equal(nat.respondent, fmj.respondent)
            assert np.all(fmj.values <= nat.values)
            m = views[0].schema.sensitive.size
            a = set((nat.row * m + nat.nodes.value[nat.node]).tolist())
            b = set((fmj.row * m + fmj.nodes.value[fmj.node]).tolist())
            assert b <= a


# ---------------------------------------------------------------------------- 3. ksaa = base at release 1
def partition(pub: Publication) -> set[frozenset[int]]:
    real = ~pub.counterfeit
    groups: dict[int, set[int]] = {}
    for g, r in zip(pub.group[real].tolist(), pub.respondent[real].tolist()):
        groups.setdefault(g, set()).add(r)
    return {frozenset(s) for s in groups.values()}


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("model_name,k,transitions", [("k_linkability", 2, "none"), ("k_diversity", 3, "any"), ("k_diversity", 4, "none")])
def test_ksaa_without_history_publishes_its_base_groups(seed, model_name, k, transitions):
    rels, _ = scenario(seed)
    release = rels[0]
    r = reg()
    model = r.create("privacy_model", model_name, {"k": k, "transitions": transitions})
    outs = {}
    for name, params in (("ksaa", KSAA), ("js_reduce", {"leftovers": "merge"})):
        anon = r.create("anonymizer", name, params)
        history = History()
        outs[name] = anon.publish(release, PublishContext(model, context(release, history), history, np.random.default_rng(0)))
    ksaa, base = outs["ksaa"], outs["js_reduce"]
    assert ksaa.info["merge_rounds"] == 0 and ksaa.info["merged_groups"] == 0
    assert ksaa.n_groups == base.n_groups > 1
    assert partition(ksaa) == partition(base)
    assert set(ksaa.suppressed.tolist()) == set(base.suppressed.tolist())
    # same groups, same boxes (match groups through their smallest respondent)
    key = lambda p: {int(p.respondent[p.group == g].min()): g for g in range(p.n_groups)}
    kk, kb = key(ksaa), key(base)
    for rid, g in kk.items():
        assert np.array_equal(ksaa.low[g], base.low[kb[rid]]) and np.array_equal(ksaa.high[g], base.high[kb[rid]])


# ---------------------------------------------------------------------------- 4. global recoding
def global_recoding_violations(pub: Publication) -> list[tuple[int, int, int]]:
    """``(column, group a, group b)`` for every pair of groups whose published value sets of a
    categorical column overlap without being equal."""
    out = []
    for j, sets in pub.value_sets.items():
        s = np.asarray(sets, dtype=np.int64)
        overlap = (s @ s.T) > 0
        equal = (s[:, None, :] == s[None, :, :]).all(axis=2)
        for a, b in zip(*np.nonzero(overlap & ~equal)):
            if a < b:
                out.append((j, int(a), int(b)))
    return out


def test_global_recoding_check_detects_local_recoding():
    rels, _ = scenario(0)
    release = rels[0]
    j = 0
    codes = release.qi[:, j].astype(np.int64)
    # two groups: one of the records whose first QI is the smallest leaf, one of all records
    small = codes == codes.min()
    labels = np.where(small, 0, 1)
    labels[np.flatnonzero(small)[: max(1, small.sum() // 2)]] = 1  # group 1 now spans both values
    pub = Publication.from_partition(release, labels, categorical="set")
    assert global_recoding_violations(pub)


@pytest.mark.parametrize("anonymizer", ["cell", "tds4asr"])
def test_top_down_baselines_publish_global_recodings(anonymizer):
    multi = 0
    for cfg in CONFIGS:
        if cfg[1] != anonymizer:
            continue
        for step in run(*cfg):
            pub = step.publication
            multi += pub.n_groups > 1
            assert not global_recoding_violations(pub), (cfg, step.t)
    assert multi > 0  # the property is exercised on publications with several groups


# ---------------------------------------------------------------------------- 5. linkage attacker
def attack_run(estimator: str, seed: int = 2, anonymizer: str = "ksaa", k: int = 3):
    """ksaa under k_diversity, transitions none, update rate 0; the linkage attacker observes
    every release. Yields (release, views so far, result, candidates of the latest view)."""
    rels, params = scenario(seed)
    assert params.update_rate == 0.0 and params.releases == 3
    r = reg()
    model = r.create("privacy_model", "k_diversity", {"k": k, "transitions": "none"})
    anon = r.create("anonymizer", anonymizer, ANONYMIZER_PARAMS[anonymizer])
    attacker = r.create("attacker", "linkage", {"transitions": "none", "estimator": estimator})
    history, views, out = History(), [], []
    rng = np.random.default_rng(5)
    for release in rels:
        mctx = context(release, history)
        pub = anon.publish(release, PublishContext(model, mctx, history, np.random.default_rng(0)))
        view = pub.public()
        views.append(view)
        result = attacker.observe(view, AttackContext(release, list(views), rng))
        out.append((release, pub, view, result,
                    candidates(list(views), transitions="none", pruned=True, join=attacker.params.join)))
        history.releases.append(release)
        history.publications.append(pub)
    return out


@pytest.mark.parametrize("estimator", ["frequency", "omega", "bayesian"])
def test_linkage_attacker_posteriors_are_distributions_over_the_view(estimator):
    for release, pub, view, result, _ in attack_run(estimator):
        m = release.n_values
        assert np.array_equal(result.respondent, view.respondent)
        P = np.asarray(result.posterior)
        assert P.shape == (len(view.respondent), m)
        assert np.all(P >= -1e-12)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-9)
        # mass only on values published in the respondent's group
        present = pub.group_counts()[np.asarray(view.group)] > 0
        assert np.all(P[~present] <= 1e-12)


@pytest.mark.parametrize("estimator", ["frequency", "omega"])
def test_linkage_attacker_posterior_is_zero_outside_the_candidate_values(estimator):
    """Release >= 2, transitions none, no updates: every respondent's true value survives the join,
    so it has candidate values, and the posterior must put no mass on any other value."""
    narrowed = 0
    for release, pub, view, result, cand in attack_run(estimator)[1:]:
        m = release.n_values
        allowed = np.zeros((len(view.respondent), m), dtype=bool)
        allowed[cand.row, cand.nodes.value[cand.node]] = True
        assert allowed.any(axis=1).all()  # no updates: nobody is unplaced
        present = pub.group_counts()[np.asarray(view.group)] > 0
        narrowed += int((allowed.sum(axis=1) < present.sum(axis=1)).sum())
        P = np.asarray(result.posterior)
        outside = P[~allowed]
        bad_rows = np.unique(np.nonzero((P > 1e-12) & ~allowed)[0])
        assert np.all(outside <= 1e-12), (
            f"release {release.t}: {len(bad_rows)} of {len(P)} respondents have posterior mass "
            f"outside their candidate values (max {outside.max():.3g}); e.g. respondent "
            f"{int(view.respondent[bad_rows[0]])}: candidates {np.flatnonzero(allowed[bad_rows[0]]).tolist()}, "
            f"posterior support {np.flatnonzero(P[bad_rows[0]] > 1e-12).tolist()}"
        )
    assert narrowed > 0  # the join did rule values out, so the check has teeth


# ---------------------------------------------------------------------------- 6. bad parameters
@pytest.mark.parametrize(
    "make,field_name",
    [
        (lambda: LinkabilityParams(k=0), "k"),
        (lambda: LinkabilityParams(transitions="some"), "transitions"),
        (lambda: AdultSequentialParams(records=0), "records"),
        (lambda: AdultSequentialParams(update_rate=1.5), "update_rate"),
        (lambda: AdultSequentialParams(qi_sets=[["occupation"]]), "qi_sets"),
        (lambda: reg().create("privacy_model", "k_linkability", {"k": 0}), "privacy_model.k"),
        (lambda: reg().create("privacy_model", "k_diversity", {"transitions": "some"}), "privacy_model.transitions"),
        (lambda: reg().create("dataset", "adult_sequential", {"records": 0}), "dataset.records"),
        (lambda: reg().create("dataset", "adult_sequential", {"update_rate": 1.5}), "dataset.update_rate"),
        (lambda: reg().create("dataset", "adult_sequential", {"qi_sets": [["occupation"]]}), "dataset.qi_sets"),
    ],
)
def test_bad_params_raise_config_error_naming_the_field(make, field_name):
    with pytest.raises(ConfigError) as e:
        make()
    msg = str(e.value)
    assert msg.startswith(field_name), msg
    if "qi_sets" in field_name:
        assert "occupation" in msg and "sensitive" in msg, msg


# ---------------------------------------------------------------------------- 7. plugin references
def test_references_default_to_the_plugins_the_package_used_by_name():
    """``ksaa.base``, ``cell.tds``, ``tds4asr.tds``, ``linkage.knowledge`` / ``.estimator`` and
    ``bkseq_sequential.bkseq`` are built by the registry with the referenced plugin's defaults."""
    r = reg()
    ksaa = r.create("anonymizer", "ksaa")
    assert ksaa.base is ksaa.params.base and ksaa.base.plugin_name == "js_reduce"
    assert ksaa.base.params.leftovers == "suppress"  # js_reduce's own default: the presets set merge
    assert r.create("anonymizer", "ksaa", KSAA).base.params.leftovers == "merge"
    for name in ("cell", "tds4asr"):
        a = r.create("anonymizer", name)
        assert a.tds is a.params.tds and a.tds.plugin_name == "tds"
    attacker = r.create("attacker", "linkage")
    assert (attacker.knowledge.plugin_name, attacker.estimator.plugin_name) == ("uniform", "bayesian")
    tuned = r.create("attacker", "linkage", {"estimator": {"name": "bayesian", "a": 2.0}, "knowledge": "kernel"})
    assert tuned.estimator.params.a == 2.0 and tuned.knowledge.plugin_name == "kernel"
    data = r.create("dataset", "bkseq_sequential", {"bkseq": {"releases": 6}})
    bk = data.params.bkseq
    assert bk.plugin_name == "bkseq" and (bk.params.releases, bk.params.tuples, bk.params.presence) == (6, 5000, 0.5)


def test_bkseq_sequential_publishes_the_referenced_views_with_the_late_qis_from_release_2_on():
    data = reg().create("dataset", "bkseq_sequential", {"bkseq": {"releases": 3, "tuples": 300}})
    same = reg().create("dataset", "bkseq", {"releases": 3, "tuples": 300})
    for mine, theirs in zip(data.releases(np.random.default_rng(4)), same.releases(np.random.default_rng(4)), strict=True):
        names = [q.name for q in mine.schema.qi]
        assert names == (["age", "gender"] if mine.t == 1 else ["age", "gender", "weight"])
        keep = [j for j, q in enumerate(theirs.schema.qi) if q.name in names]
        np.testing.assert_array_equal(mine.qi, theirs.qi[:, keep])
        np.testing.assert_array_equal(mine.respondent, theirs.respondent)
        np.testing.assert_array_equal(mine.sensitive, theirs.sensitive)


@pytest.mark.parametrize(
    "kind,name,values,message",
    [
        ("anonymizer", "ksaa", {"base": "nope"}, r"^anonymizer\.base: unknown anonymizer 'nope'; installed: "),
        ("anonymizer", "ksaa", {"base": {"leftovers": "keep"}}, r"^anonymizer\.base\.leftovers must be 'suppress' or 'merge'"),
        ("anonymizer", "ksaa", {"base_params": {"leftovers": "merge"}}, r"^anonymizer\.base_params is not a parameter of anonymizer 'ksaa'"),
        ("anonymizer", "cell", {"tds": {"k": 3}}, r"^anonymizer\.tds\.k is not a parameter of anonymizer 'tds'"),
        ("attacker", "linkage", {"estimator": {"name": "bayesian", "a": 0}}, r"^attacker\.estimator\.a must be a finite number > 0"),
        ("attacker", "linkage", {"knowledge": "nope"}, r"^attacker\.knowledge: unknown knowledge 'nope'; installed: "),
        ("dataset", "bkseq_sequential", {"releases": 6}, r"^dataset\.releases is not a parameter of dataset 'bkseq_sequential'"),
        ("dataset", "bkseq_sequential", {"bkseq": {"releases": 0}}, r"^dataset\.bkseq\.releases must be"),
    ],
)
def test_bad_reference_params_are_one_line_naming_the_nested_path(kind, name, values, message):
    with pytest.raises(ConfigError, match=message) as e:
        reg().create(kind, name, values)
    assert "\n" not in str(e.value)


def test_plugins_with_references_are_built_by_the_registry():
    from cdpbench_ksaa.anonymizers.ksaa import KSAA, KSAAParams

    with pytest.raises(TypeError, match="params.base is 'js_reduce', not a plugin"):
        KSAA(KSAAParams())
