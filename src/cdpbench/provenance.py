"""What made a result (#30): the code, the input files and the environment a run used.

Every job run records, as tags:

* ``cdpbench.code.<distribution>``: a fingerprint of the source of each distribution whose code
  the run used — the core (``cdpbench``), the distribution of every plugin the run built (plugin
  references included) and the cdpbench distributions those declare they depend on (a plugin may
  import only its declared dependencies). A fingerprint is a SHA-256 over the path and bytes of
  every file of the distribution's packages (package data such as a vendored table included,
  ``__pycache__`` excluded), so an edit anywhere in a plugin changes it, whatever its version
  string says;
* ``cdpbench.inputs``: one fingerprint over the files the data set reads
  (:meth:`cdpbench.plugin.Dataset.input_files`: release files, schemas, hierarchies), with their
  count in ``cdpbench.inputs.files``;
* ``cdpbench.env.<name>``: Python's version and those of the numeric stack.

A resumed sweep skips a job only when a FINISHED run has its config hash *and* the same code and
input fingerprints (:func:`stale_reason`). The launching process records the git commit, whether
the tree was dirty and a hash of the diff (:func:`git_state`), and the whole environment as the
sweep's artifact ``environment.txt`` (:func:`environment_freeze`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

CORE = "cdpbench"
CODE_TAG = "cdpbench.code."
INPUTS_TAG = "cdpbench.inputs"
ENV_TAG = "cdpbench.env."
#: the numeric stack whose versions a run records (numbers may change with them)
NUMERIC = ("numpy", "scipy", "pandas", "hydra-core", "omegaconf")
SKIPPED_PARTS = {"__pycache__"}
SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not SKIPPED_PARTS & set(p.relative_to(folder).parts)
                  and not p.name.endswith(SKIPPED_SUFFIXES) and ".egg-info" not in str(p.relative_to(folder)))


def _top_level_names(dist: metadata.Distribution) -> list[str]:
    """The import names a distribution installs: its ``top_level.txt``, else the top-level names in
    its RECORD, else the modules its entry points name (a plugin always has some)."""
    names = (dist.read_text("top_level.txt") or "").split()
    if not names:
        names = sorted({Path(str(f)).parts[0].split(".")[0] for f in dist.files or ()
                        if not Path(str(f)).parts[0].endswith((".dist-info", ".data", ".pth"))})
    if not names:
        names = sorted({ep.value.split(":")[0].split(".")[0] for ep in dist.entry_points})
    return names


def _sources(dist: metadata.Distribution) -> list[tuple[str, Path]]:
    """``(label, file)`` of every source file of a distribution: all files of each regular
    top-level package (package data included), or the module file of a top-level module; a
    namespace package shared with other distributions (``hydra_plugins``) is left out."""
    out: list[tuple[str, Path]] = []
    for name in _top_level_names(dist):
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None or spec.origin in ("built-in", "frozen"):
            continue  # a namespace package or not importable here
        origin = Path(spec.origin)
        if spec.submodule_search_locations:  # a package: every file under its folder
            folder = origin.parent
            out += [(f"{name}/{f.relative_to(folder).as_posix()}", f) for f in _files_of(folder)]
        else:
            out.append((origin.name, origin))
    return out


@lru_cache(maxsize=None)
def distribution_fingerprint(name: str) -> str:
    """SHA-256 (16 hex digits) over the relative path and bytes of every source file of
    distribution ``name`` (:func:`_sources`); ``"?"`` when it is not installed."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return "?"
    h = hashlib.sha256()
    for label, f in _sources(dist):
        h.update(f"{label}\0".encode())
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


@lru_cache(maxsize=None)
def _cdpbench_requirements(name: str) -> tuple[str, ...]:
    """The cdpbench distributions ``name`` declares it depends on (its Requires-Dist)."""
    try:
        reqs = metadata.distribution(name).requires or []
    except metadata.PackageNotFoundError:
        return ()
    from packaging.requirements import Requirement  # hydra-core's dependency

    out = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is not None and "extra" in str(req.marker):
            continue  # an extra's requirement is not code the distribution imports by default
        dep = _canonical(req.name)
        if dep == CORE or dep.startswith(CORE + "-"):
            out.append(dep)
    return tuple(sorted(set(out)))


def plugin_objects(root: Any, depth: int = 4) -> list[Any]:
    """Every plugin instance reachable from ``root`` (a component, a dict or list of them): its
    attributes and its parameters' fields, plugin references included, ``depth`` levels deep."""
    from .plugin import Plugin

    found: list[Any] = []
    seen: set[int] = set()

    def walk(obj: Any, left: int) -> None:
        if left < 0 or id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
            return
        seen.add(id(obj))
        if isinstance(obj, dict):
            for v in obj.values():
                walk(v, left)
            return
        if isinstance(obj, (list, tuple, set)):
            for v in obj:
                walk(v, left)
            return
        if isinstance(obj, Plugin):
            found.append(obj)
            for v in vars(obj).values():
                walk(v, left - 1)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name, None), left - 1)

    walk(root, depth)
    return found


def distributions_used(components: list[Any], registry) -> list[str]:
    """The core, the distribution of every plugin reachable from ``components`` and, transitively,
    the cdpbench distributions they depend on; sorted."""
    by_class = {info.cls: _canonical(info.distribution) for info in registry.loaded()}
    dists = {CORE}
    for obj in plugin_objects(components):
        d = by_class.get(type(obj))
        if d is None:  # a plugin class not loaded through the registry (a subclass built by a plugin)
            d = _distribution_of_module(type(obj).__module__)
        if d:
            dists.add(d)
    todo = list(dists)
    while todo:
        for dep in _cdpbench_requirements(todo.pop()):
            if dep not in dists:
                dists.add(dep)
                todo.append(dep)
    return sorted(dists)


def _distribution_of_module(module: str) -> str | None:
    top = module.split(".")[0]
    for dist in metadata.distributions():
        if top in _top_level_names(dist):
            return _canonical(dist.metadata["Name"])
    return None


def code_fingerprints(components: list[Any], registry) -> dict[str, str]:
    """``{distribution: fingerprint}`` of the code a run built from ``components`` uses."""
    return {d: distribution_fingerprint(d) for d in distributions_used(components, registry)}


def file_fingerprint(paths: list[Path]) -> str:
    """SHA-256 (16 hex digits) over the files' bytes, in order (each with its length): what the
    files hold and in which order a data set reads them, not where they lie."""
    h = hashlib.sha256()
    for p in paths:
        data = Path(p).read_bytes()
        h.update(f"{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def environment() -> dict[str, str]:
    """Python's version and the numeric stack's (``"-"`` for one not installed)."""
    out = {"python": platform.python_version()}
    for name in NUMERIC:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "-"
    return out


def run_tags(code: dict[str, str], inputs: list[Path] | None) -> dict[str, str]:
    """The provenance tags of one job run."""
    tags = {f"{CODE_TAG}{d}": fp for d, fp in code.items()}
    files = list(inputs or [])
    tags[INPUTS_TAG] = file_fingerprint(files) if files else "-"
    tags[f"{INPUTS_TAG}.files"] = str(len(files))
    tags.update({f"{ENV_TAG}{k}": v for k, v in environment().items()})
    return tags


def provenance_of(tags: dict[str, str]) -> dict[str, Any]:
    """The code and input fingerprints a run's tags record (for :func:`stale_reason`)."""
    return {"code": {k[len(CODE_TAG):]: v for k, v in tags.items() if k.startswith(CODE_TAG)},
            "inputs": tags.get(INPUTS_TAG)}


def stale_reason(recorded: dict[str, Any], present: dict[str, Any]) -> str | None:
    """Why a recorded run is not what the present code and inputs compute (None when it is):
    ``"cdpbench-jsreduce changed"``, ``"the input files changed"``, ``"recorded before code
    fingerprints"``."""
    old = recorded.get("code") or {}
    if not old:
        return "it was recorded without code fingerprints (before cdpbench recorded them)"
    new = present.get("code") or {}
    changed = sorted(d for d in set(old) | set(new) if old.get(d) != new.get(d))
    if changed:
        return ", ".join(changed) + (" changed" if len(changed) > 1 else " changed")
    if recorded.get("inputs") != present.get("inputs"):
        return "the input files changed"
    return None


def git_state(root: Path) -> dict[str, str]:
    """``{"commit", "dirty", "diff"}`` of the checkout at ``root`` (empty outside git): whether
    tracked files differ from the commit, and a hash of ``git diff HEAD`` when they do."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=10)
        except Exception:
            return None
        return out.stdout.decode(errors="replace") if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {}
    diff = git("diff", "HEAD") or ""
    state = {"commit": commit.strip(), "dirty": "true" if diff else "false"}
    if diff:
        state["diff"] = hashlib.sha256(diff.encode()).hexdigest()[:16]
    return state


def environment_freeze() -> str:
    """Every installed distribution as ``name==version``, sorted (the sweep's ``environment.txt``),
    with Python's version first."""
    lines = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]},
                   key=str.lower)
    return f"# python {platform.python_version()}\n" + "\n".join(lines) + "\n"


#: the environment lock a checkout installs from (``make install``; #30)
LOCK_FILE = "requirements.lock"


def lock_fingerprint(root: Path) -> str | None:
    """SHA-256 (16 hex digits) of the checkout's :data:`LOCK_FILE`, None when there is none."""
    try:
        return hashlib.sha256((Path(root) / LOCK_FILE).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def source_note(tags: list[dict[str, str]]) -> str:
    """One line naming the commit(s) and lock(s) the runs with these tags came from, for a figure:
    ``runs of commit 84a9823 · lock 1a2b3c4d5e6f7a8b`` (``+dirty <diff>`` when the tree differed
    from the commit; ``not recorded`` for runs made before cdpbench recorded it)."""
    def commit(t: dict[str, str]) -> str:
        c = t.get("mlflow.source.git.commit")
        if not c:
            return "not recorded"
        dirty = t.get("cdpbench.git.dirty") == "true"
        return c[:7] + (f"+dirty {t.get('cdpbench.git.diff', '')}".rstrip() if dirty else "")

    commits = sorted({commit(t) for t in tags})
    locks = sorted({t.get("cdpbench.lock") or "not recorded" for t in tags})
    return (f"runs of commit{'s' if len(commits) > 1 else ''} {', '.join(commits)} · "
            f"lock{'s' if len(locks) > 1 else ''} {', '.join(locks)}")
