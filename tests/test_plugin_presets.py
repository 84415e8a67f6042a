"""Presets ship with their plugin (entry-point group ``cdpbench.presets``), are listed with the
distribution that ships them, and run like the lab's own; a plugin's preset folder is served at
``experiment/<namespace>`` and nowhere else.

``tests/thirdparty`` is a distribution with presets and no code, found by its entry point when the
folder is on ``PYTHONPATH``, as any installed plugin is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cdpbench import presets
from cdpbench.preset_source import PluginPresets

from conftest import CDPBENCH, REPO

THIRDPARTY = Path(__file__).parent / "thirdparty"
SHIPPED = {"bayframe": "cdpbench-bayframe", "bcf": "cdpbench-bcf", "invariance": "cdpbench-invariance",
           "js_reduce": "cdpbench-jsreduce", "ksaa": "cdpbench-ksaa"}


def run(tmp_path, *args, pythonpath: str | os.PathLike = THIRDPARTY):
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "CDPBENCH_CONF": str(REPO / "conf"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    return subprocess.run([str(CDPBENCH), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_the_papers_presets_come_from_their_plugins():
    by_name = {p.name: p for p in presets._scan()}
    for namespace, owner in SHIPPED.items():
        names = [n for n in by_name if n.startswith(namespace + "/")]
        assert names, namespace
        assert {by_name[n].owner for n in names} == {owner}, namespace
        folder = by_name[names[0]].path.resolve()
        assert f"/plugins/{owner}/src/" in folder.as_posix(), folder
    lab = {p.name for p in by_name.values() if p.owner == presets.LAB}
    assert "quickstart" in lab and any(n.startswith("matrix/") for n in lab)
    assert not any(n.split("/")[0] in SHIPPED for n in lab)  # nothing left behind in experiments/
    assert not any((REPO / "experiments" / ns).exists() for ns in SHIPPED)


def test_experiments_lists_a_third_partys_presets_with_their_distribution(tmp_path):
    proc = run(tmp_path, "experiments")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "thirdparty/demo   (from cdpbench-thirdparty)" in lines
    assert "options of experiment/thirdparty/model: k3, l2   (from cdpbench-thirdparty)" in lines
    assert "bayframe/fig3   (from cdpbench-bayframe)" in lines
    assert "quickstart" in lines  # the lab's own: no owner shown


def test_experiments_keeps_a_presets_lists_as_lines():
    """A comment's indented list (matrix/churn's defenses and attackers) stays one item a line; running
    comment lines are joined into a paragraph and wrapped."""
    from cdpbench.experiments_cmd import experiments_lines

    lines = experiments_lines()
    at = lines.index("matrix/churn")
    block = lines[at + 1: lines.index("", at)]
    assert block[0].startswith("    The attack matrix on Adult churn (attack-matrix issue): the invariance family")
    assert any(line.startswith("      defenses: ") for line in block)
    assert any(line.startswith("      attackers: ") for line in block)
    (defenses,) = [i for i, line in enumerate(block) if line.startswith("      defenses: ")]
    assert block[defenses + 1].strip() == "distinct 2-diversity"  # the item's own continuation line, not the next paragraph
    quick = lines[lines.index("quickstart") + 1: lines.index("", lines.index("quickstart"))]
    assert "      snapshot defenses      Mondrian + 4-anonymity, Mondrian + distinct 4-diversity" in quick
    assert quick[-2].startswith("    run:     cdpbench -m +experiment=quickstart")


def test_a_third_partys_preset_sweeps_on_a_launcher_with_workers(tmp_path):
    """joblib's workers compose each job themselves: the preset source reaches them."""
    proc = run(tmp_path, "-m", "+experiment=thirdparty/demo", "tracking.enabled=false", "hydra/launcher=joblib",
               "hydra.launcher.n_jobs=2")
    assert proc.returncode == 0, proc.stderr
    assert "sweep: 2 jobs FINISHED, 2 run" in proc.stderr + proc.stdout
    for job in ("0", "1"):
        overrides = next((tmp_path / "outputs" / "multirun").glob(f"*/{job}/.hydra/overrides.yaml")).read_text()
        assert "+experiment=thirdparty/demo" in overrides


def test_an_unknown_preset_of_a_plugin_namespace_is_a_one_line_error(tmp_path):
    proc = run(tmp_path, "+experiment=thirdparty/nope", "tracking.enabled=false")
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert "thirdparty/nope" in last and "thirdparty/demo" in last and "Traceback" not in proc.stderr


def _distribution(root: Path, name: str, entry_points: str, package: str | None = "pkg_presets") -> Path:
    """A distribution folder with ``entry_points`` under cdpbench.presets and one preset."""
    info = root / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[cdpbench.presets]\n" + entry_points)
    if package:
        folder = root / package
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
        (folder / "one.yaml").write_text("# @package _global_\n# one\nseed: 1\n")
    return root


@pytest.mark.parametrize(
    "entry, message",
    [
        ("matrix = pkg_presets\n", r"cdpbench-bad ships presets under matrix/, which .*/matrix already has: rename one"),
        ("Bad-Name = pkg_presets\n", r"entry point Bad-Name = 'pkg_presets' of cdpbench-bad .*: the name must be lower-case"),
        ("nowhere = pkg_missing\n", r"entry point nowhere = 'pkg_missing' of cdpbench-bad .*: the value must name a package"),
        ("bayframe = pkg_presets\n", r"cdpbench-(bad|bayframe) ships presets under bayframe/ already"),
    ],
)
def test_a_plugin_that_ships_presets_wrongly_is_named_in_a_one_line_error(tmp_path, entry, message):
    root = _distribution(tmp_path / "site", "cdpbench-bad", entry)
    proc = run(tmp_path, "experiments", pythonpath=root)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    assert re.search(message, proc.stderr.strip().splitlines()[-1]), proc.stderr


def test_the_source_serves_the_mount_and_nothing_else(tmp_path):
    folder = tmp_path / "presets"
    (folder / "group").mkdir(parents=True)
    (folder / "fig.yaml").write_text("# @package _global_\nseed: 3\n")
    (folder / "group" / "a.yaml").write_text("seed: 4\n")
    (tmp_path / "secret.yaml").write_text("seed: 5\n")
    (folder / "link.yaml").symlink_to(tmp_path / "secret.yaml")
    source = PluginPresets("cdpbench-x", f"cdpbench-presets://ns@{folder}")

    assert source.is_config("experiment/ns/fig") and source.load_config("experiment/ns/fig").config.seed == 3
    assert source.load_config("experiment/ns/fig").header["package"] == "_global_"
    assert source.is_group("experiment/ns/group") and source.is_config("experiment/ns/group/a")
    assert source.list("", None) == ["experiment"]
    assert source.list("experiment", None) == ["ns"]
    assert source.list("experiment/ns", None) == ["fig", "group"]  # the link leaves the folder: not listed
    # nothing outside experiment/ns, nothing that resolves outside the folder
    for path in ("config", "fig", "experiment/fig", "experiment/other/fig", "hydra/launcher/fig",
                 "experiment/ns/../../secret", "experiment/ns/link", "experiment/nsx/fig"):
        assert not source.is_config(path), path
    with pytest.raises(IOError):
        source.load_config("experiment/ns/link")


def test_a_plugin_folder_named_like_a_lab_folder_cannot_shadow_it(tmp_path):
    """The lab's config folder comes first on the search path: a preset of a plugin namespace
    cannot be reached through the lab's folder names (and the namespace check refuses the clash)."""
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf, symlinks=False, ignore=shutil.ignore_patterns("experiment"))
    (conf / "experiment").mkdir()
    (conf / "experiment" / "thirdparty").mkdir()
    (conf / "experiment" / "thirdparty" / "demo.yaml").write_text("# @package _global_\n# lab's\nseed: 9\n")
    env = {**os.environ, "PYTHONPATH": str(THIRDPARTY), "CDPBENCH_CONF": str(conf)}
    proc = subprocess.run([str(CDPBENCH), "experiments"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "cdpbench-thirdparty ships presets under thirdparty/, which" in proc.stderr
