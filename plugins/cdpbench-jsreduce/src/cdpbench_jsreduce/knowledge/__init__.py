"""The sequential knowledge plugins of the JS-reduce plugin package (dk, spm, ie), one module per registered plugin."""
