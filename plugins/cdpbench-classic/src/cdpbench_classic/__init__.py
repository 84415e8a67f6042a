"""cdpbench-classic: the single-release baselines every paper compares against."""
