"""Schema versioning: create a fresh schema, migrate an older one, refuse a newer one.

``MIGRATIONS[i]`` upgrades a database from version ``i + 1`` to ``i + 2``; so the
version this binary writes is ``CURRENT = 1 + len(MIGRATIONS)``.  A migration is a plain
function of a SQLAlchemy ``Connection`` that runs inside the migration transaction
(DDL is transactional in PostgreSQL and in SQLite).  To change the schema: edit
:mod:`fawkes.store.schema` (fresh databases get the new tables directly) *and* append
a function here that brings an existing database to the same shape.

:func:`ensure_schema` is safe when several processes open a fresh database at once:
SQLite serializes them with ``BEGIN IMMEDIATE``, PostgreSQL with an advisory lock.

Upgrades are explicit (issue 30): opening a store never migrates unless asked
(``Store(url, migrate=True)``: ``fawkes migrate`` and ``fawkes coordinator run``); every other
open of an older schema raises :class:`SchemaBehind` (one line naming ``fawkes migrate``) and
changes nothing, so that a newer client's ``fawkes status`` never migrates a database under an
older running coordinator.  :func:`migrate` refuses while a live coordinator holds the lease
(:func:`live_holder`) unless the schema is current already.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy import JSON, bindparam, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from fawkes.errors import FawkesError
from fawkes.store import schema  # noqa: F401  (registers the tables)
from fawkes.store.db import write_engine

Migration = Callable[[Connection], None]



def _v1_to_v2(conn: Connection) -> None:
    """Version 2: ``jobs.cancel_requested_at`` (a user's cancel of a started job, which the
    coordinator carries out) and the index ``ix_samples_time`` (retention deletes by time)."""
    conn.execute(text("ALTER TABLE jobs ADD COLUMN cancel_requested_at FLOAT"))
    conn.execute(text("CREATE INDEX ix_samples_time ON samples (time)"))


def _v2_to_v3(conn: Connection) -> None:
    """Version 3: the control loop's memory (``controller_memory``, one row); ``nodes.running_tasks``
    (FP victim order); ``nodes.desired_state`` dropped (never read)."""
    conn.execute(text("CREATE TABLE controller_memory (id INTEGER NOT NULL PRIMARY KEY, time FLOAT NOT NULL, "
                      "step VARCHAR(16) NOT NULL, memory JSON NOT NULL)"))
    conn.execute(text("ALTER TABLE nodes ADD COLUMN running_tasks INTEGER NOT NULL DEFAULT 0"))
    conn.execute(text("ALTER TABLE nodes DROP COLUMN desired_state"))


def _v3_to_v4(conn: Connection) -> None:
    """Version 4: ``jobs.tasks_seen``, the tasks a job's driver reported, so that the sampler's
    estimate for a job that has not started (or has no stage yet) survives a restart."""
    conn.execute(text("ALTER TABLE jobs ADD COLUMN tasks_seen INTEGER"))


def _v4_to_v5(conn: Connection) -> None:
    """Version 5: ``coordinator_lease``, which coordinator acts (a lease with a fencing token that
    every write of the leader checks: ``fawkes.store.lease``)."""
    conn.execute(text("CREATE TABLE coordinator_lease (id INTEGER NOT NULL PRIMARY KEY, token INTEGER NOT NULL, "
                      "holder VARCHAR(300) NOT NULL, hostname VARCHAR(253) NOT NULL, pid INTEGER NOT NULL, "
                      "started_at FLOAT NOT NULL, acquired_at FLOAT NOT NULL, renewed_at FLOAT NOT NULL, "
                      "expires_at FLOAT NOT NULL)"))


def _v5_to_v6(conn: Connection) -> None:
    """Version 6: ``mr_clusters.expected_duration_s`` and ``mr_clusters.deadline_s``, what a request
    tells the admission disciplines (sjf, utility, the deadline purge; issue 12)."""
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN expected_duration_s FLOAT"))
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN deadline_s FLOAT"))


def _v6_to_v7(conn: Connection) -> None:
    """Version 7: ``hosts.rack``, the rack (or site) label a host has in the inventory: a cluster's
    preferred racks are those of its core nodes (placement, issue 12)."""
    conn.execute(text("ALTER TABLE hosts ADD COLUMN rack VARCHAR(63)"))


def _v7_to_v8(conn: Connection) -> None:
    """Version 8: ``frameworks.paths``, a framework's installation paths as one JSON object under the
    names its kind reads, instead of one column per path (the service names no framework).  Every
    column of ``frameworks`` but ``name``, ``kind``, ``java_home`` and ``created`` is such a path: its
    non-null values move into ``paths`` under the column's name, and the column goes."""
    keep = {"name", "kind", "java_home", "created"}
    cols = [c["name"] for c in inspect(conn).get_columns("frameworks") if c["name"] not in keep]
    conn.execute(text("ALTER TABLE frameworks ADD COLUMN paths JSON NOT NULL DEFAULT '{}'"))
    if cols:
        q = conn.dialect.identifier_preparer.quote
        rows = conn.execute(text(f"SELECT name, {', '.join(q(c) for c in cols)} FROM frameworks")).all()
        put = text("UPDATE frameworks SET paths = :paths WHERE name = :name").bindparams(bindparam("paths", type_=JSON))
        for r in rows:
            conn.execute(put, {"name": r[0], "paths": {c: v for c, v in zip(cols, r[1:]) if v is not None}})
        for c in cols:
            conn.execute(text(f"ALTER TABLE frameworks DROP COLUMN {q(c)}"))


def _v8_to_v9(conn: Connection) -> None:
    """Version 9: ``mr_clusters.stored_baseline``, the bytes a cluster's file system held at its first
    active sample (DU's baseline: output bytes are those above it), kept in the state so that a
    restarted coordinator weighs as before (the sampler kept it in memory; a cluster active before
    this version gets a new baseline at its next sample, as after a restart then)."""
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN stored_baseline FLOAT"))


def _v9_to_v10(conn: Connection) -> None:
    """Version 10: ``mr_clusters.saved_output``, where a leaving cluster's output was saved (recorded
    before its teardown, so that a restart in between neither saves again nor loses the record)."""
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN saved_output VARCHAR"))


def _v10_to_v11(conn: Connection) -> None:
    """Version 11: ``api_tokens`` (teams' HTTP API tokens, only the SHA-256 of each secret) and ``audit``
    (every mutating API request and command: who, what, when, result; issue 27); ``nodes.protected`` (an
    admin keeps the node from being removed by a resize)."""
    pk = "SERIAL" if conn.dialect.name == "postgresql" else "INTEGER"
    conn.execute(text(f"CREATE TABLE api_tokens (id {pk} NOT NULL PRIMARY KEY, team VARCHAR(64) NOT NULL, "
                      "secret_sha256 VARCHAR(64) NOT NULL UNIQUE, scopes JSON NOT NULL, clusters JSON NOT NULL, "
                      "created_at FLOAT NOT NULL, expires_at FLOAT, revoked_at FLOAT, last_used_at FLOAT)"))
    conn.execute(text("CREATE INDEX ix_api_tokens_team ON api_tokens (team)"))
    conn.execute(text(f"CREATE TABLE audit (id {pk} NOT NULL PRIMARY KEY, time FLOAT NOT NULL, "
                      "actor VARCHAR(300) NOT NULL, via VARCHAR(16) NOT NULL, action VARCHAR(64) NOT NULL, "
                      "target VARCHAR(300), result VARCHAR(16) NOT NULL, status INTEGER, detail TEXT NOT NULL)"))
    conn.execute(text("CREATE INDEX ix_audit_time ON audit (time)"))
    conn.execute(text("ALTER TABLE nodes ADD COLUMN protected BOOLEAN NOT NULL DEFAULT false"))


def _v11_to_v12(conn: Connection) -> None:
    """Version 12: ``mr_clusters.restore_from``, for a cluster woken from hibernation the saved output
    of the incarnation it wakes from (scale to zero, issue 27)."""
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN restore_from VARCHAR"))


def _v12_to_v13(conn: Connection) -> None:
    """Version 13: indexes for the reads that must not grow with the history (issue 26): the live nodes
    (``ix_nodes_held``, partial: holding a host), the nodes released after a time (``ix_nodes_released_at``)
    and the jobs by state (``ix_jobs_state_cluster``); released nodes and finished jobs are never deleted,
    and without these ``fawkes status``, ``/metrics``, the dashboard and every tick's snapshot read them all."""
    conn.execute(text("CREATE INDEX ix_nodes_held ON nodes (cluster_id, role, state) WHERE holds_host IS NOT NULL"))
    conn.execute(text("CREATE INDEX ix_nodes_released_at ON nodes (released_at)"))
    conn.execute(text("CREATE INDEX ix_jobs_state_cluster ON jobs (state, cluster_id)"))


def _v13_to_v14(conn: Connection) -> None:
    """Version 14: ``mr_clusters.port_slot``, a live cluster's block of ports (issue 30: ports chosen per
    cluster from a configurable range, no two live clusters with the same block)."""
    conn.execute(text("ALTER TABLE mr_clusters ADD COLUMN port_slot INTEGER"))
    conn.execute(text("CREATE UNIQUE INDEX ix_mr_clusters_port_slot ON mr_clusters (port_slot)"))


def _v14_to_v15(conn: Connection) -> None:
    """Version 15: ``sampler_memory`` (one row), CERES' usage windows per node, so that a restarted
    coordinator resumes them (issue 28)."""
    conn.execute(text("CREATE TABLE sampler_memory (id INTEGER NOT NULL PRIMARY KEY, time FLOAT NOT NULL, "
                      "windows JSON NOT NULL)"))


def _v15_to_v16(conn: Connection) -> None:
    """Version 16: ``jobs.task_time``, the tasks a job ran on its cluster's master node and on the others
    and their seconds (issue 25: the twin's task time per node)."""
    conn.execute(text("ALTER TABLE jobs ADD COLUMN task_time JSON"))


#: version 1 is the first schema; append upgrades here (index 0: 1 -> 2, ...)
MIGRATIONS: list[Migration] = [_v1_to_v2, _v2_to_v3, _v3_to_v4, _v4_to_v5, _v5_to_v6, _v6_to_v7, _v7_to_v8,
                               _v8_to_v9, _v9_to_v10, _v10_to_v11, _v11_to_v12,
                               _v12_to_v13, _v13_to_v14, _v14_to_v15, _v15_to_v16]
CURRENT = 1 + len(MIGRATIONS)

_PG_LOCK_KEY = 0x46415753  # "FAWS": advisory lock id for schema changes


def read_version(conn: Connection) -> int | None:
    """The stored schema version, or ``None`` for a database without fawkes tables."""
    if not inspect(conn).has_table("schema_version"):
        return None
    row = conn.execute(text("SELECT version FROM schema_version WHERE id = 1")).first()
    return int(row[0]) if row else None


class SchemaBehind(FawkesError):
    """The state's schema is older than this binary's and this open may not migrate it."""


def pending(version: int, migrations: Sequence[Migration] | None = None) -> list[tuple[int, int, str]]:
    """The steps that bring ``version`` current: ``(from, to, first line of the step's docstring)``."""
    steps = list(MIGRATIONS if migrations is None else migrations)
    out = []
    for v in range(version, 1 + len(steps)):
        doc = (steps[v - 1].__doc__ or steps[v - 1].__name__).strip()
        first = " ".join(doc.split("\n\n")[0].split())
        out.append((v, v + 1, first))
    return out


def behind_message(where: str, version: int, current: int) -> str:
    return (f"{where}: schema version {version} is older than this fawkes ({current}); run 'fawkes migrate' "
            "(nothing was changed; see docs/operations.md, upgrades)")


def ensure_schema(engine: Engine, *, migrations: Sequence[Migration] | None = None, where: str = "state",
                  migrate: bool = True, lease_check: bool = False) -> int:
    """Bring the database behind ``engine`` to the current schema; return its version.

    Fresh database: create every table and stamp the current version.  Older version:
    with ``migrate``, run the pending migrations in order, in one transaction (``lease_check``:
    refused while a live coordinator holds the lease, :func:`live_holder`); without, raise
    :class:`SchemaBehind` and change nothing.  Newer version: raise :class:`FawkesError` (one
    line) and change nothing.  ``migrations`` defaults to :data:`MIGRATIONS` (tests pass their
    own list to exercise the mechanism).
    """
    steps = list(MIGRATIONS if migrations is None else migrations)
    current = 1 + len(steps)
    with engine.connect() as conn:  # a current schema: read only, no write lock taken
        version = read_version(conn)
        conn.rollback()
    if version == current:
        return current
    if version is not None and version > current:
        raise FawkesError(
            f"{where}: schema version {version} is newer than this fawkes understands ({current}); upgrade fawkes")
    if version is not None and not migrate:
        raise SchemaBehind(behind_message(where, version, current))
    with write_engine(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        version = read_version(conn)
        if version is None:
            if inspect(conn).get_table_names() and inspect(conn).has_table("mr_clusters"):
                raise FawkesError(f"{where}: fawkes tables without a schema version: not a fawkes state database?")
            SQLModel.metadata.create_all(conn)
            _stamp(conn, current, insert=True)
            return current
        if version > current:
            raise FawkesError(
                f"{where}: schema version {version} is newer than this fawkes understands ({current}); upgrade fawkes"
            )
        if version < current and not migrate:
            raise SchemaBehind(behind_message(where, version, current))
        if version < current and lease_check:
            holder = live_holder(conn)
            if holder is not None:
                raise FawkesError(f"{where}: schema version {version} is older than this fawkes ({current}) and "
                                  f"a live coordinator holds the lease ({holder}): stop it, then run "
                                  "'fawkes migrate' (nothing was changed)")
        for v in range(version, current):
            steps[v - 1](conn)
        if version < current:
            _stamp(conn, current, insert=False)
        return current


def live_holder(conn: Connection) -> str | None:
    """Who holds the coordinator lease and is alive, or None: the lease row (schema >= 5) unexpired
    by the lease clock (the database's on PostgreSQL) and its process not known to be gone
    (:func:`fawkes.store.lease.holder_process`).  Before version 5 there is no lease (a SQLite
    coordinator's file lock is checked by ``fawkes migrate`` itself)."""
    from fawkes.store.lease import holder_process

    if not inspect(conn).has_table("coordinator_lease"):
        return None
    pg = conn.dialect.name == "postgresql"
    row = conn.execute(text("SELECT holder, token, expires_at FROM coordinator_lease WHERE id = 1"
                            + (" FOR UPDATE" if pg else ""))).first()
    if row is None:
        return None
    now = (float(conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one()) if pg
           else time.time())
    if row.expires_at <= now or holder_process(row.holder) == "gone":
        return None
    return f"{row.holder}, token {row.token}, expires in {row.expires_at - now:.0f}s"


def _stamp(conn: Connection, version: int, *, insert: bool) -> None:
    params = {"v": version, "t": time.time()}
    if insert:
        conn.execute(text("INSERT INTO schema_version (id, version, migrated_at) VALUES (1, :v, :t)"), params)
    else:
        conn.execute(text("UPDATE schema_version SET version = :v, migrated_at = :t WHERE id = 1"), params)
