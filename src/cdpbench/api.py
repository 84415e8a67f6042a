"""The Python API, for notebooks: run one config, and read a sweep's or a run's metrics as pandas.

    import cdpbench

    df = cdpbench.load_sweep("latest")  # the latest sweep: one row per run, release and metric
    result = cdpbench.run(["privacy_model.k=5", "dataset.releases=2"])  # as `cdpbench privacy_model.k=5 ...`

Nothing here is machinery of its own. :func:`run` checks a config with the command line's own
checks (:func:`cdpbench.launch.prepare`) and runs it through the command line's single-run path
(:func:`cdpbench.cli.run_single`: the job in this process, its recorder process writing it to
MLflow). :func:`load_sweep` finds a sweep's runs as ``cdpbench report`` does
(:func:`cdpbench.report.sweep_runs`). The store is the command line's: ``$MLFLOW_TRACKING_URI``,
else ``sqlite:///<current folder>/outputs/mlflow.db``; ``tracking_uri=`` names another.

The frames are tidy: columns ``run`` (the MLflow run id), ``run_name``, one column per parameter
of the run's config (flattened, e.g. ``privacy_model.k``; numbers and true/false as such),
``release``, ``metric``, ``value``. See docs/python_api.md for a walkthrough.

Every import this module needs (pandas, MLflow, Hydra) is made inside the function that uses it:
``import cdpbench`` stays light (the package exports these names lazily).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from .errors import CdpbenchError, ConfigError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunResult", "load_run", "load_sweep", "run"]

#: the fixed columns of the tidy frames; the parameters' columns go between ``run_name`` and ``release``
ID_COLUMNS = ("run", "run_name")
VALUE_COLUMNS = ("release", "metric", "value")


# ----------------------------------------------------------------------------------------- run
@dataclass
class RunResult:
    """What :func:`run` returns: the run's MLflow id (None with ``tracking.enabled=false``), its
    name, experiment and output folder, its parameters, and its metrics as a tidy frame (the
    values written to MLflow)."""

    run_id: str | None
    run_name: str
    experiment: str
    folder: Path
    params: dict[str, str] = field(repr=False)
    metrics: pd.DataFrame = field(repr=False)

    def table(self) -> pd.DataFrame:
        """The metrics as a wide frame: one row per release, one column per metric."""
        wide = self.metrics.pivot(index="release", columns="metric", values="value")
        wide.columns.name = None
        return wide

    def as_dict(self) -> dict[str, dict[int, float]]:
        """``{metric: {release: value}}``."""
        out: dict[str, dict[int, float]] = {}
        for rel, metric, value in self.metrics[list(VALUE_COLUMNS)].itertuples(index=False):
            out.setdefault(metric, {})[int(rel)] = float(value)
        return out


def run(overrides: list[str] | dict[str, Any] | str | None = None, *, experiment: str | None = None,
        tracking_uri: str | None = None) -> RunResult:
    """Run one config, as ``cdpbench OVERRIDES...`` runs it, and return its metrics.

    ``overrides``: Hydra overrides as the command line takes them (``["privacy_model=l_diversity",
    "privacy_model.k=5"]``, or one string of them), or a dict ``{"privacy_model.k": 5}`` whose
    values are values (quoted for Hydra as needed). ``experiment``: the MLflow experiment
    (``tracking.experiment``). ``tracking_uri``: the store, in place of ``$MLFLOW_TRACKING_URI`` and
    the default ``outputs/mlflow.db`` under the current folder.

    The config passes every check of the command line first (a one-line :class:`ConfigError`
    otherwise, and nothing is created); the run is recorded in MLflow by the same recorder, its
    output folder is ``outputs/runs/<time>`` under the current folder, as the command line's. A run
    that fails raises :class:`CdpbenchError` with its reason (its MLflow run is marked FAILED).
    A sweep (several values, ``-m``) is for the command line; :func:`load_sweep` reads it.
    """
    from . import cli, launch, tracking
    from .presets import conf_dir
    from .record import RECORD_FILE, RECORDED_FILE, RunRecord

    argv = _overrides(overrides)
    if experiment is not None:
        if any(_key(a) == "tracking.experiment" for a in argv):
            raise ConfigError("run: give the experiment once, as experiment= or as tracking.experiment=, not both")
        argv.append(f"tracking.experiment={launch.quote(str(experiment))}")
    with _store_uri(tracking_uri), _hydra_state_restored():
        tracking.install_log_redaction()
        with cli.started_recorder(argv) as recorder:  # as the command line does
            cli.check_plugin_overrides(argv)
            hydra = launch.hydra_instance(conf_dir())
            plan = launch.prepare(hydra, argv, multirun=False)
            if plan.multirun:
                raise ConfigError("run: this config is a sweep (its preset sets hydra.mode=MULTIRUN); run it with "
                                  "`cdpbench -m ...` and read it with load_sweep()")
            cli.run_single(hydra, plan, recorder)
    folder = Path.cwd() / plan.output_dir
    record = RunRecord.read(folder / RECORD_FILE)
    recorded = folder / RECORDED_FILE
    run_id = recorded.read_text().strip() if recorded.exists() else None
    points = ((step, metric, value) for step, _, row in record.metrics for metric, value in row.items())
    metrics = _frame([(run_id, record.name, record.params, points)])
    return RunResult(run_id, record.name, str(plan.master.tracking.experiment), folder, dict(record.params), metrics)


def _overrides(overrides: list[str] | dict[str, Any] | str | None) -> list[str]:
    from .launch import quote

    if overrides is None:
        return []
    if isinstance(overrides, str):
        return shlex.split(overrides)
    if isinstance(overrides, dict):
        return [f"{k}={_hydra_value(v, quote)}" for k, v in overrides.items()]
    if isinstance(overrides, (list, tuple)) and all(isinstance(o, str) for o in overrides):
        return list(overrides)
    raise ConfigError(f"run: overrides must be a list of 'key=value' strings, one string of them, or a dict "
                      f"(got {type(overrides).__name__})")


def _hydra_value(value: Any, quote) -> str:
    """A Python value as a Hydra override value: a string is a string (quoted when needed)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v, quote) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(v, quote)}" for k, v in value.items()) + "}"
    return quote(str(value))


def _key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


@contextlib.contextmanager
def _store_uri(uri: str | None):
    """``tracking_uri=``: the store for the run and its recorder process, as
    ``$MLFLOW_TRACKING_URI`` would name it (then restored)."""
    if uri is None:
        yield
        return
    before = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = str(uri)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


@contextlib.contextmanager
def _hydra_state_restored():
    """Hydra configures logging for its job (a handler on the run's log file, its console
    format) and keeps the job's config as global state: both are put back as they were once the
    run is over, so that a notebook's later log lines do not go to the run's file."""
    loggers = [logging.getLogger(), logging.getLogger("hydra"), logging.getLogger("cdpbench")]
    before = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    try:
        yield
    finally:
        for lg, handlers, level, propagate in before:
            for h in lg.handlers:
                if h not in handlers:
                    with contextlib.suppress(Exception):
                        h.close()
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate = propagate
        try:
            from hydra.core.global_hydra import GlobalHydra
            from hydra.core.hydra_config import HydraConfig

            HydraConfig.instance().cfg = None
            GlobalHydra.instance().clear()
        except Exception:  # noqa: BLE001 - Hydra never imported, or already clear
            pass


# ---------------------------------------------------------------------------------- load_sweep
def load_sweep(which: str = "latest", *, experiment: str | None = None, preset: str | None = None,
               parent_id: str | None = None, tracking_uri: str | None = None) -> pd.DataFrame:
    """A sweep's metrics as one tidy frame: columns ``run`` (run id), ``run_name``, each
    parameter, ``release``, ``metric``, ``value``; one row per run, metric and release.

    ``which``: ``"latest"`` (the sweep started last) or a sweep's parent run id (as
    ``parent_id=``). ``experiment``: look for the latest sweep in that experiment only.
    ``preset``: the latest sweep of that preset (``preset="quickstart"``: ``make run``'s).
    The sweep's runs are those ``cdpbench report`` uses: its FINISHED job runs, and those a
    resumed sweep skipped as already FINISHED; a run that is not FINISHED is left out with a
    warning naming it (:func:`load_run` reads it). ``frame.attrs`` holds the sweep's
    ``parent_id`` and ``sweep_name``.
    """
    import warnings

    from . import report

    parent = _which(which, parent_id)
    if parent is not None and preset is not None:
        raise ConfigError(f"load_sweep: give a sweep's parent run id or preset={preset!r}, not both")
    c = _client(tracking_uri, "load_sweep")
    exp_ids = report.experiment_ids(c, experiment)
    if parent is None:
        try:
            parent = report.latest_sweep(c, exp_ids, preset)
        except CdpbenchError:
            if preset is not None:
                _known_preset(preset)
            raise
    parent, runs, name = report.sweep_runs(c, exp_ids, parent)
    finished = [r for r in runs if r.info.status == "FINISHED"]
    others = [r for r in runs if r.info.status != "FINISHED"]
    if not finished:
        raise CdpbenchError(f"load_sweep: sweep {name!r} ({parent}) has no FINISHED run: "
                            + ", ".join(f"{r.info.run_id} {r.info.status}" for r in others))
    if others:
        warnings.warn(f"load_sweep: left out {len(others)} run(s) of {name!r} that are not FINISHED: "
                      + ", ".join(f"{r.info.run_id} {r.info.status}" for r in others)
                      + " (load_run(run_id) reads one)", stacklevel=2)
    finished.sort(key=_sweep_order)
    df = _frame([(r.info.run_id, r.info.run_name, r.data.params, _points(c, r)) for r in finished])
    df.attrs.update(parent_id=parent, sweep_name=name)
    return df


def load_run(run_id: str, *, tracking_uri: str | None = None) -> pd.DataFrame:
    """One run's metrics, in the frame of :func:`load_sweep` (whatever its status)."""
    from . import tracking

    c = _client(tracking_uri, "load_run")
    try:
        r = c.get_run(run_id)
    except Exception:  # noqa: BLE001 - MLflow's error for an unknown id is pages long
        raise CdpbenchError(f"load_run: no MLflow run with id {run_id!r} in {tracking.redact_uri(c.tracking_uri)}") from None
    if r.data.tags.get("cdpbench.kind") == "sweep":
        raise CdpbenchError(f"load_run: {run_id} is a sweep's parent run (it has no metrics); "
                            f"load_sweep({run_id!r}) reads its runs")
    return _frame([(r.info.run_id, r.info.run_name, r.data.params, _points(c, r))])


def _which(which: str | None, parent_id: str | None) -> str | None:
    """The parent run id ``which`` / ``parent_id`` name, None for the latest sweep."""
    named = None if which in (None, "latest") else which
    if named is not None and not isinstance(named, str):
        raise ConfigError(f"load_sweep: which must be 'latest' or a sweep's parent run id (got {named!r})")
    if named is not None and parent_id is not None and named != parent_id:
        raise ConfigError(f"load_sweep: two sweeps named: {named!r} and parent_id={parent_id!r}")
    return named or parent_id


def _known_preset(preset: str) -> None:
    """A one-line error for a preset name that no preset has."""
    import difflib

    from .presets import preset_names

    names = preset_names()
    if preset in names:
        return
    close = difflib.get_close_matches(preset, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"load_sweep: unknown preset {preset!r}{hint} (`cdpbench experiments` lists the {len(names)} "
                      f"presets)")


def _client(uri: str | None, command: str):
    """An MLflow client on ``uri``, else on the command line's store; a local store must exist
    (reading never creates one)."""
    from . import report, tracking

    store = uri or tracking.tracking_uri(root=Path.cwd())
    try:
        report.existing_store(store, uri, command=command)
    except CdpbenchError as e:
        raise CdpbenchError(str(e).replace("--tracking-uri", "tracking_uri=")) from None
    return tracking.client(store)


def _sweep_order(r) -> tuple:
    """A sweep's runs in the order its jobs were launched (then by name)."""
    job = r.data.tags.get("cdpbench.job", "")
    return (int(job) if job.isdigit() else 1 << 30, r.info.run_name or "", r.info.run_id)


def _points(c, r) -> Iterable[tuple[int, str, float]]:
    """Every logged value of a run: (release, metric, value)."""
    from .report import _histories

    for metric, series in _histories(c, r).items():
        for step, value in series.items():
            yield int(step), metric, float(value)


def _frame(runs: list[tuple[str | None, str, dict[str, str], Iterable[tuple[int, str, float]]]]) -> pd.DataFrame:
    """The tidy frame of ``(run id, run name, params, (release, metric, value)...)`` per run:
    parameters typed (:func:`_typed`), rows in the runs' order, then by metric and release."""
    import pandas as pd

    names = sorted({k for _, _, params, _ in runs for k in params} - {*ID_COLUMNS, *VALUE_COLUMNS})
    blocks = []
    for run_id, run_name, params, points in runs:
        block = pd.DataFrame(list(points), columns=list(VALUE_COLUMNS))
        block = block.sort_values(["metric", "release"], kind="stable")
        for k in reversed(names):
            block.insert(0, k, params.get(k))
        block.insert(0, "run_name", run_name)
        block.insert(0, "run", run_id)
        blocks.append(block)
    df = pd.concat(blocks, ignore_index=True) if blocks else pd.DataFrame(columns=[*ID_COLUMNS, *names, *VALUE_COLUMNS])
    for k in names:
        df[k] = _typed(df[k])
    return df.astype({"release": "int64", "metric": "object", "value": "float64"})


def _typed(column: pd.Series) -> pd.Series:
    """A parameter column as MLflow holds it (text) typed: numbers as numbers, ``True``/``False``
    as booleans, ``None`` as missing; any other column stays text."""
    import pandas as pd

    values = column.where(column != "None")
    present = values.dropna()
    if present.empty:
        return values
    if present.isin(["True", "False"]).all():
        return values.map({"True": True, "False": False})
    try:
        return pd.to_numeric(values)
    except (TypeError, ValueError):
        return column
