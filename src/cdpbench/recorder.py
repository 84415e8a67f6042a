"""The recorder: one process per run or sweep that writes the jobs' run records to MLflow.

Jobs write :mod:`cdpbench.record` files and never import MLflow. The launching process starts
the recorder (``python -m cdpbench.recorder``) as soon as the command line has been checked, so
that importing MLflow and opening its store (about 2.5 s here) overlap with the jobs instead of
delaying each of them. The recorder

1. opens the store, the experiment and, for a sweep, the parent run (``RUNNING`` while the
   sweep runs; a resumed sweep's once one of its jobs runs, so that a launch that skips every
   job adds no run), and answers ``{"ready": true}``, or the store's own error in one line
   (``sqlite3.DatabaseError: file is not a database``; :func:`root_cause`) and exits: a sweep
   waits for that answer before its jobs start, a single run is interrupted by it, and the
   command fails at once with that cause (an MLflow server that does not answer is found by one
   request, not after MLflow's four minutes of retries);
2. writes every job's run to MLflow as soon as its record is final: parameters, tags, one
   metric row per release (``step`` = release), the artifacts of a FINISHED run, the status and
   the reason of a FAILED one;
3. when the launching process says ``END`` (or goes away), records what is left: a record still
   ``RUNNING`` becomes a FAILED run with the reason (the worker died, or the sweep was
   interrupted), and ends the parent run, FAILED with the count of failed jobs when any failed;
4. prints one JSON line: the parent run id and every job's run id, status and reason.

Writes to a SQLite store are made holding a lock file beside it
(:func:`cdpbench.tracking.store_lock`): two sweeps launched together on a fresh store take turns
building its tables and writing their runs, instead of one failing with ``table ... already
exists``.

It ignores Ctrl-C, SIGTERM and SIGHUP: what a scheduler, ``timeout`` or a closed terminal sends
to the whole process group reaches the launching process too, which ends the jobs (also those
running in processes of their own, :mod:`cdpbench.stopping`) and then tells the recorder to
finish, so nothing is left ``RUNNING``. Only SIGKILL (of the recorder itself, e.g. of the
sweep's whole process group) can leave a run ``RUNNING``; each parent and each run names its
recorder (``cdpbench.recorder``: host and pid), and the next launch on that host in the
experiment finds such orphans (their recorder is gone): it deletes a run the recorder was killed
while writing and writes it again from its record (``cdpbench.run_dir``), records every job of a
killed sweep whose record is not in MLflow (those that ended as they ended), marks the others and
the parent ``KILLED``.

A resumed sweep (the default for sweeps, not with ``--rerun``): once the store is open the
recorder writes :data:`~cdpbench.tracking.FINISHED_FILE` in the sweep folder, tagged with the
launch's token, the config hash of every FINISHED job run of the experiment with its run id,
name, start time and the command that made it (:func:`run_command`); a job waits for the file of
its own launch, and a job listed there is not run but left as a ``SKIPPED`` record naming that
run, and the parent run lists those runs (``cdpbench.skipped_runs.N`` tags,
comma-separated run ids) so that ``cdpbench report`` shows the whole sweep. A skip is checked in
the store before it is recorded: the run must exist in the experiment, be FINISHED and have the
job's config hash (else the job is recorded FAILED, the finished file named). A finished file an
earlier launch left in the folder is checked the same way before it is replaced: one that lists
runs that are not so is reported as tampered with. Records of an earlier launch into the same
folder (another launch token) are never recorded again.
"""

from __future__ import annotations

import _thread
import json
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from .errors import CdpbenchError
from .stopping import process_alive, signals_held
from .record import (
    FAILED,
    FINISHED,
    RECORD_FILE,
    RECORDED_FILE,
    RUNNING,
    SKIPPED,
    RunRecord,
    now_ms,
    statuses,
)

ERROR_TAG = "cdpbench.error"
DIED = "the job did not end: its worker process died, or was stopped when another one died"
INTERRUPTED = "the job did not end: the sweep was interrupted"
ORPHANED = "the job did not end: its sweep was killed (found by a later launch)"
ORPHANED_RUN = "the run did not end: it was killed (found by a later launch)"
KILLED = "KILLED"
RECORDER_TAG = "cdpbench.recorder"
SKIPPED_TAG = "cdpbench.skipped_runs"
RUN_DIR_TAG = "cdpbench.run_dir"  # the job's folder, holding its run record
LAUNCH_TAG = "cdpbench.launch"  # the sweep launch's token (cdpbench.tracking.write_sweep_file)
SKIPPED_PER_TAG = 200  # run ids per tag: 200 x 33 characters stay below MLflow's 8,000


# ------------------------------------------------------------------------- in the recorder
def ingest(c, experiment_id: str, folder: Path, record: RunRecord, parent: str | None = None,
           commit: str | None = None, reason: str = DIED, unfinished: str = FAILED,
           source_tags: dict[str, str] | None = None) -> tuple[str, str, str | None]:
    """Write one record to MLflow as a run; returns (run id, status, reason). A record that did
    not end is written with status ``unfinished`` and ``reason``. ``source_tags``: the state of the
    checkout (:func:`cdpbench.provenance.git_state`), added to the run's tags."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    from .tracking import log_batches, redact_text

    status, error = record.status, record.error
    if status not in (FINISHED, FAILED):
        status, error = unfinished, reason
    tags = dict(record.tags)
    if parent:
        tags["mlflow.parentRunId"] = parent
        tags["cdpbench.sweep_id"] = parent
    if commit:
        tags["mlflow.source.git.commit"] = commit
    tags.update(source_tags or {})
    # who writes the run, and from where: a run its recorder was killed while writing (RUNNING,
    # recorder gone) is deleted and written again from its record by the next launch (reap_orphans)
    tags[RECORDER_TAG] = f"{socket.gethostname()}:{os.getpid()}"
    tags[RUN_DIR_TAG] = str(folder)
    # the job redacted its record already; a record written by an older version, or by hand, is
    # redacted here: no URI credential reaches MLflow (cdpbench.tracking.redact_uri)
    error = redact_text(error) if error else error
    if error:
        tags[ERROR_TAG] = error[:5000]
    run_name = redact_text(record.name)
    run = c.create_run(experiment_id, start_time=record.start_time, run_name=run_name)
    run_id = run.info.run_id
    tag_items = [RunTag(k, redact_text(str(v))) for k, v in tags.items()]
    params = [Param(k, redact_text(str(v))[:6000]) for k, v in record.params.items()]
    metrics = [Metric(k, v, ts, step) for step, ts, row in record.metrics for k, v in row.items()]
    # parameters, tags and metrics in as few requests as MLflow takes (one for a typical run):
    # against a server each request is a round trip and a transaction of its store
    for p, t, m in log_batches(params, tag_items, metrics):
        c.log_batch(run_id, metrics=m, params=p, tags=t)
    if status == FINISHED and record.artifacts:
        # into the run's artifact store as the run just created names it (MlflowClient.log_artifact
        # would fetch the whole run again to find it)
        repo = get_artifact_repository(run.info.artifact_uri, tracking_uri=c.tracking_uri)
        for name in record.artifacts:
            repo.log_artifact(str(folder / name))
    c.set_terminated(run_id, status, end_time=record.end_time or now_ms())
    (folder / RECORDED_FILE).write_text(run_id)
    return run_id, status, error


#: the sweep parent's artifact listing every installed distribution (``name==version``)
ENVIRONMENT_FILE = "environment.txt"


def checkout_tags(root: Path) -> dict[str, str]:
    """``cdpbench.git.dirty`` / ``cdpbench.git.diff`` of the checkout holding the running code (else
    of ``root``): whether tracked files differ from the commit, and a hash of that difference; and
    ``cdpbench.lock``, the fingerprint of its ``requirements.lock``."""
    from . import provenance

    here = Path(__file__).resolve().parent
    state = provenance.git_state(here) or provenance.git_state(root)
    tags = {f"cdpbench.git.{k}": v for k, v in state.items() if k != "commit"}
    lock = next((fp for where in (here.parent.parent, root) if (fp := provenance.lock_fingerprint(where))), None)
    if lock:  # the environment lock of the checkout that runs (requirements.lock, make install)
        tags["cdpbench.lock"] = lock
    return tags


def finished_runs(c, experiment_id: str) -> dict[str, list[dict[str, Any]]]:
    """Config hash -> the FINISHED job runs of the experiment with that config, latest first, each
    ``{"run", "code", "inputs"}`` (the fingerprints its tags record, :mod:`cdpbench.provenance`)
    with what a skipped job says of the run it reuses: ``name``, ``start`` (ms) and the
    ``command`` that made it, and ``sweep``, its sweep's parent run name (:func:`run_command`)."""
    from .provenance import provenance_of

    out: dict[str, list[dict[str, Any]]] = {}
    sweeps = sweep_commands(c, experiment_id)
    token = None
    while True:
        page = c.search_runs([experiment_id], "tags.`cdpbench.kind` = 'job' and attributes.status = 'FINISHED'",
                             max_results=5000, order_by=["attributes.start_time ASC"], page_token=token)
        for r in page:
            h = r.data.tags.get("cdpbench.config_hash")
            if h:
                command, sweep = run_command(r, sweeps)
                out.setdefault(h, []).insert(0, {"run": r.info.run_id, **provenance_of(r.data.tags),
                                                 "name": r.info.run_name, "start": r.info.start_time,
                                                 "command": command, "sweep": sweep})
        token = page.token
        if not token:
            return out


def sweep_commands(c, experiment_id: str) -> dict[str, tuple[str | None, str]]:
    """Parent run id -> ``(command, name)`` of every sweep of the experiment: ``cdpbench -m
    OVERRIDES`` from its tag ``cdpbench.overrides`` (None without it), and its run name."""
    out: dict[str, tuple[str | None, str]] = {}
    token = None
    while True:
        page = c.search_runs([experiment_id], "tags.`cdpbench.kind` = 'sweep'", max_results=5000, page_token=token)
        for p in page:
            overrides = p.data.tags.get("cdpbench.overrides")
            out[p.info.run_id] = (None if overrides is None else f"cdpbench -m {overrides}".rstrip(), p.info.run_name)
        token = page.token
        if not token:
            return out


def run_command(run, sweeps: dict[str, tuple[str | None, str]]) -> tuple[str | None, str | None]:
    """``(command, sweep name)`` that made a job run: its sweep's (``sweeps``,
    :func:`sweep_commands`), or a single run's, ``cdpbench OVERRIDES``, and None; ``(None, None)``
    when the store does not say (a run without the tag, a parent deleted since)."""
    parent = run.data.tags.get("mlflow.parentRunId")
    if parent:
        return sweeps.get(parent, (None, None))
    overrides = run.data.tags.get("cdpbench.overrides")
    return (None if overrides is None else f"cdpbench {overrides}".rstrip()), None


def not_a_finished_run(c, experiment_id: str, run_id: Any, config_hash: str | None,
                       present: dict[str, Any] | None = None) -> str | None:
    """Why ``run_id`` is not a FINISHED job run of the experiment with config hash
    ``config_hash`` — and, given ``present`` (:func:`cdpbench.provenance.provenance_of` of the
    skipping job), the same code and input fingerprints — (None when it is one)."""
    try:
        r = c.get_run(str(run_id))
    except Exception:
        return f"run {str(run_id)[:40]!r} does not exist"
    if r.info.experiment_id != experiment_id or r.info.lifecycle_stage != "active":
        return f"run {run_id} is not in the experiment"
    if r.info.status != FINISHED:
        return f"run {run_id} is {r.info.status}, not FINISHED"
    if not config_hash or r.data.tags.get("cdpbench.config_hash") != config_hash:
        return f"run {run_id} belongs to another config"
    if present is not None:
        from .provenance import provenance_of, stale_reason

        why = stale_reason(provenance_of(r.data.tags), present)
        if why:
            return f"run {run_id} was computed by other code or inputs ({why})"
    return None


def check_finished_file(c, experiment_id: str, folder: Path) -> str | None:
    """A one-line warning when the finished file left in ``folder`` (by an earlier launch, or
    written there by hand) lists runs that are not FINISHED runs of their config in the store."""
    from .tracking import FINISHED_FILE, finished_entries, read_finished

    data = read_finished(folder)
    if data is None:
        return None
    bad = [why for h, v in data["finished"].items() for e in finished_entries(v)
           if (why := not_a_finished_run(c, experiment_id, e["run"], str(h)))]
    if not bad:
        return None
    more = f" and {len(bad) - 2} more" if len(bad) > 2 else ""
    return (f"warning: ignored {folder / FINISHED_FILE}: it was tampered with ({'; '.join(bad[:2])}{more}); "
            "the jobs were checked against the store instead")


def _recorder_alive(pid: int) -> bool:
    """Is ``pid`` a live cdpbench recorder on this host?"""
    try:
        return b"cdpbench.recorder" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: is the process there at all?
        return process_alive(pid)


def _recorder_gone(run, host: str) -> bool:
    """Was ``run`` written by a recorder of this host that is gone?"""
    who, _, pid = run.data.tags.get(RECORDER_TAG, "").rpartition(":")
    return who == host and pid.isdigit() and not _recorder_alive(int(pid))


def reap_orphans(c, experiment_id: str, commit: str | None) -> list[str]:
    """Runs of this experiment left ``RUNNING`` by a recorder of this host that is gone (killed
    with SIGKILL). A sweep's ended jobs are recorded from their records, the jobs that never
    ended and the parent are marked ``KILLED``; a single run its recorder was killed while
    writing is deleted and written again from its record. Returns the runs reaped (sweep
    parents and single runs)."""
    host = socket.gethostname()
    reaped = []
    for r in c.search_runs([experiment_id], "tags.`cdpbench.kind` = 'job' and attributes.status = 'RUNNING'",
                           max_results=1000):
        if r.data.tags.get("mlflow.parentRunId") or not _recorder_gone(r, host):
            continue  # a sweep's job is reaped with its parent, below
        c.delete_run(r.info.run_id)  # a partial copy: its record is written again
        folder = Path(r.data.tags.get(RUN_DIR_TAG, ""))
        rec = statuses(folder).get(folder / RECORD_FILE) if folder.is_dir() else None
        if rec is not None and not (folder / RECORDED_FILE).exists():
            ingest(c, experiment_id, folder, rec, None, commit, ORPHANED_RUN, unfinished=KILLED)
        reaped.append(r.info.run_id)
    for p in c.search_runs([experiment_id], "tags.`cdpbench.kind` = 'sweep' and attributes.status = 'RUNNING'",
                           max_results=1000):
        if not _recorder_gone(p, host):
            continue
        # the recorder only creates a run for a record that has ended, so a RUNNING child is one it
        # was killed while writing: a partial copy, deleted; its record is written again below
        for half in c.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{p.info.run_id}' and "
                                  "attributes.status = 'RUNNING'", max_results=1000):
            c.delete_run(half.info.run_id)
        folder = Path(p.data.tags.get("cdpbench.sweep_dir", ""))
        launch = p.data.tags.get(LAUNCH_TAG)  # a later launch into the same folder left its own records
        records = statuses(folder, launch=launch) if folder.is_dir() else {}
        for path, rec in records.items():
            if rec.status != SKIPPED and not (path.parent / RECORDED_FILE).exists():
                ingest(c, experiment_id, path.parent, rec, p.info.run_id, commit, ORPHANED, unfinished=KILLED)
        c.set_tag(p.info.run_id, ERROR_TAG, "the sweep was killed; a later launch recorded what it had left")
        c.set_terminated(p.info.run_id, KILLED)
        reaped.append(p.info.run_id)
    return reaped


def _stdin_lines(q: queue.Queue) -> None:
    for line in sys.stdin:
        q.put(line.strip())
    q.put("EOF")


def serve(header: dict[str, Any], commands: queue.Queue, ready=lambda: None) -> dict[str, Any]:
    """Record the runs under ``header['folder']`` until told to end; returns the summary.
    ``ready()`` is called once the store is open (and, for a sweep, the finished file written and,
    unless it is resumed, its parent run created): from then on the jobs can run. Every write to
    a SQLite store is made holding :func:`cdpbench.tracking.store_lock`, so that the recorders of
    sweeps launched together on one store take turns."""
    from . import tracking
    from .provenance import environment_freeze, provenance_of

    logging.getLogger("alembic").setLevel(logging.WARNING)
    root = Path(header["root"])
    folder = Path(header["folder"])
    lock = tracking.store_lock(header["uri"])
    sweep = header.get("sweep")
    parent = None
    launch = sweep.get("launch") if sweep else None
    warnings: list[str] = []
    tracking.check_reachable(header["uri"])
    with lock:
        c = tracking.client(header["uri"])
        exp = tracking.experiment_id(c, header["experiment"], root)
        commit = tracking.git_commit(root)
        source_tags = checkout_tags(root)
        reap_orphans(c, exp, commit)
        if sweep:
            finished: dict[str, str] = {}
            try:
                stale = check_finished_file(c, exp, folder)
                if stale:
                    warnings.append(stale)
                if sweep.get("resume"):
                    finished = finished_runs(c, exp)
            finally:  # the jobs wait for this file: it is written whatever happens
                tracking.write_finished(folder, finished, launch)

    def open_parent() -> str:
        """The sweep's parent run (called holding the lock)."""
        tags = {"cdpbench.kind": "sweep", "cdpbench.sweep_dir": str(folder), **sweep["tags"],
                RECORDER_TAG: f"{socket.gethostname()}:{os.getpid()}"}
        if launch:
            tags[LAUNCH_TAG] = launch
        if commit:
            tags["mlflow.source.git.commit"] = commit
        tags.update(source_tags)
        run_id = c.create_run(exp, start_time=header["start_time"], tags=tags, run_name=sweep["name"]).info.run_id
        try:  # the whole environment the sweep ran in (cdpbench.provenance)
            c.log_text(run_id, environment_freeze(), ENVIRONMENT_FILE)
        except Exception as e:  # noqa: BLE001 - an artifact store that refuses it does not stop the sweep
            warnings.append(f"warning: the sweep's {ENVIRONMENT_FILE} could not be stored: {root_cause(e)}")
        return run_id

    # A resumed sweep's parent is created once one of its jobs runs (a record that is not SKIPPED),
    # so a launch that skips every job adds no empty parent run; any other sweep's, at once.
    if sweep and not sweep.get("resume"):
        with lock:
            parent = open_parent()
    ready()
    done: dict[Path, dict[str, Any]] = {}

    def record_final(reason: str | None) -> None:
        nonlocal parent
        current = statuses(folder, skip=done, launch=launch)
        if sweep and parent is None and any(rec.status != SKIPPED for rec in current.values()):
            with lock:  # a job runs (or ended without being skipped): the sweep gets its parent run
                parent = open_parent()
        final = {path: rec for path, rec in current.items() if rec.status != RUNNING or reason is not None}
        if not final:
            return
        with lock:
            for path, rec in final.items():
                if rec.status == SKIPPED:  # trusted only once the store confirms it
                    present = None if (sweep or {}).get("reuse_old_code") else provenance_of(rec.tags)
                    why = not_a_finished_run(c, exp, rec.skipped_run, rec.tags.get("cdpbench.config_hash"), present)
                    if why:
                        rec.end(FAILED, f"skipped as {why}: {folder / tracking.FINISHED_FILE} was tampered with; "
                                        "launch the sweep again to run it")
                if rec.status == SKIPPED:
                    run_id, status, error = rec.skipped_run, SKIPPED, None
                else:
                    if sweep and parent is None:  # a skip the store did not confirm: recorded FAILED
                        parent = open_parent()
                    run_id, status, error = ingest(c, exp, path.parent, rec, parent, commit, reason or DIED,
                                                   source_tags=source_tags)
                done[path] = {"job": rec.job, "name": rec.name, "run_id": run_id, "status": status, "error": error,
                              "note": rec.tags.get("cdpbench.resume_note")}

    end = None
    while end is None:
        try:
            cmd = commands.get(timeout=0.5)
        except queue.Empty:
            cmd = None
        if cmd in ("END", "END interrupted", "EOF"):
            end = cmd
        record_final(None)
    interrupted = end != "END"
    record_final(INTERRUPTED if interrupted else DIED)
    RunRecord.remove_stale_writes(folder, process_alive)  # every job is over: no half-written record stays
    runs = sorted(done.values(), key=lambda r: (r["job"] is None, r["job"] or 0))
    failed = [r for r in runs if r["status"] not in (FINISHED, SKIPPED)]
    missing = max(int(sweep["jobs"]) - len(runs), 0) if sweep else 0
    if sweep and parent is None and (failed or missing or interrupted):  # no job ran, but the sweep failed
        with lock:
            parent = open_parent()
    if parent:
        with lock:
            c.set_tag(parent, "cdpbench.failed_jobs", str(len(failed) + missing))
            skipped = [r["run_id"] for r in runs if r["status"] == SKIPPED]
            c.set_tag(parent, "cdpbench.skipped_jobs", str(len(skipped)))
            for i in range(0, len(skipped), SKIPPED_PER_TAG):
                c.set_tag(parent, f"{SKIPPED_TAG}.{i // SKIPPED_PER_TAG}", ",".join(skipped[i : i + SKIPPED_PER_TAG]))
            ok = not failed and not missing and not interrupted
            c.set_terminated(parent, FINISHED if ok else FAILED)
    return {"parent_run_id": parent, "runs": runs, "missing": missing, "uri": tracking.redact_uri(header["uri"]),
            "experiment_id": exp,
            "warnings": warnings}


def root_cause(error: BaseException) -> str:
    """The underlying error of ``error`` in one line, e.g. ``sqlite3.DatabaseError: file is not a
    database`` for the SQLAlchemy and MLflow exceptions wrapped around it (whose own messages end
    in SQLAlchemy's "Background on this error" link)."""
    from .tracking import redact_text

    chain, seen = [], set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ if e.__cause__ is not None else (None if e.__suppress_context__ else e.__context__)
    deepest = next((x for x in reversed(chain) if str(x).strip()), error)
    kind = type(deepest)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    message = next((ln for ln in str(deepest).splitlines() if ln.strip()), "")
    return redact_text(" ".join(f"{name}: {message}".split()))[:500]


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def store_unusable(uri: str, cause: str) -> str:
    """The one-line error of a store that cannot be opened or written."""
    from .tracking import redact_uri

    return f"the MLflow store {redact_uri(uri)} cannot be used: {cause}"


def main() -> int:
    # The launching process decides when to end: Ctrl-C, and the SIGTERM (SIGHUP) a scheduler, a
    # timeout or a closed terminal sends to the whole process group, reach it too; it ends the
    # jobs and tells this process, which then records what finished and marks the rest FAILED.
    for sig in ("SIGINT", "SIGTERM", "SIGHUP", "SIGXFSZ"):  # SIGXFSZ: a file-size limit fails a write instead
        if hasattr(signal, sig):
            signal.signal(getattr(signal, sig), signal.SIG_IGN)
    # Import MLflow while the launching process checks the command line; touch no store until told.
    import mlflow.entities
    import mlflow.store.tracking.sqlalchemy_store
    import mlflow.tracking  # noqa: F401

    line = sys.stdin.readline()
    if not line.strip():  # cancelled: the command was refused, or tracking is off
        return 0
    header = json.loads(line)
    commands: queue.Queue = queue.Queue()
    threading.Thread(target=_stdin_lines, args=(commands,), daemon=True).start()
    try:
        summary = serve(header, commands, ready=lambda: print(json.dumps({"ready": True}), flush=True))
    except Exception as e:  # noqa: BLE001 - the launching process shows the cause in one line
        print(json.dumps({"error": root_cause(e)}), flush=True)
        sys.stderr.flush()
        os._exit(1)
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    # Every write is committed; skip the interpreter's teardown of MLflow's modules (about 1 s),
    # which the launching process would otherwise wait for.
    os._exit(0)


# ------------------------------------------------------------------ in the launching process
class Recorder:
    """The launching process's handle on its recorder process.

    :meth:`start` spawns it at once, so that it imports MLflow while the command line is checked;
    :meth:`open` gives it the store, experiment and folder once the command has been accepted
    (nothing is created before); :meth:`ready` waits until the store is open, and fails with the
    store's own error when it cannot be opened; :meth:`cancel` lets it go without touching any
    store.
    """

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "cdpbench.recorder"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.folder: Path | None = None
        self.uri: str | None = None
        self.is_ready = False
        self.error: str | None = None  # why the store cannot be used, once the recorder said so
        self._watcher: threading.Thread | None = None
        self._previous: tuple | None = None  # (signal, handler) that watch() replaced

    def open(self, uri: str, experiment: str, root: Path, folder: Path, sweep: dict[str, Any] | None = None) -> None:
        self.folder = Path(folder).resolve()
        self.uri = uri
        header = {"uri": uri, "experiment": experiment, "root": str(Path(root).resolve()), "folder": str(self.folder),
                  "sweep": sweep, "start_time": now_ms()}
        self.proc.stdin.write(json.dumps(header) + "\n")
        self.proc.stdin.flush()

    def _answer(self) -> None:
        """Read the recorder's first answer: the store is open (:attr:`is_ready`), or why not
        (:attr:`error`)."""
        # byte by byte from the pipe itself: communicate() later reads the same pipe past any
        # buffer a readline() would have filled
        chunks = []
        while (b := os.read(self.proc.stdout.fileno(), 1)) and b != b"\n":
            chunks.append(b)
        try:
            answer = json.loads(b"".join(chunks).decode(errors="replace") or "{}")
        except ValueError:
            answer = {}
        if answer.get("ready"):
            self.is_ready = True
            return
        self.proc.wait()
        self.error = store_unusable(self.uri or "", answer.get("error") or self._stderr_cause(self.proc.stderr.read()))

    def ready(self) -> None:
        """Wait until the recorder has opened the store (for a sweep: told the jobs which configs
        are FINISHED and, unless it is resumed, created its parent run). Raises
        :class:`CdpbenchError` with the store's error when it could not."""
        self._answer()
        if self.error:
            raise CdpbenchError(self.error)

    def watch(self) -> None:
        """Wait for the recorder's answer in a thread, while a single run goes on: a store that
        cannot be opened interrupts the run at once (:attr:`error` says why), as Ctrl-C would.
        Through SIGUSR1's handler, installed here: SIGINT may be ignored (a command started in
        the background by a script inherits SIGINT ignored)."""
        signum = getattr(signal, "SIGUSR1", signal.SIGINT)
        if threading.current_thread() is threading.main_thread():
            self._previous = (signum, signal.signal(signum, _interrupted))

        def answer() -> None:
            self._answer()
            if self.error:
                _thread.interrupt_main(signum)

        self._watcher = threading.Thread(target=answer, daemon=True, name="cdpbench-recorder-answer")
        self._watcher.start()

    def unwatch(self) -> None:
        """Restore the signal handler :meth:`watch` replaced: a late answer no longer interrupts
        anything."""
        if self._previous is not None:
            signal.signal(*self._previous)
            self._previous = None

    def settle(self) -> None:
        """Stop watching and wait for the recorder's first answer (:attr:`is_ready` or
        :attr:`error` are then final)."""
        self.unwatch()
        if self._watcher is not None:
            self._watcher.join()

    @staticmethod
    def _stderr_cause(err: str) -> str:
        """The recorder died without a word on stdout: the last line of its error output that is
        not a log line."""
        from .tracking import redact_text

        lines = [ln.strip() for ln in err.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if not re.match(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (INFO|DEBUG|WARNING) ", ln)]
        return redact_text((errors or lines or ["it stopped"])[-1])

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()

    def finish(self, interrupted: bool = False) -> dict[str, Any]:
        """Tell the recorder to end, wait for it, and return its summary. Ctrl-C and SIGTERM are
        ignored meanwhile (in the main thread): the recorder is writing the runs' final states."""
        with signals_held():
            self.settle()
            try:
                out, err = self.proc.communicate("END interrupted\n" if interrupted else "END\n")
            except (BrokenPipeError, ValueError):  # it ended already (its store failed)
                out, err = self.proc.communicate()
        answers = []
        for ln in out.strip().splitlines():
            try:
                answers.append(json.loads(ln))
            except ValueError:
                continue
        last = answers[-1] if answers else {}
        if self.proc.returncode != 0 or "runs" not in last:
            cause = self.error or last.get("error") or self._stderr_cause(err)
            raise CdpbenchError(f"the runs could not be written to MLflow ({cause}); their results are in "
                                f"{self.folder}; write them later with: cdpbench record {self.folder}")
        return last


def record_folder(folder: Path, uri: str, experiment: str | None, root: Path) -> list[dict[str, Any]]:
    """``cdpbench record``: write every record under ``folder`` not yet in MLflow, into
    ``experiment`` or, when None, the experiment each run was configured with
    (``tracking.experiment``)."""
    from . import tracking

    tracking.check_reachable(uri)
    commit = tracking.git_commit(root)
    out = []
    with tracking.store_lock(uri):
        c = tracking.client(uri)
        for path, rec in statuses(folder).items():
            if (path.parent / RECORDED_FILE).exists() or rec.status == SKIPPED:
                continue
            exp = tracking.experiment_id(c, experiment or rec.params.get("tracking.experiment") or "cdpbench", root)
            run_id, status, error = ingest(c, exp, path.parent, rec, None, commit, DIED)
            out.append({"job": rec.job, "name": rec.name, "run_id": run_id, "status": status, "error": error})
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
