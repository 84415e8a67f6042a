"""The ``cdpbench`` command.

* ``cdpbench [hydra overrides]`` — one run (or a sweep with ``-m``), tracked in MLflow.
* ``cdpbench plugins`` — every installed plugin with its parameters.
* ``cdpbench experiments`` — every preset with its description and command.
* ``cdpbench report`` — a metric against release for every run of a sweep, one PNG + a CSV.

A run or sweep is checked whole before anything is created (:mod:`cdpbench.launch`). Then Hydra
runs the jobs; each job catches its own failure (marks its MLflow run FAILED with the reason and
returns), so a failing job never stops the others, whatever the launcher. The launching process
owns the sweep's parent run and ends it, with the list of failed jobs and a non-zero exit.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .errors import CdpbenchError, ConfigError

log = logging.getLogger("cdpbench")
PLUGIN_KINDS = ("dataset", "anonymizer", "privacy_model", "knowledge", "estimator", "attacker")


def conf_dir() -> Path:
    """The primary config folder: ``$CDPBENCH_CONF``, else ``./conf``, else the repository's."""
    env = os.environ.get("CDPBENCH_CONF")
    if env:
        return Path(env).resolve()
    here = Path.cwd() / "conf"
    if (here / "config.yaml").exists():
        return here.resolve()
    repo = Path(__file__).resolve().parents[2] / "conf"
    if (repo / "config.yaml").exists():
        return repo
    raise CdpbenchError("no Hydra config folder found: run from the repository or set CDPBENCH_CONF")


@dataclass
class Outcome:
    """What a job returns to the launching process (picklable: it crosses process boundaries)."""

    status: str  # FINISHED or FAILED
    run_id: str | None
    error: str | None = None


def task(cfg: DictConfig) -> Outcome:
    """One job: build the components, run the releases, log everything to MLflow.

    Never raises but for an interrupt: a failure marks the run FAILED with its one-line reason
    (tag ``cdpbench.error``) and is returned, so that the launcher goes on with the other jobs.
    """
    from hydra.core.hydra_config import HydraConfig

    from . import launch, runner, tracking

    try:
        hc = HydraConfig.get()
        overrides = list(hc.overrides.task)
        job_dir = Path(hc.runtime.output_dir)
        preset = hc.runtime.choices.get("experiment")
        num = hc.job.get("num")
    except ValueError:  # called outside Hydra (tests)
        overrides, job_dir, preset, num = [], Path.cwd(), None, None
    sweep = tracking.sweep_info()
    name = cfg.tracking.get("run_name") or launch.run_name(overrides, preset, sweep.get("varying"))
    label = launch.short_label(name)
    if sweep.get("jobs") and num is not None:
        label = f"[{num + 1}/{sweep['jobs']}] {label}"
    if sweep.get("sweep_progress"):
        _quiet_console()  # the launching process draws one line for the whole sweep
    tags = {"cdpbench.kind": "job", "cdpbench.overrides": " ".join(overrides)}
    if num is not None:
        tags["cdpbench.job"] = str(num)
    job = None
    try:
        comp = runner.build(cfg)  # validated in the launching process; rebuilt here with fresh state
        tags.update(plugin_tags(comp))
        job = tracking.JobRun(cfg, tags, name, parent=sweep.get("parent_run_id"))
        show = bool(cfg.progress) and not sweep.get("sweep_progress")
        table = runner.run_releases(cfg, comp, on_release=lambda t, row: job.log_metrics(row, t), progress=show, label=label)
        with tempfile.TemporaryDirectory() as tmp:  # nothing lands unless the whole run succeeded
            from . import plots

            tmpdir = Path(tmp)
            (tmpdir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
            table.to_csv(tmpdir / "metrics.csv")
            plots.release_plot(table, tmpdir / "metrics.png", title=name)
            job.log_artifacts(tmpdir)
            for f in tmpdir.iterdir():
                shutil.copy2(f, job_dir / f.name)
        job.end("FINISHED")
        log.info("MLflow run %s: %d releases", job.run_id, len(table))
        return Outcome("FINISHED", job.run_id)
    except KeyboardInterrupt:
        if job is not None:
            job.end("FAILED", "interrupted")
        raise
    except BaseException as e:  # noqa: BLE001 - a job's failure of any kind is reported, never raised
        if isinstance(e, CdpbenchError):
            error = _one_line(str(e))
        else:
            trace = job_dir / "error.log"
            try:
                job_dir.mkdir(parents=True, exist_ok=True)
                trace.write_text("".join(traceback.format_exception(e)))
                where = f"; traceback in {trace}"
            except OSError:
                where = ""
            error = _one_line(f"run failed in {type(e).__name__}: {e}{where}")
        try:
            if job is None:  # failed before its run existed: record it so the sweep counts it
                job = tracking.JobRun(cfg, tags, name, parent=sweep.get("parent_run_id"))
            job.end("FAILED", error)
        except Exception as track_error:  # the tracking store itself is unreachable
            error += f" (and it could not be recorded in MLflow: {_one_line(str(track_error))})"
        return Outcome("FAILED", job.run_id if job is not None else None, error)


def plugin_tags(comp) -> dict[str, str]:
    from .registry import default_registry

    reg = default_registry()
    tags = {}
    for kind, plugin in comp.names.items():
        info = reg.info(kind, plugin)
        tags[f"cdpbench.{kind}"] = plugin
        tags[f"cdpbench.{kind}.version"] = f"{info.distribution} {info.version}"
    for label in comp.attackers:
        tags[f"cdpbench.attacker.{label}"] = "1"
    return tags


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


def _quiet_console() -> None:
    """Keep a parallel job's INFO lines off the terminal (they stay in its log file)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)


def check_plugin_overrides(argv: list[str]) -> None:
    """Reject ``kind=name`` overrides (sweep lists included) naming no installed plugin, with the
    installed names, before Hydra composes anything."""
    from .registry import NONE, default_registry

    reg = default_registry()
    for arg in argv:
        m = re.fullmatch(r"\+{0,2}(" + "|".join(PLUGIN_KINDS) + r")=(.*)", arg)
        if not m:
            continue
        kind, value = m.groups()
        value = re.sub(r"^(choice|range)\((.*)\)$", r"\2", value)
        for name in (v.strip() for v in value.split(",")):
            if name and name not in reg.names(kind) and not (name == NONE and kind in ("attacker", "knowledge")):
                reg.info(kind, name)  # raises the registry's error listing the installed names


class SweepProgress:
    """One line for a sweep whose jobs run elsewhere: jobs done / total, failures, elapsed, ETA.

    Reads the children's states from the tracking store once a second (so it works for any
    launcher), and prints each failed job's reason above the line as it happens.
    """

    def __init__(self, sweep, total: int):
        self.sweep = sweep
        self.total = total
        self.bar = None  # drawn once the first job has started, below the launcher's own lines
        self.started = time.time()
        self.reported: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(1.0):
            try:
                self.update()
            except Exception:  # the store is busy: try again next second
                pass

    def update(self) -> None:
        children = self.sweep.children()
        if self.bar is None:
            if not children:
                return
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc="sweep", unit="job", dynamic_ncols=True,
                            bar_format="{desc}: {n}/{total} jobs done{postfix} | {elapsed} elapsed, ETA {remaining}")
            self.bar.start_t = self.started
        done = [c for c in children if c.info.status in ("FINISHED", "FAILED", "KILLED")]
        failed = [c for c in done if c.info.status != "FINISHED"]
        for c in failed:
            if c.info.run_id not in self.reported:
                self.reported.add(c.info.run_id)
                self.bar.write(_failure_line(c), file=self.bar.fp)
        state = [f"{len(children) - len(done)} running"] + ([f"{len(failed)} failed"] if failed else [])
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


def _failure_line(run) -> str:
    tags = run.data.tags
    num = tags.get("cdpbench.job")
    job = f"job {int(num) + 1}" if num is not None else "job"
    return f"  {job} ({run.info.run_name}): {tags.get('cdpbench.error', run.info.status)}"


def run_hydra(argv: list[str]) -> int:
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
        if args.hydra_help:
            hydra.hydra_help(config_name=launch.CONFIG_NAME, args_parser=get_args_parser(), args=args)
        elif args.cfg:
            hydra.show_cfg(config_name=launch.CONFIG_NAME, overrides=args.overrides, cfg_type=args.cfg,
                           package=args.package, resolve=args.resolve)
        else:
            hydra.show_info(args.info, config_name=launch.CONFIG_NAME, overrides=args.overrides)
        return 0
    plan = launch.prepare(hydra, args.overrides, args.multirun)
    if plan.multirun:
        return run_sweep(hydra, plan)
    ret = hydra.run(launch.CONFIG_NAME, task, [*plan.overrides, *plan.hydra_overrides])
    outcome = ret.return_value
    if outcome.status != "FINISHED":
        raise CdpbenchError(f"{outcome.error} (MLflow run {outcome.run_id} marked FAILED)")
    return 0


def run_sweep(hydra, plan) -> int:
    """Launch every job of the sweep; a failed job never stops the others. Exit 1 listing the
    failed jobs, and the parent run FAILED, when any failed."""
    from . import launch, tracking

    root = Path.cwd()
    line = plan.progress and plan.launcher != "basic"
    sweep = tracking.SweepRun(plan, plan.master, root, sweep_progress=line)
    bar = None
    interrupted = True
    crash: BaseException | None = None
    try:
        if line:
            bar = SweepProgress(sweep, len(plan.jobs))
        hydra.multirun(launch.CONFIG_NAME, task, [*plan.overrides, *plan.hydra_overrides])
        interrupted = False
    except KeyboardInterrupt:
        raise
    except Exception as e:  # the launcher itself broke (e.g. a worker process was killed)
        crash, interrupted = e, False
    finally:
        if bar is not None:
            bar.close()
        failed, missing = sweep.finish(interrupted=interrupted)
    total = len(plan.jobs)
    if not failed and not missing and crash is None:
        print(f"sweep: {total} jobs FINISHED (MLflow parent run {sweep.run_id})", file=sys.stderr)
        return 0
    lines = [f"error: {len(failed) + missing} of {total} jobs failed; MLflow parent run {sweep.run_id} marked FAILED"]
    lines += [_failure_line(r) for r in failed]
    if missing:
        lines.append(f"  {missing} job(s) never started")
    if crash is not None:
        lines.append(f"  the launcher stopped: {_one_line(f'{type(crash).__name__}: {crash}')}")
    print("\n".join(lines), file=sys.stderr)
    return 1


def _interrupt(signum, frame):  # SIGTERM ends a run like Ctrl-C: runs are marked, not left RUNNING
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
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
        return run_hydra(argv)
    except CdpbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; runs still open were marked FAILED", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`cdpbench plugins | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
