"""The BCF package's data sets (``cdpbench.datasets``): ``adult_cumulative`` and ``adult_increments``."""
