"""Speed of the core data sets: time to produce every release (encoding included).

Rows: the two Adult scenarios with their defaults, the churn process over a synthetic base of
1,000,000 rows (numeric + categorical QIs, 20 releases of ~200,000 records), and a 10-file CSV
round trip. Prints one table; run with ``python -m benchmarks datasets``.
"""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from cdpbench.datasets.adult import AdultContinuous, load_adult
from cdpbench.datasets.churn import Churn, churn_process
from cdpbench.datasets.csvfiles import CsvReleases, CsvReleasesParams
from cdpbench.schema import CategoricalQI, NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy


def measure(label: str, make) -> tuple[str, int, int, float, float]:
    tracemalloc.start()
    t0 = time.perf_counter()
    sizes = [len(r) for r in make()]
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return label, len(sizes), sum(sizes), seconds, peak


def synthetic_base(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, Schema]:
    cities = [f"c{i}" for i in range(50)]
    values = [f"v{i}" for i in range(20)]
    base = pd.DataFrame(
        {
            "age": rng.integers(18, 91, n),
            "income": rng.integers(0, 200_000, n),
            "city": np.asarray(cities, dtype=object)[rng.integers(0, 50, n)],
            "disease": np.asarray(values, dtype=object)[rng.integers(0, 20, n)],
        }
    )
    schema = Schema(
        (NumericQI("age", 18, 90), NumericQI("income", 0, 200_000), CategoricalQI("city", Taxonomy.flat(cities))),
        Sensitive("disease", tuple(values)),
    )
    return base, schema


def main() -> None:
    load_adult()  # parse once, outside the timings
    rng = np.random.default_rng(0)
    base, schema = synthetic_base(1_000_000, rng)
    rows = [
        measure("adult (24 x 4,000)", lambda: AdultContinuous().releases(np.random.default_rng(1))),
        measure("churn (20 releases, 10,000 -> 16,875)", lambda: Churn().releases(np.random.default_rng(1))),
        measure(
            "churn_process, 1M-row base, 20 x ~200k",
            lambda: churn_process(
                base, schema, initial=200_000, deletions=20_000, insertions=30_000, updates=20_000,
                reinsertions=5_000, releases=20, rng=np.random.default_rng(1),
            ),
        ),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        releases = list(AdultContinuous().releases(np.random.default_rng(2)))[:10]
        for r in releases:
            r.to_frame().to_csv(folder / f"release_{r.t}.csv", index=False)
        (folder / "hier").mkdir()
        edu = releases[0].schema.qi[2].values
        (folder / "schema.yaml").write_text(
            "respondent: id\nqi:\n  - {name: age, type: numeric, low: 17, high: 90}\n"
            "  - {name: sex, type: categorical, values: [Male, Female]}\n"
            f"  - {{name: education, type: categorical, values: [{', '.join(edu)}]}}\n"
            f"sensitive: {{name: occupation, values: [{', '.join(releases[0].schema.sensitive.values)}]}}\n"
        )
        params = CsvReleasesParams(files=str(folder / "release_*.csv"), schema=str(folder / "schema.yaml"))
        rows.append(measure("csv (10 files x 4,000)", lambda: CsvReleases(params).releases(np.random.default_rng(0))))
    print(f"{'data set':<42} {'releases':>8} {'records':>11} {'seconds':>8} {'records/s':>11} {'peak MiB':>9}")
    for label, n, records, seconds, peak in rows:
        print(f"{label:<42} {n:>8} {records:>11,} {seconds:>8.2f} {records / seconds:>11,.0f} {peak:>9.1f}")


if __name__ == "__main__":
    main()
