"""Mutation check of the modules that compute the papers' quantities, on cosmic-ray.

    python mutation/run.py [--tree DIR] [--plugins classic,bcf] [--sample N] [--out FILE.csv]

1. Copies the working tree ``--tree`` (default: this repository, uncommitted changes included;
   without .git, .venv, outputs/, caches) to a scratch folder; the real files are never touched.
2. Runs every test with ``PYTHONPATH=<copy>/src:<copy>/plugins/*/src`` so that the copy shadows
   the editable installs of the venv, and checks that it does: every mutated module must import
   from the copy, and a copy whose plugin ``__init__`` raises must fail the plugin's tests.
3. Per plugin of ``modules.toml``: times the plugin's unmutated tests (they must pass), lets
   ``cosmic-ray init`` list every mutant of the listed modules, keeps a fixed sample (below), marks
   the others skipped in cosmic-ray's session database, and runs ``cosmic-ray exec`` (the local,
   one-process distributor: one mutant at a time, the plugin's tests with -x and a timeout).
4. Writes one row per sampled mutant (plugin, module, line, operator, outcome, ...) to ``--out``
   (CSV) and the survivors' diffs to ``<out>.survivors.txt``; prints mutants/caught/share per plugin.

Sampling: a mutant's stable key is (plugin, module, operator, the text of its source line, the
mutated text, its rank among mutants with the same key); the ``sample`` mutants of a plugin with
the smallest ``sha256(seed | key)`` are run. The key holds no line number or occurrence index, so
a mutant of a line that did not change keeps its hash when other lines change: two trees whose
code is the same run the same mutants, and trees that differ a little share most of them.
Mutants inside type annotations are dropped before sampling (equivalent under
``from __future__ import annotations``).
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
_ANYWHERE = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis", "*.egg-info")


def _ignore(tree: Path):
    top = {".git", ".venv", "outputs", "mlruns"}

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = set(_ANYWHERE(folder, names))
        if Path(folder) == tree:
            skip |= top & set(names)
        if Path(folder) == tree / "mutation":
            skip |= {"results"} & set(names)
        return skip

    return ignore


def copy_tree(tree: Path) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="cdpbench-mutate-"))
    copy = scratch / "tree"
    shutil.copytree(tree, copy, ignore=_ignore(tree), symlinks=True)
    return copy


def test_env(copy: Path) -> dict[str, str]:
    paths = [str(copy / "src")] + sorted(str(p) for p in (copy / "plugins").glob("*/src"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    return env


def pytest_command(plugin: str, settings: dict) -> list[str]:
    return [sys.executable, "-m", "pytest", f"plugins/cdpbench-{plugin}", *settings["pytest_args"]]


def check_shadow(copy: Path, plugin: str, modules: list[str], settings: dict) -> None:
    """The copy, not the editable install, is what the tests import."""
    env = test_env(copy)
    names = [m[:-3].replace("/", ".") for m in modules]
    code = "import importlib\n" + "".join(
        f"print(importlib.import_module({n!r}).__file__)\n" for n in ["cdpbench", *names]
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    outside = [f for f in out if not Path(f).resolve().is_relative_to(copy.resolve())]
    if outside:
        sys.exit(f"the copy does not shadow the installed packages: {outside}")
    init = copy / "plugins" / f"cdpbench-{plugin}" / "src" / f"cdpbench_{plugin}" / "__init__.py"
    original = init.read_text()
    init.write_text(original + "\nraise RuntimeError('mutation shadow check')\n")
    try:
        run = subprocess.run(pytest_command(plugin, settings), cwd=copy, env=env,
                             capture_output=True, text=True)
    finally:
        init.write_text(original)
    if run.returncode == 0 or "mutation shadow check" not in run.stdout + run.stderr:
        sys.exit(f"{plugin}: a broken copy did not fail the tests: the copy is not what they import")


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions (line, character column) of every type annotation."""
    lines = source.splitlines()

    def char_col(line: int, byte_col: int) -> int:
        return len(lines[line - 1].encode()[:byte_col].decode(errors="ignore"))

    spans = []
    for node in ast.walk(ast.parse(source)):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            anns.append(node.returns)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            anns.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for a in anns:
            spans.append(((a.lineno, char_col(a.lineno, a.col_offset)),
                          (a.end_lineno, char_col(a.end_lineno, a.end_col_offset))))
    return spans


def cosmic_ray(*args: str, cwd: Path, env: dict) -> None:
    subprocess.run([sys.executable, "-m", "cosmic_ray.cli", *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def run_plugin(copy: Path, plugin: str, modules: list[str], settings: dict, sample: int,
               only: set[str] | None = None) -> list[dict]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    env = test_env(copy)
    check_shadow(copy, plugin, modules, settings)
    started = time.monotonic()
    base = subprocess.run(pytest_command(plugin, settings), cwd=copy, env=env, capture_output=True,
                          text=True)
    baseline = time.monotonic() - started
    if base.returncode != 0:  # nothing to learn from mutants: skip the plugin, run it again later
        print(f"{plugin}: SKIPPED, the unmutated tests fail in the copy:\n{base.stdout[-2000:]}", flush=True)
        return []
    timeout = settings["timeout_factor"] * baseline + settings["timeout_slack"]

    src = copy / "plugins" / f"cdpbench-{plugin}" / "src"
    paths = [src / m for m in modules]
    session = copy.parent / f"{plugin}.sqlite"
    config = copy.parent / f"{plugin}.toml"
    command = " ".join(pytest_command(plugin, settings))
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {[str(p) for p in paths]!r}\n"
        f"timeout = {timeout:.1f}\n"
        "excluded-modules = []\n"
        f"test-command = {command!r}\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n"
    )
    cosmic_ray("init", str(config), str(session), cwd=copy, env=env)

    sources = {p: p.read_text() for p in paths}
    spans = {p: annotation_spans(s) for p, s in sources.items()}
    lines = {p: s.splitlines() for p, s in sources.items()}
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = sorted(db.work_items, key=lambda w: (str(w.mutations[0].module_path),
                                                     w.mutations[0].operator_name,
                                                     tuple(w.mutations[0].start_pos)))
        keyed, ranks, dropped = [], Counter(), []
        for w in items:
            m = w.mutations[0]
            path = Path(m.module_path)
            (l0, c0), (l1, c1) = m.start_pos, m.end_pos
            if any(s <= (l0, c0) and (l1, c1) <= e for s, e in spans[path]):
                dropped.append(w.job_id)
                continue
            text = lines[path][l0 - 1]
            span = text[c0:c1] if l0 == l1 else text[c0:]
            base_key = (plugin, path.relative_to(src).as_posix(), m.operator_name,
                        repr(m.operator_args), text.strip(), span.strip())
            ranks[base_key] += 1
            key = "|".join([settings["seed"], *base_key, str(ranks[base_key])])
            keyed.append((hashlib.sha256(key.encode()).hexdigest(), w))
        keyed.sort(key=lambda kw: kw[0])
        if only is not None:  # the listed mutants (by key) that this tree still has
            chosen = [(h, w) for h, w in keyed if h[:16] in only]
        else:
            chosen = keyed[:sample]
        ids = {w.job_id for _, w in chosen}
        skip = [w.job_id for _, w in keyed if w.job_id not in ids] + dropped
        db.set_multiple_results(skip, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    print(f"{plugin}: {len(items)} mutants ({len(dropped)} in annotations), running {len(chosen)}; "
          f"unmutated tests {baseline:.1f} s, timeout {timeout:.0f} s", flush=True)

    started = time.monotonic()
    cosmic_ray("exec", str(config), str(session), cwd=copy, env=env)
    elapsed = time.monotonic() - started

    hashes = {w.job_id: h for h, w in chosen}
    rows = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for w, r in db.completed_work_items:
            if w.job_id not in hashes:
                continue
            m = w.mutations[0]
            path = Path(m.module_path)
            if r.worker_outcome != WorkerOutcome.NORMAL:
                outcome = "incompetent" if r.worker_outcome == WorkerOutcome.EXCEPTION else r.worker_outcome.value
            elif r.test_outcome == TestOutcome.KILLED:
                outcome = "timeout" if r.output == "timeout" else "killed"
            else:
                outcome = r.test_outcome.value
            rows.append({
                "plugin": plugin,
                "module": path.relative_to(src).as_posix(),
                "line": m.start_pos[0],
                "col": m.start_pos[1],
                "operator": m.operator_name,
                "outcome": outcome,
                "source": lines[path][m.start_pos[0] - 1].strip(),
                "key": hashes[w.job_id][:16],
                "diff": "\n".join(l for l in (r.diff or "").splitlines()
                                  if l[:1] in "+-" and not l.startswith(("---", "+++"))),
            })
    rows.sort(key=lambda r: (r["module"], r["line"], r["col"], r["operator"]))
    print(f"{plugin}: {len(rows)} mutants run in {elapsed:.0f} s", flush=True)
    return rows


CAUGHT = {"killed", "timeout"}


def table(rows: list[dict]) -> str:
    by = defaultdict(list)
    for r in rows:
        by[r["plugin"]].append(r)
    out = ["| plugin | mutants | caught | survived | share caught |", "| --- | ---: | ---: | ---: | ---: |"]
    for plugin, rs in by.items():
        counted = [r for r in rs if r["outcome"] in CAUGHT | {"survived"}]
        caught = sum(r["outcome"] in CAUGHT for r in counted)
        share = caught / len(counted) if counted else float("nan")
        out.append(f"| {plugin} | {len(counted)} | {caught} | {len(counted) - caught} | {share:.0%} |")
    other = Counter(r["outcome"] for r in rows if r["outcome"] not in CAUGHT | {"survived"})
    if other:
        out.append(f"(not counted: {dict(other)})")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=REPO, help="working tree to copy (default: this repo)")
    parser.add_argument("--plugins", help="comma-separated subset of modules.toml's plugins")
    parser.add_argument("--sample", type=int, help="mutants per plugin (default: modules.toml)")
    parser.add_argument("--config", type=Path, default=HERE / "modules.toml")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "latest.csv")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument("--table", type=Path, nargs="+", metavar="CSV",
                        help="only print the table of results files (and, for two, the mutants they share)")
    parser.add_argument("--tidy", type=Path, metavar="CSV",
                        help="with --table BEFORE AFTER: also write the counts as a results file that "
                        "`cdpbench tables` renders mutation/README.md from")
    parser.add_argument("--survivors-of", type=Path, metavar="CSV",
                        help="run only the mutants that survived in this results file (same keys), not the sample")
    parser.add_argument("--update", action="store_true",
                        help="keep --out's rows of the plugins not run now (run plugins one at a time)")
    args = parser.parse_args()

    if args.table:
        show_tables(args.table, args.tidy)
        return
    config = tomllib.loads(args.config.read_text())
    settings = config["settings"]
    sample = args.sample or settings["sample"]
    plugins = config["plugins"]
    chosen = args.plugins.split(",") if args.plugins else list(plugins)

    only: dict[str, set[str]] | None = None
    if args.survivors_of:
        only = defaultdict(set)
        with args.survivors_of.open(newline="") as f:
            for r in csv.DictReader(f):
                if r["outcome"] == "survived":
                    only[r["plugin"]].add(r["key"])
        chosen = [p for p in chosen if p in only]

    copy = copy_tree(args.tree.resolve())
    print(f"scratch copy of {args.tree.resolve()}: {copy}", flush=True)
    rows: list[dict] = []
    if args.update and args.out.exists():
        with args.out.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["plugin"] not in chosen]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for plugin in chosen:
            rows += run_plugin(copy, plugin, plugins[plugin]["modules"], settings, sample,
                               None if only is None else only[plugin])
            order = {p: i for i, p in enumerate(plugins)}
            rows.sort(key=lambda r: order.get(r["plugin"], len(order)))
            write(rows, args.out)
    finally:
        if not args.keep:
            shutil.rmtree(copy.parent, ignore_errors=True)
    print(table(rows))


def counts(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Per plugin (and ``all``): ``(mutants counted, caught)``."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if r["outcome"] in CAUGHT | {"survived"}:
            for key in (r["plugin"], "all"):
                c = out.setdefault(key, [0, 0])
                c[0] += 1
                c[1] += r["outcome"] in CAUGHT
    return {k: (v[0], v[1]) for k, v in out.items()}


def show_tables(files: list[Path], tidy: Path | None = None) -> None:
    results = []
    for path in files:
        with path.open(newline="") as f:
            results.append(list(csv.DictReader(f)))
        print(f"{path}:\n{table(results[-1])}\n")
    if len(results) != 2:
        if tidy:
            raise SystemExit("--tidy needs --table BEFORE AFTER")
        return
    a, b = ({(r["plugin"], r["key"]): r["outcome"] for r in rs} for rs in results)
    shared = a.keys() & b.keys()
    per = Counter(p for p, _ in shared)
    flips = Counter(p for p, k in shared if (a[p, k] in CAUGHT) != (b[p, k] in CAUGHT))
    print("mutants in both files, per plugin (of them, caught in one and not the other):")
    for plugin in dict.fromkeys(p for p, _ in a):
        print(f"  {plugin}: {per[plugin]} ({flips[plugin]})")
    if tidy:
        from cdpbench.tables import write_results

        rows = []  # one "run" per plugin (and "all")
        for when, rs in zip(("before", "after"), results):
            for plugin, (n, caught) in counts(rs).items():
                rows += [(plugin, f"mutants_{when}", 0, n), (plugin, f"caught_{when}", 0, caught)]
        for plugin in [*dict.fromkeys(p for p, _ in a), "all"]:
            both = len(shared) if plugin == "all" else per[plugin]
            changed = sum(flips.values()) if plugin == "all" else flips[plugin]
            rows += [(plugin, "shared", 0, both), (plugin, "changed", 0, changed)]
        write_results(tidy, rows)


def write(rows: list[dict], out: Path) -> None:
    fields = ["plugin", "module", "line", "col", "operator", "outcome", "key", "source", "diff"]
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with out.with_suffix(".survivors.txt").open("w") as f:
        for r in rows:
            if r["outcome"] == "survived":
                f.write(f"{r['plugin']} {r['module']}:{r['line']} {r['operator']} [{r['key']}]\n{r.get('diff') or ''}\n\n")


if __name__ == "__main__":
    main()
