"""A known defect, pinned (found while converting the plugin references, #25; to fix under #26):
the BayFrame adversary hands its knowledge the view's respondents with their sensitive values
replaced by zeros. With ``sv=kernel`` (BayFrame Fig. 6's adversaries on Adult: PD_sv "extracted as
in JS-reduce", i.e. the kernel estimate over the published data) the kernel is then mined from
zeros, and every respondent's PD_sv puts all its weight on the first sensitive value.

Strict xfail: the day the attacker mines PD_sv from real values, this test passes, the suite
fails, and the marker must go (and bayframe/fig6 be re-run and re-exported)."""

import numpy as np
import pytest

from cdpbench.data import Publication
from cdpbench.plugin import AttackContext
from cdpbench.registry import default_registry


@pytest.mark.xfail(strict=True, reason="#26: the attacker's kernel PD_sv is mined from zeroed sensitive values")
def test_the_attackers_kernel_prior_is_not_all_on_the_first_value():
    reg = default_registry()
    release = next(iter(reg.create("dataset", "adult", {"releases": 1, "initial": 300}).releases(np.random.default_rng(0))))
    attacker = reg.create("attacker", "bayframe", {"knowledge": {"sv": "kernel", "correlation": "uniform"}})
    seen = []
    real_prior = attacker.knowledge.prior
    attacker.knowledge.prior = lambda known: seen.append(prior := real_prior(known)) or prior  # type: ignore[method-assign]
    view = Publication.from_partition(release, np.arange(len(release)) // 3).public()
    attacker.observe(view, AttackContext(release, [view], np.random.default_rng(0)))
    (pd_sv,) = seen
    # the kernel estimate over the real table spreads over the occupations; over zeros it is (1, 0, ..., 0)
    assert pd_sv[:, 0].mean() < 0.5
