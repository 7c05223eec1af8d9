"""The reconciler's phases on real durable state (SQLite), with a scripted framework driver.

Each test sets what "reality" says (the driver's :meth:`observe` answers) and checks what one
``step`` records and starts: sync from reality first, then expire, then act.  The same phases on
real daemons are in tests/test_reconcile_lab.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from fawkes.config import TimeoutsConfig
from fawkes.coordinator.reconcile import Reconciler
from fawkes.frameworks.base import DecommissionTimeout, NodeFacts, OpResult
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism import ClusterState, Role, ShrinkMode
from fawkes.ssh.executor import Result
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState

ROLE_DAEMONS = {Role.CORE: ("datanode", "worker"), Role.TC: ("datanode", "worker"), Role.TR: ("worker",)}


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def facts(host: str, role: Role, *, running: bool = True, worker: str | None = "ALIVE",
          datanode: str | None = "In Service") -> NodeFacts:
    ds = ROLE_DAEMONS[role]
    reg = {"worker": worker, "datanode": datanode}
    up = running and worker == "ALIVE" and ("datanode" not in ds or datanode == "In Service")
    dec = "datanode" not in ds or datanode in ("Decommissioned", "dead, decommissioned")
    doing = False if "datanode" not in ds else None if datanode is None else datanode == "Decommission In Progress"
    return NodeFacts(host, {d: running for d in ds}, {d: reg[d] for d in ds}, up, dec, decommissioning=doing)


class ScriptedDriver:
    """Records every operation; ``reality`` is what observe() reports per host."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.reality: dict[str, NodeFacts] = {}
        self.decommission_done = True

    def observe(self, cluster, hosts=None):
        self.calls.append(("observe", tuple(hosts)))
        return {h: self.reality.get(h) or facts(h, cluster.node(h).role, running=False, worker="absent",
                                                datanode="absent") for h in hosts}

    def add_nodes(self, cluster, nodes, *, timeout=180.0):
        self.calls.append(("add_nodes", tuple(n.name for n in nodes), timeout))
        for n in nodes:
            self.reality[n.name] = facts(n.name, n.role)
        return OpResult(cluster)

    def remove_nodes(self, cluster, names, mode=None, *, timeout=600.0, cancel=None):
        self.calls.append(("remove_nodes", tuple(names), mode, timeout))
        if any(cluster.node(h).role is Role.TC for h in names) and not self.decommission_done:
            raise DecommissionTimeout(f"DP of {', '.join(names)} did not finish in {timeout:g}s")
        return OpResult(cluster)

    def deploy(self, cluster, *, timeout=180.0):
        self.calls.append(("deploy", tuple(n.name for n in cluster.nodes), timeout))
        return OpResult(cluster)

    def reconfigure(self, cluster):
        self.calls.append(("reconfigure", tuple(n.name for n in cluster.nodes)))
        return {}

    def teardown(self, cluster, *, wipe=True, timeout=180.0):
        self.calls.append(("teardown", tuple(n.name for n in cluster.nodes), wipe))
        for n in cluster.nodes:
            self.reality.pop(n.name, None)

    def ops(self, name: str | None = None) -> list[tuple]:
        """Operations that change hosts (``name``: only those); the reads observe() and the drift
        check reconfigure() (which restarts nothing whose configs are unchanged) only by name."""
        if name is not None:
            return [c for c in self.calls if c[0] == name]
        return [c for c in self.calls if c[0] not in ("observe", "reconfigure")]


class FakeExecutor:
    def run(self, hosts, command, *, timeout=None):
        return {h: Result(h, True, 0, "", "", None, 0.0) for h in hosts}


class ScriptedFleet:
    FW = FrameworkPaths("spark", "spark-hdfs", "/opt/spark", hdfs_jars="/opt/hdfs")

    def __init__(self, store: Store, driver: ScriptedDriver):
        self.store, self.driver, self.ex = store, driver, FakeExecutor()

    def spec(self, cluster, *, states=frozenset({NodeState.REQUESTED, NodeState.PROVISIONING, NodeState.RUNNING,
                                                 NodeState.DRAINING})):
        nodes = [n for n in self.store.list_nodes(cluster) if NodeState(n.state) in states]
        specs = tuple(NodeSpec(n.host, f"10.9.0.{int(n.host[1:]) + 10}", Role(n.role), "/srv/fawkes")
                      for n in nodes)
        return ClusterSpec(cluster, self.FW, specs), self.driver


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 1, "memory_mb": 1024}
                      for i in range(1, 7)])
    driver = ScriptedDriver()
    made = []

    def reconciler(**kw) -> Reconciler:
        r = Reconciler(store, ScriptedFleet(store, driver), clock=clock, **kw)
        made.append(r)
        return r

    yield store, clock, driver, reconciler
    for r in made:
        r.shutdown(5)
    store.close()


def active_cluster(store: Store, name: str = "a", cores: tuple[str, ...] = ("h1",), tr: tuple[str, ...] = (),
                   framework: str = "spark") -> None:
    """An ACTIVE cluster whose core nodes (then TR nodes) on those hosts are RUNNING."""
    store.request_cluster(name, framework=framework, min_core=len(cores))
    store.transition_cluster(name, ClusterState.DEPLOYING, "admitted")
    for h, role in [(h, Role.CORE) for h in cores] + [(h, Role.TR) for h in tr]:
        n = store.allocate_node(name, h, role)
        store.transition_node(n.id, NodeState.PROVISIONING)
        store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE, "no input")


def node(store: Store, host: str):
    return [n for n in store.list_nodes(live=False) if n.host == host][-1]


def draining_tc(store: Store, host: str) -> None:
    """An ACTIVE cluster ``a`` on h1 whose TC node on ``host`` the decision has chosen to go (DRAINING)."""
    active_cluster(store)
    n = store.allocate_node("a", host, Role.TC)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_node(n.id, NodeState.DRAINING, "shrink")


def settle(r: Reconciler, timeout: float = 60.0) -> None:
    """Until the reconciler is idle.  The bound is generous: scripts/test runs these tests at the lowest CPU
    weight beside the lab, where a worker thread can wait seconds for a core (10 s was not enough in the
    clean-clone CI of b10d9bc); an idle reconciler returns at once."""
    deadline = time.monotonic() + timeout
    while not r.idle():
        assert time.monotonic() < deadline, "operations did not finish"
        time.sleep(0.01)


def test_provisioning_node_found_up_becomes_running_without_a_second_start(world):
    store, clock, driver, reconciler = world
    active_cluster(store)
    n = store.allocate_node("a", "h2", Role.TC)
    store.transition_node(n.id, NodeState.PROVISIONING, "starting daemons")  # then the coordinator died
    driver.reality["h2"] = facts("h2", Role.TC)  # ... after the daemons had registered
    r = reconciler()
    r.step()
    settle(r)
    assert node(store, "h2").state == NodeState.RUNNING
    assert driver.ops() == [], "nothing may be started again"
    assert "found up, not started again" in store.node_history(n.id)[-1].detail
    assert "worker running, ALIVE" in store.node_history(n.id)[-1].detail


def test_provisioning_node_not_up_is_added_within_its_timeouts(world):
    store, clock, driver, reconciler = world
    active_cluster(store)
    n = store.allocate_node("a", "h2", Role.TC)
    store.transition_node(n.id, NodeState.PROVISIONING)
    driver.reality["h2"] = facts("h2", Role.TC, worker="absent", datanode="absent")  # started, not registered
    clock.t += 100  # the coordinator was down 100 s: 200 s of the 300 s provisioning budget left
    r = reconciler(timeouts=TimeoutsConfig(provisioning=300, op=250))
    r.step()
    settle(r)
    assert driver.ops() == [("add_nodes", ("h2",), 200.0)]
    assert node(store, "h2").state == NodeState.RUNNING
    m = store.allocate_node("a", "h3", Role.TR)  # a new node: the op timeout bounds the wait
    r.step()
    settle(r)
    assert driver.ops()[-1] == ("add_nodes", ("h3",), 250.0) and node(store, "h3").state == NodeState.RUNNING
    assert m.id != n.id


def test_provisioning_timeout_comes_from_the_config(world):
    store, clock, driver, reconciler = world
    active_cluster(store)
    n = store.allocate_node("a", "h2", Role.TC)
    store.transition_node(n.id, NodeState.PROVISIONING)
    clock.t += 45
    r = reconciler()  # defaults: 600 s, so a 45 s old PROVISIONING node is resumed, not failed
    r.step()
    settle(r)
    assert node(store, "h2").state == NodeState.RUNNING

    m = store.allocate_node("a", "h3", Role.TC)
    store.transition_node(m.id, NodeState.PROVISIONING)
    clock.t += 45
    r2 = reconciler(timeouts=TimeoutsConfig(provisioning=30))
    calls = len(driver.ops())
    r2.step()
    settle(r2)
    history = [(t.to_state, t.detail) for t in store.node_history(m.id)]
    assert (NodeState.FAILED, "stuck in provisioning for more than 30s") in history
    assert ("add_nodes", ("h3",)) not in [c[:2] for c in driver.ops()[calls:]]
    # its cleanup stops what may run on it: by DP, a TC node's DataNode is never simply stopped
    assert driver.ops()[calls:] == [("remove_nodes", ("h3",), ShrinkMode.DP, 60.0)]
    assert node(store, "h3").state == NodeState.RELEASED


def test_requested_timeout_comes_from_the_config(world):
    store, clock, driver, reconciler = world
    store.request_cluster("d", framework="spark", min_core=2)
    store.transition_cluster("d", ClusterState.DEPLOYING, "admitted")
    n = store.allocate_node("d", "h1", Role.CORE)  # waits for its second core node
    clock.t += 20
    r = reconciler(timeouts=TimeoutsConfig(requested=10))
    r.step()
    settle(r)
    history = [(t.to_state, t.detail) for t in store.node_history(n.id)]
    assert history[-2] == (NodeState.FAILED, "stuck in requested for more than 10s")
    # a core node lost while deploying: the cluster is queued again, the node released
    assert history[-1][0] == NodeState.RELEASED and store.get_cluster("d").state == ClusterState.REQUESTED


def test_draining_tc_node_is_left_to_hdfs_until_decommissioned(world):
    store, clock, driver, reconciler = world
    draining_tc(store, "h2")
    driver.reality["h2"] = facts("h2", Role.TC, worker="DECOMMISSIONED", datanode="Decommission In Progress")
    r = reconciler(timeouts=TimeoutsConfig(draining=100, drain=7))
    for _ in range(3):
        r.step()
        settle(r)
    assert driver.ops() == [], "HDFS is decommissioning it: nothing to start, nothing to stop"
    assert node(store, "h2").state == NodeState.DRAINING
    clock.t += 101  # past the configured draining timeout: reported once, still never stopped
    r.step()
    r.step()
    warnings = [e for e in store.events(cluster="a") if e.level == "warning"]
    assert len(warnings) == 1 and "draining for more than 100s" in warnings[0].message
    assert driver.ops() == [] and node(store, "h2").state == NodeState.DRAINING
    driver.reality["h2"] = facts("h2", Role.TC, worker="DECOMMISSIONED", datanode="Decommissioned")
    r.step()
    settle(r)
    assert driver.ops() == [("remove_nodes", ("h2",), None, 7.0)]
    assert node(store, "h2").state == NodeState.RELEASED


def test_draining_tc_node_not_yet_told_gets_its_decommission_started(world):
    store, clock, driver, reconciler = world
    draining_tc(store, "h2")  # then the coordinator died
    driver.reality["h2"] = facts("h2", Role.TC)  # In Service: HDFS was never told
    driver.decommission_done = False
    r = reconciler(timeouts=TimeoutsConfig(drain=5))
    r.step()
    settle(r)
    assert driver.ops() == [("remove_nodes", ("h2",), None, 5.0)]
    assert node(store, "h2").state == NodeState.DRAINING  # not finished within drain: HDFS goes on
    assert any("HDFS still decommissioning" in e.message for e in store.events(cluster="a"))


def test_core_node_of_an_active_cluster_is_never_removed(world):
    store, clock, driver, reconciler = world
    active_cluster(store, cores=("h1", "h2"))
    store.transition_node(node(store, "h2").id, NodeState.DRAINING, "a planning bug")
    r = reconciler()
    r.step()
    settle(r)
    assert driver.ops("remove_nodes") == []
    assert any("refusing to remove core node(s) h2" in e.message for e in store.events(cluster="a"))


def test_deploying_cluster_found_deployed_is_not_deployed_again(world):
    store, clock, driver, reconciler = world
    store.request_cluster("a", framework="spark", min_core=2)
    store.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
    for h in ("h1", "h2"):
        store.transition_node(store.allocate_node("a", h, Role.CORE).id, NodeState.PROVISIONING, "deploying")
        driver.reality[h] = facts(h, Role.CORE)
    r = reconciler()
    r.step()
    settle(r)
    assert driver.ops() == []
    assert store.get_cluster("a").state == ClusterState.ACTIVE
    assert {n.state for n in store.list_nodes("a")} == {NodeState.RUNNING}


def test_deploying_cluster_that_lost_a_core_node_is_queued_again_with_its_nodes_released(world):
    """A host lost while its cluster deploys (seen on the simulated fleet: the deployment stopped on the
    failed node, the others expired in REQUESTED, and the cluster stayed DEPLOYING for good)."""
    store, clock, driver, reconciler = world
    store.request_cluster("a", framework="spark", min_core=3)
    store.submit_job("a", ["wordcount", "/in"])
    store.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
    ids = [store.allocate_node("a", h, Role.CORE).id for h in ("h1", "h2", "h3")]
    store.transition_node(ids[0], NodeState.PROVISIONING, "deploying")
    store.transition_node(ids[1], NodeState.FAILED, "host unreachable")
    r = reconciler()
    r.step()
    settle(r)
    assert driver.ops() == [("teardown", ("h1",), True)]  # only what was started, on hosts that answer
    c = store.get_cluster("a")
    assert c.state == ClusterState.REQUESTED and "h2 lost while deploying" in store.cluster_history("a")[-1].detail
    assert {n.state for n in store.list_nodes("a", live=False)} == {NodeState.RELEASED}
    assert {h.state for h in store.list_hosts() if h.name in ("h1", "h3")} == {"free"}
    assert [j.state for j in store.list_jobs("a")] == ["queued"]  # its job waits for the next admission


def test_deploying_cluster_not_up_is_deployed_with_the_op_timeout(world):
    store, clock, driver, reconciler = world
    store.request_cluster("a", framework="spark", min_core=1)
    store.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
    store.allocate_node("a", "h1", Role.CORE)
    r = reconciler(timeouts=TimeoutsConfig(op=42))
    r.step()
    settle(r)
    assert driver.ops() == [("deploy", ("h1",), 42.0)]
    assert store.get_cluster("a").state == ClusterState.ACTIVE


def test_sync_never_blocks_behind_a_running_grow(world):
    store, clock, driver, reconciler = world
    active_cluster(store)
    gate = threading.Event()
    add = driver.add_nodes

    def slow_add(*a, **kw):
        gate.wait(10)
        return add(*a, **kw)

    driver.add_nodes = slow_add
    store.allocate_node("a", "h2", Role.TR)
    r = reconciler()
    r.step()
    assert r.busy("a", "grow")
    driver.calls.clear()
    r.step()  # the grow owns h2: not observed, not started twice
    assert driver.calls == []
    gate.set()
    settle(r)
    assert node(store, "h2").state == NodeState.RUNNING


def test_namenode_reports_dead_datanodes_decommissioned_or_not():
    """What the DRAINING sync reads: a DataNode stopped after its decommission shows up dead and
    decommissioned (Hadoop 2.7 ``NameNodeInfo.DeadNodes``), one lost without it dead only."""
    import json

    from fawkes.frameworks.metrics import parse_namenode_info

    dead = {"h2:50010": {"lastContact": 40, "decommissioned": True, "xferaddr": "10.9.0.12:50010"},
            "h3:50010": {"lastContact": 40, "decommissioned": False, "xferaddr": "10.9.0.13:50010"}}
    live = {"h1:50010": {"xferaddr": "10.9.0.11:50010", "adminState": "Decommission In Progress", "used": 5}}
    info = parse_namenode_info({"beans": [{"name": "Hadoop:service=NameNode,name=NameNodeInfo", "Safemode": "",
                                           "LiveNodes": json.dumps(live), "DeadNodes": json.dumps(dead),
                                           "DecomNodes": "{}"}]})
    assert info.dead == ("10.9.0.12", "10.9.0.13") and info.dead_decommissioned == ("10.9.0.12",)
    assert [info.admin_state(f"10.9.0.{i}") for i in (11, 12, 13, 14)] == \
        ["Decommission In Progress", "dead, decommissioned", "dead", "absent"]


def test_an_idle_active_cluster_is_reconfigured_at_start_and_then_every_drift_period(world):
    """Drift re-render: a changed setting (seen at the first step after a start) or template (seen
    within drift_every_s) reaches the hosts through the driver's reconfigure; never while the
    cluster grows, and not again before the period is over."""
    store, clock, driver, reconciler = world
    restarted: list[str] = []
    plain = driver.reconfigure
    driver.reconfigure = lambda cluster: plain(cluster) or {h: ["worker"] for h in restarted}
    active_cluster(store, "a", ("h1", "h2"))
    r = reconciler(drift_every_s=300)
    r.step()
    settle(r)
    assert driver.ops("reconfigure") == [("reconfigure", ("h1", "h2"))]
    clock.t += 299
    r.step()
    settle(r)
    assert len(driver.ops("reconfigure")) == 1  # not before the period is over
    n = store.allocate_node("a", "h3", Role.TR)  # a grow in flight: no reconfigure meanwhile
    clock.t += 2
    r.step()
    settle(r)
    assert driver.ops("add_nodes") and len(driver.ops("reconfigure")) == 1
    assert store.get_node(n.id).state == NodeState.RUNNING
    restarted[:] = ["h2"]
    r.step()
    settle(r)
    assert driver.ops("reconfigure")[-1] == ("reconfigure", ("h1", "h2", "h3"))
    assert any("configs changed, restarted h2: worker" in e.message for e in store.events(cluster="a"))


def test_a_dp_ending_between_sync_and_act_is_not_started_again(world, monkeypatch):
    """The DP of a TC node runs while a step's sync phase skips the node (its shrink busy), then ends (the
    drain wait over, HDFS going on) before that step's act phase: the act phase must not start a second DP
    of a node the sync phase did not look at this step; the next step asks HDFS and leaves it decommissioning.
    (The clean-clone CI of dd398b5: remove_nodes called twice in tests/test_reconcile_lab.py.)"""
    import threading

    store, clock, driver, reconciler = world
    draining_tc(store, "h2")
    driver.reality["h2"] = facts("h2", Role.TC)  # In Service: HDFS not told yet
    driver.decommission_done = False
    gate = threading.Event()
    real_remove = driver.remove_nodes

    def remove_nodes(cluster, names, mode=None, **kw):
        driver.reality["h2"] = facts("h2", Role.TC, worker="DECOMMISSIONED", datanode="Decommission In Progress")
        gate.wait(10)
        return real_remove(cluster, names, mode, **kw)

    monkeypatch.setattr(driver, "remove_nodes", remove_nodes)
    r = reconciler(timeouts=TimeoutsConfig(drain=5))
    r.step()  # the DP starts and waits at the gate
    assert len(driver.ops("remove_nodes")) == 0 and not r.idle()
    real_expire = r._expire_stuck

    def op_ends_now():  # between this step's sync and act: the DP ends (DecommissionTimeout)
        gate.set()
        settle(r)
        real_expire()

    monkeypatch.setattr(r, "_expire_stuck", op_ends_now)
    r.step()
    settle(r)
    monkeypatch.setattr(r, "_expire_stuck", real_expire)
    r.step()
    settle(r)
    assert len(driver.ops("remove_nodes")) == 1, driver.ops("remove_nodes")
    assert node(store, "h2").state == NodeState.DRAINING


def test_drift_checks_wait_for_a_free_worker_and_a_queued_one_gives_way_to_a_grow(world):
    """At scale the periodic drift checks of every idle cluster must not fill the operation pool
    ahead of grows (seen on the simulated fleet at 100 clusters: TC nodes requested at a tick were
    still REQUESTED when their timeout came, behind queued reconfigures, and were marked failed)."""
    store, clock, driver, reconciler = world
    gate = threading.Event()
    plain = driver.reconfigure

    def held(cluster):  # a drift check that takes the one worker until the gate opens
        if cluster.name == "a":
            gate.wait(10)
        return plain(cluster)

    driver.reconfigure = held
    active_cluster(store, "a", ("h1",))
    active_cluster(store, "b", ("h2",))
    active_cluster(store, "c", ("h3",))
    r = reconciler(workers=1, timeouts=TimeoutsConfig(requested=5))
    r.step()
    # a's check holds the only worker: b's and c's wait for a free one instead of queueing behind it
    assert r.busy("a", "reconfigure") and not r.busy("b", "reconfigure") and not r.busy("c", "reconfigure")
    r.inflight[("b", "reconfigure")] = r.pool.submit(plain, None)  # one queued anyway (as before the change)
    n = store.allocate_node("b", "h4", Role.TR)
    clock.t += 6  # past the requested timeout: b's grow is held back by its drift check only
    r.step()
    assert store.get_node(n.id).state != NodeState.FAILED  # not expired while an operation of b holds it
    assert r.busy("b", "grow")  # the queued check was cancelled, the grow took its place
    gate.set()
    settle(r)
    assert store.get_node(n.id).state == NodeState.RUNNING
    r.step()  # the checks not yet made run once a worker is free
    settle(r)
    r.step()
    settle(r)
    assert {c[1][0] for c in driver.ops("reconfigure")} >= {"h2", "h3"}


def test_a_drift_check_that_starts_after_a_node_was_allocated_touches_no_starting_node(world):
    """A drift check submitted while the cluster was settled can begin after the plan allocated a node:
    it must not write that node's files beside the grow (the clean-clone CI of adfa942: two writers of
    one temp file on the lab, ``mv: cannot stat``).  It does nothing then and runs once settled, on
    the RUNNING nodes only."""
    store, clock, driver, reconciler = world
    active_cluster(store, "a", ("h1", "h2"))
    r = reconciler(drift_every_s=300)
    n = store.allocate_node("a", "h3", Role.TR)  # allocated after the check was queued, before it began
    r._reconfigure("a")
    assert driver.ops("reconfigure") == []
    r.step()  # the grow starts h3; the check waits for it (no reconfigure while a node is in flight)
    settle(r)
    assert store.get_node(n.id).state == NodeState.RUNNING and driver.ops("reconfigure") == []
    r.step()  # settled: the check that was skipped runs now, not a drift period later
    settle(r)
    assert driver.ops("reconfigure") == [("reconfigure", ("h1", "h2", "h3"))]


def test_a_node_cancelled_while_its_grow_starts_is_left_out_of_the_grow(world):
    """A tick's plan may choose a node still REQUESTED to go: it is cancelled (RELEASED), and a grow
    already reading it starts the others (before: a refused DRAINING, the node started anyway)."""
    from fawkes.coordinator.intent import apply
    from fawkes.mechanism import Plan, Shrink, ShrinkMode

    store, clock, driver, reconciler = world
    active_cluster(store)
    a, b = store.allocate_node("a", "h2", Role.TR), store.allocate_node("a", "h3", Role.TR)
    r = reconciler()
    advance = r._advance

    def racing(node_id, to, detail):
        if node_id == a.id and to is NodeState.PROVISIONING:  # while the grow starts h2, the plan cancels h3
            assert apply(store, Plan(shrinks=(Shrink("a", "h3", Role.TR, ShrinkMode.FP),)), why="tick 2") == []
        advance(node_id, to, detail)

    r._advance = racing
    r._grow("a", [a.id, b.id])
    assert [c[1] for c in driver.ops("add_nodes")] == [("h2",)]
    assert node(store, "h2").state == NodeState.RUNNING and node(store, "h3").state == NodeState.RELEASED
    assert store.node_history(b.id)[-1].detail == "cancelled before it started (tick 2)"
