"""The presets of cdpbench-jsreduce: ``+experiment=js_reduce/NAME`` (entry-point group ``cdpbench.presets``)."""
