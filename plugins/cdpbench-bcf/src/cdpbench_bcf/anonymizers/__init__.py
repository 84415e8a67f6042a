"""The BCF package's anonymizers (``cdpbench.anonymizers``): ``tds`` and ``bcf``."""
