"""The subcommands around runs: help, experiments, plugins (override paths) and report."""

import re

import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import REPO
from cdpbench import cli as cli_module
from cdpbench import presets as presets_module
from cdpbench.errors import CdpbenchError
from cdpbench.experiments_cmd import experiments_lines
from cdpbench.presets import preset_names, preset_options
from cdpbench.help_cmd import help_text
from cdpbench.plugins_cmd import plugins_command
from cdpbench.report import browse_hint, report_command

METHODS = ["bt_privacy", "js_reduce", "l_diversity", "t_closeness"]


def compose(*overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from cdpbench.registry import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


# ----------------------------------------------------------------------------------------- help
@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_is_cdpbench_own_page(flag, capsys):
    assert cli_module.main([flag]) == 0
    out = capsys.readouterr().out
    assert out == help_text() + "\n"
    for usage in ["cdpbench [OVERRIDES...]", "cdpbench -m [OVERRIDES...]", "hydra/launcher=joblib hydra.launcher.n_jobs=N",
                  "cdpbench plugins [KIND]", "cdpbench experiments", "cdpbench report [", "cdpbench help",
                  "cdpbench --hydra-help", "--cfg job", "MLFLOW_TRACKING_URI", "outputs/mlflow.db", "outputs/runs/"]:
        assert usage in out, usage
    assert "powered by Hydra" not in out
    assert len(out.splitlines()) <= 35


def test_help_examples_are_the_readmes_or_compose():
    readme = (REPO / "README.md").read_text()
    examples = help_text().split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(examples) >= 4
    for line in examples:
        cmd = line.strip()
        if cmd not in readme:  # not copied from the README: its overrides must compose
            cfg = compose(*cmd.split()[1:])
            assert cfg.metrics.kl_divergence.enabled is False and cfg.metrics.query_error.selectivity == 0.05


def test_help_through_the_console_script(cli):
    out = cli("--help").stdout
    assert out == help_text() + "\n"


# ---------------------------------------------------------------------------------- experiments
def test_presets_and_option_groups_of_the_repository():
    assert preset_names() == ["quickstart", "bayframe/fig3", "bayframe/fig4", "bayframe/fig5", "bayframe/fig6",
                              "bayframe/fig7", "bayframe/fig9", "bayframe/fig11", "bcf/fig1", "bcf/fig2", "frontier/bkseq", "frontier/churn", "invariance/attack", "invariance/fig5",
                              "invariance/fig5b", "invariance/fig6", "invariance/fig7", "invariance/fig8",
                              "invariance/fig9", "js_reduce/fig4", "js_reduce/fig5", "js_reduce/fig6",
                              "js_reduce/fig7", "js_reduce/fig8", "ksaa/compare", "ksaa/compare_own", "matrix/bkseq", "matrix/churn",
                              "matrix/cumulative", "matrix/sequential", "bayframe/exact_up_to/fig3",
                              "bayframe/exact_up_to/fig4", "bayframe/exact_up_to/fig5", "bayframe/exact_up_to/fig6"]
    assert preset_options("experiment/matrix/defense") == ["bkaa", "bt_privacy", "js_reduce", "l_diversity", "t_closeness"]
    assert preset_options("experiment/bayframe/estimate") == ["bayframe_1", "bayframe_1_exact", "bayframe_2", "bayframe_2_exact",
                                                            "jsreduce_1", "jsreduce_2"]
    assert preset_options("experiment/js_reduce/method") == METHODS
    assert preset_options("experiment/bcf/method") == ["bcf_r2", "k_anonymized_d2", "k_anonymized_r2"]
    assert preset_options("+experiment/js_reduce/method") == METHODS
    for bad in ["experiment/../../evil", "experiment/js_reduce", "experiment", "dataset"]:
        assert preset_options(bad) == [], bad
    assert "../../evil" not in preset_names() and "js_reduce/method/js_reduce" not in preset_names()


def test_experiments_lists_description_and_command_of_every_preset(cli):
    out = cli("experiments").stdout
    assert out.strip() == "\n".join(experiments_lines()).strip()
    blocks = {b.splitlines()[0].split("   (from ")[0]: b for b in out.split("\n\n")}
    for name in preset_names():
        block = blocks[name]
        assert f"    run:     cdpbench -m +experiment={name} hydra/launcher=joblib" in block
        assert "@package" not in block
        desc = [ln for ln in block.splitlines()[1:] if not ln.lstrip().startswith(("run:", "report:"))]
        assert desc and all(len(ln) <= 100 and "cdpbench " not in ln for ln in desc), block
    assert "Fig. 7: adversary gain against the JS-divergence threshold j" in " ".join(blocks["js_reduce/fig7"].split())
    assert "    report:  cdpbench report --latest --metric dk3.gain_rho --against privacy_model.j" in blocks["js_reduce/fig7"]
    assert f"options of experiment/js_reduce/method: {', '.join(METHODS)}   (from cdpbench-jsreduce)" in out
    assert re.search(r"^    js_reduce +JS-reduce, k = 3, t = 0.5, j = 0.6", out, re.M)
    assert "\njs_reduce/method" not in out


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_experiments_synthesizes_commands_and_finds_relative_groups(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    write(conf / "config.yaml", "seed: 0\n")
    exp = conf / "experiment"
    write(exp / "a.yaml", "# @package _global_\n# Sweeps two options.\n"
                          "hydra:\n  sweeper:\n    params:\n      +experiment/opts: x,y\n")
    write(exp / "b.yaml", "# A single run\n# on two lines.\nseed: 3\n")
    write(exp / "c.yaml", "# @package _global_\n# Includes a.\ndefaults:\n  - /experiment/a@_global_\n")
    write(exp / "opts" / "x.yaml", "# Option x.\nseed: 1\n")
    write(exp / "opts" / "y.yaml", "seed: 2\n")
    write(exp / "sub" / "d.yaml", "# @package _global_\n# Uses a relative group.\n#   cdpbench +experiment=sub/d seed=9\n"
                                  "defaults:\n  - inner@_global_: p\n")
    write(exp / "sub" / "inner" / "p.yaml", "# Inner option p.\nseed: 4\n")
    monkeypatch.setenv("CDPBENCH_CONF", str(conf))
    monkeypatch.setattr(presets_module, "_plugin_sources", lambda: ())  # this folder's presets alone
    assert preset_names() == ["a", "b", "c", "sub/d"]
    assert preset_options("experiment/opts") == ["x", "y"]
    assert preset_options("experiment/sub/inner") == ["p"]
    out = "\n".join(experiments_lines())
    assert "a\n    Sweeps two options.\n    run:     cdpbench -m +experiment=a\n" in out
    assert "b\n    A single run on two lines.\n    run:     cdpbench +experiment=b\n" in out
    assert "c\n    Includes a.\n    run:     cdpbench -m +experiment=c\n" in out  # sweeps through a
    assert "sub/d\n    Uses a relative group.\n    run:     cdpbench +experiment=sub/d seed=9\n" in out
    assert "options of experiment/opts: x, y\n" in out and "    x  Option x.\n" in out
    assert "options of experiment/sub/inner: p\n" in out


def test_experiments_without_its_folder_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    write(tmp_path / "config.yaml", "seed: 0\n")
    monkeypatch.setenv("CDPBENCH_CONF", str(tmp_path))
    with pytest.raises(CdpbenchError, match="no experiments folder at "):
        preset_names()
    assert cli_module.main(["experiments"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no experiments folder at ") and len(err.strip().splitlines()) == 1


# -------------------------------------------------------------------------------------- plugins
def plugins_output(capsys, *argv):
    assert plugins_command(list(argv)) == 0
    return capsys.readouterr().out


def test_plugins_prints_selecting_override_and_full_parameter_paths(capsys):
    out = plugins_output(capsys)
    for text in ["      use: anonymizer=mondrian\n", "      use: dataset=bkseq\n", "      use: estimator=omega\n",
                 "      use: attacker=sequential, or one more attacker in the same run:\n",
                 "+extra_attackers.<label>={name: sequential, ...}  (parameters: extra_attackers.<label>.<param>)",
                 "      use: on by default; metrics.query_error.enabled=false switches it off\n",
                 "      metrics.query_error.queries: int = 1000", "      metrics.query_error.selectivity: float = 0.1",
                 "privacy_model.k: int = 2", "attacker.steps: int = 3", "dataset.releases: int = 24",
                 "knowledge.steps: int = 3", "anonymizer.max_group: int = 0", "attacker=none: no attack"]:
        assert text in out, text
    assert not re.search(r"^\s+metric\.", out, re.M)
    assert "  query_error  [" in out and "BROKEN" not in out
    only = plugins_output(capsys, "metric")
    assert only.startswith("metric  (cdpbench.metrics)") and "anonymizer" not in only


def test_every_printed_parameter_path_exists_in_the_composed_config(capsys):
    out = plugins_output(capsys)
    checked = 0
    for block in re.split(r"\n(?=  \S)", out):
        use = re.search(r"^      use: (\w+=\w+)", block, re.M)  # metrics: "use: on by default; ..."
        paths = re.findall(r"^      (\w+(?:\.\w+)+): ", block, re.M)
        if not paths:
            continue
        cfg = compose(*([use.group(1)] if use else []))
        for path in paths:
            assert OmegaConf.select(cfg, path, default="<absent>") != "<absent>", (use and use.group(1), path)
            checked += 1
    assert checked > 40
    cfg = compose("metrics.query_error.queries=50", "privacy_model=t_closeness", "privacy_model.t=0.4",
                  "+extra_attackers.u={name: snapshot, knowledge: uniform}", "++attacker.label=snap")
    assert cfg.metrics.query_error.queries == 50 and cfg.privacy_model.t == 0.4
    assert cfg.extra_attackers.u.knowledge == "uniform" and cfg.attacker.label == "snap"


# --------------------------------------------------------------------------------------- report
@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory):
    """A sweep of three jobs (k = 2, 5, 10), the k = 10 one FAILED, and a sweep whose only job failed."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    c = MlflowClient(tracking_uri=uri)
    exp = c.create_experiment("sweeps", artifact_location=(root / "artifacts").as_uri())

    def sweep(ks, failed):
        parent = c.create_run(exp, tags={"cdpbench.kind": "sweep"}, run_name="sweep").info.run_id
        for k in ks:
            run = c.create_run(exp, run_name=f"k{k}", tags={"mlflow.parentRunId": parent, "cdpbench.kind": "job",
                                                           "cdpbench.overrides": f"privacy_model.k={k} seed=0"})
            c.log_param(run.info.run_id, "privacy_model.k", str(k))
            for step in (1, 2, 3):
                c.log_metric(run.info.run_id, "x.gain_rho", k / 10 + step / 100, step=step)
                c.log_metric(run.info.run_id, "gcp", 100 * k + step, step=step)
                c.log_metric(run.info.run_id, "rl", 1000 - 10 * k - step, step=step)
            c.set_terminated(run.info.run_id, "FAILED" if k in failed else "FINISHED")
        c.set_terminated(parent, "FINISHED")
        return parent

    parent = sweep([2, 5, 10], failed={10})
    all_failed = sweep([3], failed={3})
    return {"uri": uri, "exp": exp, "parent": parent, "all_failed": all_failed}


@pytest.fixture
def report(sweep_store, tmp_path, monkeypatch, capsys):
    """Call ``report_command`` on the store; undo the global MLflow URI it sets."""
    from mlflow.tracking._tracking_service import utils

    monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", sweep_store["uri"])

    def run(*args, parent=None):
        out = tmp_path / "report"
        assert report_command(["--parent", parent or sweep_store["parent"], "--metric", "gain_rho", *args,
                               "--tracking-uri", sweep_store["uri"], "--out", str(out)]) == 0
        return capsys.readouterr().out, pd.read_csv(out / "summary.csv"), out

    return run


def test_report_leaves_out_unfinished_runs_and_says_so(report, sweep_store):
    out, summary, folder = report()
    lines = out.splitlines()
    left = "left out 1 run that is not FINISHED (1 FAILED); --include-unfinished to include it"
    assert left in lines and lines.index(left) < next(i for i, ln in enumerate(lines) if ln.startswith("plot:"))
    assert len(summary) == 2 and set(summary["status"]) == {"FINISHED"}
    assert sorted(summary["run"]) == ["privacy_model.k=2", "privacy_model.k=5"]
    assert summary.set_index("run")["x.gain_rho"].to_dict() == pytest.approx({"privacy_model.k=2": 0.22, "privacy_model.k=5": 0.52})
    assert (folder / "gain_rho.png").stat().st_size > 0
    assert "browse:  " in out and f"ui --backend-store-uri {sweep_store['uri']}" in out
    assert f"#/experiments/{sweep_store['exp']}" in out


def test_report_includes_unfinished_runs_when_asked(report):
    out, summary, _ = report("--include-unfinished")
    assert "left out" not in out
    assert len(summary) == 3 and sorted(summary["status"]) == ["FAILED", "FINISHED", "FINISHED"]


def test_report_against_a_parameter_uses_finished_runs_only(report):
    out, summary, folder = report("--against", "privacy_model.k")
    assert "left out 1 run" in out and len(summary) == 2
    assert (folder / "gain_rho_vs_privacy_model.k.png").exists()


def test_report_against_at_a_release_takes_that_release(report, sweep_store, monkeypatch):
    from cdpbench import plots

    drawn = {}
    monkeypatch.setattr(plots, "lines_plot", lambda series, ylabel, path, **kw: drawn.update(series=series, ylabel=ylabel)
                        or path.write_bytes(b"png") and path)
    report("--against", "privacy_model.k", "--at", "2")
    (line,) = drawn["series"].values()
    assert line.to_dict() == {2.0: 0.2 + 0.02, 5.0: 0.5 + 0.02} and drawn["ylabel"] == "gain_rho at release 2"
    report("--against", "privacy_model.k")
    (line,) = drawn["series"].values()
    assert line.to_dict() == pytest.approx({2.0: 0.2 + 0.02, 5.0: 0.5 + 0.02})  # the mean of steps 1..3
    with pytest.raises(CdpbenchError, match=r"^--at 7: run \w+ has 'gain_rho' at releases 1..3 only$"):
        report("--against", "privacy_model.k", "--at", "7")
    with pytest.raises(CdpbenchError, match="--at RELEASE goes with --against"):
        report("--at", "2")


def test_report_ru_map_pairs_loss_and_risk_per_release(report, sweep_store):
    from mlflow.tracking import MlflowClient

    from cdpbench.report import _histories, _ru_points

    out, summary, folder = report("--ru")
    assert (folder / "ru_gcp_rl.png").stat().st_size > 0 and len(summary) == 2
    c = MlflowClient(tracking_uri=sweep_store["uri"])
    runs = [r for r in c.search_runs([sweep_store["exp"]]) if r.info.run_name == "k5"]
    points = _ru_points(runs, {r.info.run_id: _histories(c, r) for r in runs}, {runs[0].info.run_id: "k5"}, "rl", "gcp")
    x, y = points["k5"]
    assert x.tolist() == [949, 948, 947] and y.tolist() == [501, 502, 503]
    with pytest.raises(CdpbenchError, match="--risk/--loss"):
        report("--ru", "--risk", "nothing")


def test_report_frontier_is_one_point_per_run(report, sweep_store):
    """``--ru --frontier``: each run's (risk, loss) as the mean over the releases (rl 949, 948, 947
    and gcp 501, 502, 503 for k5: the point (948, 502)), or the values at ``--at``."""
    out, summary, folder = report("--ru", "--frontier")
    data = pd.read_csv(folder / "frontier_gcp_rl.csv").set_index("series")
    assert (folder / "frontier_gcp_rl.png").stat().st_size > 0 and len(data) == 2
    assert data.loc["privacy_model.k=5"].to_dict() == {"rl": 948.0, "gcp": 502.0}
    _, _, folder = report("--ru", "--frontier", "--at", "3")
    assert pd.read_csv(folder / "frontier_gcp_rl.csv").set_index("series").loc["privacy_model.k=5"].to_dict() == {"rl": 947.0, "gcp": 503.0}
    with pytest.raises(CdpbenchError, match=r"^--at 9: run privacy_model.k=\d has .rl. and .gcp. at releases 1..3 only$"):
        report("--ru", "--frontier", "--at", "9")
    with pytest.raises(CdpbenchError, match="--frontier goes with --ru"):
        report("--frontier")


def test_report_without_finished_runs_is_a_one_line_error(report, sweep_store):
    with pytest.raises(CdpbenchError, match=r"^no FINISHED run in sweep \(1 FAILED\); --include-unfinished to use them anyway$"):
        report(parent=sweep_store["all_failed"])
    _, summary, _ = report("--include-unfinished", parent=sweep_store["all_failed"])
    assert summary["status"].tolist() == ["FAILED"]


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("http://tracking.example:5000", "http://tracking.example:5000/#/experiments/7/runs"),
        ("https://mlflow.example.org/", "https://mlflow.example.org/#/experiments/7/runs"),
    ],
)
def test_browse_hint_for_a_tracking_server_is_its_ui(uri, expected):
    assert browse_hint(uri, "7") == expected


@pytest.mark.parametrize("uri", ["sqlite:////tmp/x/mlflow.db", "postgresql://me@db.example/mlflow"])
def test_browse_hint_for_a_database_is_the_mlflow_ui_command(uri):
    hint = browse_hint(uri, "7")
    assert re.fullmatch(rf"\S*mlflow ui --backend-store-uri {re.escape(uri)}   \(then open http://127\.0\.0\.1:5000/#/experiments/7/runs\)", hint)


def test_report_against_labels_configurations_by_their_other_overrides():
    from types import SimpleNamespace

    from cdpbench.report import _against

    def run(rid, method, sel, value):
        tags = {"cdpbench.overrides": f"+experiment/invariance/method={method} metrics.query_error.selectivity={sel} seed=0"}
        params = {"metrics.query_error.selectivity": str(sel), "anonymizer.name": method, "anonymizer.m": "8"}
        return (SimpleNamespace(info=SimpleNamespace(run_id=rid), data=SimpleNamespace(tags=tags, params=params)),
                {"q": pd.Series({1: value, 2: 2 * value})})

    pairs = [run("a", "m_invariance", 0.1, 1.0), run("b", "m_invariance", 0.2, 3.0), run("c", "sliced_bucket", 0.1, 5.0)]
    runs, histories = [r for r, _ in pairs], {r.info.run_id: h for r, h in pairs}
    series = _against(runs, histories, "q", "metrics.query_error.selectivity", at=2)
    assert {k: v.to_dict() for k, v in series.items()} == {"method=m_invariance": {0.1: 2.0, 0.2: 6.0},
                                                           "method=sliced_bucket": {0.1: 10.0}}


def test_report_against_panels_split_configurations_by_the_panel_parameters():
    """BCF Fig. 2's layout: one panel per (attributes, d2), one line per method in each."""
    from types import SimpleNamespace

    from cdpbench.report import _against

    def run(rid, method, attributes, k, value):
        tags = {"cdpbench.overrides": f"+experiment/bcf/method={method} dataset.attributes={attributes} privacy_model.k={k}"}
        params = {"privacy_model.k": str(k), "dataset.attributes": attributes, "anonymizer.name": method}
        return (SimpleNamespace(info=SimpleNamespace(run_id=rid), data=SimpleNamespace(tags=tags, params=params)),
                {"cost": pd.Series({1: 0.0, 2: value})})

    pairs = [run("a", "bcf_r2", "sen1", 40, 0.1), run("b", "bcf_r2", "sen1", 80, 0.2), run("c", "k_anonymized_d2", "sen1", 40, 0.5),
             run("d", "bcf_r2", "sen3", 40, 0.3)]
    runs, histories = [r for r, _ in pairs], {r.info.run_id: h for r, h in pairs}
    groups = _against(runs, histories, "cost", "privacy_model.k", at=2, panels=["dataset.attributes"])
    assert {p: {k: v.to_dict() for k, v in g.items()} for p, g in groups.items()} == {
        "dataset.attributes=sen1": {"method=bcf_r2": {40.0: 0.1, 80.0: 0.2}, "method=k_anonymized_d2": {40.0: 0.5}},
        "dataset.attributes=sen3": {"all runs": {40.0: 0.3}},
    }
    # a panel may also be named as the label shows it (method), and unknown names are refused
    by_method = _against(runs, histories, "cost", "privacy_model.k", at=2, panels=["method"])
    assert sorted(by_method) == ["method=bcf_r2", "method=k_anonymized_d2"]
    with pytest.raises(CdpbenchError, match=r"--panels: no run varies \['dataset.d2'\]"):
        _against(runs, histories, "cost", "privacy_model.k", at=2, panels=["dataset.d2"])


def test_report_panels_and_diagonal_draw_a_figure(report):
    out, _, folder = report("--against", "privacy_model.k", "--panels", "seed", "--diagonal")
    assert (folder / "gain_rho_vs_privacy_model.k_panels.png").stat().st_size > 0
    with pytest.raises(CdpbenchError, match="--panels and --diagonal go with --against"):
        report("--diagonal")


def test_report_matrix_cells_are_means_over_releases(report, sweep_store):
    """--matrix: one row per FINISHED run (k = 2, 5), one column per attacker label (x), cell =
    mean of x.gain_rho over releases 1..3 = k/10 + 0.02; gcp beside it; tables in three formats."""
    out, _, folder = report("--matrix", "--utility", "gcp,rl,missing")
    cells = pd.read_csv(folder / "matrix_gain_rho_table.csv").set_index("defense")
    assert list(cells.columns) == ["x", "gcp", "rl"]  # a utility metric no run has is left out
    assert cells["x"].to_dict() == pytest.approx({"privacy_model.k=2": 0.22, "privacy_model.k=5": 0.52})
    assert cells["gcp"].to_dict() == pytest.approx({"privacy_model.k=2": 202.0, "privacy_model.k=5": 502.0})
    tidy = pd.read_csv(folder / "matrix_gain_rho.csv")
    assert set(tidy.columns) == {"defense", "attacker", "gain_rho"} and len(tidy) == 2
    assert "\\toprule" in (folder / "matrix_gain_rho_table.tex").read_text()
    assert (folder / "matrix_gain_rho.pdf").stat().st_size > 0 and "table:" in out


def test_plot_series_never_share_colour_and_marker():
    """BayFrame's Fig. 5 plots 16 series: with tab10 and ten markers cycling together, series i
    and i + 10 looked the same (colour and marker)."""
    from cdpbench import plots

    styles = {(i % 10, plots._marker(i)) for i in range(100)}
    assert len(styles) == 100
