"""Sample every MR-cluster: the daemons' metrics and the job table become a ClusterMetrics row.

Which metric feeds which policy (see docs/metrics.md): jobs from fawkes' own queue
(JD, DD, JS, JT); tasks from the drivers' REST APIs, queued jobs counted by their input
splits (TD, TT); cores used / cores from the Spark master (PU); HDFS used above the level
right after the input load / capacity from the NameNode (DU).  A job that has not started
counts the tasks an earlier run of the same application had on that cluster (stored with each
job as ``tasks_seen``, so a restart keeps it), at least one per input split; so does a started
job whose driver lists no stage yet.  DataNode bytes per node
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
from fawkes.frameworks.metrics import TaskCounts
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
        finished = self.store.list_jobs(name, states=[JobState.SUCCEEDED, JobState.FAILED])
        learned = _learned(finished + jobs)
        facts, seen = [], {}
        for j in jobs:
            counts = fs.tasks_by_app.get(j.app_id) if j.app_id else None
            pending, running, n = job_tasks(j, counts, learned)
            if n > (j.tasks_seen or 0):
                seen[j.id] = n
                learned[_app(j)] = max(learned.get(_app(j), 0), n)
            facts.append(JobFacts(submit_time=j.submitted_at, input_bytes=float(j.input_bytes or 0),
                                  pending_tasks=pending, running_tasks=running, started_at=j.started_at,
                                  ref_runtime=j.ref_runtime))
        self.store.note_job_tasks(seen)
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


def job_tasks(job, counts: TaskCounts | None, learned: dict[str, int]) -> tuple[int, int, int]:
    """``(pending, running, seen)`` of one unfinished job: what its driver reports while a stage is
    listed (``seen`` = its pending + running + completed tasks); otherwise (not started, or started
    with no stage listed yet: between the driver registering and its first stage, or between two
    actions) the most tasks a run of the same application had, at least one per input split, less
    what this run completed, and at least 1 (a dip to 0 there moved nodes away and back)."""
    if counts is not None and counts.total:
        return counts.pending, counts.running, counts.pending + counts.running + counts.completed
    splits = max(1, math.ceil((job.input_bytes or 0) / SPLIT_BYTES))
    done = counts.completed if counts is not None else 0
    return max(1, max(splits, learned.get(_app(job), 0), job.tasks_seen or 0) - done), 0, done


def _app(job) -> str:
    """A job's application: its program (argv[0])."""
    return job.argv[0] if job.argv else ""


def _learned(jobs) -> dict[str, int]:
    """Per application, the most tasks a run of it reported (stored with the job: survives restarts)."""
    out: dict[str, int] = {}
    for j in jobs:
        if j.tasks_seen:
            out[_app(j)] = max(out.get(_app(j), 0), j.tasks_seen)
    return out
