import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CDPBENCH = Path(sys.executable).parent / "cdpbench"

# A small Adult scenario so end-to-end runs take seconds.
SMALL = [
    "dataset.releases=3",
    "dataset.initial=600",
    "dataset.deletions=60",
    "dataset.insertions=60",
    "dataset.updates=60",
    "progress=false",
]


@pytest.fixture
def cli(tmp_path):
    """Run the installed `cdpbench` console script in a fresh folder with its own MLflow store."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def run(*args, check=True):
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(REPO / "conf")}
        env.pop("HYDRA_FULL_ERROR", None)
        proc = subprocess.run([str(CDPBENCH), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        if check and proc.returncode != 0:
            raise AssertionError(f"cdpbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    run.uri = uri
    run.cwd = tmp_path
    return run


@pytest.fixture
def mlflow_client():
    def make(uri):
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=uri)

    return make
