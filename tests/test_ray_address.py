"""A Ray cluster joined by address: ``ray start --head`` on 127.0.0.1 (2 CPUs, its own temp folder
and token, started in a folder of its own, as a cluster's node would be) runs a cdpbench sweep
launched elsewhere with ``hydra/launcher=ray hydra.launcher.ray.init.address=127.0.0.1:PORT``.
Every job ends FINISHED in MLflow, its folder in the launch folder; the jobs ran in that
cluster's worker processes (their output is in the cluster's worker logs), and the launcher
connected to it instead of starting a Ray instance of its own. An address where no cluster
answers fails the sweep before any job, in one line.

The cluster is ended by its process group (it runs in a session of its own), not ``ray stop``,
which ends every Ray instance of the user on the machine (another test's among them)."""

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO, SMALL

pytestmark = pytest.mark.slow
RAY = Path(sys.executable).parent / "ray"
GRID = ["-m", *SMALL, "privacy_model=l_diversity", "privacy_model.k=2,3"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """End the cluster: its ``ray start --block`` process and everything in its process group."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):  # Ray ends its processes slowly (~20 s)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()  # reaped once it ends: a zombie would still count as the group's
            try:
                os.killpg(proc.pid, 0)  # anyone left in the group?
            except ProcessLookupError:
                return
            time.sleep(0.2)


@pytest.fixture
def ray_cluster(tmp_path):
    """A one-node Ray cluster on 127.0.0.1: (address, environment that joins it, its temp folder)."""
    if not RAY.exists():
        pytest.skip("Ray is not installed (cdpbench's 'ray' extra): no `ray` command beside this Python")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="Hydra's Ray launcher is not installed (the 'ray' extra)")
    # short: Ray's socket paths under it must fit in 107 characters
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    node = tmp_path / "node"  # the workers' working folder: not the launch folder
    node.mkdir()
    port = free_port()
    # token authentication with a token of this test's (not ~/.ray/auth_token): a driver that joins
    # by address sends it only when told to (RAY_AUTH_MODE=token)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    ports = {f"--{name}": str(free_port()) for name in ("ray-client-server-port", "dashboard-port",
                                                        "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                                        "runtime-env-agent-port", "metrics-export-port")}
    log = tmp_path / "ray_start.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(RAY), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                                 "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={temp}",
                                 "--disable-usage-stats", "--block", *(f"{k}={v}" for k, v in ports.items())],
                                cwd=node, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"ray start --head did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", env, temp
    finally:
        _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


def _sweep(tmp_path: Path, env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    launch = tmp_path / "launch"
    launch.mkdir(exist_ok=True)
    env = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "CDPBENCH_CONF": str(REPO / "conf")}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([str(CDPBENCH), *GRID, "hydra/launcher=ray", *args], cwd=launch, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_a_sweep_runs_on_a_ray_cluster_joined_by_address(ray_cluster, tmp_path, mlflow_client):
    address, env, temp = ray_cluster
    proc = _sweep(tmp_path, env, f"hydra.launcher.ray.init.address={address}", "tracking.experiment=ray_address")
    assert proc.returncode == 0 and "sweep: 2 jobs FINISHED, 2 run" in proc.stderr, proc.stderr[-4000:]
    # the launcher joined the cluster; it did not start a Ray instance of its own
    assert "Connecting to existing Ray cluster" in proc.stderr
    assert "Started a local Ray instance" not in proc.stderr
    c = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = c.get_experiment_by_name("ray_address")
    runs = c.search_runs([exp.experiment_id], max_results=10)
    (parent,) = [r for r in runs if r.data.tags.get("cdpbench.kind") == "sweep"]
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED"
    assert len(jobs) == 2 and {r.info.status for r in jobs} == {"FINISHED"}
    assert {r.data.params["privacy_model.k"] for r in jobs} == {"2", "3"}
    sweep = Path(parent.data.tags["cdpbench.sweep_dir"])
    assert sweep.is_relative_to(tmp_path / "launch")  # the jobs' folders are the launch's, not the node's
    assert not list((tmp_path / "node").rglob("run.json"))
    for r in jobs:
        assert Path(r.data.tags["cdpbench.run_dir"]).parent == sweep
        assert r.data.metrics  # one row per release at least
    # each job ran in a worker process of that cluster: its output is in the cluster's worker logs
    logs = "".join(p.read_text(errors="replace") for p in temp.glob("session_*/logs/worker-*"))
    for job in (0, 1):
        assert re.search(rf"job #{job} \(privacy_model\.k=[23]\): 3 releases", logs), logs[-3000:]


def test_an_address_where_no_ray_cluster_answers_fails_at_once_in_one_line(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="Hydra's Ray launcher is not installed (the 'ray' extra)")
    port = free_port()  # nothing listens there
    # Ray itself would retry for minutes (the timeout fails the test then)
    proc = _sweep(tmp_path, dict(os.environ), f"hydra.launcher.ray.init.address=127.0.0.1:{port}", timeout=180)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "Ray" in lines[0], proc.stderr[-3000:]
    assert not list((tmp_path / "launch").rglob("run.json"))  # no job ran
