"""The presets of cdpbench-bcf: ``+experiment=bcf/NAME`` (entry-point group ``cdpbench.presets``)."""
