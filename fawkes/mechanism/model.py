"""Domain types of the FAWKES mechanism: what a snapshot holds and what a plan says.

Everything here is an immutable value.  A :class:`Snapshot` is all the mechanism sees:
the pool (capacity and free hosts), every MR-cluster that holds or wants nodes (its
nodes by role, minimum, recent metric samples and allocation history) and the global
FIFO queue of cluster requests.  The simulator builds snapshots from simulated state,
the coordinator from its store and the daemons' metrics; the mechanism never does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

#: the longest period, timeout or deadline a setting may name (one year)
MAX_SECONDS = 365 * 86400.0


class Role(StrEnum):
    """Node roles (docs/mechanism.md, "Roles")."""

    CORE = "core"  # compute + HDFS holding the input; never removed while active
    TR = "transient"  # compute only; removed by FP (kill tasks)
    TC = "transient-core"  # compute + HDFS for output only; removed by DP (decommission)


class ShrinkMode(StrEnum):
    FP = "FP"  # fast preemption: stop the node, its running tasks are re-run elsewhere
    DP = "DP"  # delayed preemption: decommission (re-replicate blocks), then stop


SHRINK_MODE: dict[Role, ShrinkMode] = {Role.TR: ShrinkMode.FP, Role.TC: ShrinkMode.DP}


class ClusterState(StrEnum):
    """MR-cluster lifecycle (docs/state.md)."""

    REQUESTED = "requested"  # waiting in the global FIFO queue
    DEPLOYING = "deploying"  # admitted; core nodes being allocated, daemons starting
    LOADING = "loading"  # input being loaded into HDFS (counts in n with y = 0, A-37)
    ACTIVE = "active"  # runs jobs; resized by FAWKES
    SAVING = "saving"  # inactive; output being saved; leaves the weighting
    HIBERNATING = "hibernating"  # scale to zero: output saved, every node handed back; the next job wakes it
    RELEASED = "released"  # every node handed back


_C = ClusterState
#: the one cluster lifecycle: the store refuses any other move, the simulator's ``--check`` reports it.
#: A released cluster requested again is a new incarnation (a new request), not a transition.
CLUSTER_TRANSITIONS: dict[ClusterState, frozenset[ClusterState]] = {
    _C.REQUESTED: frozenset({
        _C.DEPLOYING,  # admitted: head of the global FIFO and sum of minimums fits C (A.8)
        _C.RELEASED,  # withdrawn by the user while still queued (holds nothing)
    }),
    _C.DEPLOYING: frozenset({
        _C.LOADING,  # core nodes running, HDFS up: start loading the input (l^D)
        _C.ACTIVE,  # no input to load
        _C.SAVING,  # release requested or deployment failed: tear down (nothing to save)
        _C.REQUESTED,  # a core node lost before the deployment finished: every node released, queued again
    }),
    _C.LOADING: frozenset({
        _C.ACTIVE,  # input in HDFS: jobs may run
        _C.SAVING,  # release requested or loading failed: tear down
    }),
    _C.ACTIVE: frozenset({
        _C.SAVING,  # inactive for T_idle (weight 0) or release requested: save output (b^D)
    }),
    _C.SAVING: frozenset({
        _C.RELEASED,  # output saved and every node handed back
        _C.HIBERNATING,  # the same, and the cluster stays: the next job submitted to it wakes it
    }),
    _C.HIBERNATING: frozenset({
        _C.RELEASED,  # released while hibernating, or woken: a new incarnation requested in its place
    }),
    _C.RELEASED: frozenset(),  # terminal
}

#: states in which a cluster takes part in weighting and targets (A-37)
ALLOCATED_STATES = frozenset({ClusterState.DEPLOYING, ClusterState.LOADING, ClusterState.ACTIVE})
#: states in which a cluster holds nodes
HOLDING_STATES = ALLOCATED_STATES | {ClusterState.SAVING}


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's maximum utilisation over a sliding window (CERES, C-1): the largest CPU and memory
    use seen in the window, each a fraction of what the node holds (cores, memory).  Measured by
    :mod:`fawkes.coordinator.usage` (cgroups, procfs) or the simulator; absent = unknown."""

    cpu_max: float
    mem_max: float
    window_s: float = 0.0  # how long the window the maxima cover is

    @property
    def ratio(self) -> float:
        """CERES' max-utilisation ratio, max used / limit: the larger of the two."""
        return max(self.cpu_max, self.mem_max)


@dataclass(frozen=True, slots=True)
class JobProgress:
    """Progress samples of one running job (or stage) of an MR-cluster (CERES, C-2): ``samples``
    are ``(time, fraction done)`` in time order, the fraction in [0, 1] (Spark: completed tasks /
    tasks over its stages); ``expected_s`` the job's reference runtime if known (the JS policy's)."""

    job: str
    samples: tuple[tuple[float, float], ...] = ()
    expected_s: float | None = None
    started_at: float | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node held by an MR-cluster."""

    id: str
    role: Role
    running_tasks: int = 0
    stored_bytes: int = 0  # HDFS bytes on this node (DP victim order)
    added_at: float = 0.0  # when it joined the cluster (FP tie-break: newest first)
    draining: bool = False  # being removed: still counts for its cluster until released
    usage: NodeUsage | None = None  # max utilisation over a window (CERES C-1); None = not measured
    protected: bool = False  # an admin keeps it (issue 27): never a shrink victim; it still counts


@dataclass(frozen=True, slots=True)
class ClusterMetrics:
    """One sample of one MR-cluster: the raw inputs of every weighting policy.

    Built by :func:`fawkes.mechanism.sampling.sample_cluster` from job and node facts, so
    the readings of the ambiguity register (A-13, A-14, A-17) live in one place.
    """

    time: float
    unfinished_jobs: int = 0  # JD: jobs submitted to the cluster and not finished
    unfinished_input_bytes: float = 0.0  # DD: the input bytes of the unfinished jobs
    pending_tasks: int = 0  # TD: tasks of unfinished jobs not started
    running_tasks: int = 0  # TD: running tasks of unfinished jobs (counted when count_running_in_demand, A-13)
    busy_slots: float = 0.0  # PU: slots occupied, or measured CPU x slots with pu_signal measured (A-15, U-7)
    configured_slots: float = 0.0  # PU
    output_bytes: float = 0.0  # DU: HDFS bytes written since deployment
    storage_capacity: float = 0.0  # DU: configured HDFS capacity of current DataNodes
    mean_job_slowdown: float = 0.0  # JS: mean (t - submit)/ref over unfinished jobs
    completed_jobs: int = 0  # JT: jobs the cluster completed since its deployment
    completed_tasks: int = 0  # TT: since deployment
    loading: bool = False  # a cluster still loading its input weighs y = 0 under every policy


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What a sampler knows about one unfinished job (input to ``sample_cluster``)."""

    submit_time: float
    input_bytes: float = 0.0
    pending_tasks: int = 0
    running_tasks: int = 0
    started_at: float | None = None  # first task start, if any
    ref_runtime: float | None = None  # runtime on the reference static cluster (JS)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """One MR-cluster as the mechanism sees it at decision time.

    Only what is observed: ``allocation`` is the piecewise-constant history of the number of
    nodes held, change points ``(time, nodes)`` in time order, the first at or before the start
    of the current interval; ``samples`` are the metric samples of the last interval.  What the
    loop planned and counted (targets, weights, votes, clocks) is the controller's
    :class:`~fawkes.mechanism.memory.Memory`, not part of the view.
    """

    name: str
    state: ClusterState
    min_core: int
    nodes: tuple[NodeView, ...] = ()
    samples: tuple[ClusterMetrics, ...] = ()
    allocation: tuple[tuple[float, int], ...] = ()
    slots_per_node: int = 8  # used only by the optional demand cap (B.5)
    since: float = 0.0  # when this incarnation was requested (keys the controller's memory)
    progress: tuple[JobProgress, ...] = ()  # running jobs' progress samples (CERES C-2); () = not measured
    # its own minimum of core nodes when a schedule raised ``min_core`` (schedules.py); None: min_core is its own
    core_min: int | None = None

    @property
    def core_minimum(self) -> int:
        """The core nodes it must have: its own minimum (a scheduled minimum above it grows TC/TR nodes)."""
        return self.min_core if self.core_min is None else self.core_min

    @property
    def held(self) -> int:
        """Nodes held, decommissioning ones included (A-19)."""
        return len(self.nodes)

    @property
    def settled(self) -> int:
        """Nodes held that are not on their way out."""
        return sum(1 for n in self.nodes if not n.draining)

    def count(self, role: Role) -> int:
        return sum(1 for n in self.nodes if n.role is role)


@dataclass(frozen=True, slots=True)
class ClusterRequest:
    """A request for a new MR-cluster, waiting in the global FIFO queue."""

    name: str
    min_core: int
    requested_at: float = 0.0
    # what the requester expects (P-2, P-3): how long its workload runs once admitted, and maxT, the
    # deadline relative to the request (a request waiting past maxT - expected duration misses it)
    expected_duration_s: float | None = None
    deadline_s: float | None = None

    def waited(self, now: float) -> float:
        return max(0.0, now - self.requested_at)

    def slack(self, now: float) -> float | None:
        """U = maxT - expected duration - waited (the CMU project's utility), None without maxT."""
        if self.deadline_s is None:
            return None
        return self.deadline_s - (self.expected_duration_s or 0.0) - self.waited(now)


@dataclass(frozen=True, slots=True)
class HostUse:
    """One held host's measured use (UBIS, issue 12: :mod:`fawkes.mechanism.opportunistic`): CPU and
    memory as fractions of the host's capacity, its capacity in cores, and the cluster that runs an
    opportunistic worker on it now (None: nobody borrows it)."""

    host: str
    cpu: float
    mem: float
    cpus: float = 1.0
    borrower: str | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one decision looks at.  ``clusters`` are in admission order."""

    now: float
    capacity: int  # C: usable nodes in the pool
    free_hosts: tuple[str, ...] = ()  # hosts held by nobody, in placement order
    clusters: tuple[ClusterView, ...] = ()
    queue: tuple[ClusterRequest, ...] = ()  # global FIFO of cluster requests
    host_use: tuple[HostUse, ...] = ()  # UBIS: measured held hosts (empty unless lending is on)
    # rack (or site) label per host, from the inventory (placement, issue 12); hosts without one are absent.
    # Read only with ``placement`` hard/soft: empty = no labels, and the plan is as without racks
    host_racks: dict[str, str] = field(default_factory=dict)

    def cluster(self, name: str) -> ClusterView:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def allocated(self) -> tuple[ClusterView, ...]:
        """Clusters taking part in weighting and targets (DEPLOYING, LOADING, ACTIVE)."""
        return tuple(c for c in self.clusters if c.state in ALLOCATED_STATES)


@dataclass(frozen=True, slots=True)
class Grow:
    cluster: str
    host: str
    role: Role


@dataclass(frozen=True, slots=True)
class Shrink:
    cluster: str
    node: str
    role: Role
    mode: ShrinkMode


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do now: nodes to add (from free hosts) and nodes to remove.

    ``targets`` are the node counts each cluster should converge to; grows that cannot
    happen yet (hosts still draining) happen when a later ``plan_towards`` sees them free.
    """

    grows: tuple[Grow, ...] = ()
    shrinks: tuple[Shrink, ...] = ()
    targets: dict[str, int] = field(default_factory=dict)
    placed: tuple[str, ...] = ()  # placement hard/soft: per cluster whose grows a rack decided, why (explain)
    kept: tuple[str, ...] = ()  # per cluster whose shrink protected nodes held back, why (explain)

    @property
    def empty(self) -> bool:
        return not self.grows and not self.shrinks

    def changed_clusters(self) -> set[str]:
        return {g.cluster for g in self.grows} | {s.cluster for s in self.shrinks}
