"""``cdpbench server`` on a PostgreSQL store: the checks of ``--backend-store-uri`` (an allowlist
of schemes, the driver, no password printed or put on MLflow's command line), and a team's
server on a throw-away PostgreSQL cluster (initdb in a temporary folder, a free loopback port,
its socket in that folder) taking tests/test_server.py's 8 jobs (two sweeps of 4 parallel jobs
launched together) without losing a metric.

The cluster needs PostgreSQL's server programs (initdb, pg_ctl: /usr/lib/postgresql/*/bin, as
Debian's postgresql package installs them, or PATH) and the driver psycopg (cdpbench's
'postgres' extra); without either the cluster test is skipped, saying which. PostgreSQL refuses
to run as root: as root the cluster runs as the 'postgres' user (or 'nobody')."""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CDPBENCH, REPO, SMALL
from test_server import check_sweeps_recorded, free_port, wait_until_healthy

PASSWORD = "s3cret-pg-Pw"  # the store URI's password: never printed, never on a command line


def postgres_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: the newest /usr/lib/postgresql/N/bin, else PATH's."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
                      if Path(p).parts[-3].isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl", path=str(Path(initdb).parent)) else None


def cluster_user() -> pwd.struct_passwd | None:
    """The user the cluster runs as: None (this one) unless this is root, whom initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.skip("PostgreSQL refuses to run as root and this machine has no 'postgres' or 'nobody' user")


class Cluster:
    """A PostgreSQL cluster in its own temporary folder, reached at 127.0.0.1:port by ``user``
    with ``password`` (scram-sha-256), its unix socket in the folder; :meth:`stop` ends it and
    removes the folder."""

    def __init__(self, bin_dir: Path, user: pwd.struct_passwd | None):
        self.bin_dir, self.runas = bin_dir, user
        # not pytest's tmp_path: its parents are closed to another user (mode 700)
        self.dir = Path(tempfile.mkdtemp(prefix="cdpbench-pg-"))
        self.data, self.log = self.dir / "data", self.dir / "postgres.log"
        self.user, self.password, self.port = "cdpbench", PASSWORD, free_port()
        if user is not None:
            os.chown(self.dir, user.pw_uid, user.pw_gid)

    def run(self, program: str, *args: str, timeout: float = 120) -> None:
        kwargs = {"user": self.runas.pw_uid, "group": self.runas.pw_gid, "extra_groups": []} if self.runas else {}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "PGPASSWORD": self.password}
        proc = subprocess.run([str(self.bin_dir / program), *args], cwd=self.dir, env=env, capture_output=True,
                              text=True, timeout=timeout, **kwargs)
        if proc.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise AssertionError(f"{program} failed ({proc.returncode}): {proc.stdout}{proc.stderr}{log}")

    def start(self) -> None:
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.runas:
            os.chown(pwfile, self.runas.pw_uid, self.runas.pw_gid)
        self.run("initdb", "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}", "--auth-local=trust",
                 "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync")
        pwfile.unlink()
        # a throw-away cluster: no fsync (a crash of the machine may lose it; nothing else changes)
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir} "
                   "-c fsync=off -c max_connections=100")
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "mlflow")

    def uri(self, database: str = "mlflow", password: bool = True) -> str:
        secret = f":{self.password}" if password else ""
        return f"postgresql://{self.user}{secret}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server (fast shutdown; its pid killed if pg_ctl cannot) and remove the folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                try:
                    self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop", timeout=60)
                except (AssertionError, OSError, subprocess.TimeoutExpired):
                    pid_file = self.data / "postmaster.pid"
                    if pid_file.exists():
                        os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def postgres():
    """A running throw-away cluster with an empty database ``mlflow``; stopped even on failure."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed: apt-get install postgresql")
    pytest.importorskip("psycopg", reason="the PostgreSQL driver psycopg is not installed: cdpbench's 'postgres' "
                        "extra (make install installs it)")
    cluster = Cluster(bin_dir, cluster_user())
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def start_server(cwd: Path, *args: str):
    """``cdpbench server`` on a free port of 127.0.0.1, waited for until /health answers; its
    output goes to ``cwd/server.log`` (a pipe nobody reads could fill and stall it)."""
    port = free_port()
    with open(cwd / "server.log", "w") as log:
        proc = subprocess.Popen([str(CDPBENCH), "server", "--port", str(port), *args], cwd=cwd, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_healthy(proc, url, kill=lambda: stop_server(proc, signal.SIGKILL),
                       output=lambda: (cwd / "server.log").read_text())
    return proc, url


def stop_server(proc, sig=signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)  # the server and its workers
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def command_lines() -> list[str]:
    """The command line of every process of this machine that can be read."""
    lines = []
    for f in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(f.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # ended meanwhile
            pass
    return lines


@pytest.mark.slow
def test_eight_concurrent_jobs_lose_no_metric_on_postgresql(postgres, tmp_path, mlflow_client, monkeypatch):
    t0 = time.time()
    server, url = start_server(tmp_path, "--backend-store-uri", postgres.uri())
    try:
        t_server = time.time() - t0
        # the password is on no command line (any user can read them): not the server's nor its workers'
        lines = command_lines()
        assert any(f"--port {url.rsplit(':', 1)[1]}" in line for line in lines)  # the server's is read
        assert not [line for line in lines if PASSWORD in line]
        env = {**os.environ, "MLFLOW_TRACKING_URI": url, "CDPBENCH_CONF": str(REPO / "conf")}
        sweeps = []
        for name in ("a", "b"):
            args = ["-m", *SMALL, "privacy_model=k_anonymity,l_diversity", "privacy_model.k=3,5",
                    f"tracking.experiment={name}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=4",
                    f"hydra.sweep.dir=outputs/multirun/{name}"]
            sweeps.append(subprocess.Popen([str(CDPBENCH), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True))
        for p in sweeps:
            _, err = p.communicate(timeout=600)
            assert p.returncode == 0 and "sweep: 4 jobs FINISHED, 4 run" in err, err
        t_sweeps = time.time() - t0 - t_server
        assert mlflow_client(url).get_experiment_by_name("a") is not None  # the server answers for its store
    finally:
        stop_server(server)
    log = (tmp_path / "server.log").read_text()
    assert PASSWORD not in log
    assert f"MLflow server for postgresql://cdpbench:***@127.0.0.1:{postgres.port}/mlflow," in log
    # every value read back from the PostgreSQL database itself, the password given to libpq in
    # PGPASSWORD rather than in the URI (the other way to keep it off command lines)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    c = mlflow_client(postgres.uri(password=False))
    counted = check_sweeps_recorded(c, tmp_path / "outputs" / "multirun", ("a", "b"))
    assert not (tmp_path / "outputs" / "server" / "mlflow.db").exists()  # nothing went to a SQLite store
    print(f"PostgreSQL store: server up in {t_server:.1f} s, two sweeps of 4 jobs in {t_sweeps:.1f} s, "
          f"{counted} metric values checked")


# ------------------------------------------------ --backend-store-uri's checks (no cluster needed)
def server(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CDPBENCH), "server", "--port", str(free_port()), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


ALLOWED = "allowed: sqlite:///PATH, postgresql://USER@HOST:PORT/DATABASE"


@pytest.mark.parametrize("uri, shown", [
    ("mysql://ml:s3cret@db/mlflow", "mysql://ml:***@db/mlflow: not a store cdpbench server runs on; "),
    ("postgres://ml:s3cret@db/mlflow", "postgres://ml:***@db/mlflow: not a store cdpbench server runs on "
     "(PostgreSQL's scheme is postgresql://); "),
    ("file:///srv/mlruns", "file:///srv/mlruns: not a store cdpbench server runs on; "),
    ("mlflow.db", "mlflow.db: not a store cdpbench server runs on; "),
    ("sqlite://", "sqlite://: not a store cdpbench server runs on; "),  # an in-memory database: gone with the server
])
def test_server_refuses_a_store_outside_the_allowlist_in_one_line(tmp_path, uri, shown):
    proc = server(tmp_path, "--backend-store-uri", uri)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"error: server: --backend-store-uri {shown}{ALLOWED}\n"
    assert not (tmp_path / "outputs").exists()


def test_server_without_the_postgresql_driver_says_what_to_install(monkeypatch, capsys, tmp_path):
    from cdpbench import server_cmd
    from cdpbench.errors import CdpbenchError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(server_cmd, "driver_installed", lambda module: module not in ("psycopg", "psycopg2"))
    with pytest.raises(CdpbenchError) as e:
        server_cmd.server_command(["--backend-store-uri", "postgresql://ml:s3cret@db/mlflow", "--dry-run"])
    assert str(e.value) == ("server: --backend-store-uri postgresql://ml:***@db/mlflow: needs the PostgreSQL driver "
                            "psycopg, which this Python cannot import; install cdpbench's 'postgres' extra "
                            "(pip install 'psycopg[binary]')")
    with pytest.raises(CdpbenchError, match=r"postgresql\+psycopg2://ml@db/mlflow: needs the PostgreSQL driver "
                       r"psycopg2, which this Python cannot import; pip install psycopg2-binary$"):
        server_cmd.server_command(["--backend-store-uri", "postgresql+psycopg2://ml@db/mlflow", "--dry-run"])
    assert capsys.readouterr() == ("", "")
    # SQLite needs no driver
    assert server_cmd.server_command(["--port", str(free_port()), "--dry-run"]) == 0


def test_server_keeps_a_store_password_off_its_output_and_mlflows_command_line(monkeypatch, capsys, tmp_path):
    import shlex

    from cdpbench import server_cmd

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(server_cmd, "driver_installed", lambda module: True)
    port = free_port()
    assert server_cmd.server_command(["--port", str(port), "--dry-run",
                                      "--backend-store-uri", "postgresql://ml:s3cret@db:5432/mlflow"]) == 0
    out, err = capsys.readouterr()
    assert "s3cret" not in out + err
    assert err.startswith("MLflow server for postgresql://ml:***@db:5432/mlflow, artifacts in ")
    words = shlex.split(out)
    assert words[0] == "MLFLOW_BACKEND_STORE_URI=postgresql://ml:***@db:5432/mlflow" and words[2] == "server"
    assert "--backend-store-uri" not in words
    # without a password the URI stays on the command line, shown as it is (a user name is no secret)
    for uri in ("postgresql://ml@db:5432/mlflow", "postgresql+psycopg://ml@db/mlflow"):
        assert server_cmd.server_command(["--port", str(port), "--dry-run", "--backend-store-uri", uri]) == 0
        out, err = capsys.readouterr()
        words = shlex.split(out)
        assert words[1] == "server" and words[words.index("--backend-store-uri") + 1] == uri
        assert f"MLflow server for {uri}," in err


def test_driver_installed_imports_the_module():
    from cdpbench.server_cmd import driver_installed

    assert driver_installed("sqlite3") and not driver_installed("cdpbench_no_such_driver")
