"""Issue #27 item 7: recording runs over HTTP, into ``cdpbench server`` on loopback. Target: <= 0.2 s a run.

Starts ``cdpbench server`` on 127.0.0.1 (a free port, a scratch SQLite store and artifacts folder),
makes one run of the quickstart's setting with tracking off (8 releases; its record holds every
metric per release, the parameters, the tags and the artifacts ``config.yaml`` and ``metrics.csv``), copies its
folder, and writes those records into the server as the recorder writes a sweep's jobs
(:func:`cdpbench.recorder.ingest`, one client, children of one sweep parent run): ``--warmup``
runs (not counted), then ``--runs`` runs, timed. It starts once the server has settled: MLflow's
server starts a job runner and its consumers, several Python processes that keep a 2-core
machine busy for ~10 s after the server answers. Reports seconds a run (median, mean, slowest)
and HTTP requests a run (from the server's access log). Then checks that the last run holds what
its record holds (parameters, tags, every metric row with its step and time, artifacts, status).

The server's worker processes count (``--workers``): with more than one, uvicorn (0.54) leaves
Nagle's algorithm on for the connections it accepts (uvicorn issue #3149), so every request on a
kept-alive connection but the first waits ~40 ms for the client's delayed acknowledgement.

With ``--sweep``: also the whole quickstart grid (5 jobs, ``hydra/launcher=joblib``, ``--rerun``)
into the server and into a SQLite file, wall time of each (about a minute).

    python -m benchmarks http_recording     # or: python benchmarks/bench_http_recording.py [--runs 20] [--warmup 5]
                                            #     [--workers N] [--sweep] [--out experiments/results/bench_http_recording.csv]

``--out FILE``: also write what is measured as a tidy results CSV (``run,metric,step,value``, step
0; run ``ingest`` with ``wall_s`` the median seconds a run, ``mean_s``, ``max_s``, ``requests``
a run and ``runs``; with ``--sweep`` runs ``sweep_http`` and ``sweep_sqlite``, ``wall_s``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # the check's downloads

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CDPBENCH = str(BIN / "cdpbench")
REQUEST_LINE = re.compile(r'"(GET|POST|PUT|PATCH|DELETE) [^"]* HTTP/[0-9.]+" \d{3}')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: Path, workers: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """``cdpbench server`` on a free loopback port with a scratch store; its URI and access log."""
    port = free_port()
    log = tmp / "server.log"
    more = ["--workers", str(workers)] if workers else []
    proc = subprocess.Popen([CDPBENCH, "server", "--port", str(port), "--backend-store-uri",
                             f"sqlite:///{tmp / 'server.db'}", "--artifacts", str(tmp / "artifacts"), *more],
                            cwd=tmp, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2).close()
            return proc, uri, log
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_server(proc)
                raise SystemExit(f"cdpbench server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.25)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its workers: a session of their own
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def settle(pgid: int, quiet: float = 0.3, every: float = 2.0, limit: float = 90.0) -> None:
    """Wait until the processes of group ``pgid`` use less than ``quiet`` CPU seconds in ``every``
    seconds (at most ``limit`` seconds; at once where there is no /proc)."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid:  # the process group; then utime, stime in clock ticks
                total += int(fields[11]) + int(fields[12])
        return total / tick

    if not Path("/proc/self/stat").exists():
        return
    deadline = time.monotonic() + limit
    before = cpu()
    while time.monotonic() < deadline:
        time.sleep(every)
        now = cpu()
        if now - before < quiet:
            return
        before = now


def requests_logged(log: Path) -> int:
    time.sleep(0.5)  # the workers' access lines reach the log
    return sum(1 for ln in log.read_text(errors="replace").splitlines() if REQUEST_LINE.search(ln))


def quickstart_record(tmp: Path) -> Path:
    """The folder of one quickstart run (8 releases) made with tracking off."""
    cwd = tmp / "template"
    cwd.mkdir()
    env = {**os.environ, "CDPBENCH_CONF": str(REPO / "conf")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([CDPBENCH, "+experiment=quickstart", "dataset.releases=8", "tracking.enabled=false",
                           "progress=false"], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the quickstart run failed:\n{proc.stderr[-2000:]}")
    return next(cwd.glob("outputs/runs/*/run.json")).parent


def record_runs(uri: str, template: Path, tmp: Path, runs: int, warmup: int, log: Path) -> dict:
    from cdpbench import recorder, tracking
    from cdpbench.record import FINISHED, RECORD_FILE, RunRecord

    c = tracking.client(uri)
    exp = tracking.experiment_id(c, "bench_http_recording", tmp)
    commit = tracking.git_commit(REPO)
    source_tags = recorder.checkout_tags(REPO)
    parent = c.create_run(exp, tags={"cdpbench.kind": "sweep"}, run_name="bench_http_recording").info.run_id
    times = []
    before = 0
    for i in range(warmup + runs):
        folder = tmp / "sweep" / str(i)
        shutil.copytree(template, folder)
        rec = RunRecord.read(folder / RECORD_FILE)
        rec.name, rec.job = f"{rec.name} #{i}", i
        if i == warmup:
            before = requests_logged(log)
        t0 = time.perf_counter()
        run_id, status, _ = recorder.ingest(c, exp, folder, rec, parent, commit, source_tags=source_tags)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
        assert status == FINISHED, status
    requests = (requests_logged(log) - before) / runs
    check_run(c, run_id, rec, folder)
    c.set_terminated(parent, FINISHED)
    return {"times": times, "requests": requests, "metrics": sum(len(row) for _, _, row in rec.metrics),
            "releases": len(rec.metrics), "params": len(rec.params), "tags": len(rec.tags), "artifacts": len(rec.artifacts)}


def check_run(c, run_id: str, rec, folder: Path) -> None:
    """The run holds what its record holds: a recording that got faster by dropping something fails here."""
    run = c.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.end_time == rec.end_time, run.info
    assert run.data.params == {k: str(v) for k, v in rec.params.items()}, "parameters differ"
    assert all(run.data.tags.get(k) == str(v) for k, v in rec.tags.items()), "tags differ"
    for name in {k for _, _, row in rec.metrics for k in row}:
        got = sorted((m.step, m.timestamp, m.value) for m in c.get_metric_history(run_id, name))
        want = sorted((step, ts, row[name]) for step, ts, row in rec.metrics if name in row)
        assert got == want, f"metric {name} differs"
    stored = sorted(f.path for f in c.list_artifacts(run_id))
    assert stored == sorted(rec.artifacts), stored
    for name in rec.artifacts:
        assert Path(c.download_artifacts(run_id, name, str(folder / "check"))).read_bytes() == (folder / name).read_bytes()


def sweep_wall(uri: str, tmp: Path) -> float:
    cwd = tmp / f"sweep_{uri.partition(':')[0]}"
    cwd.mkdir()
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(REPO / "conf")}
    t0 = time.perf_counter()
    proc = subprocess.run([CDPBENCH, "-m", "+experiment=quickstart", "hydra/launcher=joblib", "progress=false",
                           "--rerun"], cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the quickstart sweep into {uri} failed:\n{proc.stderr[-2000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="runs recorded and timed (default: 20)")
    ap.add_argument("--warmup", type=int, default=5, help="runs recorded first, not timed (default: 5)")
    ap.add_argument("--workers", type=int, help="the server's worker processes (default: cdpbench server's)")
    ap.add_argument("--sweep", action="store_true", help="also time the quickstart sweep into the server and into SQLite")
    ap.add_argument("--out", type=Path, help="also write the measurements to this results CSV")
    args, _ = ap.parse_known_args()  # `python -m benchmarks http` passes its filter through
    with tempfile.TemporaryDirectory(prefix="bench_http_") as name:
        tmp = Path(name)
        template = quickstart_record(tmp)
        server, uri, log = start_server(tmp, args.workers)
        try:
            settle(server.pid)
            m = record_runs(uri, template, tmp, args.runs, args.warmup, log)
            sweeps = {"http": sweep_wall(uri, tmp), "sqlite": sweep_wall(f"sqlite:///{tmp / 'sweep.db'}", tmp)} \
                if args.sweep else {}
        finally:
            stop_server(server)
    t = m["times"]
    workers = f"{args.workers} server workers" if args.workers else "cdpbench server's default workers"
    print(f"{args.runs} runs over HTTP ({workers}; {m['releases']} releases, {m['metrics']} metric values, {m['params']} params, "
          f"{m['tags']} record tags, {m['artifacts']} artifacts each): {statistics.median(t):.3f} s a run (median; mean "
          f"{statistics.mean(t):.3f}, slowest {max(t):.3f}; target <= 0.2 s), {m['requests']:.1f} HTTP requests a run")
    rows = [("ingest", "wall_s", 0, statistics.median(t)), ("ingest", "mean_s", 0, statistics.mean(t)),
            ("ingest", "max_s", 0, max(t)), ("ingest", "requests", 0, m["requests"]), ("ingest", "runs", 0, args.runs)]
    for store, wall in sweeps.items():
        print(f"quickstart sweep (5 jobs, joblib) into {store}: {wall:.1f} s")
        rows.append((f"sweep_{store}", "wall_s", 0, wall))
    if args.out:
        from cdpbench.tables import write_results

        write_results(args.out, rows)


if __name__ == "__main__":
    main()
