"""A team's tracking server: ``cdpbench server`` on 127.0.0.1, and 8 jobs running at once (two
sweeps launched together, 4 parallel jobs each, so two recorders write at the same time) lose no
metric: every (metric, release) of every job's run record is in the server, with its value."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO, SMALL

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(proc, url: str, kill, output, timeout: float = 120) -> None:
    """Until the server ``proc`` answers OK on ``url/health``; if it ends or does not answer in
    ``timeout`` seconds, ``kill()`` it and fail with its ``output()``."""
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.read() == b"OK":
                    return
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                kill()
                raise AssertionError(f"the server did not start: {output()}") from None
            time.sleep(0.3)


@pytest.fixture
def server(tmp_path):
    port = free_port()
    proc = subprocess.Popen([str(CDPBENCH), "server", "--port", str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_healthy(proc, url, kill=proc.kill, output=proc.stderr.read)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def test_eight_concurrent_jobs_lose_no_metric(server, tmp_path, mlflow_client):
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "CDPBENCH_CONF": str(REPO / "conf")}
    sweeps = []
    for name in ("a", "b"):
        args = ["-m", *SMALL, "privacy_model=k_anonymity,l_diversity", "privacy_model.k=3,5", f"tracking.experiment={name}",
                "hydra/launcher=joblib", "hydra.launcher.n_jobs=4", f"hydra.sweep.dir=outputs/multirun/{name}"]
        sweeps.append(subprocess.Popen([str(CDPBENCH), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True))
    for p in sweeps:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0 and "sweep: 4 jobs FINISHED, 4 run" in err, err
    assert mlflow_client(server).get_experiment_by_name("a") is not None  # the server answers for its store
    # every value read back from the server's store (through the server: ~800 requests, too slow here)
    c = mlflow_client(f"sqlite:///{tmp_path / 'outputs' / 'server' / 'mlflow.db'}")
    counted = check_sweeps_recorded(c, tmp_path / "outputs" / "multirun", ("a", "b"))
    print(f"{counted} metric values checked")


def check_sweeps_recorded(c, multirun: Path, names, jobs: int = 4) -> int:
    """Every job of the sweeps ``multirun/<name>`` is a FINISHED run of experiment ``name`` holding
    exactly its record's metrics, each value at its release; returns how many values were checked."""
    counted = 0
    for name in names:
        records = sorted((multirun / name).glob("*/run.json"))
        assert len(records) == jobs, name
        for f in records:
            rec = json.loads(f.read_text())
            run_id = (f.parent / "mlflow_run_id").read_text()
            run = c.get_run(run_id)
            assert run.info.status == "FINISHED"
            assert c.get_experiment(run.info.experiment_id).name == name
            want = {}
            for step, _, row in rec["metrics"]:
                for k, v in row.items():
                    want.setdefault(k, []).append((step, v))
            assert set(run.data.metrics) == set(want)
            for k, points in want.items():
                got = sorted((m.step, m.value) for m in c.get_metric_history(run_id, k))
                assert got == sorted(points), (name, k)
                counted += len(points)
    assert counted >= 2 * jobs * 3 * 20  # the jobs x 3 releases x every metric
    return counted


# ------------------------------------------------ cdpbench server's checks (#24 item 6)
# Nothing here binds or points to an address other than 127.0.0.1: the exposed case runs the
# command in-process with the port check and the machine's names replaced, and prints the
# `mlflow server` command (--dry-run) instead of running it.
def _fake_machine(monkeypatch, checked: list):
    from cdpbench import server_cmd

    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).startswith("labhost"):  # the fake names resolve nowhere: no DNS query
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(server_cmd, "check_port", lambda host, port: checked.append((host, port)))
    monkeypatch.setattr(server_cmd.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(server_cmd.socket, "gethostname", lambda: "labhost")
    monkeypatch.setattr(server_cmd.socket, "getfqdn", lambda *a: "labhost.lab.example")
    monkeypatch.setattr(server_cmd, "default_route_address", lambda version=4: "10.1.2.3")
    return server_cmd


def _dry_run_command(server_cmd, capsys, argv):
    import shlex

    assert server_cmd.server_command([*argv, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    return shlex.split(out.strip()), err


def _option(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_server_port_in_use_exits_nonzero_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t0 = time.time()
        proc = subprocess.run([str(CDPBENCH), "server", "--port", str(port)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: server: port {port} on 127.0.0.1 is in use; choose another with --port\n"
    assert time.time() - t0 < 30 and not (tmp_path / "outputs").exists()  # refused before MLflow or any folder


def test_server_dry_run_on_loopback_prints_the_command(tmp_path):
    port = free_port()
    proc = subprocess.run([str(CDPBENCH), "server", "--port", str(port), "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import shlex

    cmd = shlex.split(proc.stdout.strip())
    assert cmd[1:2] == ["server"] and _option(cmd, "--host") == "127.0.0.1" and _option(cmd, "--port") == str(port)
    assert "--allowed-hosts" not in cmd  # loopback: MLflow's defaults (localhost, private addresses) hold
    assert "WARNING" not in proc.stderr
    assert f"export MLFLOW_TRACKING_URI=http://127.0.0.1:{port}" in proc.stderr
    assert not (tmp_path / "outputs").exists()  # a dry run creates nothing


def test_server_exposed_host_warns_and_allows_the_uri_it_prints(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    checked: list = []
    server_cmd = _fake_machine(monkeypatch, checked)
    cmd, err = _dry_run_command(server_cmd, capsys, ["--host", "0.0.0.0", "--port", "5999",
                                                      "--allowed-hosts", "mlflow.proxy.example"])
    assert checked == [("0.0.0.0", 5999)]
    assert ("server: WARNING: listening on 0.0.0.0:5999, reachable from other machines. MLflow's server has no "
            "authentication: anyone who can reach this port can read and write every run") in err
    assert ("jobs on other machines log to it with: export MLFLOW_TRACKING_URI=http://labhost:5999 "
            "(or http://labhost.lab.example:5999, http://10.1.2.3:5999)") in err
    assert "MLFLOW_TRACKING_URI=http://0.0.0.0" not in err
    assert _option(cmd, "--host") == "0.0.0.0"
    hosts = _option(cmd, "--allowed-hosts").split(",")
    for h in ("localhost:5999", "127.0.0.1:5999", "[::1]:5999", "labhost:5999", "labhost.lab.example:5999",
              "10.1.2.3:5999", "10.*", "192.168.*", "mlflow.proxy.example"):
        assert h in hosts, h
    assert _option(cmd, "--cors-allowed-origins").split(",") == [
        "http://labhost:5999", "http://labhost.lab.example:5999", "http://10.1.2.3:5999"]
    # a given address: it is the URI
    cmd, err = _dry_run_command(server_cmd, capsys, ["--host", "10.1.2.3", "--port", "5999"])
    assert "export MLFLOW_TRACKING_URI=http://10.1.2.3:5999 " in err and "WARNING" in err
    assert "10.1.2.3:5999" in _option(cmd, "--allowed-hosts").split(",")


def test_server_loopback_detection_and_this_machines_address():
    from cdpbench.server_cmd import default_route_address, is_loopback, machine_names

    for host in ("127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.1.2.3", "192.0.2.7"):
        assert not is_loopback(host), host
    ip = default_route_address()  # a UDP socket's connect: no packet leaves
    assert ip is None or not is_loopback(ip)
    names = machine_names("0.0.0.0")
    assert "0.0.0.0" not in names and "localhost" not in names and (ip is None or ip in names)


def test_server_allowed_hosts_let_the_printed_uri_in(monkeypatch, capsys, tmp_path):
    """The --allowed-hosts and --cors-allowed-origins given to MLflow for --host 0.0.0.0 do what
    they are for, on a real `mlflow server` bound to 127.0.0.1: requests naming this machine as
    printed pass, those naming another host are refused (403)."""
    import urllib.error

    monkeypatch.chdir(tmp_path)
    port = free_port()
    server_cmd = _fake_machine(monkeypatch, [])
    cmd, _ = _dry_run_command(server_cmd, capsys, ["--host", "0.0.0.0", "--port", str(port), "--workers", "1",
                                                    "--backend-store-uri", f"sqlite:///{tmp_path / 'db.sqlite'}"])
    cmd[cmd.index("--host") + 1] = "127.0.0.1"  # never bind beyond this machine in a test
    (tmp_path / "outputs" / "server" / "artifacts").mkdir(parents=True)
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2):
                    break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError(f"mlflow server did not start: {proc.stderr.read() if proc.poll() is not None else ''}")
                time.sleep(0.3)

        def status(host: str, origin: str | None = None) -> int:
            headers = {"Host": host, "Content-Type": "application/json", **({"Origin": origin} if origin else {})}
            req = urllib.request.Request(f"{base}/api/2.0/mlflow/experiments/search", data=b'{"max_results": 1}',
                                         headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        for host in (f"labhost:{port}", f"labhost.lab.example:{port}", f"10.1.2.3:{port}", f"127.0.0.1:{port}",
                     f"localhost:{port}"):
            assert status(host) == 200, host
        assert status(f"evil.example:{port}") == 403
        assert status(f"labhost:{port}", origin=f"http://labhost:{port}") == 200  # the UI opened at the printed URI
        assert status(f"labhost:{port}", origin="http://evil.example") == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
