"""Speed of the bkseq data set (cdpbench-jsreduce): model build, releases, corpora.

Rows: building the model (weekly matrices, 19^4 transition tensor, discharge calibration by
bisection on the exact expected counts, 1/2-step marginals; uncached), the 24 default releases
(5,000 tuples each, ``Schema.encode`` included), an SPM corpus of the paper's size and a
large one. Prints one table; run with ``python -m benchmarks bkseq``.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from cdpbench_jsreduce.datasets.bkseq import BKseq, build_model


def measure(label: str, work) -> tuple[str, str, float, float]:
    tracemalloc.start()
    t0 = time.perf_counter()
    out = work()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return label, out, seconds, peak


def main() -> None:
    build_model.cache_clear()
    rows = [measure("model build + calibration", lambda: f"discharge {BKseq().model.discharge:.4f}")]
    ds = BKseq()
    rows.append(
        measure(
            "releases 24 x 5,000 (encoded)",
            lambda: f"{sum(len(r) for r in ds.releases(np.random.default_rng(1))):,} tuples",
        )
    )
    rows.append(measure("corpus 24 x 5,000", lambda: f"{ds.model.corpus(24, 5_000, 2).shape[0]:,} individuals"))
    rows.append(measure("corpus 24 x 200,000", lambda: f"{ds.model.corpus(24, 200_000, 3).shape[0]:,} individuals"))
    print(f"{'what':32} {'result':>24} {'seconds':>8} {'peak MiB':>9}")
    for label, out, seconds, peak in rows:
        print(f"{label:32} {out:>24} {seconds:8.3f} {peak:9.1f}")


if __name__ == "__main__":
    main()
