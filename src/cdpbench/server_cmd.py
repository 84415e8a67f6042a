"""``cdpbench server``: an MLflow tracking server for a team, and the URI its jobs log to.

It runs MLflow's own server (``mlflow server``) with a backend store (SQLite under ``outputs/``
by default, or any SQLAlchemy URI such as ``postgresql://user@db/mlflow``) and an artifacts
folder it serves itself, bound to 127.0.0.1 unless ``--host`` says otherwise (MLflow's server has
no authentication: open it to a network you trust, or put it behind a proxy that checks who
comes). Every cdpbench process given ``MLFLOW_TRACKING_URI=http://HOST:PORT`` then logs there:
the sweep's recorder writes the runs, jobs on other machines only need the shared sweep folder.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import CdpbenchError


def server_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cdpbench server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=5000, help="port (default: 5000)")
    parser.add_argument("--backend-store-uri", default=None,
                        help="where runs are kept: a SQLAlchemy URI (default: sqlite:///$PWD/outputs/server/mlflow.db)")
    parser.add_argument("--artifacts", default=None, help="artifacts folder (default: $PWD/outputs/server/artifacts)")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (default: 2)")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        raise CdpbenchError(f"server: --port must be 1..65535 (got {args.port})")
    if args.workers < 1:
        raise CdpbenchError(f"server: --workers must be >= 1 (got {args.workers})")
    base = Path.cwd() / "outputs" / "server"
    store = args.backend_store_uri or f"sqlite:///{(base / 'mlflow.db').resolve()}"
    artifacts = Path(args.artifacts or base / "artifacts").resolve()
    if store.startswith("sqlite:///"):
        Path(store[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    mlflow = Path(sys.executable).parent / "mlflow"
    cmd = [str(mlflow) if mlflow.exists() else "mlflow", "server", "--backend-store-uri", store,
           "--artifacts-destination", artifacts.as_uri(), "--serve-artifacts",
           "--host", args.host, "--port", str(args.port), "--workers", str(args.workers)]
    print(f"MLflow server for {store}, artifacts in {artifacts}\n"
          f"jobs log to it with: export MLFLOW_TRACKING_URI=http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd) if os.path.isabs(cmd[0]) else os.execvp(cmd[0], cmd)
    return 0  # pragma: no cover - exec does not return
