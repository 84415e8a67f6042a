"""``cdpbench experiments``: every preset of ``conf/experiment`` with its description and command.

A preset is a YAML file under the experiments folder, named by its path relative to it without
``.yaml`` (``quickstart``, ``js_reduce/fig4``) and used as ``+experiment=NAME``. A folder that
other presets use as a group of options (``+experiment/js_reduce/method: ...`` in a sweep, or
``/experiment/js_reduce/method@_global_: js_reduce`` in a defaults list) holds options, not
presets: ``preset_options("experiment/js_reduce/method")``.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from .errors import CdpbenchError

GROUP = "experiment"
WIDTH = 100


def experiments_dir() -> Path:
    """``conf_dir() / "experiment"`` (a link to the repository's ``experiments/``)."""
    from .cli import conf_dir

    folder = conf_dir() / GROUP
    if not folder.is_dir():
        raise CdpbenchError(f"no experiments folder at {folder} (it should link to the repository's experiments/)")
    return folder


@dataclass(frozen=True)
class Preset:
    name: str  # path relative to the experiments folder, without .yaml
    path: Path

    @cached_property
    def comments(self) -> list[str]:
        """The file's leading ``#`` comment lines, without the ``#``."""
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            if not line.lstrip().startswith("#"):
                break
            out.append(line.lstrip()[1:].strip())
        return out

    @cached_property
    def data(self) -> dict:
        import yaml

        try:
            data = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def description(self) -> str:
        return " ".join(c for c in self.comments if c and not c.startswith("@package") and not _is_command(c))

    @property
    def commands(self) -> list[str]:
        return [c for c in self.comments if _is_command(c)]

    def sweep_params(self) -> dict:
        params = ((self.data.get("hydra") or {}).get("sweeper") or {}).get("params")
        return params if isinstance(params, dict) else {}

    def defaults(self) -> list:
        d = self.data.get("defaults")
        return d if isinstance(d, list) else []


def _is_command(comment: str) -> bool:
    return comment.startswith("cdpbench ")


#: Folders of the experiments folder that hold no presets: the README's table specs
#: (``cdpbench tables``) and the results they render from.
NOT_PRESETS = ("tables", "results", "figures")


def _yaml_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.yaml") if p.relative_to(folder).parts[0] not in NOT_PRESETS)


def _scan(folder: Path) -> list[Preset]:
    presets = [Preset(p.relative_to(folder).with_suffix("").as_posix(), p) for p in _yaml_files(folder)]
    # top-level presets first; numbers in names in numeric order (fig3 before fig11)
    return sorted(presets, key=lambda p: (p.name.count("/"), _natural(p.name)))


def _natural(name: str) -> list:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


def _group_of(key: str, preset: Preset) -> str:
    """The config group (or config) a defaults-list entry of ``preset`` names: absolute if it
    starts with ``/``, else relative to the preset's own group."""
    key = re.sub(r"^(override|optional)\s+", "", key.strip()).lstrip("+~").split("@", 1)[0]
    if key.startswith("/"):
        return key[1:]
    parent = Path(preset.name).parent.as_posix()
    return "/".join(p for p in (GROUP, "" if parent == "." else parent, key) if p)


def option_groups(presets: list[Preset] | None = None) -> dict[str, list[str]]:
    """``{group: [option, ...]}`` for every folder of the experiments folder that a preset uses
    as a group of options (a dict entry of its defaults list or a key of its sweep)."""
    folder = experiments_dir()
    presets = _scan(folder) if presets is None else presets
    groups: dict[str, list[str]] = {}
    for preset in presets:
        used = [_group_of(str(k), preset) for entry in preset.defaults() if isinstance(entry, dict) for k in entry]
        used += [str(k).lstrip("+~") for k in preset.sweep_params()]  # sweep keys are absolute
        for group in used:
            if not group.startswith(GROUP + "/"):
                continue
            sub = folder / group.removeprefix(GROUP + "/")
            if group not in groups and sub.is_dir() and ".." not in Path(group).parts:
                groups[group] = sorted(p.stem for p in sub.glob("*.yaml"))
    return dict(sorted(groups.items()))


def _presets() -> tuple[list[Preset], dict[str, list[str]]]:
    """The standalone presets and the option groups, parsed once per process for as long as no
    preset file is added, removed or changed (a sweep checks its ``+experiment`` overrides once
    per job: re-parsing the ~70 preset files each time cost about 0.25 s a job)."""
    folder = experiments_dir()
    files = _yaml_files(folder)
    signature = tuple((str(f), st.st_mtime_ns, st.st_size) for f in files for st in [f.stat()])
    return _parsed_presets(folder, signature)


@lru_cache(maxsize=4)
def _parsed_presets(folder: Path, signature: tuple) -> tuple[list[Preset], dict[str, list[str]]]:
    everything = _scan(folder)
    groups = option_groups(everything)
    group_dirs = {g.removeprefix(GROUP + "/") for g in groups}
    return [p for p in everything if Path(p.name).parent.as_posix() not in group_dirs], groups


def preset_names() -> list[str]:
    """Every standalone preset, as used in ``+experiment=NAME``."""
    return [p.name for p in _presets()[0]]


def preset_options(group: str) -> list[str]:
    """The options of an option group such as ``experiment/js_reduce/method`` (a leading ``+`` or
    ``/`` is ignored); ``[]`` if no preset uses that folder as a group."""
    return list(_presets()[1].get(group.lstrip("+/"), []))


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
    everything = {p.name: p for p in _scan(experiments_dir())}
    lines = [f"presets in {experiments_dir().resolve()}  (use as +{GROUP}=NAME)"]
    for p in presets:
        lines += ["", p.name]
        lines += _wrap(p.description, "    ")
        lines.append(f"    run:     {run_command(p, everything)}")
        lines += [f"    report:  {c}" for c in p.commands if c.startswith("cdpbench report")]
    for group, options in groups.items():
        lines += ["", f"options of {group}: {', '.join(options)}",
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
