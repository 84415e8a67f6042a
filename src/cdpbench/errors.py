"""Errors with messages meant for the researcher at the command line (one line each)."""

from __future__ import annotations


class CdpbenchError(Exception):
    """Base class: the CLI prints ``error: <message>`` instead of a traceback."""


class ConfigError(CdpbenchError):
    """An invalid parameter or an unknown plugin name."""


class DataError(CdpbenchError):
    """Input data that does not fit its schema."""


def require(condition: bool, field: str, allowed: str, got: object) -> None:
    """Raise :class:`ConfigError` naming ``field``, what is allowed and what was given."""
    if not condition:
        raise ConfigError(f"{field} must be {allowed} (got {got!r})")
