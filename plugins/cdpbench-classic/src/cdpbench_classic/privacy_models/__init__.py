"""The classic privacy-model plugins."""
