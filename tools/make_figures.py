"""Draw the committed figures again from a store's latest sweeps (experiments/figures/figures.txt).

    python tools/make_figures.py --cdpbench .venv/bin/cdpbench [--only bayframe/] [--figures DIR]

Each line of figures.txt names a target under the figures folder, the MLflow experiment whose
latest sweep it draws and the `cdpbench report` arguments. The store is the one `cdpbench report`
uses ($MLFLOW_TRACKING_URI). Every figure names, under its axes, the commit and lock of its runs
(cdpbench.provenance.source_note). Exit 1 if a figure could not be drawn (the others are drawn).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def recipes(path: Path) -> list[tuple[str, str, list[str]]]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            target, experiment, *args = shlex.split(line)
            out.append((target, experiment, args))
    return out


def draw(cdpbench: str, target: str, experiment: str, args: list[str], figures: Path) -> str | None:
    """Draw one figure into ``figures``; returns None, or why it could not be drawn."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([cdpbench, "report", "--latest", "--experiment", experiment, *args, "--out", tmp],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return (proc.stderr.strip().splitlines() or ["failed"])[-1]
        plot = Path(re.search(r"^plot:\s+(\S+)", proc.stdout, re.M).group(1))
        tables = [Path(m) for m in re.findall(r"^table:\s+(\S+)\.csv/", proc.stdout, re.M)]
        dest = figures / target
        if target.endswith("/"):  # the plot and its tables under their own names
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plot, dest / plot.name)
            for stem in tables:
                for ext in (".md", ".tex"):
                    if stem.with_suffix(ext).exists():
                        shutil.copy2(stem.with_suffix(ext), dest / (stem.name + ext))
        elif target.endswith(".png"):
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plot, dest)
        else:  # a matrix: NAME.png and its LaTeX table NAME.tex
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plot, dest.with_suffix(".png"))
            tex = [s for s in tables if s.with_suffix(".tex").exists()]
            if not tex:
                return "no LaTeX table was written"
            shutil.copy2(tex[0].with_suffix(".tex"), dest.with_suffix(".tex"))
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cdpbench", default=str(REPO / ".venv" / "bin" / "cdpbench"))
    ap.add_argument("--figures", type=Path, default=REPO / "experiments" / "figures")
    ap.add_argument("--only", default="", help="draw only the targets starting with this")
    args = ap.parse_args(argv)
    failed = 0
    for target, experiment, rargs in recipes(REPO / "experiments" / "figures" / "figures.txt"):
        if not target.startswith(args.only):
            continue
        why = draw(args.cdpbench, target, experiment, rargs, args.figures)
        print(f"{'FAILED' if why else 'drawn '} {target}" + (f": {why}" if why else ""))
        failed += bool(why)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
