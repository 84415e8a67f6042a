"""The experiment presets: the config folder, and every preset of the lab and of the installed plugins.

A preset is a YAML file named by its path relative to the ``experiment`` group without ``.yaml``
(``quickstart``, ``js_reduce/fig4``) and used as ``+experiment=NAME``. The lab's own presets
(those that compare plugins: ``quickstart``, ``matrix/...``) are the files of ``conf/experiment``
(a link to the repository's ``experiments/``); a distribution ships its own under a namespace
through the entry-point group ``cdpbench.presets`` (``bayframe = "cdpbench_bayframe.presets"``
makes ``.../cdpbench_bayframe/presets/fig3.yaml`` the preset ``bayframe/fig3``; Hydra reads it
through :mod:`cdpbench.preset_source`). A folder that other presets use as a group of options
(``+experiment/js_reduce/method: ...`` in a sweep, or ``/experiment/js_reduce/method@_global_:
js_reduce`` in a defaults list) holds options, not presets: ``preset_options("experiment/js_reduce/method")``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from .errors import CdpbenchError
from .kinds import PRESETS_GROUP

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


#: the owner shown for the presets of the config folder itself
LAB = "experiments/"

#: a namespace: one folder name of the ``experiment`` group
NAMESPACE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class PresetSource:
    """A folder of presets: the config folder's (``namespace == ""``) or a distribution's."""

    namespace: str
    folder: Path
    owner: str  # the distribution that ships it, or LAB


def preset_sources() -> list[PresetSource]:
    """The config folder's presets, then every installed distribution's (entry-point group
    ``cdpbench.presets``), checked: a namespace is a lower-case name, names a package folder, and
    is no other source's (neither a plugin's nor a folder or preset of the config folder)."""
    lab = PresetSource("", experiments_dir(), LAB)
    taken = {p.name.removesuffix(".yaml") for p in lab.folder.iterdir() if p.is_dir() or p.suffix == ".yaml"}
    sources = [lab]
    for source in _plugin_sources():
        if source.namespace in taken:
            raise CdpbenchError(f"{source.owner} ships presets under {source.namespace}/, which {lab.folder}/"
                                f"{source.namespace} already has: rename one of them")
        sources.append(source)
    return sources


@lru_cache(maxsize=1)
def _plugin_sources() -> tuple[PresetSource, ...]:
    from importlib import metadata
    from importlib.util import find_spec

    found: dict[str, PresetSource] = {}
    for ep in sorted(metadata.entry_points(group=PRESETS_GROUP), key=lambda e: e.name):
        owner = ep.dist.name if ep.dist is not None else "an unknown distribution"
        where = f"entry point {ep.name} = {ep.value!r} of {owner} (group {PRESETS_GROUP})"
        if not NAMESPACE.fullmatch(ep.name):
            raise CdpbenchError(f"{where}: the name must be lower-case letters, digits and _ (it becomes +experiment={ep.name}/...)")
        if ep.name in found:
            raise CdpbenchError(f"{where}: {found[ep.name].owner} ships presets under {ep.name}/ already")
        try:
            spec = find_spec(ep.value) if re.fullmatch(r"[A-Za-z_][\w.]*", ep.value) else None
        except (ImportError, ValueError) as e:
            raise CdpbenchError(f"{where}: {e}") from None
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        if not folders:
            raise CdpbenchError(f"{where}: the value must name a package (a folder of YAML presets)")
        found[ep.name] = PresetSource(ep.name, Path(folders[0]).resolve(), owner)
    return tuple(found.values())


def locate(relative: str) -> Path | None:
    """The folder or file (without ``.yaml``) of ``relative``, a path inside the ``experiment``
    group (``bayframe/defense``, ``matrix``): in its plugin's folder if its first part is a
    plugin's namespace, else in the config folder's; ``None`` for a path that leaves it."""
    parts = Path(relative).parts
    if not parts or ".." in parts or Path(relative).is_absolute():
        return None
    for source in preset_sources()[1:]:
        if parts[0] == source.namespace:
            return source.folder.joinpath(*parts[1:])
    return experiments_dir().joinpath(*parts)


@dataclass(frozen=True)
class Preset:
    name: str  # path relative to the experiment group, without .yaml
    path: Path
    owner: str = LAB  # the distribution that ships it

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
    def description_lines(self) -> list[str]:
        """The description as a reader laid it out: running comment lines joined into paragraphs,
        a line indented further (a list: ``#   defenses: ...``) or following a line that ends
        with ``:`` kept as its own line with its indentation."""
        out: list[str] = []
        joinable = False
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            if not line.lstrip().startswith("#"):
                break
            body = line.lstrip()[1:]
            body = body[1:] if body.startswith(" ") else body
            text = body.strip()
            if not text or text.startswith("@package") or _is_command(text):
                joinable = False
                continue
            indent = len(body) - len(body.lstrip())
            if indent == 0 and joinable and out:
                out[-1] += " " + text
            else:
                out.append(" " * indent + text)
            joinable = indent == 0 and not text.endswith(":")
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


def _scan(sources: list[PresetSource] | None = None) -> list[Preset]:
    presets = []
    for source in preset_sources() if sources is None else sources:
        for p in _yaml_files(source.folder):
            name = p.relative_to(source.folder).with_suffix("").as_posix()
            presets.append(Preset(f"{source.namespace}/{name}" if source.namespace else name, p, source.owner))
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
    """``{group: [option, ...]}`` for every folder of the ``experiment`` group that a preset uses
    as a group of options (a dict entry of its defaults list or a key of its sweep)."""
    presets = _scan() if presets is None else presets
    groups: dict[str, list[str]] = {}
    for preset in presets:
        used = [_group_of(str(k), preset) for entry in preset.defaults() if isinstance(entry, dict) for k in entry]
        used += [str(k).lstrip("+~") for k in preset.sweep_params()]  # sweep keys are absolute
        for group in used:
            if not group.startswith(GROUP + "/"):
                continue
            sub = locate(group.removeprefix(GROUP + "/"))
            if group not in groups and sub is not None and sub.is_dir():
                groups[group] = sorted(p.stem for p in sub.glob("*.yaml"))
    return dict(sorted(groups.items()))


def _presets() -> tuple[list[Preset], dict[str, list[str]]]:
    """The standalone presets and the option groups, parsed once per process for as long as no
    preset file is added, removed or changed (a sweep checks its ``+experiment`` overrides once
    per job: re-parsing the ~70 preset files each time cost about 0.25 s a job)."""
    sources = tuple(preset_sources())
    files = [f for source in sources for f in _yaml_files(source.folder)]
    signature = tuple((str(f), st.st_mtime_ns, st.st_size) for f in files for st in [f.stat()])
    return _parsed_presets(sources, signature)


@lru_cache(maxsize=4)
def _parsed_presets(sources: tuple[PresetSource, ...], signature: tuple) -> tuple[list[Preset], dict[str, list[str]]]:
    everything = _scan(list(sources))
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


