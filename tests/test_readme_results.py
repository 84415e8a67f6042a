"""Every number of experiments/README.md and the plugin READMEs' result tables is rendered from a
committed results file (`cdpbench report --export`) by `cdpbench tables`; these tests check the
READMEs against those files (nothing is re-run), that a changed number is caught, that no
hand-typed table with numbers slips in, and the spec language itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import REPO
from cdpbench.tables import (
    Results,
    SpecError,
    default_files,
    load_specs,
    parse_template,
    render_readme,
    render_template,
    tables_command,
    unmarked_tables,
)

READMES = default_files(REPO)

def _problems(readme: Path) -> list[str]:
    _, diffs = render_readme(readme)
    return [str(d) for d in diffs]


def test_the_readmes_are_found():
    names = {str(p.relative_to(REPO)) for p in READMES}
    assert "experiments/README.md" in names
    assert len([n for n in names if n.startswith("plugins/")]) >= 5


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(REPO)))
def test_readme_numbers_equal_the_committed_results(readme):
    """(a) every rendered block equals its results file; every table with numbers is rendered or
    marked as not ours."""
    assert _problems(readme) == []


def test_experiments_readme_renders_blocks():
    text = (REPO / "experiments" / "README.md").read_text()
    assert text.count("<!-- table: ") >= 20 and text.count("<!-- value: ") >= 30


def _copy_readme(tmp_path: Path) -> Path:
    """experiments/README.md with its specs and results in a scratch tree."""
    exp = tmp_path / "experiments"
    exp.mkdir()
    shutil.copy(REPO / "experiments" / "README.md", exp / "README.md")
    shutil.copytree(REPO / "experiments" / "tables", exp / "tables")
    shutil.copytree(REPO / "experiments" / "results", exp / "results")
    return exp / "README.md"


def test_a_changed_number_in_the_readme_fails_naming_the_block(tmp_path, capsys):
    """(b) one digit changed in a rendered table: --check exits 1 naming block, row and column."""
    readme = _copy_readme(tmp_path)
    text = readme.read_text()
    start = text.index("<!-- table: js_reduce_fig4 -->")
    row = text.index("| JS-reduce k=3, t=0.5, j=0.6 |", start)
    cell = text.index("0.1", row)
    bad = text[:cell] + "0.9" + text[cell + 3:]
    readme.write_text(bad)
    _, diffs = render_readme(readme)
    assert [d.name for d in diffs if d.kind == "table"] == ["js_reduce_fig4"]
    assert "row 'JS-reduce k=3, t=0.5, j=0.6', column 'release 4'" in str(diffs[0])
    assert tables_command(["--check", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "table js_reduce_fig4" in out and "release 4" in out
    assert readme.read_text() == bad  # --check changes nothing
    tables_command([str(readme)])  # the default writes the block back
    _, diffs = render_readme(readme)
    assert [d for d in diffs if d.kind != "unmarked"] == []


def test_a_changed_inline_value_fails(tmp_path):
    readme = _copy_readme(tmp_path)
    text = readme.read_text()
    i = text.index("<!-- value: fig4_js_dk1_24 -->") + len("<!-- value: fig4_js_dk1_24 -->")
    readme.write_text(text[:i] + "0.135" + text[text.index("<!--", i):])
    _, diffs = render_readme(readme)
    assert [(d.kind, d.name) for d in diffs if d.kind != "unmarked"] == [("value", "fig4_js_dk1_24")]


def test_a_changed_results_file_fails(tmp_path):
    readme = _copy_readme(tmp_path)
    csv = tmp_path / "experiments" / "results" / "bayframe_fig4.csv"
    lines = csv.read_text().split("\n")
    k = next(i for i, ln in enumerate(lines) if ",posterior.gain_g," in ln)
    head, _, _ = lines[k].rpartition(",")
    lines[k] = head + ",0.9"
    csv.write_text("\n".join(lines))
    _, diffs = render_readme(readme)
    names = {d.name for d in diffs if d.kind == "table"}
    assert "bayframe_fig4" in names


def test_guard_flags_a_new_hand_typed_table(tmp_path):
    """(c) a table with a digit outside a block needs <!-- not-results: ... --> right above it."""
    text = "# t\n\nsome text\n\n| method | gain |\n|---|---|\n| a | 0.12 |\n"
    assert unmarked_tables(text) == [(5, "| method | gain |")]
    assert unmarked_tables(text.replace("some text\n", "some text\n<!-- not-results: the paper's values -->")) == []
    assert unmarked_tables("| a | b |\n|---|---|\n| x | y |\n") == []  # no digit: not a result
    assert unmarked_tables("```\n| a | 1 |\n```\n") == []  # inside a code fence
    assert unmarked_tables("<!-- table: t -->\n| a | 1 |\n<!-- /table -->\n") == []
    readme = _copy_readme(tmp_path)
    readme.write_text(readme.read_text() + "\n| new | table |\n|---|---|\n| x | 0.5 |\n")
    assert any(d.kind == "unmarked" and "| new | table |" in d.detail for d in render_readme(readme)[1])


def test_not_results_marks_are_explained():
    for readme in READMES:
        for line in readme.read_text().split("\n"):
            if line.startswith("<!-- not-results:"):
                assert len(line.removeprefix("<!-- not-results:").removesuffix("-->").strip()) > 10, line


def test_every_spec_table_and_value_is_used():
    """A spec nobody renders is a stale result: every table and value defined is in its README."""
    for readme in READMES:
        folder = readme.parent / "tables"
        if not folder.is_dir():
            continue
        spec = load_specs(folder)
        text = readme.read_text()
        unused = [n for n in spec.tables if f"<!-- table: {n} -->" not in text]
        unused += [n for n in spec.values if f"<!-- value: {n} -->" not in text]
        assert unused == [], f"{folder}: defined but not rendered: {unused}"


# ------------------------------------------------------------------ the expression language

CSV = """run,method,metric,step,value
method=a,a,gain,1,0.1
method=a,a,gain,2,0.5
method=a,a,gain,3,0.3
method=a,a,n,1,1000.0
method=a,a,n,2,2500.0
method=b,b,gain,1,0.2
method=b,b,gain,2,0.25
method=a,a,g,1,0.2
method=a,a,g,2,nan
method=a,a,g,3,0.4
sweep,,wall_s,0,44.2
"""


@pytest.fixture
def results(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text(CSV)
    return Results({"r": p})


@pytest.mark.parametrize("template, expected", [
    ("{at(gain, 2):.3f}", "0.500"),
    ("{mean(gain):.2f}", "0.30"),
    ("{min(gain)} {max(gain)}", "0.1 0.5"),
    ("{sum(n):,.0f}", "3,500"),
    ("{sum(n):d}", "3500"),
    ("{mean(gain, 2, 3):.1f}", "0.4"),
    ("{max(gain, 1, 1)}", "0.1"),
    ("{first(gain)} / {last(gain)} / {count(gain)}", "0.1 / 0.3 / 3"),
    ("{mean_defined(g):.2f} over {count(g) - undefined(g):d} of {count(g):d}", "0.30 over 2 of 3"),
    ("{mean_defined(gain):.2f} {undefined(gain):d}", "0.30 0"),
    ("{mean_defined(g, 2, 3):.2f} {mean_defined(g, 1, 2):.2f}", "0.40 0.20"),
    ("{first_step_above(gain, 0.2)}", "2"),
    ("{first_step_above(gain, 0.9)}", "never"),
    ("{first_step_below(gain, 0.4)}", "1"),
    ("{step_of_max(gain)} {step_of_min(gain)}", "2 1"),
    ("{at(gain[method=b], 2):.2f}", "0.25"),
    ("{greatest(max(gain), max(gain[method=b])):.2f} {least(1, 2, -3)}", "0.50 -3"),
    ("{(at(gain, 2) - at(gain, 1)) / at(gain, 1):.0%}", "400%"),
    ("{-at(gain, 1) * 2 + 1:.1f}", "0.8"),
    ("{abs(at(gain, 1) - at(gain, 2)):.1f}", "0.4"),
    ("{if(max(gain) > 0.4, bold(max(gain)), max(gain)):.2f}", "**0.50**"),
    ("{if(max(gain) > 0.9, bold(max(gain)), max(gain)):.2f}", "0.50"),
    ("{(at(gain, 1) < 0.2) + (at(gain, 2) < 0.2) + (at(gain, 3) < 0.2):d}", "1"),
    ("{param(method)}", "a"),
    ("{at(wall_s[run=sweep], 0):.0f} s", "44 s"),
    ("{\"text\"} and {{braces}}", "text and {braces}"),
    ("{at(gain, 2)}", "0.5"),
    ("{at(n, 1)}", "1000"),
    ("{at(gain, 2) == 0.5}", "yes"),
])
def test_expression_language(results, template, expected):
    assert render_template(template, results, {"method": "a"}) == expected


@pytest.mark.parametrize("template, where, message", [
    ("{nope(gain)}", {"method": "a"}, "unknown function 'nope'"),
    ("{__import__('os')}", {"method": "a"}, "unknown function '__import__'"),
    ("{at(missing, 1)}", {"method": "a"}, "has no metric 'missing'"),
    ("{gain}", {"method": "a"}, "needs a function"),
    ("{at(gain, 9)}", {"method": "a"}, "no step 9"),
    ("{at(gain, 1)}", {"method": "z"}, "no run with method=z"),
    ("{at(gain, 1)}", {}, "2 runs match"),
    ("{at(gain, 1)}", {"colour": "red"}, "unknown parameter"),
    ("{at(gain, 1):.3q}", {"method": "a"}, "not a number format"),
    ("{at(gain, 1):d}", {"method": "a"}, "whole number"),
    ("{at(gain, 1) / 0}", {"method": "a"}, "division by zero"),
    ("{mean(gain, 1)}", {"method": "a"}, "FROM, TO"),
    ("{mean(1)}", {"method": "a"}, "takes a metric first"),
    ("{at(gain, 1)", {"method": "a"}, "unclosed"),
    ("a } b", {"method": "a"}, "single '}'"),
    ("{at(gain, 1) +}", {"method": "a"}, "ends early"),
    ("{at(gain; 1)}", {"method": "a"}, "unexpected"),
    ("{\"a\" + 1}", {"method": "a"}, "needs a number"),
])
def test_expression_errors(results, template, where, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("'", "'")):
        render_template(template, results, where)


def test_template_parts():
    parts = parse_template("x {max(a[k=2]):.3f} y {b} z")
    assert [p[0] for p in parts] == ["x ", " y ", " z"]
    assert [p[2] for p in parts] == [".3f", "", ""]


def _spec_tree(tmp_path: Path, spec: str, readme: str) -> Path:
    (tmp_path / "tables").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.csv").write_text(CSV)
    (tmp_path / "tables" / "t.yaml").write_text(spec)
    (tmp_path / "README.md").write_text(readme)
    return tmp_path / "README.md"


SPEC = """
sources: {r: ../results/r.csv}
tables:
  t:
    source: r
    columns:
      - {header: method}
      - {header: gain 2, align: right, cell: "{at(gain, 2):.2f}"}
    rows:
      - {label: A, where: {method: a}}
      - {label: B, where: {method: b}, cells: {gain 2: "{max(gain):.3f}"}}
values:
  v: {source: r, where: {method: a}, text: "{max(gain):.1f}"}
"""


def test_render_writes_blocks_and_check_passes(tmp_path):
    readme = _spec_tree(tmp_path, SPEC, "x\n<!-- table: t -->\nold\n<!-- /table -->\nmax <!-- value: v -->?<!-- /value -->.\n")
    assert tables_command([str(readme)]) == 0
    assert readme.read_text() == ("x\n<!-- table: t -->\n| method | gain 2 |\n|---|---:|\n| A | 0.50 |\n| B | 0.250 |\n"
                                  "<!-- /table -->\nmax <!-- value: v -->0.5<!-- /value -->.\n")
    assert tables_command(["--check", str(readme)]) == 0


@pytest.mark.parametrize("spec, readme, message", [
    (SPEC, "<!-- table: nope -->\n<!-- /table -->\n", "table block 'nope' has no spec"),
    (SPEC, "<!-- value: nope --><!-- /value -->\n", "value 'nope' has no spec"),
    (SPEC.replace("{at(gain, 2):.2f}", "{at(foo, 2):.2f}"), "<!-- table: t -->\n<!-- /table -->\n",
     "t.yaml: table t, row 'A', column 'gain 2': run 'method=a' of r has no metric 'foo'"),
    (SPEC.replace("source: r\n", "source: q\n"), "<!-- table: t -->\n<!-- /table -->\n", "unknown source"),
    (SPEC.replace("../results/r.csv", "/etc/passwd"), "", "relative to the spec file"),
    (SPEC.replace("sources:", "python: x\nsources:"), "", "unknown key"),
    (SPEC + "\n  t: {source: r, text: x}\n", "", "defined twice"),
])
def test_spec_errors_name_file_table_and_cell(tmp_path, spec, readme, message):
    path = _spec_tree(tmp_path, spec, readme)
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render_readme(path)


def test_tables_module_imports_light():
    import subprocess
    import sys

    code = "import sys, cdpbench.tables; print(any(m in sys.modules for m in ('mlflow', 'matplotlib', 'pandas')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------------ the results file's format


def test_export_table_is_tidy_sorted_and_full_precision():
    from types import SimpleNamespace

    import pandas as pd

    from cdpbench.report import _sweep_params, export_table

    def run(rid, overrides):
        return SimpleNamespace(info=SimpleNamespace(run_id=rid, run_name=rid), data=SimpleNamespace(
            tags={"cdpbench.overrides": overrides}, params={}))

    runs = [run("r2", "+experiment/x/method=b +experiment=x/fig privacy_model.k=4"),
            run("r1", "+experiment/x/method=a +experiment=x/fig privacy_model.k=4")]
    hist = {"r1": {"g": pd.Series({2: 0.1 + 0.2, 1: 1 / 3})}, "r2": {"g": pd.Series({1: 0.5})}}
    text = export_table(runs, hist, _sweep_params(runs), 12.34)
    assert text == ("run,method,metric,step,value\n"
                    "method=a,a,g,1,0.3333333333333333\n"
                    "method=a,a,g,2,0.30000000000000004\n"
                    "method=b,b,g,1,0.5\n"
                    "sweep,,wall_s,0,12.3\n")
    assert export_table(list(reversed(runs)), hist, _sweep_params(runs), 12.34) == text


def test_write_results_round_trips_through_results(tmp_path):
    """The benchmarks' writer (counts exact, others to 6 significant digits) reads back as a run's series."""
    from cdpbench.tables import write_results

    path = tmp_path / "bench.csv"
    write_results(path, [("whole", "wall_s", 0, 7.123456789), ("whole", "rounds", 0, 30.0), ("loop", "wall_s", 0, 2)])
    assert path.read_text().splitlines() == ["run,metric,step,value", "whole,wall_s,0,7.12346", "whole,rounds,0,30",
                                             "loop,wall_s,0,2"]
    results = Results({"b": path})
    key = results.select({"run": "whole"})
    assert results.series[key] == {"wall_s": {0: 7.12346}, "rounds": {0: 30.0}}
