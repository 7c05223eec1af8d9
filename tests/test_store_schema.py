"""Schema versioning, constraints enforced by the database itself, lifecycle tables."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterState, Role
from fawkes.store import (
    CLUSTER_TRANSITIONS,
    JOB_TRANSITIONS,
    MIGRATIONS,
    NODE_TIMEOUTS,
    NODE_TRANSITIONS,
    SCHEMA_VERSION,
    JobState,
    NodeState,
    Store,
    ensure_schema,
)
from fawkes.store.db import make_engine, normalize_url

try:
    from store_fixtures import pg_server, store, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import pg_server, store, store_url  # noqa: F401


def _version(store: Store) -> int:
    with store.engine.connect() as c:
        return c.execute(text("SELECT version FROM schema_version")).scalar_one()


# ---------------------------------------------------------------- versioning
def test_fresh_database_is_stamped_and_reopening_keeps_data(store_url):
    s = Store(store_url)
    assert s.schema_version == SCHEMA_VERSION == _version(s)
    s.register_framework("spark", "spark")
    s.close()
    s2 = Store(store_url)
    assert [f.name for f in s2.list_frameworks()] == ["spark"] and _version(s2) == SCHEMA_VERSION
    s2.close()


def test_newer_schema_is_refused_with_one_line_and_left_alone(store: Store, store_url):
    store.register_framework("spark", "spark")
    with store.engine.begin() as c:
        c.execute(text("UPDATE schema_version SET version = 99"))
    with pytest.raises(FawkesError) as err:
        Store(store_url)
    msg = str(err.value)
    assert f"schema version 99 is newer than this fawkes understands ({SCHEMA_VERSION}); upgrade fawkes" in msg
    assert "\n" not in msg
    assert _version(store) == 99 and [f.name for f in store.list_frameworks()] == ["spark"]


def test_older_schema_is_migrated_in_order(store: Store):
    """The mechanism with two more upgrades (CURRENT -> +1 -> +2) on a real current database."""
    store.register_framework("spark", "spark")
    ran = []
    v = SCHEMA_VERSION

    def up1(conn):
        ran.append(v + 1)
        conn.execute(text("ALTER TABLE frameworks ADD COLUMN notes VARCHAR(200)"))
        conn.execute(text("UPDATE frameworks SET notes = 'migrated'"))

    def up2(conn):
        ran.append(v + 2)
        conn.execute(text("CREATE TABLE extra_v3 (id INTEGER PRIMARY KEY)"))

    steps = [*MIGRATIONS, up1, up2]
    assert ensure_schema(store.engine, migrations=steps) == v + 2
    assert ran == [v + 1, v + 2] and _version(store) == v + 2
    with store.engine.connect() as c:
        assert c.execute(text("SELECT notes FROM frameworks")).scalar_one() == "migrated"
        assert c.execute(text("SELECT count(*) FROM extra_v3")).scalar_one() == 0
    assert ensure_schema(store.engine, migrations=steps) == v + 2 and ran == [v + 1, v + 2]  # idempotent


def test_failed_migration_rolls_back_completely(store: Store):
    def half(conn):
        conn.execute(text("CREATE TABLE half_done (id INTEGER PRIMARY KEY)"))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        ensure_schema(store.engine, migrations=[*MIGRATIONS, half])
    assert _version(store) == SCHEMA_VERSION
    with store.engine.connect() as c:
        from sqlalchemy import inspect

        assert not inspect(c).has_table("half_done")


def _downgrade_to_v1(store: Store) -> None:
    """Turn a fresh database into exactly the version-1 shape (what fawkes <= v1 created)."""
    with store.engine.begin() as c:
        for ix in ("ix_nodes_held", "ix_nodes_released_at", "ix_jobs_state_cluster"):  # v12
            c.execute(text(f"DROP INDEX {ix}"))
        c.execute(text("DROP INDEX ix_samples_time"))
        c.execute(text("ALTER TABLE jobs DROP COLUMN cancel_requested_at"))
        c.execute(text("ALTER TABLE jobs DROP COLUMN tasks_seen"))
        c.execute(text("ALTER TABLE jobs DROP COLUMN task_time"))  # v16
        c.execute(text("DROP TABLE controller_memory"))
        c.execute(text("DROP TABLE sampler_memory"))  # v15
        c.execute(text("DROP TABLE coordinator_lease"))
        c.execute(text("DROP TABLE api_tokens"))
        c.execute(text("DROP TABLE audit"))
        c.execute(text("ALTER TABLE nodes DROP COLUMN protected"))
        c.execute(text("ALTER TABLE nodes DROP COLUMN running_tasks"))
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN expected_duration_s"))
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN deadline_s"))
        c.execute(text("ALTER TABLE hosts DROP COLUMN rack"))
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN saved_output"))
        c.execute(text("DROP INDEX ix_mr_clusters_port_slot"))  # v14
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN port_slot"))
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN restore_from"))
        c.execute(text("ALTER TABLE mr_clusters DROP COLUMN stored_baseline"))
        c.execute(text("ALTER TABLE frameworks DROP COLUMN paths"))
        for col in ("spark_home", "hadoop_home", "hdfs_jars"):
            c.execute(text(f"ALTER TABLE frameworks ADD COLUMN {col} VARCHAR"))
        c.execute(text("UPDATE frameworks SET spark_home = '/opt/spark', hdfs_jars = '/opt/hdfs'"))
        c.execute(text("ALTER TABLE nodes ADD COLUMN desired_state VARCHAR(16) NOT NULL DEFAULT 'running'"))
        c.execute(text("UPDATE schema_version SET version = 1"))


def _shape(engine) -> dict:
    from sqlalchemy import inspect

    with engine.connect() as c:
        insp = inspect(c)
        return {t: ({col["name"]: col["nullable"] for col in insp.get_columns(t)},
                    {ix["name"] for ix in insp.get_indexes(t)}) for t in sorted(insp.get_table_names())}


def test_version_1_database_is_migrated_to_current_keeping_its_data(store_url):
    """A real version-1 database with clusters, jobs, nodes and samples opens as the current version
    (15), data intact, with the shape a fresh database has (same tables, columns, nullability, indexes)."""
    from sqlalchemy import Float, inspect
    from sqlmodel import SQLModel

    from fawkes.mechanism.model import ClusterMetrics

    s = Store(store_url)
    s.register_framework("spark", "spark")
    s.sync_hosts([{"name": "h1", "cores": 2}])
    s.request_cluster("a", framework="spark", min_core=1)
    s.transition_cluster("a", ClusterState.DEPLOYING)
    s.transition_cluster("a", ClusterState.ACTIVE)
    queued, running = s.submit_job("a", ["wc", "1"]).id, s.submit_job("a", ["wc", "2"]).id
    s.transition_job(running, JobState.DISPATCHED)
    s.transition_job(running, JobState.RUNNING, app_id="app-1")
    s.record_sample("a", ClusterMetrics(time=5.0, pending_tasks=3))
    node = s.allocate_node("a", "h1", "transient").id
    _downgrade_to_v1(s)
    with s.engine.connect() as c:
        assert "cancel_requested_at" not in {col["name"] for col in inspect(c).get_columns("jobs")}
        assert c.execute(text("SELECT version FROM schema_version")).scalar_one() == 1
    s.close()

    migrated = Store(store_url, migrate=True)  # an explicit migration ('fawkes migrate')
    try:
        assert migrated.schema_version == SCHEMA_VERSION == 16 == _version(migrated)
        assert [(j.id, j.argv, j.state, j.app_id, j.cancel_requested_at) for j in migrated.list_jobs()] == [
            (queued, ["wc", "1"], "queued", None, None), (running, ["wc", "2"], "running", "app-1", None)]
        assert [m.pending_tasks for m in migrated.samples("a")] == [3]
        shape = _shape(migrated.engine)
        for name, table in SQLModel.metadata.tables.items():
            cols, indexes = shape[name]
            assert cols == {c.name: c.nullable for c in table.columns}, name
            assert {ix.name for ix in table.indexes} <= indexes, name
        with migrated.engine.connect() as c:
            kind = next(col["type"] for col in inspect(c).get_columns("jobs") if col["name"] == "cancel_requested_at")
        assert isinstance(kind, Float)
        # the new column works: a running job's cancel is recorded as intent
        assert [o for _, o in migrated.cancel_jobs([running, queued])] == ["requested", "cancelled"]
        assert migrated.get_job(running).cancel_requested_at is not None
        # v3: the node kept, with a running_tasks count; the controller memory can be stored
        assert migrated.get_node(node).running_tasks == 0 and migrated.get_node(node).host == "h1"
        migrated.update_node(node, running_tasks=4)
        assert migrated.get_node(node).running_tasks == 4
        assert migrated.load_memory() is None
        migrated.save_memory("admission", {"format": 1, "ticks": 0, "clusters": {}}, 7.0)
        assert migrated.load_memory() == {"format": 1, "ticks": 0, "clusters": {}}
        # v4: a job's task count as its driver reported it, raised, never lowered
        assert migrated.get_job(running).tasks_seen is None
        migrated.note_job_tasks({running: 15})
        migrated.note_job_tasks({running: 3})
        assert migrated.get_job(running).tasks_seen == 15
        # v5: the coordinator lease, taken once, its token raised by a takeover
        assert migrated.lease() is None
        assert migrated.take_lease("h:1:x", 60.0, started_at=1.0) == 1
        assert migrated.take_lease("h:2:y", 60.0, started_at=2.0) is None
        assert migrated.take_lease("h:2:y", 60.0, started_at=2.0, force=True) == 2
        # v6: a request's estimates for the admission disciplines; the old cluster has none
        assert (migrated.get_cluster("a").expected_duration_s, migrated.get_cluster("a").deadline_s) == (None, None)
        b = migrated.request_cluster("b", framework="spark", min_core=1, expected_duration_s=60.0, deadline_s=600.0)
        assert (b.expected_duration_s, b.deadline_s) == (60.0, 600.0)
        # v8: a framework's paths, one JSON object under the names its kind reads (the columns gone)
        assert migrated.get_framework("spark").paths == {"spark_home": "/opt/spark", "hdfs_jars": "/opt/hdfs"}
        migrated.register_framework("spark", "spark", replace=True, spark_home="/opt/spark-4")
        assert migrated.get_framework("spark").paths == {"spark_home": "/opt/spark-4"}
        # v9: the DU baseline, set once per incarnation (a restart keeps it)
        assert migrated.get_cluster("a").stored_baseline is None
        assert migrated.note_stored_baseline("a", 100.0) == 100.0
        assert migrated.note_stored_baseline("a", 250.0) == 100.0 == migrated.get_cluster("a").stored_baseline
        # v10: where a leaving cluster's output went, recorded while it saves; the old cluster has none
        assert migrated.get_cluster("a").saved_output is None
        migrated.request_release("a")
        migrated.transition_cluster("a", ClusterState.SAVING)
        migrated.record_saved_output("a", {"host": "h1", "path": "/w/saved/a/1"}, "output saved to h1:/w/saved/a/1")
        assert json.loads(migrated.get_cluster("a").saved_output) == {"host": "h1", "path": "/w/saved/a/1"}
        assert migrated.events(cluster="a")[-1].message == "output saved to h1:/w/saved/a/1"
        # v11: API tokens (only the secret's hash kept) and the audit trail
        token, secret = migrated.create_token("etl", ["submit"], ["a"], expires_s=60.0)
        assert migrated.authenticate(secret).id == token.id and secret not in str(migrated.list_tokens())
        migrated.record_audit(actor="user root", via="cli", action="cluster.release", target="a", result="ok")
        assert [(r.action, r.target, r.result) for r in migrated.audit()] == [("cluster.release", "a", "ok")]
        assert migrated.get_node(node).protected is False  # v11: the old node is not protected
        assert migrated.protect_node(host="h1").protected is True and migrated.get_node(node).protected is True
        # v12: a woken cluster's restore source; the old cluster and a new request have none
        assert migrated.get_cluster("a").restore_from is None and migrated.get_cluster("b").restore_from is None
        # v13: the indexes of the reads that must not grow with the history, used by them
        assert {"ix_nodes_held", "ix_nodes_released_at"} <= shape["nodes"][1]
        assert "ix_jobs_state_cluster" in shape["jobs"][1]
        a = next(c for c in migrated.status()["clusters"] if c["name"] == "a")
        assert (a["nodes"]["transient"], a["queued_jobs"], a["running_jobs"]) == (1, 0, 1)  # (its cancel: requested)
        assert [n.host for n in migrated.nodes_of_live_clusters(released_after=0.0)["a"]] == ["h1"]
    finally:
        migrated.close()


def test_unreachable_database_is_one_line_error(tmp_path):
    with pytest.raises(FawkesError, match=r"^state postgresql\+psycopg://nobody:\*\*\*@/x.*: cannot open: "):
        Store(f"postgresql://nobody:secret@/x?host={tmp_path}")


@pytest.mark.parametrize("url, expected", [
    ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
    ("/tmp/a/../b.db", "sqlite:////tmp/b.db"),
])
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


def test_normalize_url_refuses_other_schemes():
    with pytest.raises(FawkesError, match="state: unsupported state URL scheme 'mysql'"):
        normalize_url("mysql://u@h/db")


def test_sqlite_runs_in_wal_mode_with_busy_timeout(tmp_path):
    engine = make_engine(normalize_url(str(tmp_path / "s.db")))
    with engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


# ---------------------------------------------------------------- database-level invariants
def _setup_two_clusters(store: Store) -> int:
    store.register_framework("spark", "spark")
    store.sync_hosts([{"name": "h1", "cores": 2}, {"name": "h2", "cores": 2}])
    for name in ("a", "b"):
        store.request_cluster(name, framework="spark", min_core=1)
        store.transition_cluster(name, ClusterState.DEPLOYING)
    store.allocate_node("a", "h1", Role.CORE)
    return store.get_cluster("b").id


def test_database_refuses_a_second_owner_even_bypassing_the_api(store: Store):
    b = _setup_two_clusters(store)
    with pytest.raises(IntegrityError):
        with store.engine.begin() as c:
            c.execute(text("INSERT INTO nodes (cluster_id, host, holds_host, role, state, "
                           "requested_at, state_since, stored_bytes) VALUES "
                           "(:b, 'h1', 'h1', 'core', 'requested', 0, 0, 0)"), {"b": b})
    assert [(n.host, n.cluster_id) for n in store.list_nodes()] == [("h1", store.get_cluster("a").id)]


def test_database_refuses_two_live_clusters_with_one_name(store: Store):
    _setup_two_clusters(store)
    with pytest.raises(IntegrityError):
        with store.engine.begin() as c:
            c.execute(text("INSERT INTO mr_clusters (name, live_name, framework, min_core, state, requested_at, "
                           "state_since) VALUES ('a', 'a', 'spark', 1, 'requested', 0, 0)"))


# ---------------------------------------------------------------- lifecycle tables
@pytest.mark.parametrize("table, timeouts", [(NODE_TRANSITIONS, NODE_TIMEOUTS),
                                             (CLUSTER_TRANSITIONS, None),
                                             (JOB_TRANSITIONS, None)])
def test_tables_cover_every_state_and_terminals_are_reachable(table, timeouts):
    states = set(type(next(iter(table))))
    assert set(table) == states
    assert all(to in states for tos in table.values() for to in tos)
    terminals = {s for s, tos in table.items() if not tos}
    assert terminals
    for s in states:  # every state can reach a terminal one
        seen, todo = {s}, [s]
        while todo:
            for nxt in table[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert seen & terminals, s
    if timeouts is not None:
        assert set(timeouts) == states and all(timeouts[t] is None for t in terminals)


def test_every_node_state_but_released_may_fail():
    for s in NodeState:
        if s not in (NodeState.RELEASED, NodeState.FAILED):
            assert NodeState.FAILED in NODE_TRANSITIONS[s], s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(walk=st.lists(st.sampled_from(list(NodeState)), min_size=1, max_size=8))
def test_random_node_walks_follow_the_table_exactly(store: Store, walk):
    """Any attempted sequence: allowed edges happen and are recorded, others change nothing."""
    if not store.list_frameworks():
        _setup_two_clusters(store)
    host = "h2"
    node = store.allocate_node("b", host, Role.TC)
    expected = [(None, "requested")]
    cur = NodeState.REQUESTED
    for to in walk:
        if to in NODE_TRANSITIONS[cur]:
            store.clock = (lambda t=len(expected): 1000.0 + t)
            store.transition_node(node.id, to, "walk")
            expected.append((cur, to))
            cur = to
        else:
            with pytest.raises(FawkesError, match="not allowed"):
                store.transition_node(node.id, to)
        assert store.get_node(node.id).state == cur
    hist = store.node_history(node.id)
    assert [(h.from_state, h.to_state) for h in hist] == expected
    assert [h.time for h in hist[1:]] == sorted(h.time for h in hist[1:])
    held = store.get_node(node.id).holds_host
    assert (held is None) == (cur == NodeState.RELEASED)
    if cur != NodeState.RELEASED:  # clean up so the next example can use the host
        if cur not in (NodeState.FAILED,):
            store.transition_node(node.id, NodeState.FAILED)
        store.transition_node(node.id, NodeState.RELEASED)
    assert host in store.free_hosts()


def test_job_dispatched_can_return_to_queue_but_finished_is_final():
    assert JobState.QUEUED in JOB_TRANSITIONS[JobState.DISPATCHED]
    for s in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
        assert JOB_TRANSITIONS[s] == frozenset()


def test_docs_list_exactly_the_lifecycle_edges():
    """docs/state.md shows every edge of every table, and no other (no drift)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "state.md").read_text()
    blocks = re.findall(r"```text\n(.*?)```", doc, re.S)
    documented = [{tuple(m.groups()) for m in re.finditer(r"^(\S+) -> (\S+)", b, re.M)} for b in blocks]
    for table, edges in zip((NODE_TRANSITIONS, CLUSTER_TRANSITIONS, JOB_TRANSITIONS), documented, strict=True):
        assert edges == {(str(a), str(b)) for a, tos in table.items() for b in tos}
