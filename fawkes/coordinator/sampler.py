"""Sample every MR-cluster: the daemons' metrics and the job table become a ClusterMetrics row.

Which metric feeds which policy (see docs/metrics.md): jobs from fawkes' own queue
(JD, DD, JS, JT); tasks from the drivers' REST APIs, queued jobs counted by their input
splits (TD, TT); cores used / cores from the Spark master (PU); HDFS used above the level
right after the input load / capacity from the NameNode (DU).  A job that has not started
counts the tasks an earlier run of the same application had on that cluster (learned while
it ran), at least one per input split.  DataNode bytes per node
go to the store for DP's victim order.  Hosts that stop answering SSH for ``grace_s`` are
marked failed (their nodes too), and the mechanism replaces their capacity.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.fleet import Fleet
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, JobFacts, Settings, sample_cluster
from fawkes.store import Store
from fawkes.store.lifecycle import HostState, JobState, NodeState

log = logging.getLogger("fawkes.sampler")

SPLIT_BYTES = 128 * 1024 * 1024  # an input split (dfs.blocksize): tasks of a job not yet started


class Sampler:
    def __init__(self, store: Store, fleet: Fleet, dispatcher: Dispatcher, settings: Settings, *,
                 clock: Callable[[], float] = time.time, grace_s: float = 30.0):
        self.store = store
        self.fleet = fleet
        self.dispatcher = dispatcher
        self.settings = settings
        self.clock = clock
        self.grace_s = grace_s
        self.baseline_used: dict[str, float] = {}  # HDFS used when the cluster became ACTIVE (DU)
        self.learned_tasks: dict[tuple[str, str], int] = {}  # (cluster, app) -> tasks seen in a run
        self.unreachable_since: dict[str, float] = {}

    def step(self) -> None:
        self.check_hosts()
        for c in self.store.list_clusters(include_released=False):
            state = ClusterState(c.state)
            if state not in (ClusterState.LOADING, ClusterState.ACTIVE):
                continue
            try:
                self.sample(c.name, loading=state is ClusterState.LOADING)
            except FawkesError as exc:
                log.warning("sampling %s: %s", c.name, exc)

    def sample(self, name: str, *, loading: bool = False) -> None:
        spec, driver = self.fleet.spec(name, states={NodeState.RUNNING, NodeState.DRAINING})
        fs = driver.metrics(spec, driver_urls=self.dispatcher.driver_urls(name))
        now = self.clock()
        jobs = self.store.list_jobs(name, states=[JobState.QUEUED, JobState.DISPATCHED, JobState.RUNNING])
        facts = []
        for j in jobs:
            counts = fs.tasks_by_app.get(j.app_id) if j.app_id else None
            app = (name, j.argv[0] if j.argv else "")
            if counts is not None:
                pending, running = counts.pending, counts.running
                seen = counts.pending + counts.running + counts.completed
                self.learned_tasks[app] = max(self.learned_tasks.get(app, 0), seen)
            else:  # not started yet: what an earlier run of the same app had, at least one task per split
                splits = max(1, math.ceil((j.input_bytes or 0) / SPLIT_BYTES))
                pending, running = max(splits, self.learned_tasks.get(app, 0)), 0
            facts.append(JobFacts(submit_time=j.submitted_at, input_bytes=float(j.input_bytes or 0),
                                  pending_tasks=pending, running_tasks=running, started_at=j.started_at,
                                  ref_runtime=j.ref_runtime))
        finished = self.store.list_jobs(name, states=[JobState.SUCCEEDED, JobState.FAILED])
        used = fs.stored_bytes
        if not loading and name not in self.baseline_used and fs.hdfs is not None:
            self.baseline_used[name] = used
        m = sample_cluster(
            now, facts, self.settings,
            busy_slots=fs.busy_slots, configured_slots=fs.configured_slots,
            output_bytes=max(0.0, used - self.baseline_used.get(name, used)),
            storage_capacity=fs.storage_capacity, completed_jobs=len(finished),
            completed_tasks=sum(c.completed for c in fs.tasks_by_app.values()), loading=loading,
        )
        self.store.record_sample(name, m)
        by_addr = fs.stored_by_address()
        if by_addr:
            address = {x.name: x.address for x in spec.nodes}
            for n in self.store.list_nodes(name):
                addr = address.get(n.host)
                if addr in by_addr and by_addr[addr] != n.stored_bytes:
                    self.store.update_node(n.id, stored_bytes=int(by_addr[addr]))

    def check_hosts(self) -> None:
        """SSH liveness of every allocated host; failed after ``grace_s`` without an answer."""
        held = [h.name for h in self.store.list_hosts(HostState.ALLOCATED)]
        if not held:
            return
        now = self.clock()
        results = self.fleet.ex.run(held, "true", timeout=10)
        for host, r in results.items():
            if r.ok:
                self.unreachable_since.pop(host, None)
                continue
            since = self.unreachable_since.setdefault(host, now)
            if now - since < self.grace_s:
                continue
            log.warning("host %s unreachable for %.0fs: %s", host, now - since, r.error)
            for n in self.store.list_nodes():
                if n.host == host and n.state not in (NodeState.FAILED, NodeState.RELEASED):
                    try:
                        self.store.transition_node(n.id, NodeState.FAILED, f"host unreachable: {r.error}")
                    except FawkesError as exc:
                        log.info("skipped: %s", exc)
            try:
                self.store.set_host_state(host, HostState.FAILED, detail=r.error or "unreachable")
            except FawkesError as exc:
                log.info("skipped: %s", exc)
            self.unreachable_since.pop(host, None)
