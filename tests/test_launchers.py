"""Sweeps beyond joblib: the same 6-job sweep through Hydra's Ray launcher (a local Ray instance)
and submitit's local executor ends with 6 FINISHED children under one parent run, with metrics
identical to the joblib launcher's for the same configs and seeds, and every launcher's job
numbers (its ``#N : overrides`` lines) are the runs' (``cdpbench.job``) and their folders'."""

import re
from pathlib import Path

import pytest

from conftest import SMALL

pytestmark = pytest.mark.slow
GRID = ["-m", *SMALL, "privacy_model=l_diversity", "privacy_model.k=2,3,4", "seed=0,1"]
LAUNCHERS = {
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "ray": ["hydra/launcher=ray"],
    "submitit": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
}


def sweep_metrics(c, experiment: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """config hash -> metric -> [(release, value)] of the experiment's only sweep; asserts its shape."""
    exp = c.get_experiment_by_name(experiment)
    everything = c.search_runs([exp.experiment_id], max_results=100)
    (parent,) = [r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"]
    kids = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert parent.info.status == "FINISHED" and len(everything) == 7
    assert len(kids) == 6 and {r.info.status for r in kids} == {"FINISHED"}
    out = {}
    for r in kids:
        keys = [k for k in r.data.metrics if not k.startswith("time_")]  # wall-clock times differ
        out[r.data.tags["cdpbench.config_hash"]] = {
            k: [(m.step, m.value) for m in sorted(c.get_metric_history(r.info.run_id, k), key=lambda m: m.step)] for k in keys
        }
    assert len(out) == 6
    return out


def job_numbers(c, experiment: str) -> dict[tuple[str, str], str]:
    """(privacy_model.k, seed) -> the job number of that run (tag ``cdpbench.job``), checked to be
    its folder's name in the sweep folder."""
    exp = c.get_experiment_by_name(experiment)
    out = {}
    for r in c.search_runs([exp.experiment_id], "tags.`cdpbench.kind` = 'job'", max_results=100):
        assert Path(r.data.tags["cdpbench.run_dir"]).name == r.data.tags["cdpbench.job"]
        out[(r.data.params["privacy_model.k"], r.data.params["seed"])] = r.data.tags["cdpbench.job"]
    return out


def test_ray_and_submitit_sweeps_match_joblib(cli, mlflow_client):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray extra is not installed")
    c = mlflow_client(cli.uri)
    results = {}
    for name, launcher in LAUNCHERS.items():
        proc = cli(*GRID, *launcher, f"tracking.experiment={name}")
        assert "sweep: 6 jobs FINISHED, 6 run" in proc.stderr, proc.stderr
        results[name] = sweep_metrics(c, name)
        # one job numbering: the launcher's own "#N : overrides" lines, the runs' and their folders'
        logged = {(k, seed): num for num, k, seed in
                  re.findall(r"\t#(\d+) : .*privacy_model\.k=(\d) seed=(\d)", proc.stdout + proc.stderr)}
        assert len(logged) == 6 and logged == job_numbers(c, name), name
    reference = results["joblib"]
    assert sum(len(v) for m in reference.values() for v in m.values()) > 6 * 3 * 10  # many values compared
    for name in ("ray", "submitit"):
        assert results[name] == reference, name
