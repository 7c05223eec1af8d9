"""What a framework kind tells the service about one MR-cluster, in the service's own terms.

The coordinator (sampler, reconciler, dispatcher) reads these and nothing else: tasks, slots, bytes
stored and written, per-job task counts, per-node stored bytes.  How a kind obtains them (a master's
JSON, a file system's JMX, a scheduler's API) stays in its driver module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskCounts:
    """Tasks of one job (or summed over several): ``total`` counts the tasks of the job's phases now
    listed as active or pending (0: no phase listed, e.g. between two actions), ``pending`` those of
    them not started, ``running`` those running, ``completed`` every task done over every phase seen
    (a phase run again after a shrink lost its output counts again); ``distinct``: the tasks of every
    phase listed, each phase once (its first attempt's), where the kind tells attempts apart (0: it
    does not)."""

    total: int = 0  # tasks of active + pending phases
    running: int = 0
    pending: int = 0  # not started: total - running - complete (of active + pending phases)
    completed: int = 0  # over every phase seen (TT)
    failed: int = 0
    active_stages: int = 0
    pending_stages: int = 0
    distinct: int = 0  # tasks of the phases listed, each phase once (0: the kind counts no attempts)

    def __add__(self, o: "TaskCounts") -> "TaskCounts":
        return TaskCounts(*(a + b for a, b in zip(self._t(), o._t())))

    def _t(self) -> tuple[int, ...]:
        return (self.total, self.running, self.pending, self.completed, self.failed, self.active_stages,
                self.pending_stages, self.distinct)


def sum_tasks(counts: Iterable[TaskCounts]) -> TaskCounts:
    total = TaskCounts()
    for c in counts:
        total = total + c
    return total


@dataclass(frozen=True)
class HostStats:
    cpu_busy: float  # fraction of CPU time busy between the two samples
    disk_total: int
    disk_used: int


@dataclass(frozen=True)
class FrameworkSample:
    """One sample of one MR-cluster, framework-neutral (policy inputs, docs/metrics.md).

    ``tasks_by_job``: per job, keyed by the framework's id of it (what the dispatcher stores as the
    job's ``app_id``).  ``stored_bytes``: bytes the cluster's file system holds (all replicas), None
    when it did not answer; ``written_bytes``: bytes the cluster's jobs wrote since it was deployed,
    for a kind that counts them (None: the sampler takes stored bytes above the level right after the
    input load, the DU baseline kept in the state).  ``stored_by_node``: bytes per node name (DP's
    victim order).  ``task_time_by_job``: per job (as ``tasks_by_job``), per node name, the tasks of it
    that ended there and their seconds, over the job's life (the twin's task time on the master node
    against the others; empty: the kind does not measure it).  ``running_by_node``: per node name, the tasks
    running there now (a node not in it runs none); None: the kind does not say (FP's victim order and
    CERES C-1's idle-or-busy judgement then see no task on any node)."""

    time: float
    tasks: TaskCounts = TaskCounts()
    tasks_by_job: Mapping[str, TaskCounts] = field(default_factory=dict)
    slots: float = 0.0  # PU denominator: task slots of the registered workers
    busy_slots: float = 0.0  # PU numerator
    unfinished_jobs: int = 0  # JD, as the framework counts them
    completed_jobs: int = 0  # JT, as the framework counts them
    stored_bytes: float | None = None
    storage_capacity: float = 0.0  # DU denominator
    written_bytes: float | None = None
    stored_by_node: Mapping[str, int] = field(default_factory=dict)
    task_time_by_job: Mapping[str, Mapping[str, tuple[int, float]]] = field(default_factory=dict)
    running_by_node: Mapping[str, int] | None = None
    hosts: dict[str, HostStats] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
