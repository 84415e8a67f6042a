"""Attack-matrix issue, acceptance 4 and the second half of acceptance 1: the ``permanent``
estimator's speed, and its Sinkhorn approximation's error against the exact form.

1. Speed: a 5,000-record publication, groups of 3-50 records (uniform sizes), values drawn from
   8 of a domain of 10 with skewed frequencies, Dirichlet priors; median of 3 (target <= 1 s).
   The groups whose count-state space exceeds ``max_states`` (default 20,000) are approximated:
   their number is printed.
2. Error: groups of 10-200 records with 2 or 3 distinct values (so the exact form stays
   computable), exact (``max_states`` large) against Sinkhorn (``max_states=1``): mean and
   largest absolute difference of the posteriors, 20 groups per size.

    python benchmarks/bench_permanent.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from cdpbench_classic.estimators.permanent import PermanentParams, permanent_posterior


def publication(rng, records=5000, m=10):
    sizes = []
    while sum(sizes) < records:
        sizes.append(int(rng.integers(3, 51)))
    sizes[-1] -= sum(sizes) - records
    sizes = [s for s in sizes if s > 0]
    segment = np.repeat(np.arange(len(sizes)), sizes)
    freq = rng.dirichlet(np.full(8, 0.7))
    sens = rng.choice(8, len(segment), p=freq)
    w = rng.dirichlet(np.full(m, 0.5), len(segment))
    return w, sens, segment, len(sizes), m


def main() -> None:
    rng = np.random.default_rng(0)
    w, sens, segment, G, m = publication(rng)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        _, approximated = permanent_posterior(w, sens, segment, G, m)
        times.append(time.perf_counter() - t0)
    print(f"5,000 records, {G} groups of 3-50: {statistics.median(times):.2f} s (target <= 1 s); "
          f"{approximated} groups approximated by Sinkhorn (count states > 20,000)")
    print(f"{'group size':>10s} {'values':>6s} {'mean |exact - sinkhorn|':>24s} {'max':>8s}")
    for k in (2, 3):
        for n in (10, 25, 50, 100, 200):
            if k == 3 and n > 100:
                continue  # (n/3 + 1)^3 states: the exact form gets slow
            errs = []
            for _ in range(20):
                s = rng.choice(k, n, p=rng.dirichlet(np.full(k, 2.0)))
                pw = rng.dirichlet(np.full(4, 0.5), n)
                seg = np.zeros(n, np.int64)
                exact, _ = permanent_posterior(pw, s, seg, 1, 4, PermanentParams(max_states=10**7))
                approx, _ = permanent_posterior(pw, s, seg, 1, 4, PermanentParams(max_states=1))
                errs.append(np.abs(exact - approx))
            e = np.concatenate([x.ravel() for x in errs])
            print(f"{n:10d} {k:6d} {e.mean():24.5f} {e.max():8.4f}", flush=True)


if __name__ == "__main__":
    main()
