"""cdpbench plugin: BayFrame (TDP 2019)."""
