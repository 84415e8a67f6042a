"""What the launching process does before Hydra runs a single job or a sweep.

Every config is checked before anything is created (no folder, no MLflow run):

1. **An allowlist, not a blocklist.** A config holds the lab's own keys (plugin groups and their
   registered parameters, ``seed``, ``progress``, ``tracking``, ``extra_attackers``) and, under
   ``hydra``, only the settings of :data:`HYDRA_KEYS` and the chosen launcher's options
   (:data:`LAUNCHERS`), each with its type. The check compares the composed ``hydra`` node with
   Hydra's own defaults for the same launcher and logging presets, composed from Hydra and its
   installed plugins alone (never from the project's or the user's config folder): any other
   difference is refused. Group options (``hydra/launcher=joblib``, ``dataset=adult``) are names
   of installed configs, never paths; ``+experiment=`` names a preset of the project's
   ``experiments/`` folder; logging is the lab's (only Hydra's presets, by name); no ``_target_``.
   Interpolations may only reference other config values or use :data:`RESOLVERS`: values read
   from the environment (``${oc.env:...}``) would be recorded in MLflow and are refused.
   Hydra flags that read configs or pickles from elsewhere are refused.
2. **The sweep is expanded exactly as Hydra's basic sweeper will** (the preset's
   ``hydra.sweeper.params`` plus the command line), and every job's config is composed and
   validated: plugin parameters through the registry, the run's own keys (``seed``, ``progress``,
   ``tracking``), unknown keys with or without ``+``, and the data set's inputs
   (:meth:`Dataset.check <cdpbench.plugin.Dataset.check>`: every release of a CSV scenario). The
   output folder must be creatable. A sweep of more than :data:`LARGE_GRID` jobs needs
   ``--large-grid``; more than :data:`PROGRESS_JOBS` jobs show a progress bar while checked.

The result is a :class:`Plan`: the jobs with their overrides and run names, the sweep's varying
keys and the resolved output folder, which :mod:`cdpbench.cli` hands to Hydra.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import CdpbenchError, ConfigError
from .kinds import GROUP_KINDS

CONFIG_NAME = "config"
#: The keys of a run's config that the core reads (plugin groups, run parameters, hydra).
TOP_LEVEL = (*GROUP_KINDS, "metrics", "extra_attackers", "seed", "progress", "tracking", "hydra")
TRACKING_KEYS = ("uri", "experiment", "run_name", "enabled", "plot")
#: Hydra command-line flags that read configs or pickled state from outside the project.
FORBIDDEN_FLAGS = {"config_dir": "--config-dir", "config_path": "--config-path", "config_name": "--config-name",
                   "experimental_rerun": "--experimental-rerun"}
#: A sweep with more jobs than this needs ``--large-grid`` (checking takes about 0.1 s a job).
LARGE_GRID = 1000
LARGE_GRID_FLAG = "--large-grid"
#: A sweep with more jobs than this shows a progress bar while its jobs are checked.
PROGRESS_JOBS = 50
#: MLflow's longest experiment name.
MAX_EXPERIMENT_NAME = 500
#: Echoed values are cut to this many characters in error messages.
ECHO = 120


def shorten(value: Any, width: int = ECHO) -> str:
    """``value`` as text for a one-line message: credentials in URIs redacted first (a cut through
    a password would leave its start unredactable), newlines escaped, cut to ``width`` with "…"."""
    from .tracking import redact_text

    text = redact_text(value if isinstance(value, str) else repr(value))
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def echo(value: Any) -> str:
    """``repr(value)`` for a message, a string cut to :data:`ECHO` characters inside its quotes."""
    if isinstance(value, str):
        return "'" + shorten(value, ECHO - 2) + "'"
    return shorten(repr(value))


def _cut_message(msg: str) -> str:
    """An error message on one line, every echoed value still longer than :data:`ECHO` cut
    (credentials in URIs redacted before anything is cut)."""
    from .tracking import redact_text

    msg = redact_text(msg).replace("\r", "\\r").replace("\n", "\\n")
    long = ECHO + 10
    return re.sub(r"'[^']{%d,}'|\"[^\"]{%d,}\"|\S{%d,}" % (long, long, long),
                  lambda m: m.group(0)[: ECHO - 1] + "…" + (m.group(0)[0] if m.group(0)[0] in "'\"" else ""), msg)


# --------------------------------------------------------------------------------- the allowlist
@dataclass(frozen=True)
class Rule:
    """What a setting accepts: ``allowed`` says it in the error message, ``ok`` checks a value."""

    allowed: str
    ok: Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(low: int) -> Rule:
    return Rule(f"an integer >= {low}", lambda v: _is_int(v) and v >= low)


def _optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.allowed}", lambda v: v is None or rule.ok(v))


def _one_of(*values: str) -> Rule:
    return Rule("one of " + ", ".join(values), lambda v: isinstance(v, str) and v in values)


def _text(chars: str, allowed: str) -> Rule:
    pattern = re.compile(f"[{chars}]+")
    return Rule(allowed, lambda v: (isinstance(v, str) or _is_int(v)) and bool(pattern.fullmatch(str(v))))


BOOL = Rule("true or false", lambda v: isinstance(v, bool))
POSITIVE = Rule("a number > 0", lambda v: _is_number(v) and v > 0)
NON_NEGATIVE = Rule("a number >= 0", lambda v: _is_number(v) and v >= 0)
#: A folder path (relative to the launch folder or absolute), one line.
PATH = Rule("a folder path on one line", lambda v: isinstance(v, str) and bool(v.strip())
            and not re.search(r"[\x00-\x1f]", v))
#: A job's sub-folder of the sweep folder: relative, without "..".
SUBDIR = Rule("a relative folder name without '..' (default ${hydra.job.num})",
              lambda v: (_is_int(v) and v >= 0) or (isinstance(v, str) and bool(v.strip()) and not v.startswith(("/", "~"))
                                                      and ".." not in Path(v).parts and not re.search(r"[\x00-\x1f]", v)))
#: Text that goes into a shell script (submitit's sbatch script): no newline, no shell metacharacter.
SLURM_CHARS = "A-Za-z0-9_.,:=@%+/-"
SLURM_TEXT = _optional(_text(SLURM_CHARS, "text of letters, digits and _.,:=@%+/- only (no spaces, newlines or shell "
                             "metacharacters: the value is written into SLURM's sbatch script)"))
SLURM_COMMENT = _optional(_text(" " + SLURM_CHARS, "text of letters, digits, spaces and _.,:=@%+/- only (no newlines or "
                                "shell metacharacters: the value is written into SLURM's sbatch script)"))
SLURM_MEMORY = _optional(Rule("an amount of memory, e.g. 4000 or 4G (digits and an optional K, M, G or T)",
                              lambda v: (_is_int(v) and v > 0) or (isinstance(v, str) and bool(re.fullmatch(r"\d+[KMGT]?", v)))))
LOGGER_NAMES = Rule("true, false or logger names (letters, digits, _ and .)",
                    lambda v: isinstance(v, bool) or (isinstance(v, str) and bool(re.fullmatch(r"[\w.]+", v)))
                    or (isinstance(v, list) and all(isinstance(x, str) and re.fullmatch(r"[\w.]+", x) for x in v)))
SWEEP_VALUE = Rule("a sweep's values (text, numbers or true/false)",
                   lambda v: isinstance(v, (str, int, float, bool)) or v is None)

#: The Hydra settings a config may change (besides the chosen launcher's options), with their types.
HYDRA_KEYS: dict[str, Rule] = {
    "hydra.run.dir": PATH,
    "hydra.sweep.dir": PATH,
    "hydra.sweep.subdir": SUBDIR,
    "hydra.job.chdir": Rule("false: cdpbench runs every job in the launch folder, and the data set's file paths "
                            "(dataset.files, dataset.schema) are relative to it", lambda v: v is False or v is None),
    "hydra.mode": _optional(_one_of("RUN", "MULTIRUN")),
    "hydra.verbose": LOGGER_NAMES,
    "hydra.sweeper.params": SWEEP_VALUE,  # any key below it: the sweep's overrides, each checked as one
}
#: Hydra settings set by Hydra itself while composing (the overrides, the choices, the job's number).
HYDRA_MANAGED = ("hydra.overrides", "hydra.runtime", "hydra.job.override_dirname", "hydra.job.id", "hydra.job.num",
                 "hydra.job.config_name")
#: Launchers a config may choose (hydra/launcher=NAME), and the options each allows with their types.
_SUBMITIT = {
    "timeout_min": _int(1), "cpus_per_task": _optional(_int(1)), "gpus_per_node": _optional(_int(0)),
    "tasks_per_node": _int(1), "mem_gb": _optional(_int(1)), "nodes": _int(1), "name": SLURM_TEXT,
    "stderr_to_stdout": BOOL,
}
LAUNCHERS: dict[str, dict[str, Rule]] = {
    "basic": {},
    "joblib": {
        "n_jobs": Rule("an integer >= 1, or -1 (one job per CPU)", lambda v: _is_int(v) and (v >= 1 or v == -1)),
        "backend": _optional(_one_of("loky", "multiprocessing")),
        "prefer": _optional(_one_of("processes")),
        "batch_size": Rule("an integer >= 1 or auto", lambda v: v == "auto" or (_is_int(v) and v >= 1)),
        "pre_dispatch": Rule("an integer >= 1 or N*n_jobs", lambda v: (_is_int(v) and v >= 1) or (
            isinstance(v, str) and bool(re.fullmatch(r"\s*(\d+\s*\*\s*)?n_jobs\s*", v)))),
        "verbose": _int(0),
        "timeout": _optional(POSITIVE),
        "mmap_mode": _optional(_one_of("r", "r+", "w+", "c")),
        "max_nbytes": _optional(Rule("an integer >= 0 or a size like 1M", lambda v: (_is_int(v) and v >= 0) or (
            isinstance(v, str) and bool(re.fullmatch(r"\d+[KMG]?", v))))),
        "temp_folder": _optional(PATH),
    },
    "submitit_local": dict(_SUBMITIT),
    "submitit_slurm": {
        **_SUBMITIT,
        "partition": SLURM_TEXT, "qos": SLURM_TEXT, "comment": SLURM_COMMENT, "constraint": SLURM_TEXT,
        "exclude": SLURM_TEXT, "gres": SLURM_TEXT, "account": SLURM_TEXT,
        "cpus_per_gpu": _optional(_int(1)), "gpus_per_task": _optional(_int(0)),
        "mem_per_gpu": SLURM_MEMORY, "mem_per_cpu": SLURM_MEMORY,
        "signal_delay_s": _int(0), "max_num_timeout": _int(0), "array_parallelism": _int(1),
    },
    "ray": {
        "ray.init.address": _optional(_text("A-Za-z0-9_.:/@-", "auto, local, HOST:PORT or ray://HOST:PORT")),
        "ray.init.num_cpus": _optional(_int(1)), "ray.init.num_gpus": _optional(_int(0)),
        "ray.init.object_store_memory": _optional(_int(1)),
        "ray.remote.num_cpus": _optional(POSITIVE), "ray.remote.num_gpus": _optional(NON_NEGATIVE),
        "ray.remote.max_calls": _optional(_int(0)), "ray.remote.memory": _optional(_int(1)),
    },
}
#: Logging is the lab's: a config may only choose one of Hydra's own presets by name.
LOGGING_PRESETS = {"hydra/job_logging": ("default", "disabled", "none", "stdout"),
                   "hydra/hydra_logging": ("default", "disabled", "none", "hydra_debug")}
#: The Hydra config groups a config may choose an option of (by name).
HYDRA_GROUPS = {"hydra/launcher": tuple(LAUNCHERS), **LOGGING_PRESETS, "hydra/sweeper": ("basic",)}
#: Resolvers an interpolation may use, besides a plain reference to another value (``${a.b}``).
RESOLVERS = ("now", "hydra")
#: Launchers refused whole: RayAWSLauncher starts cluster machines with setup commands from its config.
REFUSED_LAUNCHERS = {"ray_aws": "ray_aws creates cloud machines that run setup commands from its config; start a Ray "
                     "cluster yourself and use hydra/launcher=ray with +hydra.launcher.ray.init.address=HOST:PORT"}
#: Settings that would run code or commands from the config (said so in the message when set).
CODE_KEYS = ("runtime_env", "setup", "setup_commands", "head_setup_commands", "worker_setup_commands",
             "initialization_commands", "worker_process_setup_hook", "additional_parameters", "srun_args")
#: Hydra settings refused because cdpbench does it in code.
IN_CODE = ("hydra.callbacks", "hydra.searchpath", "hydra.job.env_set", "hydra.job.env_copy", "hydra.job_logging",
           "hydra.hydra_logging")
ALLOWED_HYDRA = ("hydra.run.dir, hydra.sweep.dir, hydra.sweep.subdir, hydra.job.chdir=false, hydra.mode, "
                 "hydra.verbose, hydra.sweeper.params, hydra/launcher=" + "|".join(LAUNCHERS) + " and its options, "
                 "hydra/job_logging=" + "|".join(LOGGING_PRESETS["hydra/job_logging"]) + ", hydra/hydra_logging="
                 + "|".join(LOGGING_PRESETS["hydra/hydra_logging"]))


@dataclass
class Job:
    overrides: list[str]  # the job's own overrides (what Hydra passes as hydra.overrides.task)
    cfg: DictConfig | None  # its composed config (None in a large sweep once checked: memory)
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
        """The run mode and the output folder, as resolved here, for Hydra to use as they are. With
        the Ray launcher the folder is absolute: a cluster's workers run in their node's working
        folder, not the launch folder; and joining a cluster by address, Ray's ``object_store_memory``,
        which Hydra's Ray launcher sets for the local instance it would start, is left unset (Ray
        refuses it when joining a cluster)."""
        key = "hydra.sweep.dir" if self.multirun else "hydra.run.dir"
        folder, more = self.output_dir, []
        if self.launcher == "ray":
            folder = os.path.abspath(os.path.expanduser(folder))
            init = self.master.hydra.launcher.ray.init
            if ray_address(init.get("address")) and "object_store_memory" not in init:
                more.append("+hydra.launcher.ray.init.object_store_memory=null")
        return [f"hydra.mode={'MULTIRUN' if self.multirun else 'RUN'}", f"{key}={quote(folder)}", *more]


def ray_address(address: Any) -> str | None:
    """The ``HOST:PORT`` of a Ray cluster ``hydra.launcher.ray.init.address`` joins (``ray://`` for
    Ray Client), None when Ray finds or starts one itself (unset, ``auto``, ``local``)."""
    if address is None or str(address) in ("auto", "local"):
        return None
    return str(address).removeprefix("ray://")


#: seconds a launch waits for a Ray cluster given by address to accept a connection
RAY_PROBE_TIMEOUT = 5.0


def check_ray_cluster(init: DictConfig) -> None:
    """A Ray cluster given by address (``hydra.launcher.ray.init.address=HOST:PORT``) accepts a
    connection, and the launch sets none of the resources Ray only takes for a local instance;
    else a one-line error before any job (Ray itself retries for minutes). At launch (a network
    check: not part of :func:`prepare`)."""
    import socket

    address = ray_address(init.get("address"))
    if address is None:
        return
    where = f"hydra.launcher.ray.init.address={shorten(str(init.get('address')))}"
    local_only = [k for k in ("num_cpus", "num_gpus", "object_store_memory") if init.get(k) is not None]
    if local_only:
        raise ConfigError(f"{where}: hydra.launcher.ray.init.{local_only[0]} is for a Ray instance the launcher starts; "
                          "a cluster joined by address has its own resources (set them with `ray start`)")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{where}: not a Ray cluster's address; write HOST:PORT (the address `ray start --head` printed)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_PROBE_TIMEOUT).close()
    except OSError as e:
        raise ConfigError(f"{where}: no Ray cluster answers there ({e.strerror or type(e).__name__}); start one with "
                          f"`ray start --head --port={port}`, or give the address `ray start` printed") from None


#: the object store the Ray launcher gives a Ray instance it starts, unless set (its own default)
RAY_LAUNCHER_OBJECT_STORE = 78643200


def start_ray(init: DictConfig) -> None:
    """Start (or join) Ray as Hydra's Ray launcher would, before it does (it then finds Ray
    running), so that a SIGTERM (SIGHUP) to the sweep's process group still ends the sweep the
    way :mod:`cdpbench.stopping` ends it:

    - A Ray instance started here runs its processes (GCS, raylet and, through the raylet, the
      workers that run the jobs) in a process group of their own. In the sweep's group they
      received the scheduler's SIGTERM too: the raylet died, the driver's core worker then lost
      its object store and ended this process with exit status 1 before anything was recorded
      (CI, under load). They still die with this process: Ray asks the kernel to end each of
      them when its parent dies (``PR_SET_PDEATHSIG``), which is why Ray itself starts them in a
      group of their own on Windows. Where the kernel cannot, they stay in the sweep's group.
    - ``ray.init`` replaces the SIGTERM handler with Ray's, which kills the local instance and
      exits; the handlers cdpbench had (or an inherited ignore) are put back.
    """
    # set before Ray reads them (on import). While ray.init runs, Ray's handlers are this
    # process's: its failure handler would abort on SIGTERM (SIGABRT) before the jobs are ended
    # and recorded, and its Python one drain the local node for 10 s, for services a sweep does
    # not run (its jobs end through the stop file)
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    os.environ.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")

    import signal
    import threading

    import ray
    from ray._private import services, utils

    if ray.is_initialized():
        return
    kwargs = OmegaConf.to_container(init, resolve=True) if init else {}
    if ray_address(kwargs.get("address")) is None:  # a cluster joined by address has its own
        kwargs.setdefault("object_store_memory", RAY_LAUNCHER_OBJECT_STORE)
    main_thread = threading.current_thread() is threading.main_thread()
    ending = [getattr(signal, s) for s in ("SIGTERM", "SIGHUP") if hasattr(signal, s)] if main_thread else []
    handlers = {sig: signal.getsignal(sig) for sig in ending}
    popen = getattr(services, "ConsolePopen", None)
    fate_sharing = getattr(utils, "detect_fate_sharing_support", lambda: False)  # private: may go in a release
    own_group = popen is not None and sys.platform.startswith("linux") and fate_sharing()
    original = popen.__init__ if own_group else None
    own_init = own_group and "__init__" in vars(popen)  # on Linux it is subprocess.Popen's

    def in_own_group(self, *args, **kw):
        kw.setdefault("process_group", 0)
        original(self, *args, **kw)

    if own_group:
        popen.__init__ = in_own_group
    try:
        ray.init(**kwargs)
    finally:
        if own_init:
            popen.__init__ = original
        elif own_group:
            del popen.__init__
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)


def quote(value: str) -> str:
    """A string as a Hydra override value (quoted when the grammar needs it)."""
    if re.fullmatch(r"[\w./\-:]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------------- overrides
def reference_overrides(hydra, overrides: list[str]) -> list[str]:
    """``attacker.estimator=NAME`` (or ``=A,B`` in a sweep), where ``attacker.estimator`` is a
    plugin reference (:func:`cdpbench.plugin.plugin_ref`), as the config-group override
    ``attacker/estimator=NAME``: the whole sub-node is swapped for that plugin's defaults, and
    ``attacker.estimator.<param>=...`` after it sets its parameters. (As a value override, Hydra
    would replace the sub-node with the bare name, and a parameter set after it would drop the
    name.)"""
    repo = hydra.config_loader.repository
    out = []
    for text in overrides:
        key, eq, value = text.partition("=")
        if (eq and "." in key and not re.search(r"[/@+~\s]", key) and re.fullmatch(r"[\w-]+(,[\w-]+)*", value)
                and not key.startswith("hydra.") and repo.group_exists(key.replace(".", "/"))):
            text = f"{key.replace('.', '/')}={value}"
        out.append(text)
    return out


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
            raise ConfigError(f"{shorten(text)}: cannot parse this override: {_first_line(e)}") from None
    return parsed


def _override_values(o: Any) -> list[Any]:
    if getattr(o, "is_delete", lambda: False)() and o.value() is None:
        return []
    if o.is_sweep_override():
        return list(o.sweep_string_iterator())
    return [o.value()]


def check_override(o: Any, where: str = "the command line", hydra=None) -> None:
    """Refuse an override outside the allowlist (see module doc): ``_target_``, a Hydra setting
    that is not in :data:`HYDRA_KEYS` (launcher options are checked once the launcher is known,
    :func:`check_config`), a group option that is not an installed config's name, an
    interpolation with a resolver off :data:`RESOLVERS`."""
    key = o.key_or_group.replace("/", ".")
    text = shorten(o.input_line or key)
    if "_target_" in key.split("."):
        raise ConfigError(f"{text}: _target_ cannot be set from {where}; configs name registered plugins "
                          f"(cdpbench plugins) and their parameters only")
    if o.package is not None:
        raise ConfigError(f"{text}: an @package in an override is not supported; write group=option or key=value")
    for value in _override_values(o):
        for s in _strings(value):
            check_interpolation(key, s)
    if key == "experiment" or key.startswith("experiment."):
        check_preset(o, text)
        return
    if key == "hydra" or key.startswith("hydra."):
        if "/" in o.key_or_group:
            check_hydra_choice(o, text, hydra)
        else:
            check_hydra_key(key, text, where)
        return
    if hydra is None:
        from hydra.core.global_hydra import GlobalHydra

        hydra = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    if hydra is not None and hydra.config_loader.repository.group_exists(o.key_or_group):
        options = hydra.config_loader.get_group_options(o.key_or_group)
        for value in _override_values(o):
            if not isinstance(value, str) or value not in options:
                raise ConfigError(f"{text}: unknown option {shorten(value)!r}; {o.key_or_group} has: "
                                  f"{', '.join(options) or 'none'} (a group option is the name of an installed config)")


def check_hydra_key(key: str, text: str, where: str) -> None:
    """A ``hydra.*`` key set by an override: one of :data:`HYDRA_KEYS`, or a launcher option
    (checked against the chosen launcher once composed)."""
    if key.startswith("hydra.launcher."):
        return
    if key in HYDRA_KEYS or key.startswith("hydra.sweeper.params."):
        return
    bad = _refused_prefix(key, [*HYDRA_KEYS, "hydra.launcher.x"])
    reason = "; cdpbench installs its own callbacks and logging in code" if bad in IN_CODE else ""
    raise ConfigError(f"{text}: {bad} cannot be set from {where}{reason} (allowed: {ALLOWED_HYDRA})")


_OPTIONS: dict[str, list[str]] = {}


def _trusted_options(group: str) -> list[str]:
    """The options of a ``hydra/*`` group in Hydra and its installed plugins (never the project's
    or the user's config folder)."""
    if group not in _OPTIONS:
        _OPTIONS[group] = list(_trusted_loader().get_group_options(group))
    return _OPTIONS[group]


def check_hydra_choice(o: Any, text: str, hydra=None) -> None:
    """``hydra/GROUP=NAME``: a launcher, a logging preset or the basic sweeper, by name."""
    group = o.key_or_group
    if group not in HYDRA_GROUPS:
        raise ConfigError(f"{text}: {group} cannot be chosen (allowed: {ALLOWED_HYDRA})")
    allowed = [n for n in _trusted_options(group) if n in HYDRA_GROUPS[group]]
    for value in _override_values(o):
        check_choice(group, value, allowed, text)


def check_choice(group: str, value: Any, allowed: list[str], text: str) -> None:
    if isinstance(value, str) and value in allowed:
        return
    if value in REFUSED_LAUNCHERS and group == "hydra/launcher":
        raise ConfigError(f"hydra/launcher: {REFUSED_LAUNCHERS[value]}")
    what = ("Hydra's logging presets (cdpbench configures logging; a config may only choose a preset by name)"
            if group in LOGGING_PRESETS else f"{group} has")
    if isinstance(value, str) and ("/" in value or ".." in value):
        raise ConfigError(f"{text}: {shorten(value)!r} is a path, not an option: a group option is the name of an "
                          f"installed config; {what}: {', '.join(allowed)}")
    raise ConfigError(f"{text}: unknown option {shorten(value)!r}; {what}: {', '.join(allowed)}")


def check_preset(o: Any, text: str) -> None:
    """``+experiment=NAME`` (and ``+experiment/GROUP=OPTION`` in a preset's sweep) only names a
    preset of the project's experiments folder."""
    from .presets import preset_names, preset_options

    group = o.key_or_group
    allowed = preset_names() if group == "experiment" else preset_options(group)
    for value in _override_values(o):
        if not isinstance(value, str) or value not in allowed:
            raise ConfigError(f"{text}: {shorten(value)!r} is not a preset; {group} has: {', '.join(allowed) or 'none'} "
                              f"(cdpbench experiments lists them)")


# ------------------------------------------------------------------------------ interpolations
def _strings(value: Any):
    """Every string in a value (nested lists and dicts included, keys too)."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def resolvers_of(text: str) -> list[str]:
    """The resolvers an interpolation string uses (``${oc.env:X}`` -> ``['oc.env']``), nested ones
    included; plain references (``${a.b}``) use none."""
    from omegaconf import grammar_parser
    from omegaconf.errors import GrammarParseError
    from omegaconf.grammar.gen.OmegaConfGrammarParser import OmegaConfGrammarParser

    if "${" not in text:
        return []
    try:
        tree = grammar_parser.parse(text)
    except GrammarParseError:
        return []  # not an interpolation: OmegaConf reads it as plain text (or refuses it when resolving)
    names: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, OmegaConfGrammarParser.InterpolationResolverContext):
            names.append(node.resolverName().getText())
        stack.extend(node.getChild(i) for i in range(node.getChildCount()))
    return names


def check_interpolation(key: str, text: str) -> None:
    """Refuse an interpolation whose resolver is not on :data:`RESOLVERS`; one reading the
    environment with a message saying why."""
    for name in resolvers_of(text):
        if name in RESOLVERS:
            continue
        if name == "oc.env" or name.startswith("oc.env"):
            raise ConfigError(f"{key}: {shorten(text)} reads an environment variable: refused, because every value "
                              f"of a config is recorded in MLflow (parameters, tags, config.yaml) and a secret must not "
                              f"be; write the value itself")
        raise ConfigError(f"{key}: {shorten(text)} uses the resolver {name!r}, which a config may not use; allowed "
                          f"interpolations: ${{path.to.key}} (another config value), "
                          + ", ".join(f"${{{r}:...}}" for r in RESOLVERS))


# ------------------------------------------------------------------------------------ the config
_BASELINES: dict[tuple, Any] = {}
_LOADER: list = []


def _trusted_loader():
    """A config loader over Hydra and its installed plugins only (no primary config folder)."""
    if not _LOADER:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra._internal.utils import create_config_search_path

        _LOADER.append(ConfigLoaderImpl(config_search_path=create_config_search_path(None)))
    return _LOADER[0]


def trusted_hydra(choices: dict[str, str], multirun: bool) -> dict:
    """Hydra's own ``hydra`` node for these launcher and logging choices (a plain dict, cached)."""
    from hydra.types import RunMode

    key = (tuple(sorted(choices.items())), multirun)
    if key not in _BASELINES:
        overrides = [f"{g}={v}" for g, v in sorted(choices.items())]
        mode = RunMode.MULTIRUN if multirun else RunMode.RUN
        cfg = _trusted_loader().load_configuration(config_name=None, overrides=overrides, run_mode=mode)
        _BASELINES[key] = _flatten(OmegaConf.to_container(cfg.hydra, resolve=False, enum_to_str=True), "hydra")
    return _BASELINES[key]


def _flatten(d: Any, path: str) -> dict[str, Any]:
    """``{dotted path: leaf}`` of a plain container (lists and empty dicts are leaves)."""
    out: dict[str, Any] = {}
    if isinstance(d, dict) and d:
        for k, v in d.items():
            out.update(_flatten(v, f"{path}.{k}"))
    else:
        out[path] = d
    return out


def _refused_prefix(path: str, allowed: list[str]) -> str:
    """The shortest prefix of ``path`` that is no allowed key nor the start of one."""
    parts = path.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if not any(a == prefix or a.startswith(prefix + ".") for a in allowed):
            return prefix
    return path


def check_config(cfg: DictConfig) -> None:
    """The composed config holds nothing off the allowlist (see module doc): interpolations with
    allowed resolvers only, no ``_target_`` outside ``hydra``, group choices by name, and a
    ``hydra`` node that differs from Hydra's own defaults only at allowed keys, with allowed values."""
    from hydra.types import RunMode

    h = cfg.hydra
    choices = {}
    for group, value in (h.runtime.get("choices") or {}).items():
        if group in HYDRA_GROUPS:
            allowed = [n for n in _trusted_options(group) if n in HYDRA_GROUPS[group]]
            check_choice(group, value, allowed, shorten(f"{group}={value}"))
            choices[group] = value
        elif group.startswith("hydra/"):
            trusted = _trusted_options(group)
            if value is not None and value not in trusted[:1]:  # hydra/env, hydra/output, hydra/help: Hydra's only
                raise ConfigError(f"{group}={shorten(value)}: {group} cannot be chosen (allowed: {ALLOWED_HYDRA})")
        elif isinstance(value, str) and (".." in value or value.startswith("/")):
            raise ConfigError(f"{group}={shorten(value)}: not an option; a group option is the name of an installed config")
    plain = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    for path, v in _flatten(plain, "").items():
        for s in _strings(v):
            check_interpolation(path.lstrip("."), s)
    for path, k, _ in _walk({k: v for k, v in plain.items() if k != "hydra"}, ""):
        if k == "_target_":
            where = f"{path}._target_" if path else "_target_"
            raise ConfigError(f"{where} cannot be set; configs name registered plugins (cdpbench plugins) only")
    launcher = choices.get("hydra/launcher", "basic")
    multirun = h.get("mode") == RunMode.MULTIRUN or str(h.get("mode")) == "MULTIRUN"
    trusted = trusted_hydra(choices, multirun)
    mine = _flatten(plain["hydra"], "hydra")
    options = {f"hydra.launcher.{k}": rule for k, rule in LAUNCHERS[launcher].items()}
    rules = {**HYDRA_KEYS, **options}
    changed = [p for p in mine if p not in trusted or trusted[p] != mine[p]]
    changed += [p for p in trusted if p not in mine and not any(m.startswith(p + ".") for m in mine)]
    for path in changed:
        if path.startswith(HYDRA_MANAGED):
            continue
        if path.startswith("hydra.sweeper.params.") or path == "hydra.sweeper.params":
            rule = HYDRA_KEYS["hydra.sweeper.params"]
        elif path in rules:
            rule = rules[path]
        else:
            raise ConfigError(_refusal(path, h, launcher, list(rules), trusted))
        _check_value(cfg, path, rule)
    given = command_line_keys(h)
    for key in OUTPUT_DIRS:
        if key in changed and key not in given and not _inside_launch_folder(mine.get(key)):
            raise ConfigError(f"{key}={shorten(mine.get(key))}: a preset or config may only put outputs inside the "
                              f"launch folder (a relative path without '..'); name another folder on the command line")
    if isinstance(plain.get("tracking"), dict) and plain["tracking"].get("uri") is not None:
        check_tracking_uri(_resolved(cfg, "tracking.uri"), "tracking.uri" in given)


def command_line_keys(h: DictConfig) -> set[str]:
    """The keys the command line set (Hydra files ``hydra.*`` ones apart)."""
    return {str(o).split("=", 1)[0].lstrip("+~") for o in [*(h.overrides.get("task") or []),
                                                           *(h.overrides.get("hydra") or [])]}


#: Output folders: any folder when named on the command line (the user's choice, e.g. a cluster's
#: shared disk), only inside the launch folder when a preset or config sets them.
OUTPUT_DIRS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.launcher.temp_folder")
#: MLflow stores ``tracking.uri`` may name: a SQLite file, an MLflow server, a database server
#: (with or without a SQLAlchemy driver, ``postgresql+psycopg2``), Databricks
TRACKING_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks")


def check_tracking_uri(uri: Any, from_command_line: bool) -> None:
    """``tracking.uri`` names a store of :data:`TRACKING_SCHEMES`; a SQLite file set by a preset
    or config lies inside the launch folder (like its output folders; the command line and
    ``MLFLOW_TRACKING_URI`` may name any)."""
    if uri is None:
        return
    text = str(uri)
    scheme = text.split("://", 1)[0].split("+", 1)[0].lower() if "://" in text else ""
    if scheme not in TRACKING_SCHEMES:
        raise ConfigError(f"tracking.uri={shorten(text)}: not a store cdpbench records to; allowed: "
                          f"{', '.join(s + '://' for s in TRACKING_SCHEMES)}")
    if scheme == "sqlite" and not from_command_line:
        path = text[len("sqlite:///"):].split("?", 1)[0] if text.startswith("sqlite:///") else ""
        if not _inside_launch_folder(path):
            raise ConfigError(f"tracking.uri={shorten(text)}: a preset or config may only put a SQLite store inside "
                              f"the launch folder (sqlite:///RELATIVE/PATH without '..'); name another store on the "
                              f"command line or in MLFLOW_TRACKING_URI")


def _inside_launch_folder(value: Any) -> bool:
    return (isinstance(value, str) and not value.startswith(("/", "~", "\\"))
            and ".." not in Path(value).parts and ".." not in value.split("/"))


def _refusal(path: str, h: DictConfig, launcher: str, allowed: list[str], trusted: dict) -> str:
    bad = _refused_prefix(path, allowed)
    if bad.startswith(("hydra.job_logging", "hydra.hydra_logging")):
        bad = _refused_prefix(path, list(trusted))  # the first level that is not Hydra's preset's
    if bad in ("hydra.callbacks", "hydra.searchpath"):
        return f"{bad} cannot be set by a config or preset (found {_short_value(OmegaConf.select(h, bad[6:]))})"
    if bad.startswith(("hydra.job_logging", "hydra.hydra_logging")):
        node = bad.split(".")[1]
        presets = ", ".join(LOGGING_PRESETS[f"hydra/{node}"])
        return (f"{bad} cannot be set: cdpbench configures logging; a config may only choose one of Hydra's "
                f"presets by name (hydra/{node}={presets.replace(', ', '|')})")
    if bad.startswith("hydra.launcher."):
        if bad.rsplit(".", 1)[-1] in CODE_KEYS:
            return (f"{bad} cannot be set: it runs code or commands from the config; prepare the workers' "
                    f"environment outside cdpbench")
        opts = ", ".join(a for a in allowed if a.startswith("hydra.launcher.")) or "none"
        return f"{bad} cannot be set: hydra/launcher={launcher} allows only these options: {opts}"
    return f"{bad} cannot be set (allowed: {ALLOWED_HYDRA})"


def _resolved(cfg: DictConfig, path: str) -> Any:
    """The value at ``path``, resolved (the raw value when it cannot be resolved yet, e.g.
    ``${hydra.job.num}`` in a sweep's master config); one line naming it when it cannot be."""
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    parent, _, key = path.rpartition(".")
    node = OmegaConf.select(cfg, parent, throw_on_resolution_failure=False) if parent else cfg
    raw = OmegaConf.to_container(node, resolve=False).get(key) if isinstance(node, DictConfig) else None  # as written
    try:
        return OmegaConf.select(cfg, path, throw_on_resolution_failure=True, throw_on_missing=True)
    except MissingMandatoryValue:
        return raw
    except (OmegaConfBaseException, ValueError) as e:
        raise ConfigError(f"{path}: cannot resolve {shorten(raw)}: {_first_line(e)}") from None


def _check_value(cfg: DictConfig, path: str, rule: Rule) -> None:
    """The value at ``path``, resolved, must pass ``rule``."""
    value = _resolved(cfg, path)
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    if hasattr(value, "name") and not isinstance(value, str):  # an enum (hydra.mode)
        value = value.name
    if not rule.ok(value):
        raise ConfigError(f"{path} must be {rule.allowed} (got {shorten(value)})")


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
    return shorten(str(OmegaConf.to_container(v) if isinstance(v, (DictConfig, ListConfig)) else v))


def check_output_dir(folder: str, key: str) -> None:
    """The run's or sweep's folder can be created and written: a folder made and removed at once
    in its nearest existing parent (or in it, when it exists)."""
    path = Path(os.path.expanduser(folder))
    parent = path
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    where = f"{key}={shorten(folder)}"
    if not parent.is_dir():
        raise ConfigError(f"{where}: {shorten(str(parent))} is not a folder; choose an output folder you can write to")
    try:
        probe = tempfile.mkdtemp(prefix=".cdpbench-check-", dir=parent)
        os.rmdir(probe)
    except OSError as e:
        raise ConfigError(f"{where}: cannot create the output folder in {shorten(str(parent))} "
                          f"({e.strerror or type(e).__name__}); choose a folder you can write to") from None


# -------------------------------------------------------------------------------- composition
def compose(hydra, overrides: list[str], *, master: DictConfig | None = None, multirun: bool = False) -> DictConfig:
    """Compose a config as Hydra will (a sweep job from its master config), translating Hydra's
    multi-line composition errors into one line naming the key and what is allowed."""
    import yaml
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
    except yaml.YAMLError as e:
        raise ConfigError(yaml_message(e)) from None


def yaml_message(e: Exception) -> str:
    """A YAML error of a config file, in one line naming the file (a Python tag says it is refused)."""
    mark = getattr(e, "problem_mark", None)
    where = f"{mark.name}, line {mark.line + 1}" if mark is not None else "a config file"
    problem = getattr(e, "problem", None) or _first_line(e)
    tag = re.search(r"tag '([^']+)'", str(problem))
    if tag:
        return (f"{where}: the YAML tag {shorten(tag.group(1))!r} is refused: configs are plain YAML (no Python "
                f"objects or other tags)")
    return f"{where}: not valid YAML: {shorten(problem)}"


def _missing_option(msg: str) -> str:
    m = re.search(r"Could not find '([^']+)'", msg)
    if not m:
        return _first_line(msg)
    group, _, option = m.group(1).rpartition("/")
    avail = re.search(r"Available options in '[^']+':\n((?:\t.*\n?)*)", msg)
    options = ", ".join(x.strip() for x in avail.group(1).splitlines() if x.strip()) if avail else "none"
    return f"{group}={shorten(option)}: unknown option {shorten(option)!r}; {group} has: {options}"


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
        return f"{shorten(text)}: {key} is not in the config; to add it write +{shorten(text)}"
    m = re.search(r"Ambiguous value for argument '([^']+)'", msg)
    if m:
        return f"{m.group(1)}: several values make a sweep; run it with -m (a list value is written key='[a,b]')"
    m = re.search(r"An item is already at '([^']+)'", msg)
    if m:
        key = m.group(1)
        text = next((o for o in overrides if o.lstrip("+").split("=", 1)[0] == key), key)
        return f"{shorten(text)}: {key} is already in the config; write it without '+' ({shorten(text.lstrip('+'))})"
    return _first_line(msg)


def _first_line(e: Any) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return shorten(lines[0]) if lines else type(e).__name__


# ---------------------------------------------------------------------------------- validation
def validate(cfg: DictConfig, checked: dict | None = None) -> None:
    """Every check a job's config must pass before a run is created (one-line ConfigError or
    DataError). ``checked`` caches data-set input checks across the jobs of a sweep."""
    from . import runner

    check_config(cfg)
    unknown = [k for k in cfg if k not in TOP_LEVEL]
    if unknown:
        allowed = ", ".join(k for k in TOP_LEVEL if k != "hydra")
        raise ConfigError(f"{shorten(unknown[0])}: unknown key; allowed top-level keys: {allowed}")
    for key in ("dataset", "anonymizer", "privacy_model", "metrics", "seed", "progress", "tracking"):
        if key not in cfg or cfg[key] is None:
            raise ConfigError(f"{key} is missing from the config")
    seed = cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0 (got {echo(seed)})")
    if not isinstance(cfg.progress, bool):
        raise ConfigError(f"progress must be true or false (got {echo(cfg.progress)})")
    if not isinstance(cfg.tracking, DictConfig):
        raise ConfigError(f"tracking must be a mapping with keys {list(TRACKING_KEYS)}")
    for k in cfg.tracking:
        if k not in TRACKING_KEYS:
            raise ConfigError(f"tracking.{shorten(k)}: unknown key; allowed: {', '.join(TRACKING_KEYS)}")
    for k in ("enabled", "plot"):
        if not isinstance(cfg.tracking.get(k, False), bool):
            raise ConfigError(f"tracking.{k} must be true or false (got {echo(cfg.tracking.get(k))})")
    exp = cfg.tracking.get("experiment")
    if not isinstance(exp, str) or not exp.strip():
        raise ConfigError(f"tracking.experiment must be a non-empty name (got {echo(exp)})")
    if len(exp) > MAX_EXPERIMENT_NAME:
        raise ConfigError(f"tracking.experiment must be a name of at most {MAX_EXPERIMENT_NAME} characters (MLflow's "
                          f"limit; got {len(exp)}: {echo(exp)})")
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
def prepare(hydra, overrides: list[str], multirun: bool, large_grid: bool = False) -> Plan:
    """Check and expand the command line into a :class:`Plan` (nothing is created). Every refusal
    is one line, with echoed values cut to :data:`ECHO` characters."""
    import yaml

    try:
        return _prepare(hydra, reference_overrides(hydra, overrides), multirun, large_grid)
    except CdpbenchError as e:
        raise type(e)(_cut_message(str(e))) from None
    except yaml.YAMLError as e:  # a preset read outside compose (Hydra's get_mode)
        raise ConfigError(yaml_message(e)) from None


def _prepare(hydra, overrides: list[str], multirun: bool, large_grid: bool) -> Plan:
    from hydra.types import RunMode

    for o in parse_overrides(hydra, overrides):
        check_override(o, hydra=hydra)
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
    recorded = OmegaConf.to_container(master.hydra.overrides, resolve=False)
    given = sorted(str(x) for x in [*recorded["task"], *recorded["hydra"]])
    if given != sorted(overrides):
        raise ConfigError("hydra.overrides cannot be set by a config or preset: Hydra fills it from the command line")
    h = master.hydra
    output_key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    output_dir = str(h.sweep.dir if multirun else h.run.dir)
    check_output_dir(output_dir, output_key)
    preset = master.hydra.runtime.choices.get("experiment")
    progress = bool(master.get("progress", True)) if isinstance(master.get("progress"), bool) else True
    if multirun:
        job_overrides = expand_sweep(hydra, master)
        total = len(job_overrides)
        if total > LARGE_GRID and not large_grid:
            raise ConfigError(f"the sweep has {total} jobs, more than {LARGE_GRID}: checking it takes about "
                              f"{max(1, round(total * 0.1 / 60))} min and running it much longer; add {LARGE_GRID_FLAG} "
                              f"to run it")
    else:
        job_overrides = [list(overrides)]
        total = 1
    bar = None
    if multirun and total > PROGRESS_JOBS and progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="checking the sweep", unit="job", file=sys.stderr, dynamic_ncols=True)
    jobs = []
    checked: dict = {}
    keep = total <= PROGRESS_JOBS  # a large sweep's composed configs are dropped once checked (memory)
    try:
        for i, ov in enumerate(job_overrides):
            if not multirun:  # the command line, checked above
                job = Job(list(ov), master)
            else:
                ov = reference_overrides(hydra, ov)
                for o in parse_overrides(hydra, ov):  # the sweep may add overrides from a preset
                    check_override(o, "a preset's sweep", hydra=hydra)
                job = Job(list(ov), compose(hydra, ov, master=master))
            try:
                validate(job.cfg, checked)
            except CdpbenchError as e:
                where = f" [{job_label(i)} of {total}: {' '.join(job.overrides)}]" if multirun and total > 1 else ""
                raise type(e)(f"{e}{where}") from None
            if not keep and i > 0:
                job.cfg = None
            jobs.append(job)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    where = {(j.cfg.tracking.get("uri"), j.cfg.tracking.experiment) for j in jobs if j.cfg is not None}
    if not keep:
        where = set()
        for ov in job_overrides:
            if any(o.lstrip("+~").startswith("tracking.") for o in ov):
                cfg = compose(hydra, ov, master=master)
                where.add((cfg.tracking.get("uri"), cfg.tracking.experiment))
        where.add((jobs[0].cfg.tracking.get("uri"), jobs[0].cfg.tracking.experiment))
    if len(where) > 1:
        raise ConfigError("tracking.uri and tracking.experiment cannot vary within a sweep: its parent run and "
                          "its jobs live in one experiment (run one sweep per experiment)")
    varying = varying_keys([j.overrides for j in jobs]) if multirun else []
    plan = Plan(multirun, list(overrides), master, jobs, preset, varying)
    for job in jobs:
        job.name = run_name(job.overrides, preset, varying if multirun else None)
    plan.output_dir = output_dir
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
    """``+experiment/js_reduce/method=l_diversity`` -> ``method=l_diversity``; a plugin
    reference's group, ``attacker/estimator=permanent`` -> ``attacker.estimator=permanent``."""
    key, sep, value = text.lstrip("+~").partition("=")
    if key.startswith("experiment/"):
        return key.rsplit("/", 1)[-1] + sep + value
    return key.replace("/", ".") + sep + value


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


def sweep_name(preset: str | None, start: float) -> str:
    """A sweep's parent run name, short enough for MLflow's runs table (about 22 characters show):
    the preset (``sweep`` without one) and the launch's local date and minute,
    ``quickstart 11-26 05:46``. The sweep folder is in the parent's tag ``cdpbench.sweep_dir``."""
    import time

    return f"{preset or 'sweep'} {time.strftime('%m-%d %H:%M', time.localtime(start))}"


def job_label(num: int | None) -> str:
    """A sweep job as every message names it: ``job #0`` for the first, Hydra's own numbering
    (its launchers log ``#0 : overrides``), which is also the job's folder in the sweep folder
    (``hydra.sweep.subdir``) and its MLflow tag ``cdpbench.job``."""
    return "job" if num is None else f"job #{int(num)}"


def short_label(name: str, width: int = 32) -> str:
    """A progress-bar label: the run name cut to ``width`` characters."""
    return name if len(name) <= width else name[: width - 1] + "…"


def hydra_instance(conf: Path):
    """A Hydra object for the primary config folder, with every plugin's configs and presets."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    from .registry import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    # the plugins' presets join the search path through hydra_plugins/cdpbench_presets.py
    return Hydra.create_main_hydra2(task_name="cdpbench", config_search_path=create_config_search_path(str(conf)))
