"""Resumable sweeps: a sweep launched again skips every job whose config already has a FINISHED
run in the experiment (listed with that run's id, name, date and the command that made it; a
launch that skips every job adds no run to MLflow), runs FAILED and killed ones again, and
``--rerun`` forces every job; a sweep killed with SIGKILL (its whole process group, recorder
included) leaves its parent RUNNING only until the next launch, which records what the killed
sweep's jobs had finished and marks the rest KILLED.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO

pytestmark = pytest.mark.slow
FAULTY = str(Path(__file__).parent / "faulty")
SWEEP = ["-m", "dataset=faulty", "dataset.tag=1,2,3,4,5,6", "progress=false"]


def runs(client):
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, max_results=1000) if exps else []


def records(folder: Path) -> dict[str, str]:
    """status of each job record of a sweep folder, by its dataset.tag"""
    out = {}
    for f in folder.glob("*/run.json"):
        rec = json.loads(f.read_text())
        out[rec["params"]["dataset.tag"]] = rec["status"]
    return out


def sweep_folders(cwd: Path) -> list[Path]:
    return sorted(p.parent for p in cwd.glob("outputs/multirun/*/.cdpbench_sweep.json"))


@pytest.fixture
def faulty(cli, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", FAULTY)
    return cli


def test_a_second_launch_skips_finished_jobs_and_reruns_failed_ones(faulty, mlflow_client):
    first = faulty(*SWEEP, "dataset.fail_tag=3", check=False)
    assert first.returncode == 1
    # the same sweep without the fault: job 3's config differs (fail_tag), so compare on what runs
    second = faulty(*SWEEP, "dataset.fail_tag=3", check=False)
    assert second.returncode == 1  # job 3 fails again: it was FAILED, so it ran again
    assert "5 skipped, already FINISHED in the experiment" in second.stderr
    c = mlflow_client(faulty.uri)
    everything = runs(c)
    parents = sorted((r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"), key=lambda r: r.info.start_time)
    assert len(parents) == 2
    kids = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == parents[1].info.run_id]
    assert [r.data.params["dataset.tag"] for r in kids] == ["3"] and kids[0].info.status == "FAILED"
    assert parents[1].data.tags["cdpbench.skipped_jobs"] == "5"
    first_kids = {r.info.run_id: r for r in everything if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id}
    skipped = parents[1].data.tags["cdpbench.skipped_runs.0"].split(",")
    assert sorted(skipped) == sorted(i for i, r in first_kids.items() if r.info.status == "FINISHED")
    # each skipped job is listed with the run that holds its result: id, name, start, and its command
    made_by = f'  by `cdpbench -m {" ".join(SWEEP[1:])} dataset.fail_tag=3` (sweep "{parents[0].info.run_name}"):'
    listed = second.stderr.splitlines()
    assert listed[listed.index(made_by) - 1] == "sweep: 5 skipped, already FINISHED in the experiment (--rerun runs them again):"
    for i in skipped:
        run = first_kids[i]
        job = f"job #{run.data.tags['cdpbench.job']} ({run.info.run_name})"
        start = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.info.start_time / 1000))
        assert f'    {job}: reuses MLflow run {i} "{run.info.run_name}" of {start}' in listed[listed.index(made_by):]
    # the report of the second sweep shows the whole sweep: 5 skipped runs (FINISHED) + the failed one
    out = faulty("report", "--latest", "--metric", "gcp_norm").stdout
    assert "left out 1 run that is not FINISHED (1 FAILED)" in out
    # --rerun runs every job again
    third = faulty(*SWEEP, "dataset.fail_tag=3", "--rerun", check=False)
    assert "skipped" not in third.stderr
    assert len([r for r in runs(c) if r.data.tags.get("cdpbench.kind") == "job"]) == 6 + 1 + 6


def test_a_sweep_killed_with_sigkill_is_resumed_by_the_next_launch(faulty, mlflow_client):
    env = {**os.environ, "MLFLOW_TRACKING_URI": faulty.uri, "CDPBENCH_CONF": str(REPO / "conf"), "PYTHONPATH": FAULTY}
    args = [*SWEEP, "dataset.sleep=0.7"]  # about 2 s a job, one job at a time
    proc = subprocess.Popen([str(CDPBENCH), *args], cwd=faulty.cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        folders = sweep_folders(faulty.cwd)
        states = list(records(folders[0]).values()) if folders else []
        if states.count("FINISHED") >= 2 and "RUNNING" in states:  # killed in the middle of a job
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher, its recorder and its jobs
    proc.wait(timeout=30)
    (killed_folder,) = sweep_folders(faulty.cwd)
    before = records(killed_folder)
    finished_before = sorted(t for t, s in before.items() if s == "FINISHED")
    assert 2 <= len(finished_before) < 6 and "RUNNING" in before.values()
    c = mlflow_client(faulty.uri)
    assert [r.info.status for r in runs(c) if r.data.tags.get("cdpbench.kind") == "sweep"] == ["RUNNING"]

    faulty(*args)  # launched again: runs only the unfinished jobs
    folders = sweep_folders(faulty.cwd)
    assert len(folders) == 2
    again = records(folders[1])
    ran = sorted(t for t, s in again.items() if s == "FINISHED")
    assert ran == sorted(set(map(str, range(1, 7))) - set(finished_before))
    assert sorted(t for t, s in again.items() if s == "SKIPPED") == finished_before
    everything = runs(c)
    assert all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in everything), [(r.info.run_name, r.info.status, r.data.tags.get("cdpbench.kind")) for r in everything]
    old, new = sorted((r for r in everything if r.data.tags.get("cdpbench.kind") == "sweep"), key=lambda r: r.info.start_time)
    assert old.info.status == "KILLED" and new.info.status == "FINISHED"
    old_kids = [r for r in everything if r.data.tags.get("mlflow.parentRunId") == old.info.run_id]
    assert sorted(r.data.params["dataset.tag"] for r in old_kids if r.info.status == "FINISHED") == finished_before
    in_flight = [r for r in old_kids if r.info.status == "KILLED"]
    assert len(in_flight) == list(before.values()).count("RUNNING")
    assert in_flight[0].data.tags["cdpbench.error"] == "the job did not end: its sweep was killed (found by a later launch)"

    third = faulty(*args)  # a second identical launch runs nothing, and adds no run to MLflow
    assert "sweep: nothing to run, all 6 jobs FINISHED before; no run added to MLflow" in third.stderr
    assert set(records(sweep_folders(faulty.cwd)[2]).values()) == {"SKIPPED"}
    assert len(runs(c)) == len(everything)


def test_reaping_deletes_a_half_written_run_and_records_its_job_again(tmp_path, mlflow_client):
    """The window a SIGKILL can hit: the recorder had created a job's run (RUNNING) but not finished
    writing it. The next launch deletes that partial copy and writes the job from its record."""
    import socket

    from cdpbench import tracking
    from cdpbench.record import FINISHED, RUNNING, RunRecord
    from cdpbench.recorder import RECORDER_TAG, reap_orphans

    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is no recorder any more
    c = tracking.client(f"sqlite:///{tmp_path / 'm.db'}")
    exp = tracking.experiment_id(c, "x", tmp_path)
    folder = tmp_path / "sweep"
    parent = c.create_run(exp, tags={"cdpbench.kind": "sweep", "cdpbench.sweep_dir": str(folder),
                                     RECORDER_TAG: f"{socket.gethostname()}:{dead.pid}"}).info.run_id
    half = c.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id  # killed while writing
    done = RunRecord("done", {"cdpbench.kind": "job"}, {"seed": "0"}, job=0)
    done.add_metrics(1, {"gcp": 0.5})
    done.end(FINISHED)
    done.write(folder / "0")
    RunRecord("open", {"cdpbench.kind": "job"}, {"seed": "1"}, job=1).write(folder / "1")  # never ended
    assert reap_orphans(c, exp, None) == [parent]
    assert c.get_run(half).info.lifecycle_stage == "deleted"
    kids = {r.info.run_name: r for r in c.search_runs([exp], f"tags.mlflow.parentRunId = '{parent}'")}
    assert sorted(kids) == ["done", "open"]
    assert kids["done"].info.status == FINISHED and kids["done"].data.metrics == {"gcp": 0.5}
    assert kids["open"].info.status == "KILLED" and kids["open"].info.status != RUNNING
    assert c.get_run(parent).info.status == "KILLED"
    assert reap_orphans(c, exp, None) == []  # nothing left to reap


# ------------------------------------------------------------- relaunching into the same folder
from conftest import SMALL  # noqa: E402

SAME = ["-m", *SMALL, "privacy_model=k_anonymity", "seed=0,1", "hydra.sweep.dir=same"]
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]


def sweeps(c):
    return sorted((r for r in runs(c) if r.data.tags.get("cdpbench.kind") == "sweep"), key=lambda r: r.info.start_time)


def children(c, parent):
    return [r for r in runs(c) if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def test_relaunch_into_the_same_folder_skips_every_job_and_the_report_shows_each_config_once(cli, mlflow_client):
    cli(*SAME)
    c = mlflow_client(cli.uri)
    (first,) = sweeps(c)
    old = {r.info.run_id for r in children(c, first)}
    assert len(old) == 2
    again = cli(*SAME, *JOBLIB)  # the folder holds the first launch's records and finished file
    assert "sweep: nothing to run, all 2 jobs FINISHED before; no run added to MLflow" in again.stderr
    for run_id in old:  # each job says which run it reused
        assert f"reuses MLflow run {run_id} " in again.stderr
    assert [s.info.run_id for s in sweeps(c)] == [first.info.run_id]  # no empty parent, and the first launch's records are not recorded again
    assert len([r for r in runs(c) if r.data.tags.get("cdpbench.kind") == "job"]) == 2
    out = cli("report", "--latest").stdout
    assert "(2 runs;" in out  # each config once
    summary = next(ln for ln in out.splitlines() if ln.startswith("summary:")).split()[1]
    import pandas as pd

    assert len(pd.read_csv(summary)) == 2


def test_rerun_into_the_same_folder_records_the_new_runs(cli, mlflow_client):
    cli(*SAME, *JOBLIB)
    c = mlflow_client(cli.uri)
    (first,) = sweeps(c)
    old = {r.info.run_id for r in children(c, first)}
    again = cli(*SAME, "--rerun")
    assert "skipped" not in again.stderr and "sweep: 2 jobs FINISHED, 2 run" in again.stderr
    second = sweeps(c)[1]
    assert second.info.status == "FINISHED"
    kids = children(c, second)
    assert len(kids) == 2 and not {r.info.run_id for r in kids} & old
    assert {r.info.status for r in kids} == {"FINISHED"}
    assert all(r.data.metrics for r in kids)
    assert sorted(r.data.params["seed"] for r in kids) == ["0", "1"]
    assert {r.info.run_id for r in children(c, first)} == old  # the old runs stay, under their parent
    assert all(c.get_run(i).info.status == "FINISHED" for i in old)
    recorded = {(p / "mlflow_run_id").read_text() for p in (cli.cwd / "same").iterdir() if (p / "mlflow_run_id").exists()}
    assert recorded == {r.info.run_id for r in kids}


def test_a_tampered_finished_file_is_ignored_and_the_jobs_run(cli, mlflow_client):
    other = ["-m", *SMALL, "privacy_model=k_anonymity", "seed=5", "hydra.sweep.dir=other"]
    cli(*other)  # a FINISHED run of another config
    c = mlflow_client(cli.uri)
    (foreign,) = [r.info.run_id for r in runs(c) if r.data.tags.get("cdpbench.kind") == "job"]
    # the hashes of the configs to launch, from a launch with tracking off
    cli(*SAME[:-1], "hydra.sweep.dir=probe", "tracking.enabled=false")
    hashes = sorted(json.loads(f.read_text())["tags"]["cdpbench.config_hash"] for f in (cli.cwd / "probe").glob("*/run.json"))
    assert len(hashes) == 2
    folder = cli.cwd / "same"
    folder.mkdir()
    tampered = folder / ".cdpbench_finished.json"
    tampered.write_text(json.dumps({"launch": None, "finished": {hashes[0]: "0" * 32, hashes[1]: foreign}}))
    proc = cli(*SAME, *JOBLIB)
    warning = [ln for ln in proc.stderr.splitlines() if str(tampered) in ln]
    assert len(warning) == 1 and "tampered" in warning[0] and "does not exist" in warning[0]
    assert "another config" in warning[0]
    assert "skipped" not in proc.stderr and "sweep: 2 jobs FINISHED, 2 run" in proc.stderr
    kids = children(c, sweeps(c)[-1])
    assert len(kids) == 2 and {r.info.status for r in kids} == {"FINISHED"} and all(r.data.metrics for r in kids)


def test_a_skip_the_store_does_not_confirm_is_recorded_failed(tmp_path):
    """A finished file forged for the running launch: the recorder checks every skip in the store."""
    import queue

    from cdpbench import tracking
    from cdpbench.record import SKIPPED, RunRecord
    from cdpbench.recorder import serve

    folder = tmp_path / "sweep"
    rec = RunRecord("forged", {"cdpbench.kind": "job", "cdpbench.config_hash": "abc"}, {"seed": "0"}, job=0, launch="L")
    rec.skipped_run = "0" * 32
    rec.end(SKIPPED)
    rec.write(folder / "0")
    stale = RunRecord("old", {"cdpbench.kind": "job"}, {"seed": "1"}, job=1, launch="EARLIER")
    stale.end("FINISHED")
    stale.write(folder / "1")  # an earlier launch's record: not this launch's
    commands: queue.Queue = queue.Queue()
    commands.put("END")
    header = {"uri": f"sqlite:///{tmp_path / 'm.db'}", "experiment": "x", "root": str(tmp_path), "folder": str(folder),
              "start_time": 0, "sweep": {"jobs": 1, "name": "s", "resume": True, "launch": "L", "tags": {}}}
    summary = serve(header, commands)
    (run,) = summary["runs"]
    assert run["status"] == "FAILED" and "does not exist" in run["error"]
    assert str(folder / tracking.FINISHED_FILE) in run["error"]
    assert json.loads((folder / tracking.FINISHED_FILE).read_text())["launch"] == "L"
