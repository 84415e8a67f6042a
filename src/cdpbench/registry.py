"""Plugin discovery (entry points), instantiation and Hydra ConfigStore registration.

Instantiation only goes through :meth:`Registry.create`: a config names a plugin by its registered
name, never by an import path, so no config can make the program import or call arbitrary code.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .errors import ConfigError
from .plugin import ENTRY_POINT_GROUPS, GROUP_KINDS, KINDS, Plugin, plugin_refs

NONE = "none"  # the option that disables an optional component (e.g. attacker=none)


@dataclass(frozen=True)
class PluginInfo:
    kind: str
    name: str
    cls: type[Plugin]
    distribution: str
    version: str

    @property
    def doc(self) -> str:
        doc = inspect.getdoc(self.cls) or ""
        return doc.strip().splitlines()[0] if doc else ""

    def parameters(self) -> list[tuple[str, str, Any, str]]:
        """``(name, type, default, help)`` per parameter; help comes from ``metadata['help']``."""
        rows = []
        for f in dataclasses.fields(self.cls.Params):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
            )
            typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            rows.append((f.name, typ, default, f.metadata.get("help", "")))
        return rows

    def defaults(self) -> dict[str, Any]:
        return {f.name: v for f, v in zip(dataclasses.fields(self.cls.Params), [p[2] for p in self.parameters()])}


class Registry:
    """Every installed plugin, discovered from the ``cdpbench.*`` entry-point groups."""

    def __init__(self, entry_points: Mapping[str, list[metadata.EntryPoint]] | None = None):
        self._eps: dict[str, dict[str, metadata.EntryPoint]] = {}
        for kind, group in ENTRY_POINT_GROUPS.items():
            eps = entry_points[kind] if entry_points is not None and kind in entry_points else metadata.entry_points(group=group)
            self._eps[kind] = {ep.name: ep for ep in eps}
        self._loaded: dict[tuple[str, str], PluginInfo] = {}

    def names(self, kind: str) -> list[str]:
        self._check_kind(kind)
        return sorted(self._eps[kind])

    def info(self, kind: str, name: str) -> PluginInfo:
        self._check_kind(kind)
        key = (kind, name)
        if key not in self._loaded:
            if name not in self._eps[kind]:
                installed = ", ".join(self.names(kind)) or "none installed"
                raise ConfigError(f"unknown {kind} {name!r}; installed: {installed}")
            ep = self._eps[kind][name]
            try:
                cls = ep.load()
            except Exception as e:  # a broken plugin must not take the CLI down with a traceback
                raise ConfigError(f"{kind} {name!r} could not be loaded from {ep.value}: {e}") from e
            base = KINDS[kind]
            if not (isinstance(cls, type) and issubclass(cls, base)):
                raise ConfigError(f"{kind} {name!r} ({ep.value}) is not a {base.__name__} subclass")
            if not dataclasses.is_dataclass(cls.Params):
                raise ConfigError(f"{kind} {name!r}: Params must be a dataclass")
            dist = getattr(ep, "dist", None)
            self._loaded[key] = PluginInfo(
                kind, name, cls, dist.name if dist else "?", dist.version if dist else "?"
            )
        return self._loaded[key]

    def loaded(self) -> list[PluginInfo]:
        """The plugins this registry has loaded so far (each with its class and distribution)."""
        return list(self._loaded.values())

    def all(self) -> list[PluginInfo]:
        return [self.info(kind, name) for kind in ENTRY_POINT_GROUPS for name in self.names(kind)]

    def params(self, kind: str, name: str, values: Mapping[str, Any] | DictConfig | None = None, where: str | None = None) -> Any:
        """Typed, validated parameters of plugin ``name`` from a mapping (``name`` key ignored).
        Errors name the field as ``<where>.<param>`` (``where`` defaults to the kind)."""
        info = self.info(kind, name)
        where = where or kind
        try:  # an interpolation that does not resolve (e.g. ${dataset.releases} on a data set without it)
            raw = OmegaConf.to_container(values, resolve=True) if isinstance(values, DictConfig) else dict(values or {})
        except OmegaConfBaseException as e:
            key = getattr(e, "full_key", None) or "?"
            raise ConfigError(f"{key}: {str(e).splitlines()[0]}; set it on the command line") from None
        raw.pop("name", None)
        allowed = [f.name for f in dataclasses.fields(info.cls.Params)]
        unknown = [k for k in raw if k not in allowed]
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]} is not a parameter of {kind} {name!r}; allowed: {allowed}")
        refs = plugin_refs(info.cls.Params)
        nodes = {f: raw.pop(f) for f in refs if f in raw}  # built below, by this registry
        try:
            conf = OmegaConf.merge(OmegaConf.structured(info.cls.Params), raw)
            params = OmegaConf.to_object(conf)
        except ConfigError as e:
            raise ConfigError(f"{where}.{e}") from None
        except OmegaConfBaseException as e:
            key = getattr(e, "full_key", None) or getattr(e, "key", None) or "?"
            msg = str(e).splitlines()[0]
            raise ConfigError(f"{where}.{key}: {msg}") from None
        for field_name, (ref_kind, default) in refs.items():
            path = f"{where}.{field_name}"
            node = reference_node(nodes.get(field_name), default, ref_kind, path)
            if node["name"] not in self._eps[ref_kind]:
                raise ConfigError(f"{path}: unknown {ref_kind} {node['name']!r}; installed: "
                                  f"{', '.join(self.names(ref_kind)) or 'none installed'}")
            setattr(params, field_name, self.create(ref_kind, node["name"], node, path))
        check = getattr(params, "check_references", None)  # checks that need the built references
        if refs and callable(check):
            try:
                check()
            except ConfigError as e:
                raise ConfigError(f"{where}.{e}") from None
        return params

    def create(self, kind: str, name: str, values: Mapping[str, Any] | DictConfig | None = None, where: str | None = None) -> Plugin:
        """Instantiate plugin ``name`` of ``kind`` with validated parameters."""
        info = self.info(kind, name)
        instance = info.cls(self.params(kind, name, values, where))
        instance.plugin_name = name  # type: ignore[attr-defined]
        return instance

    def _check_kind(self, kind: str) -> None:
        if kind not in ENTRY_POINT_GROUPS:
            raise ConfigError(f"unknown plugin kind {kind!r}; kinds: {list(ENTRY_POINT_GROUPS)}")


def reference_node(value: Any, default: str, kind: str, where: str) -> dict[str, Any]:
    """A plugin reference's config node as ``{name: ..., <parameters>}``: absent -> the default
    plugin, a name -> that plugin with its defaults, a mapping without ``name`` -> the default
    plugin with those parameters."""
    if isinstance(value, DictConfig):
        value = OmegaConf.to_container(value, resolve=True)
    if value is None:
        return {"name": default}
    if isinstance(value, str) and value:
        return {"name": value}
    if isinstance(value, dict):
        node = dict(value)
        node.setdefault("name", default)
        if isinstance(node["name"], str) and node["name"]:
            return node
    raise ConfigError(f"{where} must name a plugin of kind {kind} ({where}=NAME, {where}.<param>=VALUE), got {value!r}")


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT


def register_configs(registry: Registry | None = None) -> None:
    """Store every plugin's defaults in Hydra's ConfigStore: group = kind, option = name.

    The nodes are plain mappings (``{"name": ..., **defaults}``), not generated dataclasses, so a
    composed config pickles for any launcher; types are checked by :meth:`Registry.params`.
    """
    from hydra.core.config_store import ConfigStore

    registry = registry or default_registry()
    cs = ConfigStore.instance()
    stored: set[str] = set()  # reference groups already stored
    for kind in GROUP_KINDS:
        _store_group(cs, registry, kind, kind, REFERENCE_DEPTH, stored)
        if kind in ("attacker", "knowledge"):
            cs.store(group=kind, name=NONE, node={"name": NONE})
    metrics: dict[str, Any] = {}
    for name in registry.names("metric"):
        try:
            metrics[name] = {"enabled": True, **_plain(registry.info("metric", name).defaults())}
        except ConfigError:
            continue
    cs.store(group="metrics", name="all", node=metrics)


#: how deep plugin references become Hydra config groups (``attacker/estimator``,
#: ``anonymizer/base/...``); deeper ones are plain sub-nodes the core fills in
REFERENCE_DEPTH = 3


def _store_group(cs, registry: Registry, group: str, kind: str, depth: int, stored: set[str]) -> None:
    """Every plugin of ``kind`` as an option of config group ``group`` (``attacker``, or
    ``attacker/estimator`` for an attacker's estimator reference). A plugin's references are
    groups of their own below it, chosen in its defaults list, so that ``attacker/estimator=NAME``
    (``attacker.estimator=NAME``, rewritten) swaps the whole sub-node, parameters included."""
    for name in registry.names(kind):
        try:
            info = registry.info(kind, name)
            values = _plain(info.defaults())
        except ConfigError:
            continue  # reported by `cdpbench plugins` and on use
        refs = plugin_refs(info.cls.Params)
        node: dict[str, Any] = {"name": name}
        chosen = []
        for key, value in values.items():
            if key in refs and depth > 1:
                chosen.append({key: value})
            elif key in refs:
                node[key] = {"name": value}  # too deep for a group: the core fills it in
            else:
                node[key] = value
        if chosen:
            node = {"defaults": [*chosen, "_self_"], **node}
        cs.store(group=group, name=name, node=node)
    for name in registry.names(kind):
        try:
            refs = plugin_refs(registry.info(kind, name).cls.Params)
        except ConfigError:
            continue
        for key, (ref_kind, _) in refs.items():
            if depth > 1 and f"{group}/{key}" not in stored:
                stored.add(f"{group}/{key}")
                _store_group(cs, registry, f"{group}/{key}", ref_kind, depth - 1, stored)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out
