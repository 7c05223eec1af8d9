"""Converge the hosts to the stored intent, through the framework drivers (Ray v2 style).

Each :meth:`Reconciler.step` looks at every live MR-cluster and starts what its state asks
for, as operations in a worker pool, one per key, so one slow DP drain never blocks other
clusters (or the same cluster's growth):

=============  ==============================================================  ===========
cluster state  operation                                                       key
=============  ==============================================================  ===========
DEPLOYING      all core nodes allocated: deploy them (masters + workers + DNs)  cluster
LOADING        load the input into HDFS, then ACTIVE                           cluster
ACTIVE         nodes REQUESTED/PROVISIONING: add them (TR or TC)               grow
ACTIVE         nodes DRAINING: remove them (TR by FP, TC by DP)                shrink
SAVING         save the output, tear down, release every node, then RELEASED   cluster
=============  ==============================================================  ===========

Every driver operation is idempotent, so after a crash the same step simply runs again on
whatever state the store recorded (intent is always written before the action).  Core
nodes are only ever stopped by a SAVING cluster's teardown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from fawkes.coordinator.fleet import Fleet
from fawkes.errors import FawkesError
from fawkes.frameworks.base import DecommissionInterrupted, DecommissionTimeout
from fawkes.mechanism import ClusterState, Role, ShrinkMode
from fawkes.store import Store
from fawkes.store.lifecycle import NODE_TIMEOUTS, NodeState

log = logging.getLogger("fawkes.reconcile")

INPUT_DIR = "/input"
OUTPUT_DIR = "/output"


class Reconciler:
    def __init__(self, store: Store, fleet: Fleet, *, workers: int = 4, clock: Callable[[], float] = time.time,
                 op_timeout: float = 600.0, drain_timeout: float = 1800.0):
        self.store = store
        self.fleet = fleet
        self.clock = clock
        self.op_timeout = op_timeout
        self.drain_timeout = drain_timeout
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fawkes-op")
        self.inflight: dict[tuple[str, str], Future] = {}
        self.cancel = threading.Event()  # set on shutdown: DP waits give up, nodes stay DRAINING
        self.failures: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ the loop body
    def step(self) -> None:
        self._collect()
        for c in self.store.list_clusters(include_released=False):
            state = ClusterState(c.state)
            name = c.name
            if state is ClusterState.REQUESTED:
                continue
            if c.release_requested_at is not None and state in (ClusterState.DEPLOYING, ClusterState.LOADING,
                                                                ClusterState.ACTIVE):
                if not self.busy(name, "cluster"):
                    self._try(self.store.transition_cluster, name, ClusterState.SAVING, "release requested")
                continue
            nodes = self.store.list_nodes(name)
            if state is ClusterState.DEPLOYING:
                cores = [n for n in nodes if n.role == Role.CORE and n.state in (NodeState.REQUESTED,
                                                                                  NodeState.PROVISIONING)]
                if len(cores) >= c.min_core:
                    self.start(name, "cluster", self._deploy, name, [n.id for n in cores])
            elif state is ClusterState.LOADING:
                self.start(name, "cluster", self._load, name, c.input_path)
            elif state is ClusterState.ACTIVE:
                new = [n.id for n in nodes if n.state in (NodeState.REQUESTED, NodeState.PROVISIONING)]
                if new:
                    self.start(name, "grow", self._grow, name, new)
                gone = [n.id for n in nodes if n.state == NodeState.DRAINING]
                if gone and not self.busy(name, "grow"):  # a node chosen while still starting: let it start first
                    self.start(name, "shrink", self._shrink, name, gone)
                failed = [n.id for n in nodes if n.state == NodeState.FAILED]
                if failed:
                    self.start(name, "cleanup", self._cleanup, name, failed)
            elif state is ClusterState.SAVING:
                if not any(self.busy(name, k) for k in ("grow", "shrink", "cleanup")):
                    self.start(name, "cluster", self._save_and_release, name)
        self._expire_stuck()

    def busy(self, cluster: str, kind: str) -> bool:
        f = self.inflight.get((cluster, kind))
        return f is not None and not f.done()

    def start(self, cluster: str, kind: str, fn, *args) -> bool:
        key = (cluster, kind)
        if self.busy(cluster, kind):
            return False
        self.inflight[key] = self.pool.submit(self._guard, key, fn, *args)
        return True

    def idle(self) -> bool:
        return all(f.done() for f in self.inflight.values())

    def shutdown(self, grace_s: float = 30.0) -> list[str]:
        """Stop: DP waits are cancelled; operations still running after ``grace_s`` are left
        to resume from the recorded intent on the next start.  Returns their keys."""
        from concurrent.futures import wait

        self.cancel.set()
        pending = [f for f in self.inflight.values() if not f.done()]
        if pending:
            wait(pending, timeout=grace_s)
        self.pool.shutdown(wait=False, cancel_futures=True)
        return sorted(f"{c}/{k}" for (c, k), f in self.inflight.items() if not f.done())

    # ------------------------------------------------------------------ operations
    def _deploy(self, name: str, node_ids: list[int]) -> None:
        for i in node_ids:
            self._advance(i, NodeState.PROVISIONING, "deploying")
        spec, driver = self.fleet.spec(name)
        driver.deploy(spec, timeout=self.op_timeout)
        for i in node_ids:
            self._advance(i, NodeState.RUNNING, "deployed")
        c = self.store.get_cluster(name)
        nxt = ClusterState.LOADING if c.input_path else ClusterState.ACTIVE
        self.store.transition_cluster(name, nxt, "deployed" + (f", loading {c.input_path}" if c.input_path else ""))

    def _load(self, name: str, src: str | None) -> None:
        spec, driver = self.fleet.spec(name)
        if src:
            driver.load_input(spec, src, INPUT_DIR, timeout=self.op_timeout)
        self.store.transition_cluster(name, ClusterState.ACTIVE, f"input loaded into {INPUT_DIR}" if src else "")

    def _grow(self, name: str, node_ids: list[int]) -> None:
        nodes = [n for n in (self.store.get_node(i) for i in node_ids)
                 if n.state in (NodeState.REQUESTED, NodeState.PROVISIONING)]  # not meanwhile chosen to go
        if not nodes:
            return
        for n in nodes:
            self._advance(n.id, NodeState.PROVISIONING, "starting daemons")
        spec, driver = self.fleet.spec(name)
        added = [spec.node(n.host) for n in nodes]
        try:
            driver.add_nodes(spec, added, timeout=self.op_timeout)
        except FawkesError as exc:
            for n in nodes:
                self._try(self.store.transition_node, n.id, NodeState.FAILED, f"add failed: {exc}")
            raise
        for n in nodes:
            if self.store.get_node(n.id).state == NodeState.PROVISIONING:  # a tick may have marked it DRAINING
                self._advance(n.id, NodeState.RUNNING, f"{n.role} node registered")

    def _shrink(self, name: str, node_ids: list[int]) -> None:
        nodes = [self.store.get_node(i) for i in node_ids]
        if any(Role(n.role) is Role.CORE for n in nodes):  # never while active: a planning bug, refuse loudly
            bad = ", ".join(n.host for n in nodes if Role(n.role) is Role.CORE)
            raise FawkesError(f"cluster {name}: refusing to remove core node(s) {bad} of an active cluster")
        spec, driver = self.fleet.spec(name)
        try:
            driver.remove_nodes(spec, [n.host for n in nodes], timeout=self.drain_timeout, cancel=self.cancel)
        except DecommissionInterrupted as exc:  # stopping: HDFS goes on; the next start resumes the wait
            log.info("%s", exc)
            return
        except DecommissionTimeout as exc:
            self.store.record_event("shrink", str(exc), level="warning", cluster=name)
            return  # nodes stay DRAINING; the next step tries again
        for n in nodes:
            self._advance(n.id, NodeState.RELEASED, "removed (FP)" if Role(n.role) is Role.TR else "decommissioned (DP)")

    def _cleanup(self, name: str, node_ids: list[int]) -> None:
        """Failed nodes: stop what may still run (FP), then hand the host back or write it off."""
        spec, driver = self.fleet.spec(name, states={NodeState.RUNNING, NodeState.FAILED, NodeState.DRAINING,
                                                    NodeState.PROVISIONING, NodeState.REQUESTED})
        for i in node_ids:
            n = self.store.get_node(i)
            if Role(n.role) is Role.CORE:
                continue  # a failed core node keeps its place until the cluster is torn down
            res = self.fleet.ex.run([n.host], "true", timeout=10)[n.host]
            if res.ok:
                try:
                    driver.remove_nodes(spec, [n.host], ShrinkMode.FP, timeout=120)
                except FawkesError as exc:
                    log.warning("cleanup of %s failed: %s", n.host, exc)
                    continue
            else:
                self._try(self.store.set_host_state, n.host, "failed", detail=res.error or "unreachable")
            self._advance(i, NodeState.RELEASED, "cleaned up after failure")

    def _save_and_release(self, name: str) -> None:
        every = self.store.list_nodes(name)
        try:
            spec, driver = self.fleet.spec(name)
        except FawkesError:
            spec = None  # nothing was ever deployed
        if spec is not None:
            c = self.store.get_cluster(name)
            if c.state == ClusterState.SAVING and c.active_at is not None:
                dest = f"{spec.cluster_dir(spec.master)}/saved"
                try:
                    driver.save_output(spec, OUTPUT_DIR, dest, timeout=self.op_timeout)
                    self.store.record_event("cluster", f"output saved to {spec.master.name}:{dest}", cluster=name)
                except FawkesError as exc:
                    self.store.record_event("cluster", f"nothing saved: {exc}", level="warning", cluster=name)
            for n in every:
                if n.state in (NodeState.PROVISIONING, NodeState.RUNNING):
                    self._advance(n.id, NodeState.DRAINING, "teardown")
            driver.teardown(spec, timeout=self.op_timeout)
        for n in self.store.list_nodes(name):
            if n.state == NodeState.REQUESTED or n.state == NodeState.DRAINING or n.state == NodeState.FAILED:
                self._advance(n.id, NodeState.RELEASED, "cluster released")
        self.store.transition_cluster(name, ClusterState.RELEASED, "output saved, nodes released")

    # ------------------------------------------------------------------ helpers
    def _advance(self, node_id: int, to: NodeState, detail: str) -> None:
        """Move a node forward unless it is already there (operations are re-run after crashes)."""
        n = self.store.get_node(node_id)
        if n.state == to:
            return
        if to is NodeState.DRAINING and n.state == NodeState.REQUESTED:
            to = NodeState.RELEASED  # nothing ran on it yet
        self.store.transition_node(node_id, to, detail)

    def _guard(self, key, fn, *args) -> None:
        try:
            fn(*args)
            self.failures.pop(key, None)
        except Exception as exc:  # an operation failing must not stop the loop: record it, retry later
            n = self.failures[key] = self.failures.get(key, 0) + 1
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("%s/%s failed (attempt %d): %s", key[0], key[1], n, msg)
            self._try(self.store.record_event, key[1], f"{key[1]} failed (attempt {n}): {msg}", level="error",
                      cluster=key[0])
            if key[1] == "cluster" and n >= 3:
                self._try(self.store.transition_cluster, key[0], ClusterState.SAVING,
                          f"gave up after {n} failed attempts: {msg}")

    def _collect(self) -> None:
        for key in [k for k, f in self.inflight.items() if f.done()]:
            del self.inflight[key]

    def _expire_stuck(self) -> None:
        """Nodes past their state's timeout with no operation on their cluster are marked failed.

        DRAINING is exempt: a DataNode is never stopped before HDFS says it is decommissioned.
        """
        stuck = self.store.stuck_nodes(self.clock())
        if not stuck:
            return
        names = {c.id: c.name for c in self.store.list_clusters(include_released=False)}
        busy = {cluster for (cluster, _), f in self.inflight.items() if not f.done()}
        for n in stuck:
            state = NodeState(n.state)
            if names.get(n.cluster_id) in busy or state in (NodeState.DRAINING, NodeState.FAILED):
                continue
            self._try(self.store.transition_node, n.id, NodeState.FAILED,
                      f"stuck in {state} for more than {NODE_TIMEOUTS[state]:.0f}s")
            log.warning("node %s stuck in %s: marked failed", n.host, state)

    @staticmethod
    def _try(fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except FawkesError as exc:
            log.info("skipped: %s", exc)
            return None
