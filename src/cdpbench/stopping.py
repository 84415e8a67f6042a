"""Ending an interrupted sweep's jobs wherever they run.

A scheduler, ``timeout`` or a closed terminal ends a sweep with SIGTERM (SIGHUP) to its process
group. Jobs run by the basic and joblib launchers are in that group and end with it. Those of
submitit and Ray are not: submitit starts each job in a session of its own, Ray in worker
processes its raylet starts (a local Ray instance runs in a process group of its own,
:func:`cdpbench.launch.start_ray`); they would go on and write results after the sweep had recorded
them FAILED. So the launching process, when interrupted, leaves :data:`STOP_FILE` (with its
launch token) in the sweep folder, and every job running in another process watches for it: the
job ends as Ctrl-C would end it (its record FAILED, "interrupted"). A job on the launching
host also ends when the launching process is gone (killed with SIGKILL).

The launching process then waits, :data:`STOP_WAIT` seconds at most, for the records of the jobs
still alive to be final before its recorder writes them (a record ``RUNNING`` is recorded FAILED
with the reason; one written after that would disagree with MLflow).
"""

from __future__ import annotations

import _thread
import contextlib
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

STOP_FILE = ".cdpbench_stop"
#: seconds a job takes at most to see the stop file (between two looks)
POLL = 0.5
#: seconds the interrupted launching process waits for its jobs' records
STOP_WAIT = 10.0


def request_stop(folder: Path, launch: str | None) -> None:
    """Tell the jobs of launch ``launch`` in ``folder`` to end."""
    try:
        (Path(folder) / STOP_FILE).write_text(json.dumps({"launch": launch}))
    except OSError:
        pass


def stop_requested(folder: Path, launch: str | None) -> bool:
    try:
        return json.loads((Path(folder) / STOP_FILE).read_text()).get("launch") == launch
    except (OSError, ValueError, AttributeError):
        return False


def process_alive(pid: int) -> bool:
    """Is there a process ``pid`` on this host (whoever owns it)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobWatch:
    """In a job that runs in a process other than the launching one: interrupts the job (its main
    thread, as Ctrl-C would) once its launch asks it to stop or its launching process on this
    host is gone. :meth:`start` when the job starts, :meth:`stop` when it ends; a no-op for the
    launching process itself and outside a sweep."""

    def __init__(self, folder: Path | None, sweep: dict[str, Any]):
        self.folder = folder
        self.launch = sweep.get("launch")
        self.pid = sweep.get("launcher_pid")
        self.same_host = sweep.get("host") == socket.gethostname()
        self.active = folder is not None and self.launch is not None and self.pid not in (None, os.getpid())
        self.done = threading.Event()

    def stopped(self) -> bool:
        """Has the launch asked its jobs to stop (or is its launching process gone)? A job asks
        before it writes its first record: a job a launcher (Ray, submitit) starts after the
        sweep was interrupted does not start at all."""
        if not self.active:
            return False
        gone = self.same_host and isinstance(self.pid, int) and not process_alive(self.pid)
        return gone or stop_requested(self.folder, self.launch)

    def _watch(self) -> None:
        while True:  # first look at once: the stop may have come between stopped() and the record
            if self.stopped():
                _thread.interrupt_main()
                return
            if self.done.wait(POLL):
                return

    def start(self) -> None:
        if self.active:
            threading.Thread(target=self._watch, daemon=True, name="cdpbench-stop-watch").start()

    def stop(self) -> None:
        self.done.set()


def wait_for_jobs(folder: Path, launch: str | None, timeout: float = STOP_WAIT) -> None:
    """Wait until no record of launch ``launch`` is ``RUNNING`` with its process alive (a job on
    another host counts as alive), ``timeout`` seconds at most."""
    from .record import RUNNING, statuses

    host = socket.gethostname()
    deadline = time.monotonic() + timeout
    # A job that looked for the stop file just before it was written is writing its first record:
    # it is seen RUNNING (and waited for) after one look of the watch at most.
    time.sleep(POLL)
    while time.monotonic() < deadline:
        alive = [r for r in statuses(folder, launch=launch).values()
                 if r.status == RUNNING and r.pid != os.getpid() and (r.host != host or r.pid is None or process_alive(r.pid))]
        if not alive:
            return
        time.sleep(0.1)


@contextlib.contextmanager
def signals_held():
    """Ctrl-C and SIGTERM ignored (in the main thread) while an interrupted command ends its jobs
    and records them: a second signal must not cut that short."""
    held = [signal.SIGINT, signal.SIGTERM] if threading.current_thread() is threading.main_thread() else []
    previous = [signal.signal(sig, signal.SIG_IGN) for sig in held]
    try:
        yield
    finally:
        for sig, handler in zip(held, previous):
            signal.signal(sig, handler)
