"""The recorder survives what a scheduler does (#24 item 3).

- SIGTERM (and SIGHUP) to the sweep's whole process group, as ``timeout``, SLURM and most job
  schedulers send it, mid-sweep, for every launcher: the command ends with 130, no run is left
  RUNNING, every job whose record is FINISHED is a FINISHED run, the others and the parent are
  FAILED, and no job goes on to finish after the sweep recorded it FAILED (submitit and Ray run
  jobs outside the process group: they are ended through the stop file). Also when the launching
  process handles the signal seconds after the rest of its group (a loaded machine).
- Two sweeps launched together on a fresh SQLite store both record every run (without the store
  lock, 3 of 3 tries here left one failing with ``table ... already exists``, ``duplicate column
  name: step`` or an alembic version error).
- A store that cannot be opened fails the command at once with the database's own error, before
  any job runs; a single run is interrupted by it.
- A single run its recorder was killed while writing is written again by the next launch.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO

pytestmark = pytest.mark.slow
FAULTY = str(Path(__file__).parent / "faulty")
SWEEP = ["-m", "dataset=faulty", "dataset.tag=1,2,3,4,5,6", "dataset.sleep=0.7", "progress=false"]
LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
    "ray": ["hydra/launcher=ray"],
}


def _env(uri: str) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(REPO / "conf"), "PYTHONPATH": FAULTY}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def _records(cwd: Path) -> dict[str, dict]:
    """Each job record of the sweep(s) under ``cwd``, by its dataset.tag."""
    out = {}
    for f in cwd.glob("outputs/multirun/*/*/run.json"):
        try:
            rec = json.loads(f.read_text())
        except ValueError:  # being replaced
            continue
        out[rec["params"]["dataset.tag"]] = rec
    return out


def _group(pgid: int) -> list[int]:
    """The processes of a process group (Linux's /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
            pids.append(int(entry.name))
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def _runs(client) -> list:
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, max_results=1000) if exps else []


@pytest.mark.parametrize("launcher,sig,stalled", [*[(name, signal.SIGTERM, False) for name in LAUNCHERS],
                                                  ("basic", signal.SIGHUP, False), ("ray", signal.SIGTERM, True)])
def test_a_signal_to_the_process_group_ends_the_sweep_and_records_every_job(tmp_path, mlflow_client, launcher, sig, stalled):
    """``stalled``: the launching process handles the signal 5 s after the rest of its group, as a
    loaded machine can delay it. A local Ray instance in the sweep's group died of the signal
    meanwhile and, when its GCS reported the node dead before dying itself, the driver's core
    worker lost its object store and ended the process with exit status 1 before anything was
    recorded (CI once; here 2 of 4 runs with this delay). The race is not reproducible at will;
    that Ray's processes are out of the group is, and is checked first."""
    if launcher == "ray":
        pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray extra is not installed")
    if signal.getsignal(sig) is signal.SIG_IGN:  # e.g. the tests run under nohup: cdpbench keeps it, by design
        pytest.skip(f"{signal.Signals(sig).name} is ignored in this process (nohup?), and cdpbench keeps an inherited ignore")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    longer = ["dataset.releases=10"] if stalled else []  # jobs of 7 s: the sweep outlasts the delay
    proc = subprocess.Popen([str(CDPBENCH), *SWEEP, *longer, *LAUNCHERS[launcher]], cwd=tmp_path, env=_env(uri),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline:  # killed in the middle of the sweep: some jobs done, one running
        states = [r["status"] for r in _records(tmp_path).values()]
        if states.count("FINISHED") >= 2 and "RUNNING" in states:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the sweep never reached two finished jobs: {proc.communicate()}")
    if stalled:  # the group's other processes first, the launching process 5 s later
        group = _group(proc.pid)
        ray_in_group = [c for c in map(_cmdline, group) if any(n in c for n in ("raylet", "gcs_server", "ray::"))]
        assert not ray_in_group, f"the local Ray instance runs in the sweep's process group: {ray_in_group}"
        for pid in group:
            if pid != proc.pid:
                os.kill(pid, sig)
        time.sleep(5)
        os.kill(proc.pid, sig)
    else:
        os.killpg(proc.pid, sig)  # what `timeout`, SLURM and most schedulers do
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert "error: interrupted; runs still open were marked FAILED" in err.splitlines()
    time.sleep(2)  # a job that went on would have finished by now (0.7 s a release)
    records = _records(tmp_path)
    everything = _runs(mlflow_client(uri))
    assert all(r.info.status in ("FINISHED", "FAILED") for r in everything), [(r.info.run_name, r.info.status) for r in everything]
    (parent,) = [r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"]
    assert parent.info.status == "FAILED"
    kids = {r.data.params["dataset.tag"]: r for r in everything if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    finished = sorted(t for t, r in records.items() if r["status"] == "FINISHED")
    assert len(finished) >= 2
    # every finished job is a FINISHED run; every run FINISHED in MLflow finished on disk
    assert sorted(t for t, r in kids.items() if r.info.status == "FINISHED") == finished
    # every job that started has a run; those that did not finish are FAILED with the reason
    assert set(kids) == set(records)
    for t, r in kids.items():
        if t not in finished:
            assert r.info.status == "FAILED"
            assert r.data.tags["cdpbench.error"] in ("the job did not end: the sweep was interrupted", "interrupted")
    assert int(parent.data.tags["cdpbench.failed_jobs"]) == 6 - len(finished)
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".run.json.")]  # no half-written record


def test_a_single_run_stopped_by_sigterm_is_recorded_failed(tmp_path, mlflow_client):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.Popen([str(CDPBENCH), "dataset=faulty", "dataset.sleep=1", "dataset.releases=20", "progress=false",
                             "hydra.run.dir=outputs/runs/one"], cwd=tmp_path, env=_env(uri),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    record = tmp_path / "outputs/runs/one/run.json"
    deadline = time.time() + 60
    while time.time() < deadline and not record.exists():
        time.sleep(0.1)
    time.sleep(3)  # a few releases of 1 s done
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (run,) = _runs(mlflow_client(uri))
    assert run.info.status == "FAILED" and run.data.tags["cdpbench.error"] == "interrupted"
    assert run.data.metrics  # the releases done before the signal are in the run


def test_two_sweeps_launched_together_on_a_fresh_store_record_every_run(tmp_path, mlflow_client):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # does not exist yet: both recorders would build it
    procs = []
    for i, tags in enumerate(["1,2,3", "4,5,6"]):
        (tmp_path / str(i)).mkdir()
        procs.append(subprocess.Popen([str(CDPBENCH), "-m", "dataset=faulty", f"dataset.tag={tags}", "progress=false"],
                                      cwd=tmp_path / str(i), env=_env(uri), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "sweep: 3 jobs FINISHED, 3 run" in err
    everything = _runs(mlflow_client(uri))
    assert sorted(r.data.tags["cdpbench.kind"] for r in everything) == ["job"] * 6 + ["sweep"] * 2
    assert {r.info.status for r in everything} == {"FINISHED"}
    assert sorted(r.data.params["dataset.tag"] for r in everything if "dataset.tag" in r.data.params) == list("123456")
    assert (tmp_path / "mlflow.db.lock").exists()  # the lock file beside the store: where the store is


def test_a_corrupt_store_fails_a_sweep_before_any_job_with_the_database_error(tmp_path):
    (tmp_path / "m.db").write_text("not a database, e.g. a store half-written under a disk limit")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    proc = subprocess.run([str(CDPBENCH), "-m", "dataset=faulty", "dataset.tag=1,2,3", "progress=false"], cwd=tmp_path,
                          env=_env(uri), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: the MLflow store {uri} cannot be used: sqlite3.DatabaseError: file is not a database"]
    assert not list(tmp_path.glob("outputs/multirun/*/*"))  # no job ran, no sweep folder is left
    assert not list(tmp_path.glob("outputs/multirun/*"))


def test_a_store_in_an_impossible_place_fails_a_single_run_with_the_cause(tmp_path):
    (tmp_path / "afile").write_text("")
    uri = f"sqlite:///{tmp_path / 'afile' / 'm.db'}"  # its folder is a file
    proc = subprocess.run([str(CDPBENCH), "dataset=faulty", "dataset.sleep=1", "dataset.releases=30", "progress=false"],
                          cwd=tmp_path, env=_env(uri), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    # interrupted at once (30 releases of 1 s would take 30 s), or already done: either way the cause
    assert last.endswith(f"cannot be used: NotADirectoryError: [Errno 20] Not a directory: '{tmp_path / 'afile'}'"), last
    assert last.startswith(f"error: the MLflow store {uri} cannot be used") or "cdpbench record" in last
    records = list(tmp_path.glob("outputs/runs/*/run.json"))
    if records:  # interrupted while it ran
        record = json.loads(records[0].read_text())
        assert record["status"] == "FAILED" and len(record["metrics"]) < 30  # it did not run to the end
    else:  # the store failed before the job began: it saw the stop and did not start (job.task's first look)
        assert "cdpbench record" not in last  # nothing to record later
        assert not list(tmp_path.glob("outputs/runs/*/metrics.csv")) and not list(tmp_path.glob("outputs/runs/*/config.yaml"))


def test_a_single_run_its_recorder_was_killed_while_writing_is_written_again(tmp_path, mlflow_client):
    from cdpbench import tracking
    from cdpbench.record import FINISHED, RunRecord
    from cdpbench.recorder import RECORDER_TAG, RUN_DIR_TAG, reap_orphans

    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is no recorder any more
    c = tracking.client(f"sqlite:///{tmp_path / 'm.db'}")
    exp = tracking.experiment_id(c, "x", tmp_path)
    folder = tmp_path / "run"
    rec = RunRecord("one", {"cdpbench.kind": "job"}, {"seed": "0"})
    rec.add_metrics(1, {"gcp": 0.25})
    rec.end(FINISHED)
    rec.write(folder)
    half = c.create_run(exp, tags={"cdpbench.kind": "job", RUN_DIR_TAG: str(folder),
                                   RECORDER_TAG: f"{socket.gethostname()}:{dead.pid}"}).info.run_id
    # a recorder at work (a process whose command line says so) is left alone
    working = subprocess.Popen(["sh", "-c", "sleep 60", "cdpbench.recorder"])
    alive = c.create_run(exp, tags={"cdpbench.kind": "job", RUN_DIR_TAG: str(folder),
                                    RECORDER_TAG: f"{socket.gethostname()}:{working.pid}"}).info.run_id
    try:
        assert reap_orphans(c, exp, None) == [half]
    finally:
        working.kill()
    assert c.get_run(alive).info.status == "RUNNING"
    assert c.get_run(half).info.lifecycle_stage == "deleted"
    runs = {r.info.run_id: r for r in c.search_runs([exp])}
    (again,) = [r for i, r in runs.items() if i not in (half, alive)]
    assert again.info.status == "FINISHED" and again.data.metrics == {"gcp": 0.25}
    assert (folder / "mlflow_run_id").read_text() == again.info.run_id


def test_root_cause_is_the_innermost_error_in_one_line():
    from cdpbench.recorder import root_cause

    try:
        try:
            raise OSError("disk I/O error\nsecond line")
        except OSError as inner:
            raise RuntimeError("(sqlite3.OperationalError) ...\n(Background on this error at: https://sqlalche.me/e/21/e3q8)") from inner
    except RuntimeError as e:
        assert root_cause(e) == "OSError: disk I/O error"
    try:
        try:
            raise ValueError("hidden")
        except ValueError:
            raise ConnectionRefusedError(111, "Connection refused") from None
    except ConnectionRefusedError as e:
        assert root_cause(e) == "ConnectionRefusedError: [Errno 111] Connection refused"


def test_half_written_records_of_dead_writers_are_removed(tmp_path):
    """A job killed between writing ``.run.json.<pid>.tmp`` and renaming it leaves the file; the
    recorder removes it once every job is over, and never one whose writer still lives."""
    import subprocess as sp
    import sys as _sys

    from cdpbench.record import RunRecord
    from cdpbench.stopping import process_alive

    dead = sp.run([_sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "3").mkdir()
    stale = tmp_path / "3" / f".run.json.{dead}.tmp"
    live = tmp_path / f".run.json.{os.getpid()}.tmp"
    other = tmp_path / "3" / ".run.json.notapid.tmp"
    for f in (stale, live, other):
        f.write_text("{")
    assert RunRecord.remove_stale_writes(tmp_path, process_alive) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_a_job_started_after_the_sweep_was_interrupted_does_not_start(tmp_path, monkeypatch):
    """Ray and submitit go on starting queued jobs after the launching process was interrupted
    (CI caught one: a job that wrote its record after the recorder had ended, a record with no
    run). Such a job writes nothing and is counted missing; the watch of a job that did start
    looks at once, not one poll later."""
    from omegaconf import OmegaConf

    from cdpbench import job, tracking
    from cdpbench.stopping import JobWatch, request_stop

    sweep = {"launch": "L1", "launcher_pid": os.getppid(), "host": socket.gethostname()}
    watch = JobWatch(tmp_path, sweep)
    assert watch.active and not watch.stopped()
    request_stop(tmp_path, "L0")  # another launch's stop
    assert not watch.stopped()
    request_stop(tmp_path, "L1")
    assert watch.stopped()
    assert not JobWatch(tmp_path, {**sweep, "launcher_pid": os.getpid()}).stopped()  # the launching process itself
    assert not JobWatch(None, sweep).stopped()  # not in a sweep

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tracking, "sweep_dir", lambda: tmp_path)
    monkeypatch.setattr(tracking, "sweep_info", lambda: sweep)
    cfg = OmegaConf.create({"tracking": {"run_name": "queued"}, "progress": False})
    out = job.task(cfg)
    assert (out.status, out.error) == ("FAILED", "interrupted before it started")
    assert not list(tmp_path.rglob("run.json"))
