"""Hydra finds the installed plugins' presets wherever it starts on cdpbench's config folder.

Hydra imports every module of the ``hydra_plugins`` namespace when it starts: this one adds each
distribution's preset folder (entry-point group ``cdpbench.presets``, :mod:`cdpbench.presets`)
to the config search path, right after the primary config folder, so that
``+experiment=bayframe/fig3`` composes from ``cdpbench`` itself, from a launcher's workers and
from Hydra's own API (``initialize_config_dir`` + ``compose`` in a test or a notebook). It does
nothing for a Hydra application whose primary config folder is not cdpbench's. Importing
:class:`~cdpbench.preset_source.PluginPresets` here is what registers its scheme with Hydra.
"""

from __future__ import annotations

import os

from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.plugins.search_path_plugin import SearchPathPlugin

from cdpbench.preset_source import PluginPresets, search_path_entry  # noqa: F401  (registered by Hydra)


class CdpbenchPresets(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from cdpbench.errors import CdpbenchError
        from cdpbench.presets import conf_dir, preset_sources

        main = [e.path for e in search_path.get_path() if e.provider == "main"]
        if not main or "://" in main[0] and not main[0].startswith("file://"):
            return
        try:
            ours = os.path.samefile(main[0].removeprefix("file://"), conf_dir())
        except (OSError, CdpbenchError):
            return
        if ours:
            for source in reversed(preset_sources()[1:]):
                search_path.append(*search_path_entry(source), anchor=SearchPathQuery(provider="main"))
