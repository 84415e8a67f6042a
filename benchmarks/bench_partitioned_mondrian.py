"""Partitioned Mondrian against single-process Mondrian (issue #28, "Past one machine").

Synthetic table of bench_mondrian.py (3 numeric + 2 categorical QIs, Adult-like), 10^6 records,
k-anonymity with k = 10. Single-process Mondrian, then the partitioned Mondrian with P = 2, 4, 8,
16 parts: exact cuts (Mondrian's own first log2 P levels; the publication must be identical) and
sample cuts (from a uniform sample of 10^5 records; on the local backend also of 10^4 and 10^3, the
share of the records a driver of a 10^8-record release holding 10^6 and 10^5 of them sees), on the local backend (parts one
after the other) and on a local Ray instance of 2 CPUs. Each case runs in a process of its own, so
the peak resident memory (``VmHWM``) is that driver's own; with Ray the parts run in Ray's worker
processes (not counted) and their arrays pass through Ray's shared-memory object store (counted
where the driver maps it). Every publication is verified (k-anonymity).

Per run (step = number of records): ``wall_s`` and ``driver_cpu_s`` (CPU time of the driver
process: all the work with the local backend, the driver's share with Ray; the machine is shared, so
wall times vary with its load) of the publish only (with Ray the instance is started and
its workers warmed on a small release first: ``ray_start_s``), ``peak_mb``, ``gcp_norm`` (normalized
GCP, numeric ranges over the schema's domain, as bench_mondrian.py), ``gcp_vs_single`` (gcp_norm /
single-process gcp_norm - 1: the information loss a partition costs), ``n_groups``,
``mean_group_size``, ``tasks`` (parts run), ``largest_task`` (records in the largest part),
``refused_cuts`` (sample cuts the model refused on all records), ``worker_peak_mb`` (Ray: the
largest peak resident memory of the Ray worker processes a probe task reached afterwards), ``identical`` (1 if the
publication equals single-process Mondrian's), ``violations`` (groups failing k: must be 0).

    python benchmarks/bench_partitioned_mondrian.py                       # print the table
    python benchmarks/bench_partitioned_mondrian.py --out experiments/results/bench_partitioned_mondrian.csv
    python benchmarks/bench_partitioned_mondrian.py --n 100000 --no-ray   # quick
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mondrian import K, peak_rss_kb, synthetic_release  # noqa: E402 - the same synthetic table

PARTITIONS = (2, 4, 8, 16)
SAMPLE = 100_000
SMALL_SAMPLES = (10_000, 1_000)  # local only: the loss of a driver that sees 1% and 0.1% of the records
RAY_CPUS = 2
CHILD_FLAG = "--child"


def worker_peak_kb() -> int:
    """``VmHWM`` of the process it runs in (a Ray worker; defined here, so Ray ships it by value)."""
    for line in open("/proc/self/status").read().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cases(with_ray: bool) -> list[tuple[str, dict]]:
    """(run label, partitioned_mondrian params; None = single-process Mondrian)."""
    out: list[tuple[str, dict | None]] = [("mondrian", None)]
    backends = ("local", "ray") if with_ray else ("local",)
    for backend in backends:
        for P in PARTITIONS:
            out.append((f"P{P}/exact/{backend}", {"partitions": P, "cuts": "exact", "backend": backend}))
            out.append((f"P{P}/sample/{backend}", {"partitions": P, "cuts": "sample", "sample": SAMPLE, "backend": backend}))
    for small in SMALL_SAMPLES:
        for P in PARTITIONS:
            out.append((f"P{P}/sample{small}/local", {"partitions": P, "cuts": "sample", "sample": small}))
    return out


def child(n: int, params: dict | None) -> None:
    """One case in this process: publish, verify, measure; one JSON line."""
    from cdpbench.data import History
    from cdpbench.metrics import utility
    from cdpbench.plugin import ModelContext, PublishContext
    from cdpbench.registry import default_registry

    release = synthetic_release(n)
    reg = default_registry()
    model = reg.create("privacy_model", "k_anonymity", {"k": K})
    mctx = ModelContext(release.schema, release.sensitive_distribution(), release=release)
    name = "mondrian" if params is None else "partitioned_mondrian"
    anonymizer = reg.create("anonymizer", name, params or {})
    out: dict = {}
    if params is not None and params.get("backend") == "ray":
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
        warm = synthetic_release(20_000, seed=1)  # start the workers and their imports before timing
        anonymizer.publish(warm, PublishContext(model, ModelContext(warm.schema, warm.sensitive_distribution()),
                                                History(), np.random.default_rng(0)))
        out["ray_start_s"] = time.perf_counter() - t0
    ctx = PublishContext(model, mctx, History(), np.random.default_rng(0))
    t0, c0 = time.perf_counter(), time.process_time()
    pub = anonymizer.publish(release, ctx)
    out["wall_s"] = time.perf_counter() - t0
    out["driver_cpu_s"] = time.process_time() - c0
    out["peak_mb"] = peak_rss_kb() / 1024
    if params is not None and params.get("backend") == "ray":
        probe = ray.remote(num_cpus=1)(worker_peak_kb)  # the Ray workers' own peaks (they are reused across tasks)
        out["worker_peak_mb"] = max(ray.get([probe.remote() for _ in range(4 * RAY_CPUS)])) / 1024
    report = model.verify(pub, mctx)
    assert report.satisfied, report
    out["violations"] = report.violations
    out["gcp_norm"] = utility.gcp(pub, release, ncp_range="domain")[1]
    out["n_groups"] = pub.n_groups
    out["mean_group_size"] = len(pub.row) / pub.n_groups
    for key in ("tasks", "largest_task", "refused_cuts"):
        if key in pub.info:
            out[key] = pub.info[key]
    out["digest"] = hashlib.sha1(pub.row.tobytes() + pub.group.tobytes() + pub.low.tobytes() + pub.high.tobytes()).hexdigest()
    print(json.dumps(out))


def run_case(n: int, params: dict | None) -> dict:
    proc = subprocess.run([sys.executable, __file__, CHILD_FLAG, str(n), json.dumps(params)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"case {params} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="records (default 10^6)")
    ap.add_argument("--no-ray", action="store_true", help="only the local backend")
    ap.add_argument("--out", type=Path, help="write the results CSV (run, metric, step, value)")
    args = ap.parse_args()

    rows, results = [], {}
    print(f"{args.n} synthetic records, k-anonymity k={K}, each case in its own process")
    print(f"{'run':<24} {'wall [s]':>9} {'peak [MB]':>10} {'GCP norm':>9} {'vs single':>10} {'groups':>8} "
          f"{'mean |Q|':>9} {'tasks':>6} {'largest':>8} {'refused':>8} {'identical':>9}")
    for label, params in cases(not args.no_ray):
        r = run_case(args.n, params)
        results[label] = r
        single = results["mondrian"]
        r["gcp_vs_single"] = r["gcp_norm"] / single["gcp_norm"] - 1.0
        r["identical"] = int(r["digest"] == single["digest"])
        print(f"{label:<24} {r['wall_s']:>9.2f} {r['peak_mb']:>10.0f} {r['gcp_norm']:>9.4f} {r['gcp_vs_single']:>+10.2%} "
              f"{r['n_groups']:>8d} {r['mean_group_size']:>9.2f} {r.get('tasks', 1):>6d} {r.get('largest_task', args.n):>8d} "
              f"{r.get('refused_cuts', 0):>8d} {r['identical']:>9d}"
              + (f"   (ray start {r['ray_start_s']:.1f} s)" if "ray_start_s" in r else ""), flush=True)
        for metric, value in r.items():
            if metric != "digest":
                rows.append((label, metric, args.n, value))
    if args.out:
        from cdpbench.tables import write_results

        write_results(args.out, rows)


if __name__ == "__main__":
    if CHILD_FLAG in sys.argv:
        i = sys.argv.index(CHILD_FLAG)
        child(int(sys.argv[i + 1]), json.loads(sys.argv[i + 2]))
    else:
        main()
