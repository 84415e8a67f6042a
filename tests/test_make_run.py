"""``make run``, the README's first command, as a user gets it: the Makefile's ``run`` recipe is
the README's quickstart, its commands run (on a smaller table) and draw the figure the README
describes, and the committed quickstart results show what the README says the figure shows."""

from __future__ import annotations

import re
import shlex

import pandas as pd

from conftest import CDPBENCH, REPO, SMALL

DEFENSES = ["k_anonymity", "l_diversity", "m_invariance", "tau_safety", "sliced_bucket"]


def make_run_commands() -> list[list[str]]:
    """The ``run`` target's recipe lines of the Makefile, as argument lists."""
    text = (REPO / "Makefile").read_text()
    recipe = re.search(r"^run: .*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "the Makefile has no run target"
    return [shlex.split(line.strip().replace("$(BIN)/", "")) for line in recipe.group(1).splitlines()]


def test_make_run_is_the_quickstart_and_its_report():
    sweep, report = make_run_commands()
    assert sweep == ["cdpbench", "-m", "+experiment=quickstart", "hydra/launcher=joblib"]
    assert report == ["cdpbench", "report", "--latest", "--metric", "intersection.gain_rho"]
    readme = (REPO / "README.md").read_text()
    assert readme.startswith("# cdpbench\n\n```bash\nmake run ")
    assert "(5 runs into MLflow" in readme.split("\n", 4)[3]
    assert "![The collusion adversary's gain against the release for five defenses](experiments/figures/quickstart_gain_rho.png)" in readme
    assert (REPO / "experiments" / "figures" / "quickstart_gain_rho.png").is_file()


def test_make_runs_commands_run_and_draw_the_collusion_gain(cli, mlflow_client):
    sweep, report = make_run_commands()
    small = [a for a in SMALL if a != "progress=false"] + ["dataset.reinsertions=20", "progress=false"]
    proc = cli(*sweep[1:], *small, "hydra.launcher.n_jobs=2")
    assert "sweep: 5 jobs FINISHED, 5 run" in proc.stdout + proc.stderr
    c = mlflow_client(cli.uri)
    (exp,) = [e for e in c.search_experiments() if e.name == "quickstart"]
    jobs = [r for r in c.search_runs([exp.experiment_id]) if r.data.tags.get("cdpbench.kind") == "job"]
    assert sorted(r.data.params["anonymizer.name"] for r in jobs) == sorted(
        ["mondrian", "mondrian", "m_invariance", "tau_safety", "sliced_bucket"])
    for r in jobs:
        history = c.get_metric_history(r.info.run_id, "intersection.gain_rho")
        assert sorted(m.step for m in history) == [1, 2, 3]
        assert [m.value for m in history if m.step == 1] == [0.0]  # nothing to intersect at the first release
    out = cli(*report[1:]).stdout
    (png,) = re.findall(r"plot: +(\S+intersection\.gain_rho\.png)", out)
    assert (cli.cwd / png).is_file() or (REPO / png).is_file() or __import__("pathlib").Path(png).is_file()


def test_the_committed_quickstart_shows_what_the_readme_says():
    """The README's description of the figure, checked on the committed results: zero at release 1
    for every defense; the two one-release defenses' collusion gain rises at every release; τ-safety's
    and slicedBucket's stays at zero (|ρ| < 0.005); m-invariance's stays below the one-release ones'."""
    d = pd.read_csv(REPO / "experiments" / "results" / "quickstart.csv")
    gain = d[d.metric == "intersection.gain_rho"].pivot_table(index="step", columns="defense", values="value")
    assert sorted(gain.columns) == sorted(DEFENSES) and list(gain.index) == list(range(1, 13))
    assert (gain.loc[1].abs() < 1e-9).all()
    for one_release in ("k_anonymity", "l_diversity"):
        assert (gain[one_release].diff().dropna() > 0).all(), one_release
    for aware in ("tau_safety", "sliced_bucket"):
        assert gain[aware].abs().max() < 0.005, aware
    assert (gain["m_invariance"] < gain[["k_anonymity", "l_diversity"]].min(axis=1) + 1e-12).loc[2:].all()
    assert gain["m_invariance"].iloc[-1] > 0.005  # it does climb a little
