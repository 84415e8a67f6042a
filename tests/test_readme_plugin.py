"""The README's "Writing a plugin" example is real: installed through an entry point exactly as
its pyproject says, it validates parameters and works as Mondrian's split predicate."""

import re
import sys
from importlib import metadata

import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from cdpbench.errors import ConfigError
from cdpbench.plugin import ModelContext, PublishContext
from cdpbench.registry import Registry, default_registry
from cdpbench.schema import NumericQI, Schema, Sensitive
from cdpbench.taxonomy import Taxonomy  # noqa: F401  (schema types used below)


def readme_blocks():
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Writing a plugin") :]
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    toml = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    return python, toml


@pytest.fixture
def readme_registry(tmp_path, monkeypatch):
    python, toml = readme_blocks()
    path = re.search(r"# (\S+\.py)", python).group(1)
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(python)
    monkeypatch.syspath_prepend(str(tmp_path))
    group, name, value = re.search(r'\[project\.entry-points\."([^"]+)"\]\n(\w+) = "([^"]+)"', toml).groups()
    assert group == "cdpbench.privacy_models"
    yield Registry({"privacy_model": [metadata.EntryPoint(name, value, group)]}), name
    sys.modules.pop("my_models.max_share", None)
    sys.modules.pop("my_models", None)


def test_readme_plugin_validates_and_splits_with_mondrian(readme_registry):
    reg, name = readme_registry
    with pytest.raises(ConfigError, match=r"^privacy_model\.share must be in \(0, 1\] \(got 1\.5\)$"):
        reg.create("privacy_model", name, {"share": 1.5})
    model = reg.create("privacy_model", name, {"share": 0.5, "k": 2})
    schema = Schema((NumericQI("age", 0, 100),), Sensitive("disease", ("flu", "hiv", "cold")))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"id": np.arange(60), "age": rng.integers(0, 101, 60),
                          "disease": rng.choice(["flu", "hiv", "cold"], 60)})
    release = schema.encode(frame, t=1)
    mctx = ModelContext(schema, release.sensitive_distribution(), release=release)
    mondrian = default_registry().create("anonymizer", "mondrian", {})
    pub = mondrian.publish(release, PublishContext(model, mctx, None, rng))
    counts = pub.group_counts()
    assert pub.n_groups > 1
    assert (counts.max(axis=1) <= 0.5 * counts.sum(axis=1)).all()
    assert model.verify(pub, mctx).violations == 0
    assert model.levels(pub, mctx)["share"] <= 0.5
