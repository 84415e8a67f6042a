"""Every preset in experiments/ composes, and each figure's sweep expands to the grid its
comment promises; one short job of each runs through the release loop."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from conftest import REPO
from cdpbench import runner
from cdpbench.registry import register_configs

PRESETS = sorted(p.relative_to(REPO / "experiments").with_suffix("").as_posix()
                 for p in (REPO / "experiments").rglob("*.yaml") if "method" not in p.parts)
GRIDS = {
    "quickstart": {"privacy_model": 3, "privacy_model.k": 3},
    "js_reduce/fig4": {"+experiment/js_reduce/method": 4},
    "js_reduce/fig5": {"knowledge": 3},
    "js_reduce/fig6": {"+experiment/js_reduce/method": 4},
    "js_reduce/fig7": {"privacy_model.j": 4},
    "js_reduce/fig8": {"+experiment/js_reduce/method": 4, "metrics.query_error.selectivity": 4},
}


def compose_preset(name, *overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[f"+experiment={name}", *overrides], return_hydra_config=True)


def test_every_preset_has_a_documented_grid():
    assert set(PRESETS) == set(GRIDS)
    readme = (REPO / "experiments" / "README.md").read_text()
    for name in PRESETS:
        assert f"+experiment={name}" in readme, name


@pytest.mark.parametrize("name", PRESETS)
def test_preset_sweeps_its_grid_and_one_job_runs(name):
    cfg = compose_preset(name)
    params = dict(cfg.hydra.sweeper.params)
    assert {k: len(str(v).split(",")) for k, v in params.items()} == GRIDS[name]
    # one job of the grid: the first value of every swept parameter, 2 short releases
    job = [f"{k}={str(v).split(',')[0]}" for k, v in params.items()]
    small = ["dataset.releases=2", "progress=false"]
    if cfg.dataset.name == "bkseq":
        small.append("dataset.tuples=400")
    cfg = compose_preset(name, *job, *small)
    table = runner.run_releases(cfg, runner.build(cfg), progress=False)
    assert len(table) == 2 and (table["violations"] == 0).all()
