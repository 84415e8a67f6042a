"""The classic background-knowledge plugins."""
