"""The presets of cdpbench-bayframe: ``+experiment=bayframe/NAME`` (entry-point group ``cdpbench.presets``)."""
