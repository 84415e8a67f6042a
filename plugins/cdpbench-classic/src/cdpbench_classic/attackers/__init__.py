"""The classic attacker plugins."""
