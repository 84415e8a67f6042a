"""Sweeps issue, acceptance 5: sweep throughput of each launcher on this machine, and each
launcher's fixed start-up cost.

Whole processes (`cdpbench -m ...`), each in a fresh folder with its own SQLite store, `--rerun`
so nothing is skipped:

* the quickstart grid (5 jobs) through `joblib` (n_jobs=2), `ray` (a local Ray instance started
  by the launcher) and `submitit_local`: wall time and jobs per minute;
* a 1-job sweep (the grid narrowed to k_anonymity, k=2) through each launcher and `basic` (in the
  launching process): the launcher's fixed cost is its time minus basic's.

    python benchmarks/bench_launchers.py [repeats]       # default 1; medians when more
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CDPBENCH = Path(sys.executable).parent / "cdpbench"
GRID = ["-m", "+experiment=quickstart", "progress=false", "--rerun"]
ONE = [*GRID, "privacy_model=k_anonymity", "privacy_model.k=2"]
LAUNCHERS = {
    "basic": ["hydra/launcher=basic"],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "ray": ["hydra/launcher=ray"],
    "submitit_local": ["hydra/launcher=submitit_local"],
}


def timed(args: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db", "CDPBENCH_CONF": str(REPO / "conf")}
        t0 = time.perf_counter()
        proc = subprocess.run([str(CDPBENCH), *args], cwd=tmp, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"cdpbench {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
        return dt


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    one = {name: statistics.median(timed([*ONE, *flags]) for _ in range(repeats)) for name, flags in LAUNCHERS.items()}
    print(f"{'launcher':16s} {'1-job sweep':>12s} {'fixed cost':>11s} {'9-job grid':>11s} {'jobs/min':>9s}")
    for name, flags in LAUNCHERS.items():
        grid = statistics.median(timed([*GRID, *flags]) for _ in range(repeats))
        print(f"{name:16s} {one[name]:11.1f}s {one[name] - one['basic']:10.1f}s {grid:10.1f}s {9 / grid * 60:9.1f}", flush=True)


if __name__ == "__main__":
    main()
