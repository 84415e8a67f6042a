"""The presets of cdpbench-thirdparty: ``+experiment=thirdparty/NAME``."""
