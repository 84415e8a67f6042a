"""``cdpbench reproduce RUN_ID``: run a recorded run again and compare its numbers (#30).

RUN_ID is a job run, or a sweep's parent run (its FINISHED job runs, and the runs a resumed sweep
skipped because they were FINISHED already). For each job run:

1. its ``config.yaml`` artifact (the resolved config the job ran) is downloaded to a temporary
   folder and checked as a command line's config is (:func:`cdpbench.launch.validate`: the same
   allowlist; a config names registered plugins only), with tracking off;
2. its components are built and the code, input-file and environment fingerprints it recorded
   (:mod:`cdpbench.provenance`), and the checkout it ran from (git commit, dirty, diff hash),
   are compared with the present ones: one ``warning:`` line per difference (a warning is printed
   once however many runs share it);
3. the release loop runs in this process (:func:`cdpbench.runner.run_releases`); nothing is
   written to any MLflow store, and no file is left behind;
4. every stored metric at every release (its MLflow history, step = release) is compared with the
   recomputed value, exactly (NaN equals NaN; MLflow stores an infinity as the largest float,
   compared as such). Wall times (``time_*``, :mod:`cdpbench.runner`) vary between identical runs
   and are not compared.

Exit 0 when every compared value is identical, 1 when any differs (warnings alone do not fail),
2 for an error (an unknown run, a run that is not a job or sweep, not FINISHED, without
``config.yaml``, or a run that could not be run again).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import CdpbenchError

#: wall-time metrics start with this (:func:`cdpbench.runner.run_releases`): never compared
TIMING_PREFIX = "time_"
#: difference lines printed per run before "and N more"
SHOWN_DIFFERENCES = 10
#: MLflow's SQL stores keep +/-inf as +/- this (``SqlAlchemyStore.sanitize_metric_value``)
MLFLOW_INF = 1.7976931348623157e308
GIT_TAGS = ("mlflow.source.git.commit", "cdpbench.git.dirty", "cdpbench.git.diff")


def is_timing(key: str) -> bool:
    return key.startswith(TIMING_PREFIX)


@dataclass
class Comparison:
    """Stored against recomputed metrics of one run."""

    metrics: int = 0  # keys compared (timings apart)
    releases: int = 0  # distinct releases compared
    values: int = 0  # (metric, release) pairs compared
    timings: list[str] = field(default_factory=list)
    #: ``(metric, release, stored, now)``; ``None`` for a value on one side only
    differences: list[tuple[str, int, float | None, float | None]] = field(default_factory=list)
    stored_only: list[str] = field(default_factory=list)  # metrics stored, not recomputed
    new_only: list[str] = field(default_factory=list)  # metrics recomputed, not stored


def reproduce_command(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="cdpbench reproduce",
        description="Run a recorded run (or every run of a sweep) again from its stored config, without writing "
                    "anything to the store, and compare every metric at every release with the stored values. "
                    "Exit 0: identical; 1: some value differs; 2: error.")
    ap.add_argument("run_id", metavar="RUN_ID", help="a job run's id, or a sweep's parent run id")
    ap.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI or sqlite under ./outputs")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (default: one on a terminal)")
    ap.add_argument("--no-cache", action="store_true", help="recompute what plugins memoize on disk too "
                    "(CDPBENCH_CACHE_DIR=off, cdpbench.disk_cache)")
    args = ap.parse_args(argv)
    from . import tracking
    from .report import existing_store

    tracking.install_log_redaction()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per config.yaml otherwise
    if args.no_cache:
        os.environ["CDPBENCH_CACHE_DIR"] = "off"
    uri = args.tracking_uri or tracking.tracking_uri(root=Path.cwd())
    existing_store(uri, args.tracking_uri, command="reproduce")
    c = tracking.client(uri)
    runs, left_out = selected_runs(c, args.run_id, tracking.redact_uri(uri))
    if left_out:
        print(f"left out {left_out} run(s) of the sweep that are not FINISHED", file=sys.stderr)
    show = not args.no_progress and sys.stderr.isatty()
    present_git = _present_git()
    printed: set[str] = set()
    timings: set[str] = set()
    differing = failed = 0
    with tempfile.TemporaryDirectory(prefix="cdpbench-reproduce-") as tmp:
        configs = {r.info.run_id: stored_config(c, r, Path(tmp) / r.info.run_id) for r in runs}  # all, before running
        for i, run in enumerate(runs):
            name = run.info.run_name or run.info.run_id
            label = _label(name, i, len(runs))
            try:
                cfg, comp = _prepared(configs[run.info.run_id], run)
                for w in provenance_warnings(run.data.tags, _present_tags(comp), present_git, run.info.run_id):
                    if w not in printed:
                        printed.add(w)
                        print(f"warning: {w}", file=sys.stderr)
                now = recompute(cfg, comp, show, label)
            except Exception as e:  # noqa: BLE001 - a refused config or a plugin's failure, in one line;
                from .job import one_line  # the other runs go on

                failed += 1
                why = str(e) if isinstance(e, CdpbenchError) else f"{type(e).__name__}: {e}"
                print(f"error: run {run.info.run_id} ({name}) could not be run again: {one_line(why)}", file=sys.stderr)
                continue
            result = compare(stored_metrics(c, run), now)
            timings.update(result.timings)
            differing += bool(result.differences or result.stored_only or result.new_only)
            print("\n".join(summary_lines(run.info.run_id, name, result)), flush=True)
    if timings:
        print(f"not compared (wall times, which vary between identical runs): {', '.join(sorted(timings))}")
    total = len(runs)
    if failed:
        print(f"reproduce: {failed} of {total} run(s) could not be run again", file=sys.stderr)
        return 2
    if differing:
        print(f"reproduce: {differing} of {total} run(s) differ from their stored metrics", file=sys.stderr)
        return 1
    print(f"reproduce: {total} run(s) identical to their stored metrics", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------- the runs
def selected_runs(c, run_id: str, where: str) -> tuple[list, int]:
    """The FINISHED job runs RUN_ID names (itself, or a sweep's children and skipped runs, by job
    number) and how many of a sweep's runs were left out as not FINISHED."""
    from .report import _skipped_runs

    try:
        run = c.get_run(run_id)
    except Exception:
        raise CdpbenchError(f"reproduce: no MLflow run with id {run_id!r} in {where}") from None
    kind = run.data.tags.get("cdpbench.kind")
    if kind == "job":
        if run.info.status != "FINISHED":
            raise CdpbenchError(f"reproduce: run {run_id} is {run.info.status}, not FINISHED: it has no complete "
                                f"metrics to compare with")
        return [run], 0
    if kind != "sweep":
        raise CdpbenchError(f"reproduce: run {run_id} is not a cdpbench job or sweep (its tag cdpbench.kind is "
                            f"{kind!r}); give a job's run id or a sweep's parent run id")
    children = c.search_runs([run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'",
                             max_results=5000)
    runs = list({r.info.run_id: r for r in [*children, *_skipped_runs(c, run_id)]}.values())
    finished = [r for r in runs if r.info.status == "FINISHED" and r.data.tags.get("cdpbench.kind") == "job"]
    if not finished:
        raise CdpbenchError(f"reproduce: sweep {run_id} has no FINISHED job run ({len(runs)} run(s) in all)")

    def order(r):
        job = r.data.tags.get("cdpbench.job", "")
        return (int(job) if job.isdigit() else sys.maxsize, r.info.start_time or 0)

    return sorted(finished, key=order), len(runs) - len(finished)


def stored_config(c, run, folder: Path):
    """A job run's ``config.yaml`` artifact, loaded (a DictConfig)."""
    from omegaconf import DictConfig, OmegaConf

    folder.mkdir(parents=True)
    try:
        path = Path(c.download_artifacts(run.info.run_id, "config.yaml", str(folder)))
    except Exception:
        raise CdpbenchError(f"reproduce: run {run.info.run_id} has no config.yaml artifact: it cannot be run "
                            f"again") from None
    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # noqa: BLE001 - a damaged artifact, in one line
        from .job import one_line

        raise CdpbenchError(f"reproduce: the config.yaml of run {run.info.run_id} cannot be read: "
                            f"{one_line(str(e))}") from None
    if not isinstance(cfg, DictConfig):
        raise CdpbenchError(f"reproduce: the config.yaml of run {run.info.run_id} is not a mapping")
    return cfg


def _prepared(stored, run):
    """The stored config as a job's config with tracking off, checked as a command line's is
    (:func:`cdpbench.launch.validate`), and its components: ``(cfg, components)``."""
    from omegaconf import DictConfig, OmegaConf, open_dict

    from . import launch, runner, tracking

    if "hydra" in stored:  # a job's config never holds Hydra's node (Hydra removes it)
        raise CdpbenchError("its config.yaml holds a 'hydra' node, which a job's stored config never does")
    cfg = OmegaConf.create(OmegaConf.to_container(stored, resolve=False))
    with open_dict(cfg):  # keys that change no number (tracking.config_hash leaves them out)
        if isinstance(cfg.get("tracking"), DictConfig):
            cfg.tracking.enabled = False
            cfg.tracking.uri = None  # stored redacted; not used
        cfg.progress = False
    checked = OmegaConf.create({"hydra": _hydra_node(), **OmegaConf.to_container(cfg, resolve=False)})
    launch.validate(checked)  # the same allowlist as a command line's config
    recorded = run.data.tags.get("cdpbench.config_hash")
    if recorded and tracking.config_hash(cfg) != recorded:
        print(f"warning: the config.yaml of run {run.info.run_id} does not hash to the run's config hash "
              f"({tracking.config_hash(cfg)} now, {recorded} recorded): a redacted value or an edited file; "
              f"the stored file is what runs", file=sys.stderr)
    return cfg, runner.build(cfg)  # built again, with fresh state, as a job does


_HYDRA: list = []


def _hydra_node():
    """Hydra's own ``hydra`` node (its defaults, the basic launcher): what :func:`launch.validate`
    checks a job's config beside; composed from Hydra alone, never from a config folder."""
    if not _HYDRA:
        from hydra.types import RunMode

        from .launch import _trusted_loader

        _HYDRA.append(_trusted_loader().load_configuration(config_name=None, overrides=[], run_mode=RunMode.RUN).hydra)
    return _HYDRA[0]


def _label(name: str, i: int, total: int) -> str:
    from .launch import short_label

    return (f"[{i + 1}/{total}] " if total > 1 else "") + short_label(name)


def recompute(cfg, comp, progress: bool, label: str) -> dict[int, dict[str, float]]:
    """``{release: {metric: value}}`` of the release loop run again, as a job's record holds it."""
    from . import runner

    rows: dict[int, dict[str, float]] = {}

    def keep(t: int, row: dict[str, float]) -> None:  # what cdpbench.record.RunRecord.add_metrics keeps
        rows[int(t)] = {k: float(v) for k, v in row.items() if v is not None}

    runner.run_releases(cfg, comp, on_release=keep, progress=progress, label=label)
    return rows


def stored_metrics(c, run) -> dict[int, dict[str, float]]:
    """``{release: {metric: value}}`` from the run's MLflow metric histories (step = release)."""
    out: dict[int, dict[str, float]] = {}
    for key in sorted(run.data.metrics):
        for m in c.get_metric_history(run.info.run_id, key):
            out.setdefault(int(m.step), {})[key] = float(m.value)
    return out


# ------------------------------------------------------------------------------ provenance
def _present_tags(comp) -> dict[str, str]:
    from .job import _provenance_tags

    return _provenance_tags(comp)


def _present_git() -> dict[str, str]:
    """The checkout's tags as the recorder would write them now (commit, dirty, diff hash)."""
    from . import tracking
    from .recorder import checkout_tags

    root = Path.cwd()
    tags = dict(checkout_tags(root))
    commit = tracking.git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def _short(fp: str | None) -> str:
    return "none" if fp is None else (fp[:8] + "…" if len(fp) > 8 else fp)


def provenance_warnings(recorded: dict[str, str], present: dict[str, str], git: dict[str, str],
                        run_id: str) -> list[str]:
    """One line per difference between the provenance a run recorded and the present one: each
    distribution's code fingerprint, the input files, each environment version, the checkout."""
    from .provenance import CODE_TAG, ENV_TAG, INPUTS_TAG

    out = []
    old_code = {k[len(CODE_TAG):]: v for k, v in recorded.items() if k.startswith(CODE_TAG)}
    new_code = {k[len(CODE_TAG):]: v for k, v in present.items() if k.startswith(CODE_TAG)}
    if not old_code:
        out.append(f"run {run_id} was recorded without code fingerprints (before cdpbench recorded them): its code, "
                   f"input files and environment cannot be compared with the present ones")
    else:
        for d in sorted(set(old_code) | set(new_code)):
            a, b = old_code.get(d), new_code.get(d)
            if a == b:
                continue
            if a is None:
                out.append(f"{d} is used now but was not by the run (code fingerprint {_short(b)})")
            elif b is None:
                out.append(f"{d} was used by the run but is not now (code fingerprint {_short(a)})")
            else:
                out.append(f"{d} changed since the run (code fingerprint {_short(a)} → {_short(b)})")
        a, b = recorded.get(INPUTS_TAG), present.get(INPUTS_TAG)
        if a != b:
            n_a, n_b = recorded.get(f"{INPUTS_TAG}.files", "?"), present.get(f"{INPUTS_TAG}.files", "?")
            out.append(f"the input files changed since the run (fingerprint {_short(a)} of {n_a} file(s) → "
                       f"{_short(b)} of {n_b})")
        names = sorted({k[len(ENV_TAG):] for k in (*recorded, *present) if k.startswith(ENV_TAG)})
        for n in names:
            a, b = recorded.get(ENV_TAG + n), present.get(ENV_TAG + n)
            if a != b:
                out.append(f"{n} {a or 'not recorded'} at the run, {b or 'not installed'} now")
    then = {k: recorded.get(k) for k in GIT_TAGS}
    now = {k: git.get(k) for k in GIT_TAGS}
    if then["mlflow.source.git.commit"] is not None and then != now:
        out.append(f"the run was recorded at commit {_checkout(then)}, this checkout is {_checkout(now)}")
    return out


def _checkout(state: dict[str, str | None]) -> str:
    commit = state.get("mlflow.source.git.commit")
    if commit is None:
        return "not a git checkout"
    dirty = state.get("cdpbench.git.dirty")
    what = {"true": f"dirty, diff {_short(state.get('cdpbench.git.diff'))}", "false": "clean"}.get(dirty or "", "")
    return commit[:10] + (f" ({what})" if what else "")


# ------------------------------------------------------------------------------ comparison
def same(stored: float, now: float) -> bool:
    """Bit for bit as MLflow keeps it: equal, or both NaN; an infinity is stored as +/- the
    largest float (:data:`MLFLOW_INF`)."""
    if math.isnan(stored) or math.isnan(now):
        return math.isnan(stored) and math.isnan(now)
    if math.isinf(now):
        now = math.copysign(MLFLOW_INF, now)
    return stored == now


def compare(stored: dict[int, dict[str, float]], now: dict[int, dict[str, float]]) -> Comparison:
    """Every (metric, release) of either side, timings apart: equal, or a difference."""
    res = Comparison()
    keys_stored = {k for row in stored.values() for k in row}
    keys_now = {k for row in now.values() for k in row}
    res.timings = sorted(k for k in keys_stored | keys_now if is_timing(k))
    res.stored_only = sorted(k for k in keys_stored - keys_now if not is_timing(k))
    res.new_only = sorted(k for k in keys_now - keys_stored if not is_timing(k))
    keys = sorted(k for k in keys_stored & keys_now if not is_timing(k))
    steps = sorted(set(stored) | set(now))
    res.metrics = len(keys)
    res.releases = len(steps)
    for key in keys:
        for t in steps:
            a, b = stored.get(t, {}).get(key), now.get(t, {}).get(key)
            if a is None and b is None:
                continue
            res.values += 1
            if a is None or b is None or not same(a, b):
                res.differences.append((key, t, a, b))
    return res


def _value(v: float | None) -> str:
    return "-" if v is None else repr(v)


def _diffs(a: float | None, b: float | None) -> tuple[str, str]:
    if a is None or b is None:
        return "-", "-"
    d = abs(b - a)
    if math.isnan(d):
        return "nan", "nan"
    rel = d / abs(a) if a != 0 else (math.inf if d else 0.0)
    return f"{d:.6g}", f"{rel:.3g}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def summary_lines(run_id: str, name: str, res: Comparison) -> list[str]:
    """What the comparison of one run prints: one line when identical, else the differences."""
    shape = f"{_count(res.metrics, 'metric')} × {_count(res.releases, 'release')}"
    timing = f"{_count(len(res.timings), 'timing metric')} not compared" if res.timings else ""
    head = f"run {run_id} ({name})"
    if not (res.differences or res.stored_only or res.new_only):
        return [f"{head}: {shape} identical" + (f" ({timing})" if timing else "")]
    what = "; ".join(x for x in (shape, timing) if x)
    if res.differences:
        lines = [f"{head}: {len(res.differences)} of {_count(res.values, 'value')} differ ({what})"]
    else:
        lines = [f"{head}: {_count(res.values, 'value')} identical ({what}), but:"]
    for key in res.stored_only:
        lines.append(f"  metric {key}: stored, not recomputed")
    for key in res.new_only:
        lines.append(f"  metric {key}: recomputed, not stored")
    if res.differences:
        rows = [("metric", "release", "stored", "now", "abs diff", "rel diff")]
        rows += [(k, str(t), _value(a), _value(b), *_diffs(a, b)) for k, t, a, b in res.differences[:SHOWN_DIFFERENCES]]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        if len(res.differences) > SHOWN_DIFFERENCES:
            lines.append(f"  and {len(res.differences) - SHOWN_DIFFERENCES} more")
    return lines
