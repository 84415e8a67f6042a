"""The BCF package's privacy model (``cdpbench.privacy_models``): ``bcf_anonymity``."""
