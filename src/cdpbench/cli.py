"""The ``cdpbench`` command.

* ``cdpbench [hydra overrides]`` — one run (or a sweep with ``-m``), tracked in MLflow.
* ``cdpbench plugins`` — every installed plugin with its parameters.
* ``cdpbench report`` — a metric against release for every run of a sweep, one PNG + a CSV.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .errors import CdpbenchError

log = logging.getLogger("cdpbench")


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


def task(cfg: DictConfig) -> float | None:
    """One job: build the components, run the releases, log everything to MLflow."""
    from hydra.core.hydra_config import HydraConfig

    from . import plots, runner, tracking

    comp = runner.build(cfg)  # invalid parameters fail here, before any MLflow run exists
    from .registry import default_registry

    reg = default_registry()
    tags = {"cdpbench.kind": "job"}
    for kind, name in comp.names.items():
        info = reg.info(kind, name)
        tags[f"cdpbench.{kind}"] = name
        tags[f"cdpbench.{kind}.version"] = f"{info.distribution} {info.version}"
    for label in comp.attackers:
        tags[f"cdpbench.attacker.{label}"] = "1"
    try:
        hc = HydraConfig.get()
        overrides = [o for o in hc.overrides.task]
        job_dir = Path(hc.runtime.output_dir)
    except ValueError:
        overrides, job_dir = [], Path.cwd()
    tags["cdpbench.overrides"] = " ".join(overrides)
    run_name = cfg.tracking.get("run_name") or (" ".join(o for o in overrides if not o.startswith("+experiment")) or "default")
    job = tracking.JobRun(cfg, tags, run_name)
    try:
        table = runner.run_releases(cfg, comp, on_release=lambda t, row: job.log_metrics(row, t), progress=bool(cfg.progress), label=run_name)
        with tempfile.TemporaryDirectory() as tmp:  # nothing lands unless the whole run succeeded
            tmpdir = Path(tmp)
            (tmpdir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
            table.to_csv(tmpdir / "metrics.csv")
            plots.release_plot(table, tmpdir / "metrics.png", title=run_name)
            job.log_artifacts(tmpdir)
            for f in tmpdir.iterdir():
                shutil.copy2(f, job_dir / f.name)
        job.end("FINISHED")
    except BaseException as e:
        job.end("FAILED")
        if isinstance(e, CdpbenchError):
            raise
        raise CdpbenchError(f"run failed in {type(e).__name__}: {e} (MLflow run {job.run_id} marked FAILED)") from e
    log.info("MLflow run %s: %d releases", job.run_id, len(table))
    return None


def check_plugin_overrides(argv: list[str]) -> None:
    """Reject ``kind=name`` overrides (sweep lists included) naming no installed plugin, with the
    installed names, before Hydra composes anything."""
    from .registry import NONE, default_registry

    reg = default_registry()
    for arg in argv:
        m = re.fullmatch(r"\+{0,2}(dataset|anonymizer|privacy_model|knowledge|estimator|attacker)=(.*)", arg)
        if not m:
            continue
        kind, value = m.groups()
        value = re.sub(r"^(choice|range)\((.*)\)$", r"\2", value)
        for name in (v.strip() for v in value.split(",")):
            if name and name not in reg.names(kind) and not (name == NONE and kind in ("attacker", "knowledge")):
                reg.info(kind, name)  # raises the registry's error listing the installed names


def run_hydra(argv: list[str]) -> int:
    import hydra

    from . import tracking
    from .registry import register_configs

    check_plugin_overrides(argv)
    register_configs()
    path = conf_dir()

    @hydra.main(config_path=str(path), config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        try:
            task(cfg)
        except CdpbenchError as e:
            # A clear one-line message instead of a traceback; SystemExit passes through Hydra.
            raise SystemExit(f"error: {e}") from None

    old = sys.argv
    sys.argv = [old[0], *argv]
    status = "FAILED"
    try:
        _main()
        status = "FINISHED"
    finally:
        sys.argv = old
        tracking.finish_parent(status)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
