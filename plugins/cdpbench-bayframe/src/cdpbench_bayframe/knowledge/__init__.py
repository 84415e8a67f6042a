"""BayFrame's background-knowledge plugins."""
