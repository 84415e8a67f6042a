"""``cdpbench experiments``: every preset, of the lab and of each installed plugin, with its
description, its command and the distribution that ships it (the presets: :mod:`cdpbench.presets`)."""

from __future__ import annotations

import argparse
import textwrap

from .presets import GROUP, LAB, WIDTH, Preset, _group_of, _presets, _scan, experiments_dir

def _sweeps(preset: Preset, by_name: dict[str, Preset], seen: frozenset = frozenset()) -> bool:
    """The preset, or a preset it includes through its defaults list, sets ``hydra.sweeper.params``."""
    if preset.sweep_params():
        return True
    for entry in preset.defaults():
        if isinstance(entry, str) and preset.name not in seen:
            group = _group_of(entry, preset)
            inner = by_name.get(group.removeprefix(GROUP + "/"))
            if group.startswith(GROUP + "/") and inner and _sweeps(inner, by_name, seen | {preset.name}):
                return True
    return False


def run_command(preset: Preset, by_name: dict[str, Preset]) -> str:
    """The preset's own ``cdpbench ...`` comment line that runs it, else a synthesized one."""
    for cmd in preset.commands:
        if not cmd.startswith("cdpbench report"):
            return cmd
    return f"cdpbench {'-m ' if _sweeps(preset, by_name) else ''}+{GROUP}={preset.name}"


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent) if text else []


def experiments_lines() -> list[str]:
    presets, groups = _presets()
    everything = {p.name: p for p in _scan()}
    lines = [f"presets (use as +{GROUP}=NAME): the lab's in {experiments_dir().resolve()}, "
             f"a plugin's shipped with it (entry-point group cdpbench.presets)"]
    for p in presets:
        lines += ["", p.name if p.owner == LAB else f"{p.name}   (from {p.owner})"]
        for text in p.description_lines:
            body = text.lstrip()
            lines += _wrap(body, "    " + " " * (len(text) - len(body)))
        lines.append(f"    run:     {run_command(p, everything)}")
        lines += [f"    report:  {c}" for c in p.commands if c.startswith("cdpbench report")]
    for group, options in groups.items():
        owner = everything[f"{group.removeprefix(GROUP + '/')}/{options[0]}"].owner if options else LAB
        shipped = "" if owner == LAB else f"   (from {owner})"
        lines += ["", f"options of {group}: {', '.join(options)}{shipped}",
                  f"  (not presets: add one to any command as +{group}=NAME)"]
        width = max(map(len, options), default=0)
        for name in options:
            desc = everything[f"{group.removeprefix(GROUP + '/')}/{name}"].description
            lines.append(f"    {name:<{width}}  {textwrap.shorten(desc, WIDTH - width - 6, placeholder=' ...')}")
    return lines


def experiments_command(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="cdpbench experiments", description="List the experiment presets (+experiment=NAME).")
    ap.parse_args(argv)
    print("\n".join(experiments_lines()))
    return 0
