"""The core's own metrics, registered under ``cdpbench.metrics`` exactly as a plugin's would be:
``utility`` (GCP, discernibility, suppression), ``record_linkage`` (RL), ``kl_divergence``,
``query_error`` and ``belief`` (adversary gain and confidence)."""
