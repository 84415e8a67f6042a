"""MLflow tracking: where the store is, the experiment, and what identifies a run's code and config.

One MLflow run per job, children of one parent run per sweep. The embedded default store is
``sqlite:///<abs>/outputs/mlflow.db`` (absolute, so that jobs that change directory still share
it), artifacts under ``outputs/mlartifacts``; ``MLFLOW_TRACKING_URI`` overrides both. Jobs do not
write to MLflow themselves: they leave run records (:mod:`cdpbench.record`) that one recorder
process per run or sweep writes (:mod:`cdpbench.recorder`), created by code in the launching
process, so no config can install a callback and no two processes race on a fresh database.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

SWEEP_FILE = ".cdpbench_sweep.json"  # in the sweep folder: job count, varying keys, preset
#: in the sweep folder, written by the recorder: config hash -> FINISHED run of the experiment
FINISHED_FILE = ".cdpbench_finished.json"
#: config keys that do not change what a run computes: left out of its config hash
RUN_ONLY = ("progress", "tracking", "hydra")
#: MLflow 3's UI opens an experiment on its GenAI traces unless the experiment says what it is.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


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
    """What identifies a run's computation: its resolved config without :data:`RUN_ONLY` keys
    (a resumed sweep skips a job whose hash has a FINISHED run in the experiment)."""
    data = OmegaConf.to_container(cfg, resolve=True)
    data = {k: v for k, v in data.items() if k not in RUN_ONLY}
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


def write_sweep_file(plan, root: Path, sweep_progress: bool, resume: bool = False) -> Path:
    """The sweep folder's :data:`SWEEP_FILE` (job count, varying override keys, preset, whether
    the launching process draws the sweep's progress line, whether jobs already FINISHED in the
    experiment are skipped), for the jobs to read wherever they run."""
    folder = root / plan.output_dir
    folder.mkdir(parents=True, exist_ok=True)
    info = {"jobs": len(plan.jobs), "varying": plan.varying, "preset": plan.preset, "sweep_progress": sweep_progress,
            "resume": resume}
    (folder / SWEEP_FILE).write_text(json.dumps(info, indent=1))
    return folder


def sweep_dir() -> Path | None:
    """This job's sweep folder (None outside a sweep)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return Path(hc.runtime.cwd) / hc.sweep.dir if hc.mode == RunMode.MULTIRUN else None
    except Exception:
        return None


def write_finished(folder: Path, finished: dict[str, str]) -> None:
    """The recorder's answer to a resumed sweep's jobs (atomic: a job reads all or nothing)."""
    tmp = folder / f".{FINISHED_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"finished": finished}))
    os.replace(tmp, folder / FINISHED_FILE)


def wait_finished(folder: Path, timeout: float = 120.0) -> dict[str, str] | None:
    """Config hash -> FINISHED run id, once the recorder has written it (it opens the store while
    the jobs start); None if it has not within ``timeout`` seconds."""
    import time

    path = folder / FINISHED_FILE
    deadline = time.monotonic() + timeout
    while True:
        try:
            return json.loads(path.read_text())["finished"]
        except (OSError, ValueError, KeyError):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


def sweep_info() -> dict[str, Any]:
    """What the launching process left for this job in the sweep folder ({} outside a sweep)."""
    folder = sweep_dir()
    try:
        return json.loads((folder / SWEEP_FILE).read_text()) if folder is not None else {}
    except (OSError, ValueError):
        return {}
