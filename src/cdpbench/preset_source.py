"""Hydra reads a plugin's presets as ``experiment/<namespace>/...`` (see :mod:`cdpbench.presets`).

A plugin ships its presets as a plain folder of YAML files (``cdpbench_bayframe/presets/fig3.yaml``)
rather than a copy of Hydra's tree (``.../experiment/bayframe/fig3.yaml``): this config source
serves that folder at ``experiment/<namespace>`` and nothing else, so a plugin's presets cannot
stand in for the lab's ``config.yaml``, another plugin's presets or a ``hydra/...`` option.
Its search-path entries are ``cdpbench-presets://<namespace>@<folder>``, added by the Hydra
search-path plugin ``hydra_plugins/cdpbench_presets.py`` (whose import registers this class
with Hydra, in every process Hydra starts in).
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf

from .presets import GROUP, PresetSource

SCHEME = "cdpbench-presets"


class PluginPresets(ConfigSource):
    """One plugin's preset folder as the config group ``experiment/<namespace>``."""

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self.namespace, _, folder = self.path.partition("@")
        self.folder = os.path.realpath(folder)
        self.mount = f"{GROUP}/{self.namespace}"

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def _inside(self, config_path: str) -> str | None:
        """The file-system path of ``config_path`` if it lies under the mount and in the folder."""
        config_path = config_path.strip("/")
        if config_path != self.mount and not config_path.startswith(self.mount + "/"):
            return None
        full = os.path.realpath(os.path.join(self.folder, config_path[len(self.mount):].lstrip("/")))
        return full if full == self.folder or full.startswith(self.folder + os.sep) else None

    def available(self) -> bool:
        return os.path.isdir(self.folder)

    def is_group(self, config_path: str) -> bool:
        config_path = config_path.strip("/")
        if config_path in ("", GROUP):  # the parents of the mount
            return True
        full = self._inside(config_path)
        return full is not None and os.path.isdir(full)

    def is_config(self, config_path: str) -> bool:
        full = self._inside(self._normalize_file_name(config_path.strip("/")))
        return full is not None and os.path.isfile(full)

    def load_config(self, config_path: str) -> ConfigResult:
        full = self._inside(self._normalize_file_name(config_path.strip("/")))
        if full is None or not os.path.isfile(full):
            raise ConfigLoadError(f"Config not found : {config_path}")
        with open(full, encoding="utf-8") as f:
            header = ConfigSource._get_header_dict(f.read(512))
            f.seek(0)
            cfg = OmegaConf.load(f)
        return ConfigResult(config=cfg, path=f"{self.scheme()}://{self.path}", provider=self.provider, header=header)

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        config_path = config_path.strip("/")
        if config_path == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) else []
        if config_path == GROUP:
            return [self.namespace] if results_filter in (None, ObjectType.GROUP) else []
        full = self._inside(config_path)
        if full is None or not os.path.isdir(full):
            return []
        files: list[str] = []
        for name in os.listdir(full):
            self._list_add_result(files=files, file_path=f"{config_path}/{name}", file_name=name,
                                  results_filter=results_filter)
        return sorted(set(files))


def search_path_entry(source: PresetSource) -> tuple[str, str]:
    """``(provider, path)`` of a plugin's presets for Hydra's config search path."""
    return source.owner, f"{SCHEME}://{source.namespace}@{Path(source.folder)}"
