"""``cdpbench report``'s figures read at a glance and its self-contained HTML page (#27 items 3
and 4): legends sorted by value with the shared key once in the title, identical curves drawn and
labelled once, whole-number release ticks, the unit a preset states (--scale, --ylabel), the
matrix's utility columns as cells of their own scale, one spelling ("defense"), and report.html
holding the figure, the tables and every run's parameters and MLflow link, escaped, with no
resource from elsewhere."""

import base64
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import CDPBENCH, REPO, SMALL
from cdpbench import plots
from cdpbench.errors import CdpbenchError
from cdpbench.report import report_command, ui_link

# ------------------------------------------------------------------------------------ the legend


def texts(labels, merge_with=None):
    """The legend of curves named ``labels``: every curve distinct unless ``merge_with`` maps a
    label to the label whose values it repeats."""
    merge_with = merge_with or {}
    curves = {lab: pd.Series([float(i), 2.0 * i]) for i, lab in enumerate(labels)}
    for lab, same in merge_with.items():
        curves[lab] = curves[same].copy()
    title, entries = plots.legend_entries(curves)
    return title, [t for t, _ in entries]


def test_legend_is_sorted_by_value_with_the_shared_key_as_its_title():
    labels = [f"privacy_model={m} privacy_model.k={k}" for m in ("t_closeness", "k_anonymity") for k in (10, 2, 5)]
    title, shown = texts(labels)
    assert title == "privacy_model"
    assert shown == ["k_anonymity, k = 2", "k_anonymity, k = 5", "k_anonymity, k = 10",
                     "t_closeness, k = 2", "t_closeness, k = 5", "t_closeness, k = 10"]
    # one key: the values alone, numbers as numbers (text order would put 10 before 2)
    assert texts(["privacy_model.k=10", "privacy_model.k=2", "privacy_model.k=5"]) == ("privacy_model.k", ["2", "5", "10"])
    assert texts(["method=b", "method=a"]) == ("method", ["a", "b"])
    # labels from parameters (joined by ", ", report's fallback) and a metric key in brackets
    assert texts(["k=10, dataset=adult", "k=2, dataset=adult_b"]) == ("k", ["2, dataset = adult_b", "10, dataset = adult"])
    assert texts(["m=10 [x.gain]", "m=10 [a.gain]", "m=9 [x.gain]"]) == ("m", ["9 [x.gain]", "10 [a.gain]", "10 [x.gain]"])
    # a key some labels lack: no title for it; labels that are no key=value at all: natural order
    assert texts(["a=1 b=2", "b=1"]) == ("b", ["1", "2, a = 1"])
    assert texts(["k10", "k5", "all runs"]) == (None, ["all runs", "k5", "k10"])


def test_identical_curves_share_one_entry():
    labels = [f"privacy_model={m} privacy_model.k={k}" for m in ("k_anonymity", "l_diversity", "t_closeness") for k in (2, 5, 10)]
    same = {"privacy_model=t_closeness privacy_model.k=2": "privacy_model=t_closeness privacy_model.k=10",
            "privacy_model=t_closeness privacy_model.k=5": "privacy_model=t_closeness privacy_model.k=10",
            "privacy_model=l_diversity privacy_model.k=10": "privacy_model=k_anonymity privacy_model.k=10"}
    title, shown = texts(labels, same)
    assert title == "privacy_model"
    assert shown == ["k_anonymity, k = 2", "k_anonymity, k = 5", "k_anonymity / l_diversity, k = 10 (identical)",
                     "l_diversity, k = 2", "l_diversity, k = 5", "t_closeness, k = 2, 5, 10 (identical)"]
    # differing in two parts: each curve's entry, joined
    assert texts(["a=1 b=1", "a=2 b=2"], {"a=2 b=2": "a=1 b=1"})[1] == ["1, b = 1 | 2, b = 2 (identical)"]
    assert texts(["run9", "run10"], {"run10": "run9"})[1] == ["run9 / run10 (identical)"]
    # equal up to the last release only is not identical; merge=False keeps every curve
    curves = {"k=1": pd.Series([1.0, 2.0]), "k=2": pd.Series([1.0, 2.5]), "k=3": pd.Series([1.0, 2.0])}
    assert [t for t, _ in plots.legend_entries(curves)[1]] == ["1 / 3 (identical)", "2"]
    assert [t for t, _ in plots.legend_entries(curves, merge=False)[1]] == ["1", "2", "3"]


def test_whole_number_ticks():
    import matplotlib.pyplot as plt

    def ticks(xs, release):
        fig, ax = plt.subplots()
        ax.plot(xs, np.ones(len(xs)))
        plots.whole_number_ticks(ax, xs, release=release)
        fig.canvas.draw()
        lo, hi = ax.get_xlim()
        out = [t for t in ax.get_xticks() if lo <= t <= hi]
        plt.close(fig)
        return out

    assert ticks(range(1, 11), release=True) == list(range(1, 11))  # a tick at every release up to 12
    twenty = ticks(range(1, 21), release=True)  # invariance/fig5: 2.5, 7.5, ... before
    assert len(twenty) >= 3 and all(float(t).is_integer() for t in twenty)
    assert all(float(t).is_integer() for t in ticks([2, 4, 6, 8, 10], release=False))  # privacy_model.m
    assert any(not float(t).is_integer() for t in ticks([0.05, 0.1, 0.3], release=False))  # selectivity: left alone


# ------------------------------------------------------------------------- a real sweep's report


def cdpbench(cwd: Path, uri: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(REPO / "conf")}
    proc = subprocess.run([str(CDPBENCH), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Six jobs (k-anonymity and t-closeness, k = 2, 5, 10) of three releases. t-closeness's
    groups do not depend on k: its three curves are identical; k-anonymity's differ."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("sweep")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cdpbench(root, uri, "-m", *SMALL, "privacy_model=k_anonymity,t_closeness", "privacy_model.k=2,5,10")
    c = MlflowClient(tracking_uri=uri)
    (exp,) = [e for e in c.search_experiments() if e.name == "cdpbench"]
    runs = c.search_runs([exp.experiment_id], filter_string="tags.`cdpbench.kind` = 'job'")
    (parent,) = c.search_runs([exp.experiment_id], filter_string="tags.`cdpbench.kind` = 'sweep'")
    gain = {r.info.run_id: [m.value for m in sorted(c.get_metric_history(r.info.run_id, "snapshot.gain_rho"),
                                                    key=lambda m: m.step)] for r in runs}
    return {"root": root, "uri": uri, "runs": runs, "parent": parent.info.run_id, "exp": exp.experiment_id, "gain": gain}


@pytest.fixture
def drawn(monkeypatch):
    """The figures report saves (still inspectable once closed)."""
    from mlflow.tracking._tracking_service import utils

    monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)  # report_command sets MLflow's global URI
    figures = []
    save = plots.save
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig) or save(fig, path))
    return figures


def report(store: dict, out: Path, *args: str) -> Path:
    assert report_command(["--parent", store["parent"], "--tracking-uri", store["uri"], "--out", str(out), *args]) == 0
    return out


def legend_of(ax) -> tuple[str, list[str]]:
    legend = ax.get_legend()
    return legend.get_title().get_text(), [t.get_text() for t in legend.get_texts()]


def test_a_sweeps_figure_legend_lines_and_ticks(sweep, drawn, tmp_path, capsys):
    by_model = {}
    for r in sweep["runs"]:
        by_model.setdefault(r.data.params["privacy_model.name"], []).append(sweep["gain"][r.info.run_id])
    # what the figure must show: t-closeness's three runs equal at every release, k-anonymity's not
    assert len(by_model["t_closeness"]) == 3 and all(g == by_model["t_closeness"][0] for g in by_model["t_closeness"])
    assert len({tuple(g) for g in by_model["k_anonymity"]}) == 3
    report(sweep, tmp_path / "rep", "--metric", "gain_rho")
    (fig,) = drawn
    ax = fig.axes[0]
    assert legend_of(ax) == ("privacy_model", ["k_anonymity, k = 2", "k_anonymity, k = 5", "k_anonymity, k = 10",
                                               "t_closeness, k = 2, 5, 10 (identical)"])
    assert len(ax.get_lines()) == 4  # six runs, four distinct curves
    assert [line.get_ydata().tolist() for line in ax.get_lines()][3] == pytest.approx(by_model["t_closeness"][0])
    assert ax.get_xticks().tolist() == [1, 2, 3]
    # the data CSV keeps one row per run and release
    assert len(pd.read_csv(tmp_path / "rep" / "gain_rho.csv")) == 6 * 3


def test_scale_and_ylabel_draw_the_unit_a_preset_states(sweep, drawn, tmp_path):
    report(sweep, tmp_path / "pct", "--metric", "gcp_norm", "--scale", "100", "--ylabel", "GCP %")
    report(sweep, tmp_path / "raw", "--metric", "gcp_norm")
    scaled, raw = drawn
    assert scaled.axes[0].get_ylabel() == "GCP %" and raw.axes[0].get_ylabel() == "gcp_norm"
    pct, frac = pd.read_csv(tmp_path / "pct" / "gcp_norm.csv"), pd.read_csv(tmp_path / "raw" / "gcp_norm.csv")
    assert list(pct.columns) == ["series", "release", "GCP %"]
    assert pct["GCP %"].to_numpy() == pytest.approx(100 * frac["gcp_norm"].to_numpy())
    assert 1 < pct["GCP %"].max() <= 100
    report(sweep, tmp_path / "vs", "--metric", "gcp_norm", "--scale", "100", "--ylabel", "GCP %", "--against", "privacy_model.k")
    assert drawn[2].axes[0].get_ylabel() == "GCP %, mean over releases"
    assert all(float(t).is_integer() for t in drawn[2].axes[0].get_xticks())  # k = 2, 5, 10
    with pytest.raises(CdpbenchError, match="--scale and --ylabel go with a figure of one metric"):
        report(sweep, tmp_path / "m", "--matrix", "--scale", "100")
    with pytest.raises(CdpbenchError, match="--scale takes a positive finite factor"):
        report(sweep, tmp_path / "z", "--scale", "0")


class Page(HTMLParser):
    """A strict reading of the page: every element closed in order (else AssertionError), with
    the tags, their attributes and the text."""

    VOID = {"meta", "img", "br", "hr", "link", "input", "source", "col", "wbr"}

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.text = [], [], []
        self.feed(text)
        self.close()
        assert self.stack == [], self.stack

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_the_html_page_holds_the_figure_and_every_runs_config_and_link(sweep, tmp_path):
    proc = cdpbench(sweep["root"], sweep["uri"], "report", "--latest", "--metric", "gain_rho")
    out = sweep["root"] / "outputs" / "reports" / sweep["parent"]
    path = out / "report.html"
    assert f"html:    {path}  (one self-contained page" in proc.stdout
    text = path.read_text(encoding="utf-8")
    page = Page(text)
    shown = " ".join(" ".join(page.text).split())
    # the figure itself, embedded
    (img,) = [a for t, a in page.tags if t == "img"]
    assert img["src"].startswith("data:image/png;base64,")
    assert base64.b64decode(img["src"].split(",", 1)[1]) == (out / "gain_rho.png").read_bytes()
    # every run: its name, its MLflow link, every parameter and its value
    links = {a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("http")}
    expected = {ui_link(sweep["uri"], sweep["exp"]), ui_link(sweep["uri"], sweep["exp"], sweep["parent"])}
    for r in sweep["runs"]:
        expected.add(ui_link(sweep["uri"], r.info.experiment_id, r.info.run_id))
        assert r.info.run_name in shown
        assert len(r.data.params) > 20
        for key, value in r.data.params.items():
            assert f"{key} {' '.join(value.split())}" in shown, key
    assert links == expected and ui_link(sweep["uri"], "1", "ab") == "http://127.0.0.1:5000/#/experiments/1/runs/ab"
    # nothing fetched from elsewhere: no script, no style sheet or image by address; the only
    # http(s) addresses are those MLflow links
    assert not [t for t, _ in page.tags if t in ("script", "link", "iframe", "object", "embed")]
    resources = [v for _, a in page.tags for k, v in a.items() if k in ("src", "srcset", "data", "poster") and v
                 and not v.startswith("data:")]
    assert resources == []
    assert sorted(set(re.findall(r"https?://[^\s\"'<>]+", text))) == sorted(html_escaped(u) for u in expected)
    assert "@import" not in text and "url(" not in text
    # the tables: per-run means, in the legend's order
    assert "Runs: mean of each metric over releases" in shown
    first_rows = [a["href"] for t, a in page.tags if t == "a" and a.get("href", "").startswith("#run-")]
    models = [next(r for r in sweep["runs"] if f"#run-{r.info.run_id}" == h).data.params["privacy_model.k"] for h in first_rows]
    assert models == ["2", "5", "10", "2", "5", "10"]


def html_escaped(url: str) -> str:
    import html

    return html.escape(url, quote=True)


# ------------------------------------------------------------------- escaping, the matrix, spelling


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """A sweep written by hand: a run named with a <script> element and a parameter value that
    would open a tag; attacker metrics a./b.gain_rho and utility metrics for --matrix."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("crafted")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    c = MlflowClient(tracking_uri=uri)
    exp = c.create_experiment("crafted", artifact_location=(root / "artifacts").as_uri())
    parent = c.create_run(exp, tags={"cdpbench.kind": "sweep"}, run_name="<b>sweep</b>").info.run_id
    specs = [("<script>alert('x')</script>", "l_diversity", 0.2, 100.0), ("plain", "m_invariance", 0.5, 10.0)]
    for name, defense, gain, query in specs:
        run = c.create_run(exp, run_name=name, tags={"mlflow.parentRunId": parent, "cdpbench.kind": "job",
                                                     "cdpbench.overrides": f"defense={defense} note=a&b"})
        c.log_param(run.info.run_id, "defense", defense)
        c.log_param(run.info.run_id, "comment", '"><img src=x onerror=alert(1)>')
        for step in (1, 2, 3):
            c.log_metric(run.info.run_id, "a.gain_rho", gain + step / 100, step=step)
            c.log_metric(run.info.run_id, "b.gain_rho", gain / 2, step=step)
            c.log_metric(run.info.run_id, "gcp_norm", gain / 4, step=step)
            c.log_metric(run.info.run_id, "query_error_mean", query, step=step)
        c.set_terminated(run.info.run_id, "FINISHED")
    c.set_terminated(parent, "FINISHED")
    return {"uri": uri, "parent": parent, "exp": exp}


def test_the_html_page_escapes_what_runs_hold(crafted, drawn, tmp_path):
    text = (report(crafted, tmp_path, "--metric", "a.gain_rho") / "report.html").read_text()
    page = Page(text)
    assert not [t for t, _ in page.tags if t == "script"]
    assert [t for t, _ in page.tags if t == "img"] == ["img"]  # the figure only, not the parameter's
    assert "<script>" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;b&gt;sweep&lt;/b&gt;" in text and "<b>" not in text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in text and "note=a&amp;b" in text
    shown = " ".join(page.text)
    assert "<script>alert('x')</script>" in shown and '"><img src=x onerror=alert(1)>' in shown  # read back as text


def test_matrix_utility_columns_are_cells_of_their_own_scale(crafted, drawn, tmp_path):
    out = report(crafted, tmp_path, "--matrix", "--metric", "gain_rho")
    (fig,) = drawn
    heat, utility, colorbar = fig.axes
    assert heat.get_ylabel() == "defense" and [t.get_text() for t in heat.get_xticklabels()] == ["a", "b"]
    assert colorbar.get_ylabel() == "mean gain_rho over releases"
    (image,) = utility.images
    shade = np.asarray(image.get_array())
    # rows l_diversity (gcp 0.05, query error 100), m_invariance (0.125, 10): each column from its
    # own lowest (0) to its own highest (1), whatever its unit
    assert shade.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert [t.get_text() for t in utility.get_xticklabels()] == ["gcp_norm", "query_error_mean"]
    assert sorted(t.get_text() for t in utility.texts) == ["0.050", "0.125", "10.000", "100.000"]
    table = pd.read_csv(out / "matrix_gain_rho_table.csv")
    assert list(table.columns) == ["defense", "a", "b", "gcp_norm", "query_error_mean"]
    html = (out / "report.html").read_text()
    assert "Table: matrix_gain_rho_table" in html and "<th>defense</th>" in html


def test_one_spelling_defense(capsys):
    """American spelling in what report prints and in the presets' comments."""
    with pytest.raises(SystemExit):
        report_command(["--help"])
    assert "defenses" in capsys.readouterr().out
    for source in (REPO / "src" / "cdpbench" / "report.py", REPO / "src" / "cdpbench" / "plots.py"):
        assert "defence" not in source.read_text().lower(), source
    presets = [p for p in (REPO / "experiments").rglob("*.yaml") if p.parent.name != "tables"]
    presets += list(REPO.glob("plugins/*/src/*/presets/**/*.yaml"))
    assert len(presets) > 50
    assert [str(p) for p in presets if "defence" in p.read_text().lower()] == []


def test_mlflow_links_of_a_server_carry_no_credentials():
    assert ui_link("http://alice:s3cret@mlflow.example:5000/", "7", "ab") == "http://mlflow.example:5000/#/experiments/7/runs/ab"
    assert ui_link("https://tok@mlflow.example/base", "7") == "https://mlflow.example/base/#/experiments/7/runs"
    assert ui_link("postgresql://me:pw@db/mlflow", "7") == "http://127.0.0.1:5000/#/experiments/7/runs"  # `mlflow ui` serves it
