"""``cdpbench server``: an MLflow tracking server for a team, and the URI its jobs log to.

It runs MLflow's own server (``mlflow server``) with a backend store (SQLite under ``outputs/``
by default, or a PostgreSQL database, ``postgresql://user@db:5432/mlflow``: :data:`STORE_SCHEMES`
is the allowlist) and an artifacts folder it serves itself, bound to 127.0.0.1 unless ``--host``
says otherwise. Every cdpbench process given ``MLFLOW_TRACKING_URI=http://HOST:PORT`` then logs
there: the sweep's recorder writes the runs, jobs on other machines only need the shared sweep
folder.

Before starting MLflow it checks that the port can be bound on that host (a port in use ends the
command at once, non-zero, with one line). With a host other than a loopback address (e.g.
``--host 0.0.0.0``) it warns that MLflow's server has no authentication (anyone who can reach
the port can read and write every run), prints the URI other machines use (this machine's host
name and the address of its default route), and sets MLflow's ``--allowed-hosts`` to those names
and addresses with the port, and localhost (MLflow refuses requests whose Host header is not
listed), and ``--cors-allowed-origins`` to the same origins, so that the UI works from them too.
``--dry-run`` prints the ``mlflow server`` command instead of running it.

A store URI that holds a password (``postgresql://ml:s3cret@db/mlflow``) is never printed as is
(:func:`cdpbench.tracking.redact_uri`), and reaches MLflow through its environment
(``MLFLOW_BACKEND_STORE_URI``) rather than its command line, which every user of the machine can
read; libpq also takes the password from ``PGPASSWORD`` or ``~/.pgpass``, which keeps it out of
the URI altogether.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import ipaddress
import os
import shlex
import socket
import sys
from pathlib import Path

from .errors import CdpbenchError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
#: MLflow's default allowed hosts include private addresses (kept when --allowed-hosts replaces them)
PRIVATE_IP_HOSTS = ["10.*", "192.168.*", *(f"172.{i}.*" for i in range(16, 32)), "fc00:*", "fd00:*"]
#: a TEST-NET-1 address (RFC 5737): a UDP socket "connected" to it tells which local address the
#: default route uses; connecting a UDP socket sends no packet
_ROUTE_PROBE = ("192.0.2.1", 9)
#: the backend stores ``cdpbench server`` runs MLflow's server on (an allowlist: the schemes a
#: store URI may have), each with the Python module of its SQLAlchemy driver (None: Python's own).
#: SQLAlchemy 2.1 reads ``postgresql://`` with psycopg (3), cdpbench's 'postgres' extra
STORE_SCHEMES = {"sqlite": None, "postgresql": "psycopg", "postgresql+psycopg": "psycopg",
                 "postgresql+psycopg2": "psycopg2"}
#: how to install each driver module
DRIVER_INSTALL = {"psycopg": "install cdpbench's 'postgres' extra (pip install 'psycopg[binary]')",
                  "psycopg2": "pip install psycopg2-binary"}


def server_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cdpbench server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine "
                        "only; 0.0.0.0: every interface, with a warning: MLflow's server has no authentication)")
    parser.add_argument("--port", type=int, default=5000, help="port (default: 5000)")
    parser.add_argument("--backend-store-uri", default=None,
                        help="where runs are kept: sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE (needs the "
                        "'postgres' extra, psycopg) (default: sqlite:///$PWD/outputs/server/mlflow.db)")
    parser.add_argument("--artifacts", default=None, help="artifacts folder (default: $PWD/outputs/server/artifacts)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server worker processes (default: 1; with more, uvicorn leaves Nagle's algorithm on for "
                        "the connections it accepts, uvicorn#3149, and every request on a kept-alive connection waits "
                        "~40 ms more)")
    parser.add_argument("--allowed-hosts", default="", metavar="HOSTS",
                        help="with a non-loopback --host: more Host headers MLflow accepts, comma-separated "
                        "(e.g. a proxy's name mlflow.lab.org), besides this machine's names and address with the port")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the port and print the `mlflow server` command (stdout) instead of running it")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        raise CdpbenchError(f"server: --port must be 1..65535 (got {args.port})")
    if args.workers < 1:
        raise CdpbenchError(f"server: --workers must be >= 1 (got {args.workers})")
    if args.backend_store_uri is not None:
        check_store(args.backend_store_uri)
    check_port(args.host, args.port)
    base = Path.cwd() / "outputs" / "server"
    store = args.backend_store_uri or f"sqlite:///{(base / 'mlflow.db').resolve()}"
    artifacts = Path(args.artifacts or base / "artifacts").resolve()
    mlflow = Path(sys.executable).parent / "mlflow"
    from .tracking import redact_uri

    # a URI with a secret goes to MLflow in its environment: a command line is visible to every user (ps)
    env = {"MLFLOW_BACKEND_STORE_URI": store} if redact_uri(store) != store else {}
    cmd = [str(mlflow) if mlflow.exists() else "mlflow", "server",
           *([] if env else ["--backend-store-uri", store]),
           "--artifacts-destination", artifacts.as_uri(), "--serve-artifacts",
           "--host", args.host, "--port", str(args.port), "--workers", str(args.workers)]
    lines = [f"MLflow server for {redact_uri(store)}, artifacts in {artifacts}"]
    if is_loopback(args.host):
        lines.append(f"jobs on this machine log to it with: export MLFLOW_TRACKING_URI=http://{_url_host(args.host)}:{args.port}")
    else:
        names = machine_names(args.host)
        hosts = [f"{_url_host(n)}:{args.port}" for n in (*LOOPBACK_NAMES, *names)] + PRIVATE_IP_HOSTS
        hosts += [h.strip() for h in args.allowed_hosts.split(",") if h.strip()]
        origins = [f"http://{_url_host(n)}:{args.port}" for n in names]
        names = [n for n in names if not is_loopback(n)]  # those this machine maps to itself are no use elsewhere
        cmd += ["--allowed-hosts", ",".join(dict.fromkeys(hosts))]
        if origins:
            cmd += ["--cors-allowed-origins", ",".join(dict.fromkeys(origins))]
        lines.append(f"server: WARNING: listening on {args.host}:{args.port}, reachable from other machines. MLflow's "
                     "server has no authentication: anyone who can reach this port can read and write every run "
                     "(open it only to a network you trust, or put a proxy that checks who comes in front of it)")
        if names:
            first, *others = (f"http://{_url_host(n)}:{args.port}" for n in names)
            also = f" (or {', '.join(others)})" if others else ""
            lines.append(f"jobs on other machines log to it with: export MLFLOW_TRACKING_URI={first}{also}")
        else:
            lines.append("server: this machine's host name and address could not be found: give other machines "
                         "a name that reaches it, and list it with --allowed-hosts NAME:PORT")
        lines.append(f"jobs on this machine: export MLFLOW_TRACKING_URI=http://127.0.0.1:{args.port}")
    print("\n".join(lines), file=sys.stderr, flush=True)
    if args.dry_run:
        print(" ".join([*(f"{k}={shlex.quote(redact_uri(v))}" for k, v in env.items()), shlex.join(cmd)]), flush=True)
        return 0
    if store.startswith("sqlite:///"):
        Path(store[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    os.environ.update(env)
    # MLflow's job runner (GenAI evaluation, trace rollups; cdpbench uses none) starts ~8 Python processes
    # that keep 2 cores busy for ~15 s after the server answers
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    os.execv(cmd[0], cmd) if os.path.isabs(cmd[0]) else os.execvp(cmd[0], cmd)
    return 0  # pragma: no cover - exec does not return


def check_store(uri: str) -> None:
    """Raise a one-line error unless ``uri`` is a backend store of :data:`STORE_SCHEMES` whose
    driver is installed (the URI shown without its password)."""
    from .tracking import redact_uri

    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    if scheme not in STORE_SCHEMES or (scheme == "sqlite" and not uri.startswith("sqlite:///")):
        hint = " (PostgreSQL's scheme is postgresql://)" if scheme.partition("+")[0] == "postgres" else ""
        raise CdpbenchError(f"server: --backend-store-uri {redact_uri(uri)}: not a store cdpbench server runs "
                            f"on{hint}; allowed: sqlite:///PATH, postgresql://USER@HOST:PORT/DATABASE")
    module = STORE_SCHEMES[scheme]
    if module and not driver_installed(module):
        raise CdpbenchError(f"server: --backend-store-uri {redact_uri(uri)}: needs the PostgreSQL driver {module}, "
                            f"which this Python cannot import; {DRIVER_INSTALL[module]}")


def driver_installed(module: str) -> bool:
    """Can this Python import the driver ``module``? (psycopg without libpq is found but fails
    to import, so it is imported.)"""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def check_port(host: str, port: int) -> None:
    """Raise a one-line error unless ``port`` can be bound on ``host`` now. The probe socket sets
    ``SO_REUSEADDR`` as MLflow's servers (uvicorn, gunicorn) do, so a port whose last connections
    are in TIME_WAIT is free, as it is for them, while a port something listens on is not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise CdpbenchError(f"server: --host {host!r} is not an address of this machine ({e.strerror})") from None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise CdpbenchError(f"server: port {port} on {host} is in use; choose another with --port") from None
                if e.errno == errno.EACCES:
                    raise CdpbenchError(f"server: port {port} on {host} needs privileges; choose one above 1023 "
                                        "with --port") from None
                raise CdpbenchError(f"server: cannot listen on {host}:{port} ({e.strerror})") from None
            return


def is_loopback(host: str) -> bool:
    """Is ``host`` reachable from this machine only (127.0.0.0/8, ::1, localhost)?"""
    if host.strip("[]").lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: loopback only if every address it has is
        try:
            addrs = {info[4][0] for info in socket.getaddrinfo(host, None)}
        except OSError:
            return False
        return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def machine_names(host: str) -> list[str]:
    """The names and addresses other machines may reach a server bound to ``host`` at: ``host``
    itself unless it is a wildcard (0.0.0.0, ::), this machine's host name and fully qualified
    name, and for a wildcard the address its default route uses."""
    names: list[str] = []
    try:
        wildcard = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        wildcard = False
    if not wildcard:
        names.append(host.strip("[]"))
    for name in (socket.gethostname(), socket.getfqdn()):
        if name and name.lower() not in ("localhost", "localhost.localdomain"):
            names.append(name)
    if wildcard:
        ip = default_route_address(ipaddress.ip_address(host.strip("[]")).version)
        if ip:
            names.append(ip)
    return list(dict.fromkeys(names))


def default_route_address(version: int = 4) -> str | None:
    """This machine's address on its default route (None if it has none), found by connecting a
    UDP socket, which sends nothing."""
    family, probe = (socket.AF_INET, _ROUTE_PROBE) if version == 4 else (socket.AF_INET6, ("2001:db8::1", 9))
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(probe)
            ip = s.getsockname()[0]
    except OSError:
        return None
    try:
        addr = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return None
    return None if addr.is_loopback or addr.is_unspecified else str(addr)


def _url_host(name: str) -> str:
    """``name`` as the host of a URL or a Host header (an IPv6 address in brackets)."""
    name = name.strip("[]")
    return f"[{name}]" if ":" in name else name
