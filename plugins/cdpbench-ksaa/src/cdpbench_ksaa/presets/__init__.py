"""The presets of cdpbench-ksaa: ``+experiment=ksaa/NAME`` (entry-point group ``cdpbench.presets``)."""
