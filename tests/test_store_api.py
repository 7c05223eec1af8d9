"""The store API on real SQLite and PostgreSQL databases."""

from __future__ import annotations

import dataclasses

import pytest

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterMetrics, ClusterState, Role
from fawkes.store import HostState, JobState, NodeState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

HOSTS = [{"name": f"n{i:02d}", "address": f"10.0.0.{i}", "cores": 8, "memory_mb": 16384} for i in range(6)]


@pytest.fixture
def pool(store: Store) -> Store:
    store.register_framework("spark", "spark", spark_home="/opt/spark", java_home="/usr/lib/jvm/java-17")
    store.sync_hosts(HOSTS)
    return store


def admitted(store: Store, name: str, min_core: int = 2) -> None:
    store.request_cluster(name, framework="spark", min_core=min_core)
    store.transition_cluster(name, ClusterState.DEPLOYING, "admitted")


def counts(store: Store) -> tuple[int, int, int]:
    with store.session() as s:
        from sqlmodel import func, select

        from fawkes.store import Job, MRCluster, Node

        return tuple(s.exec(select(func.count()).select_from(t)).one() for t in (MRCluster, Job, Node))


# ---------------------------------------------------------------- frameworks
def test_frameworks_register_list_remove(store: Store):
    store.register_framework("spark", "spark", spark_home="/opt/spark")
    store.register_framework("hadoop3", "hadoop", hadoop_home="/opt/hadoop")
    assert [f.name for f in store.list_frameworks()] == ["hadoop3", "spark"]
    with pytest.raises(FawkesError, match="already registered"):
        store.register_framework("spark", "spark")
    store.register_framework("spark", "spark", spark_home="/opt/spark-4", replace=True)
    assert store.get_framework("spark").paths["spark_home"] == "/opt/spark-4"
    with pytest.raises(FawkesError, match="framework: invalid name"):
        store.register_framework("bad name", "spark")
    store.remove_framework("hadoop3")
    with pytest.raises(FawkesError, match="not registered"):
        store.get_framework("hadoop3")


def test_framework_in_use_cannot_be_removed(pool: Store):
    pool.request_cluster("a", framework="spark", min_core=1)
    with pytest.raises(FawkesError, match="in use by cluster"):
        pool.remove_framework("spark")
    pool.request_release("a")
    pool.remove_framework("spark")  # only released clusters used it


# ---------------------------------------------------------------- hosts
def test_sync_hosts_adds_updates_retires(pool: Store):
    assert pool.free_hosts() == [h["name"] for h in HOSTS]
    assert pool.capacity() == 6
    changed = HOSTS[:4] + [dict(HOSTS[4], cores=16)]
    out = pool.sync_hosts(changed)
    assert out == {"added": [], "updated": ["n04"], "retired": ["n05"], "unchanged": ["n00", "n01", "n02", "n03"]}
    assert pool.capacity() == 5 and "n05" not in pool.free_hosts()
    assert pool.sync_hosts(HOSTS)["updated"] == ["n04", "n05"]  # n05 back, free
    assert pool.list_hosts(HostState.FREE)[-1].name == "n05"


def _shares_events(store: Store) -> bool:
    """Whether the store's write engine fires the listeners of its engine (an engine with options does)."""
    from sqlalchemy import event, text

    hit = []

    def note(*_a):
        hit.append(1)

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        with store._writer.connect() as c:
            c.execute(text("SELECT 1"))
    finally:
        event.remove(store.engine, "before_cursor_execute", note)
    return bool(hit)


def test_sync_hosts_writes_only_what_changed(pool: Store):
    """A coordinator starts (or a standby takes over) with the inventory the state holds: the sync
    reads the hosts and writes nothing; a change writes its rows and no other."""
    from sqlalchemy import event

    seen: list[tuple[str, int]] = []

    def note(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            seen.append((statement.split()[0].upper(), len(params) if executemany else 1))

    engines = [pool.engine] if _shares_events(pool) else [pool.engine, pool._writer]
    for e in engines:
        event.listen(e, "before_cursor_execute", note)
    try:
        assert pool.sync_hosts(HOSTS)["unchanged"] == [h["name"] for h in HOSTS] and seen == []
        pool.set_host_state("n02", HostState.FAILED, detail="test")
        seen.clear()
        out = pool.sync_hosts(HOSTS[:2] + [dict(HOSTS[2], memory_mb=8192)] + HOSTS[3:5]
                              + [{"name": "n09", "address": "10.0.0.9", "cores": 8}])
        assert out == {"added": ["n09"], "updated": ["n02"], "retired": ["n05"],
                       "unchanged": ["n00", "n01", "n03", "n04"]}
        # the new host inserted, the changed one and the retired one updated (one statement per set of columns)
        assert sorted(seen) == [("INSERT", 1), ("UPDATE", 1), ("UPDATE", 1)], seen
    finally:
        for e in engines:
            event.remove(e, "before_cursor_execute", note)
    hosts = {h.name: h for h in pool.list_hosts()}
    # the changed host's new memory written, not its state: a failed host stays failed through a sync
    assert hosts["n02"].memory_mb == 8192 and hosts["n02"].state == HostState.FAILED
    assert hosts["n05"].state == HostState.RETIRED and hosts["n09"].state == HostState.FREE
    assert hosts["n09"].position == 5 and hosts["n09"].added_at > 0


@pytest.mark.parametrize("bad, field", [
    ([{"name": "n 1", "cores": 1}], "inventory[0].name"),
    ([{"name": "n1", "cores": 0}], "inventory[0].cores"),
    ([{"name": "n1", "cores": 2, "disk": 3}], "inventory[0]: unknown field"),
    ([{"name": "n1", "cores": 2}, {"name": "n1", "cores": 2}], "inventory[1].name: duplicate"),
])
def test_sync_hosts_rejects_bad_inventory_changing_nothing(pool: Store, bad, field):
    with pytest.raises(FawkesError, match=field.replace("[", r"\[").replace("]", r"\]")):
        pool.sync_hosts(bad)
    assert [h.name for h in pool.list_hosts()] == [h["name"] for h in HOSTS]


def test_held_host_cannot_leave_inventory(pool: Store):
    admitted(pool, "a")
    pool.allocate_node("a", "n05", Role.CORE)
    with pytest.raises(FawkesError, match=r"still held: n05 \(cluster a\)"):
        pool.sync_hosts(HOSTS[:5])
    assert pool.capacity() == 6


def test_failed_host_is_not_free(pool: Store):
    pool.set_host_state("n00", HostState.FAILED, detail="ssh timeout")
    assert "n00" not in pool.free_hosts()
    admitted(pool, "a")
    with pytest.raises(FawkesError, match="host n00: not free"):
        pool.allocate_node("a", "n00", Role.CORE)
    pool.set_host_state("n00", HostState.FREE)
    assert pool.free_hosts()[0] == "n00"


# ---------------------------------------------------------------- clusters
@pytest.mark.parametrize("kwargs, message", [
    (dict(name="1abc", framework="spark", min_core=1), "name: invalid name"),
    (dict(name="a/b", framework="spark", min_core=1), "name: invalid name"),
    (dict(name="x" * 64, framework="spark", min_core=1), "name: invalid name"),
    (dict(name="a", framework="nope", min_core=1), "framework: 'nope' is not registered"),
    (dict(name="a", framework="spark", min_core=0), "min_core: must be an integer >= 1"),
    (dict(name="a", framework="spark", min_core=True), "min_core: must be an integer"),
    (dict(name="a", framework="spark", min_core=7), "min_core: 7 exceeds the pool capacity 6"),
    (dict(name="a", framework="spark", min_core=1, input_path="a\nb"), "input: must be a non-empty single-line"),
])
def test_request_cluster_validation_changes_nothing(pool: Store, kwargs, message):
    with pytest.raises(FawkesError, match=message):
        pool.request_cluster(**kwargs)
    assert pool.list_clusters() == [] and counts(pool) == (0, 0, 0)


def test_request_queue_is_fifo_and_names_unique(pool: Store):
    for i, name in enumerate(["c", "a", "b"]):
        pool.clock.advance(1)
        pool.request_cluster(name, framework="spark", min_core=i + 1, input_path=f"/data/{name}")
    assert [c.name for c in pool.queue()] == ["c", "a", "b"]
    with pytest.raises(FawkesError, match="cluster a: already exists"):
        pool.request_cluster("a", framework="spark", min_core=1)
    pool.transition_cluster("c", ClusterState.DEPLOYING)
    assert [c.name for c in pool.queue()] == ["a", "b"]
    c = pool.get_cluster("c")
    assert c.state == "deploying" and c.admitted_at == pool.clock.t and c.input_path == "/data/c"


def test_release_of_queued_cluster_withdraws_it_and_cancels_its_jobs(pool: Store):
    pool.request_cluster("a", framework="spark", min_core=2)
    j = pool.submit_job("a", ["wc"])
    c = pool.request_release("a")
    assert c.state == "released" and c.live_name is None
    assert pool.get_job(j.id).state == JobState.CANCELLED
    assert pool.queue() == []
    with pytest.raises(FawkesError, match="cluster a: already released"):
        pool.request_release("a")
    with pytest.raises(FawkesError, match="cluster a: already released"):
        pool.submit_job("a", ["wc"])
    # the name can be used again; the old cluster keeps its history
    again = pool.request_cluster("a", framework="spark", min_core=1)
    assert again.id != c.id and pool.get_cluster("a").id == again.id
    assert [x.state for x in pool.list_clusters()] == ["released", "requested"]


def test_release_of_active_cluster_is_a_request_for_the_coordinator(pool: Store):
    admitted(pool, "a")
    c = pool.request_release("a")
    assert c.state == "deploying" and c.release_requested_at == pool.clock.t
    first = c.release_requested_at
    pool.clock.advance(5)
    assert pool.request_release("a").release_requested_at == first  # asking twice is harmless
    with pytest.raises(FawkesError, match="not accepting jobs \\(release requested\\)"):
        pool.submit_job("a", ["wc"])


def test_cluster_lifecycle_history_and_release_needs_nodes_gone(pool: Store):
    admitted(pool, "a")
    n = pool.allocate_node("a", "n00", Role.CORE)
    for to in (ClusterState.LOADING, ClusterState.ACTIVE, ClusterState.SAVING):
        pool.clock.advance(10)
        pool.transition_cluster("a", to, f"to {to}")
    with pytest.raises(FawkesError, match="still holds 1 node"):
        pool.transition_cluster("a", ClusterState.RELEASED)
    with pytest.raises(FawkesError, match="saving -> active not allowed"):
        pool.transition_cluster("a", ClusterState.ACTIVE)
    pool.transition_node(n.id, NodeState.FAILED, "lost")
    pool.transition_node(n.id, NodeState.RELEASED, "cleaned up")
    pool.transition_cluster("a", ClusterState.RELEASED, "saved")
    hist = pool.cluster_history("a")
    assert [(h.from_state, h.to_state) for h in hist] == [
        (None, "requested"), ("requested", "deploying"), ("deploying", "loading"), ("loading", "active"),
        ("active", "saving"), ("saving", "released")]
    assert [h.time for h in hist] == sorted(h.time for h in hist)
    assert "n00" in pool.free_hosts()


# ---------------------------------------------------------------- nodes
def test_allocate_refuses_host_of_another_cluster_and_bad_role(pool: Store):
    admitted(pool, "a")
    admitted(pool, "b")
    n = pool.allocate_node("a", "n00", Role.CORE, config_hash="abc")
    assert n.state == "requested" and n.holds_host == "n00" and n.config_hash == "abc"
    with pytest.raises(FawkesError, match="host n00: already held by cluster a"):
        pool.allocate_node("b", "n00", Role.TC)
    with pytest.raises(FawkesError, match="host n00: already held by cluster a"):
        pool.allocate_node("a", "n00", Role.TC)
    with pytest.raises(FawkesError, match="role: 'worker' is not one of"):
        pool.allocate_node("b", "n01", "worker")
    with pytest.raises(FawkesError, match="host n99: not in the inventory"):
        pool.allocate_node("b", "n99", Role.CORE)
    assert [x.host for x in pool.list_nodes()] == ["n00"]
    assert pool.get_cluster("b").state == "deploying"


def test_queued_cluster_cannot_take_nodes(pool: Store):
    pool.request_cluster("a", framework="spark", min_core=1)
    with pytest.raises(FawkesError, match="cannot take nodes while requested"):
        pool.allocate_node("a", "n00", Role.CORE)


def test_node_lifecycle_records_history_and_frees_host(pool: Store):
    admitted(pool, "a")
    n = pool.allocate_node("a", "n01", Role.TC)
    t0 = pool.clock.t
    for to in (NodeState.PROVISIONING, NodeState.RUNNING, NodeState.DRAINING, NodeState.RELEASED):
        pool.clock.advance(3)
        pool.transition_node(n.id, to, f"-> {to}", stored_bytes=1024 if to == NodeState.RUNNING else None)
    final = pool.get_node(n.id)
    assert final.state == "released" and final.holds_host is None
    assert final.running_at == t0 + 6 and final.released_at == t0 + 12 and final.stored_bytes == 1024
    hist = pool.node_history(n.id)
    assert [(h.from_state, h.to_state, h.time - t0) for h in hist] == [
        (None, "requested", 0), ("requested", "provisioning", 3), ("provisioning", "running", 6),
        ("running", "draining", 9), ("draining", "released", 12)]
    assert pool.list_nodes("a") == [] and len(pool.list_nodes("a", live=False)) == 1
    assert "n01" in pool.free_hosts()
    # the host can now go to another cluster
    admitted(pool, "b")
    assert pool.allocate_node("b", "n01", Role.CORE).host == "n01"


def test_refused_node_transition_changes_nothing(pool: Store):
    admitted(pool, "a")
    n = pool.allocate_node("a", "n00", Role.CORE)
    with pytest.raises(FawkesError, match="requested -> running not allowed"):
        pool.transition_node(n.id, NodeState.RUNNING)
    assert pool.get_node(n.id).state == "requested" and len(pool.node_history(n.id)) == 1
    with pytest.raises(ValueError):
        pool.transition_node(n.id, "exploded")
    with pytest.raises(FawkesError, match="node 999: not found"):
        pool.transition_node(999, NodeState.RUNNING)


def test_stuck_nodes_follow_timeouts(pool: Store):
    admitted(pool, "a")
    n = pool.allocate_node("a", "n00", Role.CORE)
    pool.transition_node(n.id, NodeState.PROVISIONING)
    m = pool.allocate_node("a", "n01", Role.CORE)
    pool.transition_node(m.id, NodeState.PROVISIONING)
    pool.transition_node(m.id, NodeState.RUNNING)
    now = pool.clock.t
    assert pool.stuck_nodes(now + 599) == []
    assert [x.id for x in pool.stuck_nodes(now + 601)] == [n.id]  # RUNNING has no timeout
    assert [x.id for x in pool.stuck_nodes(now + 11, {NodeState.PROVISIONING: 10})] == [n.id]


# ---------------------------------------------------------------- jobs
def test_jobs_fifo_per_cluster_and_lifecycle(pool: Store):
    admitted(pool, "a")
    pool.request_cluster("b", framework="spark", min_core=1)
    ids = [pool.submit_job("a" if i % 2 == 0 else "b", ["app", str(i)], input_bytes=i * 10).id for i in range(6)]
    assert [j.argv for j in pool.list_jobs("a")] == [["app", "0"], ["app", "2"], ["app", "4"]]
    assert pool.next_job("a").id == ids[0] and pool.next_job("b").id == ids[1]
    assert pool.queue_lengths() == {"a": 3, "b": 3}
    j = pool.transition_job(ids[0], JobState.DISPATCHED)
    j = pool.transition_job(ids[0], JobState.RUNNING, app_id="app-20240101-0001")
    assert pool.next_job("a").id == ids[2]
    pool.clock.advance(30)
    j = pool.transition_job(ids[0], JobState.SUCCEEDED, exit_code=0, output_path="/out/0")
    assert (j.state, j.exit_code, j.app_id, j.ended_at - j.started_at) == ("succeeded", 0, "app-20240101-0001", 30)
    with pytest.raises(FawkesError, match="succeeded -> running not allowed"):
        pool.transition_job(ids[0], JobState.RUNNING)
    assert [x.id for x in pool.list_jobs(states=[JobState.QUEUED])] == ids[1:]
    assert [x.id for x in pool.list_jobs(limit=2)] == ids[-2:]
    assert pool.queue_lengths() == {"a": 2, "b": 3}


@pytest.mark.parametrize("argv, kwargs, message", [
    ([], {}, "app: the application command is empty"),
    ([""], {}, "app: the application name is empty"),
    (["a\0b"], {}, "app: arguments must be strings without NUL"),
    (["wc"], {"input_bytes": -1}, "input_bytes: must be an integer >= 0"),
    (["wc"], {"ref_runtime": -2.0}, "ref_runtime: must be a number >= 0"),
])
def test_submit_validation_changes_nothing(pool: Store, argv, kwargs, message):
    admitted(pool, "a")
    with pytest.raises(FawkesError, match=message):
        pool.submit_job("a", argv, **kwargs)
    assert pool.list_jobs() == []


def test_submit_to_unknown_or_saving_cluster_refused(pool: Store):
    with pytest.raises(FawkesError, match="cluster zz: no such cluster"):
        pool.submit_job("zz", ["wc"])
    admitted(pool, "a")
    pool.transition_cluster("a", ClusterState.SAVING)
    with pytest.raises(FawkesError, match=r"not accepting jobs \(saving\)"):
        pool.submit_job("a", ["wc"])


# ---------------------------------------------------------------- samples, decisions, events, status
def test_samples_round_trip_every_metric_field(pool: Store):
    admitted(pool, "a")
    fields = [f.name for f in dataclasses.fields(ClusterMetrics)]
    values = {f: (True if f == "loading" else i + 0.5 if isinstance(getattr(ClusterMetrics(0.0), f), float) else i)
              for i, f in enumerate(fields)}
    m = ClusterMetrics(**values)
    pool.record_sample("a", m)
    pool.record_sample("a", dataclasses.replace(m, time=100.0))
    assert pool.samples("a") == [m, dataclasses.replace(m, time=100.0)]
    assert pool.samples("a", since=m.time) == [dataclasses.replace(m, time=100.0)]
    assert pool.samples("a", until=m.time) == [m]


def test_decisions_explain_status_and_pruning(pool: Store):
    admitted(pool, "a")
    admitted(pool, "b")
    pool.allocate_node("a", "n00", Role.CORE)
    pool.allocate_node("a", "n01", Role.TC)
    n = pool.allocate_node("a", "n02", Role.TR)
    pool.transition_node(n.id, NodeState.PROVISIONING)
    pool.transition_node(n.id, NodeState.DRAINING)
    pool.allocate_node("b", "n03", Role.CORE)
    pool.request_cluster("c", framework="spark", min_core=3)
    pool.submit_job("b", ["wc"])
    pool.submit_job("b", ["wc"])
    for k in range(3):
        pool.clock.advance(60)
        tick = pool.record_decision(
            policy="TD", inputs={"capacity": 6, "k": k}, weights={"a": 0.25, "b": 0.75 + k},
            discriminations={"a": 12.5, "b": -12.5}, global_factor=156.25, gate_open=True,
            targets={"a": 2, "b": 4}, plan={"grows": [{"cluster": "b", "host": "n04", "role": "transient-core"}],
                                           "shrinks": []}, reason="Var(D) 156.25 > tau 10")
    d = pool.decision()
    assert d.id == tick and d.inputs == {"capacity": 6, "k": 2} and d.gate_open is True
    assert pool.decision(tick - 2).inputs["k"] == 0
    with pytest.raises(FawkesError, match="tick 999: no such decision"):
        pool.decision(999)
    st = pool.status()
    assert st["tick"] == tick and st["global_factor"] == 156.25 and st["hosts"] == {"allocated": 4, "free": 2}
    rows = {r["name"]: r for r in st["clusters"]}
    assert rows["a"]["nodes"] == {"core": 1, "transient": 1, "transient-core": 1} and rows["a"]["draining"] == 1
    assert rows["b"]["weight"] == 2.75 and rows["b"]["discrimination"] == -12.5 and rows["b"]["queued_jobs"] == 2
    assert rows["c"]["queue_position"] == 1 and rows["c"]["weight"] is None
    assert pool.prune_decisions(keep=1) == 2
    assert pool.decision().id == tick
    with pytest.raises(FawkesError, match="tick .*: no such decision"):
        pool.decision(tick - 1)


def test_no_decision_yet_is_a_clear_error(store: Store):
    with pytest.raises(FawkesError, match="no decision recorded yet"):
        store.decision()
    assert store.status()["tick"] is None


def test_events_filter_limit_order(pool: Store):
    for i in range(5):
        pool.clock.advance(1)
        pool.record_event("test", f"m{i}", cluster="a" if i % 2 else "b", level="warning")
    assert [e.message for e in pool.events(cluster="a")] == ["m1", "m3"]
    assert [e.message for e in pool.events(limit=2)] == ["m3", "m4"]
    with pytest.raises(FawkesError, match="limit: must be an integer >= 1"):
        pool.events(limit=0)
