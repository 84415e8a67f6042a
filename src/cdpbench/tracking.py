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
import re
import socket
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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


#: query-string parameters whose value is a secret (a match anywhere in their name, any case)
SECRET_QUERY = re.compile(r"pass|pwd|token|secret|key|sig|auth|cred", re.I)
#: a URI in free text: ``scheme://`` up to white space or a quote; Hydra's launchers log
#: overrides escaped (``http\://alice\:pw@host``), hence the optional backslashes
_URI_IN_TEXT = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*\\?://[^\s'"<>`]+""")
REDACTED = "***"
#: SQLAlchemy database URIs (``postgresql+psycopg2://user@db/name``): there a user info without
#: ``:`` is a user name (its password comes from elsewhere, e.g. ``.pgpass``) and is shown; in
#: any other URI (``https://TOKEN@host``) it is taken for a token and hidden
DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle", "sqlite", "cockroachdb")


def redact_uri(uri: str) -> str:
    """``uri`` as it may be recorded or printed: the password of its user info replaced by
    ``***`` (``http://alice:***@host``; a token alone, ``http://***@host``) and so is the value
    of every query parameter whose name says it is a secret (``password``, ``token``, ``key``,
    ``secret``, ``sig``, ``auth``, ``cred``, ...). A URI without either is returned unchanged.
    A database URI's user name without a password (``postgresql://ml@db/mlflow``) is shown
    (:data:`DATABASE_SCHEMES`). The process itself keeps connecting with the real URI: only what
    is shown is redacted."""
    if not isinstance(uri, str) or "://" not in uri:
        return uri
    try:
        parts = urlsplit(uri)
    except ValueError:  # not a URI after all (e.g. an invalid IPv6 host): hide what follows '://'
        scheme, _, rest = uri.partition("://")
        return f"{scheme}://{REDACTED}" if ("@" in rest or "=" in rest) else uri
    netloc, query = parts.netloc, parts.query
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        if colon:
            netloc = f"{user}:{REDACTED}@{host}"
        elif parts.scheme.lower().partition("+")[0] not in DATABASE_SCHEMES:
            netloc = f"{REDACTED}@{host}"
    if query:
        fields = []
        for field in query.split("&"):
            name, eq, value = field.partition("=")
            fields.append(f"{name}={REDACTED}" if eq and value and SECRET_QUERY.search(name) else field)
        query = "&".join(fields)
    if (netloc, query) == (parts.netloc, parts.query):
        return uri
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """``text`` with every URI in it passed through :func:`redact_uri` (overrides, messages,
    YAML files): what cdpbench records or prints goes through this or :func:`redact_uri`."""
    if not isinstance(text, str) or "://" not in text:
        return text

    def one(m: re.Match) -> str:
        found = m.group(0)
        plain = re.sub(r"\\(.)", r"\1", found)  # Hydra's escaping undone
        clean = redact_uri(plain)
        return found if clean == plain else clean

    return _URI_IN_TEXT.sub(one, text)


def redact_config(data: Any) -> Any:
    """A config container (``OmegaConf.to_container``) with every string value passed through
    :func:`redact_text`: what a run records as parameters and as its ``config.yaml``."""
    if isinstance(data, dict):
        return {k: redact_config(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_config(v) for v in data]
    return redact_text(data) if isinstance(data, str) else data


def redact_file(path: Path) -> None:
    """Rewrite a text file (Hydra's ``.hydra/*.yaml``, ``multirun.yaml``) with its URIs redacted;
    a file that holds none is left untouched."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return
    clean = redact_text(text)
    if clean != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(clean)
        os.replace(tmp, path)


def install_log_redaction() -> None:
    """Redact URIs in every log record of this process (Hydra's launchers log each job's
    overrides, e.g. ``#0 : tracking.uri=http://alice:s3cret@host``). Idempotent."""
    old = logging.getLogRecordFactory()
    if getattr(old, "_cdpbench_redacts", False):
        return

    def factory(*args, **kwargs):
        record = old(*args, **kwargs)
        try:
            msg = record.getMessage()
        except Exception:  # a malformed record: let logging report it as it would
            return record
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return record

    factory._cdpbench_redacts = True
    logging.setLogRecordFactory(factory)


def artifact_root(root: Path | None = None) -> str:
    return (( root or project_root()) / "outputs" / "mlartifacts").resolve().as_uri()


def client(uri: str):
    """An MLflow client of the store at ``uri``. MLflow's own "View run ... at" lines are turned
    off: against a server, ``set_terminated`` would otherwise fetch the whole run once more to print
    them (one request a run) to stdout, which is the recorder's answer channel; cdpbench prints its
    own links."""
    import mlflow
    from mlflow.tracking import MlflowClient

    logging.getLogger("alembic").setLevel(logging.WARNING)
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    mlflow.set_tracking_uri(uri)
    return MlflowClient(tracking_uri=uri)


def log_batches(params: list, tags: list, metrics: list) -> list[tuple[list, list, list]]:
    """A run's ``params``, ``tags`` and ``metrics`` (MLflow entities) packed into as few ``log_batch``
    requests as MLflow takes: each at most 100 parameters, 100 tags and 1,000 metrics, 1,000
    entities in all (:mod:`mlflow.utils.validation`), and under its 1 MB a request (sizes
    estimated as MLflow's indented JSON, on the high side). A run of up to 100 parameters and
    tags and ~900 metric values is one request."""
    from mlflow.utils.validation import (MAX_BATCH_LOG_REQUEST_SIZE, MAX_ENTITIES_PER_BATCH, MAX_METRICS_PER_BATCH,
                                         MAX_PARAMS_TAGS_PER_BATCH)

    budget = MAX_BATCH_LOG_REQUEST_SIZE - 4096  # the run id and the JSON around the lists
    limits = (MAX_PARAMS_TAGS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH, MAX_METRICS_PER_BATCH)
    batches: list[tuple[list, list, list]] = []
    sizes: list[int] = []
    for kind, items in enumerate((params, tags, metrics)):
        b = 0  # the first request that may still take one of this kind (those before it are full)
        for e in items:
            # a metric's value, timestamp and step are numbers: at most ~70 characters with their names
            n = len(json.dumps(e.key)) + (len(json.dumps(e.value)) + 64 if kind < 2 else 160)
            while b < len(batches) and (len(batches[b][kind]) >= limits[kind] or sizes[b] + n > budget
                                        or sum(map(len, batches[b])) >= MAX_ENTITIES_PER_BATCH):
                b += 1
            if b == len(batches):
                batches.append(([], [], []))
                sizes.append(0)
            batches[b][kind].append(e)
            sizes[b] += n
    return batches


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI (None for any other store, and for
    an in-memory SQLite database)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def check_reachable(uri: str, timeout: float = 10.0) -> None:
    """For an MLflow server (``http(s)://``): one request to its ``/health``, so that a server that
    is down or unreachable fails the command at once with the connection's error instead of after
    MLflow's own retries (seven, about four minutes). An HTTP answer of any status is a server
    that answers: MLflow's retries then cover a passing failure during the sweep."""
    import urllib.error
    import urllib.request

    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = f"{host}:{parts.port}" if parts.port else host  # no user info in a request line
    url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/health", "", ""))
    try:
        urllib.request.urlopen(url, timeout=timeout).close()
    except urllib.error.HTTPError:
        return
    except urllib.error.URLError as e:
        reason = e.reason if isinstance(e.reason, BaseException) else OSError(str(e.reason))
        raise reason from None


#: seconds a recorder waits for another cdpbench process to let go of a SQLite store
STORE_LOCK_TIMEOUT = 600.0


def store_lock(uri: str):
    """A lock that serializes the writes of cdpbench's processes to one SQLite store: its
    creation (MLflow builds the tables on first use; two processes building them together leave
    ``table ... already exists`` and a half-built store) and every run's writes. A lock file
    beside the database (``mlflow.db.lock``), held with ``flock``: the kernel lets go of it when
    its holder dies, even by SIGKILL. Other stores (an MLflow server, PostgreSQL) serialize
    their own writes: a no-op there."""
    import contextlib

    path = sqlite_path(uri)
    if path is None:
        return contextlib.nullcontext()
    import errno

    from filelock import FileLock

    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent))
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(f"{path}.lock", timeout=STORE_LOCK_TIMEOUT)


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


def write_sweep_file(plan, root: Path, sweep_progress: bool, resume: bool = False, launch: str | None = None,
                     reuse_old_code: bool = False) -> Path:
    """The sweep folder's :data:`SWEEP_FILE` (job count, varying override keys, preset, whether
    the launching process draws the sweep's progress line, whether jobs already FINISHED in the
    experiment are skipped, this launch's token), for the jobs to read wherever they run. The
    launch token ties the files of a launch together: the jobs' records and the recorder's
    :data:`FINISHED_FILE` carry it, so that files left in the folder by an earlier launch into
    the same folder are never taken for this launch's."""
    folder = root / plan.output_dir
    folder.mkdir(parents=True, exist_ok=True)
    info = {"jobs": len(plan.jobs), "varying": plan.varying, "preset": plan.preset, "sweep_progress": sweep_progress,
            "resume": resume, "reuse_old_code": reuse_old_code, "launch": launch, "launcher_pid": os.getpid(),
            "host": socket.gethostname()}
    (folder / SWEEP_FILE).write_text(json.dumps(info, indent=1))
    return folder


def forget_sweep(folder: Path) -> None:
    """Remove what the launching process and its recorder wrote in a sweep folder before any job
    ran (the sweep was refused): the folder itself when nothing else is in it."""
    from .stopping import STOP_FILE

    for name in (SWEEP_FILE, FINISHED_FILE, STOP_FILE):
        try:
            (folder / name).unlink()
        except OSError:
            pass
    try:
        folder.rmdir()
    except OSError:
        pass


def sweep_dir() -> Path | None:
    """This job's sweep folder (None outside a sweep)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return Path(hc.runtime.cwd) / hc.sweep.dir if hc.mode == RunMode.MULTIRUN else None
    except Exception:
        return None


def finished_entries(value: Any) -> list[dict[str, Any]]:
    """A finished file's entry for one config hash as a list of ``{"run", "code", "inputs"}``
    (latest run first); a bare run id (files written before #30) is one entry without
    fingerprints."""
    if isinstance(value, str):
        return [{"run": value}]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict) and isinstance(v.get("run"), str)]
    return []


def write_finished(folder: Path, finished: dict[str, Any], launch: str | None = None) -> None:
    """The recorder's answer to a resumed sweep's jobs, for launch ``launch`` (atomic: a job reads
    all or nothing)."""
    tmp = folder / f".{FINISHED_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"launch": launch, "finished": finished}))
    os.replace(tmp, folder / FINISHED_FILE)


def read_finished(folder: Path) -> dict[str, Any] | None:
    """The :data:`FINISHED_FILE` in ``folder`` as written (``launch``, ``finished``), whichever
    launch wrote it; None if there is none or it is not one."""
    try:
        data = json.loads((folder / FINISHED_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("finished"), dict):
        return None
    return data


def wait_finished(folder: Path, launch: str | None = None, timeout: float = 120.0) -> dict[str, list[dict[str, Any]]] | None:
    """Config hash -> its FINISHED runs with their fingerprints (:func:`finished_entries`), once
    this launch's recorder has written it (it opens the store while the jobs start); None if it
    has not within ``timeout`` seconds. A file left by another launch (another ``launch`` token)
    is not this launch's answer: it is waited past."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        data = read_finished(folder)
        if data is not None and data.get("launch") == launch:
            return {str(k): finished_entries(v) for k, v in data["finished"].items()}
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
