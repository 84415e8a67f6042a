"""``cdpbench plugins``: every installed plugin, its distribution, the override that selects it
and each parameter under the exact override path that sets it."""

from __future__ import annotations

import argparse

from .errors import ConfigError
from .plugin import ENTRY_POINT_GROUPS, plugin_refs
from .registry import NONE, default_registry

# What a kind's header adds, beyond `KIND=NAME` selecting a plugin.
KIND_NOTES = {
    "knowledge": f"the defender's beliefs; knowledge={NONE} (the default): no background knowledge",
    "attacker": f"attacker={NONE}: no attack; ++attacker.label=NAME names its metrics NAME.* (default: the plugin's name)",
}


def param_prefix(kind: str, name: str) -> str:
    """Where a plugin's parameters live in the composed config: ``metrics.<name>`` for metrics
    (all of them are on at once), the kind otherwise (one plugin of the kind per run)."""
    return f"metrics.{name}" if kind == "metric" else kind


def select_line(kind: str, name: str) -> str:
    """The override that puts a plugin to use."""
    if kind == "metric":
        return f"on by default; metrics.{name}.enabled=false switches it off"
    if kind == "attacker":
        return (f"attacker={name}, or one more attacker in the same run:\n"
                f"           +extra_attackers.<label>={{name: {name}, ...}}  (parameters: extra_attackers.<label>.<param>)")
    return f"{kind}={name}"


def parameter_lines(reg, info, prefix: str, indent: str = "      ") -> list[str]:
    """One line per parameter, ``path: type = default   help``; a plugin reference
    (:func:`cdpbench.plugin.plugin_ref`) shows the override that chooses its plugin and, below it,
    the default plugin's parameters under their nested paths."""
    refs = plugin_refs(info.cls.Params)
    lines = []
    for pname, typ, default, help_ in info.parameters():
        if pname in refs:
            ref_kind = refs[pname][0]
            line = f"{indent}{prefix}.{pname}={default}  ({ref_kind} plugin; {prefix}.{pname}=NAME chooses another)"
            lines.append(f"{line:<58} {help_}" if help_ else line)
            try:
                nested = reg.info(ref_kind, default)
            except ConfigError as e:
                lines.append(f"{indent}    BROKEN: {e}")
                continue
            lines += parameter_lines(reg, nested, f"{prefix}.{pname}", indent + "  ")
            continue
        line = f"{indent}{prefix}.{pname}: {typ} = {default!r}"
        lines.append(f"{line:<58} {help_}" if help_ else line)
    return lines


def plugins_command(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cdpbench plugins", description="List installed cdpbench plugins, the override "
                                 "that selects each and every parameter as the override that sets it (path: type = default).")
    ap.add_argument("kind", nargs="?", choices=list(ENTRY_POINT_GROUPS), help="only this kind")
    args = ap.parse_args(argv)
    reg = default_registry()
    for kind, group in ENTRY_POINT_GROUPS.items():
        if args.kind and kind != args.kind:
            continue
        print(f"{kind}  ({group})" + (f"  {KIND_NOTES[kind]}" if kind in KIND_NOTES else ""))
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
            print(f"      use: {select_line(kind, name)}")
            for line in parameter_lines(reg, info, param_prefix(kind, name)):
                print(line)
        print()
    return 0
