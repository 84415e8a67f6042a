"""The scale benchmark (benchmarks/bench_scale.py, issue #28) measures what it promises: every
plugin of the kinds it covers has a row, every row of the README's table is a measured component,
and a small run writes a status, a time and a peak for each component of its case."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cdpbench.registry import default_registry

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


def test_every_anonymizer_verifier_and_metric_is_measured_by_one_case(bench):
    reg = default_registry()
    reported = [k for c in bench.CASES for k in c.reports]
    assert len(reported) == len(set(reported)), "a component is reported by two cases"
    for kind, prefix in (("anonymizer", "anonymizer"), ("privacy_model", "verifier"), ("metric", "metric")):
        missing = sorted(set(reg.names(kind)) - {k.split("/", 1)[1] for k in reported if k.startswith(prefix + "/")})
        assert not missing, f"{kind}(s) {missing} are in no case of benchmarks/bench_scale.py"


def test_every_attacker_plugin_is_measured(bench):
    reg = default_registry()
    argv = " ".join(a for c in bench.CASES for a in c.overrides)
    for name in reg.names("attacker"):
        assert f"attacker={name}" in argv or f"name:{name}" in argv, f"attacker {name!r} is in no case"


def test_the_readme_table_has_one_row_per_measured_component(bench):
    spec = yaml.safe_load((ROOT / "experiments" / "tables" / "scale.yaml").read_text())
    rows = [r["where"]["run"] for r in spec["tables"]["scale"]["rows"]]
    assert rows == [k for c in bench.CASES for k in c.reports]


def test_the_slope_is_the_exponent_of_a_power_law(bench):
    assert bench.slope([10_000, 100_000, 1_000_000], [0.01, 0.1, 1.0]) == pytest.approx(1.0)
    assert bench.slope([100_000, 1_000_000], [0.5, 50.0]) == pytest.approx(2.0)
    assert bench.slope([100_000], [1.0]) != bench.slope([100_000], [1.0])  # nan: one point


def test_repeated_runs_keep_each_components_fastest_time_and_the_first_failure(bench):
    O = bench.Outcome
    a = O({"x": 2.0, "y": 1.0}, {"info.r": 3}, 10, 100.0, 5.0, bench.OK, "")
    b = O({"x": 1.5, "y": 1.2}, {"info.r": 3}, 10, 120.0, 4.0, bench.OK, "")
    got = bench.fastest([a, b])
    assert got.times == {"x": 1.5, "y": 1.0} and got.peak_mb == 120.0 and got.status == bench.OK
    c = O({"x": 0.5}, {}, 10, 300.0, 9.0, bench.TIME_LIMIT, "time limit 600 s")
    got = bench.fastest([a, c])
    assert got.status == bench.TIME_LIMIT and got.reason == "time limit 600 s"
    assert got.times == {"x": 2.0, "y": 1.0}  # a failed run's times are not the method's
    assert got.peak_mb == 300.0


def test_the_linear_pass_floor_is_timed_in_a_process_of_its_own_at_each_size(bench):
    rows = bench.floor_rows([2000, 20000])
    got = {(metric, n): value for run, metric, n, value in rows if run == bench.FLOOR_KEY}
    assert set(got) == {("wall_s", 2000), ("wall_s", 20000), ("exponent", 0)}
    assert 0 < got[("wall_s", 2000)] < got[("wall_s", 20000)]
    assert got[("exponent", 0)] == pytest.approx(bench.slope([2000, 20000], [got[("wall_s", 2000)], got[("wall_s", 20000)]]))


def test_a_small_run_reports_time_status_and_peak_of_every_component(tmp_path):
    out = tmp_path / "scale.csv"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--sizes", "2000", "4000",
                           "--cases", "churn_mondrian_k", "churn_m_invariance", "--repeat", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    got = {(r["run"], r["metric"], int(r["step"])): float(r["value"]) for r in rows}
    keys = [k for c in _bench().CASES if c.name in ("churn_mondrian_k", "churn_m_invariance") for k in c.reports]
    for key in keys:
        for n in (2000, 4000):
            assert got[(key, "status", n)] == 0
            assert got[(key, "wall_s", n)] >= 0
            assert got[(key, "runs", n)] == 2
            assert got[(key, "wall_s", n)] <= got[(key, "wall_s_slowest", n)]  # the fastest of the two runs
            assert 50 < got[(key, "peak_mb", n)] < 4096
            assert got[(key, "records", n)] == n + n // 80  # release 2: + 10 % - 8.75 %
        assert (key, "exponent", 0) in got  # nan: 10^6 was not run
    assert got[("anonymizer/m_invariance", "wall_s", 4000)] > 0


def test_an_unknown_case_is_refused_with_the_known_ones():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--cases", "nope"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown case(s) ['nope']" in proc.stderr and "churn_mondrian_k" in proc.stderr


def test_make_bench_runs_the_chosen_scripts_with_their_own_default_arguments(tmp_path):
    """`python -m benchmarks NAME`: the name chooses the script and is not passed on as its
    argument (bench_scale's argparse refused it); a script that ends with sys.exit(0) does not end the others."""
    spec = importlib.util.spec_from_file_location("benchmarks_main", ROOT / "benchmarks" / "__main__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main = module.main
    for name in ("bench_a", "bench_b", "bench_c"):
        (tmp_path / f"{name}.py").write_text(
            "import sys, pathlib\n"
            f"pathlib.Path(r'{tmp_path}', '{name}.argv').write_text(repr(sys.argv[1:]))\n"
            "sys.exit(0)\n")
    assert main(["bench_a", "bench_c"], here=tmp_path) == 0
    assert (tmp_path / "bench_a.argv").read_text() == "[]"
    assert (tmp_path / "bench_c.argv").read_text() == "[]"
    assert not (tmp_path / "bench_b.argv").exists()
