"""Turn what a sampler observes of one MR-cluster into a :class:`ClusterMetrics` sample.

The readings of "jobs waiting in the queue" (A-13, A-14, A-17) are applied here, once,
for both the simulator and the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable

from fawkes.mechanism.model import ClusterMetrics, JobFacts
from fawkes.mechanism.settings import Settings


def sample_cluster(
    now: float,
    jobs: Iterable[JobFacts],
    settings: Settings,
    *,
    busy_slots: float = 0.0,
    configured_slots: float = 0.0,
    output_bytes: float = 0.0,
    storage_capacity: float = 0.0,
    completed_jobs: int = 0,
    completed_tasks: int = 0,
    loading: bool = False,
) -> ClusterMetrics:
    """One sample at ``now`` from the cluster's unfinished ``jobs`` and usage counters."""
    n_jobs = pending = running = 0
    input_bytes = 0.0
    slowdown_sum = 0.0
    slowdown_n = 0
    only_queued = settings.demand_jobs == "queued"
    for j in jobs:
        running += j.running_tasks
        pending += j.pending_tasks
        if only_queued and j.started_at is not None:
            continue
        n_jobs += 1
        b = j.input_bytes
        if settings.dd_remaining_fraction:
            total = j.pending_tasks + j.running_tasks
            # the fraction of work left is unknown without the job's task total; pending+running
            # over (pending+running+done) is approximated by the pending share of live tasks
            b *= (j.pending_tasks / total) if total else 0.0
        input_bytes += b
        if j.ref_runtime and j.ref_runtime > 0:
            origin = j.submit_time
            if settings.js_elapsed_from == "start":
                if j.started_at is None:
                    continue
                origin = j.started_at
            slowdown_sum += max(0.0, now - origin) / j.ref_runtime
            slowdown_n += 1
    return ClusterMetrics(
        time=now,
        unfinished_jobs=n_jobs,
        unfinished_input_bytes=input_bytes,
        pending_tasks=pending,
        running_tasks=running,
        busy_slots=busy_slots,
        configured_slots=configured_slots,
        output_bytes=output_bytes,
        storage_capacity=storage_capacity,
        mean_job_slowdown=slowdown_sum / slowdown_n if slowdown_n else 0.0,
        completed_jobs=completed_jobs,
        completed_tasks=completed_tasks,
        loading=loading,
    )
