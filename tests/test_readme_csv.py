"""The README's "Your own data" example is real: its files load through the ``csv`` data set, its
documented error is the one raised, and its command runs end to end."""

import re
import shlex

import numpy as np
import pytest

from conftest import REPO
from cdpbench.datasets.csvfiles import CsvReleases, CsvReleasesParams
from cdpbench.errors import DataError


def readme_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("## Your own data: the CSV schema")
    return text[start : text.index("\n## ", start)]


def readme_files() -> dict[str, str]:
    """{path: content} of every fenced block marked ``<!-- file: PATH -->``."""
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", readme_section(), re.S))


def test_every_example_file_is_named_where_a_reader_sees_it():
    """The ``<!-- file: -->`` markers are invisible once the README is rendered: each file's name is
    also written as text right above its block."""
    section = readme_section()
    for path in readme_files():
        assert f"`{path}`:\n\n<!-- file: {path} -->" in section, path


def readme_command() -> list[str]:
    return shlex.split(re.search(r"<!-- command -->\n```bash\n(.*?)\n```", readme_section(), re.S).group(1))


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The README's files written into a fresh folder, which becomes the working directory."""
    files = readme_files()
    assert set(files) == {"data/schema.yaml", "data/zip.csv", "data/release_1.csv", "data/release_2.csv"}
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def dataset_from_command() -> CsvReleases:
    args = dict(a.split("=", 1) for a in readme_command()[1:])
    assert args["dataset"] == "csv"
    return CsvReleases(CsvReleasesParams(files=args["dataset.files"], schema=args["dataset.schema"]))


def test_readme_example_loads_and_checks(example):
    ds = dataset_from_command()
    assert ds.check() is None
    releases = list(ds.releases(np.random.default_rng(0)))
    assert [r.t for r in releases] == [1, 2] and [len(r) for r in releases] == [8, 8]
    schema = releases[0].schema
    assert schema.qi_names == ["age", "zip"] and schema.respondent == "id" and schema.time is None
    age, zip_ = schema.qi
    assert (age.kind, age.low, age.high) == ("numeric", 0, 100)
    assert zip_.kind == "categorical" and zip_.taxonomy.height == 3 and len(zip_.values) == 6
    assert schema.sensitive.name == "disease" and schema.sensitive.values == ("flu", "cold", "hiv", "cancer")
    assert set(releases[0].respondent.tolist()) ^ set(releases[1].respondent.tolist()) == {2, 7, 9, 10}


def test_readme_example_error_is_the_one_raised(example):
    documented = re.search(r"`error: (release 3: .*?)`", readme_section(), re.S).group(1)
    documented = " ".join(documented.split())  # the README wraps it over two lines
    bad = (example / "data/release_2.csv").read_text().replace("\n9,29,", "\n9,190,")
    (example / "data/release_3.csv").write_text(bad)
    with pytest.raises(DataError) as e:
        dataset_from_command().check()
    assert str(e.value) == documented


@pytest.mark.slow
def test_readme_command_runs(example, cli, mlflow_client):
    assert cli.cwd == example
    command = readme_command()
    assert command[0] == "cdpbench"
    cli(*command[1:], "progress=false")
    client = mlflow_client(cli.uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED"
    violations = client.get_metric_history(run.info.run_id, "violations")
    assert sorted((m.step, m.value) for m in violations) == [(1, 0.0), (2, 0.0)]
