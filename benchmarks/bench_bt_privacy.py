"""Speed and peak memory of the (B,t)-privacy pieces on UCI Adult (30,162 complete rows).

* kernel_prior: the kernel prior of every record, 5 QIs (age, education, marital-status, race,
  sex) and 7 QIs (+ workclass, native-country), for several bandwidths B (B = 2: every pair of
  records is inside the kernel's support, the worst case);
* the Ω-estimate + JS distance of (B,t)-privacy's ``accepts`` over all records at once, groups of
  about 10 records;
* the snapshot attacker's ``observe`` (kernel prior + Ω-estimate) on the same partition.

Each kernel_prior configuration runs in a fresh process so the peak RSS it reports is its own.
Run: ``python benchmarks/bench_bt_privacy.py`` (or ``make bench``).
"""

from __future__ import annotations

import resource
import time
import multiprocessing as mp

import numpy as np

QI5 = ["age", "education", "marital-status", "race", "sex"]
QI7 = QI5 + ["workclass", "native-country"]


def adult_release(qis: list[str]):
    from cdpbench.datasets.adult import adult_release as release

    return release(qis, "occupation")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_kernel_prior(qis: list[str], bandwidth: float) -> tuple[int, float, float, float]:
    from cdpbench_classic.knowledge.kernel import kernel_prior

    rel = adult_release(qis)
    base = _peak_mb()
    t0 = time.perf_counter()
    prior = kernel_prior(rel, bandwidth)
    seconds = time.perf_counter() - t0
    assert np.allclose(prior.sum(axis=1), 1.0)
    unique = len(np.unique(rel.qi, axis=0))
    return unique, seconds, base, _peak_mb()


def in_fresh_process(fn, *args):
    """Run ``fn(*args)`` in a forked child (the target is not pickled, so this works under runpy)."""
    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        send.send(fn(*args))
        send.close()

    proc = ctx.Process(target=child)
    proc.start()
    result = receive.recv()
    proc.join()
    return result


def main() -> None:
    print("kernel_prior on Adult (n = 30,162); each row in a fresh process")
    print(f"{'QIs':>4} {'unique':>7} {'B':>5} {'seconds':>8} {'peak RSS MB':>12} {'(+ over load)':>14}")
    configs = [(QI5, b) for b in (0.1, 0.3, 0.5, 1.0, 2.0)] + [(QI7, b) for b in (0.3, 1.0, 2.0)]
    for qis, b in configs:
        unique, seconds, base, peak = in_fresh_process(time_kernel_prior, qis, b)
        print(f"{len(qis):>4} {unique:>7} {b:>5} {seconds:>8.2f} {peak:>12.0f} {peak - base:>14.0f}")

    from cdpbench.data import GroupBatch, Publication
    from cdpbench.plugin import AttackContext, ModelContext
    from cdpbench_classic.privacy_models.bt_privacy import BTPrivacy, BTPrivacyParams
    from cdpbench_classic.attackers.snapshot import Snapshot, SnapshotParams

    rel = adult_release(QI5)
    n = len(rel)
    rng = np.random.default_rng(0)
    # groups of ~10 records of similar QI (sorted by age, then cut), as an anonymizer would form
    order = np.lexsort(rel.qi.T[::-1])
    group = np.empty(n, dtype=np.int64)
    group[order] = np.arange(n) // 10
    model = BTPrivacy(BTPrivacyParams(B=0.3, t=0.2))
    ctx = ModelContext(schema=rel.schema, table_distribution=rel.sensitive_distribution(), release=rel)
    model.prepare(rel, ctx)
    batch = GroupBatch(rel.sensitive, group, int(group.max()) + 1, rel.n_values, ctx.prior, rel.qi)
    reps = 5
    t0 = time.perf_counter()
    for _ in range(reps):
        ok = model.accepts(batch, ctx)
    accepts_s = (time.perf_counter() - t0) / reps
    print(f"\nBTPrivacy.accepts, {batch.n_groups} groups of 10 (all {n} records): {accepts_s * 1e3:.1f} ms "
          f"({int(ok.sum())} accepted at t=0.2)")

    pub = Publication.from_partition(rel, group)
    view = pub.public()
    attacker = Snapshot(SnapshotParams(knowledge="kernel", bandwidth=0.3, estimator="omega"))
    t0 = time.perf_counter()
    result = attacker.observe(view, AttackContext(rel, [view], rng))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    attacker.observe(view, AttackContext(rel, [view], rng))
    cached = time.perf_counter() - t0
    print(f"Snapshot.observe (kernel B=0.3 + omega): {first:.2f} s first call, {cached * 1e3:.1f} ms with the "
          f"population prior cached; posterior {result.posterior.shape}")


if __name__ == "__main__":
    main()
