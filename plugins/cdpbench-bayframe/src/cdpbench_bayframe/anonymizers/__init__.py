"""BayFrame's anonymizer plugins."""
