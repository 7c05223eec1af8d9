"""Hostile and mistaken input on the command line and in the state URL (issue 16, item 5): one line
naming the option or field, exit 2, and no state file created or changed.  Real processes."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from fawkes.store import SCHEMA_VERSION, Store

try:
    from store_fixtures import pg_server, store_url  # noqa: F401  (fixtures)
    from test_cli_store import fawkes, ok, refused
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401
    from tests.test_cli_store import fawkes, ok, refused


def tree(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` with its content (to assert that nothing was created or changed)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def hosts_of(url: str) -> list[tuple]:
    with Store(url) as s, s.engine.connect() as c:
        return c.execute(text("SELECT name, state FROM hosts ORDER BY name")).all()


@pytest.fixture
def pool(tmp_path):
    """A state holding hosts h1..h4 and a config whose inventory names other hosts (u1..u3)."""
    url = f"sqlite:///{tmp_path}/state.db"
    with Store(url) as s:
        s.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 2} for i in range(1, 5)])
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inv.yaml").write_text(
        f"version: 1\nknown_hosts: {tmp_path}/known_hosts\nhosts:\n"
        + "".join(f"  - {{name: u{i}, address: 10.9.0.{i}}}\n" for i in range(1, 4)))
    return tmp_path, url


def coordinator_run(d: Path, config: str, *args: str):
    (d / "cfg.yaml").write_text("state: state.db\ninventory: inv.yaml\n" + config)
    return fawkes("coordinator", "run", "--config", str(d / "cfg.yaml"), "--for", "1", *args)


# ------------------------------------------------------------------ a: no write before every resource is held
def test_coordinator_port_in_use_is_refused_before_the_state_changes(pool):
    d, url = pool
    before, files = hosts_of(url), tree(d)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = coordinator_run(d, f"metrics: {{port: {port}}}\n")
    refused(r, f"cfg.yaml: metrics.port: cannot listen on 127.0.0.1:{port}: Address already in use")
    assert hosts_of(url) == before == [(f"h{i}", "free") for i in range(1, 5)]
    assert tree(d) == {**files, "cfg.yaml": (d / "cfg.yaml").read_bytes()}  # not even the lock file


def test_coordinator_foreign_bind_address_is_refused_before_the_state_changes(pool):
    d, url = pool
    before = hosts_of(url)
    r = coordinator_run(d, "metrics: {bind: 192.0.2.1, port: 0}\n")
    refused(r, "cfg.yaml: metrics.bind: cannot listen on 192.0.2.1:0")
    assert hosts_of(url) == before and not (d / "state.db.lock").exists()


def test_coordinator_dashboard_off_by_flag_or_config_and_checked(pool):
    d, url = pool
    on = coordinator_run(d, "metrics: {port: 0}\n")
    assert on.returncode == 0 and "/metrics, dashboard: http://127.0.0.1:" in on.stderr, on.stderr
    for config, args in (("metrics: {port: 0}\n", ("--no-dashboard",)), ("metrics: {port: 0, dashboard: false}\n", ())):
        r = coordinator_run(d, config, *args)
        assert r.returncode == 0, r.stderr
        line = [ln for ln in r.stderr.splitlines() if ln.startswith("metrics: http://127.0.0.1:")]
        assert len(line) == 1 and line[0].endswith("/metrics"), r.stderr
    before = hosts_of(url)
    r = coordinator_run(d, "metrics: {port: 0, dashboard: 2}\n")
    refused(r, "metrics.dashboard")
    assert hosts_of(url) == before


def test_coordinator_public_bind_address_is_warned_about(pool):
    d, url = pool
    r = coordinator_run(d, "metrics: {bind: 0.0.0.0, port: 0}\n")
    assert r.returncode == 0, r.stderr
    warning = [ln for ln in r.stderr.splitlines() if "WARNING" in ln and "metrics.bind 0.0.0.0" in ln]
    assert len(warning) == 1 and "without authentication" in warning[0]
    assert [h for h, _ in hosts_of(url) if h.startswith("u")] == ["u1", "u2", "u3"]  # it did run


def _foreign_sqlite(path: Path) -> None:
    import sqlite3

    c = sqlite3.connect(path)
    c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    c.execute("INSERT INTO notes (body) VALUES ('mine')")
    c.commit()
    c.close()


def _newer_state(path: Path) -> None:
    with Store(f"sqlite:///{path}") as s, s._writer.begin() as c:
        c.execute(text("UPDATE schema_version SET version = version + 1 WHERE id = 1"))
    for extra in path.parent.glob(path.name + "-*"):  # -wal, -shm: only the database file is the input
        extra.unlink()


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(bytes(range(256)) * 8), "not a SQLite database, so no fawkes state"),
    (lambda p: p.write_text("state: this is YAML, not a database\n"), "not a SQLite database, so no fawkes state"),
    (lambda p: p.write_bytes(b"SQLite format 3\0" + b"\xff" * 2000), "not a readable SQLite database"),
    (_foreign_sqlite, "a SQLite database without fawkes' schema version (tables notes): not a fawkes state"),
    (_newer_state, f"schema version {SCHEMA_VERSION + 1} is newer than this fawkes understands ({SCHEMA_VERSION})"),
], ids=["bytes", "text", "sqlite-header-only", "foreign-sqlite", "newer-schema"])
def test_coordinator_on_a_file_that_is_no_state_is_refused_before_the_lock(pool, make, message):
    """issue 30, item 7a: the state file is checked before ``<file>.lock`` is created beside it."""
    d, _ = pool
    (d / "state.db").unlink()
    make(d / "state.db")
    files = tree(d)
    r = coordinator_run(d, "")
    refused(r, f"state sqlite:///{d}/state.db: {message}")
    assert tree(d) == {**files, "cfg.yaml": (d / "cfg.yaml").read_bytes()}  # no lock, no -wal, state unchanged
    assert not (d / "state.db.lock").exists()


# ------------------------------------------------------------------ b: a refused or read-only command creates no state
@pytest.mark.parametrize("cmd", [
    ["status"], ["jobs"], ["jobs", "cancel", "1"], ["events"], ["explain"], ["host", "list"], ["cluster", "list"],
    ["plan"], ["prune", "--dry-run"], ["cluster", "request", "a b", "-f", "x", "-m", "1"],
    ["submit", "c1", "--", "app"]])
def test_commands_on_a_missing_state_create_nothing(tmp_path, cmd):
    state = tmp_path / "new" / "sub" / "typo.db"
    r = fawkes(*cmd, state=str(state))  # FAWKES_STATE
    refused(r, f"state sqlite:///{state}: no such state file")
    assert list(tmp_path.iterdir()) == []


def test_plan_reads_the_state_its_config_names(tmp_path):
    (tmp_path / "cfg.yaml").write_text("state: s.db\npolicy: EQ\n")
    refused(fawkes("plan", "--config", str(tmp_path / "cfg.yaml")), f"state sqlite:///{tmp_path}/s.db: no such state")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml"]


def test_an_empty_postgres_database_is_no_state(store_url):
    if not store_url.startswith("postgresql"):
        pytest.skip("the SQLite case is the missing file above")
    with Store(store_url) as s, s._writer.begin() as c:  # an empty database: drop fawkes' tables
        c.execute(text("DROP SCHEMA public CASCADE"))
        c.execute(text("CREATE SCHEMA public"))
    refused(fawkes("status", state=store_url), "no such state database (no fawkes tables)")
    from sqlalchemy import create_engine, inspect

    engine = create_engine(store_url)
    with engine.connect() as c:
        assert inspect(c).get_table_names() == []
    engine.dispose()


# ------------------------------------------------------------------ h: URLs, passwords, file modes
@pytest.mark.parametrize("url, message", [
    ("postgresql://fawkes:s3cret@[::1/db", "invalid state URL 'postgresql://fawkes:***@[::1/db': bad port"),
    ("postgresql://fawkes:s3cret@db:notaport/x", "invalid state URL 'postgresql://fawkes:***@db:notaport/x': bad port"),
    ("postgresql://fawkes:s3cret@db:99999/x", "port 99999 not in 1..65535"),
    ("sqlite://[::1/db", "invalid state URL 'sqlite://[::1/db': bad port"),
    ("postgresql://fawkes:s3cret@127.0.0.1:1/x", "state postgresql+psycopg://fawkes:***@127.0.0.1:1/x: cannot open"),
])
def test_malformed_state_urls_are_one_line_without_the_password(tmp_path, url, message):
    r = fawkes("status", "--state", url, env={"HOME": str(tmp_path)})
    refused(r, message)
    assert "s3cret" not in r.stderr + r.stdout and list(tmp_path.iterdir()) == []


def test_malformed_url_in_a_config_names_the_file(tmp_path):
    (tmp_path / "cfg.yaml").write_text("state: postgresql://u:pw@h:x/db\n")
    r = fawkes("plan", "--config", str(tmp_path / "cfg.yaml"))
    refused(r, "cfg.yaml:1: state: invalid state URL 'postgresql://u:***@h:x/db': bad port")


def test_new_state_file_is_private(tmp_path):
    state = tmp_path / "a" / "b" / "s.db"
    ok(fawkes("framework", "add", "spark", "--kind", "spark-hdfs", "--spark-home", "/opt/spark", "--hdfs-jars",
              "/opt/hdfs", "--no-check", "--state", str(state)))
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.parent.stat().st_mode) == 0o700
    ok(fawkes("cluster", "request", "etl", "-f", "spark", "-m", "1", "--state", str(state)))
    for f in state.parent.iterdir():  # -wal, -shm while open: never readable by others
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    assert os.stat(state).st_size > 0


# ------------------------------------------------------------------ d, g: numbers out of range, never a traceback
@pytest.fixture
def queue(tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    with Store(url) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.request_cluster("c1", framework="spark", min_core=1)
        s.submit_job("c1", ["app"])
    return tmp_path, url


@pytest.mark.parametrize("args, message", [
    (["submit", "c1", "--input-bytes", str(2**63), "--", "app"],
     "fawkes submit: Invalid value for '--input-bytes': 9223372036854775808 is not in the range 0<=x<=9223372036854775807"),
    (["jobs", "cancel", str(2**63)], "fawkes jobs cancel: Invalid value for 'ID...': 9223372036854775808 is not in"),
    (["jobs", "--limit", str(10**30)], "Invalid value for '--limit'"),
    (["events", "-n", str(10**30)], "Invalid value for '--limit'"),
    (["explain", str(2**64)], "Invalid value for '[TICK]'"),
    (["submit", "c1", "--ref-runtime", "inf", "--", "app"], "'--ref-runtime': inf is not in the range 0.0<=x<=31536000.0"),
    (["submit", "c1", "--ref-runtime", "nan", "--", "app"], "'--ref-runtime': 'nan' is not a finite number"),
    (["prune", "--samples-s", "nan"], "'--samples-s': 'nan' is not a finite number"),
    (["prune", "--events-s", "1e300"], "'--events-s': 1e+300 is not in the range"),
    (["cluster", "request", "big", "-f", "spark", "-m", str(2**63)], "min_core: must be an integer >= 1 (at most"),
    (["cluster", "request"], "fawkes cluster request: Missing argument 'NAME'. (see 'fawkes cluster request --help')"),
    (["status", "--bogus"], "fawkes status: No such option '--bogus'"),
])
def test_out_of_range_numbers_and_usage_errors_are_one_line(queue, args, message):
    d, url = queue
    before = tree(d)
    refused(fawkes(*args, state=url), message)
    assert tree(d) == before


def test_coordinator_for_must_be_finite(tmp_path):
    refused(fawkes("coordinator", "run", "--for", "inf"), "'--for': inf is not in the range 1<=x<=31536000.0")
    refused(fawkes("coordinator", "run", "--for", "nan"), "'--for': 'nan' is not a finite number")
    assert list(tmp_path.iterdir()) == []


def test_jobs_json_never_prints_infinity(queue):
    """A non-finite value stored before it was refused (or by another tool) is JSON null."""
    d, url = queue
    with Store(url) as s, s._writer.begin() as c:
        c.execute(text("UPDATE jobs SET ref_runtime = 9e999"))  # SQLite reads this as +Infinity
    out = ok(fawkes("jobs", "--json", state=url))
    assert "Infinity" not in out and "NaN" not in out
    import json

    assert json.loads(out)[0]["ref_runtime"] is None


# ------------------------------------------------------------------ e: what would hang or run out of memory is refused
TRACE = "submit_s,cluster,app,input_bytes,maps,reduces\n"
SIM = ["--capacity", "4", "--min-core", "1", "--period", "60"]


@pytest.mark.parametrize("rows, clusters, args, message", [
    ("0,a,wordcount,1GB,8,1\n1e15,a,wordcount,1GB,8,1\n", None, SIM,
     "t.csv:3: submit_s: column 1 (submit_s): expected seconds 0..315360000 (ten years), got '1e15'"),
    ("0,a,wordcount,1e400,8,1\n", None, SIM, "t.csv:2: input_bytes: column 4 (input_bytes): expected a byte count 0..1PB"),
    ("0,a,wordcount,1e30,8,1\n", None, SIM, "got '1e30'"),
    ("0,a,wordcount,1GB,100000000,1\n", None, SIM, "t.csv:2: maps: column 5 (maps): expected an integer 1..100000"),
    ("0,a,wordcount,1GB,8,100000000\n", None, SIM, "t.csv:2: reduces: column 6 (reduces): expected an integer 0..100000"),
    ("0,a,wordcount,1GB,8,1\n", "cluster,request_s\na,1e15\n", SIM, "c.csv:2: request_s: column 2 (request_s): expected"),
    ("0,a,wordcount,1GB,8,1\n", "cluster,request_s,min_core\na,0,9\n", SIM,
     "c.csv:2: min_core: column 3 (min_core): expected an integer 1..4 (--capacity), got '9'"),
    *[("0,a,wordcount,1GB,8,1\n", f"cluster,request_s,tasks_known\na,0,{v}\n", SIM,
       f"c.csv:2: tasks_known: column 3 (tasks_known): expected an integer 0..100000 (or empty), got {v!r}")
      for v in ("-1", "nan", "inf", "1e30", "100001", "2.5", "abc", "\x01")],
    ("0,a,wordcount,1GB,8,1\n", None, ["--capacity", "1000000000", "--min-core", "1", "--period", "60"],
     "--capacity must be 1..100000, got 1000000000"),
    ("0,a,wordcount,1GB,8,1\n", None, ["--capacity", "2", "--min-core", "5", "--period", "60"],
     "--min-core must be 1..2 (--capacity), got 5"),
    ("0,a,wordcount,1GB,8,1\n", None, ["--capacity", "4", "--min-core", "1", "--period", "1e-9"],
     "fawkes simulate: Invalid value for '--period': 1e-09 is not in the range 1<=x<=31536000.0"),
    ("0,a,wordcount,1GB,8,1\n", None, ["--capacity", "4", "--min-core", "1", "--period", "nan"],
     "Invalid value for '--period': 'nan' is not a finite number"),
    ("0,a,wordcount,1GB,8,1\n", None, ["--capacity", "4", "--min-core", "1", "--period", "inf"],
     "Invalid value for '--period': inf is not in the range"),
    ("0,a,wordcount,1GB,8,1\n", None, [*SIM, "--idle-timeout", "-1"], "Invalid value for '--idle-timeout': -1.0 is not"),
    ("0,a,wordcount,1GB,8,1\n", None, [*SIM, "--idle-timeout", "nan"], "'--idle-timeout': 'nan' is not a finite number"),
])
def test_simulate_refuses_what_would_not_finish(tmp_path, rows, clusters, args, message):
    (tmp_path / "t.csv").write_text(TRACE + rows)
    extra = []
    if clusters:
        (tmp_path / "c.csv").write_text(clusters)
        extra = ["--clusters", str(tmp_path / "c.csv")]
    refused(fawkes("simulate", "-q", "--trace", str(tmp_path / "t.csv"), *extra, *args), message)


@pytest.mark.parametrize("which", ["trace", "clusters"])
def test_simulate_refuses_a_fifo_without_blocking(tmp_path, which):
    (tmp_path / "t.csv").write_text(TRACE + "0,a,wordcount,1GB,8,1\n")
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    files = {"trace": fifo, "clusters": tmp_path / "t.csv"}
    args = ["--trace", str(files["trace"])] + (["--clusters", str(fifo)] if which == "clusters" else [])
    refused(fawkes("simulate", "-q", *args, *SIM), f"{fifo}: not a regular file")


def test_a_trace_saved_with_a_bom_is_read(tmp_path):
    """A spreadsheet's UTF-8 byte-order mark is no part of the first column's name."""
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbf" + (TRACE + "0,a,wordcount,1GB,8,1\n").encode())
    import json

    out = json.loads(ok(fawkes("simulate", "-q", "--json", "--trace", str(tmp_path / "t.csv"), *SIM)))
    assert out["jobs"] == 1


# ------------------------------------------------------------------ h: outputs never written through a planted symlink
def _planted(d: Path, output: str) -> Path:
    victim = d / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, d / f"{output}.tmp")
    return victim


def test_inventory_from_slurm_output_ignores_a_planted_tmp_symlink(tmp_path):
    victim = _planted(tmp_path, "out.yaml")
    r = fawkes("inventory", "from-slurm", "--nodelist", "n[1-2]", "--cpus-per-node", "2", "-o",
               str(tmp_path / "out.yaml"))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n" and (tmp_path / "out.yaml").read_text().count("name: n") == 2
    assert stat.S_IMODE((tmp_path / "out.yaml").stat().st_mode) & 0o600 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml", "out.yaml.tmp", "victim"]  # no leftovers


def test_trace_from_spark_output_ignores_a_planted_tmp_symlink(tmp_path):
    victim = _planted(tmp_path, "out.csv")
    logs = Path(__file__).resolve().parent / "fixtures" / "eventlogs" / "etl"
    r = fawkes("trace", "from-spark", "-q", f"etl={logs}", "-o", str(tmp_path / "out.csv"))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "out.csv").read_text().startswith("submit_s,cluster,app,input_bytes,maps,reduces")


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "1e30", "abc", "1\n2"])
def test_demo_reference_is_checked_before_the_lab(tmp_path, value):
    r = fawkes("demo", "--reference", value, "--dir", str(tmp_path / "demo"))
    refused(r, "--reference")
    assert not (tmp_path / "demo").exists()
