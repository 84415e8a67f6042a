"""The experiment presets: the config folder, and every preset of its ``experiment`` folder.

A preset is a YAML file under the experiments folder, named by its path relative to it without
``.yaml`` (``quickstart``, ``js_reduce/fig4``) and used as ``+experiment=NAME``. A folder that
other presets use as a group of options (``+experiment/js_reduce/method: ...`` in a sweep, or
``/experiment/js_reduce/method@_global_: js_reduce`` in a defaults list) holds options, not
presets: ``preset_options("experiment/js_reduce/method")``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from .errors import CdpbenchError

GROUP = "experiment"
WIDTH = 100


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


def experiments_dir() -> Path:
    """``conf_dir() / "experiment"`` (a link to the repository's ``experiments/``)."""
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


