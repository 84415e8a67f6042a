"""BayFrame's estimator plugins."""
