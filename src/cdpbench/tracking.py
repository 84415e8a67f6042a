"""MLflow tracking: one MLflow run per job, children of one parent run per sweep.

The embedded default store is ``sqlite:///<abs>/outputs/mlflow.db`` (absolute, so that jobs that
change directory still share it), artifacts under ``outputs/mlartifacts``; ``MLFLOW_TRACKING_URI``
overrides both. In a multirun the database, the experiment and the parent run are created in the
launching process (:class:`SweepRun`, by code: no config can install a callback) before any job
starts, because parallel jobs creating a fresh SQLite database race on its schema migration. The
launching process also ends the parent: FAILED with the count of failed children when any job
failed, and any child a dead worker left RUNNING is marked FAILED with the reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

PARENT_ENV = "CDPBENCH_PARENT_RUN_ID"
SWEEP_FILE = ".cdpbench_sweep.json"  # in the sweep folder: parent run id, job count, varying keys
#: MLflow 3's UI opens an experiment on its GenAI traces unless the experiment says what it is.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}
ERROR_TAG = "cdpbench.error"


def project_root() -> Path:
    """Where ``outputs/`` lives: Hydra's original working directory, else the current one."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.cwd)
    except Exception:
        return Path.cwd()


def tracking_uri(cfg: DictConfig | None = None, root: Path | None = None) -> str:
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if cfg is not None and cfg.get("tracking") and cfg.tracking.get("uri"):
        return str(cfg.tracking.uri)
    root = root or project_root()
    return f"sqlite:///{(root / 'outputs' / 'mlflow.db').resolve()}"


def artifact_root(root: Path | None = None) -> str:
    return (( root or project_root()) / "outputs" / "mlartifacts").resolve().as_uri()


def client(uri: str):
    import mlflow
    from mlflow.tracking import MlflowClient

    logging.getLogger("alembic").setLevel(logging.WARNING)
    mlflow.set_tracking_uri(uri)
    return MlflowClient(tracking_uri=uri)


def experiment_id(c, name: str, root: Path | None = None) -> str:
    """The experiment's id, created if needed and tagged so that the MLflow UI opens on its runs."""
    exp = c.get_experiment_by_name(name)
    if exp is None:
        try:
            loc = artifact_root(root) if c.tracking_uri.startswith("sqlite:") else None
            return c.create_experiment(name, artifact_location=loc, tags=EXPERIMENT_KIND)
        except Exception:  # created concurrently by another process
            exp = c.get_experiment_by_name(name)
            if exp is None:
                raise
    for k, v in EXPERIMENT_KIND.items():
        if exp.tags.get(k) is None:
            c.set_experiment_tag(exp.experiment_id, k, v)
    return exp.experiment_id


def git_commit(root: Path | None = None) -> str | None:
    """The commit of the code that runs (the checkout holding this package), else of ``root``."""
    for where in (Path(__file__).resolve().parent, root or project_root()):
        try:
            out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        except Exception:
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def config_hash(cfg: DictConfig) -> str:
    data = OmegaConf.to_container(cfg, resolve=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def flatten(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, list) and any(isinstance(x, (dict, list)) for x in d):
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = str(d)
    return out


class SweepRun:
    """A sweep's parent run, created in the launching process before any job starts.

    The sweep folder gets :data:`SWEEP_FILE` (parent run id, job count, varying override keys,
    preset, whether the launching process draws the sweep's progress line) for the jobs to read,
    wherever they run; the parent id is also exported as ``$CDPBENCH_PARENT_RUN_ID``.
    """

    def __init__(self, plan, cfg: DictConfig, root: Path, sweep_progress: bool):
        self.uri = tracking_uri(cfg, root)
        self.c = client(self.uri)
        self.total = len(plan.jobs)
        self.exp = experiment_id(self.c, cfg.tracking.experiment, root)
        sweep_dir = root / plan.output_dir
        tags = {
            "mlflow.runName": f"{plan.preset or 'sweep'} ({sweep_dir.name})",
            "cdpbench.kind": "sweep",
            "cdpbench.sweep_dir": str(sweep_dir.resolve()),
            "cdpbench.overrides": " ".join(plan.overrides),
            "cdpbench.jobs": str(self.total),
        }
        commit = git_commit(root)
        if commit:
            tags["mlflow.source.git.commit"] = commit
        self.run_id = self.c.create_run(self.exp, tags=tags).info.run_id
        sweep_dir.mkdir(parents=True, exist_ok=True)
        info = {"parent_run_id": self.run_id, "jobs": self.total, "varying": plan.varying, "preset": plan.preset,
                "sweep_progress": sweep_progress}
        (sweep_dir / SWEEP_FILE).write_text(json.dumps(info, indent=1))
        os.environ[PARENT_ENV] = self.run_id
        log.info("MLflow parent run %s in %s", self.run_id, self.uri)

    def children(self) -> list:
        return self.c.search_runs([self.exp], filter_string=f"tags.mlflow.parentRunId = '{self.run_id}'",
                                  max_results=50000)

    def finish(self, interrupted: bool = False) -> tuple[list, int]:
        """End the parent: children left RUNNING (their worker died, or the sweep was interrupted)
        become FAILED with the reason; the parent is FAILED when any job failed or never ran, with
        the count in ``cdpbench.failed_jobs``. Returns the failed children (in job order) and the
        number of jobs that never created a run."""
        reason = "the job did not end: the sweep was interrupted" if interrupted else (
            "the job did not end: its worker process died, or was stopped when another one died")
        children = self.children()
        for ch in children:
            if ch.info.status in ("RUNNING", "SCHEDULED"):
                self.c.set_tag(ch.info.run_id, ERROR_TAG, reason)
                self.c.set_terminated(ch.info.run_id, "FAILED")
        children = self.children()
        failed = [ch for ch in children if ch.info.status != "FINISHED"]
        missing = max(self.total - len(children), 0)
        self.c.set_tag(self.run_id, "cdpbench.failed_jobs", str(len(failed) + missing))
        ok = not failed and not missing and not interrupted
        self.c.set_terminated(self.run_id, "FINISHED" if ok else "FAILED")
        os.environ.pop(PARENT_ENV, None)
        return sorted(failed, key=lambda r: int(r.data.tags.get("cdpbench.job", 0))), missing


def sweep_info() -> dict[str, Any]:
    """What the launching process left for this job in the sweep folder ({} outside a sweep)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            return {}
        f = Path(hc.runtime.cwd) / hc.sweep.dir / SWEEP_FILE
        if f.exists():
            return json.loads(f.read_text())
    except Exception:
        pass
    parent = os.environ.get(PARENT_ENV)
    return {"parent_run_id": parent} if parent else {}


class JobRun:
    """One MLflow run for one job; batches metrics; marks FAILED on error."""

    def __init__(self, cfg: DictConfig, tags: dict[str, str], run_name: str, parent: str | None = None):
        self.uri = tracking_uri(cfg)
        self.c = client(self.uri)
        self.exp = experiment_id(self.c, cfg.tracking.experiment)
        tags = dict(tags)
        tags["mlflow.runName"] = run_name
        if parent:
            tags["mlflow.parentRunId"] = parent
            tags["cdpbench.sweep_id"] = parent
        commit = git_commit()
        if commit:
            tags["mlflow.source.git.commit"] = commit
        tags["cdpbench.config_hash"] = config_hash(cfg)
        self.run_id = self.c.create_run(self.exp, tags=tags).info.run_id
        params = flatten(OmegaConf.to_container(cfg, resolve=True))
        self.log_params(params)

    def log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.c.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None]
        for i in range(0, len(items), 500):
            self.c.log_batch(self.run_id, metrics=items[i : i + 500])

    def log_artifacts(self, folder: Path) -> None:
        self.c.log_artifacts(self.run_id, str(folder))

    def end(self, status: str, error: str | None = None) -> None:
        if error:
            self.c.set_tag(self.run_id, ERROR_TAG, error[:5000])
        self.c.set_terminated(self.run_id, status)
