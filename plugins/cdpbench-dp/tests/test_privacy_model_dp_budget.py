"""dp_budget: the spend so far against the stated total, as levels and violations."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.data import Publication
from cdpbench.errors import CdpbenchError, ConfigError
from cdpbench.plugin import ModelContext
from cdpbench.registry import default_registry
from cdpbench_dp.anonymizers.dp_release import DPRelease, DPReleaseParams
from cdpbench_dp.anonymizers.dp_tree import DPTree, DPTreeParams
from cdpbench_dp.privacy_models.dp_budget import DPBudget, DPBudgetParams
from dp_testdata import publish_context, release_stream


def verify_all(anonymizer, model, releases: int):
    rng = np.random.default_rng(0)
    out = []
    for release in release_stream(releases, n=20):
        pub = anonymizer.publish(release, publish_context(release, rng, model))
        out.append(model.verify(pub, ModelContext(release.schema, release.sensitive_distribution(), release=release)))
    return out


def test_the_tree_spend_is_reported_and_never_exceeds_its_total():
    reports = verify_all(DPTree(DPTreeParams(epsilon=1.5, horizon=8)), DPBudget(), 8)
    # L = 4: levels open at t = 1, 2, 4, 8
    assert [r.levels["epsilon_spent"] for r in reports] == pytest.approx([1.5 * k / 4 for k in (1, 2, 2, 3, 3, 3, 3, 4)])
    assert all(r.satisfied and r.violations == 0 and r.levels["epsilon_total"] == 1.5 for r in reports)
    assert all(r.levels["epsilon_user_level"] >= r.levels["epsilon_spent"] for r in reports)


def test_holding_the_per_release_baseline_to_a_smaller_total_counts_violations():
    reports = verify_all(DPRelease(DPReleaseParams(epsilon=2.0, horizon=8)), DPBudget(DPBudgetParams(epsilon=1.0)), 8)
    assert [r.levels["epsilon_spent"] for r in reports] == pytest.approx([0.25 * t for t in range(1, 9)])
    assert [r.violations for r in reports] == [0, 0, 0, 0, 1, 1, 1, 1]  # 1.25 > 1.0 from release 5 on
    assert [r.satisfied for r in reports] == [True] * 4 + [False] * 4


def test_a_publication_without_a_budget_is_refused():
    release = release_stream(1)[0]
    pub = Publication.from_partition(release, np.zeros(len(release), dtype=np.int64))
    with pytest.raises(CdpbenchError, match="dp_budget verifies a DP count release"):
        DPBudget().verify(pub, ModelContext(release.schema, release.sensitive_distribution(), release=release))


def test_a_bad_total_is_a_one_line_error():
    with pytest.raises(ConfigError) as err:
        default_registry().create("privacy_model", "dp_budget", {"epsilon": -1.0})
    assert str(err.value) == "privacy_model.epsilon must be a number > 0 or null (got -1.0)"
