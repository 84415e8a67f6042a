"""The whole-history verifiers of the invariance family as privacy models, one module per registered plugin."""
