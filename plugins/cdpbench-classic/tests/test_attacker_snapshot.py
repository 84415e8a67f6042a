"""The snapshot attacker: hand-computed posteriors, alignment with the view's respondents,
uniform knowledge + Ω-estimate == frequencies, counterfeits, parameter errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cdpbench.data import Publication, PublicView
from cdpbench.errors import ConfigError
from cdpbench.plugin import AttackContext, AttackResult
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy
from cdpbench_classic.estimators.frequency import frequency_posterior
from cdpbench_classic.knowledge.kernel import KernelPrior, kernel_prior
from cdpbench_classic.knowledge.uniform import Uniform
from cdpbench_classic.estimators.omega import OmegaEstimate, omega_posterior
from cdpbench_classic.attackers.snapshot import Snapshot, SnapshotParams

SENS = Sensitive("disease", ("a", "b", "c"))
SCHEMA = Schema((NumericQI("age", 0, 100),), SENS)


def release(ids: list[int], rows: list[tuple], schema: Schema = SCHEMA):
    cols = ["id", *schema.qi_names, schema.sensitive.name]
    return schema.encode(pd.DataFrame([(i, *r) for i, r in zip(ids, rows)], columns=cols), 1)


def attack(attacker: Snapshot, rel, groups) -> tuple[AttackResult, PublicView]:
    view = Publication.from_partition(rel, np.asarray(groups)).public()
    ctx = AttackContext(population=rel, views=[view], rng=np.random.default_rng(0))
    return attacker.observe(view, ctx), view


def snapshot(**kw) -> Snapshot:
    return default_registry().create("attacker", "snapshot", kw)  # type: ignore[return-value]


def test_kernel_omega_posteriors_by_hand_and_aligned_with_the_view():
    # population rows in id order 30, 10, 20 (the view lists respondents sorted: 10, 20, 30)
    # id 30: age 20, a; id 10: age 30, b; id 20: age 60, a. B = 0.3 kernel priors:
    # id 30: (9/17, 8/17), id 10: (8/17, 9/17), id 20: (1, 0)  (see test_classic_knowledge_estimators)
    # one group publishing {a, a, b}: column sums a = 9/17 + 8/17 + 1 = 2, b = 17/17 = 1
    # Ω(30) = (2 * 9/17 / 2, 8/17) = (9/17, 8/17) -> itself; Ω(10) = (8/17, 9/17) -> itself;
    # Ω(20) = (2 * 1 / 2, 0) = (1, 0).
    rel = release([30, 10, 20], [(20, "a"), (30, "b"), (60, "a")])
    result, view = attack(snapshot(knowledge={"name": "kernel", "bandwidth": 0.3}, estimator="omega"), rel, [0, 0, 0])
    assert result.respondent.tolist() == [10, 20, 30] == view.respondent.tolist()
    assert np.allclose(result.posterior, [[8 / 17, 9 / 17, 0], [1, 0, 0], [9 / 17, 8 / 17, 0]])


def test_kernel_omega_two_groups_by_hand():
    # ids 1..4, ages 20, 30, 60, 70, values a, b, a, c; B = 0.3
    # priors: 1: (9/17, 8/17, 0); 2: (8/17, 9/17, 0); 3: self a 1, id 4 (c) 8/9 -> (9/17, 0, 8/17);
    # 4: (8/17, 0, 9/17). Groups {1, 3} publishing {a, a} -> every posterior (1, 0, 0);
    # {2, 4} publishing {b, c}: columns b = 9/17, c = 9/17;
    # Ω(2) = (0, 1, 0) -> (0, 1, 0); Ω(4) = (0, 0, 1) -> (0, 0, 1)
    rel = release([1, 2, 3, 4], [(20, "a"), (30, "b"), (60, "a"), (70, "c")])
    result, _ = attack(snapshot(), rel, [0, 1, 0, 1])
    assert result.respondent.tolist() == [1, 3, 2, 4]
    assert np.allclose(result.posterior, [[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])


def random_release(seed: int, n: int = 120):
    rng = np.random.default_rng(seed)
    tax = Taxonomy.from_paths([["x1", "X", "*"], ["x2", "X", "*"], ["y1", "Y", "*"]])
    schema = Schema((NumericQI("age", 0, 100), CategoricalQI("tax", tax)), SENS)
    ids = rng.permutation(10 * n)[:n].tolist()
    rows = list(zip(rng.integers(0, 101, n).tolist(), rng.choice(["x1", "x2", "y1"], n), rng.choice(list("abc"), n)))
    return release(ids, rows, schema), rng.integers(0, 15, n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_knowledge_with_omega_gives_the_frequencies(seed):
    rel, groups = random_release(seed)
    result, view = attack(snapshot(knowledge="uniform", estimator="omega"), rel, groups)
    expected = frequency_posterior(view.sensitive, view.group, view.n_groups, 3)
    assert np.allclose(result.posterior, expected)
    # and the frequency estimator ignores the knowledge altogether
    freq, _ = attack(snapshot(knowledge="kernel", estimator="frequency"), rel, groups)
    assert np.allclose(freq.posterior, expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_omega_equals_the_estimate_on_the_population_prior(seed):
    rel, groups = random_release(seed)
    result, view = attack(snapshot(knowledge={"bandwidth": 0.4}), rel, groups)
    row_of = {int(r): i for i, r in enumerate(rel.respondent)}
    prior = kernel_prior(rel, 0.4)[[row_of[int(r)] for r in view.respondent]]
    assert np.allclose(result.posterior, omega_posterior(prior, view.sensitive, view.group, view.n_groups, 3))
    assert np.allclose(result.posterior.sum(axis=1), 1.0)
    # the posterior puts mass only on values published in the respondent's group
    counts = view.group_counts()
    assert np.all(result.posterior[counts[view.group] == 0] == 0)


def test_counterfeit_rows_get_a_uniform_prior():
    rel = release([1, 2], [(20, "a"), (90, "b")])
    # one group: respondents -1 (a counterfeit) and 1, 2; published a, b, c
    view = PublicView(
        t=1, schema=SCHEMA, group=np.zeros(3, dtype=np.int64), respondent=np.array([-1, 1, 2]),
        sensitive=np.array([0, 1, 2]), low=np.zeros((1, 1)), high=np.ones((1, 1)), value_sets={}, suppressed_count=0,
    )
    result = snapshot().observe(view, AttackContext(rel, [view], np.random.default_rng(0)))
    # priors: -1 uniform (1/3 each); 1: (1, 0, 0); 2: (0, 1, 0). Columns: a 4/3, b 4/3, c 1/3.
    # Ω(-1) = (1/4, 1/4, 1) -> (1/6, 1/6, 2/3); Ω(1) = (3/4, 0, 0) -> (1, 0, 0); Ω(2) -> (0, 1, 0)
    assert result.respondent.tolist() == [-1, 1, 2]
    assert np.allclose(result.posterior, [[1 / 6, 1 / 6, 2 / 3], [1, 0, 0], [0, 1, 0]])


def test_components_come_from_the_registry():
    a = snapshot(knowledge={"name": "kernel", "bandwidth": 0.5})
    assert isinstance(a.knowledge, KernelPrior) and a.knowledge.params.bandwidth == 0.5
    assert isinstance(a.estimator, OmegaEstimate)
    u = snapshot(knowledge="uniform")
    assert isinstance(u.knowledge, Uniform)
    d = snapshot()  # the defaults: the kernel of bandwidth 0.3 and the Ω-estimate
    assert isinstance(d.knowledge, KernelPrior) and d.knowledge.params.bandwidth == 0.3
    assert isinstance(d.estimator, OmegaEstimate)
    with pytest.raises(TypeError, match="params.knowledge is 'kernel', not a plugin; plugins that reference others "
                                        "are created with Registry.create"):
        Snapshot(SnapshotParams())


def test_population_prior_is_computed_once_per_population():
    rel, groups = random_release(0, 40)
    a = snapshot()
    calls = []
    original = a.knowledge.prior
    a.knowledge.prior = lambda r: calls.append(r) or original(r)  # type: ignore[method-assign]
    attack(a, rel, groups)
    attack(a, rel, groups)
    assert len(calls) == 1
    other, _ = random_release(1, 40)
    attack(a, other, groups)
    assert len(calls) == 2


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"knowledge": "nope"}, r"^attacker\.knowledge: unknown knowledge 'nope'; installed: .*kernel.*uniform"),
        ({"estimator": "nope"}, r"^attacker\.estimator: unknown estimator 'nope'; installed: .*frequency.*omega"),
        ({"knowledge": {"bandwidth": 0.0}}, r"^attacker\.knowledge\.bandwidth must be a number > 0 \(got 0\.0\)$"),
        ({"knowledge": {"name": "kernel", "bandwidth": -1.0}},
         r"^attacker\.knowledge\.bandwidth must be a number > 0 \(got -1\.0\)$"),
        ({"estimator": {"name": "permanent", "max_states": 0}},
         r"^attacker\.estimator\.max_states must be an integer >= 1 \(got 0\)$"),
        ({"knowledge": {"name": "uniform", "bandwidth": 0.3}},
         r"^attacker\.knowledge\.bandwidth is not a parameter of knowledge 'uniform'; allowed: \[\]$"),
        ({"bandwidth": 0.3}, r"^attacker\.bandwidth is not a parameter of attacker 'snapshot'; allowed: "
                             r"\['knowledge', 'estimator'\]$"),
        ({"estimator": 3}, r"^attacker\.estimator must name a plugin of kind estimator "),
    ],
)
def test_parameter_errors_are_one_line_and_name_the_nested_field(kw, message):
    with pytest.raises(ConfigError, match=message) as e:
        default_registry().create("attacker", "snapshot", kw)
    assert "\n" not in str(e.value)
