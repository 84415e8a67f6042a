"""What the launching process does before Hydra runs a single job or a sweep.

Every config is checked before anything is created (no folder, no MLflow run):

1. **Only registered plugins and their parameters.** Overrides and presets may not set
   ``hydra.callbacks``, ``hydra.searchpath``, ``hydra.job.env_set/env_copy``, logging handlers
   built from arbitrary classes, or any ``_target_`` (the lab's own callbacks are installed in
   code); ``+experiment=`` names a preset of the project's ``experiments/`` folder and nothing
   else; Hydra flags that read configs or pickles from elsewhere are refused.
2. **The sweep is expanded exactly as Hydra's basic sweeper will** (the preset's
   ``hydra.sweeper.params`` plus the command line), and every job's config is composed and
   validated: plugin parameters through the registry, the run's own keys (``seed``, ``progress``,
   ``tracking``), unknown keys with or without ``+``, and the data set's inputs
   (:meth:`Dataset.check <cdpbench.plugin.Dataset.check>`: every release of a CSV scenario).

The result is a :class:`Plan`: the jobs with their overrides and run names, the sweep's varying
keys and the resolved output folder, which :mod:`cdpbench.cli` hands to Hydra.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import CdpbenchError, ConfigError

CONFIG_NAME = "config"
#: The keys of a run's config that the core reads (plugin groups, run parameters, hydra).
TOP_LEVEL = ("dataset", "anonymizer", "privacy_model", "knowledge", "estimator", "attacker", "metrics",
             "extra_attackers", "seed", "progress", "tracking", "hydra")
TRACKING_KEYS = ("uri", "experiment", "run_name", "enabled", "plot")
#: Hydra settings that would import or run code, or read configs from elsewhere.
FORBIDDEN_HYDRA = ("hydra.callbacks", "hydra.searchpath", "hydra.job.env_set", "hydra.job.env_copy",
                   "hydra.job_logging", "hydra.hydra_logging")
#: Hydra command-line flags that read configs or pickled state from outside the project.
FORBIDDEN_FLAGS = {"config_dir": "--config-dir", "config_path": "--config-path", "config_name": "--config-name",
                   "experimental_rerun": "--experimental-rerun"}
#: Where a Hydra launcher or sweeper may come from: Hydra itself or an installed hydra plugin.
TRUSTED_TARGETS = ("hydra._internal.core_plugins.", "hydra_plugins.")
#: Launcher settings that run code or commands from the config: Ray's runtime environments
#: (``worker_process_setup_hook`` imports and calls a function, ``pip`` installs packages),
#: submitit's ``setup`` (shell lines before each SLURM job), a Ray cluster's setup commands.
LAUNCHER_CODE_KEYS = ("runtime_env", "setup", "setup_commands", "head_setup_commands", "worker_setup_commands",
                      "initialization_commands", "worker_process_setup_hook")
#: Launchers refused whole: RayAWSLauncher starts cluster machines with setup commands from its config.
REFUSED_LAUNCHERS = {"hydra_plugins.hydra_ray_launcher.ray_aws_launcher.RayAWSLauncher":
                     "ray_aws creates cloud machines that run setup commands from its config; start a Ray cluster "
                     "yourself and use hydra/launcher=ray with +hydra.launcher.ray.init.address=HOST:PORT"}


@dataclass
class Job:
    overrides: list[str]  # the job's own overrides (what Hydra passes as hydra.overrides.task)
    cfg: DictConfig
    name: str = ""


@dataclass
class Plan:
    multirun: bool
    overrides: list[str]  # the command line's overrides
    master: DictConfig  # the composed config of the command line (a sweep's master config)
    jobs: list[Job]
    preset: str | None  # the +experiment= preset, if any
    varying: list[str] = field(default_factory=list)  # override keys whose value differs between jobs
    output_dir: str = ""  # hydra.run.dir or hydra.sweep.dir, resolved once
    launcher: str = "basic"
    progress: bool = True

    @property
    def hydra_overrides(self) -> list[str]:
        """The run mode and the output folder, as resolved here, for Hydra to use as they are."""
        key = "hydra.sweep.dir" if self.multirun else "hydra.run.dir"
        return [f"hydra.mode={'MULTIRUN' if self.multirun else 'RUN'}", f"{key}={quote(self.output_dir)}"]


def quote(value: str) -> str:
    """A string as a Hydra override value (quoted when the grammar needs it)."""
    if re.fullmatch(r"[\w./\-:]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------------- overrides
def parse_overrides(hydra, overrides: list[str]) -> list[Any]:
    """Hydra's own parse of the overrides (quoting, sweeps, ``+``/``~``), one-line errors."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create(config_loader=hydra.config_loader)
    parsed = []
    for text in overrides:
        try:
            parsed.extend(parser.parse_overrides([text]))
        except HydraException as e:
            raise ConfigError(f"{text}: cannot parse this override: {_first_line(e)}") from None
    return parsed


def check_override(o: Any, where: str = "the command line") -> None:
    """Refuse an override that could make the program import or call code (see module doc)."""
    key = o.key_or_group.replace("/", ".")
    text = o.input_line or key
    if "_target_" in key.split("."):
        raise ConfigError(f"{text}: _target_ cannot be set from {where}; configs name registered plugins "
                          f"(cdpbench plugins) and their parameters only")
    for bad in FORBIDDEN_HYDRA:
        if key == bad or key.startswith(bad + "."):
            if key.startswith(("hydra.job_logging", "hydra.hydra_logging")) and "/" in o.key_or_group:
                continue  # choosing one of Hydra's own logging presets (hydra/job_logging=disabled) is fine
            raise ConfigError(f"{text}: {bad} cannot be set from {where}; cdpbench installs its own callbacks "
                              f"and logging in code")
    if key == "experiment" or key.startswith("experiment."):
        check_preset(o, text)


def check_preset(o: Any, text: str) -> None:
    """``+experiment=NAME`` (and ``+experiment/GROUP=OPTION`` in a preset's sweep) only names a
    preset of the project's experiments folder."""
    from .experiments_cmd import preset_names, preset_options

    group = o.key_or_group
    allowed = preset_names() if group == "experiment" else preset_options(group)
    values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.value()]
    for value in values:
        if not isinstance(value, str) or value not in allowed:
            raise ConfigError(f"{text}: {value!r} is not a preset; {group} has: {', '.join(allowed) or 'none'} "
                              f"(cdpbench experiments lists them)")


def check_config(cfg: DictConfig) -> None:
    """The composed config (command line + presets + primary config) sets nothing that could import
    or call code: no callbacks, search path, environment, logging classes or ``_target_`` except a
    launcher or sweeper from Hydra or an installed Hydra plugin."""
    h = cfg.hydra
    for key in ("callbacks", "searchpath"):
        if h.get(key):
            raise ConfigError(f"hydra.{key} cannot be set by a config or preset (found {_short_value(h.get(key))})")
    for key in ("env_set", "env_copy"):
        if h.job.get(key):
            raise ConfigError(f"hydra.job.{key} cannot be set by a config or preset")
    for node in ("job_logging", "hydra_logging"):
        for path, k, v in _walk(h.get(node), f"hydra.{node}"):
            if k == "()" or (k == "class" and not str(v).startswith("logging.")):
                raise ConfigError(f"{path}.{k}: logging may only use classes of the logging module (got {v!r})")
    plain = {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}
    for path, k, _ in _walk(plain, ""):
        if k == "_target_":
            where = f"{path}._target_" if path else "_target_"
            raise ConfigError(f"{where} cannot be set; configs name registered plugins (cdpbench plugins) only")
    for node in ("launcher", "sweeper"):
        target = str(h[node].get("_target_", ""))
        if not target.startswith(TRUSTED_TARGETS):
            raise ConfigError(f"hydra.{node}._target_ must be a Hydra {node} (hydra/{node}=...), got {target!r}")
        if target in REFUSED_LAUNCHERS:
            raise ConfigError(f"hydra/{node}: {REFUSED_LAUNCHERS[target]}")
        for path, k, v in _walk(h[node], f"hydra.{node}"):
            if k == "_target_" and path != f"hydra.{node}":
                raise ConfigError(f"{path}._target_ cannot be set by a config")
            if k in LAUNCHER_CODE_KEYS and v not in (None, "", [], {}):
                raise ConfigError(f"{path}.{k} cannot be set: it runs code or commands from the config; "
                                  f"prepare the workers' environment outside cdpbench")


def _walk(d: Any, path: str):
    """``(path, key, value)`` for every key of a nested plain container (values unresolved)."""
    if isinstance(d, (DictConfig, ListConfig)):
        d = OmegaConf.to_container(d, resolve=False)
    if isinstance(d, dict):
        for k, v in d.items():
            yield path, str(k), v
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _walk(v, f"{path}[{i}]")


def _short_value(v: Any) -> str:
    text = str(OmegaConf.to_container(v) if isinstance(v, (DictConfig, ListConfig)) else v)
    return text if len(text) <= 120 else text[:117] + "..."


# -------------------------------------------------------------------------------- composition
def compose(hydra, overrides: list[str], *, master: DictConfig | None = None, multirun: bool = False) -> DictConfig:
    """Compose a config as Hydra will (a sweep job from its master config), translating Hydra's
    multi-line composition errors into one line naming the key and what is allowed."""
    from hydra.errors import HydraException, MissingConfigException
    from hydra.types import RunMode

    try:
        if master is not None:
            return hydra.config_loader.load_sweep_config(master, list(overrides))
        mode = RunMode.MULTIRUN if multirun else RunMode.RUN
        return hydra.compose_config(CONFIG_NAME, list(overrides), run_mode=mode, with_log_configuration=False)
    except MissingConfigException as e:
        raise ConfigError(_missing_option(str(e))) from None
    except HydraException as e:
        raise ConfigError(_composition_message(hydra, str(e), overrides, master, multirun)) from None


def _missing_option(msg: str) -> str:
    m = re.search(r"Could not find '([^']+)'", msg)
    if not m:
        return _first_line(msg)
    group, _, option = m.group(1).rpartition("/")
    avail = re.search(r"Available options in '[^']+':\n((?:\t.*\n?)*)", msg)
    options = ", ".join(x.strip() for x in avail.group(1).splitlines() if x.strip()) if avail else "none"
    return f"{group}={option}: unknown option {option!r}; {group} has: {options}"


def _composition_message(hydra, msg: str, overrides: list[str], master, multirun) -> str:
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        text = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == key), key)
        # Compose with the key appended to find what is wrong with it: the validators then name
        # the key and list what its group allows.
        retry = [("+" + o if o == text else o) for o in overrides]
        try:
            cfg = compose(hydra, retry, master=master, multirun=multirun)
            validate(cfg)
        except CdpbenchError as e:
            return str(e)
        return f"{text}: {key} is not in the config; to add it write +{text}"
    m = re.search(r"Ambiguous value for argument '([^']+)'", msg)
    if m:
        return f"{m.group(1)}: several values make a sweep; run it with -m (a list value is written key='[a,b]')"
    m = re.search(r"An item is already at '([^']+)'", msg)
    if m:
        key = m.group(1)
        text = next((o for o in overrides if o.lstrip("+").split("=", 1)[0] == key), key)
        return f"{text}: {key} is already in the config; write it without '+' ({text.lstrip('+')})"
    return _first_line(msg)


def _first_line(e: Any) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


# ---------------------------------------------------------------------------------- validation
def validate(cfg: DictConfig, checked: dict | None = None) -> None:
    """Every check a job's config must pass before a run is created (one-line ConfigError or
    DataError). ``checked`` caches data-set input checks across the jobs of a sweep."""
    from . import runner

    check_config(cfg)
    unknown = [k for k in cfg if k not in TOP_LEVEL]
    if unknown:
        allowed = ", ".join(k for k in TOP_LEVEL if k != "hydra")
        raise ConfigError(f"{unknown[0]}: unknown key; allowed top-level keys: {allowed}")
    for key in ("dataset", "anonymizer", "privacy_model", "metrics", "seed", "progress", "tracking"):
        if key not in cfg or cfg[key] is None:
            raise ConfigError(f"{key} is missing from the config")
    seed = cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0 (got {seed!r})")
    if not isinstance(cfg.progress, bool):
        raise ConfigError(f"progress must be true or false (got {cfg.progress!r})")
    if not isinstance(cfg.tracking, DictConfig):
        raise ConfigError(f"tracking must be a mapping with keys {list(TRACKING_KEYS)}")
    for k in cfg.tracking:
        if k not in TRACKING_KEYS:
            raise ConfigError(f"tracking.{k}: unknown key; allowed: {', '.join(TRACKING_KEYS)}")
    for k in ("enabled", "plot"):
        if not isinstance(cfg.tracking.get(k, False), bool):
            raise ConfigError(f"tracking.{k} must be true or false (got {cfg.tracking.get(k)!r})")
    exp = cfg.tracking.get("experiment")
    if not isinstance(exp, str) or not exp.strip():
        raise ConfigError(f"tracking.experiment must be a non-empty name (got {exp!r})")
    extra = cfg.get("extra_attackers")
    if extra is not None and not isinstance(extra, DictConfig):
        raise ConfigError("extra_attackers must be a mapping {label: {name: <attacker>, ...}}")
    comp = runner.build(cfg)
    key = repr(OmegaConf.to_container(cfg.dataset, resolve=True))
    if checked is None or key not in checked:
        comp.dataset.check()
        if checked is not None:
            checked[key] = True


# ------------------------------------------------------------------------------------ planning
def prepare(hydra, overrides: list[str], multirun: bool) -> Plan:
    """Check and expand the command line into a :class:`Plan` (nothing is created)."""
    from hydra.types import RunMode

    for o in parse_overrides(hydra, overrides):
        check_override(o)
    master = None
    if not multirun:
        # One composition in the common case; Hydra's get_mode (a composition of its own) only
        # when this one fails or a preset sets hydra.mode=MULTIRUN.
        try:
            master = compose(hydra, overrides)
        except CdpbenchError:
            master = None
        if master is None or master.hydra.get("mode") == RunMode.MULTIRUN:
            try:
                multirun = hydra.get_mode(CONFIG_NAME, list(overrides)) == RunMode.MULTIRUN
            except Exception:
                pass  # composition errors are reported, in one line, below
            master = None
    if master is None:
        master = compose(hydra, overrides, multirun=multirun)
    check_config(master)
    preset = master.hydra.runtime.choices.get("experiment")
    if multirun:
        job_overrides = expand_sweep(hydra, master)
    else:
        job_overrides = [list(overrides)]
    jobs = []
    for ov in job_overrides:
        if not multirun:  # the command line, checked above
            jobs.append(Job(list(ov), master))
            continue
        for o in parse_overrides(hydra, ov):  # the sweep may add overrides from a preset
            check_override(o, "a preset's sweep")
        jobs.append(Job(list(ov), compose(hydra, ov, master=master)))
    checked: dict = {}
    total = len(jobs)
    for i, job in enumerate(jobs):
        try:
            validate(job.cfg, checked)
        except CdpbenchError as e:
            where = f" [job {i + 1} of {total}: {' '.join(job.overrides)}]" if multirun and total > 1 else ""
            raise type(e)(f"{e}{where}") from None
    where = {(j.cfg.tracking.get("uri"), j.cfg.tracking.experiment) for j in jobs}
    if len(where) > 1:
        raise ConfigError("tracking.uri and tracking.experiment cannot vary within a sweep: its parent run and "
                          "its jobs live in one experiment (run one sweep per experiment)")
    varying = varying_keys([j.overrides for j in jobs]) if multirun else []
    plan = Plan(multirun, list(overrides), master, jobs, preset, varying)
    for job in jobs:
        job.name = run_name(job.overrides, preset, varying if multirun else None)
    h = master.hydra
    plan.output_dir = str(h.sweep.dir if multirun else h.run.dir)
    plan.launcher = str(h.runtime.choices.get("hydra/launcher") or "basic")
    plan.progress = bool(jobs[0].cfg.progress)
    return plan


@contextmanager
def batches_already_checked():
    """Skip Hydra's own composition of every job before launching a batch
    (``Sweeper.validate_batch_is_legal``, "this repeat work the launcher will do"): :func:`prepare`
    has composed and validated every job of the sweep already, more strictly. It cost 0.3 s a job
    here, in the launching process, before any job could start."""
    from hydra.plugins.sweeper import Sweeper

    original = Sweeper.validate_batch_is_legal
    Sweeper.validate_batch_is_legal = lambda self, batch: None
    try:
        yield
    finally:
        Sweeper.validate_batch_is_legal = original


def expand_sweep(hydra, master: DictConfig) -> list[list[str]]:
    """The jobs of a sweep in the order Hydra's basic sweeper launches them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = master.hydra.sweeper
    if not str(sweeper.get("_target_", "")).endswith("BasicSweeper"):
        raise ConfigError(f"hydra/sweeper: only Hydra's basic sweeper is supported (got {sweeper.get('_target_')!r})")
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    params += list(master.hydra.overrides.task)
    parser = OverridesParser.create(config_loader=hydra.config_loader)
    try:
        batches = BasicSweeper.split_arguments(parser.parse_overrides(params), None)
    except Exception as e:  # e.g. a range/interval sweep the basic sweeper does not support
        raise ConfigError(f"sweep: {_first_line(e)}") from None
    return [list(job) for batch in batches for job in batch]


def varying_keys(jobs: list[list[str]]) -> list[str]:
    """The override keys whose value differs between the jobs of a sweep."""
    values: dict[str, set[str]] = {}
    for ov in jobs:
        for text in ov:
            key, _, value = text.partition("=")
            values.setdefault(key, set()).add(value)
    present = {k for k in values if all(any(t.partition("=")[0] == k for t in ov) for ov in jobs)}
    return [k for k in values if len(values[k]) > 1 or k not in present]


def short_override(text: str) -> str:
    """``+experiment/js_reduce/method=l_diversity`` -> ``method=l_diversity``."""
    key, sep, value = text.lstrip("+~").partition("=")
    return key.rsplit("/", 1)[-1] + sep + value


def run_name(overrides: list[str], preset: str | None, varying: list[str] | None) -> str:
    """``js_reduce/fig4: method=l_diversity``: the preset and what this job sets (in a sweep:
    only the keys that vary between jobs)."""
    parts = []
    for text in overrides:
        key = text.partition("=")[0]
        if key.lstrip("+") == "experiment" or key.lstrip("+~").startswith("progress"):
            continue
        if varying is not None and key not in varying:
            continue
        parts.append(short_override(text))
    body = " ".join(parts)
    if preset:
        return f"{preset}: {body}" if body else preset
    return body or "default"


def short_label(name: str, width: int = 32) -> str:
    """A progress-bar label: the run name cut to ``width`` characters."""
    return name if len(name) <= width else name[: width - 1] + "…"


def hydra_instance(conf: Path):
    """A Hydra object for the primary config folder, with every plugin's configs registered."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    from .registry import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    return Hydra.create_main_hydra2(task_name="cdpbench", config_search_path=create_config_search_path(str(conf)))
