"""The BayFrame adversary's PD_sv with ``sv=kernel`` (BayFrame §6.1's Adult: "PD_sv is extracted
as in JS-reduce") is mined from the data to be released, as JS-reduce §5.1 extracts BK_sv ("from
the same data that are going to be generalized and released, as done in [17]").

Until #26 the attacker handed its knowledge the view's respondents with their sensitive values
replaced by zeros, so the kernel was mined from zeros and every PD_sv was (1, 0, ..., 0): the
first test failed then (it was a strict xfail) and bayframe/fig6 was re-run when it was fixed."""

import numpy as np

from cdpbench.data import Publication, Release, rows_of
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry


def observe_with_kernel(initial: int = 300):
    reg = default_registry()
    release = next(iter(reg.create("dataset", "adult", {"releases": 1, "initial": initial}).releases(np.random.default_rng(0))))
    attacker = reg.create("attacker", "bayframe", {"knowledge": {"sv": "kernel", "correlation": "uniform"}})
    seen = []
    real_prior = attacker.knowledge.prior
    attacker.knowledge.prior = lambda known: seen.append((known, real_prior(known))) or seen[-1][1]  # type: ignore[method-assign]
    view = Publication.from_partition(release, np.arange(len(release)) // 3).public()
    attacker.observe(view, AttackContext(release, [view], np.random.default_rng(0)))
    (known, pd_sv), = seen
    return reg, release, view, known, pd_sv


def test_the_attackers_kernel_prior_is_not_all_on_the_first_value():
    *_, pd_sv = observe_with_kernel()
    # the kernel estimate over the real table spreads over the occupations; over zeros it is (1, 0, ..., 0)
    assert pd_sv[:, 0].mean() < 0.5


def test_the_attackers_kernel_prior_is_classics_kernel_over_the_released_table():
    reg, release, view, known, pd_sv = observe_with_kernel()
    rows, found = rows_of(release.respondent, np.asarray(view.respondent))
    assert found.all()
    np.testing.assert_array_equal(known.sensitive, release.sensitive[rows])  # the values as released
    table = Release(t=release.t, schema=release.schema, respondent=release.respondent[rows], qi=release.qi[rows],
                    sensitive=release.sensitive[rows], truth=release.truth)
    expected = reg.create("knowledge", "kernel", {}).prior(table)
    np.testing.assert_allclose(pd_sv, expected, rtol=0, atol=1e-12)
    assert expected[:, 0].mean() < 0.5  # not the degenerate zeros prior
