"""Explicit upgrades and online backups (issue 30, item 5): an older schema is migrated only by
``fawkes migrate`` (or ``coordinator run`` on a database nobody holds); every other command refuses
it in one line naming ``fawkes migrate`` and changes nothing; ``fawkes backup`` copies a SQLite state
while another connection writes, and the copy restores."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterState
from fawkes.store import SCHEMA_VERSION, Store
from fawkes.store.migrations import SchemaBehind

try:
    from store_fixtures import pg_server, store, store_url  # noqa: F401
    from test_cli_store import fawkes, ok, refused
    from test_store_schema import _downgrade_to_v1, _shape
except ImportError:
    from tests.store_fixtures import pg_server, store, store_url  # noqa: F401
    from tests.test_cli_store import fawkes, ok, refused
    from tests.test_store_schema import _downgrade_to_v1, _shape

OTHER = "otherhost:4242:0123456789ab.cafe"  # a holder on another machine: alive as far as we can know


def _populated(url: str) -> None:
    with Store(url) as s:
        s.register_framework("spark", "spark")
        s.sync_hosts([{"name": "h1", "cores": 2}])
        s.request_cluster("a", framework="spark", min_core=1)
        s.transition_cluster("a", ClusterState.DEPLOYING)
        s.submit_job("a", ["wc", "1"])


def _to_v9(url: str) -> None:
    """The shape of version 9 (before ``mr_clusters.saved_output``), lease table included."""
    with Store(url) as s, s.engine.begin() as c:
        _v9_shape(c)


def _v9_shape(c) -> None:
    """Undo versions 16 (``jobs.task_time``), 15 (``sampler_memory``), 14 (``mr_clusters.port_slot``), 13 (three indexes), 12 (``mr_clusters.restore_from``),
    11 (``api_tokens``, ``audit``,
    ``nodes.protected``) and 10 (``mr_clusters.saved_output``)."""
    for ix in ("ix_nodes_held", "ix_nodes_released_at", "ix_jobs_state_cluster"):
        c.execute(text(f"DROP INDEX {ix}"))
    c.execute(text("ALTER TABLE jobs DROP COLUMN task_time"))
    c.execute(text("DROP TABLE sampler_memory"))
    c.execute(text("DROP INDEX ix_mr_clusters_port_slot"))
    c.execute(text("ALTER TABLE mr_clusters DROP COLUMN port_slot"))
    c.execute(text("ALTER TABLE mr_clusters DROP COLUMN restore_from"))
    c.execute(text("DROP TABLE api_tokens"))
    c.execute(text("DROP TABLE audit"))
    c.execute(text("ALTER TABLE nodes DROP COLUMN protected"))
    c.execute(text("ALTER TABLE mr_clusters DROP COLUMN saved_output"))
    c.execute(text("UPDATE schema_version SET version = 9"))


def _version(url: str) -> int:
    from fawkes.store.db import make_engine
    from fawkes.store.migrations import read_version

    e = make_engine(url)
    try:
        with e.connect() as c:
            return read_version(c)
    finally:
        e.dispose()


def _file(url: str) -> Path | None:
    return Path(url.split("///", 1)[1]) if url.startswith("sqlite") else None


def _fingerprint(url: str):
    f = _file(url)
    if f is not None:
        return f.read_bytes(), sorted(p.name for p in f.parent.iterdir())
    from fawkes.store.db import make_engine

    e = make_engine(url)
    try:
        return _version(url), _shape(e)
    finally:
        e.dispose()


def test_an_old_schema_is_refused_by_status_and_migrated_only_by_fawkes_migrate(store_url):
    _populated(store_url)
    with Store(store_url) as s:
        _downgrade_to_v1(s)
    before = _fingerprint(store_url)

    for args in (["status"], ["jobs"], ["cluster", "release", "a"]):
        refused(fawkes(*args, state=store_url), "run 'fawkes migrate'")
    assert _fingerprint(store_url) == before  # bytes equal (SQLite), version and shape (PostgreSQL)
    with pytest.raises(SchemaBehind, match="schema version 1 is older than this fawkes"):
        Store(store_url)

    out = ok(fawkes("migrate", "--dry-run", state=store_url))
    assert f"schema version 1 -> {SCHEMA_VERSION}, {SCHEMA_VERSION - 1} step(s) (dry run" in out
    for v in range(1, SCHEMA_VERSION):
        assert f"  {v} -> {v + 1}: Version {v + 1}: " in out
    assert _fingerprint(store_url) == before

    out = ok(fawkes("migrate", state=store_url))
    assert out.strip().endswith(f"migrated to schema version {SCHEMA_VERSION}") and "  9 -> 10:" in out
    assert _version(store_url) == SCHEMA_VERSION
    assert "a" in ok(fawkes("status", state=store_url))
    assert "is current; nothing to do" in ok(fawkes("migrate", state=store_url))


def test_migrate_is_refused_under_a_held_lease_unless_current(store_url):
    _populated(store_url)
    with Store(store_url) as s:
        assert s.take_lease(OTHER, 3600, started_at=time.time()) == 1
    _to_v9(store_url)
    before = _fingerprint(store_url)
    refused(fawkes("migrate", state=store_url), "a live coordinator holds the lease (otherhost:4242")
    assert _fingerprint(store_url) == before
    out = ok(fawkes("migrate", "--dry-run", state=store_url))
    assert "  9 -> 10: " in out and "refused until it stops" in out
    assert _fingerprint(store_url) == before
    # coordinator run on PostgreSQL migrates only a database nobody holds; on SQLite its file lock decides
    from fawkes.coordinator.leadership import Leadership

    if _file(store_url) is None:
        with pytest.raises(FawkesError, match="a live coordinator holds the lease"):
            Leadership(store_url, 60).open()
        assert _fingerprint(store_url) == before
    # the lease expired: migrate goes ahead
    with Store(store_url, migrate=True, lease_check=False) as s:  # (only to write the expiry)
        with s.engine.begin() as c:
            c.execute(text("UPDATE coordinator_lease SET expires_at = 0"))
        with s.engine.begin() as c:  # back to 9 for the real test below
            _v9_shape(c)
    assert "migrated to schema version" in ok(fawkes("migrate", state=store_url))
    with Store(store_url) as s:  # current, lease taken again: migrate has nothing to do, not refused
        s.take_lease(OTHER, 3600, started_at=time.time(), force=True)
    assert "is current; nothing to do" in ok(fawkes("migrate", state=store_url))


def test_coordinator_open_migrates_a_database_nobody_holds(store_url):
    from fawkes.coordinator.leadership import Leadership

    _populated(store_url)
    _to_v9(store_url)
    lead = Leadership(store_url, 60).open()
    try:
        assert lead.store.schema_version == SCHEMA_VERSION == _version(store_url)
    finally:
        lead.close()


def test_sqlite_migrate_is_refused_while_a_coordinator_holds_the_file_lock(tmp_path):
    import fcntl
    import os

    url = f"sqlite:///{tmp_path / 'f.db'}"
    _populated(url)
    _to_v9(url)
    fd = os.open(tmp_path / "f.db.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"777\n")
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = _fingerprint(url)
        refused(fawkes("migrate", state=url), "a coordinator (pid 777) runs on this state")
        assert _fingerprint(url) == before
    finally:
        os.close(fd)
    assert "migrated" in ok(fawkes("migrate", state=url))


def test_a_fresh_state_is_still_created_current_and_migrate_creates_none(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    refused(fawkes("migrate", state=url), "no such state file")
    refused(fawkes("migrate", "--dry-run", state=url), "no such state file")
    assert list(tmp_path.iterdir()) == []
    with Store(url) as s:
        assert s.schema_version == SCHEMA_VERSION


# ------------------------------------------------------------------ backups
def test_backup_while_another_connection_writes_and_restore(tmp_path):
    url = f"sqlite:///{tmp_path / 'live.db'}"
    _populated(url)
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        with Store(url) as s:
            while not stop.is_set():
                written.append(s.submit_job("a", ["wc", str(len(written))]).id)

    t = threading.Thread(target=writer)
    t.start()
    try:
        while len(written) < 20:
            time.sleep(0.05)
        out = ok(fawkes("backup", str(tmp_path / "b.db"), state=url))
    finally:
        stop.set()
        t.join()
    assert "backed up to" in out and (tmp_path / "b.db").stat().st_mode & 0o777 == 0o600
    copy = f"sqlite:///{tmp_path / 'b.db'}"
    with Store(copy, create=False) as b, Store(url) as live:
        jobs = [(j.id, j.argv) for j in b.list_jobs()]
        live_jobs = {j.id: j.argv for j in live.list_jobs()}
        assert [c.name for c in b.list_clusters()] == [c.name for c in live.list_clusters()] == ["a"]
        assert len(jobs) >= 21 and all(live_jobs[i] == argv for i, argv in jobs)  # a consistent prefix
        assert [j for j in live_jobs if j <= max(i for i, _ in jobs)] == [i for i, _ in jobs]

    # restore: the backup copied into place (the coordinator stopped; its -wal/-shm removed)
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copyfile(tmp_path / "b.db", restored / "fawkes.db")
    rurl = f"sqlite:///{restored / 'fawkes.db'}"
    with Store(rurl, create=False) as r:
        assert [(j.id, j.argv) for j in r.list_jobs()] == jobs
    status = ok(fawkes("status", state=rurl))
    assert "a" in status


def test_backup_refuses_an_existing_or_odd_dest_and_prints_pg_dump(tmp_path, store_url):
    import os

    url = f"sqlite:///{tmp_path / 's.db'}"
    _populated(url)
    (tmp_path / "exists.db").write_text("keep")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    refused(fawkes("backup", str(tmp_path / "exists.db"), state=url), "exists (a regular file)")
    refused(fawkes("backup", str(tmp_path / "fifo"), state=url), "exists (not a regular file)")
    refused(fawkes("backup", str(tmp_path / "dir"), state=url), "exists (a directory)")
    refused(fawkes("backup", str(tmp_path / "no" / "b.db"), state=url), "does not exist")
    refused(fawkes("backup", "a\nb", state=url), "control character")
    refused(fawkes("backup", str(tmp_path / "b.db"), state=f"sqlite:///{tmp_path / 'none.db'}"), "no such state")
    assert (tmp_path / "exists.db").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "exists.db", "fifo", "s.db"]
    if store_url.startswith("postgresql"):
        _populated(store_url)
        r = fawkes("backup", str(tmp_path / "pg.dump"), state=store_url)
        refused(r, "pg_dump --format=custom --file ")
        cmd = r.stderr.split("run ", 1)[1]
        assert "'postgresql://postgres@/" in cmd and "+psycopg" not in cmd
        assert not (tmp_path / "pg.dump").exists()
