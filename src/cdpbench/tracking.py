"""MLflow tracking: one MLflow run per job, children of one parent run per sweep.

The embedded default store is ``sqlite:///<abs>/outputs/mlflow.db`` (absolute, so that jobs that
change directory still share it), artifacts under ``outputs/mlartifacts``; ``MLFLOW_TRACKING_URI``
overrides both. In a multirun the database, the experiment and the parent run are created in the
launching process (:class:`MultirunParent`, a Hydra callback) before any job starts: parallel jobs
creating a fresh SQLite database race on its schema migration.
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

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

PARENT_ENV = "CDPBENCH_PARENT_RUN_ID"
PARENT_FILE = ".mlflow_parent_run"
_LAUNCHER_PARENT: dict[str, str] = {}  # set in the launching process only (see cli.main)


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
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        loc = artifact_root(root) if c.tracking_uri.startswith("sqlite:") else None
        return c.create_experiment(name, artifact_location=loc)
    except Exception:  # created concurrently by another process
        exp = c.get_experiment_by_name(name)
        if exp is None:
            raise
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


class MultirunParent(Callback):
    """Creates the database, the experiment and the sweep's parent run before jobs launch."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        root = Path.cwd()
        uri = tracking_uri(config, root)
        c = client(uri)
        exp = experiment_id(c, config.tracking.experiment, root)
        sweep_dir = Path(config.hydra.sweep.dir)
        tags = {"mlflow.runName": f"sweep {sweep_dir.name}", "cdpbench.kind": "sweep", "cdpbench.sweep_dir": str(sweep_dir.resolve())}
        commit = git_commit(root)
        if commit:
            tags["mlflow.source.git.commit"] = commit
        overrides = list(config.hydra.overrides.task)
        tags["cdpbench.overrides"] = " ".join(overrides)
        run = c.create_run(exp, tags=tags)
        rid = run.info.run_id
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_FILE).write_text(rid)
        os.environ[PARENT_ENV] = rid
        _LAUNCHER_PARENT.update(uri=uri, run_id=rid)
        log.info("MLflow parent run %s in %s", rid, uri)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish_parent("FINISHED")


def finish_parent(status: str) -> None:
    """Mark the launching process's parent run terminated (FAILED if any child failed)."""
    if not _LAUNCHER_PARENT:
        return
    uri, rid = _LAUNCHER_PARENT["uri"], _LAUNCHER_PARENT["run_id"]
    c = client(uri)
    run = c.get_run(rid)
    children = c.search_runs([run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{rid}'")
    if status == "FINISHED" and any(ch.info.status != "FINISHED" for ch in children):
        status = "FAILED"
    c.set_terminated(rid, status)
    _LAUNCHER_PARENT.clear()


def parent_run_id(cfg: DictConfig) -> str | None:
    """The sweep's parent run, as left by :class:`MultirunParent` (env var or sweep-dir file)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            return None
        f = Path(hc.runtime.cwd) / hc.sweep.dir / PARENT_FILE
        if f.exists():
            return f.read_text().strip()
    except Exception:
        pass
    return os.environ.get(PARENT_ENV)


class JobRun:
    """One MLflow run for one job; batches metrics; marks FAILED on error."""

    def __init__(self, cfg: DictConfig, tags: dict[str, str], run_name: str):
        self.uri = tracking_uri(cfg)
        self.c = client(self.uri)
        self.exp = experiment_id(self.c, cfg.tracking.experiment)
        parent = parent_run_id(cfg)
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

    def end(self, status: str) -> None:
        self.c.set_terminated(self.run_id, status)
