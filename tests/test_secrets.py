"""No secret in MLflow (#24 item 5): credentials in a tracking URI, whether from ``tracking.uri``,
``MLFLOW_TRACKING_URI`` or ``--tracking-uri``, are never recorded nor printed; the process still
connects with the real URI.

Unit tests of :func:`cdpbench.tracking.redact_uri` and its helpers, then a single run and a
2-job sweep logging to a local ``cdpbench server`` (127.0.0.1) through
``http://alice:s3cret@127.0.0.1:PORT``: MLflow's client sends the user info as basic auth, which
the unauthenticated server ignores, so the runs do reach it. Then not one file under the test's
folder (the server's SQLite store and artifacts, the run folders with ``run.json``,
``config.yaml``, ``cdpbench.log``, Hydra's ``.hydra/*.yaml`` and ``multirun.yaml``, the sweep
file) nor the command's output holds the password.
"""

import json
import logging
import os
import subprocess

import pytest
from test_server import free_port, server  # noqa: F401 - the fixture, for the end-to-end tests

from cdpbench.tracking import install_log_redaction, redact_config, redact_text, redact_uri
from conftest import CDPBENCH, REPO, SMALL

SECRET = "s3cret"


@pytest.mark.parametrize("uri, shown", [
    ("http://alice:s3cret@host", "http://alice:***@host"),
    ("https://alice:s3cret@mlflow.lab.org:8443/base/", "https://alice:***@mlflow.lab.org:8443/base/"),
    ("http://s3cret@host:5000", "http://***@host:5000"),  # a token alone
    ("postgresql://ml:s3cret@db/mlflow", "postgresql://ml:***@db/mlflow"),
    ("postgresql+psycopg2://ml:s3cret@db/mlflow", "postgresql+psycopg2://ml:***@db/mlflow"),
    ("http://alice:p%40ss@host", "http://alice:***@host"),  # an encoded '@' in the password
    ("http://alice:p@ss@host", "http://alice:***@host"),  # an unencoded one
    ("http://alice:@host", "http://alice:***@host"),
    ("http://host/?password=s3cret", "http://host/?password=***"),
    ("http://host/x?token=s3cret&experiment=a", "http://host/x?token=***&experiment=a"),
    ("postgresql://db/ml?sslmode=require&key=s3cret&api_key=k2", "postgresql://db/ml?sslmode=require&key=***&api_key=***"),
    ("http://u:s3cret@h/?access_token=t#frag", "http://u:***@h/?access_token=***#frag"),
])
def test_redact_uri_hides_user_info_and_query_secrets(uri, shown):
    assert redact_uri(uri) == shown
    assert redact_uri(shown) == shown  # redacting twice changes nothing


@pytest.mark.parametrize("uri", [
    "http://127.0.0.1:5000", "https://mlflow.lab.org/", "http://host:5000/path?experiment=a&x=1",
    "sqlite:////abs/outputs/mlflow.db", "sqlite:///rel.db", "file:///home/a@b/mlruns", "databricks",
    "postgresql://db:5432/mlflow", "http://[::1]:5000", "", "mlruns",
    "postgresql://ml@db/mlflow",  # a database URI's user without password: a user name, not a secret
])
def test_redact_uri_leaves_uris_without_secrets_unchanged(uri):
    assert redact_uri(uri) == uri


def test_redact_text_finds_every_uri_in_free_text():
    text = ("tracking.uri=http://alice:s3cret@h:5000 privacy_model.k=3\n"
            "  uri: 'https://tok3n@h2/'\noverride_dirname: a=1,tracking.uri=http://bob:s3cret@h3,b=2")
    out = redact_text(text)
    assert SECRET not in out and "tok3n" not in out
    assert "tracking.uri=http://alice:***@h:5000 privacy_model.k=3" in out
    assert "uri: 'https://***@h2/'" in out
    assert "tracking.uri=http://bob:***@h3,b=2" in out
    hydra_log = r"[HYDRA] \t#1 : progress=False tracking.uri=http\://alice\:s3cret@127.0.0.1\:5000 k=2"  # escaped
    assert redact_text(hydra_log) == r"[HYDRA] \t#1 : progress=False tracking.uri=http://alice:***@127.0.0.1:5000 k=2"
    assert redact_text(r"k=http\://127.0.0.1\:5000") == r"k=http\://127.0.0.1\:5000"
    plain = "run k=3 in sqlite:////tmp/x.db: 3 releases, see http://127.0.0.1:5000/#/experiments/1"
    assert redact_text(plain) == plain


def test_redact_config_redacts_every_string_value():
    cfg = {"tracking": {"uri": "http://alice:s3cret@h", "experiment": "e"}, "seed": 0,
           "dataset": {"files": ["https://u:s3cret@data/x.csv", "local.csv"]}}
    out = redact_config(cfg)
    assert out == {"tracking": {"uri": "http://alice:***@h", "experiment": "e"}, "seed": 0,
                   "dataset": {"files": ["https://u:***@data/x.csv", "local.csv"]}}
    assert cfg["tracking"]["uri"] == "http://alice:s3cret@h"  # the config the process uses is untouched


def test_log_records_are_redacted(caplog):
    install_log_redaction()
    install_log_redaction()  # idempotent
    with caplog.at_level(logging.INFO):
        logging.getLogger("hydra.launcher").info("\t#%d : %s", 0, "tracking.uri=http://alice:s3cret@h privacy_model.k=2")
        logging.getLogger("x").info("nothing to hide in %s", "sqlite:///x.db")
    assert [r.getMessage() for r in caplog.records] == [
        "\t#0 : tracking.uri=http://alice:***@h privacy_model.k=2", "nothing to hide in sqlite:///x.db"]


def test_browse_hint_hides_credentials():
    from cdpbench.report import browse_hint

    assert browse_hint("http://alice:s3cret@h:5000/", "7") == "http://alice:***@h:5000/#/experiments/7/runs"
    hint = browse_hint("postgresql://ml:s3cret@db/mlflow", "7")
    assert SECRET not in hint and "postgresql://ml:***@db/mlflow" in hint


# ------------------------------------------------------------------------ end to end
def _run(cwd, *args, env_extra=None):
    env = {**os.environ, "CDPBENCH_CONF": str(REPO / "conf")}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("HYDRA_FULL_ERROR", None)
    env.update(env_extra or {})
    return subprocess.run([str(CDPBENCH), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _files_holding(folder, secret=SECRET):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes())


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://alice:{SECRET}@")


@pytest.mark.slow
def test_single_run_and_sweep_with_credentials_record_no_secret(server, tmp_path, mlflow_client):  # noqa: F811
    uri = _with_credentials(server)
    shown = uri.replace(SECRET, "***")
    one = _run(tmp_path, *SMALL, f"tracking.uri={uri}", "tracking.experiment=secrets", "hydra.run.dir=outputs/runs/one")
    assert one.returncode == 0, one.stderr
    sweep = _run(tmp_path, "-m", *SMALL, "privacy_model.k=3,4", f"tracking.uri={uri}", "tracking.experiment=secrets",
                 "hydra.sweep.dir=outputs/multirun/two")
    assert sweep.returncode == 0 and "sweep: 2 jobs FINISHED, 2 run" in sweep.stderr, sweep.stderr
    for proc in (one, sweep):
        assert SECRET not in proc.stdout + proc.stderr
    assert shown in one.stdout + one.stderr  # the run's log line names it, redacted
    assert f"tracking.uri={shown}" in sweep.stdout + sweep.stderr  # Hydra's "#0 : ..." lines, redacted

    # the runs are on the server (reached through the URI with credentials), and redacted there
    c = mlflow_client(server)
    exp = c.get_experiment_by_name("secrets")
    runs = c.search_runs([exp.experiment_id])
    assert sorted(r.data.tags["cdpbench.kind"] for r in runs) == ["job", "job", "job", "sweep"]
    for r in runs:
        assert r.info.status == "FINISHED"
        assert SECRET not in json.dumps([r.info.run_name, r.data.params, r.data.tags])
        if r.data.tags["cdpbench.kind"] == "job":
            assert r.data.params["tracking.uri"] == shown
            assert f"tracking.uri={shown}" in r.data.tags["cdpbench.overrides"]
            arts = sorted(a.path for a in c.list_artifacts(r.info.run_id))
            assert arts == ["config.yaml", "metrics.csv"]
            for a in arts:
                text = open(c.download_artifacts(r.info.run_id, a, str(tmp_path / "dl" / r.info.run_id))).read()
                assert SECRET not in text
                assert a != "config.yaml" or f"uri: {shown}" in text
    single = next(r for r in runs if r.data.tags["cdpbench.kind"] == "job" and "cdpbench.job" not in r.data.tags)
    assert f"tracking.uri={shown}" in single.info.run_name  # a single run is named by its overrides

    # what the commands left on disk: run folders, Hydra's files, the sweep's files, the server's store
    expected = ["outputs/runs/one/run.json", "outputs/runs/one/config.yaml", "outputs/runs/one/cdpbench.log",
                "outputs/runs/one/.hydra/overrides.yaml", "outputs/runs/one/.hydra/hydra.yaml",
                "outputs/runs/one/.hydra/config.yaml", "outputs/multirun/two/multirun.yaml",
                "outputs/multirun/two/.cdpbench_sweep.json", "outputs/multirun/two/0/run.json",
                "outputs/multirun/two/1/.hydra/overrides.yaml", "outputs/multirun/two/1/config.yaml",
                "outputs/server/mlflow.db"]
    for f in expected:
        assert (tmp_path / f).is_file(), f
    for f in ("outputs/runs/one/.hydra/overrides.yaml", "outputs/multirun/two/multirun.yaml"):
        assert shown in (tmp_path / f).read_text()  # redacted, not dropped
    assert _files_holding(tmp_path) == []


@pytest.mark.slow
def test_report_with_credentials_in_the_environment_prints_none(server, tmp_path):  # noqa: F811
    uri = _with_credentials(server)
    shown = uri.replace(SECRET, "***")
    env = {"MLFLOW_TRACKING_URI": uri}
    run = _run(tmp_path, "-m", *SMALL, "privacy_model.k=2,3", "hydra.sweep.dir=outputs/multirun/env", env_extra=env)
    assert run.returncode == 0, run.stderr
    report = _run(tmp_path, "report", "--latest", "--metric", "gcp_norm", env_extra=env)
    assert report.returncode == 0, report.stderr
    assert f"browse:  {shown}/#/experiments/" in report.stdout
    missing = _run(tmp_path, "report", "--parent", "0" * 32, "--tracking-uri", uri)
    assert missing.returncode == 2 and f"in {shown}" in missing.stderr, missing.stderr
    for proc in (run, report, missing):
        assert SECRET not in proc.stdout + proc.stderr
    assert _files_holding(tmp_path) == []


@pytest.mark.slow
def test_unreachable_server_error_names_no_secret(tmp_path):
    """A server that does not answer fails the command with the connection's error and the URI
    redacted, for a run (interrupted, or its results kept for ``cdpbench record``, whichever
    comes first) and for ``cdpbench record``, in one line each, at once (no MLflow retries)."""
    uri = f"http://alice:{SECRET}@127.0.0.1:{free_port()}"  # nothing listens there
    run = _run(tmp_path, *SMALL, f"tracking.uri={uri}", "hydra.run.dir=outputs/runs/one")
    cause = "cannot be used: ConnectionRefusedError: [Errno 111] Connection refused"
    assert run.returncode == 2 and f"http://alice:***@127.0.0.1:" in run.stderr and cause in run.stderr, run.stderr
    (tmp_path / "outputs/runs/one").mkdir(parents=True, exist_ok=True)
    record = _run(tmp_path, "record", "outputs/runs/one", env_extra={"MLFLOW_TRACKING_URI": uri})
    assert record.returncode == 2, record.stderr
    assert record.stderr.strip().splitlines()[-1].startswith("error: the MLflow store http://alice:***@127.0.0.1:")
    assert cause in record.stderr and "Traceback" not in record.stderr
    for proc in (run, record):
        assert SECRET not in proc.stdout + proc.stderr
    assert _files_holding(tmp_path) == []


def test_show_config_redacts(tmp_path):
    out = _run(tmp_path, "--cfg", "job", "tracking.uri=http://alice:s3cret@h:5000")
    assert out.returncode == 0, out.stderr
    assert "uri: http://alice:***@h:5000" in out.stdout and SECRET not in out.stdout + out.stderr


def test_a_long_secret_cut_in_a_refusal_is_redacted_first():
    """A refusal echoes the override cut to 120 characters; cutting first would leave the start
    of a long password that no URI parser can recognise any more (``http://alice:SSSS…``)."""
    from cdpbench.launch import _cut_message, shorten

    secret = "S" * 200
    text = f"hydra.foo=http://alice:{secret}@127.0.0.1:9/x"
    assert shorten(text) == "hydra.foo=http://alice:***@127.0.0.1:9/x"
    cut = _cut_message(f"{text}: hydra.foo cannot be set")
    assert "SSS" not in cut and cut.startswith("hydra.foo=http://alice:***@127.0.0.1:9/x: ")


def test_a_long_secret_in_a_refused_override_is_not_printed(cli):
    secret = "S" * 200
    proc = cli("dataset.releases=1", f"hydra.foo=http://alice:{secret}@127.0.0.1:9/x", check=False)
    assert proc.returncode == 2
    assert "SSS" not in proc.stderr + proc.stdout
    assert "http://alice:***@127.0.0.1:9/x: hydra.foo cannot be set from the command line" in proc.stderr
