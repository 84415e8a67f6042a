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

import pytest

from conftest import CDPBENCH, REPO, SMALL

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = free_port()
    proc = subprocess.Popen([str(CDPBENCH), "server", "--port", str(port)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.read() == b"OK":
                    break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"the server did not start: {proc.stderr.read()}") from None
            time.sleep(0.3)
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
    counted = 0
    for name in ("a", "b"):
        for f in sorted((tmp_path / "outputs" / "multirun" / name).glob("*/run.json")):
            rec = json.loads(f.read_text())
            run_id = (f.parent / "mlflow_run_id").read_text()
            run = c.get_run(run_id)
            assert run.info.status == "FINISHED"
            want = {}
            for step, _, row in rec["metrics"]:
                for k, v in row.items():
                    want.setdefault(k, []).append((step, v))
            assert set(run.data.metrics) == set(want)
            for k, points in want.items():
                got = sorted((m.step, m.value) for m in c.get_metric_history(run_id, k))
                assert got == sorted(points), (name, k)
                counted += len(points)
    assert counted >= 8 * 3 * 20  # 8 jobs x 3 releases x every metric
    print(f"{counted} metric values checked")
