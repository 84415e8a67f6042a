"""The environment is locked (#30 item 3): requirements.lock, pip-compile's output (`make lock`),
pins every third-party distribution the core, the plugins and the extras test, bench, ray and postgres need,
and the build backend of the editable installs; `make install` installs exactly it. The running
environment is checked against it with tools/check_lock.py; the check is shown to catch a changed
pin; every requirement a pyproject.toml names is locked at a version it allows."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from conftest import REPO

LOCK = REPO / "requirements.lock"
CHECK = REPO / "tools" / "check_lock.py"
PYPROJECTS = [REPO / "pyproject.toml", *sorted((REPO / "plugins").glob("*/pyproject.toml"))]
LOCKED_EXTRAS = ["test", "bench", "ray", "postgres"]


def check_lock_module():
    spec = importlib.util.spec_from_file_location("check_lock", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=60)


def declared_requirements() -> list[tuple[str, Requirement]]:
    """(file, requirement) for every dependency, locked extra and build requirement named in the
    pyproject.toml files."""
    out = []
    for path in PYPROJECTS:
        data = tomllib.loads(path.read_text())
        names = list(data["project"].get("dependencies", []))
        for extra in LOCKED_EXTRAS if path == REPO / "pyproject.toml" else []:
            names += data["project"]["optional-dependencies"][extra]
        names += data["build-system"]["requires"]
        out += [(str(path.relative_to(REPO)), Requirement(name)) for name in names]
    return out


def local_names() -> set[str]:
    normalized = check_lock_module().normalized
    return {normalized(tomllib.loads(p.read_text())["project"]["name"]) for p in PYPROJECTS}


def test_the_running_environment_holds_every_pin():
    """What `make install` installed is the lock (run `make install` after `make lock`)."""
    proc = check()
    pins = check_lock_module().read_pins(LOCK)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout == f"{len(pins)} pins match\n"
    assert len(pins) > 100  # the whole stack, not a handful of direct dependencies


def test_a_changed_pin_and_a_missing_distribution_are_named(tmp_path):
    numpy = metadata.version("numpy")
    lock = tmp_path / "requirements.lock"
    text = LOCK.read_text()
    assert f"\nnumpy=={numpy} " in text
    lock.write_text(text.replace(f"\nnumpy=={numpy} ", "\nnumpy==0.0.1 ") + "not-a-distribution-here==1.0\n")
    proc = check("--lock", str(lock))
    assert proc.returncode == 1
    # (any other line is a difference of the running environment itself, the test above's business)
    named = [line for line in proc.stdout.splitlines() if line.startswith(("not-a-distribution-here:", "numpy:"))]
    assert named == ["not-a-distribution-here: locked 1.0, not installed", f"numpy: locked 0.0.1, installed {numpy}"]


def test_exact_names_an_installed_distribution_the_lock_leaves_out(tmp_path):
    numpy = metadata.version("numpy")
    lock = tmp_path / "requirements.lock"
    lock.write_text(LOCK.read_text().replace(f"\nnumpy=={numpy} ", "\n# numpy left out "))
    line = f"numpy: installed {numpy}, not in the lock"
    assert line in check("--lock", str(lock), "--exact").stdout.splitlines()
    assert line not in check("--lock", str(lock)).stdout
    # the editable local distributions are not reported as unlocked
    assert not any(out.startswith(tuple(f"{name}:" for name in local_names()))
                   for out in check("--exact").stdout.splitlines())


def test_every_declared_requirement_is_locked_at_a_version_it_allows():
    pins = check_lock_module().read_pins(LOCK)
    normalized = check_lock_module().normalized
    local = local_names()
    assert not local & pins.keys(), "the local distributions are installed editable, not pinned"
    problems = []
    for path, req in declared_requirements():
        name = normalized(req.name)
        if name in local:
            continue
        if name not in pins:
            problems.append(f"{path}: {req} is not in requirements.lock")
        elif not req.specifier.contains(Version(pins[name]), prereleases=True):
            problems.append(f"{path}: {req} does not allow the locked {name}=={pins[name]}")
    assert problems == [], "run `make lock`:\n" + "\n".join(problems)


def test_every_pin_carries_its_hashes():
    """pip installs the lock in hash-checking mode: a pin without a hash would stop `make install`."""
    blocks = LOCK.read_text().split("\n")
    pins = [i for i, line in enumerate(blocks) if check_lock_module().PIN.match(line)]
    assert pins
    unhashed = [blocks[i] for i in pins if not (blocks[i].endswith("\\") and "--hash=sha256:" in blocks[i + 1])]
    assert unhashed == []
