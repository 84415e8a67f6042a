"""The KSAA package's anonymizers (``cdpbench.anonymizers``): ``ksaa``, ``cell`` and ``tds4asr``."""
