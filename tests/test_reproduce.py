"""``cdpbench reproduce RUN_ID`` (#30 item 4): a recorded run is run again from its stored
config, without writing to the store, and every stored metric at every release is compared with
the recomputed one.

One tiny sweep (two jobs) is recorded once for the module; each test that alters the store works
on a copy of its database (the artifacts stay where the sweep wrote them):

- a job run and the sweep's parent reproduce identically, exit 0, and the store's file is
  byte-for-byte unchanged, nothing left in the working folder;
- a stored metric value altered in the database: exit 1, the metric, release, both values and the
  difference printed;
- a recorded code fingerprint altered, or absent: a warning naming the distribution, exit 0;
- an unknown run, a run that is no job or sweep, a run not FINISHED, a job without config.yaml, a
  stored config naming code (``_target_``, refused by the command line's allowlist): one-line
  errors, exit 2;
- the comparison itself on hand-made tables: NaN equals NaN, an infinity as MLflow stores it,
  wall times not compared, a metric or release on one side only reported.
"""

import hashlib
import math
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from cdpbench.reproduce import MLFLOW_INF, compare, provenance_warnings, summary_lines
from conftest import CDPBENCH, REPO

SWEEP = ["-m", "dataset.releases=2", "dataset.initial=200", "dataset.deletions=20", "dataset.insertions=20",
         "dataset.updates=20", "privacy_model.k=5,6", "progress=false"]


def _cdpbench(cwd: Path, uri: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CDPBENCH_CONF": str(REPO / "conf")}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([str(CDPBENCH), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The recorded sweep: ``{"db", "parent", "jobs": [run ids by job number]}``."""
    folder = tmp_path_factory.mktemp("sweep")
    db = folder / "mlflow.db"
    proc = _cdpbench(folder, f"sqlite:///{db}", *SWEEP)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("sweep: ") and "MLflow parent run " in ln]
    parent = line.split("MLflow parent run ")[1].rstrip(")")
    with sqlite3.connect(db) as con:
        jobs = [r for r, in con.execute("SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                                        "WHERE t.key = 'mlflow.parentRunId' AND t.value = ? ORDER BY r.start_time",
                                        (parent,))]
    assert len(jobs) == 2
    return {"db": db, "parent": parent, "jobs": jobs}


@pytest.fixture
def store(sweep, tmp_path):
    """A copy of the sweep's database in the test's folder, and a folder to run from."""
    db = tmp_path / "mlflow.db"
    shutil.copy(sweep["db"], db)
    work = tmp_path / "work"
    work.mkdir()
    return db, work


def _reproduce(db: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return _cdpbench(cwd, f"sqlite:///{db}", "reproduce", *args)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_a_job_run_is_reproduced_identically_and_nothing_is_written(sweep, store):
    db, work = store
    before, count = _digest(db), sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    run = sweep["jobs"][0]
    proc = _reproduce(db, work, run, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"run {run} (privacy_model.k=5): ")
    # 2 releases; every non-timing metric of the run compared
    con = sqlite3.connect(db)
    keys = {k for k, in con.execute("SELECT DISTINCT key FROM metrics WHERE run_uuid = ?", (run,))}
    timing = sorted(k for k in keys if k.startswith("time_"))
    assert len(timing) >= 5 and len(keys) - len(timing) >= 20
    assert lines[0].endswith(f": {len(keys) - len(timing)} metrics × 2 releases identical "
                             f"({len(timing)} timing metrics not compared)")
    assert lines[1] == f"not compared (wall times, which vary between identical runs): {', '.join(timing)}"
    assert "warning:" not in proc.stderr  # same code, inputs, environment and checkout as the sweep's
    assert proc.stderr.strip().splitlines()[-1] == "reproduce: 1 run(s) identical to their stored metrics"
    # (f) nothing written to the store, nothing left in the working folder
    assert _digest(db) == before
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == count
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_a_sweep_parent_reproduces_every_job(sweep, store):
    db, work = store
    proc = _reproduce(db, work, sweep["parent"], "--no-progress")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(" (")[0] for ln in lines[:2]] == [f"run {r}" for r in sweep["jobs"]]  # in job order
    assert [ln.split(" (")[1].split(")")[0] for ln in lines[:2]] == ["privacy_model.k=5", "privacy_model.k=6"]
    assert all(" metrics × 2 releases identical (" in ln for ln in lines[:2])
    assert proc.stderr.strip().splitlines()[-1] == "reproduce: 2 run(s) identical to their stored metrics"


@pytest.mark.slow
def test_an_altered_stored_metric_is_reported_with_both_values(sweep, store):
    db, work = store
    run = sweep["jobs"][1]
    with sqlite3.connect(db) as con:
        key, value = con.execute("SELECT key, value FROM metrics WHERE run_uuid = ? AND step = 2 AND is_nan = 0 "
                                 "AND value != 0 AND key NOT LIKE 'time_%' ORDER BY key LIMIT 1", (run,)).fetchone()
        for table in ("metrics", "latest_metrics"):
            con.execute(f"UPDATE {table} SET value = value + 0.5 WHERE run_uuid = ? AND key = ? AND step = 2", (run, key))
    proc = _reproduce(db, work, sweep["parent"], "--no-progress")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert " metrics × 2 releases identical (" in lines[0]  # the other job
    n_keys = con.execute("SELECT COUNT(DISTINCT key) FROM metrics WHERE run_uuid = ? AND key NOT LIKE 'time_%'",
                         (run,)).fetchone()[0]
    n_timing = con.execute("SELECT COUNT(DISTINCT key) FROM metrics WHERE run_uuid = ? AND key LIKE 'time_%'",
                           (run,)).fetchone()[0]
    assert lines[1] == (f"run {run} (privacy_model.k=6): 1 of {2 * n_keys} values differ ({n_keys} metrics × 2 "
                        f"releases; {n_timing} timing metrics not compared)")
    assert lines[2].split() == ["metric", "release", "stored", "now", "abs", "diff", "rel", "diff"]
    row = lines[3].split()
    assert row[:4] == [key, "2", repr(value + 0.5), repr(value)]
    assert float(row[4]) == pytest.approx(0.5) and float(row[5]) == pytest.approx(0.5 / abs(value + 0.5), rel=2e-3)
    assert proc.stderr.strip().splitlines()[-1] == "reproduce: 1 of 2 run(s) differ from their stored metrics"


@pytest.mark.slow
def test_changed_or_missing_code_fingerprints_warn_without_failing(sweep, store):
    db, work = store
    first, second = sweep["jobs"]
    with sqlite3.connect(db) as con:
        present = con.execute("SELECT value FROM tags WHERE run_uuid = ? AND key = 'cdpbench.code.cdpbench-classic'",
                              (first,)).fetchone()[0]
        con.execute("UPDATE tags SET value = 'deadbeef00000000' WHERE run_uuid = ? "
                    "AND key = 'cdpbench.code.cdpbench-classic'", (first,))
        con.execute("DELETE FROM tags WHERE run_uuid = ? AND key LIKE 'cdpbench.code.%'", (second,))
    proc = _reproduce(db, work, sweep["parent"], "--no-progress")
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: cdpbench-classic changed since the run (code fingerprint deadbeef… → {present[:8]}…)",
        f"warning: run {second} was recorded without code fingerprints (before cdpbench recorded them): its code, "
        f"input files and environment cannot be compared with the present ones"]
    assert proc.stderr.strip().splitlines()[-1] == "reproduce: 2 run(s) identical to their stored metrics"


@pytest.mark.slow
def test_refusals_are_one_line_errors(sweep, store):
    db, work = store
    job = sweep["jobs"][0]
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET status = 'FAILED' WHERE run_uuid = ?", (sweep["jobs"][1],))
        con.execute("DELETE FROM tags WHERE run_uuid = ? AND key = 'cdpbench.kind'", (sweep["parent"],))
        location = con.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (job,)).fetchone()[0]
        con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (location + "-moved", job))
    cases = {
        "0123456789abcdef": f"error: reproduce: no MLflow run with id '0123456789abcdef' in sqlite:///{db}",
        sweep["jobs"][1]: f"error: reproduce: run {sweep['jobs'][1]} is FAILED, not FINISHED: it has no complete "
                          f"metrics to compare with",
        sweep["parent"]: f"error: reproduce: run {sweep['parent']} is not a cdpbench job or sweep (its tag "
                         f"cdpbench.kind is None); give a job's run id or a sweep's parent run id",
        job: f"error: reproduce: run {job} has no config.yaml artifact: it cannot be run again",
    }
    for run, message in cases.items():
        proc = _reproduce(db, work, run, "--no-progress")
        assert (proc.returncode, proc.stdout, proc.stderr.strip().splitlines()) == (2, "", [message])
    # a stored config that names code: refused by the command line's allowlist, nothing run
    with sqlite3.connect(db) as con:
        second = sweep["jobs"][1]
        con.execute("UPDATE runs SET status = 'FINISHED' WHERE run_uuid = ?", (second,))
        location = con.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (second,)).fetchone()[0]
        edited = work.parent / "artifacts"
        shutil.copytree(location.removeprefix("file://"), edited)
        con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (edited.as_uri(), second))
    config = edited / "config.yaml"
    config.write_text(config.read_text().replace("anonymizer:\n", "anonymizer:\n  _target_: os.system\n", 1))
    proc = _reproduce(db, work, second, "--no-progress")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.strip().splitlines() == [
        f"error: run {second} (privacy_model.k=6) could not be run again: anonymizer._target_ cannot be set; "
        f"configs name registered plugins (cdpbench plugins) only",
        "reproduce: 1 of 1 run(s) could not be run again"]
    missing = _cdpbench(work, f"sqlite:///{work / 'none.db'}", "reproduce", job)
    assert missing.returncode == 2 and missing.stderr.startswith("error: reproduce: no MLflow SQLite store at ")
    assert list(work.iterdir()) == []  # no store created


# ------------------------------------------------------------------------- the comparison
def test_compare_exact_nan_inf_timings_and_one_sided_values():
    nan, inf = math.nan, math.inf
    stored = {1: {"a": 0.1, "b": nan, "c": MLFLOW_INF, "time_total": 1.0, "gone": 1.0},
              2: {"a": 0.30000000000000004, "b": 2.0, "c": 1.0, "time_total": 2.0}}
    now = {1: {"a": 0.1, "b": nan, "c": inf, "time_total": 9.0, "new": 3.0},
           2: {"a": 0.1 + 0.2, "b": nan, "c": 1.0, "time_total": 7.0},
           3: {"a": 0.5, "b": 1.0, "c": 1.0}}
    res = compare(stored, now)
    assert (res.metrics, res.releases, res.values) == (3, 3, 9)
    assert res.timings == ["time_total"] and res.stored_only == ["gone"] and res.new_only == ["new"]
    # 0.1 + 0.2 == 0.30000000000000004 exactly; NaN equals NaN; inf is stored as the largest float
    assert [d[:3] for d in res.differences] == [("a", 3, None), ("b", 2, 2.0), ("b", 3, None), ("c", 3, None)]
    assert [d[3] for d in res.differences if d[:2] != ("b", 2)] == [0.5, 1.0, 1.0]
    assert math.isnan(res.differences[1][3])
    lines = summary_lines("r1", "name", res)
    assert lines[0] == "run r1 (name): 4 of 9 values differ (3 metrics × 3 releases; 1 timing metric not compared)"
    assert lines[1:3] == ["  metric gone: stored, not recomputed", "  metric new: recomputed, not stored"]
    assert lines[4].split() == ["a", "3", "-", "0.5", "-", "-"]
    assert lines[5].split() == ["b", "2", "2.0", "nan", "nan", "nan"]

    assert compare({1: {"a": 1.0}}, {1: {"a": 1.0 + 2 ** -52}}).differences == [("a", 1, 1.0, 1.0 + 2 ** -52)]
    same = compare({1: {"a": -0.0}, 2: {"a": nan}}, {1: {"a": 0.0}, 2: {"a": nan}})
    assert same.differences == [] and summary_lines("r", "n", same) == ["run r (n): 1 metric × 2 releases identical"]
    many = compare({1: {f"m{i:02d}": 0.0 for i in range(12)}}, {1: {f"m{i:02d}": 1.0 for i in range(12)}})
    shown = summary_lines("r", "n", many)
    assert len(shown) == 1 + 1 + 10 + 1 and shown[-1] == "  and 2 more"
    assert shown[2].split() == ["m00", "1", "0.0", "1.0", "1", "inf"]


def test_provenance_warnings_name_each_difference():
    recorded = {"cdpbench.code.cdpbench": "aaaaaaaaaaaaaaaa", "cdpbench.code.cdpbench-old": "bbbbbbbbbbbbbbbb",
                "cdpbench.inputs": "cccccccccccccccc", "cdpbench.inputs.files": "2",
                "cdpbench.env.python": "3.11.9", "cdpbench.env.numpy": "2.0.2",
                "mlflow.source.git.commit": "abc1234567890", "cdpbench.git.dirty": "true",
                "cdpbench.git.diff": "dddddddddddddddd"}
    present = {"cdpbench.code.cdpbench": "aaaaaaaaaaaaaaaa", "cdpbench.code.cdpbench-new": "eeeeeeeeeeeeeeee",
               "cdpbench.inputs": "ffffffffffffffff", "cdpbench.inputs.files": "3",
               "cdpbench.env.python": "3.11.9", "cdpbench.env.numpy": "2.1.0"}
    git = {"mlflow.source.git.commit": "def4567890123", "cdpbench.git.dirty": "false"}
    assert provenance_warnings(recorded, present, git, "r1") == [
        "cdpbench-new is used now but was not by the run (code fingerprint eeeeeeee…)",
        "cdpbench-old was used by the run but is not now (code fingerprint bbbbbbbb…)",
        "the input files changed since the run (fingerprint cccccccc… of 2 file(s) → ffffffff… of 3)",
        "numpy 2.0.2 at the run, 2.1.0 now",
        "the run was recorded at commit abc1234567 (dirty, diff dddddddd…), this checkout is def4567890 (clean)"]
    same_git = {k: recorded[k] for k in ("mlflow.source.git.commit", "cdpbench.git.dirty", "cdpbench.git.diff")}
    assert provenance_warnings(recorded, {**recorded}, same_git, "r1") == []
