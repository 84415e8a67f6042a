"""``ksaa``'s ``repair=split`` (:mod:`cdpbench_ksaa.belief_split`): a group KSAA's own model still
rejects split by its respondents' joined beliefs. A hand-worked split; the README's failing case
(adult_sequential, uniform knowledge, J = 0.6, release 2: merge-until-valid collapses to one
rejected group) repaired; the option's checks."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from cdpbench_ksaa.belief_split import split_group
from cdpbench_ksaa.datasets.adult_sequential import AdultSequential, AdultSequentialParams

from cdpbench.beliefs import js_divergence
from cdpbench.data import History
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry

KSAA_BASE = {"name": "js_reduce", "leftovers": "merge"}  # as the presets set it


def test_split_group_by_hand():
    """Records (in order) A B A C B A: A believes (1/2, 1/2, 0), B (0, 0, 1), C (1/3, 1/3, 1/3).
    Parts {A} (3 records), {B} (2), {C} (1). Inner model k = 2, J = 0.3: C alone is rejected
    (k); with A the JS divergence is H(11/24, 11/24, 1/12) - (3 + log2 3)/4 = 0.184 bits, with B
    H(1/9, 1/9, 7/9) - log2(3)/3 = 0.458: C joins A, accepted."""
    A, B, C = [0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]
    beliefs = np.array([A, B, A, C, B, A])
    sensitive = np.array([0, 2, 1, 0, 2, 1])
    inner = default_registry().create("privacy_model", "j_similarity", {"k": 2, "j": 0.3, "beta": 100.0})
    ctx = ModelContext(None, np.full(3, 1 / 3))
    calls = []

    def accepts(batch):
        calls.append(batch.n_groups)
        return inner.accepts(batch, ctx)

    part = split_group(beliefs, sensitive, 3, accepts)
    assert part.tolist() == [0, 1, 0, 0, 1, 0]
    jsd = js_divergence(beliefs, np.array([0, 1, 0, 0, 1, 0]), 2)
    h = lambda p: -sum(x * np.log2(x) for x in p if x > 0)  # noqa: E731
    assert jsd[0] == pytest.approx(h([11 / 24, 11 / 24, 1 / 12]) - (3 + np.log2(3)) / 4) and jsd[0] == pytest.approx(0.1843, abs=1e-4)
    assert h([1 / 9, 1 / 9, 7 / 9]) - np.log2(3) / 3 == pytest.approx(0.4581, abs=1e-4)  # the union with B: not chosen
    assert calls == [3, 1]  # the three parts, then the merged one
    # a stricter J (0.1): C joins A, still rejected, so the union joins B: one part
    strict = default_registry().create("privacy_model", "j_similarity", {"k": 2, "j": 0.1, "beta": 100.0})
    assert split_group(beliefs, sensitive, 3, lambda b: strict.accepts(b, ctx)).tolist() == [0] * 6
    # equal beliefs everywhere: one part, nothing judged
    assert split_group(np.array([A] * 4), sensitive[:4], 3, lambda b: 1 / 0).tolist() == [0] * 4


@cache
def readme_case(repair: str):
    """adult_sequential with its defaults, the first two releases; the defender's knowledge
    uniform; j_similarity_join with its defaults (k = 3, J = 0.6, β = 5); ksaa as the presets set
    it, with ``repair``."""
    rels = list(AdultSequential(AdultSequentialParams()).releases(np.random.default_rng(0)))[:2]
    reg = default_registry()
    model = reg.create("privacy_model", "j_similarity_join", {})
    anon = reg.create("anonymizer", "ksaa", {"base": KSAA_BASE, "repair": repair})
    history, out = History(), []
    for r in rels:
        prior = np.full((len(r), r.n_values), 1.0 / r.n_values)
        mctx = ModelContext(r.schema, r.sensitive_distribution(), history, r, prior)
        pub = anon.publish(r, PublishContext(model, mctx, history, np.random.default_rng(0), prior))
        out.append((pub, model.verify(pub, mctx), model.violating_groups(pub, mctx)))
        history = History(history.releases + [r], history.publications + [pub])
    return out


def test_readme_case_merge_until_valid_collapses_to_one_rejected_group():
    (p1, v1, _), (p2, v2, bad2) = readme_case("none")
    assert v1.violations == 0 and p1.n_groups > 1
    assert p2.n_groups == 1 and v2.violations == 1 and bad2.tolist() == [0] and len(p2) == 5000


def test_readme_case_repaired_by_the_split():
    """The split publishes groups j_similarity_join accepts: every record published, release 1
    unchanged (nothing to join), release 2 no group rejected."""
    none = readme_case("none")
    (p1, v1, _), (p2, v2, bad2) = readme_case("split")
    assert p1.group.tolist() == none[0][0].group.tolist() and v1.violations == 0
    assert v2.satisfied and v2.violations == 0 and len(bad2) == 0
    assert len(p2) == 5000 and len(p2.suppressed) == 0
    assert p2.n_groups == 234 and p2.group_sizes().min() >= 3
    assert p2.info["split_rounds"] == 1.0 and p2.info["split_violating"] == 0.0


def test_repair_checks():
    reg = default_registry()
    assert reg.create("anonymizer", "ksaa", {}).params.repair == "none"  # the default: KSAA as before
    with pytest.raises(ConfigError, match="repair"):
        reg.create("anonymizer", "ksaa", {"repair": "splits"})
    with pytest.raises(ConfigError, match="repair_rounds"):
        reg.create("anonymizer", "ksaa", {"repair": "split", "repair_rounds": 0})
    rels = list(AdultSequential(AdultSequentialParams(records=200, releases=2)).releases(np.random.default_rng(0)))
    anon = reg.create("anonymizer", "ksaa", {"base": KSAA_BASE, "repair": "split"})
    model = reg.create("privacy_model", "k_diversity", {"k": 2})
    r = rels[0]
    mctx = ModelContext(r.schema, r.sensitive_distribution(), History(), r)
    with pytest.raises(ConfigError, match=r"repair.*j_similarity_join"):
        anon.publish(r, PublishContext(model, mctx, History(), np.random.default_rng(0)))
