"""The anonymizers of the invariance family, one module per registered plugin."""
