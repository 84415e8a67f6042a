"""One job: what every launcher runs, in the launching process or in a worker.

The job body lives apart from the command line (:mod:`cdpbench.cli`) so that a worker process
imports only what a job needs. It builds the run's components, runs the release loop, and leaves
its run record and artifacts in its folder for the recorder (:mod:`cdpbench.recorder`); it never
imports MLflow.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .errors import CdpbenchError

log = logging.getLogger("cdpbench")


@dataclass
class Outcome:
    """What a job returns to the launching process (picklable: it crosses process boundaries)."""

    status: str  # FINISHED, FAILED or SKIPPED (a resumed sweep's job already FINISHED)
    folder: str  # the job's output folder, holding its run record
    error: str | None = None


def task(cfg: DictConfig) -> Outcome:
    """One job: build the components, run the releases, leave the run's record and artifacts.

    The job never imports MLflow: its record (:mod:`cdpbench.record`) is written to MLflow by the
    recorder process. Never raises but for an interrupt: a failure is recorded FAILED with its
    one-line reason and returned, so that the launcher goes on with the other jobs.
    """
    from hydra.core.hydra_config import HydraConfig

    from . import launch, runner, tracking
    from .record import FAILED, FINISHED, SKIPPED, RunRecord, forget_recorded
    from .stopping import JobWatch

    tracking.install_log_redaction()
    try:
        hc = HydraConfig.get()
        overrides = list(hc.overrides.task)
        job_dir = Path(hc.runtime.output_dir)
        preset = hc.runtime.choices.get("experiment")
        num = hc.job.get("num")
        _redact_hydra_files(job_dir, hc.output_subdir)
    except ValueError:  # called outside Hydra (tests)
        overrides, job_dir, preset, num = [], Path.cwd(), None, None
    sweep = tracking.sweep_info()
    # Nothing a run records or prints holds a URI's credentials (tracking.redact_uri): not its
    # name, tags, parameters, config.yaml, error, log lines, nor Hydra's files in its folder.
    name = tracking.redact_text(cfg.tracking.get("run_name") or launch.run_name(overrides, preset, sweep.get("varying")))
    label = launch.short_label(name)
    who = f"run {name}"  # what its log lines call it
    if sweep.get("jobs") and num is not None:
        label = f"#{num} {label}"  # the number Hydra's launchers log (#0 : overrides) and the job's folder
        who = f"{launch.job_label(num)} ({name})"
    if sweep.get("sweep_progress"):
        _quiet_console()  # the launching process draws one line for the whole sweep
    tags = {"cdpbench.kind": "job", "cdpbench.overrides": " ".join(tracking.redact_text(o) for o in overrides),
            "cdpbench.config_hash": tracking.config_hash(cfg)}
    if num is not None:
        tags["cdpbench.job"] = str(num)
    safe_cfg = tracking.redact_config(OmegaConf.to_container(cfg, resolve=True))
    params = tracking.flatten(safe_cfg)
    record = RunRecord(name, tags, params, job=num, launch=sweep.get("launch"))
    try:  # a relaunch into the same folder: the earlier launch's run of this folder is not this one's
        forget_recorded(job_dir)
    except OSError:
        pass
    comp = provenance_tags = None  # built for the resume check, then used by the run itself
    if sweep.get("resume"):  # a job the present code and inputs already computed is not run again
        folder = tracking.sweep_dir()  # (the recorder's answer for this launch, checked in the store)
        finished = tracking.wait_finished(folder, sweep.get("launch")) if folder is not None else None
        if finished is None:
            log.warning("%s: the recorder did not say which configs are FINISHED; running it", who)
        elif finished.get(tags["cdpbench.config_hash"]):
            try:  # the code and input files this job would use, to compare with the finished runs'
                comp = runner.build(cfg)
                provenance_tags = _provenance_tags(comp)
            except Exception:  # noqa: BLE001 - the job runs and reports the failure below
                comp = None
            if comp is not None:
                reused, why = _reusable(finished[tags["cdpbench.config_hash"]], provenance_tags,
                                        bool(sweep.get("reuse_old_code")))
                if reused is not None:
                    record.skipped_run = str(reused["run"])
                    record.tags.update(provenance_tags)
                    record.tags.update(reused_tags(reused))
                    record.end(SKIPPED)
                    if not _write_quietly(record, job_dir):
                        return Outcome(FAILED, str(job_dir), f"its record could not be written in {job_dir}")
                    log.info("%s: skipped, reuses %s", who, reused_run_text(record.tags, record.skipped_run))
                    return Outcome(SKIPPED, str(job_dir))
                record.tags[RESUME_NOTE_TAG] = why
                log.info("%s: %s", who, why)
    watch = JobWatch(tracking.sweep_dir(), sweep)  # a job in another process ends when its sweep is interrupted
    if watch.stopped():  # queued by Ray or submitit, started after the sweep was interrupted: not run,
        return Outcome(FAILED, str(job_dir), "interrupted before it started")  # no record (counted missing)
    try:
        record.write(job_dir)
        watch.start()
        if comp is None:
            comp = runner.build(cfg)  # validated in the launching process; rebuilt here with fresh state
            provenance_tags = None
        record.tags.update(plugin_tags(comp))
        record.tags.update(provenance_tags or _provenance_tags(comp))  # input files are read once
        show = bool(cfg.progress) and not sweep.get("sweep_progress")
        table = runner.run_releases(cfg, comp, on_release=record.add_metrics, progress=show, label=label)
        with tempfile.TemporaryDirectory() as tmp:  # nothing lands unless the whole run succeeded
            tmpdir = Path(tmp)
            (tmpdir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(safe_cfg)))
            table.to_csv(tmpdir / "metrics.csv")
            if cfg.tracking.get("plot"):
                from . import plots

                plots.release_plot(table, tmpdir / "metrics.png", title=name)
            for f in sorted(tmpdir.iterdir()):
                shutil.copy2(f, job_dir / f.name)
                record.artifacts.append(f.name)
        record.end(FINISHED)
        record.write(job_dir)
        log.info("%s: %d releases, recorded in %s", who, len(table), job_dir)
        return Outcome(FINISHED, str(job_dir))
    except KeyboardInterrupt:
        record.end(FAILED, "interrupted")
        record.artifacts.clear()
        _write_quietly(record, job_dir)
        raise
    except BaseException as e:  # noqa: BLE001 - a job's failure of any kind is reported, never raised
        if isinstance(e, CdpbenchError):
            error = one_line(str(e))
        else:
            trace = job_dir / "error.log"
            try:
                job_dir.mkdir(parents=True, exist_ok=True)
                trace.write_text("".join(traceback.format_exception(e)))
                where = f"; traceback in {trace}"
            except OSError:
                where = ""
            error = one_line(f"run failed in {type(e).__name__}: {e}{where}")
        record.end(FAILED, error)
        record.artifacts.clear()
        if not _write_quietly(record, job_dir):
            error += f" (and its record could not be written in {job_dir})"
        return Outcome(FAILED, str(job_dir), error)
    finally:
        watch.stop()


def _write_quietly(record, folder: Path) -> bool:
    try:
        record.write(folder)
        return True
    except OSError:
        return False


#: on a job a resumed sweep ran again although its config has a FINISHED run: why
RESUME_NOTE_TAG = "cdpbench.resume_note"


def _provenance_tags(comp) -> dict[str, str]:
    """The code, input-file and environment fingerprints of a run (:mod:`cdpbench.provenance`)."""
    from . import provenance
    from .registry import default_registry

    components = [comp.dataset, comp.anonymizer, comp.privacy_model, comp.knowledge, comp.estimator, comp.attackers]
    return provenance.run_tags(provenance.code_fingerprints(components, default_registry()), comp.dataset.input_files())


def _reusable(entries: list[dict], present_tags: dict[str, str], reuse_old_code: bool) -> tuple[dict | None, str]:
    """The first FINISHED run of this config (latest first) whose code and input files are this
    job's, and else why none is: ``(entry, "")`` (the finished file's entry: ``run`` and, when the
    recorder gave them, ``name``, ``start``, ``command``, ``sweep``) or ``(None, "runs again:
    cdpbench-x changed since run ...")``. ``reuse_old_code``: code fingerprints are not compared
    (input files are)."""
    from .provenance import provenance_of, stale_reason

    present = provenance_of(present_tags)
    first_why = None
    for e in entries:
        recorded = {"code": e.get("code") or {}, "inputs": e.get("inputs")}
        if reuse_old_code:
            why = "the input files changed" if recorded["inputs"] not in (None, present["inputs"]) else None
        else:
            why = stale_reason(recorded, present)
        if why is None:
            return e, ""
        first_why = first_why or f"runs again: {why} since run {e['run']}"
    return None, first_why or "runs again"


#: on a SKIPPED record (never written to MLflow): the reused run's name, start time (ms), the
#: command that made it and its sweep's parent run name, as the recorder found them in the store
REUSED_TAGS = {"name": "cdpbench.reused.name", "start": "cdpbench.reused.start", "command": "cdpbench.reused.command",
               "sweep": "cdpbench.reused.sweep"}


def reused_tags(entry: dict) -> dict[str, str]:
    """The :data:`REUSED_TAGS` of a finished file's entry (those it has)."""
    return {tag: str(entry[key]) for key, tag in REUSED_TAGS.items() if entry.get(key) not in (None, "")}


def reused_run_text(tags: dict[str, str], run_id: str) -> str:
    """``MLflow run 79cf… "privacy_model.k=2" of 2026-11-26 05:49``: the run a skipped job reuses,
    with its name and start time when the recorder gave them."""
    import time

    text = f"MLflow run {run_id}"
    if tags.get(REUSED_TAGS["name"]):
        text += f' "{tags[REUSED_TAGS["name"]]}"'
    start = tags.get(REUSED_TAGS["start"], "")
    if start.isdigit():
        text += " of " + time.strftime("%Y-%m-%d %H:%M", time.localtime(int(start) / 1000))
    return text


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


def one_line(text: str) -> str:
    from .tracking import redact_text

    return redact_text(" ".join(text.split())) or "unknown error"


def _redact_hydra_files(job_dir: Path, output_subdir: str | None) -> None:
    """Hydra saves a job's overrides and configs (``.hydra/overrides.yaml``, ``config.yaml``,
    ``hydra.yaml``) in its folder before the job starts, as typed, and a sweep's
    ``multirun.yaml`` in the sweep folder: rewritten here with every URI redacted
    (:func:`cdpbench.tracking.redact_text`), so no credential stays on disk past a job's start."""
    from .tracking import redact_file, sweep_dir

    if output_subdir:
        for f in sorted((job_dir / str(output_subdir)).glob("*.yaml")):
            redact_file(f)
    folder = sweep_dir()
    if folder is not None:
        redact_file(folder / "multirun.yaml")


def _quiet_console() -> None:
    """Keep a parallel job's INFO lines off the terminal (they stay in its log file)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)
