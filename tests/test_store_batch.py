"""The store's batch writes and batched reads, on real SQLite and PostgreSQL.

``allocate_nodes`` / ``transition_nodes`` must leave exactly the rows (nodes, history, events,
hosts) and report exactly the refusals that one ``allocate_node`` / ``transition_node`` call per
step does; a race the checks could not see (another process taking a host, moving a node or
inserting a holding node between the batch's read and its write) refuses that step alone.  The
snapshot's batched reads give what the per-cluster reads gave.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import create_engine, event, text

from fawkes.coordinator.intent import apply
from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterMetrics, ClusterState, Grow, Plan, Role, Shrink, ShrinkMode
from fawkes.store import HostState, NodeState, Store
from fawkes.store.db import among, insert_many
from fawkes.store.schema import Event

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

HOSTS = [{"name": f"n{i}", "address": f"10.0.0.{i}", "cores": 2 + i % 3, "memory_mb": 2048} for i in range(10)]


def world(store: Store) -> Store:
    """Clusters a (active), b (deploying), q (queued), gone (released); n9 failed; a holds n0, b n1."""
    store.register_framework("spark", "spark", spark_home="/opt/spark")
    store.sync_hosts(HOSTS)
    for name in ("a", "b", "gone", "q"):
        store.request_cluster(name, framework="spark", min_core=1)
    for name in ("a", "b", "gone"):
        store.transition_cluster(name, ClusterState.DEPLOYING)
    store.allocate_node("a", "n0", Role.CORE)
    store.allocate_node("b", "n1", Role.CORE)
    store.transition_cluster("a", ClusterState.ACTIVE)
    store.transition_cluster("gone", ClusterState.SAVING)
    store.transition_cluster("gone", ClusterState.RELEASED)
    store.fail_host("n9", "broken")
    return store


def tables(store: Store) -> dict:
    """Every row the node writes touch, without ids (the batch numbers history rows in its own order)."""
    with store.engine.connect() as c:
        return {
            "hosts": c.execute(text("SELECT name, state FROM hosts ORDER BY name")).all(),
            "nodes": c.execute(text("SELECT id, cluster_id, host, holds_host, role, state, requested_at, running_at, "
                                    "draining_at, released_at, state_since, config_hash, stored_bytes, running_tasks "
                                    "FROM nodes ORDER BY id")).all(),
            "history": c.execute(text("SELECT node_id, from_state, to_state, time, detail FROM node_transitions "
                                      "ORDER BY id")).all(),
            "events": c.execute(text("SELECT time, level, kind, cluster, node, message FROM events ORDER BY id")).all(),
        }


@pytest.fixture
def twins(store_url, request, tmp_path):
    """Two stores in the same state on the same backend: one gets batches, the other one call per step."""
    if store_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'twin.db'}"
    else:
        server = request.getfixturevalue("pg_server")
        name = "t_" + uuid.uuid4().hex[:12]
        server.admin(f"CREATE DATABASE {name}")
        request.addfinalizer(lambda: server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        url = server.url(name)
    a, b = world(Store(store_url, clock=Clock())), world(Store(url, clock=Clock()))
    yield a, b
    a.close()
    b.close()


def per_step(fn, *args, **kw):
    try:
        r = fn(*args, **kw)
        return r.id if hasattr(r, "id") else None
    except FawkesError as exc:
        return exc


def same_outcomes(batch: list, single: list) -> None:
    """The same steps refused with the same lines (and the others done)."""
    assert [str(x) if isinstance(x, FawkesError) else "done" for x in batch] == \
           [str(x) if isinstance(x, FawkesError) else "done" for x in single]


GROWS = [
    ("a", "n2", Role.TR, "tr for a"),
    ("a", "n3", Role.TC, ""),
    ("b", "n4", Role.CORE, "core for b"),
    ("a", "n2", Role.TR, "twice"),         # taken by the first step
    ("b", "n0", Role.TC, ""),              # held by a
    ("q", "n5", Role.TR, ""),              # queued: cannot take nodes
    ("gone", "n5", Role.TR, ""),           # released
    ("nobody", "n5", Role.TR, ""),         # no such cluster
    ("a", "n99", Role.TR, ""),             # not in the inventory
    ("a", "n9", Role.TR, ""),              # failed host
    ("a", "n6", "bogus", ""),              # no such role
    ("b", "n7", "transient", ""),          # role given by value
]


@pytest.mark.parametrize("batch", [1000, 3])
def test_allocate_nodes_is_allocate_node_per_step(twins, batch):
    a, b = twins
    got = a.allocate_nodes(GROWS, batch=batch)
    want = [per_step(b.allocate_node, c, h, r, detail=d) for c, h, r, d in GROWS]
    same_outcomes(got, want)
    assert [str(x) for x in got if isinstance(x, FawkesError)] == [
        "host n2: already held by cluster a", "host n0: already held by cluster a",
        "cluster q: cannot take nodes while requested", "cluster gone: already released",
        "cluster nobody: no such cluster", "host n99: not in the inventory", "host n9: not free (failed)",
        "role: 'bogus' is not one of core, transient, transient-core"]
    assert tables(a) == tables(b)
    ids = [x for x in got if isinstance(x, int)]
    assert [a.get_node(i).host for i in ids] == ["n2", "n3", "n4", "n7"]


MOVES = [
    (1, NodeState.PROVISIONING, "deploying"),
    (2, NodeState.RELEASED, "cancelled"),      # requested -> released frees n1
    (1, NodeState.RUNNING, "up"),              # one node twice: one step per transaction
    (999, NodeState.RUNNING, ""),              # not found
]


@pytest.mark.parametrize("batch", [1000, 2])
def test_transition_nodes_is_transition_node_per_step(twins, batch):
    a, b = twins
    for s in (a, b):
        s.clock.advance(5)
    got = a.transition_nodes(MOVES, batch=batch)
    want = [per_step(b.transition_node, *m) for m in MOVES]
    same_outcomes(got, want)
    assert str(got[3]) == "node 999: not found"
    assert tables(a) == tables(b)
    assert a.get_node(2).holds_host is None and "n1" in a.free_hosts()
    # no node twice: the set-based path; an illegal edge is refused alone
    moves = [(1, NodeState.DRAINING, "shrink"), (2, NodeState.RUNNING, "released already")]
    got = a.transition_nodes(moves)
    same_outcomes(got, [per_step(b.transition_node, *m) for m in moves])
    assert str(got[1]).startswith("node 2 (n1): ") and got[0] is None
    assert tables(a) == tables(b)


def test_failed_moves_and_events_match(twins):
    a, b = twins
    moves = [(1, NodeState.FAILED, "host lost"), (2, NodeState.FAILED, "")]
    same_outcomes(a.transition_nodes(moves), [per_step(b.transition_node, *m) for m in moves])
    assert tables(a) == tables(b)
    assert [(e.level, e.message) for e in a.events(limit=2)] == [
        ("warning", "n0: requested -> failed (host lost)"), ("warning", "n1: requested -> failed")]


def _other_process(store: Store):
    """A second engine on the same database: another process's writes."""
    return create_engine(store.url, isolation_level="AUTOCOMMIT")


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_a_host_taken_meanwhile_refuses_that_step_alone(store: Store):
    world(store)
    other = _other_process(store)

    @event.listens_for(store.engine, "before_cursor_execute")
    def race(conn, cursor, statement, *_):  # noqa: ANN001
        if statement.startswith("UPDATE hosts SET state"):
            with other.connect() as c:
                c.execute(text("UPDATE hosts SET state = 'failed' WHERE name = 'n3'"))

    got = store.allocate_nodes([("a", "n2", Role.TR, ""), ("a", "n3", Role.TR, ""), ("a", "n4", Role.TC, "")])
    event.remove(store.engine, "before_cursor_execute", race)
    assert isinstance(got[0], int) and isinstance(got[2], int) and str(got[1]) == "host n3: taken concurrently"
    assert sorted(n.host for n in store.list_nodes("a")) == ["n0", "n2", "n4"]
    other.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_a_node_moved_meanwhile_refuses_that_step_alone(store: Store):
    world(store)
    other = _other_process(store)

    @event.listens_for(store.engine, "before_cursor_execute")
    def race(conn, cursor, statement, *_):  # noqa: ANN001
        if statement.startswith("UPDATE nodes SET state"):
            with other.connect() as c:
                c.execute(text("UPDATE nodes SET state = 'provisioning' WHERE id = 2"))

    got = store.transition_nodes([(1, NodeState.FAILED, "x"), (2, NodeState.FAILED, "y")])
    event.remove(store.engine, "before_cursor_execute", race)
    assert got[0] is None and str(got[1]) == "node 2: changed concurrently; retry"
    assert store.get_node(1).state == NodeState.FAILED and store.get_node(2).state == NodeState.PROVISIONING
    assert [h.to_state for h in store.node_history(2)] == ["requested"]
    other.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_a_holding_node_inserted_meanwhile_redoes_the_batch_step_by_step(store: Store):
    world(store)
    other = _other_process(store)
    fired = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def race(conn, cursor, statement, *_):  # noqa: ANN001
        if statement.startswith("INSERT INTO nodes") and not fired:
            fired.append(1)
            with other.connect() as c:  # raw SQL that skips the host's state: only the UNIQUE hold stops it
                c.execute(text("INSERT INTO nodes (cluster_id, host, holds_host, role, state, requested_at, "
                               "state_since, stored_bytes, running_tasks) SELECT id, 'n3', 'n3', 'transient', "
                               "'requested', 0, 0, 0, 0 FROM mr_clusters WHERE live_name = 'b'"))

    got = store.allocate_nodes([("a", "n2", Role.TR, ""), ("a", "n3", Role.TR, ""), ("a", "n4", Role.TC, "")])
    event.remove(store.engine, "before_cursor_execute", race)
    assert isinstance(got[0], int) and isinstance(got[2], int)
    assert str(got[1]) == "host n3: already held by cluster b"
    assert sorted(n.host for n in store.list_nodes("a")) == ["n0", "n2", "n4"]
    other.dispose()


def test_apply_reports_each_refused_step_and_applies_the_rest(store: Store):
    world(store)
    store.transition_node(1, NodeState.PROVISIONING)
    store.transition_node(1, NodeState.RUNNING)
    lost = store.allocate_node("a", "n4", Role.TR).id
    store.transition_node(lost, NodeState.FAILED)
    plan = Plan(grows=(Grow("a", "n2", Role.TR), Grow("a", "n9", Role.TR), Grow("b", "n3", Role.TC)),
                shrinks=(Shrink("a", "n0", Role.CORE, ShrinkMode.FP), Shrink("a", "n7", Role.TR, ShrinkMode.FP),
                         Shrink("a", "n4", Role.TR, ShrinkMode.FP), Shrink("b", "n1", Role.CORE, ShrinkMode.DP)))
    problems = apply(store, plan, why="tick 7")
    assert problems == [
        "shrink a/n7: node not found",
        f"shrink a/n4: node {lost} (n4): transition failed -> draining not allowed (from failed: released)",
        "grow a/n9: host n9: not free (failed)"]
    assert sorted(n.host for n in store.list_nodes("a")) == ["n0", "n2", "n4"]
    assert [n.host for n in store.list_nodes("b")] == ["n3"]  # n1 was still requested: cancelled, not drained
    assert store.get_node(2).state == NodeState.RELEASED
    assert store.node_history(2)[-1].detail == "cancelled before it started (tick 7)"
    assert store.get_node(1).state == NodeState.DRAINING
    assert store.node_history(1)[-1].detail == "FP (tick 7)"
    n3 = store.list_nodes("b")[0]
    assert store.node_history(n3.id)[0].detail == "transient-core for b (tick 7)"
    assert [(e.kind, e.level, e.message) for e in store.events(limit=3)] == [
        ("plan", "warning", p) for p in problems]


def test_batched_reads_give_what_the_per_cluster_reads_gave(store: Store):
    world(store)
    store.clock.advance(10)
    n = store.allocate_node("a", "n2", Role.TR)
    store.transition_node(n.id, NodeState.RELEASED, "early")   # released at t0 + 10
    store.clock.advance(10)
    for t in (1.0, 2.0, 3.0):
        for c in ("a", "b"):
            store.record_sample(c, ClusterMetrics(time=store.clock.t + t, pending_tasks=int(t)))
    t0 = store.clock.t
    every = store.nodes_of_live_clusters()
    assert set(every) == {"a", "b"}
    for c in ("a", "b"):
        assert [r.id for r in every[c]] == [x.id for x in store.list_nodes(c, live=False)]
        assert store.samples_of_live_clusters(since=t0, until=t0 + 2)[c] == store.samples(c, since=t0, until=t0 + 2)
    assert [r.host for r in store.nodes_of_live_clusters(released_after=t0 - 10)["a"]] == ["n0"]
    assert [r.host for r in store.nodes_of_live_clusters(released_after=t0 - 11)["a"]] == ["n0", "n2"]
    row = every["a"][0]
    assert (row.host_state, row.host_cores) == (HostState.ALLOCATED, 2)
    assert store.samples_of_live_clusters(since=t0, until=t0 + 9, clusters=["b"]).keys() == {"b"}
    assert store.samples_of_live_clusters(since=t0, until=t0 + 9, clusters=[]) == {}
    assert store.live_node_ids(["a", "b", "gone"]) == {("a", "n0"): (1, "requested"), ("b", "n1"): (2, "requested")}
    pool = store.pool_summary()
    assert pool == {"free": store.free_hosts(), "usable": store.capacity(), "min_cores": 2}


def test_waiting_or_free_is_a_queued_request_or_a_free_host(store: Store):
    """Control.between reads no snapshot without either: the one read must say so exactly."""
    world(store)  # q queued, n2..n8 free
    assert store.waiting_or_free()
    for i in range(2, 9):  # every usable host held: only the request is left
        store.allocate_node("a", f"n{i}", Role.TR)
    assert not store.free_hosts() and store.waiting_or_free()
    store.transition_cluster("q", ClusterState.RELEASED, "withdrawn")
    assert not store.waiting_or_free()
    n = store.list_nodes("a")[-1]
    store.transition_node(n.id, NodeState.RELEASED, "freed")
    assert store.free_hosts() == [n.host] and store.waiting_or_free()


def test_insert_many_and_among_on_both_backends(store: Store):
    rows = [{"time": float(i), "level": "info", "kind": "k", "cluster": None if i % 2 else "a", "node": None,
             "message": f"m{i}"} for i in range(5)]
    with store.session(write=True) as s:
        back = insert_many(s.connection(), Event.__table__, rows, returning=("message", "id"))
        assert sorted(m for m, _ in back) == [f"m{i}" for i in range(5)]
        assert insert_many(s.connection(), Event.__table__, []) == []
    with store.session() as s:
        got = s.execute(Event.__table__.select().where(
            among(Event.__table__.c.message, ["m1", "m3", "zz"], store.engine.dialect.name))).all()
    assert sorted((r.message, r.cluster) for r in got) == [("m1", None), ("m3", None)]
    assert [e.cluster for e in store.events(limit=5)] == ["a", None, "a", None, "a"]


def test_record_samples_is_record_sample_note_job_tasks_and_update_node_per_cluster(twins):
    """The sampler's one transaction a step writes what its per-cluster writes wrote; a cluster released
    meanwhile is skipped (one problem line), the others written; a bad count refuses its own write only."""
    from fawkes.store.samples import SampleWrite

    a, b = twins  # each already the world()
    for st in (a, b):
        st.clock.advance(5)
    job = {st: st.submit_job("a", ["wordcount", "in", "out"]).id for st in (a, b)}
    node = {st: st.list_nodes("a")[0].id for st in (a, b)}
    m = {"a": ClusterMetrics(time=a.clock.t, pending_tasks=3, running_tasks=2, output_bytes=1.5),
         "b": ClusterMetrics(time=a.clock.t, unfinished_jobs=1, loading=True)}
    # one at a time (the old way) on a, in one batch on b
    a.record_sample("a", m["a"])
    a.note_job_tasks({job[a]: 7})
    a.update_node(node[a], stored_bytes=1234)
    a.record_sample("b", m["b"])
    with pytest.raises(FawkesError, match="already released"):
        a.record_sample("gone", m["b"])
    problems = b.record_samples([SampleWrite("a", m["a"], {job[b]: 7}, {node[b]: 1234}), SampleWrite("b", m["b"]),
                                 SampleWrite("gone", m["b"])])
    assert problems == ["cluster gone: already released"]
    for c in ("a", "b"):
        assert a.samples(c) == b.samples(c) == [m[c]]
    assert a.get_job(job[a]).tasks_seen == b.get_job(job[b]).tasks_seen == 7
    assert a.get_node(node[a]).stored_bytes == b.get_node(node[b]).stored_bytes == 1234
    b.record_samples([SampleWrite("a", m["a"], {job[b]: 4})])  # never lowered
    assert b.get_job(job[b]).tasks_seen == 7
    for bad in ({job[b]: -1}, {job[b]: 1.5}, {job[b]: True}):
        with pytest.raises(FawkesError, match="tasks_seen"):
            SampleWrite("a", m["a"], bad)
    with pytest.raises(FawkesError, match="stored_bytes"):
        SampleWrite("a", m["a"], {}, {node[b]: -5})
    assert b.record_samples([]) == []
