"""Repetitions over seeds (``cdpbench.repetitions``, ``cdpbench report`` on a seed sweep): bands and
tables with values checked against a direct computation, the paired test paired by seed, and
the paper-ready outputs (PDF, SVG, tidy CSV, LaTeX with booktabs rules)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cdpbench import repetitions
from conftest import SMALL


def fake_run(run_id, seed, **params):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id), data=SimpleNamespace(params={"seed": str(seed), **params}))


def test_mean_ci_is_a_percentile_bootstrap_over_seeds():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(6, 3))
    mean, low, high = repetitions.mean_ci(v)
    assert mean == pytest.approx(v.mean(axis=0))
    # the same bootstrap by hand: 2,000 resamples of the 6 seeds, 2.5% and 97.5% percentiles
    boot = np.array([v[np.random.default_rng(s).integers(0, 6, 6)].mean(axis=0) for s in range(4000)])
    assert low == pytest.approx(np.percentile(boot, 2.5, axis=0), abs=0.08)
    assert high == pytest.approx(np.percentile(boot, 97.5, axis=0), abs=0.08)
    assert np.all(low < mean) and np.all(mean < high)
    one = repetitions.mean_ci(v[:1])
    assert np.isnan(one[1]).all() and np.isnan(one[2]).all()
    flat = repetitions.mean_ci(np.full((4, 2), 0.25))
    assert flat[1].tolist() == flat[2].tolist() == [0.25, 0.25]


def test_seed_groups_labels_and_the_paired_test():
    runs = [fake_run(f"a{s}", s) for s in (0, 1, 2, 3)] + [fake_run(f"b{s}", s) for s in (3, 2, 1, 0)]
    labels = {f"a{s}": f"method=a seed={s}" for s in range(4)} | {f"b{s}": f"method=b, seed={s}" for s in range(4)}
    groups = repetitions.seed_groups(runs, labels)
    assert sorted(groups) == ["method=a", "method=b"]
    a = {0: 0.10, 1: 0.20, 2: 0.15, 3: 0.30}
    b = {0: 0.12, 1: 0.25, 2: 0.15, 3: 0.41}
    hist = {f"a{s}": {"m": pd.Series([a[s], a[s]])} for s in a} | {f"b{s}": {"m": pd.Series([b[s], b[s] + 0.02])} for s in b}
    table = repetitions.summary(groups, hist, lambda h: "m", baseline="method=a").set_index("configuration")
    mb = {s: b[s] + 0.01 for s in b}  # each run's mean over its two releases
    assert table.loc["method=b", "mean"] == pytest.approx(np.mean(list(mb.values())))
    d = np.array([mb[s] - a[s] for s in range(4)])  # paired by seed, whatever the runs' order
    t = d.mean() / (d.std(ddof=1) / 2)
    assert table.loc["method=b", "p_vs_method=a"] == pytest.approx(2 * stats.t.sf(abs(t), 3))
    assert np.isnan(table.loc["method=a", "p_vs_method=a"])
    with pytest.raises(Exception, match="--baseline 'x' is not a configuration"):
        repetitions.summary(groups, hist, lambda h: "m", baseline="x")
    # runs that share a label without being seed repetitions are not grouped
    same_seed = [fake_run("c", 0), fake_run("d", 0)]
    assert repetitions.seed_groups(same_seed, {"c": "x", "d": "x"}) is None


@pytest.mark.slow
def test_report_of_a_seed_sweep_draws_bands_and_writes_tables(cli, mlflow_client):
    cli("-m", *SMALL, "privacy_model=k_anonymity,l_diversity", "seed=range(0,3)", "hydra/launcher=joblib")
    out = cli("report", "--latest", "--metric", "snapshot.gain_rho", "--baseline", "privacy_model=k_anonymity").stdout
    assert "(also .pdf and .svg" in out and "table:" in out and "seeds_snapshot.gain_rho.csv/.md/.tex" in out
    (folder,) = (cli.cwd / "outputs" / "reports").iterdir()
    for name in ("snapshot.gain_rho.png", "snapshot.gain_rho.pdf", "snapshot.gain_rho.svg", "snapshot.gain_rho.csv",
                 "seeds_snapshot.gain_rho.csv", "seeds_snapshot.gain_rho.md", "seeds_snapshot.gain_rho.tex"):
        assert (folder / name).stat().st_size > 0, name
    assert (folder / "snapshot.gain_rho.pdf").read_bytes()[:4] == b"%PDF"
    tex = (folder / "seeds_snapshot.gain_rho.tex").read_text()
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex and "privacy\\_model=l\\_diversity" in tex
    # the band's means are the means over the three seeds' runs, read back from MLflow
    c = mlflow_client(cli.uri)
    jobs = [r for r in c.search_runs([c.get_experiment_by_name("cdpbench").experiment_id], max_results=50)
            if r.data.tags.get("cdpbench.kind") == "job"]
    assert len(jobs) == 6
    data = pd.read_csv(folder / "snapshot.gain_rho.csv")
    for model in ("k_anonymity", "l_diversity"):
        mine = [r for r in jobs if r.data.params["privacy_model.name"] == model]
        per_release = np.array([[m.value for m in sorted(c.get_metric_history(r.info.run_id, "snapshot.gain_rho"),
                                                          key=lambda m: m.step)] for r in mine])
        rows = data[data["series"] == f"privacy_model={model}"].sort_values("release")
        assert rows["mean"].to_numpy() == pytest.approx(per_release.mean(axis=0))
        assert (rows["low"] <= rows["mean"] + 1e-12).all() and (rows["mean"] <= rows["high"] + 1e-12).all()
        assert set(rows["n"]) == {3}
    seeds = pd.read_csv(folder / "seeds_snapshot.gain_rho.csv").set_index("configuration")
    assert seeds["seeds"].tolist() == [3, 3] and 0 <= seeds.loc["privacy_model=l_diversity", "p_vs_privacy_model=k_anonymity"] <= 1
