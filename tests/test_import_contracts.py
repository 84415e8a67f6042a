"""The import contracts of pyproject.toml (#25 item 6), checked by import-linter: the core imports
no plugin, plugins do not import each other, and the core's layers hold (which also means no
import circle, lazy imports inside functions included)."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LINT = Path(sys.executable).with_name("lint-imports")


def lint(config: Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([str(LINT), "--config", str(config), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_contracts_are_kept():
    proc = lint(REPO / "pyproject.toml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


def test_a_lazy_import_against_the_layers_is_caught(tmp_path):
    """The checker sees an import made inside a function (where the old circles hid): ``cdpbench
    report`` is imported by the CLI only when that command runs, so a contract forbidding
    cli -> report must break."""
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["cdpbench"]\n\n[[tool.importlinter.contracts]]\n'
                      'name = "planted"\ntype = "forbidden"\nsource_modules = ["cdpbench.cli"]\n'
                      'forbidden_modules = ["cdpbench.report"]\n')
    proc = lint(config, tmp_path)
    assert proc.returncode == 1 and "planted BROKEN" in proc.stdout, proc.stdout
