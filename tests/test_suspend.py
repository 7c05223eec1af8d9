"""``shrink_mode: suspend`` in the coordinator: the node lifecycle (SUSPENDED, LENT), the accounting in
the snapshot and the reconciler's steps, on real durable state (SQLite) and real cgroups of this
machine: each "host" is a directory with a daemon control script whose worker is a real process
tree, and the suspension scripts run through ``sh`` exactly as they run over SSH.  The framework
driver is the scripted one of tests/test_reconcile.py (the same steps on real Spark:
tests/test_suspend_lab.py).  Config validation of ``shrink_mode`` and ``suspend`` at the end."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fawkes.config import CoordinatorConfig, load_config
from fawkes.coordinator.suspend import group, suspension_gaps
from fawkes.coordinator.view import allocation_history, build_snapshot
from fawkes.errors import ConfigError, FawkesError
from fawkes.frameworks.spec import NodeSpec
from fawkes.mechanism import ClusterState, Role, Settings
from fawkes.ssh.cgroups import resume_script
from fawkes.ssh.shell import render
from fawkes.store import Store
from fawkes.store.lifecycle import HostState, NodeState
from tests.conftest import run_cli
from tests.local_executor import LocalExecutor
from tests.test_reconcile import Clock, ScriptedDriver, ScriptedFleet, active_cluster, settle
from tests.test_suspend_cgroups import cpu_ticks, descendants, runs_again

N = NodeState
needs_cgroups = pytest.mark.usefixtures("root_and_cgroups")  # conftest: fails under CI, skips elsewhere

CONTROL = r"""#!/bin/sh
# a daemon control script with a worker only (the real one: templates/spark-hdfs/fawkes-daemon.sh.j2)
D=$(cd "$(dirname "$0")/.." && pwd)
pid() { p=$(cat "$D/pids/worker.pid" 2>/dev/null) && kill -0 "$p" 2>/dev/null && echo "$p"; }
case "$1" in
  status) if p=$(pid); then echo "worker running $p"; else echo "worker stopped -"; fi ;;
  wipe) if p=$(pid); then kill -9 "$p"; fi; rm -rf "$D"; echo "wiped $D" ;;
esac
"""


class LocalFleet(ScriptedFleet):
    def __init__(self, store, driver, root: Path):
        super().__init__(store, driver)
        self.ex = LocalExecutor()
        self.root = root

    def node_spec(self, host, role):
        return NodeSpec(host, f"10.9.0.{int(host[1:]) + 10}", Role(role), str(self.root / host))


class Workers:
    """Real worker process trees (a shell with a busy child and a sleeping one) per (cluster, host)."""

    def __init__(self, root: Path):
        self.root, self.procs = root, {}

    def start(self, cluster: str, host: str) -> int:
        d = self.root / host / "clusters" / cluster
        (d / "bin").mkdir(parents=True, exist_ok=True)
        (d / "pids").mkdir(exist_ok=True)
        (d / "bin" / "fawkes-daemon.sh").write_text(CONTROL)
        p = subprocess.Popen(["sh", "-c", "while :; do :; done & sleep 600 & wait"], start_new_session=True)
        (d / "pids" / "worker.pid").write_text(f"{p.pid}\n")
        self.procs[(cluster, host)] = p
        time.sleep(0.2)
        return p.pid

    def stop_all(self):
        for p in self.procs.values():
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait()


@pytest.fixture
def world(tmp_path):
    from fawkes.coordinator.reconcile import Reconciler

    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 1, "memory_mb": 1024}
                      for i in range(1, 7)])
    driver = Driver()
    workers = Workers(tmp_path / "hosts")
    fleet = LocalFleet(store, driver, tmp_path / "hosts")
    r = Reconciler(store, fleet, clock=clock, shrink_mode="suspend")
    yield store, clock, driver, r, workers
    r.shutdown(5)
    for (c, h) in list(workers.procs):
        subprocess.run(["sh", "-c", render(resume_script(group(c, h)))])
    workers.stop_all()
    store.close()


def host_state(store, name: str) -> str:
    return next(h.state for h in store.list_hosts() if h.name == name)


class Driver(ScriptedDriver):
    def save_output(self, cluster, src, dest, *, timeout=600.0):
        self.calls.append(("save_output", src))

    def teardown(self, cluster, *, wipe=True, timeout=120.0):
        self.calls.append(("teardown", tuple(n.name for n in cluster.nodes)))


def tr_node(store, cluster: str, host: str):
    n = store.allocate_node(cluster, host, Role.TR)
    store.transition_node(n.id, N.PROVISIONING)
    return store.transition_node(n.id, N.RUNNING)


def step(r, clock, dt: float = 1.0):
    clock.t += dt
    r.step()
    settle(r, 30)


SETTINGS = Settings(period_s=60.0)


@needs_cgroups
def test_suspend_lend_give_back_resume(world):
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    active_cluster(store, "b", ("h3",))
    a2 = tr_node(store, "a", "h2")
    pid = workers.start("a", "h2")
    procs = descendants(pid)
    before = {p: Path(f"/proc/{p}/cgroup").read_text() for p in procs}
    t_shrink = clock.t + 1
    clock.t = t_shrink
    store.transition_node(a2.id, N.DRAINING, "FP (tick 1)")  # the plan's intent, as for any shrink
    r.step()
    settle(r, 30)
    n = store.get_node(a2.id)
    assert n.state == N.SUSPENDED and n.holds_host is None
    assert host_state(store, "h2") == HostState.FREE  # lendable
    assert not driver.ops("remove_nodes"), "a suspended worker is not stopped"
    name = group("a", "h2")
    for p in procs:  # every process of the worker's tree in the group, nothing else
        assert name in Path(f"/proc/{p}/cgroup").read_text()
    busy = max(procs, key=cpu_ticks)
    t0 = cpu_ticks(busy)
    time.sleep(1.0)
    assert cpu_ticks(busy) - t0 <= 6  # 1 % of one CPU: about 1 tick a second
    hist = store.node_history(a2.id)
    assert hist[-1].to_state == N.SUSPENDED and "processes of the worker" in hist[-1].detail
    st = {c["name"]: c for c in store.status()["clusters"]}  # fawkes status and the dashboard show it
    assert (st["a"]["held"], st["a"]["suspended"], st["b"]["suspended"]) == (1, 1, 0), st

    # the snapshot: A no longer counts h2 (nodes, history), h2 is a free host
    clock.t += 30
    snap = build_snapshot(store, SETTINGS, clock.t)
    a = snap.cluster("a")
    assert [v.id for v in a.nodes] == ["h1"] and "h2" in snap.free_hosts
    assert a.allocation[-1] == (t_shrink, 1), a.allocation

    # B grows onto the lent host: A's node LENT, B's counts for B
    t_lend = clock.t + 1
    clock.t = t_lend
    b2 = store.allocate_node("b", "h2", Role.TR, detail="transient for b (tick 2)")
    r.step()
    settle(r, 30)
    assert store.get_node(a2.id).state == N.LENT
    st = {c["name"]: c for c in store.status()["clusters"]}
    assert (st["a"]["held"], st["a"]["suspended"], st["b"]["held"]) == (1, 1, 2), st
    assert store.get_node(b2.id).state == N.RUNNING and ("add_nodes", ("h2",)) in [c[:2] for c in driver.ops()]
    clock.t += 10
    snap = build_snapshot(store, SETTINGS, clock.t)
    assert sorted(v.id for v in snap.cluster("b").nodes) == ["h2", "h3"]
    assert [v.id for v in snap.cluster("a").nodes] == ["h1"] and "h2" not in snap.free_hosts
    assert snap.capacity == 6 and sum(c.held for c in snap.clusters) == 3

    # B's node on the lent host is never suspended in turn: FP, even under shrink_mode suspend
    clock.t += 1
    store.transition_node(b2.id, N.DRAINING, "FP (tick 3)")
    r.step()
    settle(r, 30)
    assert store.get_node(b2.id).state == N.RELEASED
    assert [c[:2] for c in driver.ops("remove_nodes")] == [("remove_nodes", ("h2",))]
    assert host_state(store, "h2") == HostState.FREE  # given back
    # the next step resumes A's worker: A's node holds its host again, every process back where it was
    t_back = clock.t + 1
    step(r, clock)
    n = store.get_node(a2.id)
    assert n.state == N.RUNNING and n.holds_host == "h2"
    assert host_state(store, "h2") == HostState.ALLOCATED
    assert {p: Path(f"/proc/{p}/cgroup").read_text() for p in procs} == before
    assert runs_again(busy)
    # A's history: held, suspended (gap), held again
    gaps = suspension_gaps(store, [a2.id], t_shrink - 10)
    assert gaps == {a2.id: [(t_shrink, t_back)]}
    snap = build_snapshot(store, SETTINGS, clock.t + 1)
    assert snap.cluster("a").allocation[-2:] == ((t_shrink, 1), (t_back, 2))
    assert sorted(v.id for v in snap.cluster("a").nodes) == ["h1", "h2"]
    states = [t.to_state for t in store.node_history(a2.id)]
    assert states == [N.REQUESTED, N.PROVISIONING, N.RUNNING, N.DRAINING, N.SUSPENDED, N.LENT, N.RUNNING], states


@needs_cgroups
def test_own_grow_onto_its_suspended_host_resumes_instead_of_starting_a_worker(world):
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    a2 = tr_node(store, "a", "h2")
    workers.start("a", "h2")
    store.transition_node(a2.id, N.DRAINING)
    step(r, clock)
    assert store.get_node(a2.id).state == N.SUSPENDED
    again = store.allocate_node("a", "h2", Role.TR)  # the plan grows A onto the free host h2
    step(r, clock)
    assert store.get_node(again.id).state == N.RELEASED
    n = store.get_node(a2.id)
    assert n.state == N.RUNNING and n.holds_host == "h2"
    assert not driver.ops("add_nodes"), "no second worker started"


@needs_cgroups
def test_own_new_node_already_starting_on_the_host_takes_the_worker_over(world):
    """A race (or a restart) let the cluster's new node on its own suspended host start: the suspended
    worker is thawed and belongs to the new node; the suspended node is dropped, the host stays held."""
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    a2 = tr_node(store, "a", "h2")
    pid = workers.start("a", "h2")
    before = Path(f"/proc/{pid}/cgroup").read_text()
    store.transition_node(a2.id, N.DRAINING)
    step(r, clock)
    assert store.get_node(a2.id).state == N.SUSPENDED
    new = store.allocate_node("a", "h2", Role.TR)
    store.transition_node(new.id, N.PROVISIONING)
    step(r, clock)
    assert store.get_node(a2.id).state == N.RELEASED and store.get_node(new.id).state == N.RUNNING
    assert "took the worker over" in store.node_history(a2.id)[-1].detail
    assert Path(f"/proc/{pid}/cgroup").read_text() == before and host_state(store, "h2") == HostState.ALLOCATED


@needs_cgroups
def test_teardown_stops_a_lent_worker_and_leaves_the_borrower(world):
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    active_cluster(store, "b", ("h3",))
    a2 = tr_node(store, "a", "h2")
    pid = workers.start("a", "h2")
    store.transition_node(a2.id, N.DRAINING)
    step(r, clock)
    b2 = tr_node(store, "b", "h2")
    step(r, clock)
    assert store.get_node(a2.id).state == N.LENT
    store.request_release("a")
    for _ in range(4):
        step(r, clock)
    assert store.get_node(a2.id).state == N.RELEASED
    assert store.get_cluster("a").state == ClusterState.RELEASED
    assert store.get_node(b2.id).state == N.RUNNING and host_state(store, "h2") == HostState.ALLOCATED
    workers.procs[("a", "h2")].wait(timeout=10)  # thawed and stopped
    assert not Path(f"/proc/{pid}").exists()


def test_a_node_that_cannot_be_suspended_goes_by_fp(world):
    """No worker process on the host (nothing to suspend): the node is removed by FP as before."""
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    a2 = tr_node(store, "a", "h2")
    store.transition_node(a2.id, N.DRAINING)
    step(r, clock)
    assert store.get_node(a2.id).state == N.RELEASED
    assert [c[:3] for c in driver.ops("remove_nodes")] == [("remove_nodes", ("h2",), None)]
    assert any("suspend failed, FP instead" in e.message for e in store.events(limit=50))


def test_lifecycle_refuses_edges_outside_the_table(world):
    store, clock, driver, r, workers = world
    active_cluster(store, "a", ("h1",))
    a2 = tr_node(store, "a", "h2")
    with pytest.raises(FawkesError, match="running -> suspended not allowed"):
        store.transition_node(a2.id, N.SUSPENDED)
    with pytest.raises(FawkesError, match="running -> lent not allowed"):
        store.transition_node(a2.id, N.LENT)


def test_allocation_history_leaves_out_suspended_stretches():
    class Row:
        def __init__(self, i, req, rel=None):
            self.id, self.requested_at, self.released_at = i, req, rel

    rows = [Row(1, 0), Row(2, 10)]
    assert allocation_history(rows, 40) == ((40, 2),)
    assert allocation_history(rows, 40, gaps={2: [(50, 70)]}) == ((40, 2), (50, 1), (70, 2))
    assert allocation_history(rows, 40, gaps={2: [(30, None)]}) == ((40, 1),)


# ---------------------------------------------------------------------- config
def write(tmp_path, text: str) -> Path:
    p = tmp_path / "coordinator.yaml"
    p.write_text(text)
    return p


def test_shrink_mode_suspend_and_its_footprint_from_the_file(tmp_path):
    assert CoordinatorConfig().shrink_mode is None  # the kind's default (spark-hdfs: fp): changes nothing
    cfg = load_config(write(tmp_path, "shrink_mode: suspend\n"
                                      "suspend: {cpu_percent: 2.5, memory_mb: 0, freeze: true}\n"))
    assert cfg.shrink_mode == "suspend"
    f = cfg.suspend.footprint()
    assert (f.cpu_percent, f.memory_mb, f.freeze, f.quota_us()) == (2.5, 0, True, 2500)
    d = CoordinatorConfig().suspend.footprint()
    assert (d.cpu_percent, d.memory_mb, d.freeze) == (1.0, 64, False)


@pytest.mark.parametrize("text, line, field, message", [
    ("suspend:\n  cpu_percent: .nan\n", 2, "suspend.cpu_percent", "finite number"),
    ("suspend:\n  cpu_percent: .inf\n", 2, "suspend.cpu_percent", "finite number"),
    ("suspend:\n  cpu_percent: -1\n", 2, "suspend.cpu_percent", "greater than or equal to 1"),
    ("suspend:\n  cpu_percent: 0.5\n", 2, "suspend.cpu_percent", "greater than or equal to 1"),
    ("suspend:\n  cpu_percent: 101\n", 2, "suspend.cpu_percent", "less than or equal to 100"),
    ("suspend:\n  cpu_percent: '1'\n", 2, "suspend.cpu_percent", "valid number"),
    ("suspend:\n  cpu_percent: true\n", 2, "suspend.cpu_percent", "valid number"),
    ("suspend:\n  memory_mb: -64\n", 2, "suspend.memory_mb", "greater than or equal to 0"),
    ("suspend:\n  memory_mb: 64.5\n", 2, "suspend.memory_mb", "valid integer"),
    ("suspend:\n  memory_mb: 1e30\n", 2, "suspend.memory_mb", "valid integer"),
    ("suspend:\n  freeze: 'yes'\n", 2, "suspend.freeze", "valid boolean"),
    ("suspend:\n  freeze: 1\n", 2, "suspend.freeze", "valid boolean"),
    ("suspend:\n  cpu: 1\n", 2, "suspend.cpu", "unknown field"),
    ("suspend: 1\n", 1, "suspend", "valid dictionary"),
    ("shrink_mode: suspended\n", 1, "shrink_mode", "'fp', 'graceful' or 'suspend'"),
])
def test_bad_suspend_settings_are_refused_naming_the_key(tmp_path, text, line, field, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}: {field}: ") and message in msg and "\n" not in msg, msg


def test_coordinator_run_refuses_a_bad_footprint_with_exit_2_writing_nothing(tmp_path):
    p = write(tmp_path, "state: state.db\nshrink_mode: suspend\nsuspend:\n  cpu_percent: .nan\n")
    r = run_cli("coordinator", "run", "--config", str(p), "--no-metrics", "--for", "1")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{p}:4: suspend.cpu_percent: " in lines[0], r.stderr
    assert not (tmp_path / "state.db").exists()


def test_build_passes_shrink_mode_suspend_and_the_footprint_to_the_reconciler(tmp_path):
    from fawkes.coordinator.service import build

    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inventory.yaml").write_text(
        "known_hosts: known_hosts\nhosts:\n  - {name: x1, address: 192.0.2.1, cores: 1}\n")
    cfg = load_config(write(tmp_path, "state: state.db\ninventory: inventory.yaml\nshrink_mode: suspend\n"
                                      "suspend: {cpu_percent: 3, freeze: true}\n"))
    coord = build(cfg)
    try:
        r = coord.reconciler
        assert r.shrink_mode == "suspend"
        assert (r.suspender.footprint.cpu_percent, r.suspender.footprint.freeze) == (3, True)
    finally:
        coord.close(0)
        coord.store.close()
