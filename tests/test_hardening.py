"""Hardening: a failing job never takes a sweep down, no config can run code, every bad input is
refused before anything is created, and runs carry names a person can read.

The failing job comes from a third-party plugin installed the way any plugin is found, by its
entry point (``tests/faulty``: a data set that breaks on purpose at a chosen release).
"""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import CDPBENCH, REPO, SMALL

pytestmark = pytest.mark.slow
FAULTY = str(Path(__file__).parent / "faulty")


def runs(client):
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, max_results=1000) if exps else []


def last_line(proc) -> str:
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@pytest.fixture
def faulty(cli, monkeypatch):
    """The ``cli`` fixture with the faulty data set plugin installed."""
    monkeypatch.setenv("PYTHONPATH", FAULTY)
    return cli


# ------------------------------------------------------------------ a sweep outlives its jobs
@pytest.mark.parametrize("launcher", [["hydra/launcher=basic"], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]])
def test_one_failing_job_out_of_six(faulty, mlflow_client, launcher):
    proc = faulty("-m", "dataset=faulty", "dataset.tag=1,2,3,4,5,6", "dataset.fail_tag=3", *launcher, check=False)
    assert proc.returncode == 1, proc.stderr
    c = mlflow_client(faulty.uri)
    everything = runs(c)
    (parent,) = [r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"]
    children = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(everything) == 7 and len(children) == 6
    assert sorted(r.info.status for r in children) == ["FAILED"] + ["FINISHED"] * 5
    (bad,) = [r for r in children if r.info.status == "FAILED"]
    reason = "run failed in RuntimeError: faulty data set broke at release 2 on purpose; traceback in "
    assert bad.data.params["dataset.tag"] == "3" and bad.data.tags["cdpbench.error"].startswith(reason)
    assert bad.info.run_name == "dataset.tag=3"
    assert [m.step for m in c.get_metric_history(bad.info.run_id, "gcp_norm")] == [1]
    assert c.list_artifacts(bad.info.run_id) == []
    assert parent.info.status == "FAILED" and parent.data.tags["cdpbench.failed_jobs"] == "1"
    assert parent.data.tags["cdpbench.jobs"] == "6"
    assert f"error: 1 of 6 jobs failed; MLflow parent run {parent.info.run_id} marked FAILED" in proc.stderr
    assert "  job #2 (dataset.tag=3): " + reason in proc.stderr
    assert "Traceback" not in proc.stderr
    traceback_file = Path(bad.data.tags["cdpbench.error"].rsplit("traceback in ", 1)[1])
    assert "on purpose" in traceback_file.read_text()
    # the report leaves the failed run out and says so
    out = faulty("report", "--latest", "--metric", "gain_rho").stdout
    assert "left out 1 run that is not FINISHED (1 FAILED)" in out
    summary = pd.read_csv(faulty.cwd / "outputs" / "reports" / parent.info.run_id / "summary.csv")
    assert len(summary) == 5 and set(summary["status"]) == {"FINISHED"}


def test_a_dead_worker_leaves_no_run_running(faulty, mlflow_client):
    # os._exit in a worker: loky aborts the whole batch, so jobs not done by then are lost (Hydra's
    # joblib launcher has no retry); what must hold is that nothing stays RUNNING, the dead job is
    # FAILED with the reason, and the parent counts every job that did not finish.
    proc = faulty("-m", "dataset=faulty", "dataset.tag=1,2,3,4", "dataset.fail_tag=2", "dataset.how=exit",
                  "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", check=False)
    assert proc.returncode == 1
    everything = runs(mlflow_client(faulty.uri))
    assert all(r.info.status in ("FINISHED", "FAILED") for r in everything)
    (parent,) = [r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"]
    children = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    not_finished = sum(r.info.status != "FINISHED" for r in children) + 4 - len(children)
    assert parent.info.status == "FAILED" and parent.data.tags["cdpbench.failed_jobs"] == str(not_finished)
    assert "the launcher stopped: TerminatedWorkerError" in proc.stderr
    (dead,) = [r for r in children if r.data.params["dataset.tag"] == "2"]
    assert dead.info.status == "FAILED" and dead.data.tags["cdpbench.error"].startswith("the job did not end")


def test_a_killed_sweep_leaves_no_run_running(faulty, mlflow_client):
    env = {**os.environ, "MLFLOW_TRACKING_URI": faulty.uri, "CDPBENCH_CONF": str(REPO / "conf"), "PYTHONPATH": FAULTY}
    args = ["-m", "dataset=faulty", "dataset.tag=1,2,3,4", "dataset.sleep=2", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2"]
    proc = subprocess.Popen([str(CDPBENCH), *args], cwd=faulty.cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not _running_jobs(faulty.cwd):  # jobs leave run records, MLflow gets them at the end
        time.sleep(0.2)
    assert _running_jobs(faulty.cwd)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "error: interrupted; runs still open were marked FAILED" in err
    everything = runs(mlflow_client(faulty.uri))
    assert everything and all(r.info.status in ("FINISHED", "FAILED") for r in everything)
    killed = [r for r in everything if r.data.tags.get("cdpbench.error") == "the job did not end: the sweep was interrupted"]
    assert killed


def _running_jobs(cwd: Path) -> list[Path]:
    return [f for f in cwd.glob("outputs/multirun/*/*/run.json") if '"status": "RUNNING"' in f.read_text()]


def test_a_run_that_fails_midway_is_failed_with_its_reason(faulty, mlflow_client):
    proc = faulty("dataset=faulty", "dataset.fail_tag=0", "dataset.fail_at=3", "progress=false", check=False)
    assert proc.returncode == 2
    (run,) = runs(mlflow_client(faulty.uri))
    assert last_line(proc).startswith("error: run failed in RuntimeError: faulty data set broke at release 3 on purpose")
    assert last_line(proc).endswith(f"(MLflow run {run.info.run_id} marked FAILED)")
    assert run.info.status == "FAILED" and "on purpose" in run.data.tags["cdpbench.error"]


# ------------------------------------------------------------------ configs cannot run code
EVIL_PRESET = """# @package _global_
hydra:
  callbacks:
    x:
      _target_: builtins.open
      file: pwned.txt
      mode: w
"""


@pytest.mark.parametrize(
    "args, message",
    [
        (["+hydra.callbacks.x._target_=builtins.open", "+hydra.callbacks.x.file=pwned.txt", "+hydra.callbacks.x.mode=w"],
         "error: +hydra.callbacks.x._target_=builtins.open: _target_ cannot be set from the command line; configs "
         "name registered plugins (cdpbench plugins) and their parameters only"),
        (["+hydra.callbacks={x: {_target_: builtins.open, file: pwned.txt, mode: w}}"],
         "error: +hydra.callbacks={x: {_target_: builtins.open, file: pwned.txt, mode: w}}: hydra.callbacks cannot be "
         "set from the command line; cdpbench installs its own callbacks and logging in code"),
        (["hydra.launcher._target_=builtins.exec"],
         "error: hydra.launcher._target_=builtins.exec: _target_ cannot be set from the command line; configs name "
         "registered plugins (cdpbench plugins) and their parameters only"),
        (["+hydra.job.env_set.LD_PRELOAD=/tmp/x.so"],
         "error: +hydra.job.env_set.LD_PRELOAD=/tmp/x.so: hydra.job.env_set cannot be set from the command line; "
         "cdpbench installs its own callbacks and logging in code"),
        (["hydra.job_logging.handlers.console.class=builtins.exec"],
         "error: hydra.job_logging.handlers.console.class=builtins.exec: hydra.job_logging cannot be set from the "
         "command line; cdpbench installs its own callbacks and logging in code"),
        (["hydra.searchpath=[file:///tmp]"],
         "error: hydra.searchpath=[file:///tmp]: hydra.searchpath cannot be set from the command line; cdpbench "
         "installs its own callbacks and logging in code"),
        (["+extra_attackers.a._target_=os.system"],
         "error: +extra_attackers.a._target_=os.system: _target_ cannot be set from the command line; configs name "
         "registered plugins (cdpbench plugins) and their parameters only"),
        (["hydra/launcher=ray", "+hydra.launcher.ray.init.runtime_env={worker_process_setup_hook: os.getcwd}"],
         "error: hydra.launcher.ray.init.runtime_env cannot be set: it runs code or commands from the config"),
        (["hydra/launcher=submitit_slurm", "hydra.launcher.setup=[touch pwned.txt]"],
         "error: hydra.launcher.setup cannot be set: it runs code or commands from the config"),
        (["hydra/launcher=ray_aws"], "error: hydra/launcher: ray_aws creates cloud machines that run setup commands"),
        (["--config-dir", "evil"], "error: --config-dir is not supported: configs come from "),
        (["--experimental-rerun", "evil/config.pickle"], "error: --experimental-rerun is not supported: "),
    ],
)
def test_no_override_can_run_code(cli, mlflow_client, args, message):
    (cli.cwd / "evil").mkdir()
    proc = cli("dataset.releases=1", *args, check=False)
    assert proc.returncode == 2
    assert last_line(proc).startswith(message), proc.stderr
    assert not (cli.cwd / "pwned.txt").exists() and not (cli.cwd / "outputs").exists()
    assert not (cli.cwd / "mlflow.db").exists()


def test_a_preset_from_outside_experiments_is_refused(cli):
    evil = cli.cwd / "any" / "dir"
    evil.mkdir(parents=True)
    (evil / "evil.yaml").write_text(EVIL_PRESET)
    proc = cli("+experiment=../../../../../../../../.." + str(evil / "evil"), check=False)
    assert proc.returncode == 2
    assert last_line(proc).startswith("error: +experiment=../../") and "is not a preset; experiment has: quickstart, " \
        "bayframe/fig3" in last_line(proc)
    assert not (cli.cwd / "pwned.txt").exists() and not (cli.cwd / "outputs").exists()


@pytest.fixture
def own_conf(cli, monkeypatch, tmp_path):
    """A config folder of our own (CDPBENCH_CONF) whose experiment folder holds evil presets."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    shutil.copy(REPO / "conf" / "config.yaml", conf / "config.yaml")
    (conf / "experiment" / "evil.yaml").write_text(EVIL_PRESET)
    (conf / "experiment" / "evil_sweep.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      +hydra.callbacks.x._target_: builtins.print\n")
    (conf / "experiment" / "evil_logging.yaml").write_text(
        "# @package _global_\nhydra:\n  job_logging:\n    handlers:\n      x:\n        (): builtins.open\n")
    monkeypatch.setenv("CDPBENCH_CONF", str(conf))

    def run(*args):
        env = {**os.environ, "MLFLOW_TRACKING_URI": cli.uri}
        return subprocess.run([str(CDPBENCH), *args], cwd=cli.cwd, env=env, capture_output=True, text=True, timeout=300)

    return run


@pytest.mark.parametrize(
    "args, message",
    [
        (["+experiment=evil"], "error: hydra.callbacks cannot be set by a config or preset (found {'x': {'_target_': "
         "'builtins.open', 'file': 'pwned.txt', 'mode': 'w'}})"),
        (["-m", "+experiment=evil_sweep"], "error: +hydra.callbacks.x._target_=builtins.print: _target_ cannot be set "
         "from a preset's sweep; configs name registered plugins (cdpbench plugins) and their parameters only"),
        (["+experiment=evil_logging"], "error: hydra.job_logging.handlers.x cannot be set: cdpbench configures "
         "logging; a config may only choose one of Hydra's presets by name (hydra/job_logging=default|disabled|none|"
         "stdout)"),
    ],
)
def test_no_preset_can_run_code(own_conf, cli, args, message):
    proc = own_conf("dataset.releases=1", *args)
    assert proc.returncode == 2
    assert last_line(proc) == message, proc.stderr
    assert not (cli.cwd / "pwned.txt").exists() and not (cli.cwd / "outputs").exists()


# ------------------------------------------------------------------ validation before anything
@pytest.mark.parametrize(
    "args, message",
    [
        (["seed=-1"], "error: seed must be an integer >= 0 (got -1)"),
        (["seed=abc"], "error: seed must be an integer >= 0 (got 'abc')"),
        (["seed=1.5"], "error: seed must be an integer >= 0 (got 1.5)"),
        (["-m", "seed=0,-1,1,2"], "error: seed must be an integer >= 0 (got -1) [job #1 of 4: seed=-1 dataset.releases=3 "
         "dataset.initial=600 dataset.deletions=60 dataset.insertions=60 dataset.updates=60 progress=False]"),
        (["+privacy_modle.k=50"], "error: privacy_modle: unknown key; allowed top-level keys: dataset, knowledge, "
         "estimator, privacy_model, anonymizer, attacker, metrics, extra_attackers, seed, progress, tracking"),
        (["privacy_modle.k=50"], "error: privacy_modle: unknown key; allowed top-level keys: dataset, knowledge, "
         "estimator, privacy_model, anonymizer, attacker, metrics, extra_attackers, seed, progress, tracking"),
        (["privacy_model.foo=1"], "error: privacy_model.foo is not a parameter of privacy_model 'k_anonymity'; "
         "allowed: ['k']"),
        (["+privacy_model.foo=1"], "error: privacy_model.foo is not a parameter of privacy_model 'k_anonymity'; "
         "allowed: ['k']"),
        (["metrics.query_error.querys=5"], "error: metrics.query_error.querys is not a parameter of metric "
         "'query_error'; allowed: ['queries', 'selectivity', 'form', 'ranges']"),
        (["tracking.experimnt=x"], "error: tracking.experimnt: unknown key; allowed: uri, experiment, run_name, enabled, plot"),
        (["+seed=3"], "error: +seed=3: seed is already in the config; write it without '+' (seed=3)"),
        (["~seed"], "error: seed is missing from the config"),
        (["progress=maybe"], "error: progress must be true or false (got 'maybe')"),
        (["hydra/launcher=slurm"], "error: hydra/launcher=slurm: unknown option 'slurm'; hydra/launcher has: basic, "
         "joblib, ray, submitit_local, submitit_slurm"),
        (["seed=[1"], "error: seed=[1: cannot parse this override: no viable alternative at input '[1'"),
        (["privacy_model.k=2,5"], "error: privacy_model.k=2,5: several values make a sweep; run it with -m (a list "
         "value is written key='[a,b]')"),
    ],
)
def test_bad_configs_are_refused_before_anything_is_created(cli, args, message):
    multirun = args[:1] == ["-m"]
    proc = cli(*args, *SMALL, check=False) if multirun else cli(*SMALL, *args, check=False)
    assert proc.returncode == 2
    assert last_line(proc) == message, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (cli.cwd / "outputs").exists() and not (cli.cwd / "mlflow.db").exists()


def _csv_scenario(folder: Path, bad: dict | None = None, releases: int = 3) -> list[str]:
    folder.mkdir()
    (folder / "schema.yaml").write_text(
        "respondent: id\nqi:\n  - {name: age, type: numeric, low: 0, high: 100}\n"
        "  - {name: sex, type: categorical, values: [F, M]}\nsensitive: {name: disease, values: [flu, hiv, cold]}\n")
    rng = np.random.default_rng(0)
    for t in range(1, releases + 1):
        frame = pd.DataFrame({"id": np.arange(40), "age": rng.integers(0, 101, 40), "sex": rng.choice(["F", "M"], 40),
                              "disease": rng.choice(["flu", "hiv", "cold"], 40)}).astype(object)
        text = frame.to_csv(index=False)
        if bad and t == bad["release"]:
            text = bad["edit"](frame)
        (folder / f"release_{t}.csv").write_text(text)
    return ["dataset=csv", f"dataset.files={folder.name}/release_*.csv", f"dataset.schema={folder.name}/schema.yaml",
            "privacy_model.k=3", "progress=false"]


def _edit(column, row, value):
    def edit(frame):
        frame.loc[row, column] = value
        return frame.to_csv(index=False)

    return edit


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"release": 3, "edit": _edit("disease", 7, "plague")},
         "error: release 3: column 'disease' has unknown value(s) ['plague']; allowed: ['flu', 'hiv', 'cold'] "
         "[file 'data/release_3.csv']"),
        ({"release": 3, "edit": _edit("age", 4, "NaN")},
         "error: release 3: QI column 'age' has non-finite value(s) ['NaN']; a numeric QI needs finite numbers in "
         "[0, 100] [file 'data/release_3.csv']"),
        ({"release": 2, "edit": _edit("age", 4, "inf")},
         "error: release 2: QI column 'age' has non-finite value(s) [inf]; a numeric QI needs finite numbers in "
         "[0, 100] [file 'data/release_2.csv']"),
        ({"release": 2, "edit": _edit("id", 3, "9999.7")},
         "error: release 2: column 'id' (respondent id) must hold integers; got [9999.7] [file 'data/release_2.csv']"),
        ({"release": 2, "edit": _edit("id", 5, "4.5")},
         "error: release 2: column 'id' (respondent id) must hold integers; got [4.5] [file 'data/release_2.csv']"),
        ({"release": 3, "edit": lambda frame: "id,age,sex,disease\n"},
         "error: release 3: no records; a release needs at least one record [file 'data/release_3.csv']"),
    ],
)
def test_every_csv_release_is_checked_before_the_run(cli, bad, message):
    proc = cli(*_csv_scenario(cli.cwd / "data", bad), check=False)
    assert proc.returncode == 2
    assert last_line(proc) == message, proc.stderr
    assert not (cli.cwd / "outputs").exists() and not (cli.cwd / "mlflow.db").exists()


def test_a_sweep_over_csv_files_checks_every_job_first(cli):
    good = _csv_scenario(cli.cwd / "good")
    bad = _csv_scenario(cli.cwd / "bad", {"release": 2, "edit": _edit("sex", 0, "X")})
    files = f"dataset.files={good[1].split('=')[1]},{bad[1].split('=')[1]}"
    proc = cli("-m", "dataset=csv", files, "dataset.schema=good/schema.yaml", "progress=false", check=False)
    assert proc.returncode == 2
    assert last_line(proc).startswith("error: release 2: column 'sex' has unknown value(s) ['X']; allowed: ['F', 'M'] "
                                      "[file 'bad/release_2.csv'] [job #1 of 2: ")
    assert not (cli.cwd / "outputs").exists() and not (cli.cwd / "mlflow.db").exists()


# ------------------------------------------------------------------ names and tags a person reads
def test_runs_are_named_by_preset_and_swept_parameters(cli, mlflow_client):
    cli("-m", "+experiment=quickstart", *SMALL, "dataset.reinsertions=20", "+experiment/quickstart/defense=k_anonymity",
        "privacy_model.k=2,5", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    c = mlflow_client(cli.uri)
    everything = runs(c)
    (parent,) = [r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"]
    # named by the launch's minute (taken a moment before the parent's start time)
    minutes = {time.strftime("%m-%d %H:%M", time.localtime(parent.info.start_time / 1000 - s)) for s in (0, 5)}
    assert parent.info.run_name in {f"quickstart {m}" for m in minutes} and parent.info.status == "FINISHED"
    names = sorted(r.info.run_name for r in everything if r.data.tags.get("cdpbench.kind") == "job")
    assert names == ["quickstart: privacy_model.k=2", "quickstart: privacy_model.k=5"]
    (exp,) = [e for e in c.search_experiments() if e.name == "quickstart"]
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
