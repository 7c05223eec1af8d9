"""Admin operations on the store, on real SQLite and PostgreSQL: restoring and failing hosts,
cancelling jobs (immediate or as intent for the coordinator), retention."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterMetrics, ClusterState, Role
from fawkes.store import HostState, JobState, NodeState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

HOSTS = [{"name": f"n{i}", "address": f"10.0.0.{i}", "cores": 2, "memory_mb": 2048} for i in range(4)]


@pytest.fixture
def pool(store: Store) -> Store:
    store.register_framework("spark", "spark", spark_home="/opt/spark")
    store.sync_hosts(HOSTS)
    return store


def active(store: Store, name: str = "a", host: str = "n0") -> int:
    store.request_cluster(name, framework="spark", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING)
    n = store.allocate_node(name, host, Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE)
    return n.id


def rows(store: Store) -> dict:
    """Every row that an admin operation might touch, to check that a refusal changed nothing."""
    with store.engine.connect() as c:
        return {t: c.execute(text(f"SELECT * FROM {t} ORDER BY 1")).all()
                for t in ("hosts", "jobs", "nodes", "events", "mr_clusters")}


# ---------------------------------------------------------------- hosts
def test_fail_and_restore_a_free_host(pool: Store):
    h = pool.fail_host("n2", "disk replacement")
    assert h.state == HostState.FAILED and "n2" not in pool.free_hosts() and pool.capacity() == 3
    ev = pool.events(limit=1)[0]
    assert (ev.kind, ev.level, ev.node) == ("host", "warning", "n2")
    assert ev.message == "host n2: free -> failed (taken out of service: disk replacement)"
    active(pool)
    with pytest.raises(FawkesError, match="host n2: not free"):
        pool.allocate_node("a", "n2", Role.TC)  # the mechanism can no longer get it
    pool.clock.advance(10)
    h = pool.restore_host("n2", "by the admin")
    assert h.state == HostState.FREE and "n2" in pool.free_hosts() and pool.capacity() == 4
    assert pool.events(limit=1)[0].message == "host n2: failed -> free (restored by the admin)"
    assert pool.allocate_node("a", "n2", Role.TC).host == "n2"


def test_host_failed_by_the_sampler_is_restored_once_its_node_is_released(pool: Store):
    node = active(pool, host="n1")
    pool.transition_node(node, NodeState.FAILED, "host unreachable")
    pool.set_host_state("n1", HostState.FAILED, detail="ssh timeout")  # what the sampler does
    before = rows(pool)
    with pytest.raises(FawkesError) as err:
        pool.restore_host("n1")
    assert str(err.value) == (f"host n1: still held by cluster a (node {node}, failed); "
                              "restore it once that node is released")
    assert rows(pool) == before
    pool.transition_node(node, NodeState.RELEASED, "cleaned up")
    assert pool.list_hosts(HostState.FAILED)[0].name == "n1"  # releasing the node keeps it failed
    assert pool.restore_host("n1").state == HostState.FREE


@pytest.mark.parametrize("op, name, message", [
    ("fail", "n0", "host n0: held by cluster a (node 1, running); only a free host can be taken out of service"),
    ("fail", "zz", "host zz: not in the inventory"),
    ("fail", "n3", "host n3: already failed"),
    ("fail", "n2", "host n2: retired, not free"),
    ("restore", "n1", "host n1: not failed (free); nothing to restore"),
    ("restore", "n0", "host n0: not failed (allocated); nothing to restore"),
    ("restore", "zz", "host zz: not in the inventory"),
    ("restore", "n2", "host n2: not failed (retired); nothing to restore"),
])
def test_host_operations_refused_change_nothing(pool: Store, op, name, message):
    active(pool)
    pool.fail_host("n3", "broken")
    pool.sync_hosts([h for h in HOSTS if h["name"] != "n2"])  # n2 retired
    before = rows(pool)
    with pytest.raises(FawkesError) as err:
        pool.fail_host(name, "maintenance") if op == "fail" else pool.restore_host(name)
    assert str(err.value) == message
    assert rows(pool) == before


def test_fail_host_needs_a_reason(pool: Store):
    with pytest.raises(FawkesError, match="reason: must be a non-empty single-line string"):
        pool.fail_host("n1", " ")
    assert pool.list_hosts(HostState.FREE)[1].name == "n1"


def test_a_host_taken_out_of_service_is_not_returned_by_a_node_release(pool: Store):
    node = active(pool, host="n1")
    pool.transition_node(node, NodeState.DRAINING)
    with pytest.raises(FawkesError, match="held by cluster a"):
        pool.fail_host("n1", "maintenance")
    pool.transition_node(node, NodeState.RELEASED)
    pool.fail_host("n1", "maintenance")
    assert pool.get_cluster("a").state == "active" and "n1" not in pool.free_hosts()


# ---------------------------------------------------------------- cancelling jobs
def test_cancel_queued_job_is_immediate(pool: Store):
    active(pool)
    a, b = pool.submit_job("a", ["wc"]).id, pool.submit_job("a", ["sort"]).id
    pool.clock.advance(7)
    [(job, outcome)] = pool.cancel_jobs([a])
    assert outcome == "cancelled" and job.state == JobState.CANCELLED and job.ended_at == pool.clock.t
    assert job.detail == "cancelled by the user" and job.cancel_requested_at is None
    assert pool.next_job("a").id == b  # the queue moves on
    assert pool.events(cluster="a", limit=1)[0].message == f"job {a} cancelled (was queued)"


def test_cancel_started_job_is_intent_for_the_coordinator(pool: Store):
    active(pool)
    d = pool.submit_job("a", ["wc"]).id
    r = pool.submit_job("a", ["sort"]).id
    pool.transition_job(d, JobState.DISPATCHED)
    pool.transition_job(r, JobState.DISPATCHED)
    pool.transition_job(r, JobState.RUNNING, app_id="app-1")
    t = pool.clock.advance(3)
    out = pool.cancel_jobs([d, r, d])  # duplicates count once
    assert [(j.id, j.state, j.cancel_requested_at, o) for j, o in out] == [
        (d, "dispatched", t, "requested"), (r, "running", t, "requested")]
    pool.clock.advance(3)
    assert [o for _, o in pool.cancel_jobs([r])] == ["pending"]  # asking twice is harmless
    assert pool.get_job(r).cancel_requested_at == t
    with pytest.raises(FawkesError, match="running -> queued not allowed"):  # no edge, request or not
        pool.transition_job(r, JobState.QUEUED)
    # the coordinator carries it out
    assert pool.transition_job(r, JobState.CANCELLED, "driver killed").ended_at == pool.clock.t
    # a dispatched job with a cancel request never goes back to the queue
    j = pool.transition_job(d, JobState.QUEUED, "no trace on the master: queued again")
    assert j.state == JobState.CANCELLED and "cancelled on request instead" in j.detail
    assert pool.next_job("a") is None


@pytest.mark.parametrize("final", [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
def test_cancel_of_a_finished_job_refuses_the_whole_call(pool: Store, final):
    active(pool)
    queued = pool.submit_job("a", ["wc"]).id
    done = pool.submit_job("a", ["sort"]).id
    if final is JobState.CANCELLED:
        pool.cancel_jobs([done])
    else:
        pool.transition_job(done, JobState.DISPATCHED)
        pool.transition_job(done, JobState.RUNNING)
        pool.transition_job(done, final)
    before = rows(pool)
    with pytest.raises(FawkesError) as err:
        pool.cancel_jobs([queued, done])
    assert str(err.value) == f"job {done}: already {final.value}"
    assert rows(pool) == before and pool.get_job(queued).state == JobState.QUEUED
    with pytest.raises(FawkesError, match="job 999: not found"):
        pool.cancel_jobs([queued, 999])
    assert rows(pool) == before


def test_release_of_a_cluster_ends_the_running_jobs_whose_cancel_was_requested(pool: Store):
    node = active(pool)
    asked, other = pool.submit_job("a", ["wc"]).id, pool.submit_job("a", ["sort"]).id
    for j in (asked, other):
        pool.transition_job(j, JobState.DISPATCHED)
        pool.transition_job(j, JobState.RUNNING)
    pool.cancel_jobs([asked])
    pool.transition_cluster("a", ClusterState.SAVING, "release requested")
    pool.transition_node(node, NodeState.DRAINING)
    pool.transition_node(node, NodeState.RELEASED)
    pool.transition_cluster("a", ClusterState.RELEASED)
    j = pool.get_job(asked)
    assert j.state == JobState.CANCELLED and j.detail == "cancel requested; cluster released"
    assert pool.get_job(other).state == JobState.RUNNING  # unchanged: only requested cancels end here


def test_cancel_after_another_connection_dispatched_the_job_records_intent(pool: Store, store_url):
    """The dispatcher (its own connection) took the head of the queue first: the cancel becomes intent."""
    active(pool)
    j = pool.submit_job("a", ["wc"]).id
    other = Store(store_url, clock=pool.clock)
    try:
        other.transition_job(j, JobState.DISPATCHED, "head of the queue")  # won the race
        [(job, outcome)] = pool.cancel_jobs([j])  # the user's call sees it dispatched: intent
        assert (job.state, outcome) == (JobState.DISPATCHED, "requested")
    finally:
        other.close()


# ---------------------------------------------------------------- retention
def test_prune_samples_and_events_by_time_in_batches(pool: Store):
    active(pool)
    active(pool, "b", "n1")
    for t in range(100):
        pool.record_sample("a" if t % 2 else "b", ClusterMetrics(time=float(t), pending_tasks=t))
    for t in range(30):
        pool.record_event("test", f"e{t}", time=float(t))
    assert pool.prune_samples(40.0, dry_run=True) == 40
    assert len(pool.samples("a")) + len(pool.samples("b")) == 100  # dry run deleted nothing
    assert pool.prune_samples(40.0, batch=7) == 40  # 6 batches of 7, the last one short
    assert [m.time for m in pool.samples("a")][:2] == [41.0, 43.0] and pool.samples("b")[0].time == 40.0
    assert pool.prune_samples(40.0) == 0
    test_events = [e for e in pool.events(limit=1000) if e.kind == "test"]
    assert len(test_events) == 30
    assert pool.prune_events(10.0, dry_run=True) == 10
    assert pool.prune_events(10.0, batch=3) == 10
    assert [e.message for e in pool.events(limit=1000) if e.kind == "test"][0] == "e10"


def test_count_decisions_matches_what_prune_deletes(pool: Store):
    for k in range(5):
        pool.record_decision(policy="TD", inputs={}, weights={}, discriminations={}, global_factor=0.0,
                             gate_open=False, targets={}, plan={}, reason=str(k))
    assert pool.count_decisions_beyond(2) == 3 and pool.count_decisions_beyond(9) == 0
    assert pool.prune_decisions(2) == 3 and pool.count_decisions_beyond(2) == 0
    assert pool.decision().reason == "4"
