"""Registry: discovery, validated instantiation, clear errors, ConfigStore registration."""

from dataclasses import dataclass, field
from importlib import metadata

import pytest

from cdpbench.errors import ConfigError, require
from cdpbench.plugin import Metric
from cdpbench.registry import Registry, default_registry, register_configs


@dataclass
class CountParams:
    scale: float = field(default=1.0, metadata={"help": "multiplier"})

    def __post_init__(self):
        require(self.scale > 0, "scale", "> 0", self.scale)


class RecordCount(Metric):
    """Counts published records (a third-party plugin defined in a test)."""

    Params = CountParams

    def compute(self, ctx):
        return {"records": self.params.scale * len(ctx.publication)}


def third_party_registry():
    ep = metadata.EntryPoint("record_count", f"{__name__}:RecordCount", "cdpbench.metrics")
    return Registry({"metric": [ep]})


def test_builtin_plugins_are_discovered():
    reg = default_registry()
    assert {"k_anonymity", "l_diversity", "t_closeness", "beta_likeness", "bt_privacy"} <= set(reg.names("privacy_model"))
    assert "mondrian" in reg.names("anonymizer")
    assert {"adult", "churn", "csv"} <= set(reg.names("dataset"))
    assert {"utility", "record_linkage", "kl_divergence", "query_error", "belief"} <= set(reg.names("metric"))


def test_unknown_name_lists_installed_names():
    with pytest.raises(ConfigError) as e:
        default_registry().create("anonymizer", "mondrain")
    msg = str(e.value)
    assert "unknown anonymizer 'mondrain'" in msg and "mondrian" in msg
    assert "\n" not in msg


def test_a_config_cannot_name_an_import_path():
    with pytest.raises(ConfigError, match="unknown privacy_model 'os:system'"):
        default_registry().create("privacy_model", "os:system", {})


def test_invalid_parameter_value_names_the_field():
    with pytest.raises(ConfigError, match=r"^privacy_model\.k must be an integer >= 1 \(got 0\)$"):
        default_registry().create("privacy_model", "k_anonymity", {"k": 0})


def test_wrong_type_and_unknown_key_name_the_field():
    with pytest.raises(ConfigError, match=r"privacy_model\.k"):
        default_registry().create("privacy_model", "k_anonymity", {"k": "many"})
    with pytest.raises(ConfigError, match=r"privacy_model\.kk is not a parameter of privacy_model 'k_anonymity'; allowed: \['k'\]"):
        default_registry().create("privacy_model", "k_anonymity", {"kk": 3})


def test_third_party_plugin_is_created_with_typed_params():
    reg = third_party_registry()
    assert reg.names("metric") == ["record_count"]
    m = reg.create("metric", "record_count", {"scale": "2.5"})
    assert m.params.scale == 2.5
    with pytest.raises(ConfigError, match=r"^metric\.scale must be > 0 \(got -1.0\)$"):
        reg.create("metric", "record_count", {"scale": -1})
    info = reg.info("metric", "record_count")
    assert info.doc.startswith("Counts published records")
    assert info.parameters() == [("scale", "float", 1.0, "multiplier")]


def test_broken_entry_point_gives_a_clear_error():
    ep = metadata.EntryPoint("broken", "no_such_module_xyz:Thing", "cdpbench.metrics")
    with pytest.raises(ConfigError, match="could not be loaded"):
        Registry({"metric": [ep]}).create("metric", "broken")


def test_configs_registered_under_kind_groups():
    from hydra.core.config_store import ConfigStore

    register_configs()
    repo = ConfigStore.instance().repo
    assert "mondrian.yaml" in repo["anonymizer"]
    node = repo["privacy_model"]["k_anonymity.yaml"].node
    assert node["name"] == "k_anonymity" and node["k"] == 2
    assert "none.yaml" in repo["attacker"]
    assert repo["metrics"]["all.yaml"].node["utility"]["enabled"] is True
