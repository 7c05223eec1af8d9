"""Scale to zero, the store part (issue 27, item 4): a hibernating cluster holds nothing, is in no
snapshot, shows in the status, and the next job submitted to it wakes it as a new incarnation at the
tail of the global queue that restores its saved output; a release while hibernating is immediate.
The coordinator's part (the teardown into hibernation, the restore): tests/test_hibernate_simulated.py."""

from __future__ import annotations

import json

import pytest

from fawkes.coordinator.view import build_snapshot
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, Role, Settings
from fawkes.store import CLUSTER_TRANSITIONS, JobState, NodeState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

SAVED = {"path": "/shared/etl/1", "bytes": 1234}


def hibernate(store: Store, name: str = "etl") -> None:
    """Take ``name`` through a whole incarnation into hibernation, as the coordinator would."""
    store.request_cluster(name, framework="spark", min_core=1, input_path="/data/in")
    store.transition_cluster(name, ClusterState.DEPLOYING, "admitted")
    n = store.allocate_node(name, "h0", Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE)
    store.transition_cluster(name, ClusterState.SAVING, "idle")
    store.record_saved_output(name, SAVED, "output saved")
    store.transition_node(n.id, NodeState.DRAINING, "teardown")
    store.transition_node(n.id, NodeState.RELEASED, "cluster released")
    store.transition_cluster(name, ClusterState.HIBERNATING, "output saved, nodes released")


@pytest.fixture
def st(store):
    store.register_framework("spark", "spark", spark_home="/opt/spark")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 2} for i in range(3)])
    return store


def test_the_lifecycle_edges():
    assert ClusterState.HIBERNATING in CLUSTER_TRANSITIONS[ClusterState.SAVING]
    assert CLUSTER_TRANSITIONS[ClusterState.HIBERNATING] == {ClusterState.RELEASED}
    for s in (ClusterState.ACTIVE, ClusterState.DEPLOYING, ClusterState.LOADING, ClusterState.REQUESTED):
        assert ClusterState.HIBERNATING not in CLUSTER_TRANSITIONS[s]


def test_a_hibernating_cluster_holds_nothing_and_is_in_no_snapshot(st):
    hibernate(st)
    st.request_cluster("bi", framework="spark", min_core=1)
    snap = build_snapshot(st, Settings(), st.clock())
    assert [c.name for c in snap.clusters] == [] and [r.name for r in snap.queue] == ["bi"]
    assert len(snap.free_hosts) == 3
    row = next(c for c in st.status()["clusters"] if c["name"] == "etl")
    assert row["state"] == "hibernating" and row["held"] == 0
    with pytest.raises(FawkesError, match="cluster etl: already exists"):
        st.request_cluster("etl", framework="spark", min_core=1)
    with pytest.raises(FawkesError, match="hibernating -> active"):
        st.transition_cluster("etl", ClusterState.ACTIVE)


def test_the_next_job_wakes_it_as_a_new_incarnation_that_restores_its_output(st, store_url):
    hibernate(st)
    old = st.get_cluster("etl")
    st.request_cluster("bi", framework="spark", min_core=1)  # queued before the wake: stays ahead
    st.clock.advance(60)
    job = st.submit_job("etl", ["wordcount", "/data/in", "/out"])
    new = st.get_cluster("etl")
    assert new.id != old.id and new.state == ClusterState.REQUESTED and new.requested_at == st.clock()
    assert (new.framework, new.min_core, new.input_path) == ("spark", 1, "/data/in")
    assert json.loads(new.restore_from) == SAVED and new.saved_output is None and new.admitted_at is None
    assert [c.name for c in st.queue()] == ["bi", "etl"]
    assert st.get_job(job.id).cluster_id == new.id and st.get_job(job.id).state == JobState.QUEUED
    hist = [(t.from_state, t.to_state) for t in st.cluster_history("etl")]
    assert hist == [(None, "requested")]  # the new incarnation's history; the old one's ended released
    with st.session() as s:
        from fawkes.store.schema import MRCluster
        gone = s.get(MRCluster, old.id)
        assert gone.state == ClusterState.RELEASED and gone.live_name is None
    msgs = [e.message for e in st.events(cluster="etl", limit=5)]
    assert any("hibernating -> released (woken (a job was submitted)" in m for m in msgs)
    # the woken one is admitted and deploys as any request (the restore itself is the coordinator's)
    snap = build_snapshot(st, Settings(), st.clock())
    assert [r.name for r in snap.queue] == ["bi", "etl"]
    # a second job joins the new incarnation's queue
    assert st.submit_job("etl", ["sort"]).cluster_id == new.id


def test_a_release_while_hibernating_is_immediate(st):
    hibernate(st)
    st.request_release("etl")
    c = st.get_cluster("etl")
    assert c.state == ClusterState.RELEASED and json.loads(c.saved_output) == SAVED
    with pytest.raises(FawkesError, match="already released"):
        st.submit_job("etl", ["wordcount"])


def test_a_wake_refused_writes_nothing(st):
    hibernate(st)
    before = st.get_cluster("etl")
    for bad in (["a\0b"], [], [" "], ["wc", 5]):
        with pytest.raises(FawkesError, match="app: "):
            st.submit_job("etl", bad)
    with pytest.raises(FawkesError, match="input"):
        st.submit_job("etl", ["wc"], input_path="x\0y")
    after = st.get_cluster("etl")
    assert (after.id, after.state) == (before.id, ClusterState.HIBERNATING)


def test_hibernating_is_refused_while_a_node_holds_a_host(st):
    st.request_cluster("etl", framework="spark", min_core=1)
    st.transition_cluster("etl", ClusterState.DEPLOYING, "admitted")
    n = st.allocate_node("etl", "h0", Role.CORE)
    st.transition_node(n.id, NodeState.PROVISIONING)
    st.transition_node(n.id, NodeState.RUNNING)
    st.transition_cluster("etl", ClusterState.ACTIVE)
    st.transition_cluster("etl", ClusterState.SAVING, "idle")
    st.record_saved_output("etl", SAVED, "output saved")
    with pytest.raises(FawkesError, match="cluster etl: still holds 1 node"):
        st.transition_cluster("etl", ClusterState.HIBERNATING)
    assert st.get_cluster("etl").state == ClusterState.SAVING


def test_jobs_queued_when_it_hibernates_wake_it_at_once(st):
    """A job queued on the active cluster just before it went idle (not yet dispatched) is not stranded
    on a hibernating cluster nobody wakes: it wakes it in the same transaction; a dispatched one is
    cancelled as a release cancels it."""
    st.request_cluster("etl", framework="spark", min_core=1, input_path="/data/in")
    st.transition_cluster("etl", ClusterState.DEPLOYING, "admitted")
    n = st.allocate_node("etl", "h0", Role.CORE)
    st.transition_node(n.id, NodeState.PROVISIONING)
    st.transition_node(n.id, NodeState.RUNNING)
    st.transition_cluster("etl", ClusterState.ACTIVE)
    queued = st.submit_job("etl", ["wordcount"])
    sent = st.submit_job("etl", ["sort"])
    st.transition_job(sent.id, JobState.DISPATCHED)
    old = st.get_cluster("etl")
    st.transition_cluster("etl", ClusterState.SAVING, "idle")
    st.record_saved_output("etl", SAVED, "output saved")
    st.transition_node(n.id, NodeState.DRAINING, "teardown")
    st.transition_node(n.id, NodeState.RELEASED, "cluster released")
    new = st.transition_cluster("etl", ClusterState.HIBERNATING, "output saved, nodes released")
    assert new.id != old.id and new.state == ClusterState.REQUESTED and json.loads(new.restore_from) == SAVED
    assert st.get_job(queued.id).cluster_id == new.id and st.get_job(queued.id).state == JobState.QUEUED
    assert st.get_job(sent.id).state == JobState.CANCELLED and st.get_job(sent.id).cluster_id == old.id
    msgs = [e.message for e in st.events(cluster="etl", limit=10)]
    assert any("saving -> hibernating" in m for m in msgs)
    assert any("woken (1 job(s) queued while it was saving)" in m for m in msgs), msgs


def test_cluster_wake_wakes_a_hibernating_cluster_and_refuses_the_rest(st, store_url):
    """``fawkes cluster wake NAME``: a hibernating cluster woken without a job (a new incarnation, as a job
    wakes it); a hostile or unknown name, or a cluster that does not hibernate: one line, exit 2, nothing
    written."""
    from click.testing import CliRunner

    from fawkes.cli import main

    def cli(*args: str) -> tuple[int, str, str]:
        with CliRunner().isolation(env={"FAWKES_STATE": store_url, "FAWKES_CONFIG": None,
                                        "FAWKES_URL": None}) as streams:
            rc = main(["cluster", "wake", *args])
            return rc, streams[0].getvalue().decode(), streams[2].getvalue().decode()

    hibernate(st)
    st.request_cluster("bi", framework="spark", min_core=1)

    def rows() -> list:
        return [(c.id, c.name, c.state) for c in st.list_clusters()] + [(j.id, j.state) for j in st.list_jobs()]

    before = rows()
    for bad, msg in (("a\nb", "name"), ("a\0b", "name"), ("-x", "No such option"), ("x" * 300, "name"),
                     ("nosuch", "cluster nosuch: no such cluster"), ("bi", "cluster bi: requested, not hibernating")):
        rc, out, err = cli(bad)
        assert rc == 2 and err.count("\n") == 1 and err.startswith("fawkes: error: "), (bad, err)
        assert msg in err, (bad, err)
    assert rows() == before
    rc, out, err = cli("etl", "--json")
    assert rc == 0, err
    woken = json.loads(out)
    assert woken["state"] == "requested" and json.loads(woken["restore_from"]) == SAVED
    assert st.get_cluster("etl").id == woken["id"] and [c.name for c in st.queue()] == ["bi", "etl"]
    assert [a.action for a in st.audit()][-1:] == ["cluster.wake"]
