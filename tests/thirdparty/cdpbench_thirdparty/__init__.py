"""A third-party distribution that ships experiment presets and no code: the preset tests put this
folder (package + ``cdpbench_thirdparty-0.1.0.dist-info``) on ``PYTHONPATH``, so its presets are
found through the entry-point group ``cdpbench.presets`` exactly as an installed plugin's are."""
