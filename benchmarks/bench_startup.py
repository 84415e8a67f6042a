"""Speed issue, acceptance 1 and 2: whole-process times, as a user meets them.

Each command runs as its own process (medians of ``REPEAT`` alternating runs), in a scratch folder:
``cdpbench --help``, ``cdpbench plugins``, a 1-release Adult run into an existing MLflow store,
into a fresh one (the store's tables are created on first use) and without MLflow, and the imports that
dominate a run (``mlflow.tracking``, ``matplotlib.pyplot``, ``pandas``, ``hydra``), each alone.
With ``--sweep``: the quickstart grid with ``hydra.launcher.n_jobs=1`` and ``=2`` (``--rerun``, so
that no job is skipped as already FINISHED), into MLflow and without it, medians of ``REPEAT``
alternating runs (about 1.5 minutes).

    python -m benchmarks startup            # or: python benchmarks/bench_startup.py [--sweep]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEAT = 3
BIN = Path(sys.executable).parent
CDPBENCH = str(BIN / "cdpbench")


def wall(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {tail[0]}")
    return took


def main() -> None:
    sweep = "--sweep" in sys.argv[1:]
    scratch = Path(tempfile.mkdtemp(prefix="cdpbench-startup-"))
    one_release = [CDPBENCH, "dataset.releases=1", "progress=false"]
    cases = {
        "cdpbench --help": ([CDPBENCH, "--help"], None),
        "cdpbench plugins": ([CDPBENCH, "plugins"], None),
        "1-release Adult run, existing store": (one_release, None),
        "1-release Adult run, fresh store": (one_release, "fresh"),
        "1-release Adult run, tracking.enabled=false": ([*one_release, "tracking.enabled=false"], None),
        "import mlflow.tracking": ([sys.executable, "-c", "import mlflow.tracking"], None),
        "import matplotlib.pyplot": ([sys.executable, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"], None),
        "import pandas": ([sys.executable, "-c", "import pandas"], None),
        "import hydra + omegaconf": ([sys.executable, "-c", "import hydra, omegaconf"], None),
        "python -c pass": ([sys.executable, "-c", "pass"], None),
    }
    try:
        wall(one_release, scratch)  # create the store once: "existing store" runs find it
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(REPEAT):  # alternate the cases, so a busy moment hits all of them
            for name, (cmd, mode) in cases.items():
                if mode == "fresh":
                    shutil.rmtree(scratch / "fresh", ignore_errors=True)
                    (scratch / "fresh").mkdir()
                    times[name].append(wall(cmd, scratch / "fresh"))
                else:
                    times[name].append(wall(cmd, scratch))
        print(f"whole-process wall times, median of {REPEAT} (min..max), {os.cpu_count()} cores")
        for name, ts in times.items():
            print(f"  {name:44s} {statistics.median(ts):6.2f} s   ({min(ts):.2f}..{max(ts):.2f})")
        print("targets: --help <= 1 s, plugins <= 1 s, 1-release Adult run <= 2.5 s")
        if sweep:
            # --rerun: the same grid in the same store would otherwise skip every FINISHED job
            grid = [CDPBENCH, "-m", "+experiment=quickstart", "hydra/launcher=joblib", "progress=false", "--rerun"]
            for label, extra in (("into MLflow", []), ("tracking.enabled=false", ["tracking.enabled=false"])):
                serial, parallel = [], []
                for _ in range(REPEAT):  # alternating
                    serial.append(wall([*grid, *extra, "hydra.launcher.n_jobs=1"], scratch))
                    parallel.append(wall([*grid, *extra, "hydra.launcher.n_jobs=2"], scratch))
                s1, s2 = statistics.median(serial), statistics.median(parallel)
                print(f"  quickstart sweep (5 jobs) {label:24s} n_jobs=1 {s1:5.1f} s, n_jobs=2 {s2:5.1f} s: "
                      f"x{s1 / s2:.2f} (target >= 1.6; medians of {REPEAT})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
