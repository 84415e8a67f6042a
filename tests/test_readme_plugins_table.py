"""The README's "Built-in plugins" table names every plugin the installed packages register, and
its feature table names every plugin package: a plugin added without a line there fails here."""

import re

from conftest import REPO
from cdpbench.registry import default_registry

KINDS = ("dataset", "knowledge", "estimator", "privacy_model", "anonymizer", "attacker", "metric")


def section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_registered_plugin_is_in_the_built_in_plugins_table():
    table = section("Built-in plugins")
    named = set(re.findall(r"`([a-z0-9_]+)`", table))
    reg = default_registry()
    missing = {kind: [n for n in reg.names(kind) if n not in named] for kind in KINDS}
    assert {k: v for k, v in missing.items() if v} == {}


def test_the_feature_table_has_one_row_per_plugin_package():
    table = section("Built-in plugins").split("### What each family offers", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| family")]
    packages = sorted(p.name for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").exists())
    listed = sorted(n for row in rows for n in re.findall(r"cdpbench-[a-z]+", row))
    assert listed == packages
