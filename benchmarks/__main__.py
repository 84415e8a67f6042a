"""`make bench` / `python -m benchmarks`: run every benchmarks/bench_*.py script in turn."""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    only = sys.argv[1:]
    for script in sorted(here.glob("bench_*.py")):
        if only and not any(o in script.stem for o in only):
            continue
        print(f"\n=== {script.stem} ===", flush=True)
        t0 = time.perf_counter()
        runpy.run_path(str(script), run_name="__main__")
        print(f"({script.stem}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
