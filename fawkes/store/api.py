"""The store API: every read and write the CLI and the coordinator make on the state.

Contract for every method:

* each call is one short transaction (writes begin immediately on SQLite); it either
  commits completely or changes nothing (the batch writes, ``allocate_nodes`` and
  ``transition_nodes``, say how they split a batch and report each step);
* bad input and refused operations raise :class:`~fawkes.errors.FawkesError` with one
  line naming the field or the record; races between processes end the same way (a
  unique constraint or a compare-and-set on the old state decides the winner);
* returned records are detached copies (safe to keep after the call);
* times come from ``clock`` (default :func:`time.time`), so simulations can drive it.

Clusters are addressed by name: the live cluster of that name, or (for reads) the most
recent released one.  Nodes and jobs are addressed by their integer ids.

:class:`Store` is assembled from one part per aggregate, each a mixin over
:class:`~fawkes.store.base.StoreBase` (the session, compare-and-set and shared lookups):

========================================  ==============================================
:class:`~fawkes.store.hosts.HostsMixin`       frameworks, pool hosts
:class:`~fawkes.store.clusters.ClustersMixin` MR-clusters and their nodes
:class:`~fawkes.store.jobs.JobsMixin`         MR-jobs and their FIFO queues
:class:`~fawkes.store.samples.SamplesMixin`   samples, decisions, controller memory
:class:`~fawkes.store.events.EventsMixin`     events, ``status``
:class:`~fawkes.store.lease.LeaseMixin`       the coordinator lease, the fence on writes
:class:`~fawkes.store.tokens.TokensMixin`     teams' API tokens (hashed)
:class:`~fawkes.store.audit.AuditMixin`       the audit trail
========================================  ==============================================
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from fawkes.errors import FawkesError
from fawkes.store.audit import AuditMixin
from fawkes.store.base import first_line
from fawkes.store.clusters import ClustersMixin
from fawkes.store.db import make_engine, normalize_url, write_engine
from fawkes.store.events import EventsMixin
from fawkes.store.hosts import HostsMixin
from fawkes.store.jobs import JobsMixin
from fawkes.store.lease import LeaseMixin
from fawkes.store.migrations import ensure_schema
from fawkes.store.samples import SamplesMixin
from fawkes.store.tokens import TokensMixin


class Store(HostsMixin, ClustersMixin, JobsMixin, SamplesMixin, EventsMixin, LeaseMixin, TokensMixin, AuditMixin):
    """The coordinator state at ``url`` (SQLite file or PostgreSQL); a fresh one is created at the current
    schema, an older one migrated only on request (see ``__init__``)."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time, create: bool = True,
                 migrate: bool = False, lease_check: bool = True):
        """``create=False``: the state must exist already (a SQLite file, or a database holding fawkes'
        tables); else one line and nothing is created (read-only commands and commands that change
        existing records open the state this way).

        An older schema is migrated only with ``migrate=True`` (``fawkes migrate``, ``fawkes coordinator
        run``), and then refused while a live coordinator holds the lease unless ``lease_check=False``;
        otherwise :class:`~fawkes.store.migrations.SchemaBehind`, one line naming ``fawkes migrate``,
        and nothing changes."""
        self.url = normalize_url(url)
        self.display_url = make_url(self.url).render_as_string(hide_password=True)
        self.clock = clock
        if not create:
            _require_sqlite_file(self.url, self.display_url)
        try:
            self.engine = make_engine(self.url)
        except OSError as exc:
            raise FawkesError(f"state {self.display_url}: cannot open: {exc}") from None
        self._writer = write_engine(self.engine)
        try:
            if not create:
                _require_schema(self.engine, self.display_url)
            self.schema_version = ensure_schema(self.engine, where=f"state {self.display_url}", migrate=migrate,
                                                lease_check=lease_check)
        except FawkesError:
            self.engine.dispose()
            raise
        except Exception as exc:  # unreachable server, unreadable file: one line, no traceback
            self.engine.dispose()
            raise FawkesError(f"state {self.display_url}: cannot open: {first_line(exc)}") from None

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_NO_STATE = ("no such state {what} (nothing has been recorded there; 'fawkes framework add' or "
             "'fawkes coordinator run' creates one; check --state/FAWKES_STATE or the config's state)")


def _require_sqlite_file(url: str, display: str) -> None:
    sa_url = make_url(url)
    if sa_url.get_backend_name() != "sqlite" or sa_url.database in (None, "", ":memory:"):
        return
    db = Path(sa_url.database)
    if not db.is_file():
        what = "file" if not db.exists() else "file (not a regular file)"
        raise FawkesError(f"state {display}: " + _NO_STATE.format(what=what))


#: the first 16 bytes of every SQLite 3 database file
SQLITE_HEADER = b"SQLite format 3\0"


def check_sqlite_state(db: Path, display: str) -> None:
    """Refuse (one line) a SQLite state file that is not a fawkes state, reading it only: a file that
    exists must be a regular file holding a SQLite database that is empty (a fresh state) or has
    fawkes' tables at a schema version this binary understands.  A missing file passes (it will be
    created).  For callers that must refuse before they create anything beside the file (the
    coordinator's lock).  Opened ``immutable``: no -wal/-shm file created and no lock taken; what it
    reads of a state that a running coordinator writes may lag (its WAL is not read), never so far
    as to refuse a state of ours."""
    if not db.exists() and not db.is_symlink():
        return
    where = f"state {display}"
    if not db.is_file():
        raise FawkesError(f"{where}: not a regular file")
    try:
        with db.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise FawkesError(f"{where}: cannot read: {exc.strerror}") from None
    if not head:
        return  # an empty file is an empty SQLite database (a state whose creation was interrupted)
    if head != SQLITE_HEADER:
        raise FawkesError(f"{where}: not a SQLite database, so no fawkes state (check --state/FAWKES_STATE "
                          "or the config's state)")
    from fawkes.store.migrations import CURRENT

    uri = db.absolute().as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            row = (conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
                   if "schema_version" in tables else None)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise FawkesError(f"{where}: not a readable SQLite database: {first_line(exc)}") from None
    if tables and row is None:
        raise FawkesError(f"{where}: a SQLite database without fawkes' schema version "
                          f"(tables {', '.join(sorted(tables)[:3])}{', ...' if len(tables) > 3 else ''}): "
                          "not a fawkes state database?")
    if row is not None and not (isinstance(row[0], int) and row[0] >= 1):
        raise FawkesError(f"{where}: schema version {row[0]!r} is no version of fawkes': not a fawkes state database?")
    if row is not None and row[0] > CURRENT:
        raise FawkesError(f"{where}: schema version {row[0]!r} is newer than this fawkes understands "
                          f"({CURRENT}); upgrade fawkes")


def _require_schema(engine, display: str) -> None:
    with engine.connect() as conn:
        found = inspect(conn).has_table("schema_version")
    if not found:
        raise FawkesError(f"state {display}: " + _NO_STATE.format(what="database (no fawkes tables)"))
