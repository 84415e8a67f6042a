"""The six built-in plugin packages follow the one layout README "Writing a plugin" describes:
each registered plugin in ``<package>/<kind folder>/<name>.py``, defining its class; nothing else
in a kind folder; tests named ``test_<kind>_<name>.py`` or ``test_<package>_<topic>.py``, unique
across the repository; READMEs with the same sections in the same order; presets shipped with
the package under its ``cdpbench.presets`` entry point."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest

from cdpbench.kinds import ENTRY_POINT_GROUPS, PRESETS_GROUP

from conftest import REPO

PACKAGES = sorted(p for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").is_file())
KIND_OF_FOLDER = {group.removeprefix("cdpbench."): kind for kind, group in ENTRY_POINT_GROUPS.items()}
SECTIONS = ["What it provides", "Plugin references", "Presets", "Readings chosen where the paper is ambiguous", "Speed"]
OPTIONAL = {"Plugin references"}


def project(package: Path) -> dict:
    return tomllib.loads((package / "pyproject.toml").read_text())["project"]


def short(package: Path) -> str:
    return package.name.removeprefix("cdpbench-")


def components(package: Path) -> list[tuple[str, str, str]]:
    """(kind folder, entry-point name, target) of every registered plugin of the package."""
    eps = project(package).get("entry-points", {})
    return [(group.removeprefix("cdpbench."), name, target)
            for group, entries in eps.items() if group != PRESETS_GROUP for name, target in entries.items()]


def test_there_are_seven_packages():
    assert [p.name for p in PACKAGES] == ["cdpbench-bayframe", "cdpbench-bcf", "cdpbench-classic", "cdpbench-dp",
                                          "cdpbench-invariance", "cdpbench-jsreduce", "cdpbench-ksaa"]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_each_plugin_is_its_own_module_in_the_folder_of_its_kind(package):
    top = "cdpbench_" + short(package)
    src = package / "src" / top
    expected_files = set()
    for folder, name, target in components(package):
        assert folder in KIND_OF_FOLDER, f"{name}: unknown entry-point group cdpbench.{folder}"
        module, _, cls = target.partition(":")
        assert module == f"{top}.{folder}.{name}", f"{folder}.{name} = {target}: the module must be {top}.{folder}.{name}"
        assert importlib.import_module(module).__dict__[cls].__module__ == module, f"{target}: defined elsewhere"
        expected_files.add(src / folder / f"{name}.py")
    for folder in KIND_OF_FOLDER:
        if (src / folder).is_dir():
            found = {p for p in (src / folder).glob("*.py") if p.name != "__init__.py"}
            assert found <= expected_files, f"not a registered plugin, belongs at the package root: {sorted(found - expected_files)}"
            assert not [p for p in (src / folder).iterdir() if p.is_dir() and p.name != "__pycache__"]
            assert "import" not in (src / folder / "__init__.py").read_text()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_tests_are_named_for_one_plugin_or_for_the_package(package):
    kinds = {(KIND_OF_FOLDER[folder], name) for folder, name, _ in components(package)}
    names = [p.name for p in (package / "tests").glob("test_*.py")]
    assert names
    for name in names:
        stem = name.removesuffix(".py").removeprefix("test_")
        assert stem.startswith(short(package) + "_") or any(
            stem == f"{kind}_{plugin}" or stem.startswith(f"{kind}_{plugin}_") for kind, plugin in kinds
        ), f"{package.name}/tests/{name}: name it test_<kind>_<plugin>.py or test_{short(package)}_<topic>.py"


def test_test_file_names_are_unique_across_the_repository():
    """pytest imports test files by name (they import each other through sys.path)."""
    names = [p.name for p in [*REPO.glob("tests/test_*.py"), *REPO.glob("plugins/*/tests/test_*.py")]]
    assert len(names) > 60 and len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_readme_sections_are_alike(package):
    text = (package / "README.md").read_text()
    title = text.splitlines()[0]
    assert re.fullmatch(rf"# {package.name} — \S.*", title), title
    headings = [h for h in re.findall(r"^## (.+)$", text, flags=re.M)]
    assert [h for h in SECTIONS if h in headings] == [h for h in headings if h in SECTIONS], headings
    assert set(SECTIONS) - OPTIONAL <= set(headings), headings
    provides = text.split("## What it provides", 1)[1].split("\n## ", 1)[0]
    for folder, name, _ in components(package):
        module = f"{folder}/{name}.py"
        assert module in provides, f"{package.name} README: {module} missing from 'What it provides'"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_presets_ship_with_their_package(package):
    top = "cdpbench_" + short(package)
    shipped = project(package).get("entry-points", {}).get(PRESETS_GROUP, {})
    folder = package / "src" / top / "presets"
    if not folder.is_dir():
        assert not shipped
        return
    assert list(shipped.values()) == [f"{top}.presets"]
    assert any(folder.rglob("*.yaml"))
    data = tomllib.loads((package / "pyproject.toml").read_text())
    assert "presets/**/*.yaml" in data["tool"]["setuptools"]["package-data"][top]  # in a wheel too
