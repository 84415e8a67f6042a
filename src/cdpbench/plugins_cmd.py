"""``cdpbench plugins``: every installed plugin, its distribution and its parameters."""

from __future__ import annotations

import argparse

from .errors import ConfigError
from .plugin import ENTRY_POINT_GROUPS
from .registry import default_registry


def plugins_command(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cdpbench plugins", description="List installed cdpbench plugins.")
    ap.add_argument("kind", nargs="?", choices=list(ENTRY_POINT_GROUPS), help="only this kind")
    args = ap.parse_args(argv)
    reg = default_registry()
    for kind, group in ENTRY_POINT_GROUPS.items():
        if args.kind and kind != args.kind:
            continue
        print(f"{kind}  ({group})")
        names = reg.names(kind)
        if not names:
            print("    (none installed)")
        for name in names:
            try:
                info = reg.info(kind, name)
            except ConfigError as e:
                print(f"  {name}: BROKEN: {e}")
                continue
            print(f"  {name}  [{info.distribution} {info.version}]  {info.doc}")
            for pname, typ, default, help_ in info.parameters():
                line = f"      {kind}.{pname}: {typ} = {default!r}"
                print(f"{line:<58} {help_}" if help_ else line)
        print()
    return 0
