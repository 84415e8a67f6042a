"""The anonymizer of the JS-reduce plugin package, one module per registered plugin."""
