"""Do two checkouts compute the same numbers for every preset? (A refactoring's check.)

    python tools/compare_presets.py run  --cdpbench OLD/.venv/bin/cdpbench --conf OLD/conf --out /tmp/old
    python tools/compare_presets.py run  --cdpbench .venv/bin/cdpbench --conf conf --out /tmp/new
    python tools/compare_presets.py diff /tmp/old /tmp/new

``run`` lists every preset's jobs with the given installation's own planner (so each checkout
reads its own presets, whatever syntax they use), and runs a sample of them — the first, the
middle and the last job of each sweep — as single runs cut to ``--releases`` releases, untracked,
each in its own folder (``<out>/<preset>/<job>/metrics.csv``, the job's overrides in
``overrides.txt``). ``diff`` compares the metrics of the two runs bit for bit, wall times
(``time_*``) aside, and prints one line per preset: ``same``, or the first differing cell. Exit 1
when any differs or is missing on one side.

Cut short on purpose: two releases exercise every component (the anonymizer, the model, the
attackers' first revision and the metrics) in seconds; the full presets take hours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

LIST_JOBS = r"""
import json, sys
from pathlib import Path
from cdpbench import launch
from cdpbench.presets import preset_names
hydra = launch.hydra_instance(Path(sys.argv[1]))
out = {}
for name in preset_names():
    try:
        plan = launch.prepare(hydra, [f"+experiment={name}"], multirun=True, large_grid=True)
        out[name] = [list(j.overrides) for j in plan.jobs]
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


#: where a data set's number of releases is, tried in turn (a data set wrapping another has it in
#: its reference, e.g. ksaa's bkseq_sequential); None: run it whole
RELEASE_KEYS = ("dataset.releases", "dataset.bkseq.releases", None)


def sample(n: int) -> list[int]:
    return sorted({0, n // 2, n - 1}) if n else []


def run(args: argparse.Namespace) -> int:
    python = str(Path(args.cdpbench).with_name("python"))
    env_conf = str(Path(args.conf).resolve())
    import os

    env = {**os.environ, "CDPBENCH_CONF": env_conf}
    listed = subprocess.run([python, "-c", LIST_JOBS, env_conf], capture_output=True, text=True, env=env, cwd=args.out)
    if listed.returncode != 0:
        print(listed.stderr, file=sys.stderr)
        return 2
    jobs = json.loads(listed.stdout.strip().splitlines()[-1])
    out = Path(args.out)
    for preset, job_list in sorted(jobs.items()):
        if args.presets and not any(p in preset for p in args.presets):
            continue
        if isinstance(job_list, str):
            print(f"{preset}: cannot be planned: {job_list}")
            continue
        for i in sample(len(job_list)):
            folder = out / preset / str(i)
            if (folder / "metrics.csv").exists():
                continue
            folder.mkdir(parents=True, exist_ok=True)
            overrides = [o for o in job_list[i] if not o.startswith(("hydra.mode=", "hydra.sweep.dir="))]
            base = [args.cdpbench, *overrides, "hydra.mode=RUN", f"hydra.run.dir={folder}", "tracking.enabled=false",
                    "progress=false"]
            (folder / "overrides.txt").write_text("\n".join(overrides) + "\n")
            for cut in RELEASE_KEYS:  # the first key the data set has
                proc = subprocess.run([*base, f"{cut}={args.releases}"] if cut else base, capture_output=True, text=True,
                                      env=env, cwd=out)
                if proc.returncode == 0 or "releases" not in proc.stderr:
                    break
            status = "ok" if proc.returncode == 0 else "FAILED: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
            (folder / "status.txt").write_text(status + "\n")
            print(f"{preset} job {i + 1}/{len(job_list)}: {status}", flush=True)
    return 0


def diff(args: argparse.Namespace) -> int:
    import pandas as pd

    old, new = Path(args.old), Path(args.new)
    bad = 0
    presets = sorted({p.parent.parent.relative_to(side) for side in (old, new) for p in side.rglob("status.txt")})
    for preset in presets:
        lines = []
        jobs = {p.name for side in (old, new) if (side / preset).is_dir() for p in (side / preset).iterdir() if p.is_dir()}
        for job in sorted(jobs, key=int):
            a, b = old / preset / job / "metrics.csv", new / preset / job / "metrics.csv"
            if not a.exists() or not b.exists():
                sa = (old / preset / job / "status.txt").read_text().strip() if (old / preset / job / "status.txt").exists() else "missing"
                sb = (new / preset / job / "status.txt").read_text().strip() if (new / preset / job / "status.txt").exists() else "missing"
                if sa == sb and sa != "ok":
                    lines.append(f"job {job}: fails alike ({sa})")
                    continue
                lines.append(f"job {job}: old {sa}, new {sb}")
                bad += 1
                continue
            da, db = pd.read_csv(a, index_col=0), pd.read_csv(b, index_col=0)
            da = da[[c for c in da.columns if not c.startswith("time_")]]
            db = db[[c for c in db.columns if not c.startswith("time_")]]
            if list(da.columns) != list(db.columns) or da.shape != db.shape:
                lines.append(f"job {job}: columns differ: only old {sorted(set(da) - set(db))}, only new {sorted(set(db) - set(da))}")
                bad += 1
                continue
            equal = (da.values == db.values) | (pd.isna(da.values) & pd.isna(db.values))
            if not equal.all():
                r, c = [int(x[0]) for x in (~equal).nonzero()]
                lines.append(f"job {job}: {da.columns[c]} at release {da.index[r]}: {da.iat[r, c]!r} != {db.iat[r, c]!r}")
                bad += 1
            else:
                lines.append(f"job {job}: same ({da.size} numbers)")
        print(f"{preset}: " + "; ".join(lines))
    print(f"{len(presets)} presets, {bad} job(s) differ or missing")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cdpbench", required=True)
    r.add_argument("--conf", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--releases", type=int, default=2)
    r.add_argument("--presets", nargs="*", help="only presets whose name contains one of these")
    d = sub.add_parser("diff")
    d.add_argument("old")
    d.add_argument("new")
    args = ap.parse_args()
    if args.cmd == "run":
        Path(args.out).mkdir(parents=True, exist_ok=True)
        args.out = str(Path(args.out).resolve())
        return run(args)
    return diff(args)


if __name__ == "__main__":
    sys.exit(main())
