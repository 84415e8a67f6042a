"""The DP count-release anonymizers, one mechanism per module."""
