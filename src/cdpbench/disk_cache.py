"""An on-disk memo for small, deterministic and expensive results (a calibrated probability, a
fitted constant) that every process of a sweep would otherwise compute again.

Values are JSON (floats round-trip exactly). An entry is found by the SHA-256 of its namespace,
its key and a ``fingerprint`` that the caller derives from everything the result depends on
beyond the key (its source code, library versions): change any of them and the entry is simply
not found. The folder is ``$CDPBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/cdpbench``, else
``~/.cache/cdpbench``; ``CDPBENCH_CACHE_DIR=off`` turns the memo off. A missing, unreadable or
foreign entry, or an unwritable folder, only means the value is computed (writes are atomic, so
parallel jobs never read half an entry).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

OFF = "off"


def cache_dir() -> Path | None:
    """The memo's folder, or None when ``CDPBENCH_CACHE_DIR=off``."""
    explicit = os.environ.get("CDPBENCH_CACHE_DIR")
    if explicit is not None:
        return None if explicit.strip().lower() in (OFF, "") else Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cdpbench"


def file_fingerprint(*paths: str | os.PathLike, extra: str = "") -> str:
    """SHA-256 of the bytes of ``paths`` and of ``extra`` (e.g. library versions)."""
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def memo(
    namespace: str,
    key: dict[str, Any],
    compute: Callable[[], Any],
    *,
    fingerprint: str,
    valid: Callable[[Any], bool] = lambda value: True,
) -> Any:
    """``compute()``, or the value an earlier process stored under (``namespace``, ``key``,
    ``fingerprint``). A stored value for which ``valid`` is false is computed again."""
    folder = cache_dir()
    if folder is None:
        return compute()
    ident = json.dumps({"namespace": namespace, "key": key, "fingerprint": fingerprint}, sort_keys=True)
    path = folder / namespace / f"{hashlib.sha256(ident.encode()).hexdigest()}.json"
    try:
        entry = json.loads(path.read_text())
        if entry.get("ident") == ident and valid(entry["value"]):
            return entry["value"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    value = compute()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"ident": ident, "value": value}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return value
