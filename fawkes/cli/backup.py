"""``fawkes backup DEST``: a consistent copy of a SQLite state, safe while the coordinator runs.

SQLite: the online backup API (:meth:`sqlite3.Connection.backup`) copies the database in one read
transaction, so the copy is one committed state even while the coordinator writes (WAL mode: the
coordinator is never blocked).  The copy is written beside DEST and linked into place, so DEST is
either absent or complete.  DEST must not exist (a file, a directory, a FIFO, a link: refused).
PostgreSQL: refused in one line giving the ``pg_dump`` command to run (docs/operations.md).
Restore: stop the coordinator, copy the backup over the state file (removing its -wal and -shm).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import click

from fawkes.cli.status import emit_json, json_option
from fawkes.config import resolve_state_url, state_option


@click.command()
@click.argument("dest", metavar="DEST")
@state_option
@json_option
def backup(dest: str, state: str | None, as_json: bool) -> None:
    """Copy the SQLite state to DEST (a new file), consistently, while the coordinator may run.
    For a PostgreSQL state, prints the pg_dump command to run instead (exit code 2)."""
    from sqlalchemy.engine import make_url

    from fawkes.errors import FawkesError
    from fawkes.store.api import _require_sqlite_file, check_sqlite_state
    from fawkes.store.base import first_line
    from fawkes.store.db import redact_url

    if not dest or any(c in dest for c in "\0\n\r"):
        raise FawkesError(f"backup: DEST {dest[:80]!r}: not a file name (empty, or a control character)")
    url = resolve_state_url(state)
    u = make_url(url)
    display = u.render_as_string(hide_password=True)
    if u.get_backend_name() == "postgresql":
        libpq = redact_url(u.set(drivername="postgresql").render_as_string(hide_password=False))
        raise FawkesError(f"state {display}: PostgreSQL is backed up with pg_dump, not fawkes: run "
                          f"pg_dump --format=custom --file {_quote(dest)} {_quote(libpq)} "
                          "(restore: pg_restore --clean --dbname URL FILE; docs/operations.md)")
    if u.database in (None, "", ":memory:"):
        raise FawkesError(f"state {display}: an in-memory state has nothing to back up")
    db = Path(u.database)
    _require_sqlite_file(url, display)
    check_sqlite_state(db, display)
    out = Path(dest).expanduser().absolute()
    if os.path.lexists(out):
        kind = ("a directory" if out.is_dir() else "a regular file" if out.is_file() and not out.is_symlink()
                else "not a regular file")
        raise FawkesError(f"backup: DEST {out} exists ({kind}): choose a new file name")
    if not out.parent.is_dir():
        raise FawkesError(f"backup: DEST {out}: its directory {out.parent} does not exist")
    if out.resolve() == db.resolve():
        raise FawkesError(f"backup: DEST {out} is the state itself")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise FawkesError(f"backup: DEST {out}: cannot write beside it: {exc.strerror}") from None
    os.close(fd)
    try:
        src = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)  # one read transaction: a committed state, writers not blocked (WAL)
                version = dst.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
                counts = {t: dst.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("mr_clusters", "jobs")}
                dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file (a store reopens it WAL)
            finally:
                dst.close()
        finally:
            src.close()
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.link(tmp, out)  # fails if DEST appeared meanwhile: never overwritten
    except FileExistsError:
        raise FawkesError(f"backup: DEST {out} appeared meanwhile: nothing was written there") from None
    except (sqlite3.Error, OSError) as exc:
        raise FawkesError(f"backup of state {display} failed: {first_line(exc)}") from None
    finally:
        tmp.unlink(missing_ok=True)
    if as_json:
        emit_json({"state": display, "backup": str(out), "version": version[0] if version else None,
                   "clusters": counts["mr_clusters"], "jobs": counts["jobs"]})
        return
    click.echo(f"state {display}: backed up to {out} (schema version {version[0] if version else '?'}, "
               f"{counts['mr_clusters']} clusters, {counts['jobs']} jobs)")


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)
