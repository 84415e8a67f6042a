"""The classic estimator plugins."""
