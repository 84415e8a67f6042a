"""j_similarity_join: the registry's j_similarity on the defender's beliefs restricted by the join."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.data import History
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import default_registry
from cdpbench_ksaa.privacy_models.j_similarity_join import JSimilarityJoinParams
from cdpbench_ksaa.linkability import candidates
from cdpbench_ksaa.datasets.adult_sequential import AdultSequential, AdultSequentialParams


def two_releases(seed):
    rels = list(AdultSequential(AdultSequentialParams(records=300, releases=2, update_rate=0.0,
                                                      qi_sets=[["sex", "race"], ["sex", "education"]])).releases(np.random.default_rng(seed)))
    reg = default_registry()
    mondrian = reg.create("anonymizer", "mondrian", {})
    kmodel = reg.create("privacy_model", "k_anonymity", {"k": 6})
    h, pubs = History(), []
    for r in rels:
        mctx = ModelContext(r.schema, r.sensitive_distribution(), h, r)
        pubs.append(mondrian.publish(r, PublishContext(kmodel, mctx, h, np.random.default_rng(0))))
        h = History(h.releases + [r], h.publications + [pubs[-1]])
    return rels, pubs


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("block", [7, 1 << 14])  # rows a block of joined_batch: blocks that cut groups, one block
def test_joined_beliefs_are_the_prior_restricted_to_the_linkable_values(seed, block, monkeypatch):
    from cdpbench_ksaa.privacy_models import j_similarity_join

    monkeypatch.setattr(j_similarity_join, "_BLOCK", block)
    rels, (p1, p2) = two_releases(seed)
    reg = default_registry()
    model = reg.create("privacy_model", "j_similarity_join", {"inner": {"k": 2, "j": 0.3, "beta": 5.0}})
    inner = reg.create("privacy_model", "j_similarity", {"k": 2, "j": 0.3, "beta": 5.0})
    m = rels[1].n_values
    prior = np.random.default_rng(seed).dirichlet(np.ones(m), size=len(rels[1]))
    # first release: nothing to join, the model is j_similarity
    first = ModelContext(rels[0].schema, rels[0].sensitive_distribution(), History(), rels[0], prior[: len(rels[0])])
    assert model.verify(p1, first).violations == inner.verify(p1, first).violations
    ctx = ModelContext(rels[1].schema, rels[1].sensitive_distribution(), History([rels[0]], [p1]), rels[1], prior)
    batch = model.joined_batch(p2, ctx)
    cand = candidates([p1.public(), p2.public()], transitions="none", pruned=True)
    allowed = {}
    for r, x in zip(cand.row.tolist(), cand.node.tolist()):
        allowed.setdefault(int(cand.respondent[r]), set()).add(int(cand.nodes.value[x]))
    restricted = 0
    for i, resp in enumerate(p2.respondent.tolist()):
        vals = allowed.get(resp, set())
        row = prior[p2.row[i]]
        if vals:
            want = np.array([row[s] if s in vals else 0.0 for s in range(m)])
            want /= want.sum()
            restricted += len(vals) < m
        else:
            want = row
        np.testing.assert_allclose(batch.prior[i], want, rtol=1e-12, atol=0)
    assert restricted > 0
    bad = np.flatnonzero(~inner.accepts(batch, ctx))
    assert model.violating_groups(p2, ctx).tolist() == bad.tolist()
    assert model.verify(p2, ctx).violations == len(bad) and model.accepts_publication(p2, ctx) == (len(bad) == 0)


def test_parameters_are_checked():
    with pytest.raises(ConfigError, match="transitions"):
        JSimilarityJoinParams(transitions="some")
    with pytest.raises(ConfigError, match=r"^privacy_model\.inner\.j must be"):
        default_registry().create("privacy_model", "j_similarity_join", {"inner": {"j": 7.0}})
    with pytest.raises(ConfigError, match=r"^privacy_model\.j is not a parameter of privacy_model 'j_similarity_join'"):
        default_registry().create("privacy_model", "j_similarity_join", {"j": 0.3})


def test_the_inner_model_is_a_reference_with_j_similarity_s_defaults():
    """k, J and beta are the inner model's own (privacy_model.inner.k, .j, .beta); its defaults are
    the ones j_similarity_join had (k = 3, J = 0.6, beta = 5)."""
    model = default_registry().create("privacy_model", "j_similarity_join")
    assert model.inner is model.params.inner and model.inner.plugin_name == "j_similarity"
    p = model.inner.params
    assert (p.k, p.j, p.beta, p.log_base) == (3, 0.6, 5.0, 2.0)
    tuned = default_registry().create("privacy_model", "j_similarity_join", {"inner": {"k": 2, "j": 0.3}})
    assert (tuned.inner.params.k, tuned.inner.params.j, tuned.inner.params.beta) == (2, 0.3, 5.0)
