"""The Python API for notebooks (#27 item 6): ``cdpbench.load_sweep``, ``load_run`` and ``run``,
exported lazily by the package, and docs/python_api.md, whose code blocks run here in order."""

import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import CDPBENCH, REPO

DOC = REPO / "docs" / "python_api.md"
#: a small Adult scenario of two releases
TINY_DATA = ["dataset.releases=2", "dataset.initial=600", "dataset.deletions=60", "dataset.insertions=60",
             "dataset.updates=60", "progress=false"]
#: a preset of the test's own config folder: two jobs (k = 2, 3) in experiment "tiny"
TINY_PRESET = """# @package _global_
dataset: {releases: 2, initial: 600, deletions: 60, insertions: 60, updates: 60}
progress: false
tracking: {experiment: tiny}
hydra:
  sweeper:
    params:
      privacy_model.k: 2,3
"""


def _env(conf: Path) -> dict:
    env = {**os.environ, "CDPBENCH_CONF": str(conf), "MPLBACKEND": "Agg"}
    for var in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(var, None)
    return env


def _conf(root: Path) -> Path:
    """A config folder with the repository's config and two presets of its own: ``tiny`` (run
    below) and ``tiny_unrun`` (never run)."""
    conf = root / "conf"
    (conf / "experiment").mkdir(parents=True)
    shutil.copy(REPO / "conf" / "config.yaml", conf / "config.yaml")
    (conf / "experiment" / "tiny.yaml").write_text(TINY_PRESET)
    (conf / "experiment" / "tiny_unrun.yaml").write_text(TINY_PRESET)
    return conf


def _cli(root: Path, conf: Path, *args: str) -> str:
    proc = subprocess.run([str(CDPBENCH), *args], cwd=root, env=_env(conf), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A folder whose default store (``outputs/mlflow.db``, as the command line makes it) holds two
    sweeps of two jobs: first the preset ``tiny`` (experiment ``tiny``, k = 2, 3), then one without
    a preset (experiment ``cdpbench``, k = 2, 5)."""
    root = tmp_path_factory.mktemp("api_store")
    conf = _conf(root)
    first = _cli(root, conf, "-m", "+experiment=tiny")
    second = _cli(root, conf, "-m", "privacy_model.k=2,5", *TINY_DATA)
    parent = [re.search(r"MLflow parent run (\w+)", err).group(1) for err in (first, second)]
    return SimpleNamespace(root=root, conf=conf, uri=f"sqlite:///{root / 'outputs' / 'mlflow.db'}",
                           tiny=parent[0], plain=parent[1])


@pytest.fixture
def in_store(store, monkeypatch):
    """This process in the store's folder, with its config folder and no MLFLOW_TRACKING_URI: the
    API finds the store as the command line does."""
    monkeypatch.chdir(store.root)
    monkeypatch.setenv("CDPBENCH_CONF", str(store.conf))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return store


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _children(uri, parent):
    c = _client(uri)
    exp = c.get_run(parent).info.experiment_id
    return c.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{parent}'")


def _mlflow_values(uri, runs) -> dict:
    """(run id, metric, release) -> value, as MLflow holds every logged value."""
    c = _client(uri)
    return {(r.info.run_id, key, m.step): m.value for r in runs for key in r.data.metrics
            for m in c.get_metric_history(r.info.run_id, key)}


def _frame_values(df) -> dict:
    return {(run, metric, int(rel)): value for run, metric, rel, value in df[["run", "metric", "release", "value"]]
            .itertuples(index=False)}


# ---------------------------------------------------------------------------------- load_sweep
def test_load_sweep_holds_every_value_mlflow_holds_for_the_latest_sweep(in_store):
    import json

    import cdpbench

    df = cdpbench.load_sweep("latest")
    assert df.attrs["parent_id"] == in_store.plain
    runs = _children(in_store.uri, in_store.plain)
    assert len(runs) == 2
    expected = _mlflow_values(in_store.uri, runs)
    assert len(df) == len(expected) > 2 * 2 * 30  # two runs, two releases, some 40 metrics each
    assert _frame_values(df) == expected
    # and the values are those the jobs computed (their run records), not only what MLflow echoes
    for r in runs:
        record = json.loads((Path(r.data.tags["cdpbench.run_dir"]) / "run.json").read_text())
        mine = df[df.run == r.info.run_id]
        assert {(m, rel): v for rel, _, row in record["metrics"] for m, v in row.items()} == {
            (m, int(rel)): v for m, rel, v in mine[["metric", "release", "value"]].itertuples(index=False)}
    assert sorted(df.release.unique()) == [1, 2]
    assert {"snapshot.gain_rho", "gcp_norm", "query_error_mean"} <= set(df.metric)


def test_load_sweep_columns_are_run_name_parameters_release_metric_value(in_store):
    import cdpbench

    df = cdpbench.load_sweep()
    assert list(df.columns[:2]) == ["run", "run_name"] and list(df.columns[-3:]) == ["release", "metric", "value"]
    params = list(df.columns[2:-3])
    runs = {r.info.run_id: r for r in _children(in_store.uri, in_store.plain)}
    assert params == sorted(runs[next(iter(runs))].data.params)  # every parameter, one column each
    assert {"privacy_model.k", "dataset.releases", "privacy_model.name", "seed", "attacker.name"} <= set(params)
    by_run = df.groupby("run")
    for run_id, r in runs.items():
        rows = by_run.get_group(run_id)
        assert set(rows.run_name) == {r.info.run_name}
        assert set(rows["privacy_model.k"]) == {int(r.data.params["privacy_model.k"])}
    assert sorted(df.groupby("run")["privacy_model.k"].first()) == [2, 5]
    # typed: numbers as numbers, true/false as booleans, text as text
    assert str(df["privacy_model.k"].dtype) == "int64" and str(df["dataset.releases"].dtype) == "int64"
    assert df["metrics.utility.enabled"].map(type).eq(bool).all() and set(df["privacy_model.name"]) == {"k_anonymity"}
    assert df.release.dtype == "int64" and df.value.dtype == "float64"
    # the sweep's jobs in launch order (k = 2 first), each run's rows by metric then release
    assert list(dict.fromkeys(df.run_name)) == ["privacy_model.k=2", "privacy_model.k=5"]
    first = df[df.run == df.run.iloc[0]]
    assert list(first[["metric", "release"]].itertuples(index=False, name=None)) == sorted(
        first[["metric", "release"]].itertuples(index=False, name=None))


@pytest.mark.parametrize("how", [
    {"which": "PARENT"}, {"parent_id": "PARENT"}, {"preset": "tiny"}, {"experiment": "tiny"},
    {"experiment": "tiny", "preset": "tiny"},
])
def test_a_sweep_is_chosen_by_parent_id_preset_or_experiment(in_store, how):
    """The latest sweep is the plain one; each of these picks the earlier sweep of preset tiny."""
    import cdpbench

    kwargs = {k: (in_store.tiny if v == "PARENT" else v) for k, v in how.items()}
    which = kwargs.pop("which", "latest")
    df = cdpbench.load_sweep(which, **kwargs)
    assert df.attrs["parent_id"] == in_store.tiny
    assert sorted(df.groupby("run")["privacy_model.k"].first()) == [2, 3]
    assert set(df["tracking.experiment"]) == {"tiny"}
    assert _frame_values(df) == _mlflow_values(in_store.uri, _children(in_store.uri, in_store.tiny))


def test_latest_in_an_experiment_and_an_explicit_store(in_store, tmp_path, monkeypatch):
    import cdpbench

    assert cdpbench.load_sweep(experiment="cdpbench").attrs["parent_id"] == in_store.plain
    monkeypatch.chdir(tmp_path)  # no store here: tracking_uri names it
    assert cdpbench.load_sweep(tracking_uri=in_store.uri).attrs["parent_id"] == in_store.plain
    monkeypatch.setenv("MLFLOW_TRACKING_URI", in_store.uri)  # as the command line reads it
    assert cdpbench.load_sweep().attrs["parent_id"] == in_store.plain


def test_load_run_reads_one_run_as_load_sweep_does(in_store):
    import cdpbench

    sweep = cdpbench.load_sweep(in_store.tiny)
    run_id = sweep.run.iloc[-1]
    one = cdpbench.load_run(run_id)
    assert set(one.run) == {run_id}
    assert one.equals(sweep[sweep.run == run_id].reset_index(drop=True))


@pytest.mark.parametrize("call, message", [
    (lambda api: api.load_sweep(preset="nope"),
     "load_sweep: unknown preset 'nope' (`cdpbench experiments` lists the {n} presets)"),
    (lambda api: api.load_sweep(preset="tinny"),
     "load_sweep: unknown preset 'tinny'; did you mean tiny? (`cdpbench experiments` lists the {n} presets)"),
    (lambda api: api.load_sweep(preset="tiny_unrun"),
     "no sweep of preset 'tiny_unrun' found in {uri}; run one with `cdpbench -m +experiment=tiny_unrun` first"),
    (lambda api: api.load_sweep(preset="tiny", experiment="cdpbench"),
     "no sweep of preset 'tiny' found in {uri}; run one with `cdpbench -m +experiment=tiny` first"),
    (lambda api: api.load_sweep("0123456789abcdef"), "no MLflow run with id '0123456789abcdef' in {uri}"),
    (lambda api: api.load_sweep("TINY", preset="tiny"), "load_sweep: give a sweep's parent run id or preset='tiny', not both"),
    (lambda api: api.load_sweep("TINY", parent_id="PLAIN"), "load_sweep: two sweeps named: 'TINY' and parent_id='PLAIN'"),
    (lambda api: api.load_sweep(experiment="nope"), "no MLflow experiment named 'nope'; have: {experiments}"),
    (lambda api: api.load_sweep("RUN"), "sweep RUN has no child runs"),
    (lambda api: api.load_run("TINY"),
     "load_run: TINY is a sweep's parent run (it has no metrics); load_sweep('TINY') reads its runs"),
    (lambda api: api.load_run("0123456789abcdef"), "load_run: no MLflow run with id '0123456789abcdef' in {uri}"),
])
def test_one_line_errors(in_store, call, message):
    import cdpbench
    from cdpbench.errors import CdpbenchError
    from cdpbench.presets import preset_names

    ids = {"TINY": in_store.tiny, "PLAIN": in_store.plain,
           "RUN": _children(in_store.uri, in_store.plain)[0].info.run_id}

    class Api:  # the calls, with the placeholders of their parameters filled in
        def __getattr__(self, name):
            def call(*args, **kwargs):
                args = [ids.get(a, a) for a in args]
                kwargs = {k: ids.get(v, v) for k, v in kwargs.items()}
                return getattr(cdpbench, name)(*args, **kwargs)
            return call

    with pytest.raises(CdpbenchError) as e:
        call(Api())
    experiments = [e.name for e in _client(in_store.uri).search_experiments()]
    assert sorted(experiments) == ["Default", "cdpbench", "tiny"]
    expected = message.format(uri=in_store.uri, n=len(preset_names()), experiments=experiments)
    for key, value in ids.items():
        expected = expected.replace(key, value)
    assert str(e.value) == expected
    assert "\n" not in str(e.value)


def test_reading_needs_a_store_and_never_creates_one(tmp_path, monkeypatch):
    import cdpbench
    from cdpbench.errors import CdpbenchError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    db = tmp_path / "outputs" / "mlflow.db"
    with pytest.raises(CdpbenchError) as e:
        cdpbench.load_sweep()
    assert str(e.value) == (f"load_sweep: no MLflow SQLite store at {db} (from the default store); load_sweep never "
                            f"creates a store: check the path")
    other = tmp_path / "elsewhere.db"
    with pytest.raises(CdpbenchError) as e:
        cdpbench.load_run("abc", tracking_uri=f"sqlite:///{other}")
    assert str(e.value) == (f"load_run: no MLflow SQLite store at {other} (from tracking_uri=); load_run never "
                            f"creates a store: check the path")
    assert not db.exists() and not other.exists() and not (tmp_path / "outputs").exists()


# ----------------------------------------------------------------------------------------- run
def test_run_records_one_run_in_mlflow_and_returns_its_metrics(tmp_path, monkeypatch):
    import cdpbench
    from cdpbench.errors import CdpbenchError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDPBENCH_CONF", str(REPO / "conf"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    handlers = list(logging.getLogger().handlers)
    result = cdpbench.run(["privacy_model.k=3", *TINY_DATA], experiment="notebook")
    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"  # the command line's default store
    r = _client(uri).get_run(result.run_id)
    assert r.info.status == "FINISHED" and r.data.params["privacy_model.k"] == "3"
    assert _client(uri).get_experiment(r.info.experiment_id).name == "notebook" == result.experiment
    assert r.info.run_name == result.run_name and r.data.tags["cdpbench.kind"] == "job"
    assert result.folder.parent == tmp_path / "outputs" / "runs" and (result.folder / "metrics.csv").exists()
    assert _frame_values(result.metrics) == _mlflow_values(uri, [r])
    assert set(result.metrics["privacy_model.k"]) == {3} and set(result.metrics.release) == {1, 2}
    assert result.params["privacy_model.k"] == "3"
    table = result.table()
    assert list(table.index) == [1, 2] and table.loc[2, "gcp_norm"] == r.data.metrics["gcp_norm"]
    assert result.as_dict()["gcp_norm"] == {1: table.loc[1, "gcp_norm"], 2: table.loc[2, "gcp_norm"]}
    assert cdpbench.load_run(result.run_id).equals(result.metrics)
    # the process is left as it was: no log handler on the run's log file, no Hydra state
    from hydra.core.hydra_config import HydraConfig

    assert logging.getLogger().handlers == handlers
    assert not HydraConfig.initialized()
    # a single run is no sweep
    with pytest.raises(CdpbenchError) as e:
        cdpbench.load_sweep()
    assert str(e.value) == f"no sweep found in {uri}; run one with `cdpbench -m ...` first"


@pytest.mark.parametrize("overrides, kwargs, message", [
    (["privacy_model.k=0"], {}, "privacy_model.k must be an integer >= 1 (got 0)"),
    (["privacy_model.k=2,5"], {}, "privacy_model.k=2,5: several values make a sweep; run it with -m"),
    (["anonymizer=nope"], {}, "unknown anonymizer 'nope'; installed: "),
    (["tracking.experiment=a"], {"experiment": "b"},
     "run: give the experiment once, as experiment= or as tracking.experiment=, not both"),
    (42, {}, "run: overrides must be a list of 'key=value' strings, one string of them, or a dict (got int)"),
])
def test_run_refuses_a_bad_config_in_one_line_and_creates_nothing(tmp_path, monkeypatch, overrides, kwargs, message):
    import cdpbench
    from cdpbench.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDPBENCH_CONF", str(REPO / "conf"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ConfigError) as e:
        cdpbench.run(overrides, **kwargs)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no run folder, no store


def test_run_takes_overrides_as_a_list_a_string_or_a_dict_of_values():
    from cdpbench.api import _overrides

    as_list = ["privacy_model=l_diversity", "privacy_model.k=5", "dataset.qi=[age,sex]", "seed=3"]
    assert _overrides(as_list) == as_list
    assert _overrides(" ".join(as_list)) == as_list
    assert _overrides({"privacy_model": "l_diversity", "privacy_model.k": 5, "dataset.qi": ["age", "sex"],
                       "seed": 3}) == as_list
    assert _overrides({"tracking.experiment": "my runs", "tracking.plot": True, "tracking.run_name": None,
                       "metrics.query_error.selectivity": 0.25}) == [
        "tracking.experiment='my runs'", "tracking.plot=true", "tracking.run_name=null",
        "metrics.query_error.selectivity=0.25"]
    assert _overrides(None) == []


# --------------------------------------------------------------------------- the package's face
def test_import_cdpbench_stays_light_and_exports_the_api():
    code = ("import sys, cdpbench\n"
            "print(sorted(m for m in ('pandas', 'mlflow', 'numpy', 'hydra', 'omegaconf', 'matplotlib', 'cdpbench.api')"
            " if m in sys.modules))\n"
            "import cdpbench.api as api\n"
            "print(all(getattr(cdpbench, n) is getattr(api, n) for n in ('run', 'load_sweep', 'load_run', 'RunResult')))\n"
            "print({'run', 'load_sweep', 'load_run', 'RunResult'} <= set(dir(cdpbench)))\n"
            "try:\n    cdpbench.nope\nexcept AttributeError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "True", "True", "module 'cdpbench' has no attribute 'nope'"]


def test_loading_keeps_the_sessions_matplotlib_backend(in_store):
    """cdpbench's figures are files drawn without pyplot (cdpbench.plots): loading a sweep, which
    imports them, leaves a notebook's (inline) or a script's backend as the session chose it."""
    code = "import cdpbench\ncdpbench.load_sweep()\nimport matplotlib.pyplot as plt\nprint(plt.get_backend())\n"
    env = {**_env(in_store.conf), "MPLBACKEND": "svg"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=in_store.root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["svg"]


def test_the_issues_acceptance_command_after_a_sweep(in_store):
    """#27: ``python -c "import cdpbench; print(cdpbench.load_sweep('latest').head())"`` works in
    the folder a sweep ran in."""
    proc = subprocess.run([sys.executable, "-c", "import cdpbench; print(cdpbench.load_sweep('latest').head())"],
                          cwd=in_store.root, env=_env(in_store.conf), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = _children(in_store.uri, in_store.plain)
    first = next(r for r in first if r.data.tags["cdpbench.job"] == "0")
    assert proc.stdout.splitlines()[1].split()[1] == first.info.run_id  # row 0: the first job's run
    assert "[5 rows x " in proc.stdout


# ------------------------------------------------------------------------------ the walkthrough
def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)


def test_the_walkthrough_runs_in_order(tmp_path, monkeypatch):
    """docs/python_api.md: its shell commands run as the command line, its Python blocks in one
    namespace, in order, in a fresh folder (the default store); then what they computed is
    checked against MLflow."""
    blocks = _blocks(DOC.read_text())
    assert [lang for lang, _ in blocks].count("python") >= 6 and {lang for lang, _ in blocks} == {"bash", "python"}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDPBENCH_CONF", str(REPO / "conf"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ns: dict = {}
    last = {}
    for i, (lang, code) in enumerate(blocks):
        if lang == "bash":
            for line in code.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                if words:
                    assert words[0] == "cdpbench", line
                    _cli(tmp_path, REPO / "conf", *words[1:])
            continue
        *body, tail = code.rstrip().splitlines()
        try:  # a block's last line, when an expression, is what a notebook shows: kept to check
            compile(tail, f"block {i}", "eval")
        except SyntaxError:
            exec(compile(code, f"{DOC.name} block {i}", "exec"), ns)
            continue
        exec(compile("\n".join(body), f"{DOC.name} block {i}", "exec"), ns)
        last[i] = eval(compile(tail, f"{DOC.name} block {i}", "eval"), ns)

    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    df = ns["df"]
    runs = _children(uri, df.attrs["parent_id"])
    assert _frame_values(df) == _mlflow_values(uri, runs)
    assert sorted(ns["runs"]["privacy_model.k"]) == [2, 5, 10]
    means = ns["means"]
    assert list(means.index) == [2, 5, 10] and list(means.columns) == ["gcp_norm", "query_error_mean", "snapshot.gain_rho"]
    k10 = df[(df["privacy_model.k"] == 10) & (df.metric == "gcp_norm")]
    assert means.loc[10, "gcp_norm"] == pytest.approx(k10.value.mean())
    lines = ns["ax"].get_lines()
    assert len(lines) == 3 and [list(ln.get_ydata()) for ln in lines] == [list(ns["gain"][k]) for k in (2, 5, 10)]
    result = ns["result"]
    assert _client(uri).get_run(result.run_id).info.status == "FINISHED" and result.experiment == "notebook"
    shown = [v for v in last.values() if isinstance(v, bool)]
    assert shown == [True, True, True]  # same numbers as the sweep's k = 5; load_run; load_sweep by id
