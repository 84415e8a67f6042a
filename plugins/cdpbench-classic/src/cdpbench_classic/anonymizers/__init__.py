"""The classic anonymizer plugins."""
