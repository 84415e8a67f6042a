"""Run records: what a job leaves in its folder for the recorder to write to MLflow.

A job never imports MLflow (importing it takes about 2 s here, more than most jobs' work). It
writes ``run.json`` in its output folder instead: its name, tags, parameters, one row of metrics
per release with the time it was measured, its status and, when it failed, the one-line reason.
The file is written when the job starts (status ``RUNNING``) and replaced, atomically, when it
ends (``FINISHED`` or ``FAILED``); the artifacts it lists are in the same folder.

:mod:`cdpbench.recorder` reads these files, in a process of its own that runs beside the jobs, and
writes them to MLflow. A record still ``RUNNING`` when its sweep is over belongs to a job that
never ended (its worker died, or the sweep was interrupted): it is recorded ``FAILED`` with that
reason, so no MLflow run is ever left ``RUNNING``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Container
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RECORD_FILE = "run.json"
RECORDED_FILE = "mlflow_run_id"  # written beside run.json once the run is in MLflow
RUNNING, FINISHED, FAILED = "RUNNING", "FINISHED", "FAILED"
#: a job of a resumed sweep whose config already has a FINISHED run in the experiment: not run,
#: not recorded again (``skipped_run`` names the run)
SKIPPED = "SKIPPED"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunRecord:
    """One job's run, as MLflow will hold it."""

    name: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    #: one entry per release: ``[step, timestamp_ms, {metric: value}]``
    metrics: list[list[Any]] = field(default_factory=list)
    status: str = RUNNING
    error: str | None = None
    artifacts: list[str] = field(default_factory=list)
    start_time: int = field(default_factory=now_ms)
    end_time: int | None = None
    job: int | None = None  # the job's number in its sweep (0-based), None for a single run
    skipped_run: str | None = None  # SKIPPED: the FINISHED MLflow run with the same config hash
    #: the sweep launch that wrote it (:func:`cdpbench.tracking.write_sweep_file`): a record left
    #: in the folder by an earlier launch into the same folder is not this launch's
    launch: str | None = None
    #: the process that runs the job, and its host (an interrupted sweep waits for live ones)
    pid: int | None = field(default_factory=os.getpid)
    host: str | None = field(default_factory=socket.gethostname)

    def add_metrics(self, step: int, row: dict[str, float]) -> None:
        self.metrics.append([int(step), now_ms(), {k: float(v) for k, v in row.items() if v is not None}])

    def end(self, status: str, error: str | None = None) -> None:
        self.status, self.error, self.end_time = status, error, now_ms()

    def write(self, folder: Path) -> Path:
        """Write (or replace) ``folder/run.json`` atomically: a reader sees the old or the new file."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / RECORD_FILE
        tmp = folder / f".{RECORD_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)
        return path

    @staticmethod
    def remove_stale_writes(folder: Path, alive) -> list[Path]:
        """Remove the half-written records (``.run.json.<pid>.tmp``) under ``folder`` whose writer
        ``alive(pid)`` says is gone: a job killed between writing its record and renaming it."""
        removed = []
        for tmp in folder.rglob(f".{RECORD_FILE}.*.tmp"):
            pid = tmp.name.removeprefix(f".{RECORD_FILE}.").removesuffix(".tmp")
            if pid.isdigit() and not alive(int(pid)):
                try:
                    tmp.unlink()
                    removed.append(tmp)
                except OSError:
                    pass
        return removed

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        data = json.loads(Path(path).read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def forget_recorded(folder: Path) -> None:
    """Remove the :data:`RECORDED_FILE` an earlier launch into the same folder left: a job writes
    a new record, not yet in MLflow."""
    try:
        (Path(folder) / RECORDED_FILE).unlink()
    except FileNotFoundError:
        pass


def find(folder: Path) -> list[Path]:
    """Every run record under ``folder`` (a run's folder, or a sweep's with one folder per job)."""
    folder = Path(folder)
    if (folder / RECORD_FILE).exists():
        return [folder / RECORD_FILE]
    return sorted(folder.glob(f"*/{RECORD_FILE}"))


def statuses(folder: Path, skip: Container[Path] = (), launch: str | None = None) -> dict[Path, RunRecord]:
    """The records under ``folder`` that can be read now (one being replaced is read next time),
    but for those in ``skip`` (final records a caller already holds: not parsed again) and, when
    ``launch`` is given, those written by another launch (left by an earlier launch into the same
    folder)."""
    out = {}
    for path in find(folder):
        if path in skip:
            continue
        try:
            rec = RunRecord.read(path)
        except (OSError, ValueError, TypeError):
            continue
        if launch is None or rec.launch == launch:
            out[path] = rec
    return out
