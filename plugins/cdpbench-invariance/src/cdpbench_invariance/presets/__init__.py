"""The presets of cdpbench-invariance: ``+experiment=invariance/NAME`` (entry-point group ``cdpbench.presets``)."""
