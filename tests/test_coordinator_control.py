"""The control loop's decisions on real durable state (SQLite): intent written, nothing executed.

Hosts here are inventory rows only; the reconciler (tested on the lab) carries intent out.
"""

from __future__ import annotations

import pytest

from fawkes.coordinator.control import Control
from fawkes.coordinator.view import allocation_history, build_snapshot
from fawkes.mechanism import ClusterMetrics, ClusterState, Role, Settings
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
except ImportError:  # run from the repository root
    from tests.store_fixtures import pg_server, store_url  # noqa: F401


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": f"h{i:02d}", "address": f"10.9.0.{i + 10}", "cores": 2, "memory_mb": 2048}
                      for i in range(12)])
    yield store, clock
    store.close()


def start_requested(store, name):
    """Mark the cluster's requested nodes running, as the reconciler would."""
    for n in store.list_nodes(name):
        if n.state == NodeState.REQUESTED:
            store.transition_node(n.id, NodeState.PROVISIONING)
            store.transition_node(n.id, NodeState.RUNNING)


def run_to_active(store, clock, control, names):
    """Admit and mark nodes running / clusters active as the reconciler would."""
    control.between()
    for name in names:
        start_requested(store, name)
        store.transition_cluster(name, ClusterState.ACTIVE, "no input")


def test_admission_between_ticks_allocates_core_nodes_in_fifo_order(world):
    store, clock = world
    control = Control(store, Settings(policy="TD", period_s=60), clock)
    for name in ("a", "b", "c", "d"):
        store.request_cluster(name, framework="spark", min_core=4)
    assert control.between()[1] == []
    states = {c.name: c.state for c in store.list_clusters()}
    assert states == {"a": "deploying", "b": "deploying", "c": "deploying", "d": "requested"}
    for name in ("a", "b", "c"):
        nodes = store.list_nodes(name)
        assert len(nodes) == 4 and {n.role for n in nodes} == {Role.CORE.value}
    hosts = [n.host for n in store.list_nodes()]
    assert len(hosts) == len(set(hosts)) == 12
    assert control.between()[1] == [] and store.get_cluster("d").state == "requested"  # waits for a release


def test_tick_grows_the_loaded_cluster_and_records_why(world):
    store, clock = world
    control = Control(store, Settings(policy="TD", period_s=60, grow_type=Role.TR), clock)
    store.request_cluster("busy", framework="spark", min_core=3)
    store.request_cluster("idle", framework="spark", min_core=3)
    run_to_active(store, clock, control, ["busy", "idle"])
    for t in (1010, 1020, 1030):
        store.record_sample("busy", ClusterMetrics(time=t, unfinished_jobs=2, pending_tasks=40))
        store.record_sample("idle", ClusterMetrics(time=t, unfinished_jobs=0))
    clock.t = 1060
    tick, d, problems = control.tick()
    assert problems == []
    assert d.gate_open and d.targets == {"busy": 9, "idle": 3}
    nodes = store.list_nodes("busy")
    grown = [n for n in nodes if n.state == NodeState.REQUESTED]
    assert len(grown) == 6 and {n.role for n in grown} == {Role.TR.value}
    assert not store.free_hosts()
    stored = store.decision(tick)
    assert stored.weights == pytest.approx({"busy": 1.0, "idle": 0.0})
    assert "rebalance" in stored.reason and "busy +6" in stored.reason
    # the preview of the next tick changes nothing
    before = [(n.id, n.state) for n in store.list_nodes()]
    control.preview()
    assert [(n.id, n.state) for n in store.list_nodes()] == before


def test_shrink_marks_victims_draining_and_never_core(world):
    store, clock = world
    control = Control(store, Settings(policy="TD", period_s=60, grow_type=Role.TC), clock)
    store.request_cluster("a", framework="spark", min_core=3)
    store.request_cluster("b", framework="spark", min_core=3)
    run_to_active(store, clock, control, ["a", "b"])
    store.record_sample("a", ClusterMetrics(time=1010, unfinished_jobs=1, pending_tasks=60))
    clock.t = 1060
    control.tick()  # a takes the 6 free hosts as TC
    start_requested(store, "a")
    for t in (1070, 1090, 1110):
        store.record_sample("a", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=10))
        store.record_sample("b", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=10))
    clock.t = 1120
    _, d, problems = control.tick()
    assert problems == [] and d.targets == {"a": 6, "b": 6}
    draining = [n for n in store.list_nodes("a") if n.state == NodeState.DRAINING]
    assert len(draining) == 3 and all(n.role == Role.TC.value for n in draining)
    assert all(n.role == Role.CORE.value for n in store.list_nodes("a") if n.state == NodeState.RUNNING
               and n.requested_at < 1060)
    # draining nodes still count for a until released; b grows only into free hosts (none yet)
    snap = build_snapshot(store, control.settings, clock())
    assert snap.cluster("a").held == 9 and snap.cluster("a").settled == 6
    assert not [n for n in store.list_nodes("b") if n.state == NodeState.REQUESTED]
    for n in draining:
        store.transition_node(n.id, NodeState.RELEASED, "decommissioned")
    clock.t = 1130
    control.between()  # refill: b grows into the released hosts towards its standing target
    assert len([n for n in store.list_nodes("b") if n.state == NodeState.REQUESTED]) == 3


def test_shrink_votes_survive_in_the_store_between_ticks(world):
    """shrink_after_ticks=2: the first tick that wants a smaller only records a vote (in the decision),
    the next tick reads it back from the store and shrinks; a restarted Control sees the same votes."""
    store, clock = world
    settings = Settings(policy="TD", period_s=60, grow_type=Role.TC, shrink_after_ticks=2)
    control = Control(store, settings, clock)
    store.request_cluster("a", framework="spark", min_core=3)
    store.request_cluster("b", framework="spark", min_core=3)
    run_to_active(store, clock, control, ["a", "b"])
    store.record_sample("a", ClusterMetrics(time=1010, unfinished_jobs=1, pending_tasks=60))
    clock.t = 1060
    control.tick()  # a grows into the 6 free hosts at once
    start_requested(store, "a")

    def quiet_a_busy_b(t0):
        for t in (t0 + 10, t0 + 30, t0 + 50):
            store.record_sample("a", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=10))
            store.record_sample("b", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=10))

    quiet_a_busy_b(1060)
    clock.t = 1120
    _, d, _ = control.tick()
    assert d.shrink_votes == {"a": 1} and d.targets == {"a": 9, "b": 3}
    assert not [n for n in store.list_nodes("a") if n.state == NodeState.DRAINING]
    since = build_snapshot(store, settings, clock()).cluster("a").since
    assert control.memory().of("a", since).shrink_votes == 1
    quiet_a_busy_b(1120)
    clock.t = 1180
    _, d, _ = Control(store, settings, clock).tick()  # a fresh Control: the vote comes from the store
    assert d.shrink_votes == {} and d.targets == {"a": 6, "b": 6}
    assert len([n for n in store.list_nodes("a") if n.state == NodeState.DRAINING]) == 3


def test_cap_to_demand_counts_a_host_core_as_one_task_slot(world):
    """Spark workers offer their host's cores (templates: SPARK_WORKER_CORES), so 10 tasks on 2-core
    hosts need 5 nodes: a (min 3) grows by 2, not into all 9 free hosts."""
    store, clock = world
    settings = Settings(policy="TD", period_s=60, grow_type=Role.TR, cap_to_demand=True)
    control = Control(store, settings, clock)
    store.request_cluster("a", framework="spark", min_core=3)
    run_to_active(store, clock, control, ["a"])
    store.record_sample("a", ClusterMetrics(time=1010, unfinished_jobs=1, pending_tasks=6, running_tasks=4))
    clock.t = 1060
    assert build_snapshot(store, settings, clock()).cluster("a").slots_per_node == 2
    _, d, _ = control.tick()
    assert d.targets == {"a": 5} and len(d.plan.grows) == 2


def test_an_interval_without_samples_keeps_the_last_sample(world):
    """Seen in the demo: the sampler got no sample of the loaded cluster in one interval (slow SSH)
    and the tick read that as zero demand and shrank it.  The latest earlier sample stands in."""
    store, clock = world
    control = Control(store, Settings(policy="TD", period_s=60, grow_type=Role.TC), clock)
    store.request_cluster("a", framework="spark", min_core=3)
    store.request_cluster("b", framework="spark", min_core=3)
    run_to_active(store, clock, control, ["a", "b"])
    store.record_sample("a", ClusterMetrics(time=1010, unfinished_jobs=1, pending_tasks=60))
    store.record_sample("b", ClusterMetrics(time=1010, unfinished_jobs=0))
    clock.t = 1060
    control.tick()
    start_requested(store, "a")
    store.record_sample("b", ClusterMetrics(time=1100, unfinished_jobs=1, pending_tasks=1))
    clock.t = 1120  # nothing from a in (1060, 1120]
    assert [m.pending_tasks for m in build_snapshot(store, control.settings, clock()).cluster("a").samples] == [60]
    _, d, _ = control.tick()
    assert d.targets == {"a": 9, "b": 3} and not d.plan.shrinks


def test_allocation_history_from_node_lifetimes():
    class N:
        def __init__(self, a, r=None):
            self.requested_at, self.released_at = a, r

    nodes = [N(0), N(0), N(50, 70), N(80), N(10, 20)]
    assert allocation_history(nodes, 40) == ((40, 2), (50, 3), (70, 2), (80, 3))


def test_admission_reclaim_survives_until_the_freed_hosts_reach_the_admitted_cluster(store_url):
    """Issue 13, 3a: 8 hosts, TD, TC growth, T = 60 s, tau = 0; a and b (min 2) active, a grown to 6.
    c (min 4) is admitted by reclaiming a's 4 TC nodes; once they are released, the next between()
    gives them to c, not back to a (the reclaim lowered a's standing target in the stored memory)."""
    clock = Clock()
    store = Store(store_url, clock=clock)
    try:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 2} for i in range(8)])
        settings = Settings(policy="TD", grow_type=Role.TC, period_s=60, tau=0)
        control = Control(store, settings, clock)
        for name in ("a", "b"):
            store.request_cluster(name, framework="spark", min_core=2)
        run_to_active(store, clock, control, ["a", "b"])
        store.record_sample("a", ClusterMetrics(time=1030, unfinished_jobs=1, pending_tasks=100))
        store.record_sample("b", ClusterMetrics(time=1030))
        clock.t = 1060
        _, d, _ = control.tick()
        assert d.targets == {"a": 6, "b": 2} and len(d.plan.grows) == 4
        start_requested(store, "a")
        clock.t = 1070
        store.request_cluster("c", framework="spark", min_core=4)
        b, problems = control.between()
        assert problems == [] and b.admission.admitted == ("c",) and b.admission.reclaim == {"a": 4}
        assert Control(store, settings, clock).memory().of("a", store.get_cluster("a").requested_at).target == 2
        draining = [n for n in store.list_nodes("a") if n.state == NodeState.DRAINING]
        assert len(draining) == 4 and all(n.role == Role.TC for n in draining)
        clock.t = 1090
        for n in draining:  # DP done: the reconciler releases them
            store.transition_node(n.id, NodeState.RELEASED, "decommissioned (DP)")
        _, problems = Control(store, settings, clock).between()  # a restarted coordinator: same memory
        assert problems == []
        assert sorted((n.role, n.state) for n in store.list_nodes("c")) == [(Role.CORE, NodeState.REQUESTED)] * 4
        assert len(store.list_nodes("a")) == 2
    finally:
        store.close()


def test_a_chapter2_runner_policy_runs_in_the_coordinator(world):
    """A config naming GS gets a Control whose ticks are offer rounds: a cluster whose sample shows
    demand over 1.5x its slots takes delta+ = 5 transient nodes; the decision is recorded."""
    from fawkes.config import CoordinatorConfig
    from fawkes.config import loop_policy

    store, clock = world
    settings, runner = loop_policy(CoordinatorConfig(policy="gs"))
    assert runner is not None and runner.policy == "GS" and settings.period_s == runner.offer_period_s == 30
    control = Control(store, settings, clock, runner=runner)
    store.request_cluster("a", framework="spark", min_core=2)
    run_to_active(store, clock, control, ["a"])
    store.record_sample("a", ClusterMetrics(time=1020, unfinished_jobs=1, pending_tasks=40, running_tasks=4))
    clock.t = 1030
    tick, d, problems = control.tick()
    assert problems == [] and d.policy == "GS" and "grow 5" in d.reason
    assert [(g.cluster, g.role) for g in d.plan.grows] == [("a", Role.TR)] * 5
    assert store.decision(tick).plan["grows"][0]["role"] == "transient"
    start_requested(store, "a")
    store.record_sample("a", ClusterMetrics(time=1050))  # the workload is done: GS shrinks by delta- = 2
    clock.t = 1060
    _, d, _ = control.tick()
    assert [(s.cluster, s.mode.value) for s in d.plan.shrinks] == [("a", "FP")] * 2


def test_a_takeover_decides_on_the_last_periods_samples_before_sampling_again(tmp_path):
    """A standby taking over (its first tick due at once, samples of the last T in the state) ticks before it
    samples every cluster again; on a state without fresh samples, or whose last decision is recent, the
    samples come first (the real service loop, APScheduler, one worker thread)."""
    import time

    from fawkes.config import load_config
    from fawkes.coordinator.service import build

    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inventory.yaml").write_text(
        "known_hosts: known_hosts\nhosts:\n  - {name: x1, address: 192.0.2.1, cores: 1}\n")
    (tmp_path / "config.yaml").write_text("state: state.db\ninventory: inventory.yaml\npolicy: td-tc\nperiod: 2\n"
                                          "sample_period: 1\n")
    cfg = load_config(tmp_path / "config.yaml")
    now = time.time()
    with Store(cfg.state_url()) as s:
        s.register_framework("spark", "spark-hdfs", spark_home="/opt/spark")
        s.sync_hosts([{"name": "x1", "cores": 1}])
        s.request_cluster("c", framework="spark", min_core=1)
        s.record_sample("c", ClusterMetrics(time=now - 60))
        s.record_decision(policy="TD", inputs={}, weights={}, discriminations={}, global_factor=0.0,
                          gate_open=False, targets={}, plan={}, reason="the dead leader's", time=now - 30)
    coord = build(cfg)
    try:
        assert not coord.tick_first(time.time())  # the newest sample older than 2 T: sample first
        coord.store.record_sample("c", ClusterMetrics(time=time.time() - 3.5))
        assert coord.tick_first(time.time())  # within 2 T (T = 2 s): the snapshot reads it
        assert not coord.tick_first(now - 29)  # the last decision under T ago: its tick is not due yet
        coord.store.record_sample("c", ClusterMetrics(time=time.time()))  # fresh for the run below, however slow
        order: list[str] = []
        for step in ("sample", "tick", "fast"):
            real = getattr(coord, step)
            setattr(coord, step, lambda real=real, step=step: (order.append(step), real()))
        coord.run(duration_s=0.8)
        assert order[:3] == ["tick", "fast", "sample"], order
    finally:
        coord.store.close()
