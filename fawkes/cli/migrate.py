"""``fawkes migrate [--dry-run]``: bring the state's schema to this fawkes' version, explicitly.

Every other command refuses an older schema in one line naming this one (``fawkes coordinator run``
migrates a database nobody holds).  Refused while a live coordinator holds the lease (SQLite: also
while one holds the state's file lock) unless the schema is current; ``--dry-run`` lists the pending
steps and changes nothing.  See docs/operations.md, upgrades.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import click

from fawkes.cli.status import emit_json, json_option
from fawkes.config import resolve_state_url, state_option


@click.command()
@state_option
@click.option("--dry-run", is_flag=True, help="list the pending steps; change nothing")
@json_option
def migrate(state: str | None, dry_run: bool, as_json: bool) -> None:
    """Migrate the state to this fawkes' schema version, printing each step (refused while a live
    coordinator holds the state; stop it first)."""
    from sqlalchemy.engine import make_url

    from fawkes.errors import FawkesError
    from fawkes.store.api import _require_schema, _require_sqlite_file, check_sqlite_state
    from fawkes.store.base import first_line
    from fawkes.store.db import make_engine
    from fawkes.store.migrations import CURRENT, ensure_schema, live_holder, pending, read_version

    say = (lambda _line: None) if as_json else click.echo
    url = resolve_state_url(state)
    display = make_url(url).render_as_string(hide_password=True)
    where = f"state {display}"
    db = _sqlite_file(url)
    if db is not None:
        _require_sqlite_file(url, display)  # never creates: migrate needs a state
        check_sqlite_state(db, display)
    lock_fd = None
    try:
        try:
            engine = make_engine(url)
        except OSError as exc:
            raise FawkesError(f"{where}: cannot open: {exc}") from None
        try:
            _require_schema(engine, display)
            with engine.connect() as conn:
                version = read_version(conn)
                holder = live_holder(conn) if version is not None and version < CURRENT else None
                conn.rollback()
            if version is None:
                raise FawkesError(f"{where}: no schema version: not a fawkes state database?")
            if version > CURRENT:
                raise FawkesError(f"{where}: schema version {version} is newer than this fawkes understands "
                                  f"({CURRENT}); upgrade fawkes")
            report = {"state": display, "version": version, "current": CURRENT, "steps": [], "dry_run": dry_run,
                      "migrated": False, "lease_holder": holder}
            if version == CURRENT:
                say(f"{where}: schema version {version} is current; nothing to do")
                emit_json(report) if as_json else None
                return
            steps = pending(version)
            if not dry_run and db is not None:
                lock_fd = _file_lock(db, where)  # held until the migration is over: no coordinator starts
            if not dry_run and holder is not None:
                raise FawkesError(f"{where}: a live coordinator holds the lease ({holder}): stop it, then run "
                                  "'fawkes migrate' again (nothing was changed)")
            report["steps"] = [{"from": a, "to": b, "what": what} for a, b, what in steps]
            say(f"{where}: schema version {version} -> {CURRENT}, {len(steps)} step(s)"
                + (" (dry run: nothing is changed)" if dry_run else ""))
            for a, b, what in steps:
                say(f"  {a} -> {b}: {what}")
            if dry_run:
                emit_json(report) if as_json else None
                if holder is not None:
                    say(f"note: a live coordinator holds the lease ({holder}); 'fawkes migrate' is "
                               "refused until it stops")
                return
            try:
                done = ensure_schema(engine, where=where, migrate=True, lease_check=True)
            except FawkesError:
                raise
            except Exception as exc:  # a step failed: its transaction rolled back, nothing changed
                raise FawkesError(f"{where}: migration failed, nothing was changed: {first_line(exc)}") from None
            say(f"{where}: migrated to schema version {done}")
            emit_json(report | {"migrated": True, "version": done}) if as_json else None
        finally:
            engine.dispose()
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _sqlite_file(url: str) -> Path | None:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:"):
        return None
    return Path(u.database)


def _file_lock(db: Path, where: str) -> int | None:
    """Hold the SQLite coordinator's file lock while migrating (a coordinator running on this file
    holds it: refused); a state that never had a coordinator has no lock file (none is created)."""
    from fawkes.coordinator.leadership import lock_path
    from fawkes.errors import FawkesError

    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FawkesError(f"{where}: cannot open the coordinator lock {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 64).decode("ascii", "replace").strip()
        os.close(fd)
        raise FawkesError(f"{where}: a coordinator (pid {owner or '?'}) runs on this state: stop it, then run "
                          "'fawkes migrate' again (nothing was changed)") from None
    return fd
