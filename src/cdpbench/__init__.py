"""cdpbench: a lab for privacy in continuous and sequential data publishing.

The core defines the data types (:mod:`cdpbench.schema`, :mod:`cdpbench.data`), the plugin
contract and registry (:mod:`cdpbench.plugin`, :mod:`cdpbench.registry`), the release loop
(:mod:`cdpbench.runner`), metrics, tracking and the CLI. It knows no anonymization algorithm:
those live in plugin distributions under ``plugins/``.
"""

__version__ = "0.1.0"
