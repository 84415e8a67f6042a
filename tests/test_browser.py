"""The links cdpbench prints open what they promise, in a real browser: headless Chromium from the
distribution's packages (``.ci/run`` installs it), driven over the DevTools protocol (tests/cdp.py).

A sweep prints ``browse: .../mlflow ui --backend-store-uri URI   (then open LINK)``: the test runs
that command (on a free port), opens the link, and finds the sweep's parent on MLflow's runs list
and, once its row is expanded, every job's run; a single run's link opens that run's page.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from cdp import Browser, chromium
from conftest import SMALL

pytestmark = pytest.mark.skipif(chromium() is None, reason="no Chromium on PATH (apt-get install chromium; .ci/run installs it)")
pytest.importorskip("aiohttp", reason="aiohttp (the DevTools WebSocket client) is not installed")

QUICK = [*SMALL, "dataset.reinsertions=20"]
DEFENSES = ["k_anonymity", "l_diversity", "m_invariance", "tau_safety", "sliced_bucket"]
#: MLflow's expander of a parent run's row in the runs table (the run-name cell's button)
EXPANDER = 'button[data-component-id$="runnamecellrenderer.tsx_46"]'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def browse_line(output: str) -> tuple[list[str], str]:
    """The ``mlflow ui`` command and the link of a printed ``browse:`` line."""
    (line,) = [ln for ln in output.splitlines() if ln.startswith("browse:")]
    m = re.fullmatch(r"browse: +(.+?) +\(then open (http://127\.0\.0\.1:5000/\S+)\)", line)
    assert m, line
    return shlex.split(m.group(1)), m.group(2)


@pytest.fixture
def mlflow_ui():
    procs = []

    def start(command: list[str], cwd: Path) -> str:
        port = free_port()
        proc = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port)], cwd=cwd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                return base
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{' '.join(command)} did not serve on port {port}")
                time.sleep(0.5)

    yield start
    for proc in procs:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


@pytest.fixture
def browser():
    b = Browser(chromium())
    yield b
    b.close()


def test_the_printed_links_open_the_sweeps_runs_and_a_single_run(cli, mlflow_ui, browser, tmp_path):
    proc = cli("-m", "+experiment=quickstart", *QUICK, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    command, link = browse_line(proc.stderr)
    assert command[1:3] == ["ui", "--backend-store-uri"] and command[3] == cli.uri
    assert link.endswith("/runs")  # the runs list, not MLflow 3's GenAI overview
    base = mlflow_ui(command, cli.cwd)
    browser.open(link.replace("http://127.0.0.1:5000", base))

    from mlflow.tracking import MlflowClient

    c = MlflowClient(tracking_uri=cli.uri)
    (exp,) = [e for e in c.search_experiments() if e.name == "quickstart"]
    runs = c.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("cdpbench.kind") == "sweep"]
    children = sorted(r.info.run_name for r in runs if r.data.tags.get("cdpbench.kind") == "job")
    assert children == sorted(f"quickstart: defense={d}" for d in DEFENSES)

    page = browser.wait_for_text(parent.info.run_name, "Run Name")
    assert "Traces" not in page.split("Run Name")[1][:200]  # a runs table, not the GenAI overview
    browser.wait_for(lambda: browser.evaluate(f"!!document.querySelector('{EXPANDER}')"), what="the sweep's expander")
    browser.evaluate(f"document.querySelector('{EXPANDER}').click()")
    page = browser.wait_for_text(*children)
    shot = browser.screenshot(tmp_path / "runs.png")
    assert shot.stat().st_size > 10_000
    if os.environ.get("CDPBENCH_SCREENSHOTS"):
        Path(os.environ["CDPBENCH_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["CDPBENCH_SCREENSHOTS"]) / "runs.png").write_bytes(shot.read_bytes())

    # the sweep's report as one page, opened from the file system: the figure shows, every run's
    # name, parameters and MLflow link are on it, and it loads nothing from elsewhere
    out = cli("report", "--latest", "--metric", "intersection.gain_rho").stdout
    (html,) = re.findall(r"^html: +(\S+report\.html)", out, re.M)
    page_path = (cli.cwd / html).resolve()
    browser.open(page_path.as_uri())
    text = browser.wait_for_text(*children, "intersection.gain_rho")
    images = browser.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
    assert images and all(done and width > 300 for done, width in images), images
    links = browser.evaluate("Array.from(document.links).map(a => a.href)")
    for r in runs:
        if r.data.tags.get("cdpbench.kind") == "job":
            assert any(href.endswith(f"#/experiments/{exp.experiment_id}/runs/{r.info.run_id}") for href in links), r.info.run_name
    source = browser.evaluate("document.body.textContent")  # each run's config, folded under its name
    assert source.count("anonymizer.name") >= len(children) and "privacy_model.m" in source
    loaded = browser.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert [u for u in loaded if not u.startswith(("data:", "file:"))] == []
    browser.screenshot(tmp_path / "report.png")
    if os.environ.get("CDPBENCH_SCREENSHOTS"):
        (Path(os.environ["CDPBENCH_SCREENSHOTS"]) / "report.png").write_bytes((tmp_path / "report.png").read_bytes())

    # a single run prints its own link: the run's page, its name and status on it
    single = cli("+experiment=quickstart", *QUICK, "+experiment/quickstart/defense=tau_safety", "dataset.releases=2",
                 "tracking.experiment=single")
    command, link = browse_line(single.stderr)
    (run_id,) = re.findall(r"as MLflow run ([0-9a-f]{32})", single.stderr)
    assert link.endswith(f"/runs/{run_id}")
    browser.open(link.replace("http://127.0.0.1:5000", base))
    page = browser.wait_for_text(run_id, "Finished")
    assert c.get_run(run_id).info.run_name in page
