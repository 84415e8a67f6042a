"""Output that says where things went (#27 item 5, and item 1's parent names).

* A sweep's parent run is named ``<preset or sweep> MM-DD HH:MM`` (the launch's local time: short
  enough for MLflow's runs table), with the sweep folder in its tag ``cdpbench.sweep_dir``.
* A skipped job names the run it reuses: its id, name and start time, under the command that
  made it (a sweep's, with its parent run's name, or a single run's).
* A launch that skips every job says so in one line and adds no run to MLflow.
* Jobs are numbered one way everywhere: ``job #N`` is Hydra's ``#N :`` line, the job's folder
  ``N`` in the sweep folder and its MLflow tag ``cdpbench.job``.

The sweeps are real, small ones (the faulty data set plugin of ``tests/faulty``: two releases
of 60 records) into a store of their own.
"""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO

FAULTY = str(Path(__file__).parent / "faulty")
#: a preset of its own (in a copy of the config folder): two releases of the faulty data set
TINY = """# @package _global_
defaults:
  - override /dataset: faulty
dataset:
  releases: 2
progress: false
tracking:
  experiment: tiny
"""


def day_minute(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


# ------------------------------------------------------------------------------ names and numbers
def test_a_sweep_is_named_by_its_preset_and_launch_minute():
    from cdpbench.launch import job_label, sweep_name

    start = time.mktime((2026, 11, 26, 5, 46, 59, 0, 0, -1))
    assert sweep_name("quickstart", start) == "quickstart 11-26 05:46"
    assert sweep_name(None, start) == "sweep 11-26 05:46"
    assert sweep_name("js_reduce/fig4", start + 2) == "js_reduce/fig4 11-26 05:47"
    assert (job_label(0), job_label(11), job_label(None)) == ("job #0", "job #11", "job")


def test_skipped_lines_group_the_reused_runs_by_the_command_that_made_them(tmp_path):
    from cdpbench.cli import _skipped_lines
    from cdpbench.job import reused_tags
    from cdpbench.record import SKIPPED, RunRecord

    start = int(time.mktime((2026, 11, 25, 17, 3, 10, 0, 0, -1)) * 1000)
    made = {  # job -> what the recorder said of the run it reuses (job 3: a store that said nothing)
        0: {"run": "a" * 32, "name": "k=2", "start": start, "command": "cdpbench -m k=2,5", "sweep": "sweep 11-25 17:03"},
        1: {"run": "b" * 32, "name": "k=5 seed=1", "start": start + 60_000, "command": "cdpbench k=5 seed=1"},
        2: {"run": "c" * 32, "name": "k=7", "start": start, "command": "cdpbench -m k=2,5", "sweep": "sweep 11-25 17:03"},
        3: {"run": "d" * 32},
    }
    for job, entry in made.items():
        rec = RunRecord(f"job {job}", reused_tags(entry), job=job, launch="L")
        rec.skipped_run = entry["run"]
        rec.end(SKIPPED)
        rec.write(tmp_path / str(job))
    skipped = [{"job": j, "name": f"job {j}", "run_id": e["run"], "status": SKIPPED} for j, e in made.items()]
    assert _skipped_lines(skipped[::-1], tmp_path, "L") == [
        "sweep: 4 skipped, already FINISHED in the experiment (--rerun runs them again):",
        '  by `cdpbench -m k=2,5` (sweep "sweep 11-25 17:03"):',
        f'    job #0 (job 0): reuses MLflow run {"a" * 32} "k=2" of 2026-11-25 17:03',
        f'    job #2 (job 2): reuses MLflow run {"c" * 32} "k=7" of 2026-11-25 17:03',
        "  by `cdpbench k=5 seed=1`:",
        f'    job #1 (job 1): reuses MLflow run {"b" * 32} "k=5 seed=1" of 2026-11-25 17:04',
        "  by a command the store does not record:",
        f"    job #3 (job 3): reuses MLflow run {'d' * 32}",
    ]


# ------------------------------------------------------------------------------------- sweeps
@pytest.fixture
def lab(tmp_path):
    """``cdpbench`` in a fresh folder with its own store, the faulty data set plugin installed and
    a copy of the config folder holding the preset ``tiny``."""
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(REPO / "conf" / "config.yaml", conf / "config.yaml")
    (conf / "experiment").mkdir()
    (conf / "experiment" / "tiny.yaml").write_text(TINY)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = os.pathsep.join(p for p in (FAULTY, os.environ.get("PYTHONPATH")) if p)

    def run(*args, check=True):
        env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(conf), "PYTHONPATH": path}
        env.pop("HYDRA_FULL_ERROR", None)
        proc = subprocess.run([str(CDPBENCH), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        if check and proc.returncode != 0:
            raise AssertionError(f"cdpbench {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    run.uri, run.cwd = uri, tmp_path
    return run


@pytest.mark.slow
def test_relaunches_name_each_reused_run_and_a_launch_that_skips_everything_adds_no_run(lab, mlflow_client):
    single = lab("+experiment=tiny", "dataset.tag=2")
    c = mlflow_client(lab.uri)
    exp = c.get_experiment_by_name("tiny").experiment_id
    browse = re.search(r"^browse: .*#/experiments/\d+/runs", single.stderr, re.M).group(0) + ")"  # the runs list
    (by_hand,) = c.search_runs([exp])
    assert by_hand.info.run_name == "tiny: dataset.tag=2"

    first = lab("-m", "+experiment=tiny", "dataset.tag=1,2")  # job #1's config has a FINISHED run: the single run's
    (parent,) = c.search_runs([exp], "tags.`cdpbench.kind` = 'sweep'")
    (ran,) = c.search_runs([exp], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert ran.info.run_name == "tiny: dataset.tag=1" and ran.data.tags["cdpbench.job"] == "0"
    # named by the launch's minute (taken a moment before the parent's start time)
    minutes = {time.strftime("%m-%d %H:%M", time.localtime(parent.info.start_time / 1000 - s)) for s in (0, 5)}
    assert parent.info.run_name in {f"tiny {m}" for m in minutes}
    assert parent.data.tags["cdpbench.preset"] == "tiny"
    (folder,) = (lab.cwd / "outputs" / "multirun").iterdir()
    assert parent.data.tags["cdpbench.sweep_dir"] == str(folder)  # the full folder, which the name leaves out
    assert parent.data.tags["cdpbench.skipped_runs.0"] == by_hand.info.run_id
    assert first.stderr.splitlines() == [
        "sweep: 1 skipped, already FINISHED in the experiment (--rerun runs them again):",
        "  by `cdpbench +experiment=tiny dataset.tag=2`:",
        f'    job #1 (tiny: dataset.tag=2): reuses MLflow run {by_hand.info.run_id} "tiny: dataset.tag=2" of '
        f"{day_minute(by_hand.info.start_time)}",
        f"sweep: 2 jobs FINISHED, 1 run (MLflow parent run {parent.info.run_id})",
        browse,
    ]

    again = lab("-m", "+experiment=tiny", "dataset.tag=1,2")
    assert again.stderr.splitlines() == [
        "sweep: 2 skipped, already FINISHED in the experiment (--rerun runs them again):",
        f'  by `cdpbench -m +experiment=tiny dataset.tag=1,2` (sweep "{parent.info.run_name}"):',
        f'    job #0 (tiny: dataset.tag=1): reuses MLflow run {ran.info.run_id} "tiny: dataset.tag=1" of '
        f"{day_minute(ran.info.start_time)}",
        "  by `cdpbench +experiment=tiny dataset.tag=2`:",
        f'    job #1 (tiny: dataset.tag=2): reuses MLflow run {by_hand.info.run_id} "tiny: dataset.tag=2" of '
        f"{day_minute(by_hand.info.start_time)}",
        "sweep: nothing to run, all 2 jobs FINISHED before; no run added to MLflow",
        browse,
    ]
    # no empty parent: the store holds the single run, the first sweep's parent and its one job run
    assert sorted(r.info.run_id for r in c.search_runs([exp])) == sorted(
        [by_hand.info.run_id, parent.info.run_id, ran.info.run_id])
    assert "job #1 (tiny: dataset.tag=2): skipped, reuses MLflow run" in again.stdout  # the job's own log line


@pytest.mark.slow
def test_a_job_has_one_number_in_hydras_lines_the_labs_lines_its_folder_and_mlflow(lab, mlflow_client):
    proc = lab("-m", "dataset=faulty", "dataset.releases=2", "dataset.tag=1,2,3", "dataset.fail_tag=2",
               "progress=false", check=False)
    assert proc.returncode == 1
    hydra = dict(re.findall(r"\t#(\d+) : .*dataset\.tag=(\d)", proc.stdout))  # Hydra's launcher: #N : overrides
    assert {tag: num for num, tag in hydra.items()} == {"1": "0", "2": "1", "3": "2"}
    (folder,) = (lab.cwd / "outputs" / "multirun").iterdir()
    reason = "run failed in RuntimeError: faulty data set broke at release 2 on purpose; traceback in "
    assert proc.stderr.splitlines()[1:] == [f"  job #1 (dataset.tag=2): {reason}{folder / '1' / 'error.log'}"]
    assert re.search(rf"job #0 \(dataset.tag=1\): 2 releases, recorded in {re.escape(str(folder / '0'))}$", proc.stdout, re.M)
    c = mlflow_client(lab.uri)
    (bad,) = c.search_runs([c.get_experiment_by_name("cdpbench").experiment_id],
                          "tags.`cdpbench.kind` = 'job' and attributes.status = 'FAILED'")
    assert bad.data.tags["cdpbench.job"] == "1" and bad.data.params["dataset.tag"] == "2"
