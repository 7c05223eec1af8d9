"""Converge the hosts to the stored intent, through the framework drivers (Ray v2 style).

Each :meth:`Reconciler.step` runs three phases, in this order:

1. **sync** (reality -> store): for the nodes in flight that no operation is handling, ask the
   framework what is true (:meth:`FrameworkDriver.observe`: daemon processes over SSH, the
   Spark master's workers, the NameNode's DataNodes) and record it.  A PROVISIONING node whose
   daemons run and are registered becomes RUNNING (after a coordinator restart mid-grow, instead
   of adding it again); a DEPLOYING cluster whose core nodes are all up is deployed.  For a
   DRAINING TC node HDFS says whether its decommission has finished; while HDFS is still
   decommissioning it, nothing is done (no worker thread waits on it).
2. **expire**: nodes past their state's timeout (``timeouts`` in the config) that reality did
   not explain and no operation handles: REQUESTED / PROVISIONING ones are marked FAILED (their
   cleanup stops what runs, by DP for TC nodes); a DRAINING one is reported once, never stopped.
3. **act** (store -> hosts): start what each live MR-cluster's state asks for, as operations in
   a worker pool, one per key, so one slow operation never blocks other clusters (or the same
   cluster's growth):

=============  ==============================================================  ===========
cluster state  operation                                                       key
=============  ==============================================================  ===========
DEPLOYING      all core nodes allocated: deploy them (masters + workers + DNs)  cluster
DEPLOYING      a core node FAILED: stop and wipe what started, release every   cluster
               node, REQUESTED again (admission gives it a fresh minimum)
LOADING        restore a woken cluster's saved output (scale to zero), load    cluster
               the input into HDFS, then ACTIVE
ACTIVE         nodes REQUESTED / PROVISIONING (not up): add them (TR or TC)    grow
ACTIVE         nodes DRAINING: TR by FP (or suspended: shrink_mode suspend);   shrink
               TC by DP: start the decommission,
               wait up to ``timeouts.drain``, stop and release once HDFS
               reports it Decommissioned (a later step finishes it)
ACTIVE         nodes FAILED: stop what still runs (DP for TC), release         cleanup
ACTIVE         idle, first step after a start and every ``drift_every_s``:     reconfigure
               re-render the configs, restart only daemons whose files changed
               (background work: only with a worker free; one still queued
               is cancelled when the cluster must grow or shrink)
SAVING         save the output outside the cluster's directory (``save_to``),   cluster
               record where it went, tear down, release every node, RELEASED
               (or HIBERNATING: idle, ``on_idle: hibernate`` and saved)
any            nodes SUSPENDED / LENT (shrink_mode suspend): lent, resumed     suspend:HOST
               when the host comes back, stopped at teardown (suspend.py)
=============  ==============================================================  ===========

Every driver operation is idempotent, so after a crash the same step simply runs again on
whatever state the store recorded (intent is always written before the action), and the sync
phase skips what reality shows already done.  A DataNode is never stopped before HDFS reports
it decommissioned, and core nodes are only ever stopped by a SAVING cluster's teardown.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from fawkes import faults
from fawkes.config import TimeoutsConfig
from fawkes.coordinator.fleet import Fleet
from fawkes.coordinator.suspend import Suspender
from fawkes.errors import FawkesError
from fawkes.frameworks.base import (SHRINK_MODES, DecommissionInterrupted, DecommissionTimeout, NodeFacts,
                                    SavedOutput, driver_class, shrink_mode_for)
from fawkes.mechanism import ClusterState, Role, ShrinkMode
from fawkes.store import Store
from fawkes.ssh.cgroups import Footprint
from fawkes.store.lifecycle import NodeState, leaving

log = logging.getLogger("fawkes.reconcile")

INPUT_DIR = "/input"
OUTPUT_DIR = "/output"
SAVE_ATTEMPTS = 3  # a leaving cluster's output: tries before its data is kept in place instead
IN_FLIGHT = (NodeState.REQUESTED, NodeState.PROVISIONING)


class Reconciler:
    """``timeouts``: the config's ``timeouts`` section (:class:`fawkes.config.TimeoutsConfig`;
    default: its defaults).  ``clock`` must be the store's clock (node ages are ``state_since``)."""

    def __init__(self, store: Store, fleet: Fleet, *, workers: int = 4, clock: Callable[[], float] = time.time,
                 timeouts: TimeoutsConfig | None = None, drift_every_s: float = 300.0,
                 shrink_mode: str | None = None, footprint: Footprint | None = None,
                 save_to: Callable[[str], str | None] | None = None,
                 hibernate: Callable[[str], bool] | None = None):
        if shrink_mode is not None and shrink_mode not in SHRINK_MODES:
            raise FawkesError(f"shrink_mode: {shrink_mode!r} is not one of {', '.join(map(repr, SHRINK_MODES))}")
        self.shrink_mode = shrink_mode  # None: each framework kind's default (B-6, shrink_mode_for)
        # where a leaving cluster's output goes (the config's save_to_of; None: <work dir>/saved on its master)
        self.save_to = save_to if save_to is not None else (lambda name: None)
        self._save_failures: dict[str, int] = {}
        # scale to zero: whether an idle cluster hibernates instead of being released (the config's hibernates)
        self.hibernate = hibernate if hibernate is not None else (lambda name: False)
        # shrink_mode suspend: a TR node's worker suspended through cgroups, its host lent (coordinator/suspend.py);
        # its pass runs whatever the mode (suspended nodes of an earlier run are resumed or stopped)
        self.suspender = Suspender(self, footprint if footprint is not None else Footprint())
        self.store = store
        self.drift_every_s = drift_every_s  # how often an idle active cluster's configs are compared
        self._drift_due: dict[str, float] = {}  # per cluster: when its configs are compared next
        self.fleet = fleet
        self.clock = clock
        self.timeouts = timeouts if timeouts is not None else TimeoutsConfig()
        self.workers = workers
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fawkes-op")
        self.inflight: dict[tuple[str, str], Future] = {}
        self.cancel = threading.Event()  # set on shutdown: DP waits give up, nodes stay DRAINING
        self.failures: dict[tuple[str, str], int] = {}
        self._reported: set[int] = set()  # DRAINING nodes already reported past their timeout

    @property
    def op_timeout(self) -> float:
        return self.timeouts.op

    @property
    def drain_timeout(self) -> float:
        return self.timeouts.drain

    # ------------------------------------------------------------------ the loop body
    def step(self) -> None:
        self._collect()
        self.suspender.step()
        waiting = self._sync()
        self._expire_stuck()
        self._act(waiting)

    def _act(self, waiting: set[int]) -> None:
        """Start the operations the stored state asks for (``waiting``: DRAINING nodes HDFS is
        still decommissioning, left alone)."""
        by_cluster = self.store.live_nodes_by_cluster()
        for c in self.store.live_clusters():
            state = ClusterState(c.state)
            name = c.name
            if state is ClusterState.REQUESTED:
                continue
            if c.release_requested_at is not None and state in (ClusterState.DEPLOYING, ClusterState.LOADING,
                                                                ClusterState.ACTIVE):
                if not self.busy(name, "cluster"):
                    self._try(self.store.transition_cluster, name, ClusterState.SAVING, "release requested")
                continue
            nodes = by_cluster.get(name, [])
            if state is ClusterState.DEPLOYING:
                cores = [n for n in nodes if n.role == Role.CORE and n.state in IN_FLIGHT]
                lost = [n for n in nodes if n.role == Role.CORE and n.state == NodeState.FAILED]
                if lost:  # its minimum can no longer start on these hosts: back to the queue, nodes released
                    self.start(name, "cluster", self._requeue, name, [n.host for n in lost])
                elif len(cores) >= c.min_core:
                    self.start(name, "cluster", self._deploy, name, [n.id for n in cores])
            elif state is ClusterState.LOADING:
                self.start(name, "cluster", self._load, name, c.input_path)
            elif state is ClusterState.ACTIVE:
                new = [n.id for n in nodes if n.state in IN_FLIGHT]
                gone = [n.id for n in nodes if n.state == NodeState.DRAINING and n.id not in waiting]
                if (new or gone) and self._unstarted(name, "reconfigure"):
                    # a drift check still queued behind other operations gives way to the grow or shrink
                    # (at scale a pool's worth of them would hold every grow back until its nodes expire)
                    self.inflight.pop((name, "reconfigure")).cancel()
                    self._drift_due[name] = 0.0  # compared again once the cluster is settled
                drifting = self.busy(name, "reconfigure")  # restarts daemons: no grow or shrink meanwhile
                if new and not drifting:
                    self.start(name, "grow", self._grow, name, new)
                if gone and not drifting and not self.busy(name, "grow"):  # a node chosen while starting: let it start
                    self.start(name, "shrink", self._shrink, name, gone)
                failed = [n.id for n in nodes if n.state == NodeState.FAILED]
                if failed:
                    self.start(name, "cleanup", self._cleanup, name, failed)
                settled = all(n.state == NodeState.RUNNING for n in nodes)  # none starting, draining, failed
                if settled and not any(self.busy(name, k) for k in ("grow", "shrink", "cleanup")) \
                        and self.clock() >= self._drift_due.get(name, 0.0) and self._spare_worker():
                    self._drift_due[name] = self.clock() + self.drift_every_s
                    self.start(name, "reconfigure", self._reconfigure, name)
            elif state is ClusterState.SAVING:
                if not any(self.busy(name, k) for k in ("grow", "shrink", "cleanup", "reconfigure")) \
                        and not self.suspender.pending(name):  # its suspended workers stopped first
                    self.start(name, "cluster", self._save_and_release, name)

    # ------------------------------------------------------------------ phase 1: reality -> store
    def _sync(self) -> set[int]:
        """Record what reality says of the nodes in flight that no operation handles.

        Returns the DRAINING nodes HDFS is still decommissioning (the act phase leaves them be)."""
        waiting: set[int] = set()
        by_cluster = self.store.live_nodes_by_cluster()
        for c in self.store.live_clusters():
            state = ClusterState(c.state)
            if c.release_requested_at is not None or state not in (ClusterState.DEPLOYING, ClusterState.ACTIVE):
                continue
            nodes = by_cluster.get(c.name, [])
            if state is ClusterState.DEPLOYING:
                if self.busy(c.name, "cluster"):
                    continue
                cores = [n for n in nodes if n.role == Role.CORE and n.state in IN_FLIGHT]
                # only a deployment that was started (every core node PROVISIONING) can be found done
                if len(cores) < c.min_core or any(n.state != NodeState.PROVISIONING for n in cores):
                    continue
                facts = self._observe(c.name, [n.host for n in cores])
                if facts and all(facts[n.host].up for n in cores):
                    self._try(self._deployed, c.name, [n.id for n in cores], "found deployed: "
                              + "; ".join(f"{n.host}: {facts[n.host].summary()}" for n in cores))
                continue
            look = []
            if not self.busy(c.name, "grow"):
                look += [n for n in nodes if n.state == NodeState.PROVISIONING]
            draining_tc = [n for n in nodes if n.state == NodeState.DRAINING and Role(n.role) is Role.TC]
            if not self.busy(c.name, "shrink") and not self.busy(c.name, "grow"):
                look += draining_tc
            else:  # not looked at this step: the act phase must not start a DP of them even if the
                # operation that holds the cluster ends meanwhile (a second DP); the next step asks HDFS
                waiting |= {n.id for n in draining_tc}
            if not look:
                continue
            facts = self._observe(c.name, [n.host for n in look])
            if facts is None:
                waiting |= {n.id for n in look if n.state == NodeState.DRAINING}  # reality unknown: wait
                continue
            for n in look:
                f = facts[n.host]
                if n.state == NodeState.PROVISIONING and f.up:
                    self._try(self.store.transition_node, n.id, NodeState.RUNNING,
                              f"found up, not started again: {f.summary()}")
                    log.info("%s: %s found up (%s)", c.name, n.host, f.summary())
                elif n.state == NodeState.DRAINING and not f.decommissioned and f.decommissioning is not False:
                    waiting.add(n.id)  # HDFS is at work (or did not answer): ask again next step
        return waiting

    def _observe(self, cluster: str, hosts: list[str]) -> dict[str, NodeFacts] | None:
        try:
            spec, driver = self.fleet.spec(cluster)
            return driver.observe(spec, hosts)
        except FawkesError as exc:
            log.info("%s: cannot observe %s: %s", cluster, ", ".join(hosts), exc)
            return None

    def busy(self, cluster: str, kind: str) -> bool:
        f = self.inflight.get((cluster, kind))
        return f is not None and not f.done()

    def start(self, cluster: str, kind: str, fn, *args) -> bool:
        key = (cluster, kind)
        if self.busy(cluster, kind):
            return False
        self.inflight[key] = self.pool.submit(self._guard, key, fn, *args)
        return True

    def _unstarted(self, cluster: str, kind: str) -> bool:
        """An operation submitted but still waiting for a worker (it can be cancelled)."""
        f = self.inflight.get((cluster, kind))
        return f is not None and not f.running() and not f.done()

    def _spare_worker(self) -> bool:
        """Fewer operations in flight than workers: a drift check (background work) waits for one,
        so that it never queues ahead of a grow, a shrink or a deployment."""
        return sum(1 for f in self.inflight.values() if not f.done()) < self.workers

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
        self._deployed(name, node_ids, "deployed")

    def _requeue(self, name: str, lost: list[str]) -> None:
        """DEPLOYING with a core node FAILED (its host lost, or it never started in time): what was
        started is stopped and wiped (nothing was loaded yet: the input is still at its source), every
        node released, and the cluster queued again at its place (its request time), its jobs waiting:
        admission gives it a fresh minimum when one fits."""
        nodes = self.store.list_nodes(name)
        try:
            spec, driver = self.fleet.spec(name, states={NodeState.PROVISIONING, NodeState.RUNNING})
        except FawkesError:
            spec = None  # nothing was started on a host that still answers
        if spec is not None:
            for n in nodes:
                if n.state in (NodeState.PROVISIONING, NodeState.RUNNING):
                    self._advance(n.id, NodeState.DRAINING, "deployment lost a core node")
            driver.teardown(spec, wipe=True, timeout=self.op_timeout)
        for n in self.store.list_nodes(name):
            if n.state in (NodeState.REQUESTED, NodeState.DRAINING, NodeState.FAILED):
                self._advance(n.id, NodeState.RELEASED, "deployment lost a core node")
        self.store.transition_cluster(name, ClusterState.REQUESTED,
                                      f"core node(s) on {', '.join(lost)} lost while deploying: {len(nodes)} node(s) "
                                      "released, queued again")
        log.warning("%s: core node(s) on %s lost while deploying: queued again", name, ", ".join(lost))

    def _deployed(self, name: str, node_ids: list[int], detail: str) -> None:
        for i in node_ids:
            self._advance(i, NodeState.RUNNING, detail)
        c = self.store.get_cluster(name)
        nxt = ClusterState.LOADING if c.input_path or c.restore_from else ClusterState.ACTIVE
        self.store.transition_cluster(name, nxt, "deployed" + (", restoring its saved output" if c.restore_from
                                                               else "") + (f", loading {c.input_path}"
                                                                           if c.input_path else ""))
        faults.point("cluster-deployed")

    def _load(self, name: str, src: str | None) -> None:
        """LOADING: a woken cluster's saved output restored first (scale to zero), then the input loaded."""
        spec, driver = self.fleet.spec(name)
        c = self.store.get_cluster(name)
        done = []
        if c.restore_from:
            done.append(self._restore(name, c, spec, driver))
        if src:
            driver.load_input(spec, src, INPUT_DIR, timeout=self.op_timeout)
            done.append(f"input loaded into {INPUT_DIR}")
        if c.restore_from:
            done.append(f"woken: active {max(0.0, self.clock() - c.requested_at):.1f}s after the job that woke it "
                        "was submitted")
        self.store.transition_cluster(name, ClusterState.ACTIVE, "; ".join(done))

    def _restore(self, name: str, c, spec, driver) -> str:
        """Restore the saved output ``c.restore_from`` names into ``OUTPUT_DIR`` through the kind's driver
        (checked against its manifest there); idempotent (a crash mid-restore: the next run replaces it)."""
        saved = saved_of(c.restore_from)
        if saved is None:
            self.store.record_event("cluster", "woken from hibernation: nothing to restore (nothing was saved)",
                                    cluster=name)
            return "nothing to restore"
        t0 = time.monotonic()
        driver.restore_output(spec, saved, OUTPUT_DIR, timeout=self.op_timeout)
        dt = time.monotonic() - t0
        self.store.record_event("cluster", f"output restored from {saved.describe()} into {OUTPUT_DIR} in "
                                f"{dt:.1f}s", cluster=name)
        faults.point("output-restored")
        return f"output restored into {OUTPUT_DIR} in {dt:.1f}s"

    def _grow(self, name: str, node_ids: list[int]) -> None:
        nodes = [n for n in (self.store.get_node(i) for i in node_ids) if n.state in IN_FLIGHT]  # not meanwhile
        if not nodes:                                                                             # chosen to go
            return
        # the wait ends with the provisioning timeout of the oldest node (restarted mid-grow: less left)
        since = [n.state_since for n in nodes if n.state == NodeState.PROVISIONING]
        left = self.timeouts.provisioning - (self.clock() - min(since)) if since else self.timeouts.provisioning
        timeout = max(1.0, min(self.timeouts.op, left))
        kept = []
        for n in nodes:
            try:
                self._advance(n.id, NodeState.PROVISIONING, "starting daemons")
                kept.append(n)
            except FawkesError:  # a tick cancelled it meanwhile (REQUESTED -> RELEASED): not this grow's
                if self.store.get_node(n.id).state != NodeState.RELEASED:
                    raise
        nodes = kept
        if not nodes:
            return
        faults.point("node-provisioning")
        spec, driver = self.fleet.spec(name)
        added = [spec.node(n.host) for n in nodes]
        try:
            driver.add_nodes(spec, added, timeout=timeout)
        except FawkesError as exc:
            for n in nodes:
                self._try(self.store.transition_node, n.id, NodeState.FAILED, f"add failed: {exc}")
            raise
        for n in nodes:
            if self.store.get_node(n.id).state == NodeState.PROVISIONING:  # a tick may have marked it DRAINING
                self._advance(n.id, NodeState.RUNNING, f"{n.role} node registered")
        faults.point("node-running")

    def _shrink(self, name: str, node_ids: list[int]) -> None:
        """TR nodes by FP (stop now; ``shrink_mode`` graceful: decommission, let running tasks finish for
        up to ``timeouts.graceful``, then stop), then TC nodes by DP: start the decommission (or find it done) and
        wait up to ``timeouts.drain``; not finished by then, the nodes stay DRAINING, HDFS goes on, and
        the sync phase asks HDFS every step until it reports them Decommissioned: then this stops them."""
        nodes = [n for n in (self.store.get_node(i) for i in node_ids) if n.state == NodeState.DRAINING]
        if any(Role(n.role) is Role.CORE for n in nodes):  # never while active: a planning bug, refuse loudly
            bad = ", ".join(n.host for n in nodes if Role(n.role) is Role.CORE)
            raise FawkesError(f"cluster {name}: refusing to remove core node(s) {bad} of an active cluster")
        spec, driver = self.fleet.spec(name)
        mode = shrink_mode_for(spec.framework.kind, self.shrink_mode)
        graceful = mode == "graceful"
        for group in ([n for n in nodes if Role(n.role) is Role.TR], [n for n in nodes if Role(n.role) is Role.TC]):
            if not group:
                continue
            tr = Role(group[0].role) is Role.TR
            if tr and mode == "suspend":  # suspended and lent instead; the rest by FP
                group = self.suspender.suspend(name, group)
                if not group:
                    continue
            try:
                if tr and graceful:  # decommission the workers, let their tasks finish (bounded), then stop
                    driver.remove_nodes(spec, [n.host for n in group], ShrinkMode.DP, timeout=self.drain_timeout,
                                        cancel=self.cancel, drain_s=self.timeouts.graceful)
                else:
                    driver.remove_nodes(spec, [n.host for n in group], timeout=self.drain_timeout, cancel=self.cancel)
            except DecommissionInterrupted as exc:  # stopping: HDFS goes on; the next start resumes the wait
                log.info("%s", exc)
                return
            except DecommissionTimeout as exc:  # nodes stay DRAINING; the sync phase watches HDFS from now on
                storage = driver_class(spec.framework.kind).storage_name
                self.store.record_event("shrink", f"{storage} still decommissioning, checked every step: {exc}",
                                        cluster=name)
                continue
            for n in group:
                self._advance(n.id, NodeState.RELEASED,
                              ("removed (graceful)" if graceful else "removed (FP)") if tr else "decommissioned (DP)")
            faults.point("node-released")

    def _cleanup(self, name: str, node_ids: list[int]) -> None:
        """Failed nodes: stop what may still run (TR by FP; TC by DP: a DataNode HDFS has not
        decommissioned is never stopped), then hand the host back, or write it off if unreachable."""
        spec, driver = self.fleet.spec(name, states={NodeState.RUNNING, NodeState.FAILED, NodeState.DRAINING,
                                                    NodeState.PROVISIONING, NodeState.REQUESTED})
        for i in node_ids:
            n = self.store.get_node(i)
            if Role(n.role) is Role.CORE:
                continue  # a failed core node keeps its place until the cluster is torn down
            res = self.fleet.ex.run([n.host], "true", timeout=10)[n.host]
            if res.ok:
                mode = ShrinkMode.FP if Role(n.role) is Role.TR else ShrinkMode.DP
                try:
                    driver.remove_nodes(spec, [n.host], mode, timeout=self.drain_timeout, cancel=self.cancel)
                except DecommissionTimeout as exc:  # HDFS goes on decommissioning; the next step retries
                    log.info("cleanup of %s: %s", n.host, exc)
                    continue
                except FawkesError as exc:
                    log.warning("cleanup of %s failed: %s", n.host, exc)
                    continue
            else:
                self._try(self.store.set_host_state, n.host, "failed", detail=res.error or "unreachable")
            self._advance(i, NodeState.RELEASED, "cleaned up after failure")

    def _reconfigure(self, name: str) -> None:
        """Drift: render the cluster's configs as the templates and settings say now and restart only
        the daemons whose files changed (the driver compares with the hash kept on each host).
        Runs for an idle active cluster at the first step after a start (a changed setting) and
        every ``drift_every_s`` (a changed template).  Only RUNNING nodes are touched: a node allocated
        after the check was queued is the grow's, which waits for this one (a drift check that writes a
        starting node's files beside the grow would race it); the check then runs again once settled."""
        if any(n.state != NodeState.RUNNING for n in self.store.list_nodes(name)):
            self._drift_due[name] = 0.0
            return
        spec, driver = self.fleet.spec(name, states=frozenset({NodeState.RUNNING}))
        restarted = driver.reconfigure(spec)
        if restarted:
            what = "; ".join(f"{h}: {', '.join(ds)}" for h, ds in sorted(restarted.items()))
            self.store.record_event("reconfigure", f"configs changed, restarted {what}", cluster=name)

    def _save_and_release(self, name: str) -> None:
        """SAVING: save the output (unless already recorded), record where it went, then tear down and
        release every node.  The output goes to ``save_to`` (default ``<work dir>/saved``) on the master
        host, outside the cluster's directory that teardown wipes.  When it cannot be saved, after
        ``SAVE_ATTEMPTS`` tries the daemons are stopped but nothing is deleted (the event names the
        directories that still hold the data), so that no release ever loses data."""
        every = self.store.list_nodes(name)
        held = sum(1 for n in every if n.state != NodeState.RELEASED)
        t0 = time.monotonic()
        try:
            spec, driver = self.fleet.spec(name)
        except FawkesError:
            spec = None  # nothing was ever deployed
        wipe = True
        if spec is not None:
            c = self.store.get_cluster(name)
            if c.saved_output is None:
                if c.active_at is None:  # never active: no job ran, nothing to keep
                    self.store.record_saved_output(name, {"nothing": "never active"}, "nothing to save: never active")
                else:
                    wipe = self._save(name, c, spec, driver)
            elif "kept" in json.loads(c.saved_output):  # saved nothing, kept in place: an earlier run's choice
                wipe = False
            faults.point("output-saved")
            for n in every:
                if n.state in (NodeState.PROVISIONING, NodeState.RUNNING):
                    self._advance(n.id, NodeState.DRAINING, "teardown")
            driver.teardown(spec, wipe=wipe, timeout=self.op_timeout)
        for n in self.store.list_nodes(name):
            if n.state == NodeState.REQUESTED or n.state == NodeState.DRAINING or n.state == NodeState.FAILED:
                self._advance(n.id, NodeState.RELEASED, "cluster released")
        c = self.store.get_cluster(name)
        if self._hibernates(c):
            faults.point("nodes-released")
            self.store.transition_cluster(
                name, ClusterState.HIBERNATING, f"hibernated: output saved, {held} node(s) released, "
                f"{max(0.0, self.clock() - (c.saving_at or self.clock())):.1f}s after it went idle (this save and "
                f"teardown: {time.monotonic() - t0:.1f}s); the next job submitted to it wakes it")
            return
        self.store.transition_cluster(name, ClusterState.RELEASED, "output saved, nodes released" if wipe
                                      else "output NOT saved and kept in place, nodes released")

    def _hibernates(self, c) -> bool:
        """Scale to zero: SAVING ``c`` hibernates instead of being released when it went idle (it was
        active and nobody asked for its release: the only other way out of ACTIVE), its config says
        ``on_idle: hibernate``, and its output was saved (a save that failed keeps the data in place:
        released as always, nothing elsewhere to restore from)."""
        if c.release_requested_at is not None or c.active_at is None or c.saved_output is None:
            return False
        return "kept" not in json.loads(c.saved_output) and bool(self.hibernate(c.name))

    def _save(self, name: str, c, spec, driver) -> bool:
        """Save ``c``'s output and record it; True when the cluster's directories may be wiped."""
        base = self.save_to(name) or f"{spec.master.root.rstrip('/')}/saved"
        dest = f"{base}/{name}/{c.id}"
        try:
            saved = driver.save_output(spec, OUTPUT_DIR, dest, timeout=self.op_timeout)
        except FawkesError as exc:
            n = self._save_failures[name] = self._save_failures.get(name, 0) + 1
            if n < SAVE_ATTEMPTS:
                raise FawkesError(f"saving the output failed (attempt {n} of {SAVE_ATTEMPTS}): {exc}") from None
            where = ", ".join(f"{x.name}:{spec.cluster_dir(x)}" for x in spec.nodes)
            self.store.record_saved_output(
                name, {"kept": where, "error": str(exc)[:500]},
                f"output NOT saved after {n} attempts ({str(exc)[:200]}): the daemons are stopped but nothing "
                f"is deleted; the file system's data stays in {where}", level="error")
            return False
        self._save_failures.pop(name, None)
        if saved is None:
            self.store.record_saved_output(name, {"nothing": f"no {OUTPUT_DIR}"},
                                           f"nothing to save: no {OUTPUT_DIR} in the cluster's file system")
        else:
            rec = {"host": saved.host, "path": saved.path, "files": saved.files, "bytes": saved.bytes,
                   "manifest_sha256": saved.manifest_sha256}
            self.store.record_saved_output(name, rec, f"output saved to {saved.describe()}")
        return True

    # ------------------------------------------------------------------ helpers
    def _advance(self, node_id: int, to: NodeState, detail: str) -> None:
        """Move a node forward unless it is already there (operations are re-run after crashes)."""
        n = self.store.get_node(node_id)
        if n.state == to:
            return
        if to is NodeState.DRAINING:
            to = leaving(n.state)
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

    def limits(self) -> dict[NodeState, float]:
        """Seconds a node may stay in each watched state (from ``timeouts``)."""
        t = self.timeouts
        return {NodeState.REQUESTED: t.requested, NodeState.PROVISIONING: t.provisioning,
                NodeState.DRAINING: t.draining}

    def _expire_stuck(self) -> None:
        """REQUESTED / PROVISIONING nodes past their timeout (that the sync did not find up), with no
        operation of their cluster that would start them in flight, are marked failed.

        DRAINING ones are reported once (a warning event), never stopped: a DataNode is never
        stopped before HDFS says it is decommissioned.
        """
        limits = self.limits()
        stuck = self.store.stuck_nodes(self.clock(), limits)
        self._reported &= {n.id for n in stuck}
        if not stuck:
            return
        names = {c.id: c.name for c in self.store.list_clusters(include_released=False)}
        for n in stuck:
            state = NodeState(n.state)
            cluster = names.get(n.cluster_id)
            if state is NodeState.DRAINING:
                if n.id not in self._reported:
                    self._reported.add(n.id)
                    msg = (f"{n.host} draining for more than {limits[state]:g}s: its file system has not finished "
                           "decommissioning it; nothing is stopped before it does")
                    log.warning("%s: %s", cluster, msg)
                    self._try(self.store.record_event, "node", msg, level="warning", cluster=cluster, node=n.host)
                continue
            if cluster is None or any(self.busy(cluster, k) for k in ("cluster", "grow", "reconfigure")):
                continue
            self._try(self.store.transition_node, n.id, NodeState.FAILED,
                      f"stuck in {state} for more than {limits[state]:g}s")
            log.warning("node %s stuck in %s: marked failed", n.host, state)

    @staticmethod
    def _try(fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except FawkesError as exc:
            log.info("skipped: %s", exc)
            return None


def saved_of(record: str | None) -> SavedOutput | None:
    """The :class:`SavedOutput` a cluster's ``saved_output`` / ``restore_from`` JSON record names; None when
    it saved nothing (``{"nothing": ...}``); FawkesError for a record that names no checked copy."""
    import re

    rec = json.loads(record) if record else {}
    if "nothing" in rec:
        return None
    try:
        saved = SavedOutput(str(rec["host"]), str(rec["path"]), int(rec["files"]), int(rec["bytes"]),
                            str(rec["manifest_sha256"]))
    except (KeyError, TypeError, ValueError):
        raise FawkesError(f"restore: the saved output record {str(record)[:200]!r} names no saved copy") from None
    if not saved.path.startswith("/") or ".." in saved.path.split("/") \
            or not re.fullmatch(r"[0-9a-f]{64}", saved.manifest_sha256) or saved.files < 0 or saved.bytes < 0:
        raise FawkesError(f"restore: the saved output record {str(record)[:200]!r} is malformed")
    return saved
