"""Turn what a sampler observes of one MR-cluster into a :class:`ClusterMetrics` sample.

The readings of "jobs waiting in the queue" (A-13, A-14, A-17) and of PU's busy share (A-15,
UBIS U-7: occupied slots, or the nodes' measured CPU) are applied here, once, for both the
simulator and the coordinator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

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
    node_cpu: Sequence[float] = (),
) -> ClusterMetrics:
    """One sample at ``now`` from the cluster's unfinished ``jobs`` and usage counters.

    ``node_cpu``: the measured CPU use of each of the cluster's measured nodes, a fraction of what
    the node holds (UBIS U-7: the per-node utilisation telemetry).  With ``settings.pu_signal ==
    "measured"`` and at least one node measured, PU's busy slots are :func:`measured_busy_slots`
    instead of the framework's occupied slots; otherwise (or with no reading) ``node_cpu`` is not read.
    """
    if settings.pu_signal == "measured" and (measured := measured_busy_slots(configured_slots, node_cpu)) is not None:
        busy_slots = measured
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


def measured_busy_slots(configured_slots: float, node_cpu: Sequence[float]) -> float | None:
    """UBIS U-7, PU from telemetry: the configured slots times the mean measured CPU fraction of the
    measured nodes, each fraction clamped to [0, 1] (a reading over the quota is a full node; a
    non-finite one is not a reading and is left out).  None when no node has a reading."""
    xs = [min(1.0, max(0.0, x)) for x in node_cpu if math.isfinite(x)]
    if not xs:
        return None
    return max(0.0, configured_slots) * (sum(xs) / len(xs))
