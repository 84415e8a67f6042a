"""Invariance issue, acceptance 4: the 20-release preset of each method and slicedBucket on 10^5 records.

(a) Each method of the preset ``invariance/fig5`` (m = 6; churn over Adult with QI age, sex, zip:
    10,000 records growing to 16,875 over 20 releases; intersection and membership attacks, every
    metric) as one whole process, ``cdpbench +experiment=invariance/fig5
    +experiment/invariance/method=<method> tracking.enabled=false``, with the time of the release
    loop's phases from its run record. Target: <= 20 s each.
(b) ``SlicedBucket.publish`` (m = 6) on one release of 10^5 records: Adult's rows drawn with
    replacement, each with its own synthetic zip. Target: <= 10 s.

    python benchmarks/bench_invariance.py [method ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cdpbench.data import History
from cdpbench.datasets.adult import adult_schema, load_adult
from cdpbench.datasets.churn import churn_process
from cdpbench.datasets.zipcodes import synthetic_zips
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench_invariance.anonymizers.sliced_bucket import SlicedBucket, SlicedBucketParams

METHODS = ("m_invariance", "tau_safety", "tau_safe_lk", "sliced_bucket")
PHASES = ("time_publish", "time_verify", "time_attack", "time_metrics")


def bench_preset(method: str) -> None:
    exe = Path(sys.executable).parent / "cdpbench"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run([str(exe), "+experiment=invariance/fig5", f"+experiment/invariance/method={method}",
                        "tracking.enabled=false", "progress=false"], cwd=tmp, check=True, capture_output=True)
        whole = time.perf_counter() - t0
        (record,) = Path(tmp, "outputs", "runs").glob("*/run.json")
        rows = [row for _, _, row in json.loads(record.read_text())["metrics"]]
    phases = ", ".join(f"{p[5:]} {sum(r[p] for r in rows):.1f} s" for p in PHASES)
    print(f"(a) {method:13s} 20 releases, whole process {whole:5.1f} s (target <= 20 s): {phases}; "
          f"counterfeits {sum(r['counterfeits'] for r in rows):.0f}, delayed/suppressed {sum(r['suppressed'] for r in rows):.0f}, "
          f"certain {sum(r['intersection.certain'] for r in rows):.0f}, disclosed {sum(r['intersection.disclosed'] for r in rows):.0f}", flush=True)


def bench_sliced(n: int = 100_000) -> None:
    rng = np.random.default_rng(0)
    adult = load_adult()
    base = adult.iloc[rng.integers(0, len(adult), n)].reset_index(drop=True)
    base["zip"] = synthetic_zips(np.arange(n))
    schema = adult_schema(["age", "sex", "zip"], "occupation")
    (release,) = churn_process(base, schema, initial=n, deletions=0, insertions=0, updates=0, reinsertions=0,
                               releases=1, rng=rng)
    anon = SlicedBucket(SlicedBucketParams(m=6))
    mctx = ModelContext(schema, release.sensitive_distribution(), release=release)
    t0 = time.perf_counter()
    pub = anon.publish(release, PublishContext(None, mctx, History(), np.random.default_rng(0)))
    elapsed = time.perf_counter() - t0
    print(f"(b) sliced_bucket on {n:,} records: {elapsed:.2f} s (target <= 10 s), {pub.n_groups:,} buckets, "
          f"{len(pub.suppressed)} delayed, {int(pub.counterfeit.sum())} counterfeits")


if __name__ == "__main__":
    chosen = [a for a in sys.argv[1:] if a in METHODS] or list(METHODS)
    for method in chosen:
        bench_preset(method)
    bench_sliced()
