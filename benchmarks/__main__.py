"""`make bench` / `python -m benchmarks [NAME ...]`: run every benchmarks/bench_*.py script in turn
(with names: only the scripts whose name holds one of them), each with its own default arguments."""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path


def main(only: list[str], here: Path = Path(__file__).parent) -> int:
    for script in sorted(here.glob("bench_*.py")):
        if only and not any(o in script.stem for o in only):
            continue
        print(f"\n=== {script.stem} ===", flush=True)
        t0 = time.perf_counter()
        argv = sys.argv
        sys.argv = [str(script)]  # the names chose the script; they are not its arguments
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise
        finally:
            sys.argv = argv
        print(f"({script.stem}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
