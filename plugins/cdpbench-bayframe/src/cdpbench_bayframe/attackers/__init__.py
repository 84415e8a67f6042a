"""BayFrame's attacker plugins."""
