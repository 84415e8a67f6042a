"""BayFrame's adversary: RPD + Bayesian estimator, compromised records and both cascading methods."""

import re

import numpy as np
import pytest

from cdpbench.data import History, Publication
from cdpbench.errors import ConfigError
from cdpbench.metrics.belief import BeliefMetrics
from cdpbench.plugin import AttackContext, MetricContext
from cdpbench.registry import default_registry
from cdpbench_bayframe.attackers.bayframe import BayFrameAttacker, BayFrameAttackerParams
from cdpbench_bayframe.compromise import compromise_draw
from cdpbench_bayframe.estimators.bayesian import BayesianEstimator, bayesian_posterior
from cdpbench_bayframe.knowledge.bayframe import BayFrameKnowledge


def adversary(**values):
    """The bayframe attacker, built by the registry (its knowledge and estimator references too)."""
    return default_registry().create("attacker", "bayframe", values)


def bayframe_knowledge(**values):
    return default_registry().create("knowledge", "bayframe", values)


@pytest.fixture(scope="module")
def releases():
    """Three bkseq releases of about 600 tuples."""
    ds = default_registry().create("dataset", "bkseq", {"releases": 3, "tuples": 600})
    return list(ds.releases(np.random.default_rng(5)))


def groups_of(release, size=4):
    """A partition of the release into consecutive groups of ``size`` records (the last one larger)."""
    n = len(release)
    g = np.minimum(np.arange(n) // size, n // size - 1)
    return Publication.from_partition(release, g)


def attack(values, releases, seed=0, upto=None):
    attacker = adversary(**values)
    views, results = [], []
    rng = np.random.default_rng(seed)
    for r in releases[:upto]:
        pub = groups_of(r)
        view = pub.public()
        views.append(view)
        results.append((pub, attacker.observe(view, AttackContext(r, views, rng))))
    return attacker, results


def test_without_compromised_records_it_is_the_knowledge_and_the_estimator(releases):
    """Step by step by hand: RPD from the knowledge, PB from bayesian_posterior with the same rng."""
    knowledge = bayframe_knowledge(steps=1)
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    attacker = adversary(knowledge={"steps": 1})
    assert isinstance(attacker, BayFrameAttacker) and isinstance(attacker.knowledge, BayFrameKnowledge)
    assert isinstance(attacker.params.estimator, BayesianEstimator)
    views = []
    for r in releases:
        view = groups_of(r).public()
        views.append(view)
        got = attacker.observe(view, AttackContext(r, views, rng_a))
        rows = np.searchsorted(r.respondent, view.respondent)  # bkseq ids are sorted in a release
        assert (r.respondent[rows] == view.respondent).all()
        known = r.subset(np.isin(r.respondent, view.respondent))
        prior = knowledge.prior(known)
        rpd = prior[np.searchsorted(known.respondent, view.respondent)]
        expected = bayesian_posterior(rpd, view.sensitive, view.group, view.n_groups, r.n_values, rng=rng_b)
        knowledge.revise(view, expected, view.respondent)
        assert got.posterior == pytest.approx(expected, abs=1e-12)
        assert got.given is None and got.extra == {}


def test_every_record_compromised_with_certainty_is_known(releases):
    for cascading in ("prior", "posterior"):
        _, results = attack({"cascading": cascading, "sigma": 1.0, "cr": 1.0}, releases, upto=1)
        pub, res = results[0]
        truth = dict(zip(pub.respondent.tolist(), pub.sensitive.tolist()))
        values = np.array([truth[v] for v in res.respondent.tolist()])
        assert res.posterior[np.arange(len(values)), values] == pytest.approx(1.0)
        assert res.given.all() and res.extra["compromised"] == len(values)


def test_prior_cascading_is_eq_5_before_the_estimator(releases):
    """CR_RPD(v, s) = CR + (1 - CR) RPD(v, s) on the true value, (1 - CR) RPD elsewhere (Eq. 5)."""
    r = releases[0]
    view = groups_of(r).public()
    cr = 0.9
    attacker = adversary(cascading="prior", sigma=0.5, cr=cr)
    rng = np.random.default_rng(7)
    got = attacker.observe(view, AttackContext(r, [view], rng))
    # replay: the same draw (from the release and the ids, not the generator), the same RPD (PD_sv at t1)
    replay = np.random.default_rng(7)
    compromised = compromise_draw(view.respondent, view.t, 0) < 0.5
    assert 0 < compromised.sum() < len(compromised)
    assert (got.given == compromised).all()
    rpd = bayframe_knowledge().prior(r)[np.searchsorted(r.respondent, view.respondent)]
    truth = r.sensitive[np.searchsorted(r.respondent, view.respondent)]
    weights = rpd.copy()
    weights[compromised] *= 1 - cr
    weights[np.flatnonzero(compromised), truth[compromised]] += cr
    expected = bayesian_posterior(weights, view.sensitive, view.group, view.n_groups, r.n_values, rng=replay)
    assert got.posterior == pytest.approx(expected, abs=1e-12)


def _gains(releases, cascading, size, sigma=0.3, cr=0.9):
    attacker = adversary(cascading=cascading, sigma=sigma, cr=cr)
    views, rng = [], np.random.default_rng(3)
    for r in releases:
        pub = groups_of(r, size)
        views.append(pub.public())
        res = attacker.observe(views[-1], AttackContext(r, views, rng))
    ctx = MetricContext(releases[-1], pub, {"x": res}, None, np.random.default_rng(0), {}, History())
    return BeliefMetrics().compute(ctx), pub, res


def test_compromised_records_raise_the_gain_and_are_reported_apart(releases):
    """Fig. 4's direction with |Q| = 3 (k = 3), sigma = 0.3, CR = 0.9: both cascading methods raise
    the gain over all records above the plain adversary's; the gains over the other records are
    reported apart (Fig. 4b) and are lower. Measured: none .1302, prior .1349, posterior .1625."""
    none, _, _ = _gains(releases, "none", 3)
    assert "x.gain_g_unknown" not in none
    for cascading in ("prior", "posterior"):
        out, _, _ = _gains(releases, cascading, 3)
        assert out["x.gain_g"] > none["x.gain_g"]
        assert 0.25 < out["x.given_share"] < 0.4
        assert out["x.gain_g_unknown"] < out["x.gain_g"]


def test_prior_cascading_acts_only_through_u_so_posterior_cascading_gains_more(releases):
    """The Bayesian estimator reads the prior only through u (the maximal permutation), so under
    prior-based cascading (Eq. 5) a compromised respondent's posterior on its value s is at most
    (a·m_s + 1/(n−1)!) / (a·n + 1/(n−1)!) whatever CR is, while
    posterior-based cascading adds CR to the Dirichlet parameters. This is why the lab measures
    posterior > prior where the paper's Fig. 5 reports prior > posterior (experiments/README.md).
    Measured with |Q| = 8: none 0, prior 0.0000, posterior .0477 (gain G)."""
    from math import factorial

    out, pub, res = _gains(releases, "prior", 8)
    counts, sizes = pub.group_counts(), pub.group_sizes()
    truth = dict(zip(pub.respondent.tolist(), zip(pub.sensitive.tolist(), pub.group.tolist())))
    for i in np.flatnonzero(res.given):
        s, g = truth[int(res.respondent[i])]
        n, bump = sizes[g], 1 / factorial(sizes[g] - 1)
        assert res.posterior[i, s] <= (counts[g, s] + bump) / (n + bump) + 1e-12
    posterior, _, _ = _gains(releases, "posterior", 8)
    assert out["x.gain_g"] < 1e-3 < posterior["x.gain_g"]


@pytest.mark.parametrize("kwargs, message", [
    ({"cascading": "both"}, "cascading must be 'none', 'prior' or 'posterior'"),
    ({"sigma": 1.5}, "sigma must be a number in [0, 1] (got 1.5)"),
    ({"cr": 0}, "cr must be a number in (0, 1] (got 0)"),
])
def test_params_are_checked(kwargs, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        BayFrameAttackerParams(**kwargs)


@pytest.mark.parametrize("values, message", [
    ({"knowledge": {"steps": 4}}, "attacker.knowledge.steps must be 1 or 2 (got 4)"),
    ({"knowledge": {"sv": "kernel", "kernel": {"bandwidth": 0}}}, "attacker.knowledge.kernel.bandwidth must be a number > 0"),
    ({"estimator": {"a": 0.0}}, "attacker.estimator.a must be a finite number > 0 (got 0.0)"),
    ({"estimator": "nope"}, "attacker.estimator: unknown estimator 'nope'; installed: "),
    ({"estimator": "configuration", "cascading": "posterior"},
     "attacker.cascading must be 'none' or 'prior' with estimator 'configuration' (posterior-based cascading "
     "needs the Bayesian estimator, estimator=bayesian) (got 'posterior')"),
    # the parameters moved to the references (knowledge: steps, revision, sv, correlation, kernel
    # bandwidth; estimator: a, normalize) are no longer the attacker's
    ({"steps": 2}, "attacker.steps is not a parameter of attacker 'bayframe'"),
    ({"a": 2.0}, "attacker.a is not a parameter of attacker 'bayframe'"),
    ({"normalize": False}, "attacker.normalize is not a parameter of attacker 'bayframe'"),
    ({"bandwidth": 0.5}, "attacker.bandwidth is not a parameter of attacker 'bayframe'"),
])
def test_references_are_checked_when_the_attacker_is_built(values, message):
    """Errors name the nested path; posterior cascading without the Bayesian estimator fails at construction."""
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        default_registry().create("attacker", "bayframe", values, "attacker")


def test_the_cascading_check_names_the_attackers_own_path():
    """As an extra attacker, the error names extra_attackers.<label>, not attacker."""
    with pytest.raises(ConfigError, match=r"^extra_attackers\.b\.cascading must be 'none' or 'prior' with estimator "):
        default_registry().create("attacker", "bayframe", {"estimator": "configuration", "cascading": "posterior"},
                                  "extra_attackers.b")


def test_the_bayesian_estimators_a_and_normalize_are_used_with_the_attacks_generator(releases):
    """attacker.estimator.a / .normalize reach Eq. 2; ties are broken with the attack's generator,
    not the estimator's own seed."""
    r = releases[0]
    view = groups_of(r).public()
    rpd = bayframe_knowledge().prior(r)[np.searchsorted(r.respondent, view.respondent)]
    for estimator in ({"a": 2.5, "normalize": False, "seed": 3}, {"a": 0.5}):
        got = adversary(estimator=estimator).observe(view, AttackContext(r, [view], np.random.default_rng(4)))
        expected = bayesian_posterior(rpd, view.sensitive, view.group, view.n_groups, r.n_values, a=estimator["a"],
                                      normalize=estimator.get("normalize", True), rng=np.random.default_rng(4))
        assert got.posterior == pytest.approx(expected, abs=1e-12)


def test_another_estimator_is_used_through_its_reference(releases):
    """estimator=configuration (JS-reduce's, for Fig. 11's JS-reduce+Prior) gives its posterior."""
    r = releases[0]
    view = groups_of(r).public()
    got = adversary(estimator="configuration").observe(view, AttackContext(r, [view], np.random.default_rng(0)))
    rpd = bayframe_knowledge().prior(r)[np.searchsorted(r.respondent, view.respondent)]
    conf = default_registry().create("estimator", "configuration")
    assert got.posterior == pytest.approx(conf.posterior(rpd, view.sensitive, view.group, view.n_groups, r.n_values))
