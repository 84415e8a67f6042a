"""Acceptance: pycanon, on Mondrian publications of Adult, agrees with our verifiers' levels for k,
l (distinct / entropy / recursive), t (equal distance) and β (basic / enhanced).

pycanon (1.3.6) is fed exactly our groups: the group id is its only quasi-identifier column.
Publications come from the registered Mondrian anonymizer with each classic model as the split
test, and from a plain partition (records sorted by QI, chunks of 10).

Known divergence (asserted, not hidden): pycanon's recursive (c,l) sorts the value counts of a
group *ascending* before taking ``r_1``; Machanavajjhala et al. define ``r_1`` as the count of the
*most* frequent value. ``test_recursive_c`` checks that our c follows the paper and that pycanon's
number is exactly the ascending-sort formula on the same groups; ``test_recursive_c_equals_pycanon``
is a strict xfail that starts failing the day pycanon follows the paper.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pycanon import anonymity  # a test dependency (extra "test"): never skipped

from cdpbench.data import History, Publication, Release
from cdpbench.datasets import adult as adult_dataset
from cdpbench.plugin import ModelContext, PrivacyModel, PublishContext
from cdpbench.registry import default_registry

N_ROWS = 4000
TOL = 1e-12


def adult_release(n: int = N_ROWS) -> Release:
    """The first ``n`` complete Adult rows: QI age, sex, education; sensitive occupation."""
    return adult_dataset.adult_release(("age", "sex", "education"), "occupation", rows=n)


def model(name: str, **params) -> PrivacyModel:
    return default_registry().create("privacy_model", name, params)


def model_context(release: Release) -> ModelContext:
    return ModelContext(release.schema, release.sensitive_distribution(), release=release)


def sorted_chunks(release: Release, size: int) -> np.ndarray:
    """Records sorted by (age, sex, education), cut into chunks of ``size`` (the last one merged)."""
    order = np.lexsort(release.qi.T[::-1])
    chunk = np.minimum(np.arange(len(release)) // size, len(release) // size - 1)
    group = np.empty(len(release), dtype=np.int64)
    group[order] = chunk
    return group


# the split tests handed to Mondrian (each of our models), and the plain partition
PUBLISHERS = {
    "partition-k10": None,
    "mondrian-l_distinct": ("l_diversity", {"variant": "distinct", "l": 3, "k": 5}),
    "mondrian-l_entropy": ("l_diversity", {"variant": "entropy", "l": 2.5}),
    "mondrian-l_recursive": ("l_diversity", {"variant": "recursive", "l": 2, "c": 3.0}),
    "mondrian-t_equal": ("t_closeness", {"t": 0.35, "k": 5}),
    "mondrian-beta_basic": ("beta_likeness", {"beta": 3.0, "variant": "basic", "k": 5}),
    "mondrian-beta_enhanced": ("beta_likeness", {"beta": 2.0, "variant": "enhanced", "k": 5}),
}


@pytest.fixture(scope="module")
def release() -> Release:
    return adult_release()


@pytest.fixture(scope="module", params=list(PUBLISHERS))
def case(request, release):
    """(publication, model context, the publication as pycanon sees it, publisher spec)."""
    spec = PUBLISHERS[request.param]
    ctx = model_context(release)
    if spec is None:
        pub = Publication.from_partition(release, sorted_chunks(release, 10))
    else:
        pm = model(spec[0], **spec[1])
        pm.prepare(release, ctx)
        mondrian = default_registry().create("anonymizer", "mondrian", {})
        pub = mondrian.publish(release, PublishContext(pm, ctx, History(), np.random.default_rng(0)))
        # Mondrian honours its split test: every published group satisfies the model
        report = pm.verify(pub, ctx)
        assert report.satisfied, (request.param, report)
    # the comparison is meaningful only on a real partition of the whole release
    assert len(pub.suppressed) == 0 and len(pub) == len(release)
    assert pub.n_groups >= 10, (request.param, pub.n_groups)
    frame = pd.DataFrame(
        {
            "group": pub.group,
            "occupation": np.asarray(release.schema.sensitive.values, dtype=object)[pub.sensitive],
        }
    )
    return pub, ctx, frame, request.param


QI, SA = ["group"], ["occupation"]


def test_k(case):
    pub, ctx, frame, _ = case
    assert model("k_anonymity", k=1).levels(pub, ctx)["k"] == anonymity.k_anonymity(frame, QI)
    for name in ("l_diversity", "t_closeness", "beta_likeness"):
        assert model(name).levels(pub, ctx)["k"] == anonymity.k_anonymity(frame, QI)


def test_l_distinct(case):
    pub, ctx, frame, _ = case
    assert model("l_diversity").levels(pub, ctx)["l_distinct"] == anonymity.l_diversity(frame, QI, SA)


def test_l_entropy(case):
    """pycanon reports the integer part of exp(min entropy); ours is the exact value."""
    pub, ctx, frame, _ = case
    ours = model("l_diversity", variant="entropy").levels(pub, ctx)["l_entropy"]
    theirs = anonymity.entropy_l_diversity(frame, QI, SA)
    # e**H may land one ulp either side of an integer in either implementation
    assert theirs in {math.floor(ours - 1e-9), math.floor(ours + 1e-9)}, (ours, theirs)
    # and the exact value is the minimum over groups of prod_s p_s^-p_s
    counts = pub.group_counts()
    p = counts / counts.sum(1, keepdims=True)
    expected = min(float(np.prod(np.where(row > 0, row, 1.0) ** -row)) for row in p)
    assert ours == pytest.approx(expected, rel=1e-12)


def test_t_equal_distance(case):
    pub, ctx, frame, _ = case
    ours = model("t_closeness", distance="equal").levels(pub, ctx)["t"]
    assert ours == pytest.approx(anonymity.t_closeness(frame, QI, SA), rel=0, abs=TOL)
    assert ours > 0.05  # a real publication, not a degenerate one


@pytest.mark.parametrize("variant, fn", [("basic", "basic_beta_likeness"), ("enhanced", "enhanced_beta_likeness")])
def test_beta(case, variant, fn):
    pub, ctx, frame, _ = case
    ours = model("beta_likeness", variant=variant).levels(pub, ctx)["beta"]
    assert ours == pytest.approx(getattr(anonymity, fn)(frame, QI, SA), rel=TOL, abs=TOL)
    assert ours > 0


def _recursive_levels(pub, ctx, frame):
    c_pycanon, l_pycanon = anonymity.recursive_c_l_diversity(frame, QI, SA)
    ours = model("l_diversity", variant="recursive", l=l_pycanon).levels(pub, ctx)
    return ours, c_pycanon, l_pycanon


def test_recursive_c(case):
    pub, ctx, frame, _ = case
    ours, c_pycanon, l_pycanon = _recursive_levels(pub, ctx, frame)
    # pycanon evaluates (c,l) at the publication's distinct l: the same as ours
    assert l_pycanon == ours["l_distinct"] >= 2
    # value counts per group, counted by pandas from the frame pycanon sees
    desc = [np.sort(row[row > 0])[::-1] for row in pd.crosstab(frame["group"], frame["occupation"]).to_numpy()]
    # the paper: smallest integer c with r_1 < c (r_l + ... + r_m), r descending
    assert ours["c_recursive"] == max(r[0] // r[l_pycanon - 1 :].sum() + 1 for r in desc)
    # pycanon: the same formula on counts sorted ascending
    asc = [r[::-1] for r in desc]
    assert c_pycanon == max(r[0] // r[l_pycanon - 1 :].sum() + 1 for r in asc)


@pytest.mark.xfail(strict=True, reason="pycanon 1.3.6 sorts counts ascending in recursive (c,l)-diversity (r_1 = least frequent)")
def test_recursive_c_equals_pycanon(case):
    pub, ctx, frame, _ = case
    ours, c_pycanon, _ = _recursive_levels(pub, ctx, frame)
    assert ours["c_recursive"] == c_pycanon


def test_ordered_emd_agrees_with_pycanon_on_a_numeric_sensitive_attribute():
    """pycanon's numeric t-closeness is the ordered-distance EMD over the sorted values present;
    with education-num (1..16, all present in these rows) as an ordered sensitive attribute."""
    release = adult_dataset.adult_release(("age", "hours-per-week"), "education-num", rows=N_ROWS)
    assert release.schema.sensitive.values == tuple(str(v) for v in range(1, 17))
    assert release.schema.sensitive.ordered and len(np.unique(release.sensitive)) == 16
    pub = Publication.from_partition(release, sorted_chunks(release, 25))
    ctx = model_context(release)
    pm = model("t_closeness", distance="ordered")
    pm.prepare(release, ctx)
    ours = pm.levels(pub, ctx)["t"]
    theirs = anonymity.t_closeness(pd.DataFrame({"group": pub.group, "edu": pub.sensitive + 1}), ["group"], ["edu"])
    assert ours == pytest.approx(theirs, rel=0, abs=TOL)
    assert ours > 0.05
