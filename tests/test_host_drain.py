"""``fawkes host drain``: a held host taken out of service (issue 30, item 6).

The node on the host leaves by its removal mode through the reconciler (a transient-core node by DP,
a transient one by FP, never suspended), the host is never allocated again until ``host restore``, and
the next snapshot no longer counts the node (so the plan replaces it).  A core node is refused, one
line, nothing changed.  Store and reconciler on SQLite with the scripted driver of test_reconcile.py;
the command as a real process.
"""

from __future__ import annotations

import json

import pytest

from fawkes.config import TimeoutsConfig
from fawkes.coordinator.suspend import may_suspend
from fawkes.coordinator.view import build_snapshot
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, Role
from fawkes.mechanism.settings import Settings
from fawkes.store import HostState, Store
from fawkes.store.lifecycle import NodeState

try:
    from test_cli_store import fawkes, ok, refused
    from test_reconcile import active_cluster, facts, node, settle, world
except ImportError:
    from tests.test_cli_store import fawkes, ok, refused
    from tests.test_reconcile import active_cluster, facts, node, settle, world  # noqa: F401 (a fixture)


def grown(store: Store, host: str, role: Role) -> int:
    n = store.allocate_node("a", host, role)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    return n.id


def hosts(store: Store) -> dict[str, str]:
    return {h.name: h.state for h in store.list_hosts()}


def test_a_tc_node_leaves_by_dp_and_its_host_stays_out_until_restored(world):
    store, clock, driver, reconciler = world
    active_cluster(store)  # core on h1
    tc = grown(store, "h2", Role.TC)
    driver.reality["h2"] = facts("h2", Role.TC)
    h, n, cluster = store.drain_host("h2", "disk swap")
    assert (h.state, n.id, n.state, cluster) == (HostState.FAILED, tc, NodeState.DRAINING, "a")
    # the next snapshot: the node no longer counts for a, the host is neither free nor usable: the plan replaces it
    snap = build_snapshot(store, Settings(policy="TD", period_s=60), clock())
    (a,) = snap.clusters
    assert [v.id for v in a.nodes] == ["h1"] and "h2" not in snap.free_hosts and snap.capacity == 5
    r = reconciler(timeouts=TimeoutsConfig(drain=7))
    r.step()
    settle(r)
    assert driver.ops() == [("remove_nodes", ("h2",), None, 7.0)]  # the driver's removal of a TC node: DP
    assert node(store, "h2").state == NodeState.RELEASED
    assert hosts(store)["h2"] == HostState.FAILED and "h2" not in store.free_hosts()
    with pytest.raises(FawkesError, match="host h2: not free"):
        store.allocate_node("a", "h2", Role.TR)
    store.restore_host("h2", "by the admin")
    assert hosts(store)["h2"] == HostState.FREE and "h2" in store.free_hosts()
    messages = [e.message for e in store.events(cluster="a")]
    assert any("drained: disk swap" in m and f"node {tc} of cluster a leaves" in m for m in messages)


def test_a_dp_still_running_keeps_the_node_draining_and_the_host_out(world):
    store, _, driver, reconciler = world
    active_cluster(store)
    grown(store, "h2", Role.TC)
    driver.reality["h2"] = facts("h2", Role.TC)  # In Service: HDFS not told yet
    driver.decommission_done = False
    store.drain_host("h2", "rack move")
    r = reconciler(timeouts=TimeoutsConfig(drain=5))
    r.step()
    settle(r)
    assert driver.ops() == [("remove_nodes", ("h2",), None, 5.0)]
    assert node(store, "h2").state == NodeState.DRAINING and hosts(store)["h2"] == HostState.FAILED
    with pytest.raises(FawkesError, match="still held"):  # restore waits for the node to be gone
        store.restore_host("h2")


def test_a_transient_node_leaves_by_fp_never_suspended(world):
    store, _, driver, reconciler = world
    active_cluster(store, tr=("h3",))
    store.drain_host("h3", "kernel update")
    n = node(store, "h3")
    assert n.state == NodeState.DRAINING
    assert "out of service (drained)" in may_suspend(store, n.id)  # shrink_mode suspend would keep its worker
    r = reconciler(shrink_mode="suspend")
    r.step()
    settle(r)
    assert driver.ops("remove_nodes") == [("remove_nodes", ("h3",), None, 60.0)]  # a TR node's removal: FP
    assert node(store, "h3").state == NodeState.RELEASED and hosts(store)["h3"] == HostState.FAILED


def test_a_requested_node_is_released_at_once(world):
    store = world[0]
    active_cluster(store)
    n = store.allocate_node("a", "h4", Role.TC)
    h, moved, _ = store.drain_host("h4", "x")
    assert moved.id == n.id and moved.state == NodeState.RELEASED and h.state == HostState.FAILED
    assert hosts(store)["h4"] == HostState.FAILED  # the release did not free it


def test_a_free_host_is_failed(world):
    store, *_ = world
    h, n, cluster = store.drain_host("h5", "spare")
    assert (h.state, n, cluster) == (HostState.FAILED, None, None)


@pytest.mark.parametrize("setup,host,message", [
    ("core", "h1", "host h1: holds core node 1 of cluster a (active); a core node is never drained"),
    ("free", "h9", "host h9: not in the inventory"),
    ("twice", "h2", "host h2: already out of service (failed)"),
    ("retired", "h6", "host h6: retired"),
    ("free", "h1\0", "host h1\0: not in the inventory"),
])
def test_refusals_change_nothing(world, setup, host, message):
    store = world[0]
    active_cluster(store)
    if setup == "twice":
        grown(store, "h2", Role.TC)
        store.drain_host("h2", "first")
    if setup == "retired":
        store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 1, "memory_mb": 1024}
                          for i in range(1, 6)])
    before = (hosts(store), [(n.id, n.state) for n in store.list_nodes(live=False)], len(store.events(limit=1000)))
    with pytest.raises(FawkesError) as exc:
        store.drain_host(host, "x")
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)
    assert (hosts(store), [(n.id, n.state) for n in store.list_nodes(live=False)],
            len(store.events(limit=1000))) == before


def test_a_node_of_a_cluster_being_torn_down_is_left_to_the_teardown(world):
    store = world[0]
    active_cluster(store)
    store.request_release("a")
    store.transition_cluster("a", ClusterState.SAVING, "release requested")
    h, n, _ = store.drain_host("h1", "x")  # its core node: the teardown releases it, the host stays out
    assert h.state == HostState.FAILED and n.state == NodeState.RUNNING


# ---------------------------------------------------------------- the command
@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url, create=True) as s:
        s.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        s.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 1} for i in range(1, 4)])
        active_cluster(s)
        grown(s, "h2", Role.TC)
    return url


def test_the_command_drains_restores_and_refuses_in_one_line(url):
    out = json.loads(ok(fawkes("host", "drain", "h2", "--reason", "disk swap", "--json", state=url)))
    assert out["state"] == "failed" and out["node"]["state"] == "draining" and out["node"]["cluster"] == "a"
    text = ok(fawkes("host", "drain", "h3", state=url))
    assert text.startswith("host h3: free -> failed (drained: by the admin)")
    with Store(url) as s:
        before = ([(h.name, h.state) for h in s.list_hosts()], [(n.id, n.state) for n in s.list_nodes()])
    refused(fawkes("host", "drain", "h1", state=url), "host h1: holds core node 1 of cluster a (active)")
    for bad in ("h1\nh2", "", "x" * 300):  # (a NUL cannot reach argv: the store refuses it, above)
        r = fawkes("host", "drain", bad, state=url)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    refused(fawkes("host", "drain", "h3", "--reason", "a\nb", state=url), "reason")
    with Store(url) as s:
        assert ([(h.name, h.state) for h in s.list_hosts()], [(n.id, n.state) for n in s.list_nodes()]) == before
    refused(fawkes("host", "restore", "h2", state=url), "still held")
    ok(fawkes("host", "restore", "h3", state=url))
