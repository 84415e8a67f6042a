"""Partitioned Mondrian (issue #28, "Past one machine"): exact first cuts give single-process
Mondrian's publication, sample cuts give a publication the model's verifier accepts, the Ray
backend gives the local backend's publication, bad parameters give one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from cdpbench.data import History, Publication, Release
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PrivacyModel, PublishContext
from cdpbench.registry import default_registry
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy

MODELS = [
    ("k_anonymity", {"k": 3}),
    ("k_anonymity", {"k": 7}),
    ("l_diversity", {"l": 2}),
    ("l_diversity", {"l": 3, "k": 4}),
    ("t_closeness", {"t": 0.4}),  # judges a part's groups against the whole release's distribution
    ("bt_privacy", {"B": 0.3, "t": 0.3}),  # per-record priors ride along with each part
]


def random_release(seed: int, n: int) -> Release:
    """2 numeric QIs with many repeated values, a 3-level categorical (8 leaves) and a flat one
    (3 values), 4 sensitive values, skewed."""
    rng = np.random.default_rng(seed)
    tax8 = Taxonomy.from_paths([[f"v{i}", f"g{i // 2}", f"h{i // 4}", "*"] for i in range(8)])
    schema = Schema(
        (NumericQI("a", 0, 20), NumericQI("b", 0, 1000), CategoricalQI("c", tax8),
         CategoricalQI("f", Taxonomy.flat(["x", "y", "z"]))),
        Sensitive("s", ("s0", "s1", "s2", "s3")),
    )
    qi = np.column_stack([
        rng.integers(0, 21, n),
        np.round(rng.gamma(2.0, 100.0, n).clip(0, 1000), 1),
        rng.integers(0, 8, n),
        rng.choice(3, n, p=[0.6, 0.3, 0.1]),
    ]).astype(float)
    return Release(1, schema, np.arange(n, dtype=np.int64), qi, rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1]))


def model_and_context(release: Release, name: str, params: dict) -> tuple[PrivacyModel, ModelContext]:
    model = default_registry().create("privacy_model", name, params)
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    model.prepare(release, mctx)
    return model, mctx


def publish(release: Release, model: PrivacyModel, mctx: ModelContext, anonymizer: str, params: dict,
            seed: int = 0) -> Publication:
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(seed))
    return default_registry().create("anonymizer", anonymizer, params).publish(release, ctx)


def same_publication(a: Publication, b: Publication) -> bool:
    return (np.array_equal(a.row, b.row) and np.array_equal(a.group, b.group)
            and np.array_equal(a.low, b.low) and np.array_equal(a.high, b.high))


@pytest.mark.parametrize("name,params", MODELS, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
@pytest.mark.parametrize("seed", range(4))
def test_exact_cuts_give_single_process_mondrians_publication(name, params, seed):
    release = random_release(seed, 150 + 50 * seed)
    model, mctx = model_and_context(release, name, params)
    single = publish(release, model, mctx, "mondrian", {})
    assert single.n_groups > 1  # the cases do cut
    for P in (1, 2, 4, 8):
        pub = publish(release, model, mctx, "partitioned_mondrian", {"partitions": P, "cuts": "exact"})
        assert same_publication(pub, single), (P, pub.info)
        assert pub.info["n_groups"] == single.n_groups


def test_exact_cuts_make_log2_p_levels_of_tasks():
    """A categorical cut has one child per taxonomy child: more tasks than P where it is taken."""
    release = random_release(0, 400)
    model, mctx = model_and_context(release, "k_anonymity", {"k": 3})
    tasks = [publish(release, model, mctx, "partitioned_mondrian", {"partitions": P}).info["tasks"] for P in (1, 2, 4, 8)]
    assert tasks[0] == 1 and tasks == sorted(tasks) and tasks[3] >= 4


@pytest.mark.parametrize("name,params", MODELS, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
@pytest.mark.parametrize("seed", range(3))
def test_sample_cuts_satisfy_the_model(name, params, seed):
    release = random_release(seed, 300)
    model, mctx = model_and_context(release, name, params)
    single = publish(release, model, mctx, "mondrian", {})
    for P in (2, 4, 8):
        for sample in (5, 40):
            pub = publish(release, model, mctx, "partitioned_mondrian", {"partitions": P, "cuts": "sample", "sample": sample})
            assert model.verify(pub, mctx).satisfied, (P, sample, pub.info)
            assert len(pub.suppressed) == 0 and sorted(pub.row.tolist()) == list(range(len(release)))
            assert pub.info["tasks"] >= 1 and pub.info["n_groups"] == pub.n_groups
    # P = 1: no cut, one task: Mondrian itself
    pub = publish(release, model, mctx, "partitioned_mondrian", {"partitions": 1, "cuts": "sample", "sample": 5})
    assert same_publication(pub, single)


@pytest.mark.parametrize("seed", range(4))
def test_sample_of_every_record_makes_mondrians_own_cuts(seed):
    """With the whole release as the sample, the sample's widest dimension and median are the
    part's: the cuts are Mondrian's and so is the publication."""
    release = random_release(seed, 200)
    for name, params in MODELS[:4]:
        model, mctx = model_and_context(release, name, params)
        single = publish(release, model, mctx, "mondrian", {})
        pub = publish(release, model, mctx, "partitioned_mondrian",
                      {"partitions": 8, "cuts": "sample", "sample": len(release)})
        assert same_publication(pub, single), name


def test_a_cut_the_model_refuses_on_all_records_is_not_made():
    """A tiny sample proposes cuts whose children fail k on the whole part: those cuts are
    refused (counted), no part fails the model, the publication verifies."""
    release = random_release(1, 120)
    model, mctx = model_and_context(release, "k_anonymity", {"k": 25})
    refused = 0
    for seed in range(10):
        pub = publish(release, model, mctx, "partitioned_mondrian", {"partitions": 8, "cuts": "sample", "sample": 6}, seed)
        assert model.verify(pub, mctx).satisfied
        assert pub.group_sizes().min() >= 25
        refused += pub.info["refused_cuts"]
    assert refused > 0


def test_a_release_that_fails_the_model_is_suppressed_entirely():
    release = random_release(0, 30)
    model, mctx = model_and_context(release, "k_anonymity", {"k": 31})
    for cuts in ("exact", "sample"):
        pub = publish(release, model, mctx, "partitioned_mondrian", {"partitions": 4, "cuts": cuts})
        assert pub.info["suppressed_all"] and len(pub.suppressed) == 30 and pub.n_groups == 0


@pytest.mark.parametrize("params,message", [
    ({"partitions": 3}, "anonymizer.partitions must be a power of two >= 1 (got 3)"),
    ({"partitions": 0}, "anonymizer.partitions must be a power of two >= 1 (got 0)"),
    ({"cuts": "median"}, "anonymizer.cuts must be 'exact' or 'sample' (got 'median')"),
    ({"sample": 0}, "anonymizer.sample must be an integer >= 1 (got 0)"),
    ({"backend": "dask"}, "anonymizer.backend must be 'local' or 'ray' (got 'dask')"),
    ({"num_cpus": 0}, "anonymizer.num_cpus must be null or an integer >= 1 (got 0)"),
    ({"categorical": "box"}, "anonymizer.categorical must be 'taxonomy' or 'set' (got 'box')"),
])
def test_bad_params_give_one_line_errors(params, message):
    with pytest.raises(ConfigError) as e:
        default_registry().create("anonymizer", "partitioned_mondrian", params)
    assert str(e.value) == message and "\n" not in str(e.value)


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance of 2 CPUs for this module (skipped when Ray cannot start)."""
    ray = pytest.importorskip("ray", reason="ray is not installed (the `ray` extra)")
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        except Exception as e:  # noqa: BLE001 - any failure to start means: no Ray here
            pytest.skip(f"ray cannot start a local instance: {type(e).__name__}: {str(e).splitlines()[0]}")
    yield ray
    if started:
        ray.shutdown()


def test_ray_backend_gives_the_local_backends_publication(ray_instance):
    release = random_release(2, 300)
    for name, params in (MODELS[0], MODELS[2], MODELS[5]):
        model, mctx = model_and_context(release, name, params)
        for cuts in ("exact", "sample"):
            p = {"partitions": 4, "cuts": cuts, "sample": 30}
            local = publish(release, model, mctx, "partitioned_mondrian", {**p, "backend": "local"})
            remote = publish(release, model, mctx, "partitioned_mondrian", {**p, "backend": "ray"})
            assert same_publication(remote, local), (name, cuts)
            assert remote.info["backend"] == "ray" and remote.info["tasks"] == local.info["tasks"] > 1
