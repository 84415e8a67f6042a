"""End-to-end: the console script, MLflow contents, sweeps, failures, determinism."""

import numpy as np
import pandas as pd
import pytest

from conftest import SMALL

pytestmark = pytest.mark.slow

EXPECTED_METRICS = {
    "gcp", "gcp_norm", "rl", "rl_norm", "kl", "query_error_mean", "query_error_median",
    "discernibility", "discernibility_norm", "suppressed", "suppressed_fraction", "counterfeits",
    "groups", "group_size_min", "group_size_mean", "violations", "satisfied", "level.k",
    "snapshot.gain_rho", "snapshot.gain_g", "snapshot.confidence",
    "time_prior", "time_publish", "time_verify", "time_attack", "time_metrics", "time_total",
}


def all_runs(client):
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, max_results=1000) if exps else []


def histories(client, run):
    return {
        k: [(m.step, m.value) for m in sorted(client.get_metric_history(run.info.run_id, k), key=lambda m: m.step)]
        for k in run.data.metrics
    }


def test_plugins_lists_every_plugin_with_parameters(cli):
    out = cli("plugins").stdout
    for name in ["adult", "churn", "csv", "k_anonymity", "l_diversity", "t_closeness", "beta_likeness",
                 "bt_privacy", "delta_disclosure", "alpha_k_anonymity", "delta_presence", "k_map", "mondrian", "uniform", "kernel", "frequency", "omega", "snapshot",
                 "utility", "record_linkage", "kl_divergence", "query_error", "belief",
                 "bkseq", "dk", "spm", "ie", "configuration", "js_reduce", "sequential",
                 "dp_tree", "dp_release", "dp_budget", "noisy_counts"]:
        assert f"  {name}  [" in out, name
    assert "privacy_model.k: int = 2" in out
    assert "privacy_model.t: float" in out
    assert "cdpbench-classic 0.1.0" in out and "cdpbench-jsreduce 0.1.0" in out and "cdpbench-dp 0.1.0" in out
    assert "BROKEN" not in out


def test_single_run_lands_in_mlflow_with_metrics_params_tags_artifacts(cli, mlflow_client):
    cli(*SMALL, "privacy_model=l_diversity", "privacy_model.k=3", "tracking.experiment=e2e", "tracking.plot=true")
    c = mlflow_client(cli.uri)
    (run,) = all_runs(c)
    assert run.info.status == "FINISHED"
    hist = histories(c, run)
    assert EXPECTED_METRICS <= set(hist), EXPECTED_METRICS - set(hist)
    for key in EXPECTED_METRICS:
        assert [s for s, _ in hist[key]] == [1, 2, 3], key
    assert all(v == 0 for _, v in hist["violations"])
    p = run.data.params
    assert p["privacy_model.name"] == "l_diversity" and p["privacy_model.k"] == "3"
    assert p["dataset.initial"] == "600" and p["seed"] == "0"
    t = run.data.tags
    assert t["cdpbench.anonymizer"] == "mondrian" and t["cdpbench.privacy_model"] == "l_diversity"
    assert t["cdpbench.anonymizer.version"] == "cdpbench-classic 0.1.0"
    assert len(t["cdpbench.config_hash"]) == 16
    assert "mlflow.source.git.commit" in t
    arts = {a.path for a in c.list_artifacts(run.info.run_id)}
    assert arts == {"config.yaml", "metrics.csv", "metrics.png"}
    table = pd.read_csv(c.download_artifacts(run.info.run_id, "metrics.csv"), index_col=0)
    assert table.index.tolist() == [1, 2, 3]
    assert table["gcp_norm"].tolist() == pytest.approx([v for _, v in hist["gcp_norm"]])
    (folder,) = (cli.cwd / "outputs" / "runs").iterdir()
    assert (folder / "mlflow_run_id").read_text() == run.info.run_id


def test_a_run_without_tracking_is_recorded_later(cli, mlflow_client):
    proc = cli(*SMALL, "tracking.enabled=false")
    assert "not in MLflow" in proc.stderr and "Traceback" not in proc.stderr
    assert not (cli.cwd / "mlflow.db").exists()  # the store of the cli fixture was never opened
    (folder,) = (cli.cwd / "outputs" / "runs").iterdir()
    assert {"run.json", "config.yaml", "metrics.csv"} <= {f.name for f in folder.iterdir()}
    assert not (folder / "metrics.png").exists()  # plots are opt-in (tracking.plot=true)
    out = cli("record", str(folder), "--experiment", "later").stdout
    c = mlflow_client(cli.uri)
    (run,) = all_runs(c)
    assert f"MLflow run {run.info.run_id} FINISHED" in out
    assert run.info.status == "FINISHED" and c.get_experiment(run.info.experiment_id).name == "later"
    assert [m.step for m in c.get_metric_history(run.info.run_id, "gcp_norm")] == [1, 2, 3]
    assert {a.path for a in c.list_artifacts(run.info.run_id)} == {"config.yaml", "metrics.csv"}
    assert "0 run(s) written" in cli("record", str(folder)).stderr  # once only
    # without --experiment: the experiment the run was configured with
    proc = cli(*SMALL, "tracking.enabled=false", "tracking.experiment=configured")
    (newer,) = [f for f in (cli.cwd / "outputs" / "runs").iterdir() if f != folder]
    assert "1 run(s) written to their experiments" in cli("record", str(newer)).stderr
    assert {c.get_experiment(r.info.experiment_id).name for r in all_runs(c)} == {"later", "configured"}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["privacy_model.k=0"], "error: privacy_model.k must be an integer >= 1 (got 0)"),
        (["anonymizer=mondrain"], "error: unknown anonymizer 'mondrain'; installed: bcf, bkaa, cell, dp_release, dp_tree, js_reduce, ksaa, m_invariance, mondrian, partitioned_mondrian, sliced_bucket, tau_safe_lk, tau_safety, tds, tds4asr"),
        (["-m", "privacy_model=k_anonymity,l_divers"], "error: unknown privacy_model 'l_divers'; installed: "),
        (["privacy_model=t_closeness", "privacy_model.t=1.5"], "error: privacy_model.t must be"),
        (["dataset.initial=0"], "error: dataset.initial must be"),
        (["metrics.query_error.selectivity=0"], "error: metrics.query_error.selectivity must be"),
    ],
)
def test_bad_parameters_give_one_line_errors_and_no_run(cli, mlflow_client, overrides, message):
    proc = cli(*SMALL, *overrides, check=False)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert lines[-1].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr
    assert [r for r in all_runs(mlflow_client(cli.uri)) if r.info.status == "RUNNING"] == []


def test_a_bad_release_is_refused_before_the_run(cli, mlflow_client):
    # the user's own releases: the second file holds a value the schema does not allow. Every
    # release is checked before the run starts (a failure mid-run: tests/test_hardening.py)
    d = cli.cwd / "data"
    d.mkdir()
    (d / "schema.yaml").write_text(
        "respondent: id\n"
        "qi:\n  - {name: age, type: numeric, low: 0, high: 100}\n"
        "  - {name: sex, type: categorical, values: [F, M]}\n"
        "sensitive: {name: disease, values: [flu, hiv, cold]}\n"
    )
    rng = np.random.default_rng(0)
    for t in (1, 2):
        frame = pd.DataFrame({"id": np.arange(40), "age": rng.integers(0, 101, 40),
                              "sex": rng.choice(["F", "M"], 40), "disease": rng.choice(["flu", "hiv", "cold"], 40)})
        if t == 2:
            frame.loc[7, "disease"] = "plague"
        frame.to_csv(d / f"release_{t}.csv", index=False)
    proc = cli("dataset=csv", "dataset.files=data/release_*.csv", "dataset.schema=data/schema.yaml",
               "privacy_model.k=3", "progress=false", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: release 2: column 'disease' has unknown value(s) ['plague']; allowed: ['flu', 'hiv', 'cold'] "
        "[file 'data/release_2.csv']")
    assert all_runs(mlflow_client(cli.uri)) == []
    assert not (cli.cwd / "outputs").exists()


def _sweep_metrics(c, parent_id):
    children = c.search_runs([c.get_run(parent_id).info.experiment_id],
                             filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    out = {}
    for r in children:
        key = (r.data.params["privacy_model.name"], r.data.params["privacy_model.k"])
        out[key] = {k: v for k, v in histories(c, r).items() if not k.startswith("time_")}
    return out, children


def test_parallel_sweep_matches_serial_sweep(cli, mlflow_client):
    grid = ["privacy_model=k_anonymity,l_diversity", "privacy_model.k=4"]
    cli("-m", *SMALL, *grid, "hydra/launcher=joblib", "hydra.launcher.n_jobs=1")
    cli("-m", *SMALL, *grid, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "--rerun")  # else resumed: 0 run
    c = mlflow_client(cli.uri)
    parents = sorted((r for r in all_runs(c) if r.data.tags.get("cdpbench.kind") == "sweep"),
                     key=lambda r: r.info.start_time)
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    serial, ch1 = _sweep_metrics(c, parents[0].info.run_id)
    parallel, ch2 = _sweep_metrics(c, parents[1].info.run_id)
    assert len(ch1) == len(ch2) == 2
    assert all(r.info.status == "FINISHED" for r in ch1 + ch2)
    assert serial == parallel
    # and the report draws them
    out = cli("report", "--parent", parents[1].info.run_id, "--metric", "gain_rho").stdout
    assert "plot:" in out and "summary:" in out
    arts = {a.path for a in c.list_artifacts(parents[1].info.run_id, "report")}
    assert arts == {"report/gain_rho.png", "report/gain_rho.pdf", "report/gain_rho.svg", "report/gain_rho.csv",
                    "report/summary.csv", "report/report.html"}
    summary = pd.read_csv(cli.cwd / "outputs" / "reports" / parents[1].info.run_id / "summary.csv")
    assert sorted(summary["run"]) == ["privacy_model=k_anonymity", "privacy_model=l_diversity"]
    assert summary["violations"].tolist() == [0.0, 0.0]
