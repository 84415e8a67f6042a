"""cdpbench-dp: differentially private continual release (issue #29); see README.md."""
