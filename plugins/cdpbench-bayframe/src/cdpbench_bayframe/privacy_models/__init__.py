"""BayFrame's privacy-model plugins."""
