"""The ``cdpbench`` command.

* ``cdpbench [hydra overrides]`` — one run (or a sweep with ``-m``), tracked in MLflow.
* ``cdpbench plugins`` — every installed plugin with its parameters.
* ``cdpbench experiments`` — every preset with its description and command.
* ``cdpbench report`` — a metric against release for every run of a sweep, one PNG + a CSV
  (``--export FILE.csv``: the sweep's metrics as a results file).
* ``cdpbench tables`` — the READMEs' result tables rendered from committed results files.

A run or sweep is checked whole before anything is created (:mod:`cdpbench.launch`). Then Hydra
runs the jobs; each job catches its own failure (marks its MLflow run FAILED with the reason and
returns), so a failing job never stops the others, whatever the launcher. The launching process
owns the sweep's parent run and ends it, with the list of failed jobs and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

#: The thread-count variables of the BLAS/OpenMP libraries numpy and scipy may load.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
# One BLAS thread per process unless the user set any of these: the lab's matrix products are
# small, and its processes already run side by side (jobs of a sweep, the recorder), so more
# threads only oversubscribe the cores. Set before numpy is first imported; every job process
# (joblib, Ray and submitit workers) inherits it.
if not any(os.environ.get(_var) for _var in BLAS_THREAD_VARS):
    os.environ.update(dict.fromkeys(BLAS_THREAD_VARS, "1"))

from .errors import CdpbenchError, ConfigError  # noqa: E402
from .job import one_line, task  # noqa: E402
from .kinds import GROUP_KINDS  # noqa: E402
from .presets import conf_dir  # noqa: E402

log = logging.getLogger("cdpbench")
#: ``cdpbench -m ... --rerun``: run every job of a sweep, even those already FINISHED
RERUN_FLAG = "--rerun"
#: ``cdpbench -m ... --reuse-old-code``: skip a job FINISHED with this config even if the code it
#: used has changed since (its input files must still be the same)
REUSE_OLD_CODE_FLAG = "--reuse-old-code"


def check_plugin_overrides(argv: list[str]) -> None:
    """Reject ``kind=name`` overrides (sweep lists included) naming no installed plugin, with the
    installed names, before Hydra composes anything."""
    from .registry import NONE, default_registry

    reg = default_registry()
    for arg in argv:
        m = re.fullmatch(r"\+{0,2}(" + "|".join(GROUP_KINDS) + r")=(.*)", arg)
        if not m:
            continue
        kind, value = m.groups()
        value = re.sub(r"^(choice|range)\((.*)\)$", r"\2", value)
        for name in (v.strip() for v in value.split(",")):
            if name and name not in reg.names(kind) and not (name == NONE and kind in ("attacker", "knowledge")):
                reg.info(kind, name)  # raises the registry's error listing the installed names


class SweepProgress:
    """One line for a sweep whose jobs run elsewhere: jobs done / total, failures, elapsed, ETA.

    Reads the jobs' run records in the sweep folder once a second (so it works for any launcher),
    and prints each failed job's reason above the line as it happens.
    """

    def __init__(self, folder: Path, total: int, launch: str | None = None):
        self.folder = folder
        self.launch = launch
        self.total = total
        self.bar = None  # drawn once the first job has started, below the launcher's own lines
        self.started = time.time()
        self.reported: set[Path] = set()
        self.ended: dict = {}  # path -> final RunRecord
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.update()
            except Exception:  # a record is being replaced: try again next second
                pass

    def update(self) -> None:
        from .record import FINISHED, RUNNING, SKIPPED, statuses

        records = {**self.ended, **statuses(self.folder, skip=self.ended, launch=self.launch)}  # final records are read once
        self.ended.update((p, r) for p, r in records.items() if r.status != RUNNING)
        if self.bar is None:
            if not records:
                return
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc="sweep", unit="job", dynamic_ncols=True,
                            bar_format="{desc}: {n}/{total} jobs done{postfix} | {elapsed} elapsed, ETA {remaining}")
            self.bar.start_t = self.started
        done = {p: r for p, r in records.items() if r.status != RUNNING}
        failed = {p: r for p, r in done.items() if r.status not in (FINISHED, SKIPPED)}
        skipped = sum(r.status == SKIPPED for r in done.values())
        for p, r in failed.items():
            if p not in self.reported:
                self.reported.add(p)
                self.bar.write(_job_line(r.job, r.name, r.error or r.status), file=self.bar.fp)
        state = [f"{len(records) - len(done)} running"] + ([f"{skipped} skipped"] if skipped else []) + (
            [f"{len(failed)} failed"] if failed else [])
        self.bar.set_postfix_str(", ".join(state), refresh=False)
        self.bar.n = len(done)
        self.bar.refresh()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        try:
            self.update()
        except Exception:
            pass
        if self.bar is not None:
            self.bar.close()


def _job_line(job: int | None, name: str, reason: str) -> str:
    """``  job #2 (dataset.tag=3): reason``: a job numbered as Hydra's launchers log it (``#2 :``)
    and as its folder in the sweep folder is named (:func:`cdpbench.launch.job_label`)."""
    from .launch import job_label

    return f"  {job_label(job)} ({name}): {reason}"


def _skipped_lines(skipped: list[dict], folder: Path, launch: str | None) -> list[str]:
    """Under a header, each skipped job with the run it reuses (id, name, start time), grouped by
    the command that made those runs (the sweep's, with its parent run's name, or a single run's):

        sweep: 2 skipped, already FINISHED in the experiment (--rerun runs them again):
          by `cdpbench -m +experiment=quickstart hydra/launcher=joblib` (sweep "quickstart 11-26 05:46"):
            job #0 (quickstart: defense=k_anonymity): reuses MLflow run 79cf… "quickstart: …" of 2026-11-26 05:46
    """
    from .job import REUSED_TAGS, reused_run_text
    from .record import SKIPPED, statuses

    try:  # the skipped jobs' records hold what the recorder said of the runs they reuse
        tags = {rec.job: rec.tags for rec in statuses(folder, launch=launch).values() if rec.status == SKIPPED}
    except OSError:
        tags = {}
    groups: dict[tuple[str, str], list[str]] = {}
    for r in sorted(skipped, key=lambda r: (r["job"] is None, r["job"] or 0)):
        t = tags.get(r["job"], {})
        key = (t.get(REUSED_TAGS["command"], ""), t.get(REUSED_TAGS["sweep"], ""))
        groups.setdefault(key, []).append("  " + _job_line(r["job"], r["name"], "reuses " + reused_run_text(t, r["run_id"])))
    lines = [f"sweep: {len(skipped)} skipped, already FINISHED in the experiment ({RERUN_FLAG} runs them again):"]
    for (command, sweep), jobs in groups.items():
        if not command:
            lines.append("  by a command the store does not record:")
        else:
            lines.append(f"  by `{command}`" + (f' (sweep "{sweep}"):' if sweep else ":"))
        lines += jobs
    return lines


def run_hydra(argv: list[str]) -> int:
    from .tracking import install_log_redaction

    install_log_redaction()  # Hydra's launchers log every job's overrides

    # The recorder process imports MLflow (about 3 s of CPU here) on the other core while this one
    # checks the command line and runs; it touches no store until opened, and is let go when the
    # command is refused, read-only, or runs with tracking off.
    from .launch import LARGE_GRID_FLAG

    rerun = RERUN_FLAG in argv  # cdpbench's own flags: Hydra never sees them
    large_grid = LARGE_GRID_FLAG in argv
    reuse_old_code = REUSE_OLD_CODE_FLAG in argv
    if rerun and reuse_old_code:
        raise CdpbenchError(f"{RERUN_FLAG} runs every job again, {REUSE_OLD_CODE_FLAG} skips more: give one of them")
    argv = [a for a in argv if a not in (RERUN_FLAG, LARGE_GRID_FLAG, REUSE_OLD_CODE_FLAG)]
    read_only = any(a.split("=")[0] in ("--hydra-help", "--cfg", "-c", "--info", "-i", "--help", "-h") for a in argv)
    with started_recorder(argv, read_only) as recorder:
        return _run_checked(argv, recorder, rerun, large_grid, reuse_old_code)


@contextlib.contextmanager
def started_recorder(argv: list[str], read_only: bool = False):
    """The recorder process, started before the command is checked so that it imports MLflow
    meanwhile (None for a read-only command or with ``tracking.enabled=false``); let go at the
    end unless the run opened it (:class:`cdpbench.recorder.Recorder`)."""
    from .recorder import Recorder

    untracked = any(re.fullmatch(r"\+{0,2}tracking\.enabled=(false|False)", a) for a in argv)
    recorder = None if read_only or untracked else Recorder()
    try:
        yield recorder
    finally:
        if recorder is not None and recorder.proc.returncode is None:
            recorder.cancel()


def _run_checked(argv: list[str], recorder, rerun: bool = False, large_grid: bool = False,
                 reuse_old_code: bool = False) -> int:
    from hydra._internal.utils import get_args_parser

    from . import launch

    args = get_args_parser().parse_intermixed_args(argv)
    for attr, flag in launch.FORBIDDEN_FLAGS.items():
        if getattr(args, attr, None):
            raise ConfigError(f"{flag} is not supported: configs come from {conf_dir()} and its experiment presets")
    if args.shell_completion:
        raise ConfigError("--shell-completion is not supported by cdpbench")
    check_plugin_overrides(args.overrides)
    hydra = launch.hydra_instance(conf_dir())
    if args.hydra_help or args.cfg or args.info:  # read-only: print, run nothing
        for o in launch.parse_overrides(hydra, args.overrides):
            launch.check_override(o)
        import contextlib
        import io

        from hydra.errors import HydraException

        from .tracking import redact_text

        shown = io.StringIO()
        try:
            with contextlib.redirect_stdout(shown):  # printed with URIs redacted, like everything else
                _show(hydra, args)
        except HydraException as e:  # e.g. --cfg with a sweep: Hydra shows one config, not a sweep's
            raise ConfigError(f"cannot show the config: {one_line(str(e))}") from None
        finally:
            sys.stdout.write(redact_text(shown.getvalue()))
        return 0
    plan = launch.prepare(hydra, args.overrides, args.multirun, large_grid)
    if plan.multirun:
        return run_sweep(hydra, plan, recorder, rerun, reuse_old_code)
    return run_single(hydra, plan, recorder)


def _show(hydra, args) -> None:
    from hydra._internal.utils import get_args_parser

    from . import launch

    if args.hydra_help:
        hydra.hydra_help(config_name=launch.CONFIG_NAME, args_parser=get_args_parser(), args=args)
    elif args.cfg:
        hydra.show_cfg(config_name=launch.CONFIG_NAME, overrides=args.overrides, cfg_type=args.cfg,
                       package=args.package, resolve=args.resolve)
    else:
        hydra.show_info(args.info, config_name=launch.CONFIG_NAME, overrides=args.overrides)


def _open_recorder(recorder, plan, root: Path, folder: Path, sweep: dict | None):
    """The recorder, opened on this run's or sweep's store; None (and cancelled) with tracking off."""
    from . import tracking

    cfg = plan.master
    if not cfg.tracking.get("enabled", True):
        if recorder is not None:
            recorder.cancel()
        return None
    recorder.open(tracking.tracking_uri(cfg, root), str(cfg.tracking.experiment), root, folder, sweep)
    return recorder


def run_single(hydra, plan, recorder) -> int:
    """One run; its record is written to MLflow by the recorder process beside it."""
    from . import launch

    root = Path.cwd()
    folder = root / plan.output_dir
    recorder = _open_recorder(recorder, plan, root, folder, None)
    interrupted = True
    try:
        if recorder is not None:  # the run goes on while the store opens; a store that cannot be
            recorder.watch()      # opened interrupts it, and the command fails with the store's error
        ret = hydra.run(launch.CONFIG_NAME, task, [*plan.overrides, *plan.hydra_overrides])
        interrupted = False
    except KeyboardInterrupt:
        if recorder is not None and recorder.error:
            raise CdpbenchError(recorder.error) from None
        raise
    finally:
        summary = _finish(recorder, interrupted)  # the run is over: a late answer interrupts nothing
    outcome = ret.return_value
    if recorder is not None and recorder.error:  # the store failed after the run had ended
        raise CdpbenchError(f"the run could not be written to MLflow ({recorder.error}); its results are in "
                            f"{outcome.folder}; write them later with: cdpbench record {outcome.folder}")
    run_id = summary["runs"][0]["run_id"] if summary and summary["runs"] else None
    where = f"MLflow run {run_id}" if run_id else f"record in {outcome.folder}"
    if outcome.status != "FINISHED":
        raise CdpbenchError(f"{outcome.error} ({where} marked FAILED)")
    if recorder is None:
        print(f"run: FINISHED, recorded in {outcome.folder} (tracking.enabled=false: not in MLflow; "
              f"write it there with: cdpbench record {outcome.folder})", file=sys.stderr)
    elif run_id and summary.get("experiment_id"):
        from .report import browse_hint

        print(f"run: FINISHED as MLflow run {run_id} in experiment {plan.master.tracking.experiment!r}\n"
              f"browse: {browse_hint(summary['uri'], summary['experiment_id'], run_id)}", file=sys.stderr)
    return 0


def run_sweep(hydra, plan, recorder, rerun: bool = False, reuse_old_code: bool = False) -> int:
    """Launch every job of the sweep; a failed job never stops the others. Exit 1 listing the
    failed jobs, and the parent run FAILED, when any failed.

    Resumable: unless ``--rerun``, a job whose config hash already has a FINISHED run in the
    experiment is skipped (the recorder tells the jobs which, :data:`tracking.FINISHED_FILE`)
    and listed with the run it reuses: its id, name and start time, under the command that made
    it (:func:`_skipped_lines`); FAILED and killed jobs run again. A launch that skips every job
    says so in one line (the recorder then adds no parent run). Jobs are named ``job #N`` with
    Hydra's numbering (:func:`cdpbench.launch.job_label`)."""
    import uuid

    from . import launch, tracking

    root = Path.cwd()
    line = plan.progress and plan.launcher != "basic"
    resume = not rerun and recorder is not None and bool(plan.master.tracking.get("enabled", True))
    token = uuid.uuid4().hex  # this launch's: files an earlier launch left in the same folder are not its
    if plan.launcher == "ray":
        launch.check_ray_cluster(plan.master.hydra.launcher.ray.init)  # a cluster given by address answers
    folder = tracking.write_sweep_file(plan, root, sweep_progress=line, resume=resume, launch=token,
                                       reuse_old_code=reuse_old_code)
    total = len(plan.jobs)
    tags = {"cdpbench.overrides": " ".join(tracking.redact_text(o) for o in plan.overrides), "cdpbench.jobs": str(total)}
    if plan.preset:
        tags["cdpbench.preset"] = str(plan.preset)
    # the parent's name fits MLflow's runs table (the sweep folder is its tag cdpbench.sweep_dir)
    sweep = {"jobs": total, "name": tracking.redact_text(launch.sweep_name(plan.preset, time.time())), "resume": resume,
             "launch": token, "reuse_old_code": reuse_old_code, "tags": tags}
    recorder = _open_recorder(recorder, plan, root, folder, sweep)
    bar = None
    interrupted = True
    crash: BaseException | None = None
    try:
        if recorder is not None:
            try:  # the jobs need the store's answer (which configs are FINISHED): wait for it
                recorder.ready()
            except CdpbenchError:
                tracking.forget_sweep(folder)
                raise
        if line:
            bar = SweepProgress(folder, total, token)
        if plan.launcher == "ray":
            launch.start_ray(plan.master.hydra.launcher.ray.init)
        with launch.batches_already_checked():
            hydra.multirun(launch.CONFIG_NAME, task, [*plan.overrides, *plan.hydra_overrides])
        interrupted = False
    except (KeyboardInterrupt, CdpbenchError):
        raise
    except SystemExit:  # Ray's SIGTERM handler, this process's while ray.init runs (launch.start_ray), exits: an interrupt
        raise KeyboardInterrupt from None
    except Exception as e:  # the launcher itself broke (e.g. a worker process was killed)
        crash, interrupted = e, False
    finally:
        if bar is not None:
            bar.close()
        tracking.redact_file(folder / "multirun.yaml")  # Hydra's copy of the sweep, as typed (jobs redact it too)
        if interrupted:  # jobs in processes of their own (submitit, Ray) end too, then are recorded
            from .stopping import request_stop, signals_held, wait_for_jobs

            with signals_held():
                request_stop(folder, token)
                wait_for_jobs(folder, token)
        summary = _finish(recorder, interrupted)
    if summary is None:
        summary = _unrecorded_summary(folder, total, token)
    for warning in summary.get("warnings", []):
        print(warning, file=sys.stderr)
    runs, missing = summary["runs"], summary["missing"]
    failed = [r for r in runs if r["status"] not in ("FINISHED", "SKIPPED")]
    skipped = [r for r in runs if r["status"] == "SKIPPED"]
    parent = summary.get("parent_run_id")
    recorded = summary.get("experiment_id") is not None  # else tracking is off: nothing is in MLflow
    where = f"MLflow parent run {parent}" if parent else f"records in {folder}, not in MLflow (tracking.enabled=false)"
    again = [r for r in runs if r.get("note")]  # FINISHED before, by other code or from other files
    if again:
        print("\n".join(_job_line(r["job"], r["name"], r["note"]) for r in again), file=sys.stderr)
    if skipped:
        print("\n".join(_skipped_lines(skipped, folder, token)), file=sys.stderr)
    if not failed and not missing and crash is None:
        if recorded and len(skipped) == total:  # the recorder adds no parent run for a launch that ran nothing
            added = f"MLflow parent run {parent} lists them" if parent else "no run added to MLflow"
            print(f"sweep: nothing to run, all {total} jobs FINISHED before; {added}", file=sys.stderr)
        else:
            print(f"sweep: {total} jobs FINISHED, {total - len(skipped)} run ({where})", file=sys.stderr)
        if recorded:
            from .report import browse_hint

            print(f"browse: {browse_hint(summary['uri'], summary['experiment_id'])}", file=sys.stderr)
        return 0
    marked = f"MLflow parent run {parent} marked FAILED" if parent else where
    lines = [f"error: {len(failed) + missing} of {total} jobs failed; {marked}"]
    lines += [_job_line(r["job"], r["name"], r["error"] or r["status"]) for r in failed]
    if missing:
        lines.append(f"  {missing} job(s) never started")
    if crash is not None:
        lines.append(f"  the launcher stopped: {one_line(f'{type(crash).__name__}: {crash}')}")
    print("\n".join(lines), file=sys.stderr)
    return 1


def _finish(recorder, interrupted: bool) -> dict | None:
    """The recorder's summary once it has written every run (None with tracking off); a store
    that could not be opened was reported already (by ``ready``)."""
    if recorder is not None:
        recorder.settle()  # its answer may still be on its way
    if recorder is None or recorder.error or (not recorder.is_ready and recorder.proc.poll() is not None):
        return None
    return recorder.finish(interrupted=interrupted)


def _unrecorded_summary(folder: Path, total: int, launch: str | None = None) -> dict:
    """The recorder's summary, from this launch's records alone (tracking off)."""
    from .record import FAILED, RUNNING, statuses

    runs = []
    for rec in statuses(folder, launch=launch).values():
        status = FAILED if rec.status == RUNNING else rec.status
        runs.append({"job": rec.job, "name": rec.name, "run_id": None, "status": status,
                     "error": rec.error or ("the job did not end" if rec.status == RUNNING else None)})
    runs.sort(key=lambda r: r["job"] or 0)
    return {"parent_run_id": None, "runs": runs, "missing": max(total - len(runs), 0)}


def record_command(argv: list[str]) -> int:
    """``cdpbench record FOLDER [--experiment NAME]``: write the run records under FOLDER (a run's
    or a sweep's output folder) that are not in MLflow yet, e.g. runs made with tracking off, into
    the experiment each run was configured with unless --experiment names one."""
    import argparse

    from . import tracking
    from .recorder import record_folder

    parser = argparse.ArgumentParser(prog="cdpbench record", description=record_command.__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--experiment", help="MLflow experiment (default: each run's tracking.experiment)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        raise CdpbenchError(f"record: {args.folder} is not a folder")
    root = Path.cwd()
    uri = tracking.tracking_uri(root=root)
    try:
        runs = record_folder(args.folder, uri, args.experiment, root)
    except Exception as e:  # noqa: BLE001 - the store's own error, in one line
        from .recorder import root_cause, store_unusable

        raise CdpbenchError(store_unusable(uri, root_cause(e))) from None
    for r in runs:
        print(f"{r['name']}: MLflow run {r['run_id']} {r['status']}")
    where = f"experiment {args.experiment!r}" if args.experiment else "their experiments"
    print(f"record: {len(runs)} run(s) written to {where}", file=sys.stderr)
    return 0


def _redacting_excepthook(kind, value, tb) -> None:
    """An unexpected error's traceback, with URIs redacted (MLflow's messages name the URL)."""
    from .tracking import redact_text

    sys.stderr.write(redact_text("".join(traceback.format_exception(kind, value, tb))))


def _interrupt(signum, frame):  # SIGTERM ends a run like Ctrl-C: runs are marked, not left RUNNING
    raise KeyboardInterrupt


#: what a scheduler, ``timeout`` or a closed terminal sends (to the whole process group): the
#: command ends like Ctrl-C; the recorder ignores them and records what the jobs left
ENDING_SIGNALS = tuple(getattr(signal, s) for s in ("SIGTERM", "SIGHUP") if hasattr(signal, s))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {}
    if main_thread:
        for sig in ENDING_SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's SIG_IGN stays
                previous[sig] = signal.signal(sig, _interrupt)
    sys.excepthook = _redacting_excepthook
    try:
        if argv[:1] in (["--help"], ["-h"], ["help"]):
            from .help_cmd import help_command

            return help_command(argv[1:])
        if argv[:1] == ["experiments"]:
            from .experiments_cmd import experiments_command

            return experiments_command(argv[1:])
        if argv[:1] == ["plugins"]:
            from .plugins_cmd import plugins_command

            return plugins_command(argv[1:])
        if argv[:1] == ["report"]:
            from .report import report_command

            return report_command(argv[1:])
        if argv[:1] == ["tables"]:
            from .tables import tables_command

            return tables_command(argv[1:])
        if argv[:1] == ["record"]:
            return record_command(argv[1:])
        if argv[:1] == ["reproduce"]:
            from .reproduce import reproduce_command

            return reproduce_command(argv[1:])
        if argv[:1] == ["server"]:
            from .server_cmd import server_command

            return server_command(argv[1:])
        return run_hydra(argv)
    except CdpbenchError as e:
        from .tracking import redact_text

        print(f"error: {redact_text(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; runs still open were marked FAILED", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`cdpbench plugins | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
