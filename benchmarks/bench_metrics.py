"""Speed and peak memory of the core metrics on UCI Adult.

Release: the 30,162 rows of Adult without '?', QI age, education-num, hours-per-week, fnlwgt
(numeric; fnlwgt is integral with a huge domain), sex, race, education, marital-status,
workclass, native-country (categorical, ARX hierarchies), sensitive occupation. Publications:
Mondrian (cdpbench-classic) with k = 5 and 50, taxonomy nodes and value sets, the same groups
bucketized, and a random partition into groups of 10 (wide, heavily overlapping boxes: the worst
case for the k-d block search). For every publication and metric: wall time, peak traced memory
(tracemalloc) and the value. A dense records x groups containment count (what the k-d block search
of ``metrics._regions`` avoids) is timed once for comparison.

    python benchmarks/bench_metrics.py
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from cdpbench.data import History, Publication
from cdpbench.datasets.adult import adult_schema, load_adult
from cdpbench.metrics._regions import publication_regions
from cdpbench.metrics.belief import BeliefMetrics
from cdpbench.metrics.kl import KLDivergence
from cdpbench.metrics.linkage import RecordLinkage
from cdpbench.metrics.query import QueryError, QueryErrorParams
from cdpbench.metrics.utility import UtilityMetrics
from cdpbench.plugin import AttackResult, MetricContext, ModelContext, PublishContext
from cdpbench.registry import default_registry

QI = (
    "age", "education-num", "hours-per-week", "fnlwgt",
    "sex", "race", "education", "marital-status", "workclass", "native-country",
)
SENSITIVE = "occupation"


def adult_release():
    schema = adult_schema(QI, SENSITIVE)
    frame = load_adult()
    frame.insert(0, "id", np.arange(len(frame)))
    return schema.encode(frame[schema.columns], t=1)


def mondrian(release, k, categorical):
    reg = default_registry()
    model = reg.create("privacy_model", "k_anonymity", {"k": k})
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0))
    return reg.create("anonymizer", "mondrian", {"categorical": categorical}).publish(release, ctx)


def measure(fn):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, elapsed, peak / 2**20


def dense_containment_count(release, pub):
    """Records x groups containment, 2,000 records at a time (the baseline the k-d block search avoids)."""
    regions = publication_regions(pub)
    x = release.qi
    total = 0
    for c0 in range(0, len(x), 2000):
        xc = x[c0 : c0 + 2000]
        inside = np.ones((len(xc), len(regions)), dtype=bool)
        for j, a in enumerate(release.schema.qi):
            if a.kind == "numeric":
                inside &= (xc[:, j][:, None] >= regions.low[:, j]) & (xc[:, j][:, None] <= regions.high[:, j])
            else:
                inside &= regions.sets[j][:, xc[:, j].astype(np.int64)].T
        total += int(inside.sum())
    return total


def main() -> None:
    release = adult_release()
    n = len(release)
    rng = np.random.default_rng(0)
    pubs = {}
    for k in (5, 50):
        for cat in ("taxonomy", "set"):
            pubs[f"mondrian k={k} {cat}"], t, _ = measure(lambda: mondrian(release, k, cat))
            print(f"published mondrian k={k} {cat}: {pubs[f'mondrian k={k} {cat}'].n_groups} groups in {t:.1f} s")
    base = pubs["mondrian k=5 taxonomy"]
    g = np.full(n, -1)
    g[base.row] = base.group
    pubs["bucketized k=5"] = Publication.from_partition(release, g, bucketized=True)
    pubs["random groups of 10"] = Publication.from_partition(release, rng.permutation(n) // 10, categorical="set")

    metrics = {
        "utility": UtilityMetrics(),
        "record_linkage": RecordLinkage(),
        "kl_divergence": KLDivergence(),
        "query_error (1000)": QueryError(QueryErrorParams(queries=1000, selectivity=0.1)),
        "belief": BeliefMetrics(),
    }
    print(f"\nAdult: {n} records, {len(QI)} QIs, sensitive {SENSITIVE}")
    print(f"{'publication':<24} {'metric':<20} {'time s':>8} {'peak MiB':>9}  value")
    for label, pub in pubs.items():
        real = ~pub.counterfeit
        post = rng.dirichlet(np.ones(release.n_values), size=int(real.sum()))
        attacks = {"random": AttackResult(pub.respondent[real], post)}
        ctx = MetricContext(release, pub, attacks, None, np.random.default_rng(1))
        for name, metric in metrics.items():
            out, t, mem = measure(lambda: metric.compute(ctx))
            key = {"utility": "gcp_norm", "record_linkage": "rl_norm", "kl_divergence": "kl",
                   "query_error (1000)": "query_error_median", "belief": "random.gain_g"}[name]
            print(f"{label:<24} {name:<20} {t:8.2f} {mem:9.1f}  {key}={out[key]:.4f}")
    for label in ("mondrian k=5 taxonomy", "random groups of 10"):
        count, t, mem = measure(lambda: dense_containment_count(release, pubs[label]))
        print(f"{label:<24} {'dense containment':<20} {t:8.2f} {mem:9.1f}  pairs={count}")


if __name__ == "__main__":
    main()
