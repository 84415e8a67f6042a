"""Every committed figure has a recipe (experiments/figures/figures.txt, drawn by
tools/make_figures.py from a store's latest sweeps), and every recipe names a committed figure:
anyone can draw them again, and each then names the commit and lock of its runs (#30)."""

import sys
from pathlib import Path

from conftest import REPO

FIGURES = REPO / "experiments" / "figures"
sys.path.insert(0, str(REPO / "tools"))

from make_figures import recipes  # noqa: E402


def _covered(target: str) -> set[Path]:
    if target.endswith("/"):
        return {p for p in (FIGURES / target).iterdir() if p.is_file()}
    if target.endswith(".png"):
        return {FIGURES / target}
    return {(FIGURES / target).with_suffix(".png"), (FIGURES / target).with_suffix(".tex")}


def test_every_committed_figure_has_a_recipe_and_every_recipe_a_figure():
    rs = recipes(FIGURES / "figures.txt")
    covered = set().union(*(_covered(t) for t, _, _ in rs))
    committed = {p for p in FIGURES.rglob("*") if p.is_file() and p.name != "figures.txt"}
    assert sorted(map(str, committed - covered)) == []  # a figure nobody can draw again
    assert sorted(map(str, covered - committed)) == []  # a recipe for a figure not committed
    assert len({t for t, _, _ in rs}) == len(rs)


def test_every_recipe_draws_a_presets_experiment_or_a_documented_sweep():
    text = (FIGURES / "figures.txt").read_text()
    exports = (REPO / "experiments" / "results" / "exports.txt").read_text().split()
    for target, experiment, args in recipes(FIGURES / "figures.txt"):
        assert experiment in exports or f"tracking.experiment={experiment} " in text, (target, experiment)
        assert args[:1] in (["--metric"], ["--ru"], ["--matrix"]), target
