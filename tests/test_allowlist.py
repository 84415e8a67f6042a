"""The allowlist (issue "Hardening, second pass", items 1, 2 and 7): a config holds only the lab's
keys, registered plugins' parameters and the Hydra settings of ``launch.HYDRA_KEYS`` / the chosen
launcher's options; group options are names; interpolations use allowed resolvers only; every
refusal is one line, before any folder, store or MLflow run exists; large grids need a flag.

Command-line cases run the installed ``cdpbench`` in a fresh folder and store (the ``cli``
fixture); the rest call :func:`cdpbench.launch.prepare` directly (nothing is created either).
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO, SMALL
from test_hardening import _csv_scenario, last_line

from cdpbench import launch
from cdpbench.errors import ConfigError

pytestmark = pytest.mark.slow

ALLOWED = ("hydra.run.dir, hydra.sweep.dir, hydra.sweep.subdir, hydra.job.chdir=false, hydra.mode, hydra.verbose, "
           "hydra.sweeper.params, hydra/launcher=basic|joblib|submitit_local|submitit_slurm|ray and its options, "
           "hydra/job_logging=default|disabled|none|stdout, hydra/hydra_logging=default|disabled|none|hydra_debug")
RAY_OPTIONS = ("hydra.launcher.ray.init.address, hydra.launcher.ray.init.num_cpus, hydra.launcher.ray.init.num_gpus, "
               "hydra.launcher.ray.init.object_store_memory, hydra.launcher.ray.remote.num_cpus, "
               "hydra.launcher.ray.remote.num_gpus, hydra.launcher.ray.remote.max_calls, hydra.launcher.ray.remote.memory")
SLURM_TEXT = ("text of letters, digits and _.,:=@%+/- only (no spaces, newlines or shell metacharacters: the value is "
              "written into SLURM's sbatch script)")
ENV_REFUSED = ("reads an environment variable: refused, because every value of a config is recorded in MLflow "
               "(parameters, tags, config.yaml) and a secret must not be; write the value itself")


def nothing_created(folder: Path) -> bool:
    return not (folder / "outputs").exists() and not (folder / "mlflow.db").exists() and not (folder / "PWNED").exists()


def refused(proc, message: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert last_line(proc) == message, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ------------------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    "args, message",
    [
        (["hydra.job.chdir=true"],
         "error: hydra.job.chdir must be false: cdpbench runs every job in the launch folder, and the data set's file "
         "paths (dataset.files, dataset.schema) are relative to it (got True)"),
        (["-m", "seed=1,2", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0"],
         "error: hydra.launcher.n_jobs must be an integer >= 1, or -1 (one job per CPU) (got 0)"),
        (["hydra/launcher=../../../../../../tmp/x"],
         "error: hydra/launcher=../../../../../../tmp/x: '../../../../../../tmp/x' is a path, not an option: a group "
         "option is the name of an installed config; hydra/launcher has: basic, joblib, ray, submitit_local, "
         "submitit_slurm"),
        (["hydra/job_logging=../../../../some/where/evil"],
         "error: hydra/job_logging=../../../../some/where/evil: '../../../../some/where/evil' is a path, not an option: "
         "a group option is the name of an installed config; Hydra's logging presets (cdpbench configures logging; a "
         "config may only choose a preset by name): default, disabled, none, stdout"),
        (["dataset=../../../evil"],
         "error: unknown dataset '../../../evil'; installed: adult, adult_cumulative, adult_increments, "
         "adult_sequential, bkseq, bkseq_sequential, churn, csv"),
        (["+experiment/js_reduce/method=../../../../evil"],
         "error: +experiment/js_reduce/method=../../../../evil: '../../../../evil' is not a preset; "
         "experiment/js_reduce/method has: bt_privacy, js_reduce, l_diversity, t_closeness (cdpbench experiments lists "
         "them)"),
        (["hydra/launcher=ray_aws"],
         "error: hydra/launcher: ray_aws creates cloud machines that run setup commands from its config; start a Ray "
         "cluster yourself and use hydra/launcher=ray with +hydra.launcher.ray.init.address=HOST:PORT"),
        (["hydra/env=default"], f"error: hydra/env=default: hydra/env cannot be chosen (allowed: {ALLOWED})"),
        (["-m", "seed=1,2", "hydra/launcher=ray", "+hydra.launcher.ray.init._tracing_startup_hook=tempfile:mkdtemp"],
         "error: hydra.launcher.ray.init._tracing_startup_hook cannot be set: hydra/launcher=ray allows only these "
         f"options: {RAY_OPTIONS}"),
        (["-m", "seed=1,2", "hydra/launcher=ray",
          "++hydra.launcher.ray.init='${oc.create:{runtime_env: {worker_process_setup_hook: tempfile.mkdtemp}}}'"],
         "error: hydra.launcher.ray.init: ${oc.create:{runtime_env: {worker_process_setup_hook: tempfile.mkdtemp}}} "
         "uses the resolver 'oc.create', which a config may not use; allowed interpolations: ${path.to.key} (another "
         "config value), ${now:...}, ${hydra:...}"),
        (["-m", "seed=1,2", "hydra/launcher=submitit_slurm", "hydra.launcher.comment='x\ntouch PWNED #'"],
         "error: hydra.launcher.comment must be null or text of letters, digits, spaces and _.,:=@%+/- only (no "
         "newlines or shell metacharacters: the value is written into SLURM's sbatch script) (got x\\ntouch PWNED #)"),
        (["-m", "seed=1,2", "hydra/launcher=submitit_slurm", "hydra.launcher.partition='cpu $(touch PWNED)'"],
         f"error: hydra.launcher.partition must be null or {SLURM_TEXT} (got cpu $(touch PWNED))"),
        (["-m", "seed=1,2", "hydra/launcher=submitit_slurm", "+hydra.launcher.additional_parameters.wrap=ls"],
         "error: hydra.launcher.additional_parameters cannot be set: it runs code or commands from the config; prepare "
         "the workers' environment outside cdpbench"),
        (["tracking.run_name=${oc.env:HOME}"], f"error: tracking.run_name: ${{oc.env:HOME}} {ENV_REFUSED}"),
        (["tracking.run_name='a ${oc.decode:\"[1]\"}'"],
         "error: tracking.run_name: a ${oc.decode:\"[1]\"} uses the resolver 'oc.decode', which a config may not use; "
         "allowed interpolations: ${path.to.key} (another config value), ${now:...}, ${hydra:...}"),
        (["+hydra.job.name=evil"], f"error: +hydra.job.name=evil: hydra.job.name cannot be set from the command line "
         f"(allowed: {ALLOWED})"),
        (["hydra.output_subdir=null"], f"error: hydra.output_subdir=null: hydra.output_subdir cannot be set from the "
         f"command line (allowed: {ALLOWED})"),
        (["hydra.job_logging.handlers.file.filename=/tmp/x.pth"],
         "error: hydra.job_logging.handlers.file.filename=/tmp/x.pth: hydra.job_logging cannot be set from the command "
         f"line; cdpbench installs its own callbacks and logging in code (allowed: {ALLOWED})"),
        (["hydra/launcher@hydra.callbacks=basic"],
         "error: hydra/launcher@hydra.callbacks=basic: an @package in an override is not supported; write group=option "
         "or key=value"),
    ],
)
def test_refused_on_the_command_line(cli, args, message):
    proc = cli("dataset.releases=1", *args, check=False)
    refused(proc, message)
    assert nothing_created(cli.cwd)


def test_an_unwritable_run_folder_is_refused(cli):
    proc = cli("dataset.releases=1", "hydra.run.dir=/proc/x", check=False)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    line = last_line(proc)
    assert line.startswith("error: hydra.run.dir=/proc/x: cannot create the output folder in /proc ("), line
    assert line.endswith("); choose a folder you can write to"), line
    assert nothing_created(cli.cwd)


def test_an_output_folder_under_a_file_is_refused(cli):
    (cli.cwd / "afile").write_text("x")
    proc = cli("dataset.releases=1", "-m", "seed=1,2", "hydra.sweep.dir=afile/sweep", check=False)
    refused(proc, "error: hydra.sweep.dir=afile/sweep: afile is not a folder; choose an output folder you can write to")
    assert nothing_created(cli.cwd)


def test_a_grid_above_the_limit_needs_the_flag(cli):
    proc = cli("-m", "privacy_model.k=range(2,5000)", "dataset.releases=1", check=False)
    refused(proc, "error: the sweep has 4998 jobs, more than 1000: checking it takes about 8 min and running it much "
            "longer; add --large-grid to run it")
    assert nothing_created(cli.cwd)


# ------------------------------------------------------------------------------------ presets
@pytest.fixture
def own_conf(cli, tmp_path):
    """A config folder of our own (CDPBENCH_CONF) for presets written by the test."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    shutil.copy(REPO / "conf" / "config.yaml", conf / "config.yaml")

    def run(preset: str, *args):
        (conf / "experiment" / "p.yaml").write_text("# @package _global_\n" + preset)
        env = {**os.environ, "MLFLOW_TRACKING_URI": cli.uri, "CDPBENCH_CONF": str(conf), "SECRET": "s3cret"}
        env.pop("HYDRA_FULL_ERROR", None)
        return subprocess.run([str(CDPBENCH), "dataset.releases=1", "+experiment=p", *args], cwd=cli.cwd, env=env,
                              capture_output=True, text=True, timeout=300)

    run.conf = conf
    return run


@pytest.mark.parametrize(
    "preset, message",
    [
        ("seed: !!python/object/apply:os.system ['touch PWNED']\n",
         "error: {conf}/experiment/p.yaml, line 2: the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is "
         "refused: configs are plain YAML (no Python objects or other tags)"),
        ("hydra:\n  job_logging:\n    handlers:\n      file:\n        class: logging.FileHandler\n"
         "        filename: /tmp/evil.pth\n",
         "error: hydra.job_logging.handlers.file.filename cannot be set: cdpbench configures logging; a config may only "
         "choose one of Hydra's presets by name (hydra/job_logging=default|disabled|none|stdout)"),
        ("defaults:\n  - override /hydra/launcher: ray_aws\n",
         "error: hydra/launcher: ray_aws creates cloud machines that run setup commands from its config; start a Ray "
         "cluster yourself and use hydra/launcher=ray with +hydra.launcher.ray.init.address=HOST:PORT"),
        ("tracking:\n  run_name: ${oc.env:SECRET}\n", f"error: tracking.run_name: ${{oc.env:SECRET}} {ENV_REFUSED}"),
        ("hydra:\n  job:\n    name: ../../../x\n", f"error: hydra.job.name cannot be set (allowed: {ALLOWED})"),
        ("hydra:\n  job:\n    chdir: true\n",
         "error: hydra.job.chdir must be false: cdpbench runs every job in the launch folder, and the data set's file "
         "paths (dataset.files, dataset.schema) are relative to it (got True)"),
        ("hydra:\n  overrides:\n    task: ['+hydra.callbacks.x._target_=builtins.print']\n",
         "error: hydra.overrides cannot be set by a config or preset: Hydra fills it from the command line"),
        ("hydra:\n  run:\n    dir: /proc/${oc.env:SECRET}\n", f"error: hydra.run.dir: /proc/${{oc.env:SECRET}} {ENV_REFUSED}"),
        ("hydra:\n  run:\n    dir: /etc/cdpbench\n",
         "error: hydra.run.dir=/etc/cdpbench: a preset or config may only put outputs inside the launch folder (a "
         "relative path without '..'); name another folder on the command line"),
        ("hydra:\n  run:\n    dir: outputs/../../x\n",
         "error: hydra.run.dir=outputs/../../x: a preset or config may only put outputs inside the launch folder (a "
         "relative path without '..'); name another folder on the command line"),
        ("defaults:\n  - override /hydra/launcher: joblib\nhydra:\n  launcher:\n    temp_folder: /etc/cdpbench\n",
         "error: hydra.launcher.temp_folder=/etc/cdpbench: a preset or config may only put outputs inside the launch "
         "folder (a relative path without '..'); name another folder on the command line"),
        ("tracking:\n  uri: sqlite:////etc/cdpbench.db\n",
         "error: tracking.uri=sqlite:////etc/cdpbench.db: a preset or config may only put a SQLite store inside the "
         "launch folder (sqlite:///RELATIVE/PATH without '..'); name another store on the command line or in "
         "MLFLOW_TRACKING_URI"),
        ("tracking:\n  uri: sqlite:///${hydra:runtime.cwd}/../x.db\n",
         "error: tracking.uri: cannot resolve sqlite:///${hydra:runtime.cwd}/../x.db: ValueError raised while "
         "resolving interpolation: HydraConfig was not set"),
        ("tracking:\n  uri: file:///etc/cdpbench\n",
         "error: tracking.uri=file:///etc/cdpbench: not a store cdpbench records to; allowed: sqlite://, http://, "
         "https://, postgresql://, mysql://, mssql://, databricks://"),
    ],
)
def test_refused_in_a_preset(own_conf, cli, preset, message):
    proc = own_conf(preset)
    refused(proc, message.replace("{conf}", str(own_conf.conf)))
    assert nothing_created(cli.cwd)


def test_outputs_a_preset_keeps_inside_and_the_command_line_may_move(own_conf, cli, tmp_path):
    """A preset may put the run folder inside the launch folder; the command line may name any
    folder (a cluster's shared disk), also over a preset's."""
    proc = own_conf("hydra:\n  run:\n    dir: mine/run1\n", "tracking.enabled=false")
    assert proc.returncode == 0, proc.stderr
    assert (cli.cwd / "mine" / "run1" / "run.json").exists()
    elsewhere = tmp_path / "elsewhere"
    proc = own_conf("hydra:\n  run:\n    dir: /etc/cdpbench\n", f"hydra.run.dir={elsewhere}", "tracking.enabled=false")
    assert proc.returncode == 0, proc.stderr
    assert (elsewhere / "run.json").exists() and not Path("/etc/cdpbench").exists()
    # a SQLite store: inside the launch folder from a preset, anywhere from the command line
    proc = own_conf("tracking:\n  uri: sqlite:///mine/x.db\n", "tracking.enabled=false")
    assert proc.returncode == 0, proc.stderr
    proc = own_conf("tracking:\n  uri: sqlite:////etc/x.db\n", f"tracking.uri=sqlite:///{elsewhere}/x.db",
                    "tracking.enabled=false")
    assert proc.returncode == 0, proc.stderr


def test_a_10_mb_value_is_cut_in_the_message(own_conf, cli):
    proc = own_conf("seed: " + "x" * 10_000_000 + "\n")
    refused(proc, "error: seed must be an integer >= 0 (got '" + "x" * 117 + "…')")
    assert nothing_created(cli.cwd)


def test_a_long_command_line_value_is_cut_in_the_message(cli):
    proc = cli("dataset.releases=1", "tracking.experimnt=" + "y" * 100_000, check=False)
    refused(proc, "error: tracking.experimnt: unknown key; allowed: uri, experiment, run_name, enabled, plot")
    proc = cli("dataset.releases=1", "seed=" + "z" * 100_000, check=False)
    refused(proc, "error: seed must be an integer >= 0 (got '" + "z" * 117 + "…')")
    assert nothing_created(cli.cwd)


# ------------------------------------------------------------------------------ data and report
def test_a_folder_among_release_files_is_refused(cli):
    args = _csv_scenario(cli.cwd / "data")
    (cli.cwd / "data" / "release_4.csv").mkdir()
    proc = cli(*args, check=False)
    refused(proc, "error: files: 'data/release_4.csv' (matched by 'data/release_*.csv') is a folder; a release is a "
            "file: move it away or narrow the pattern")
    proc = cli(*args[:1], "dataset.files=[data/release_1.csv,data/release_4.csv]", *args[2:], check=False)
    refused(proc, "error: files: 'data/release_4.csv' is a folder; a release is a file")
    assert nothing_created(cli.cwd)


def test_report_never_creates_a_store(cli):
    proc = cli("report", "--latest", check=False)
    refused(proc, f"error: report: no MLflow SQLite store at {cli.cwd / 'mlflow.db'} (from MLFLOW_TRACKING_URI); "
            "report never creates a store: check the path")
    proc = cli("report", "--latest", "--tracking-uri", "sqlite:///mlfow.db", check=False)
    refused(proc, "error: report: no MLflow SQLite store at mlfow.db (from --tracking-uri); report never creates a "
            "store: check the path")
    assert not (cli.cwd / "mlflow.db").exists() and not (cli.cwd / "mlfow.db").exists()


# ------------------------------------------------------------------------ what is still allowed
def test_a_joblib_sweep_with_two_workers_runs(cli, mlflow_client):
    proc = cli("-m", *SMALL, "seed=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    assert "sweep: 2 jobs FINISHED" in proc.stderr
    c = mlflow_client(cli.uri)
    exps = [e.experiment_id for e in c.search_experiments()]
    assert sorted(r.info.status for r in c.search_runs(exps)) == ["FINISHED"] * 3


def test_a_run_folder_in_the_project_and_logging_disabled(cli):
    proc = cli(*SMALL, "hydra.run.dir=mine/run1", "hydra/job_logging=disabled", "tracking.enabled=false")
    assert (cli.cwd / "mine" / "run1" / "run.json").exists(), proc.stderr
    assert '"status": "FINISHED"' in (cli.cwd / "mine" / "run1" / "run.json").read_text()


@pytest.fixture
def hydra(tmp_path, monkeypatch):
    """The launching process's Hydra object; cleared afterwards (GlobalHydra is process-wide, and
    the runner and experiments tests initialize their own)."""
    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDPBENCH_CONF", str(REPO / "conf"))
    yield launch.hydra_instance(REPO / "conf")
    GlobalHydra.instance().clear()


def test_a_slurm_config_with_plain_names_passes(hydra, tmp_path):
    plan = launch.prepare(hydra, ["dataset.releases=1", "seed=0,1", "hydra/launcher=submitit_slurm",
                                  "hydra.launcher.partition=cpu", "hydra.launcher.comment='nightly run 3'",
                                  "hydra.launcher.timeout_min=30", "hydra.launcher.mem_per_cpu=4G",
                                  "hydra.launcher.exclude='node01,node02'"], True)
    launcher = plan.master.hydra.launcher
    assert plan.launcher == "submitit_slurm" and len(plan.jobs) == 2
    assert (launcher.partition, launcher.comment, launcher.timeout_min, launcher.mem_per_cpu, launcher.exclude) == (
        "cpu", "nightly run 3", 30, "4G", "node01,node02")
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert list(tmp_path.iterdir()) == []


def test_allowed_ray_options_and_interpolations(hydra, tmp_path):
    plan = launch.prepare(hydra, ["dataset.releases=1", "seed=0,1", "hydra/launcher=ray",
                                  "+hydra.launcher.ray.init.address=HEAD:6379", "+hydra.launcher.ray.init.object_store_memory=null",
                                  "+hydra.launcher.ray.remote.num_cpus=2", "tracking.run_name='k=${privacy_model.k}'",
                                  "hydra.sweep.dir='sweeps/${now:%Y}'"], True)
    assert plan.master.hydra.launcher.ray.init.address == "HEAD:6379"
    assert plan.output_dir.startswith("sweeps/") and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["hydra/job_logging=disabled"], ["hydra/hydra_logging=none", "hydra.verbose=true"],
                                  ["hydra/launcher=joblib", "hydra.launcher.n_jobs=-1", "hydra.launcher.backend=loky"]])
def test_allowed_hydra_settings(hydra, args):
    plan = launch.prepare(hydra, ["dataset.releases=1", *args], False)
    assert len(plan.jobs) == 1


def test_a_large_grid_passes_with_the_flag_and_shows_progress(hydra, monkeypatch, capsys):
    monkeypatch.setattr(launch, "LARGE_GRID", 3)
    monkeypatch.setattr(launch, "PROGRESS_JOBS", 2)
    with pytest.raises(ConfigError, match=r"^the sweep has 4 jobs, more than 3: .* add --large-grid to run it$"):
        launch.prepare(hydra, ["dataset.releases=1", "seed=range(0,4)"], True)
    plan = launch.prepare(hydra, ["dataset.releases=1", "seed=range(0,4)"], True, large_grid=True)
    assert [[o for o in j.overrides if o.startswith("seed=")] for j in plan.jobs] == [
        ["seed=0"], ["seed=1"], ["seed=2"], ["seed=3"]]
    assert "checking the sweep" in capsys.readouterr().err
    launch.prepare(hydra, ["dataset.releases=1", "seed=range(0,4)", "progress=false"], True, large_grid=True)
    assert "checking the sweep" not in capsys.readouterr().err


def test_range_expands_as_hydra_does(hydra):
    master = launch.compose(hydra, ["privacy_model.k=range(2,5000)"], multirun=True)
    jobs = launch.expand_sweep(hydra, master)
    assert len(jobs) == 4998 and jobs[0] == ["privacy_model.k=2"] and jobs[-1] == ["privacy_model.k=4999"]
