"""Is this environment the locked one? Compares every pin of requirements.lock with the version
installed (``importlib.metadata``) and names each difference.

    .venv/bin/python tools/check_lock.py            # every locked distribution at its pinned version
    .venv/bin/python tools/check_lock.py --exact    # ... and nothing else installed (a fresh `make install`)

Exit 0 and one line ``N pins match`` when the environment holds every pin; exit 1 and one line per
difference otherwise: ``numpy: locked 2.0.2, installed 2.2.6``, ``numpy: locked 2.0.2, not installed``
and, with ``--exact``, ``numpy: installed 2.0.2, not in the lock``. ``--exact`` leaves out the
editable local distributions (the core and the plugins, which the lock does not pin) and pip, the
installer the venv brings. Uses the standard library only, so it runs in any environment.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib import metadata
from pathlib import Path

LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
# Installed with the venv, not a dependency of the stack (pip-compile leaves it out).
INSTALLER = {"pip"}


def normalized(name: str) -> str:
    """PEP 503's normal form of a distribution name (``PyYAML`` and ``pyyaml`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(lock: Path = LOCK) -> dict[str, str]:
    """Every ``name==version`` line of a pip-compile output (hash and comment lines skipped),
    by normalized name."""
    pins = {}
    for line in lock.read_text().splitlines():
        match = PIN.match(line)
        if match:
            pins[normalized(match[1])] = match[2]
    if not pins:
        raise SystemExit(f"{lock}: no 'name==version' line; a pip-compile output is expected")
    return pins


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def mismatches(pins: dict[str, str]) -> list[str]:
    """One line per pinned distribution that is missing or at another version."""
    out = []
    for name, locked in sorted(pins.items()):
        found = installed_version(name)
        if found is None:
            out.append(f"{name}: locked {locked}, not installed")
        elif found != locked:
            out.append(f"{name}: locked {locked}, installed {found}")
    return out


def is_editable(dist: metadata.Distribution) -> bool:
    direct_url = dist.read_text("direct_url.json")
    return bool(direct_url) and json.loads(direct_url).get("dir_info", {}).get("editable", False)


def unlocked(pins: dict[str, str]) -> list[str]:
    """One line per installed distribution that the lock does not name (editable local ones and
    pip aside; a local distribution's name is left out wherever else it is found too, e.g. the
    ``src/*.egg-info`` a build leaves on the path)."""
    dists = list(metadata.distributions())
    editable = {normalized(dist.metadata["Name"]) for dist in dists if is_editable(dist)}
    out = set()
    for dist in dists:
        name = normalized(dist.metadata["Name"])
        if name not in pins and name not in INSTALLER and name not in editable:
            out.add(f"{name}: installed {dist.version}, not in the lock")
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, default=LOCK, help="the lock file (default: requirements.lock)")
    parser.add_argument("--exact", action="store_true",
                        help="also fail on installed distributions the lock does not name")
    args = parser.parse_args(argv)
    pins = read_pins(args.lock)
    problems = mismatches(pins) + (unlocked(pins) if args.exact else [])
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} difference(s) from {args.lock.name}", file=sys.stderr)
        return 1
    print(f"{len(pins)} pins match" + (", nothing else installed" if args.exact else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
