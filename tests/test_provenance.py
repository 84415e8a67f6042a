"""What made a result (#30 items 1-2): every run records the code, input files and environment it
used, and a resumed sweep skips a job only when the present code and inputs would compute it.

- a plugin's source changed (a copy of a test plugin on PYTHONPATH, edited between launches):
  the relaunch runs again exactly the jobs that use it, saying why; the other jobs are skipped;
- one CSV release edited: the jobs reading it run again, the others are skipped;
- an unchanged relaunch skips everything; ``--reuse-old-code`` skips across a code change (not
  across an input change); ``--rerun`` with it is a one-line error;
- the fingerprints themselves: which distributions a run uses (plugin references and declared
  dependencies included), what a data set's input files are, when a run is stale.
"""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import CDPBENCH, REPO

FAULTY = Path(__file__).parent / "faulty"


def _jobs(client, parent: str) -> dict[str, object]:
    exps = [e.experiment_id for e in client.search_experiments()]
    return {r.data.params.get("dataset.name"): r for r in client.search_runs(exps, f"tags.`mlflow.parentRunId` = '{parent}'")}


def _parent(stderr: str) -> str:
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("sweep: ") and "MLflow parent run " in ln]
    return line.split("MLflow parent run ")[1].rstrip(")")


@pytest.fixture
def plugin_copy(tmp_path, monkeypatch):
    """The faulty data set plugin copied into the test's folder and put on PYTHONPATH: its
    source can be edited like an installed plugin's."""
    where = tmp_path / "site"
    shutil.copytree(FAULTY, where)
    monkeypatch.setenv("PYTHONPATH", str(where))
    return where / "cdpbench_faulty.py"


@pytest.mark.slow
def test_a_changed_plugin_reruns_exactly_its_jobs_and_says_why(cli, plugin_copy, mlflow_client):
    sweep = ["-m", "dataset=faulty,adult", "dataset.releases=2", "progress=false"]
    first = cli(*sweep)
    c = mlflow_client(cli.uri)
    runs = _jobs(c, _parent(first.stderr))
    assert {k: r.data.tags["cdpbench.code.cdpbench-faulty"] != "?" for k, r in runs.items() if k == "faulty"} == {"faulty": True}
    assert "cdpbench.code.cdpbench-faulty" not in runs["adult"].data.tags  # adult uses the core and classic only
    assert sorted(k for k in runs["adult"].data.tags if k.startswith("cdpbench.code.")) == [
        "cdpbench.code.cdpbench", "cdpbench.code.cdpbench-classic"]

    again = cli(*sweep)  # nothing changed: everything skipped
    assert "sweep: 2 skipped, already FINISHED in the experiment" in again.stderr
    assert "runs again" not in again.stderr

    plugin_copy.write_text(plugin_copy.read_text() + "\n# a fix\n")
    after = cli(*sweep)
    assert "sweep: 1 skipped" in after.stderr and "2 jobs FINISHED, 1 run" in after.stderr
    note = [ln for ln in after.stderr.splitlines() if "runs again" in ln]
    assert len(note) == 1 and "dataset=faulty" in note[0]
    assert f"runs again: cdpbench-faulty changed since run {runs['faulty'].info.run_id}" in note[0]
    new = _jobs(c, _parent(after.stderr))
    assert new["faulty"].info.run_id != runs["faulty"].info.run_id  # a new run, recorded with the new code
    assert new["faulty"].data.tags["cdpbench.code.cdpbench-faulty"] != runs["faulty"].data.tags["cdpbench.code.cdpbench-faulty"]

    plugin_copy.write_text(plugin_copy.read_text() + "# another\n")
    reused = cli(*sweep, "--reuse-old-code")  # the researcher's choice: results of older code are fine
    assert "sweep: 2 skipped" in reused.stderr
    refused = cli(*sweep, "--reuse-old-code", "--rerun", check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: --rerun runs every job again, --reuse-old-code skips more: give one of them")


def _releases(folder: Path, seed: int) -> None:
    folder.mkdir()
    (folder / "schema.yaml").write_text(
        "respondent: id\n"
        "qi:\n  - {name: age, type: numeric, low: 0, high: 100}\n"
        "  - {name: edu, type: categorical, hierarchy: edu.csv}\n"
        "sensitive: {name: disease, values: [flu, hiv, cold]}\n")
    (folder / "edu.csv").write_text("school;*\ncollege;*\n")
    rng = np.random.default_rng(seed)
    for t in (1, 2):
        pd.DataFrame({"id": np.arange(30), "age": rng.integers(0, 101, 30), "edu": rng.choice(["school", "college"], 30),
                      "disease": rng.choice(["flu", "hiv", "cold"], 30)}).to_csv(folder / f"release_{t}.csv", index=False)


@pytest.mark.slow
def test_an_edited_release_file_reruns_the_jobs_that_read_it(cli, mlflow_client):
    _releases(cli.cwd / "a", 0)
    _releases(cli.cwd / "b", 1)
    sweep = ["-m", "dataset=csv", "dataset.files=a/release_*.csv,b/release_*.csv", "dataset.schema=a/schema.yaml",
             "privacy_model.k=3", "progress=false"]
    first = cli(*sweep)
    c = mlflow_client(cli.uri)
    exps = [e.experiment_id for e in c.search_experiments()]
    runs = {r.data.params["dataset.files"]: r for r in c.search_runs(exps, "tags.`cdpbench.kind` = 'job'")}
    assert {k: r.data.tags["cdpbench.inputs.files"] for k, r in runs.items()} == {
        "a/release_*.csv": "4", "b/release_*.csv": "4"}  # two releases, the schema, its hierarchy
    assert "2 skipped" in cli(*sweep).stderr

    def edit_b():
        frame = pd.read_csv(cli.cwd / "b" / "release_2.csv")
        frame.loc[0, "disease"] = "hiv" if frame.loc[0, "disease"] != "hiv" else "flu"
        frame.to_csv(cli.cwd / "b" / "release_2.csv", index=False)

    edit_b()
    after = cli(*sweep)
    assert "sweep: 1 skipped" in after.stderr
    (note,) = [ln for ln in after.stderr.splitlines() if "runs again" in ln]
    assert "b/release_*.csv" in note and "the input files changed" in note
    assert "2 skipped" in cli(*sweep).stderr  # the new run is the present one
    edit_b()
    assert "1 skipped" in cli(*sweep, "--reuse-old-code").stderr  # code reuse never reuses other inputs' results

    (cli.cwd / "a" / "edu.csv").write_text("college;*\nschool;*\n")  # a hierarchy both jobs read
    assert "2 jobs FINISHED, 2 run" in cli(*sweep).stderr


def test_a_run_uses_its_plugins_their_references_and_declared_dependencies():
    from omegaconf import OmegaConf

    from cdpbench import provenance, runner
    from cdpbench.registry import default_registry

    cfg = OmegaConf.create({
        "seed": 0, "progress": False, "dataset": {"name": "adult_sequential"},
        "anonymizer": {"name": "ksaa"}, "privacy_model": {"name": "k_diversity"},
        "knowledge": {"name": "none"}, "estimator": None, "attacker": {"name": "snapshot"}, "extra_attackers": None,
        "metrics": {}})
    comp = runner.build(cfg)
    used = provenance.distributions_used([comp.dataset, comp.anonymizer, comp.privacy_model, comp.attackers],
                                         default_registry())
    # ksaa's anonymizer and model (its base anonymizer, js_reduce, is a plugin reference) and the
    # cdpbench distributions cdpbench-ksaa declares; never an unrelated one
    assert used == ["cdpbench", "cdpbench-bayframe", "cdpbench-bcf", "cdpbench-classic", "cdpbench-jsreduce", "cdpbench-ksaa"]
    comp = runner.build(OmegaConf.merge(cfg, {"dataset": {"name": "adult"}, "anonymizer": {"name": "mondrian"},
                                              "privacy_model": {"name": "k_anonymity"}}))
    used = provenance.distributions_used([comp.dataset, comp.anonymizer, comp.privacy_model, comp.attackers],
                                         default_registry())
    assert used == ["cdpbench", "cdpbench-classic"]
    ref = [o for o in provenance.plugin_objects(runner.build(OmegaConf.merge(cfg, {"attacker": {"name": "bayframe"}})).attackers)]
    assert {type(o).__name__ for o in ref} >= {"BayFrameAttacker", "BayesianEstimator"}  # a plugin reference is found


def test_stale_reason_names_what_changed():
    from cdpbench.provenance import stale_reason

    old = {"code": {"cdpbench": "a", "cdpbench-jsreduce": "b"}, "inputs": "-"}
    assert stale_reason(old, old) is None
    assert stale_reason(old, {**old, "code": {"cdpbench": "a", "cdpbench-jsreduce": "c"}}) == "cdpbench-jsreduce changed"
    assert stale_reason(old, {**old, "code": {"cdpbench": "x", "cdpbench-jsreduce": "c"}}) == "cdpbench, cdpbench-jsreduce changed"
    assert stale_reason(old, {**old, "code": {"cdpbench": "a"}}) == "cdpbench-jsreduce changed"  # no longer used
    assert stale_reason(old, {**old, "inputs": "f"}) == "the input files changed"
    assert stale_reason({"code": {}, "inputs": None}, old).startswith("it was recorded without code fingerprints")


def test_fingerprints_follow_file_contents(tmp_path, monkeypatch):
    from cdpbench import provenance

    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("x\n1\n")
    b.write_text("x\n1\n")
    assert provenance.file_fingerprint([a]) == provenance.file_fingerprint([b])  # contents, not where
    first = provenance.file_fingerprint([a, b])
    b.write_text("x\n2\n")
    assert provenance.file_fingerprint([a, b]) != first
    assert provenance.file_fingerprint([b, a]) != provenance.file_fingerprint([a, b])  # the releases' order counts
    site = tmp_path / "site"
    shutil.copytree(FAULTY, site)
    monkeypatch.syspath_prepend(str(site))
    fp = provenance.distribution_fingerprint.__wrapped__("cdpbench-faulty")
    assert fp == provenance.distribution_fingerprint.__wrapped__("cdpbench-faulty") != "?"
    (site / "cdpbench_faulty.py").write_text((site / "cdpbench_faulty.py").read_text() + "#\n")
    assert provenance.distribution_fingerprint.__wrapped__("cdpbench-faulty") != fp
    assert provenance.distribution_fingerprint("no-such-distribution") == "?"


def test_csv_input_files_are_the_releases_the_schemas_and_their_hierarchies(tmp_path, monkeypatch):
    from cdpbench.datasets.csvfiles import CsvReleases, CsvReleasesParams

    _releases(tmp_path / "d", 0)
    monkeypatch.chdir(tmp_path)
    ds = CsvReleases(CsvReleasesParams(files="d/release_*.csv", schema="d/schema.yaml"))
    assert [str(p) for p in ds.input_files()] == ["d/release_1.csv", "d/release_2.csv", "d/schema.yaml", "d/edu.csv"]


def test_the_sweep_parent_records_the_checkout_and_the_environment(cli, mlflow_client):
    from cdpbench import provenance

    out = cli("-m", "dataset.releases=1", "dataset.initial=200", "privacy_model.k=5,6", "progress=false")
    c = mlflow_client(cli.uri)
    parent = c.get_run(_parent(out.stderr))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert parent.data.tags["mlflow.source.git.commit"] == head
    dirty = subprocess.run(["git", "diff", "HEAD", "--quiet"], cwd=REPO).returncode != 0
    assert parent.data.tags["cdpbench.git.dirty"] == ("true" if dirty else "false")
    assert ("cdpbench.git.diff" in parent.data.tags) == dirty
    env = (Path(c.download_artifacts(parent.info.run_id, "environment.txt", str(cli.cwd)))).read_text()
    assert f"numpy=={provenance.environment()['numpy']}" in env.splitlines() and env.startswith("# python 3.")
    lock = provenance.lock_fingerprint(REPO)
    assert lock and parent.data.tags["cdpbench.lock"] == lock  # the environment lock the checkout installs from
    for job in c.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"):
        assert job.data.tags["cdpbench.env.numpy"] == provenance.environment()["numpy"]
        assert job.data.tags["cdpbench.git.dirty"] == parent.data.tags["cdpbench.git.dirty"]
        assert job.data.tags["cdpbench.lock"] == lock
        assert job.data.tags["cdpbench.code.cdpbench"] == provenance.distribution_fingerprint("cdpbench")
    # a figure names the commit and lock its runs came from
    rep = cli("report", "--latest", "--metric", "gain_rho", "--out", "rep")
    (line,) = [ln for ln in rep.stdout.splitlines() if ln.startswith("source:")]
    assert line.startswith(f"source:  runs of commit {head[:7]}") and f"· lock {lock}" in line


def test_source_note_names_commits_and_locks_and_is_drawn_under_the_figure():
    import matplotlib.pyplot as plt

    from cdpbench import plots
    from cdpbench.provenance import source_note

    a = {"mlflow.source.git.commit": "84a98235fb", "cdpbench.git.dirty": "false", "cdpbench.lock": "1a2b"}
    b = {"mlflow.source.git.commit": "0219d84aaa", "cdpbench.git.dirty": "true", "cdpbench.git.diff": "4ef9", "cdpbench.lock": "1a2b"}
    assert source_note([a, a]) == "runs of commit 84a9823 · lock 1a2b"
    assert source_note([a, b]) == "runs of commits 0219d84+dirty 4ef9, 84a9823 · lock 1a2b"
    assert source_note([{}]) == "runs of commit not recorded · lock not recorded"
    fig = plt.figure()
    token = plots.SOURCE_NOTE.set("runs of commit 84a9823 · lock 1a2b")
    try:
        plots.save(fig, Path(pytest.importorskip("tempfile").mkdtemp()) / "f.png")
    finally:
        plots.SOURCE_NOTE.reset(token)
    assert [t.get_text() for t in fig.texts] == ["runs of commit 84a9823 · lock 1a2b"]


def test_a_single_run_and_a_sweep_say_where_they_went(cli, mlflow_client):
    """#27 item 5 (part): a single run prints its MLflow run id, experiment and a link that opens
    that run; a sweep's link opens the experiment's runs list (MLflow 3 opens its GenAI overview
    on #/experiments/ID alone)."""
    one = cli("dataset.releases=1", "dataset.initial=200", "progress=false", "tracking.experiment=where")
    c = mlflow_client(cli.uri)
    (run,) = c.search_runs([c.get_experiment_by_name("where").experiment_id])
    exp = run.info.experiment_id
    lines = one.stderr.strip().splitlines()
    assert lines[-2] == f"run: FINISHED as MLflow run {run.info.run_id} in experiment 'where'"
    assert lines[-1].startswith("browse: ") and lines[-1].endswith(f"/#/experiments/{exp}/runs/{run.info.run_id})")
    sweep = cli("-m", "dataset.releases=1", "dataset.initial=200", "privacy_model.k=5,6", "progress=false",
                "tracking.experiment=where")
    last = sweep.stderr.strip().splitlines()[-1]
    assert last.startswith("browse: ") and last.endswith(f"/#/experiments/{exp}/runs)")
