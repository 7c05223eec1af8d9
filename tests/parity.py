"""Replay a simulator run's record through the coordinator's Control on a real store.

The replay plays the outside world as the coordinator's sampler and reconciler would see it:
cluster requests, lifecycle moves the reconciler makes (loaded, active, released), node
releases (FP stopped / DP decommissioned), samples and per-node facts (running tasks, stored
bytes); a Spark + HDFS cluster's samples go through its daemons' documents and the live sampler's
parsing first (tests/daemon_documents.py).  At each recorded controller step it sets the clock, runs ``Control.tick`` or
``Control.between`` and compares, field by field, the snapshot the store gives with the one the
simulator built, then the decision, plans and memory.  Nothing else is shared: the coordinator
reads only its store, and CERES' two signals, which its sampler keeps in memory (node usage
windows, job progress: :class:`~fawkes.coordinator.view.Signals`), are handed to its Control as
the sampler hands them, keyed by the store's node ids (empty when the simulator measured none).
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass, replace

from fawkes.coordinator.control import Control
from fawkes.coordinator.view import Signals, build_snapshot
from fawkes.mechanism import ClusterState, Settings
from fawkes.mechanism.discrimination import held_integral
from fawkes.sim.record import Recorder
from fawkes.store import NodeState, Store
from fawkes.store.samples import SampleWrite
from tests.daemon_documents import DaemonSampler


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Mismatch(AssertionError):
    pass


def same(a, b, path: str = "") -> None:
    """Deep equality; floats equal to 1e-9 relative (sums taken in another order)."""
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            raise Mismatch(f"{path}: {a!r} != {b!r}")
        if not (a == b or (math.isinf(a) and a == b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)):
            raise Mismatch(f"{path}: {a!r} != {b!r}")
        return
    if is_dataclass(a) and is_dataclass(b):
        if type(a) is not type(b):
            raise Mismatch(f"{path}: {type(a).__name__} != {type(b).__name__}")
        for f in fields(a):
            if f.name.startswith("_"):
                continue
            same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            raise Mismatch(f"{path}: keys {sorted(a)} != {sorted(b)}")
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            raise Mismatch(f"{path}: {len(a)} items != {len(b)}: {a!r} vs {b!r}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
        return
    if a != b:
        raise Mismatch(f"{path}: {a!r} != {b!r}")


def same_snapshot(live, sim, settings: Settings) -> None:
    """The observed parts agree: pool, queue, and per cluster state, nodes, samples and the
    allocation as the mechanism integrates it over the interval."""
    same(live.capacity, sim.capacity, "capacity")
    same(live.free_hosts, sim.free_hosts, "free_hosts")
    same(live.queue, sim.queue, "queue")
    same(live.host_racks, sim.host_racks, "host_racks")
    same([c.name for c in live.clusters], [c.name for c in sim.clusters], "clusters")
    start = sim.now - settings.period_s
    for a, b in zip(live.clusters, sim.clusters):
        p = f"cluster {a.name}"
        same((a.state, a.min_core, a.since, a.slots_per_node), (b.state, b.min_core, b.since, b.slots_per_node), p)
        same(sorted(a.nodes, key=lambda n: n.id), sorted(b.nodes, key=lambda n: n.id), f"{p}.nodes")
        same(a.samples, b.samples, f"{p}.samples")
        same(a.progress, b.progress, f"{p}.progress")
        same(held_integral(a.allocation, start, sim.now), held_integral(b.allocation, start, sim.now),
             f"{p}.allocation integral")


#: the framework record of each kind a replay registers its clusters under (:func:`replay`'s ``kinds``)
KIND_PATHS = {"spark-hdfs": {"spark_home": "/opt/spark", "hdfs_jars": "/opt/hdfs"},
              "flink-hdfs": {"flink_home": "/opt/flink", "hdfs_jars": "/opt/hdfs"},
              "spark": {"spark_home": "/opt/spark", "shared_dir": "/shared"},
              "dask": {"shared_dir": "/shared"}}


def replay(rec: Recorder, store: Store, clock: Clock, settings: Settings, capacity: int, slots: int,
           runner=None, host_racks: dict[str, str] | None = None, kinds=None) -> int:
    """Feed ``rec`` to a Control on ``store`` (``runner``: a chapter-2 policy's parameters); raise
    :class:`Mismatch` at the first difference.  Returns the number of steps compared.  ``kinds``: the
    framework kind of each cluster by name (a mixed pool; default: every cluster spark-hdfs)."""
    kind_of = kinds or (lambda name: "spark-hdfs")
    for kind in KIND_PATHS:
        store.register_framework(f"sim-{kind}", kind, **KIND_PATHS[kind])
    racks = host_racks or {}
    store.sync_hosts([{"name": f"h{i:05d}", "address": "127.0.0.1", "cores": slots,
                       "rack": racks.get(f"h{i:05d}")} for i in range(capacity)])
    control = Control(store, settings, clock, runner=runner)
    signals = [Signals()]
    control.signals = lambda: signals[0]  # as the coordinator wires its sampler's (service.py)
    facts: dict[int, tuple[int, int]] = {}
    daemons = DaemonSampler(settings)
    steps = 0
    pending: list[SampleWrite] = []  # samples since the last other event: written at once, as the sampler does
    for i, ev in enumerate(rec.events):
        clock.t = ev.time
        where = f"event {i} ({ev.kind} at t={ev.time:g}{' ' + ev.cluster if ev.cluster else ''})"
        try:
            if pending and ev.kind != "sample":
                problems = store.record_samples(pending)
                pending.clear()
                if problems:
                    raise Mismatch(f"samples: {problems}")
            if ev.kind in ("static", "request"):
                daemons.baseline.pop(ev.cluster, None)  # a new cluster of that name: its own baseline
            if ev.kind == "static":
                min_core, nodes = ev.data
                store.request_cluster(ev.cluster, framework=f"sim-{kind_of(ev.cluster)}", min_core=min_core)
                store.transition_cluster(ev.cluster, ClusterState.DEPLOYING, "replay: static")
                for host, role in nodes:
                    store.allocate_node(ev.cluster, host, role)
                _start_requested(store)
                store.transition_cluster(ev.cluster, ClusterState.ACTIVE, "replay: static")
            elif ev.kind == "request":
                min_core, expected, deadline = ev.data
                store.request_cluster(ev.cluster, framework=f"sim-{kind_of(ev.cluster)}", min_core=min_core,
                                      expected_duration_s=expected,
                                      deadline_s=deadline)
            elif ev.kind == "state":
                _follow_state(store, ev.cluster, ev.data)
            elif ev.kind == "release":
                _release(store, ev.cluster, ev.data)
            elif ev.kind == "fail":
                _fail(store, ev.data)
            elif ev.kind == "sample":
                m = ev.data
                if ev.observed is not None and kind_of(ev.cluster) == "spark-hdfs":  # through the daemons
                    m = whole_bytes(daemons.sample(ev.cluster, ev.observed, ev.time), ev.data)
                    same(m, ev.data, "sample from the daemons' documents")
                pending.append(SampleWrite(ev.cluster, m))
            else:
                snap, result, memory = ev.data
                _node_facts(store, snap, facts)
                signals[0] = _signals(store, snap)
                same_snapshot(build_snapshot(store, settings, ev.time, signals[0]), snap, settings)
                if ev.kind == "tick":
                    _, d, problems = control.tick()
                    same(d, result, "decision")
                else:
                    b, problems = control.between()
                    if b is None:
                        raise Mismatch("the coordinator saw nothing to do between ticks")
                    same(b.admission, result.admission, "admission")
                    same(b.admission_plan, result.admission_plan, "admission plan")
                    same(b.refill_plan, result.refill_plan, "refill plan")
                if problems:
                    raise Mismatch(f"applying the plan: {problems}")
                same(control.memory(), memory, "memory")
                _start_requested(store)
                steps += 1
        except Mismatch as exc:
            raise Mismatch(f"{where}: {exc}") from None
    if pending:
        store.record_samples(pending)
    return steps


def whole_bytes(live, sim):
    """``live`` with the simulator's bytes where the daemons' whole bytes are within one byte of them (the
    simulator writes fractions of a byte; the decisions then weigh the same bytes in both drivers)."""
    for f in ("output_bytes", "storage_capacity"):
        if abs(getattr(live, f) - getattr(sim, f)) > 1.0:
            raise Mismatch(f"sample from the daemons' documents.{f}: {getattr(live, f)!r} != {getattr(sim, f)!r}")
    return replace(live, output_bytes=sim.output_bytes, storage_capacity=sim.storage_capacity)


def _follow_state(store: Store, name: str, to: ClusterState) -> None:
    current = ClusterState(store.get_cluster(name).state)
    if to in (ClusterState.DEPLOYING, ClusterState.SAVING):  # written by the decision itself (intent)
        if current is not to:
            raise Mismatch(f"cluster {name} is {current} in the store, {to} in the simulator")
        return
    if to is ClusterState.RELEASED and current is to:  # a purged request: the decision withdrew it
        return
    if to is ClusterState.RELEASED:
        for n in store.list_nodes(name):  # the teardown: nodes still held go first
            _release(store, name, n.host)
    store.transition_cluster(name, to, "replay")


def _release(store: Store, name: str, host: str) -> None:
    node = next((n for n in store.list_nodes(name) if n.host == host), None)
    if node is None:
        raise Mismatch(f"{name}/{host} released in the simulator but not held in the store")
    if node.state in (NodeState.REQUESTED, NodeState.PROVISIONING, NodeState.RUNNING):
        if ClusterState(store.get_cluster(name).state) is not ClusterState.SAVING:
            raise Mismatch(f"{name}/{host} released in the simulator, {node.state} (not draining) in the store")
        if node.state == NodeState.REQUESTED:
            store.transition_node(node.id, NodeState.RELEASED, "replay: teardown")
            return
        store.transition_node(node.id, NodeState.DRAINING, "replay: teardown")
    store.transition_node(node.id, NodeState.RELEASED, "replay: released")


def _fail(store: Store, host: str) -> None:
    """The sampler finds ``host`` unreachable: its node (if any) FAILED and the host failed; the
    reconciler's cleanup releases the node (the host stays failed)."""
    held = [n for n in store.list_nodes() if n.host == host]
    if not held:
        store.fail_host(host, "replay: host died")
        return
    for n in held:
        store.transition_node(n.id, NodeState.FAILED, "replay: host unreachable")
    store.set_host_state(host, "failed", detail="replay: unreachable")
    for n in held:
        store.transition_node(n.id, NodeState.RELEASED, "replay: cleaned up after failure")


def _start_requested(store: Store) -> None:
    ids = [n.id for n in store.list_nodes() if n.state == NodeState.REQUESTED]
    if ids:  # the same rows as a transition_node per step (tests/test_store_batch.py), in one transaction
        moves = [(i, NodeState.PROVISIONING, "replay") for i in ids] + [(i, NodeState.RUNNING, "replay") for i in ids]
        refused = [e for e in store.transition_nodes(moves, batch=len(moves)) if e is not None]
        if refused:
            raise Mismatch(f"starting requested nodes: {refused[0]}")


def _signals(store: Store, snap) -> Signals:
    """What the coordinator's sampler would hold at this step: the usage window of each node the
    simulator measured, under the store's id of that node, and each cluster's job progress."""
    held = {(c.name, n.id): n.usage for c in snap.clusters for n in c.nodes if n.usage is not None}
    progress = {c.name: c.progress for c in snap.clusters if c.progress}
    if not held and not progress:
        return Signals()
    names = {c.id: c.name for c in store.list_clusters(include_released=False)}
    usage = {n.id: u for n in store.list_nodes() if (u := held.get((names.get(n.cluster_id), n.host))) is not None}
    if len(usage) != len(held):
        raise Mismatch(f"nodes measured in the simulator but not held in the store: {sorted(held)}")
    return Signals(usage, progress)


def _node_facts(store: Store, snap, facts: dict[int, tuple[int, int]]) -> None:
    """What the sampler observes per node: running tasks and stored bytes."""
    held = {(c.name, n.id): n for c in snap.clusters for n in c.nodes}
    names = {c.id: c.name for c in store.list_clusters(include_released=False)}
    for n in store.list_nodes():
        view = held.get((names.get(n.cluster_id), n.host))
        if view is None:
            continue
        want = (view.running_tasks, view.stored_bytes)
        if facts.get(n.id) != want:
            store.update_node(n.id, running_tasks=view.running_tasks, stored_bytes=view.stored_bytes)
            facts[n.id] = want
