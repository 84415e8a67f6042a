"""Plugin references (#25 item 1): a parameter that names another plugin is a typed sub-node,
validated and built by the core with the registry the run is built with, chosen and tuned from the
command line (``attacker.estimator=permanent attacker.estimator.max_states=100``), logged to
MLflow under its nested path; a bad nested value is a one-line error naming that path."""

from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
import pytest

from cdpbench.errors import ConfigError
from cdpbench.plugin import Attacker, AttackResult, Estimator, plugin_ref, plugin_refs
from cdpbench.registry import Registry, default_registry, reference_node

from conftest import SMALL


class Flat(Estimator):
    """An estimator defined in a test: every posterior uniform."""

    def posterior(self, weights, sensitive, group, n_groups, n_values):
        return np.full((len(sensitive), n_values), 1.0 / n_values)


@dataclass
class WrapperParams:
    estimator: Any = plugin_ref("estimator", "flat", "the estimator it wraps")


class Wrapper(Attacker):
    """An attacker defined in a test that references an estimator."""

    Params = WrapperParams

    def observe(self, view, ctx):  # pragma: no cover - not run
        return AttackResult(view.respondent, self.params.estimator.posterior(None, view.sensitive, view.group, 1, 2))


def own_registry() -> Registry:
    eps = {"attacker": [metadata.EntryPoint("wrapper", f"{__name__}:Wrapper", "cdpbench.attackers")],
           "estimator": [metadata.EntryPoint("flat", f"{__name__}:Flat", "cdpbench.estimators"),
                         metadata.EntryPoint("omega", f"{__name__}:Flat", "cdpbench.estimators")]}
    return Registry(eps)


def test_references_are_built_by_the_registry_that_builds_the_plugin():
    reg = own_registry()
    w = reg.create("attacker", "wrapper")
    assert isinstance(w.params.estimator, Flat) and w.params.estimator.plugin_name == "flat"
    # a name that the default registry knows as another class: this registry's class is used
    assert type(reg.create("attacker", "wrapper", {"estimator": "omega"}).params.estimator) is Flat
    assert type(default_registry().create("attacker", "snapshot", {"estimator": "omega"}).params.estimator) is not Flat
    assert plugin_refs(WrapperParams) == {"estimator": ("estimator", "flat")}


def test_a_reference_node_may_be_a_name_a_mapping_or_nothing():
    assert reference_node(None, "omega", "estimator", "a.e") == {"name": "omega"}
    assert reference_node("permanent", "omega", "estimator", "a.e") == {"name": "permanent"}
    assert reference_node({"max_states": 5}, "permanent", "estimator", "a.e") == {"name": "permanent", "max_states": 5}
    with pytest.raises(ConfigError, match=r"^a\.e must name a plugin of kind estimator \(a\.e=NAME, a\.e\.<param>=VALUE\), "
                                          r"got \[1\]$"):
        reference_node([1], "omega", "estimator", "a.e")


def test_errors_name_the_nested_path():
    reg = default_registry()
    with pytest.raises(ConfigError, match=r"^extra_attackers\.s\.estimator\.max_states must be an integer >= 1 \(got 0\)$"):
        reg.create("attacker", "snapshot", {"estimator": {"name": "permanent", "max_states": 0}}, "extra_attackers.s")
    with pytest.raises(ConfigError, match=r"^attacker\.estimator\.iterationz is not a parameter of estimator 'permanent'"):
        reg.create("attacker", "snapshot", {"estimator": {"name": "permanent", "iterationz": 3}})
    with pytest.raises(ConfigError, match=r"^attacker\.estimator: unknown estimator 'os:system'; installed: "):
        reg.create("attacker", "snapshot", {"estimator": "os:system"})


def test_the_command_line_chooses_and_tunes_a_reference_and_mlflow_logs_it(cli, mlflow_client):
    proc = cli(*SMALL, "dataset.releases=2", "attacker=snapshot", "attacker.estimator=permanent",
               "attacker.estimator.max_states=100")
    (run,) = mlflow_client(cli.uri).search_runs(["1"])
    params = run.data.params
    assert params["attacker.estimator.name"] == "permanent" and params["attacker.estimator.max_states"] == "100"
    assert params["attacker.estimator.iterations"] == "500"  # the default, logged too
    assert params["attacker.knowledge.name"] == "kernel" and params["attacker.knowledge.bandwidth"] == "0.3"
    assert "attacker.estimator=permanent attacker.estimator.max_states=100" in run.info.run_name
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["attacker.estimator.max_states=0"], "error: attacker.estimator.max_states must be an integer >= 1 (got 0)"),
    (["attacker.estimator=nope"], "error: attacker/estimator=nope: unknown option 'nope'; attacker/estimator has: "
                                  "bayesian, configuration, frequency, omega, permanent (a group option is the name of "
                                  "an installed config)"),
    (["attacker.estimator=omega", "attacker.estimator.max_states=5"],
     "error: attacker.estimator.max_states is not a parameter of estimator 'omega'; allowed: []"),
])
def test_a_bad_reference_is_one_line_before_anything_runs(cli, args, message):
    proc = cli(*SMALL, "attacker=snapshot", "attacker.estimator=permanent", *args, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [message]
    assert not (cli.cwd / "outputs").exists()


def test_a_sweep_over_a_reference(cli, mlflow_client):
    cli("-m", *SMALL, "dataset.releases=1", "attacker=snapshot", "attacker.estimator=omega,frequency")
    runs = mlflow_client(cli.uri).search_runs(["1"], "tags.`cdpbench.kind` = 'job'")
    assert sorted(r.data.params["attacker.estimator.name"] for r in runs) == ["frequency", "omega"]


def test_plugins_lists_a_reference_with_its_nested_parameters(cli):
    out = cli("plugins", "attacker").stdout
    block = out[out.index("  snapshot  "):]
    assert "attacker.estimator=omega  (estimator plugin; attacker.estimator=NAME chooses another)" in block
    assert "  attacker.knowledge.bandwidth: float = 0.3" in block


def test_no_plugin_looks_a_plugin_up_by_name():
    """Acceptance 2 of #25: plugins reach other plugins through references only."""
    import subprocess

    from conftest import REPO

    found = subprocess.run(["grep", "-rn", "default_registry", *map(str, REPO.glob("plugins/*/src"))],
                           capture_output=True, text=True).stdout
    assert found == ""


def test_every_reference_default_comes_from_a_declared_dependency():
    """#25 item 2: a plugin distribution whose plugin references another distribution's plugin by
    default lists that distribution among its dependencies (so that installing it alone works)."""
    import re
    from importlib import metadata

    from cdpbench.plugin import ENTRY_POINT_GROUPS

    reg = default_registry()
    provider = {}  # (kind, name) -> distribution
    for kind in ENTRY_POINT_GROUPS:
        for name in reg.names(kind):
            provider[(kind, name)] = reg.info(kind, name).distribution
    checked, missing = 0, []
    for kind in ENTRY_POINT_GROUPS:
        for name in reg.names(kind):
            info = reg.info(kind, name)
            requires = {re.split(r"[\s<>=!~;\[]", r, 1)[0].lower().replace("_", "-")
                        for r in metadata.requires(info.distribution) or []}
            for field_name, (ref_kind, default) in plugin_refs(info.cls.Params).items():
                checked += 1
                source = provider.get((ref_kind, default))
                if source is None:
                    missing.append(f"{kind} {name}.{field_name}: default {ref_kind} {default!r} is not installed")
                elif source not in (info.distribution, "cdpbench") and source.lower() not in requires:
                    missing.append(f"{info.distribution}: {kind} {name}.{field_name} defaults to {ref_kind} {default!r} "
                                   f"from {source}, not among its dependencies")
    assert checked >= 2 and missing == []


@dataclass
class PickyParams:
    estimator: Any = plugin_ref("estimator", "flat", "the estimator it wraps")

    def check_references(self):
        from cdpbench.errors import require

        require(self.estimator.plugin_name == "flat", "estimator", "'flat' (the only one this attacker can use)",
                self.estimator.plugin_name)


class Picky(Wrapper):
    """An attacker defined in a test whose check needs the built reference."""

    Params = PickyParams


def test_a_check_that_needs_the_built_reference_runs_after_it_and_names_the_plugins_path():
    eps = {"attacker": [metadata.EntryPoint("picky", f"{__name__}:Picky", "cdpbench.attackers")],
           "estimator": [metadata.EntryPoint("flat", f"{__name__}:Flat", "cdpbench.estimators"),
                         metadata.EntryPoint("omega", f"{__name__}:Flat", "cdpbench.estimators")]}
    reg = Registry(eps)
    assert isinstance(reg.create("attacker", "picky").params.estimator, Flat)
    with pytest.raises(ConfigError, match=r"^extra_attackers\.p\.estimator must be 'flat' \(the only one this attacker "
                                          r"can use\) \(got 'omega'\)$"):
        reg.create("attacker", "picky", {"estimator": "omega"}, "extra_attackers.p")
