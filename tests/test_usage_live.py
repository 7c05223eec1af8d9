"""CERES live (issue 11 item 4): the sampler reads every running node's host with the collector
(fawkes/coordinator/usage.py), one command per host per sample, into one window per node, and the
coordinator's snapshot carries the result as ``NodeView.usage``; the decision then takes an idle
swollen node first (C-1).  On real durable state (SQLite) and real cgroups of this machine: each
"host" is a cgroup with a CPU quota and a memory limit, and the collector's script runs in it
through ``sh`` exactly as it runs over SSH (the same over real SSH on lab hosts:
tests/test_usage_lab.py)."""

from __future__ import annotations

import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from fawkes.coordinator import usage
from fawkes.coordinator.control import Control
from fawkes.coordinator.sampler import Sampler
from fawkes.coordinator.usage import NodeWindows
from fawkes.coordinator.view import Signals, build_snapshot
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterMetrics, ClusterState, Role, Settings, controller
from fawkes.mechanism.memory import Memory
from fawkes.mechanism.model import NodeUsage
from fawkes.ssh.executor import Result
from fawkes.ssh.shell import render
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState
from tests.conftest import unavailable
from tests.test_reconcile import active_cluster

HUNG = ["sh", "-c", "exec sleep 30", "hung"]  # a host that never answers in time


class GroupExecutor:
    """Runs each host's command here with sh inside that host's cgroups (``prefixes``): the text the
    SSH executor would send, bounded by the timeout as the executor bounds it."""

    def __init__(self, prefixes: dict[str, list[str]]):
        self.prefixes = prefixes
        self.commands: list[tuple[str, str]] = []

    def run(self, hosts, command, *, timeout=None):
        out = {}
        for h in ([hosts] if isinstance(hosts, str) else hosts):
            text = render(command)
            self.commands.append((h, text))
            t0 = time.monotonic()
            try:
                r = subprocess.run([*self.prefixes[h], "sh", "-c", text], capture_output=True, text=True,
                                   timeout=timeout or 60, start_new_session=True)
            except subprocess.TimeoutExpired:
                out[h] = Result(h, False, None, "", "", f"timeout after {timeout:g}s", time.monotonic() - t0)
                continue
            out[h] = Result(h, r.returncode == 0, r.returncode, r.stdout, r.stderr,
                            None if r.returncode == 0 else f"exit {r.returncode}", time.monotonic() - t0)
        return out

    def scripts(self) -> list[str]:
        """Hosts the usage script ran on, in order."""
        return [h for h, text in self.commands if text == render(usage.COMMAND)]


@pytest.fixture
def hosts():
    """Five "hosts": real cgroups of 0.5 cores and 256 MiB each; a busy loop in h1 and h2."""
    if os.geteuid() != 0:
        unavailable("needs root to create cgroups")
    from fawkes.lab import cgroup

    prefix = f"usagelive{os.getpid()}"
    try:
        enter = {f"h{i}": cgroup.enter(cgroup.create(prefix, f"h{i}", cpus=0.5, memory_mb=256)) for i in range(1, 6)}
    except FawkesError as exc:
        unavailable(f"no cgroup with limits here: {exc}")
    busy = [subprocess.Popen(enter[h] + ["sh", "-c", "while :; do :; done"]) for h in ("h1", "h2")]
    try:
        yield enter
    finally:
        for p in busy:
            p.kill()
            p.wait()
        time.sleep(0.2)
        cgroup.remove(prefix)


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def world(tmp_path, clock):
    """A (busy: core h1, transient h2 running a task), B (idle: core h3, transient h4), C (core h5,
    4 pending tasks): TD gives each of A and B one node, C three; C needs one more node (its demand,
    ceil(4 / 2 slots)), no host is free, and A and B have one node of surplus each."""
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 2, "memory_mb": 256}
                      for i in range(1, 6)])
    for name, core, tr in (("A", "h1", ("h2",)), ("B", "h3", ("h4",)), ("C", "h5", ())):
        active_cluster(store, name, (core,), tr)
        clock.t += 1
    store.update_node(next(n.id for n in store.list_nodes("A") if n.host == "h2"), running_tasks=1)
    for t in (clock.t + 10, clock.t + 20):
        store.record_sample("A", ClusterMetrics(time=t, unfinished_jobs=1, running_tasks=1))
        store.record_sample("B", ClusterMetrics(time=t, unfinished_jobs=1, running_tasks=1))
        store.record_sample("C", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=4))
    clock.t += 30
    return store


CERES = dict(policy="TD", period_s=60.0, sample_period_s=5.0, tau=0.0, grow_type=Role.TR,
             shrink_amount="demand_capped", swollen_threshold=0.5, usage_window_s=1.0)


def test_windows_one_reading_per_host_and_a_failing_host_is_unknown(hosts):
    ex = GroupExecutor({"h1": hosts["h1"], "h3": hosts["h3"], "h4": HUNG})
    w = NodeWindows(1.0, timeout=2.0)
    nodes = {1: "h1", 2: "h3", 3: "h4"}
    t0 = time.monotonic()
    errors = w.step(ex, nodes)
    assert set(errors) == {"h4"} and "timeout after 2s" in errors["h4"]
    assert w.usage() == {}  # CPU needs two readings
    time.sleep(1.5)
    w.step(ex, nodes)
    took = time.monotonic() - t0
    assert ex.scripts() == ["h1", "h3", "h4"] * 2 and w.reads == 6  # one command per host per step
    got = w.usage()
    assert set(got) == {1, 2}  # h4 unknown: no window, no usage
    busy, idle = got[1], got[2]
    print(f"\nbusy group (0.5 cores, busy loop): {busy}; idle group: {idle}; 2 steps with a hung host: {took:.1f} s")
    assert busy.cpu_max > 0.3 and idle.cpu_max < 0.2 and busy.window_s >= 1.0 and 0 < idle.mem_max < 0.5
    assert took < 20  # bounded: each step waits at most the timeout for the hung host

    # the host answers again: a fresh window (two readings) before it has a usage; a node gone: dropped
    ex.prefixes["h4"] = hosts["h4"]
    w.step(ex, {1: "h1", 3: "h4"})
    assert set(w.usage()) == {1}
    time.sleep(1.1)
    w.step(ex, {1: "h1", 3: "h4"})
    assert set(w.usage()) == {1, 3} and set(w.windows) == {1, 3}
    w.step(ex, {1: "h2"})  # node 1 now names another host: a new node's window
    assert w.usage() == {}


def test_an_executor_that_fails_as_a_whole_leaves_every_host_unknown():
    class Broken:
        def run(self, hosts, command, *, timeout=None):
            raise FawkesError("ssh: the connection pool is closed")

    w = NodeWindows(60.0)
    assert w.step(Broken(), {1: "h1", 2: "h2"}) == {
        "h1": "h1: cannot read CPU and memory use: ssh: the connection pool is closed",
        "h2": "h2: cannot read CPU and memory use: ssh: the connection pool is closed"}
    assert w.usage() == {}


def test_with_ceres_off_the_sampler_runs_no_usage_command(tmp_path, hosts):
    clock = Clock()
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": "h1", "address": "10.9.0.11", "cores": 2, "memory_mb": 256}])
    store.request_cluster("A", framework="spark", min_core=1)
    store.transition_cluster("A", ClusterState.DEPLOYING, "admitted")  # deploying: not sampled, its node held
    n = store.allocate_node("A", "h1", Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    for settings, scripts in ((Settings(policy="TD"), 0), (Settings(policy="TD", swollen_threshold=0.5), 1),
                              (Settings(policy="TD", straggler_factor=2.0), 0)):
        ex = GroupExecutor({"h1": hosts["h1"]})
        sampler = Sampler(store, SimpleNamespace(ex=ex), None, settings, clock=clock)
        sampler.step()
        assert len(ex.scripts()) == scripts and [h for h, t in ex.commands if t == "true"] == ["h1"], settings
        assert (sampler.windows is None) == (settings.swollen_threshold is None)
        assert sampler.signals() == Signals()
    store.close()


def test_the_coordinator_takes_the_idle_swollen_node_first(tmp_path, hosts):
    """The sampler's readings (real cgroups) reach the coordinator's snapshot; the tick's plan takes
    B's idle swollen transient node instead of A's busy one, which it takes without the signal."""
    clock = Clock()
    store = world(tmp_path, clock)
    settings = Settings(**CERES)
    ex = GroupExecutor(hosts | {"h5": HUNG})
    sampler = Sampler(store, SimpleNamespace(ex=ex), None, settings, clock=clock)
    sampler.windows.timeout = 2.0
    control = Control(store, settings, clock)
    control.signals = sampler.signals
    sampler.read_usage()
    time.sleep(1.5)
    sampler.read_usage()
    snap = control.snapshot()
    use = {n.id: n.usage for c in snap.clusters for n in c.nodes}
    print("\n" + "; ".join(f"{h}: {u}" for h, u in sorted(use.items())))
    assert use["h5"] is None  # could not be read: unknown
    assert all(isinstance(use[h], NodeUsage) and use[h].window_s >= 1.0 for h in ("h1", "h2", "h3", "h4"))
    assert min(use["h1"].cpu_max, use["h2"].cpu_max) > max(use["h3"].ratio, use["h4"].ratio)
    assert use["h3"].ratio < 0.5 and use["h4"].ratio < 0.5  # B is swollen

    blind = controller.tick(Memory(), build_snapshot(store, settings, clock()), settings)[0]
    assert [(s.cluster, s.node) for s in blind.plan.shrinks] == [("A", "h2")]  # the busy node: a task killed
    _, d, problems = control.tick()
    assert problems == []
    assert [(s.cluster, s.node) for s in d.plan.shrinks] == [("B", "h4")] and d.targets == {"A": 2, "B": 1, "C": 2}
    assert "C-1 reclaimed idle swollen nodes first: B 1" in d.reason
    assert [g.cluster for g in d.plan.grows] == [] or all(g.cluster == "C" for g in d.plan.grows)
    assert {n.host: n.state for n in store.list_nodes("B")}["h4"] == NodeState.DRAINING  # written as intent
    store.close()


def test_where_no_cgroup_is_mounted_the_command_still_reads_the_hosts_group(hosts):
    """A lab host (``ip netns exec`` mounts a fresh /sys: no cgroup mount visible) reads its own quota,
    not the whole machine: the command mounts the hierarchies in a private mount namespace."""
    hide = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'umount -R /sys/fs/cgroup && ! awk \'$3 ~ /^cgroup/ {f = 1} END {exit !f}\' /proc/mounts && exec "$@"',
            "hide"]
    ex = GroupExecutor({"h1": hosts["h1"] + hide})
    got = usage.collect(ex, ["h1"], timeout=30)["h1"]
    assert isinstance(got, usage.Reading), got
    assert got.cpus == 0.5 and got.cpu_scope.startswith("cgroup") and got.cpu_scope.endswith("/h1")
    assert got.mem_held == 256 << 20 and got.mem_scope.endswith("/h1")
    plain = subprocess.run(hosts["h1"] + hide + ["sh", "-c", render(usage.SCRIPT)], capture_output=True, text=True,
                           timeout=30)
    assert usage.parse_reading("h1", plain.stdout).cpu_scope == "host"  # the bare script would read the machine


def test_a_restarted_sampler_resumes_the_windows_from_the_state(tmp_path, hosts):
    """Usage windows survive a restart (issue 28): the sampler saves them in the state; a new sampler on the
    same state (a restarted coordinator) takes them back at its first reading and judges at once on what
    was seen before, the time it was away counted neither as CPU nor as covered."""
    clock = Clock()
    store = world(tmp_path, clock)
    settings = Settings(**{**CERES, "usage_window_s": 60.0})
    first = Sampler(store, SimpleNamespace(ex=GroupExecutor(dict(hosts))), None, settings, clock=clock)
    first.read_usage()
    time.sleep(1.2)
    clock.t += 30  # the save is every 30 s of the coordinator's clock
    first.read_usage()
    before = first.signals().usage
    held = {n.id: n.host for n in store.list_nodes()}
    assert set(before) == set(held) and set(store.load_usage_windows()) == {str(i) for i in held}
    store.close()

    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)  # the restarted coordinator's
    try:
        second = Sampler(store, SimpleNamespace(ex=GroupExecutor(dict(hosts))), None, settings, clock=clock)
        assert second.signals().usage == {}
        time.sleep(1.5)  # away: the busy loops in h1 and h2 go on
        second.read_usage()
        after = second.signals().usage
        assert set(after) == set(before)
        for nid, u in after.items():  # the gap added no CPU and no coverage
            assert (u.cpu_max, u.window_s) == (before[nid].cpu_max, before[nid].window_s), held[nid]
        busy = {nid for nid, h in held.items() if h in ("h1", "h2")}
        assert all(after[n].cpu_max > 0.3 for n in busy) and all(after[n].cpu_max < 0.2 for n in set(held) - busy)
        time.sleep(1.2)
        second.read_usage()
        for nid, u in second.signals().usage.items():  # observed again: covered grows by the new interval
            assert 1.0 <= u.window_s - before[nid].window_s <= 10.0, (held[nid], u, before[nid])
    finally:
        store.close()
