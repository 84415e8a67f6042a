"""cdpbench: a lab for privacy in continuous and sequential data publishing.

The core defines the data types (:mod:`cdpbench.schema`, :mod:`cdpbench.data`), the plugin
contract and registry (:mod:`cdpbench.plugin`, :mod:`cdpbench.registry`), the release loop
(:mod:`cdpbench.runner`), metrics, tracking and the CLI. It knows no anonymization algorithm:
those live in plugin distributions under ``plugins/``.

The Python API for notebooks (:mod:`cdpbench.api`) is exported here: ``cdpbench.run``,
``cdpbench.load_sweep``, ``cdpbench.load_run``, ``cdpbench.RunResult``. It is imported on first
use (module ``__getattr__``), so ``import cdpbench`` imports neither pandas nor MLflow.
"""

__version__ = "0.1.0"

#: the names of :mod:`cdpbench.api` the package exports, imported on first use
_API = ("run", "load_sweep", "load_run", "RunResult")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'cdpbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
