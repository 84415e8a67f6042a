"""Every preset (the lab's in experiments/, each plugin's in its package) composes, and each figure's sweep expands to the grid its
comment promises; one short job of each runs through the release loop."""


import math

import pytest
from hydra import compose, initialize_config_dir

from conftest import REPO
from cdpbench import runner
from cdpbench.presets import preset_names
from cdpbench.registry import register_configs

PRESETS = sorted(preset_names())  # standalone presets; folders of options (js_reduce/method, ...) are not
GRIDS = {
    "quickstart": {"+experiment/quickstart/defense": 5},
    "js_reduce/fig4": {"+experiment/js_reduce/method": 4},
    "js_reduce/fig5": {"knowledge": 3},
    "js_reduce/fig6": {"+experiment/js_reduce/method": 4},
    "js_reduce/fig7": {"privacy_model.j": 4},
    "js_reduce/fig8": {"+experiment/js_reduce/method": 4, "metrics.query_error.selectivity": 4},
    "ksaa/compare": {"+experiment/ksaa/dataset": 2, "+experiment/ksaa/anonymizer": 3, "privacy_model.k": 4},
    "ksaa/compare_own": {"+experiment/ksaa/dataset": 2, "+experiment/ksaa/anonymizer": 3, "privacy_model.inner.k": 4},
    "matrix/bkseq": {"+experiment/matrix/defense": 5},
    "matrix/churn": {"+experiment/matrix/churn_defense": 5},
    "matrix/sequential": {"+experiment/ksaa/anonymizer": 3},
    "matrix/cumulative": {"+experiment/bcf/method": 2},
    "frontier/bkseq": {"+experiment/frontier/defense": 9},
    "frontier/churn": {"+experiment/frontier/defense": 9},
    "bcf/fig1": {"dataset.attributes": 2, "dataset.d2": 3, "privacy_model.k": 5},
    "bcf/fig2": {"+experiment/bcf/method": 3, "dataset.attributes": 2, "dataset.d2": 3, "privacy_model.k": 5},
    "bayframe/fig3": {"+experiment/bayframe/estimate": 6},
    "bayframe/fig4": {"privacy_model.k": 2, "estimator.exact_up_to": 2},
    "bayframe/fig5": {"+experiment/bayframe/steps": 2, "+experiment/bayframe/compromise": 2, "estimator.exact_up_to": 2},
    "bayframe/fig6": {"+experiment/bayframe/compromise": 2, "estimator.exact_up_to": 2},
    "bayframe/fig9": {"+experiment/bayframe/defense": 6},
    "bayframe/fig11": {"+experiment/bayframe/fig11_steps": 2, "estimator.exact_up_to": 2},
    "bayframe/fig7": {"+experiment/bayframe/steps": 2, "knowledge.sigma": 3, "estimator.exact_up_to": 2},
    "bayframe/exact_up_to/fig3": {"+experiment/bayframe/estimate": 2, "estimator.exact_up_to": 8},
    "bayframe/exact_up_to/fig4": {"privacy_model.k": 1, "estimator.exact_up_to": 8},
    "bayframe/exact_up_to/fig5": {"+experiment/bayframe/steps": 2, "+experiment/bayframe/compromise": 1,
                                  "estimator.exact_up_to": 8},
    "bayframe/exact_up_to/fig6": {"+experiment/bayframe/compromise": 1, "estimator.exact_up_to": 8},
    "invariance/attack": {"+experiment/invariance/method": 4},
    "invariance/fig5": {"+experiment/invariance/method": 4},
    "invariance/fig5b": {"+experiment/invariance/method": 2, "privacy_model.m": 3},
    "invariance/fig6": {"+experiment/invariance/method": 4},
    "invariance/fig7": {"+experiment/invariance/method": 4, "metrics.query_error.selectivity": 6},
    "invariance/fig8": {"+experiment/invariance/method": 4},
    "invariance/fig9": {"+experiment/invariance/method": 4, "privacy_model.m": 5},
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


# JS-reduce Table 5 ("Values of privacy parameters used in the experiments"): the range each
# method was tried over, and in bold the value used in Figs. 3-8. k = 3 is not in Table 5:
# BayFrame (TDP 2019) §6.3.1 reports "t=0.5, k=3 and J=0.6" as JS-reduce's best setting on Bkseq.
TABLE_5 = {
    "l_diversity": {"privacy_model.l": 2},
    "t_closeness": {"privacy_model.t": 0.8},
    "bt_privacy": {"privacy_model.t": 0.8, "privacy_model.B": 0.5},
    "js_reduce": {"privacy_model.closeness.t": 0.5, "privacy_model.j": 0.6, "privacy_model.k": 3},
}


@pytest.mark.parametrize("method", sorted(TABLE_5))
def test_method_presets_use_table_5s_bold_values(method):
    cfg = compose_preset("js_reduce/fig4", f"+experiment/js_reduce/method={method}")
    for key, value in TABLE_5[method].items():
        node = cfg
        for part in key.split("."):  # privacy_model.closeness.t: js_reduce's t-closeness reference
            node = node[part]
        assert node == value, (method, key)
    if method == "l_diversity":
        assert cfg.privacy_model.variant == "distinct"  # the text introducing Table 5: "1) distinct l-diversity"


def test_figure_presets_match_the_papers_setup():
    # §7.1: 24 views of 5,000 tuples; Fig. 7 sweeps j over Table 5's range [0.2, 0.8] at t = 0.5;
    # §7.5: 10,000 random queries per expected selectivity, median error reported (Fig. 8b)
    fig4 = compose_preset("js_reduce/fig4")
    assert (fig4.dataset.name, fig4.dataset.releases, fig4.dataset.tuples) == ("bkseq", 24, 5000)
    fig7 = compose_preset("js_reduce/fig7")
    js = [float(v) for v in str(fig7.hydra.sweeper.params["privacy_model.j"]).split(",")]
    assert min(js) == 0.2 and max(js) == 0.8 and 0.6 in js and fig7.privacy_model.closeness.t == 0.5
    fig8 = compose_preset("js_reduce/fig8")
    assert fig8.metrics.query_error.queries == 10000 and fig8.metrics.query_error.form == "qi"
    # DK 1-, 2- and 3-step attackers (§7.3) and the snapshot one in the same Fig. 4 run
    attackers = {fig4.attacker.label: fig4.attacker, **fig4.extra_attackers}
    steps = sorted(a.get("steps", 3) for a in attackers.values() if a.knowledge == "dk")
    assert steps == [1, 2, 3] and any(a.knowledge == "bksv" for a in attackers.values())


def test_bayframe_presets_use_the_papers_figure_defaults():
    """BayFrame Table 12 and §6: k = 3, beta = 5, J = 0.6, CR = 0.9, sigma in {0.01, 0.1};
    JS-reduce's constraints in Figs. 3/9: k = 3, t = 0.5, J = 0.6; 24 bkseq releases."""
    for name in ("bayframe/fig4", "bayframe/fig5", "bayframe/fig6", "bayframe/fig11"):
        cfg = compose_preset(name)
        assert (cfg.privacy_model.name, cfg.privacy_model.beta, cfg.privacy_model.j) == ("j_similarity", 5.0, 0.6), name
        assert cfg.anonymizer.name == "bkaa" and cfg.dataset.releases == 24
    fig4 = compose_preset("bayframe/fig4")
    assert str(fig4.hydra.sweeper.params["privacy_model.k"]) == "3,8"
    assert {k: (v.cascading, v.sigma, v.cr) for k, v in fig4.extra_attackers.items()} == {
        "prior": ("prior", 0.1, 0.9), "posterior": ("posterior", 0.1, 0.9)}
    sigmas = {compose_preset("bayframe/fig5", f"+experiment/bayframe/compromise={c}").attacker.sigma
              for c in ("sigma1pct", "sigma10pct")}
    assert sigmas == {0.01, 0.1}
    for name in ("bayframe/fig3", "bayframe/fig9"):
        cfg = compose_preset(name)
        assert (cfg.privacy_model.name, cfg.privacy_model.k, cfg.privacy_model.closeness.t, cfg.privacy_model.j) == (
            "js_reduce", 3, 0.5, 0.6), name
    adult = compose_preset("bayframe/fig6")
    assert (adult.dataset.name, adult.knowledge.sv, adult.knowledge.correlation) == ("adult", "kernel", "uniform")


def _compose_as_swept(name, option):
    """A job of a preset's sweep: Hydra's sweeper puts the swept option before ``+experiment=``,
    so the option is merged first and the preset's own values win over it."""
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=[option, f"+experiment={name}"], return_hydra_config=True)


def _bayesian_thresholds(cfg) -> dict[str, object]:
    """exact_up_to of every Bayesian estimator of a run: the defender's and each adversary's."""
    out = {"defender": cfg.estimator.exact_up_to} if cfg.estimator.name == "bayesian" else {}
    for label, a in {cfg.attacker.label: cfg.attacker, **(cfg.extra_attackers or {})}.items():
        est = a.get("estimator")
        if est is not None and not isinstance(est, str) and est.name == "bayesian":
            out[label] = est.exact_up_to
    return out


@pytest.mark.parametrize("name,option", [
    ("bayframe/fig3", "+experiment/bayframe/estimate=bayframe_{}"), ("bayframe/fig9", "+experiment/bayframe/defense=bayframe_{}"),
    ("bayframe/fig4", None), ("bayframe/fig5", None), ("bayframe/fig6", None), ("bayframe/fig7", None), ("bayframe/fig11", None)])
def test_bayframe_presets_run_the_papers_procedure_with_the_exact_form_beside_it(name, option):
    """#26: the presets run the paper's estimator procedure (§4.3.1, exact up to 2 tuples, the
    Omega-estimate above) on the defender's side and every BayFrame adversary's alike, and the
    same figure with the exact form (exact_up_to null) for every estimator of the run."""
    from omegaconf import OmegaConf

    if option is None:
        paper, exact = compose_preset(name), compose_preset(name, "estimator.exact_up_to=null")
        assert str(paper.hydra.sweeper.params["estimator.exact_up_to"]) == "2,null"
    else:
        paper, exact = _compose_as_swept(name, option.format(1)), _compose_as_swept(name, option.format("1_exact"))
        assert "bayframe_1_exact" in str(paper.hydra.sweeper.params[option.split("=")[0]])
    for cfg, want in ((paper, 2), (exact, None)):
        OmegaConf.resolve(cfg)
        found = _bayesian_thresholds(cfg)
        assert len(found) >= 2 and set(found.values()) == {want}, (name, found)
    if name == "bayframe/fig9":  # BayFrame's adversaries against JS-reduce's defense: the paper's procedure
        js = _compose_as_swept(name, "+experiment/bayframe/defense=jsreduce_1")
        OmegaConf.resolve(js)
        assert _bayesian_thresholds(js) == {"bf1": 2, "bf2": 2}


def test_bcf_presets_use_the_papers_setup():
    """BCF §6: k in {40..200}, 200D2 / 2000D2 / allD2, Sen1 and Sen3; one k shared by the
    anonymizer, the verifier and the attacker; k-anonymized D2 publishes the increment alone."""
    fig1 = compose_preset("bcf/fig1")
    params = {k: str(v) for k, v in fig1.hydra.sweeper.params.items()}
    assert params == {"dataset.attributes": "sen1,sen3", "dataset.d2": "200,2000,30162", "privacy_model.k": "40,80,120,160,200"}
    assert (fig1.dataset.name, fig1.anonymizer.name, fig1.privacy_model.name, fig1.attacker.name) == (
        "adult_cumulative", "tds", "k_anonymity", "correspondence")
    bcf = compose_preset("bcf/fig2", "+experiment/bcf/method=bcf_r2", "privacy_model.k=120")
    assert (bcf.anonymizer.name, bcf.privacy_model.name) == ("bcf", "bcf_anonymity")
    assert bcf.anonymizer.k is None and bcf.privacy_model.k == bcf.attacker.k == 120  # the anonymizer reads the model's k
    d2 = compose_preset("bcf/fig2", "+experiment/bcf/method=k_anonymized_d2")
    assert (d2.dataset.name, d2.anonymizer.name, d2.attacker.name) == ("adult_increments", "tds", "none")


def test_presets_are_parsed_once_until_a_file_changes(tmp_path, monkeypatch):
    """A sweep checks its +experiment override once per job: the presets are parsed once per
    process, and a preset added or edited is seen at once."""
    import cdpbench.presets as ec

    (tmp_path / "group").mkdir()
    (tmp_path / "a.yaml").write_text("# @package _global_\ndefaults:\n  - /experiment/group: x\n")
    (tmp_path / "group" / "x.yaml").write_text("# @package _global_\nseed: 1\n")
    monkeypatch.setattr(ec, "experiments_dir", lambda: tmp_path)
    monkeypatch.setattr(ec, "_plugin_sources", lambda: ())  # the lab's folder alone
    parsed = []
    real = ec._scan
    monkeypatch.setattr(ec, "_scan", lambda folder: parsed.append(folder) or real(folder))
    ec._parsed_presets.cache_clear()
    assert ec.preset_names() == ["a"]
    assert ec.preset_options("+experiment/group") == ["x"]
    assert ec.preset_names() == ["a"]
    assert len(parsed) == 1
    (tmp_path / "b.yaml").write_text("# @package _global_\nseed: 2\n")
    assert ec.preset_names() == ["a", "b"]
    (tmp_path / "group" / "y.yaml").write_text("# @package _global_\nseed: 3\n")
    assert ec.preset_options("experiment/group") == ["x", "y"]
    assert len(parsed) == 3
    ec._parsed_presets.cache_clear()


def test_table_specs_and_results_are_not_presets():
    """experiments/tables/*.yaml (cdpbench tables' specs) are YAML but no presets: they are not
    listed, and +experiment= refuses them."""
    from cdpbench.presets import option_groups
    from cdpbench.launch import check_preset

    assert (REPO / "experiments" / "tables" / "attacks.yaml").is_file()
    assert not [n for n in PRESETS if n.split("/")[0] in ("tables", "results")]
    assert not [g for g in option_groups() if g.split("/")[1] in ("tables", "results")]

    class Override:  # the two attributes check_preset reads of Hydra's parsed override
        key_or_group = "experiment"

        def is_sweep_override(self):
            return False

        def value(self):
            return "tables/attacks"

    with pytest.raises(Exception, match="'tables/attacks' is not a preset"):
        check_preset(Override(), "+experiment=tables/attacks")


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_every_job_of_every_preset_passes_the_checks_of_a_launch(name):
    """Every job of a preset's sweep composes and passes the checks a launch makes before anything
    runs (one job alone is run above). A shared option changed for one preset once broke another
    preset's fifth job (matrix/bkseq's BKAA defense took bayframe/fig9's option)."""
    from hydra.core.global_hydra import GlobalHydra

    from cdpbench import launch

    hydra = launch.hydra_instance(REPO / "conf")
    try:
        plan = launch.prepare(hydra, [f"+experiment={name}"], multirun=True)
    finally:
        GlobalHydra.instance().clear()
    assert len(plan.jobs) == math.prod(GRIDS[name].values())
