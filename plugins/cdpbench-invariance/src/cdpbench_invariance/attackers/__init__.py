"""The attacks on the invariance family, one module per registered plugin."""
