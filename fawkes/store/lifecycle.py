"""Explicit lifecycles: one transition table per kind of record (Ray autoscaler v2 style).

Each table maps a state to the set of states it may move to; every edge carries a
comment naming the event that causes it.  :func:`check` refuses an edge that is not in
the table; the store's ``transition_*`` methods call it, update the row with a
compare-and-set on the old state and write a history row with a timestamp and a detail
string.  ``*_TIMEOUTS`` give, per state, how long a record may stay there before the
reconciler calls it stuck (``None``: may stay forever).  They are data, not code, so a
config can override them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from fawkes.errors import FawkesError
from fawkes.mechanism.model import CLUSTER_TRANSITIONS, ClusterState  # noqa: F401  (one table, beside the states)


class NodeState(StrEnum):
    """Lifecycle of one node: one host lent to one MR-cluster in one role."""

    REQUESTED = "requested"  # the plan wants this host in this cluster; nothing done yet
    PROVISIONING = "provisioning"  # config rendered, daemons being started on the host
    RUNNING = "running"  # daemons up and registered with the cluster's masters
    DRAINING = "draining"  # being removed: FP stop or DP decommission in progress
    SUSPENDED = "suspended"  # shrink_mode suspend: its worker frozen on the host (BIG-C's IP), host lendable
    LENT = "lent"  # suspended, and another cluster's node runs on its host (counts for that cluster)
    RELEASED = "released"  # host handed back to the pool (terminal)
    FAILED = "failed"  # something broke; the host stays held until cleaned up


class JobState(StrEnum):
    """Lifecycle of one MR-job in its cluster's FIFO queue.

    A user's cancel of a QUEUED job is immediate; for a DISPATCHED or RUNNING job it is an
    intent (``jobs.cancel_requested_at``) that the coordinator's dispatcher carries out by
    killing the driver on the cluster's master, then moving the job to CANCELLED.
    """

    QUEUED = "queued"
    DISPATCHED = "dispatched"  # handed to the cluster's master, no application id yet
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class HostState(StrEnum):
    """State of a pool host (from the inventory and the nodes on it)."""

    FREE = "free"  # held by nobody
    ALLOCATED = "allocated"  # held by a live node of one cluster
    FAILED = "failed"  # unreachable or broken; not offered to the mechanism
    RETIRED = "retired"  # no longer in the inventory (kept for history)


N = NodeState
NODE_TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    N.REQUESTED: frozenset({
        N.PROVISIONING,  # the executor picked the node up and started deploying
        N.RELEASED,  # cancelled before anything ran on the host (plan superseded, cluster released)
        N.FAILED,  # the host was found unreachable before provisioning
    }),
    N.PROVISIONING: frozenset({
        N.RUNNING,  # daemons started and registered with the masters
        N.DRAINING,  # shrink chosen while still starting: stop what was started
        N.FAILED,  # deploy command failed or provisioning timed out
    }),
    N.RUNNING: frozenset({
        N.DRAINING,  # shrink (FP: stop now; DP: decommission first) or cluster teardown
        N.FAILED,  # host lost or daemon died
    }),
    N.SUSPENDED: frozenset({
        N.LENT,  # another cluster's node took the host
        N.RUNNING,  # resumed: its own cluster grew onto the host again
        N.RELEASED,  # cluster teardown: the worker thawed and stopped; or a new node of its cluster took it over
        N.FAILED,  # host lost, or freezing/resuming failed
    }),
    N.LENT: frozenset({
        N.RUNNING,  # the borrower gave the host back: the worker resumed
        N.RELEASED,  # cluster teardown: the worker thawed and stopped (the borrower keeps the host)
        N.FAILED,  # host lost
    }),
    N.DRAINING: frozenset({
        N.SUSPENDED,  # shrink_mode suspend: a TR node's worker suspended (cgroups) instead of stopped, host lendable
        N.RELEASED,  # daemons stopped (and, for DP, blocks re-replicated): host is free
        N.FAILED,  # stop/decommission failed or timed out
    }),
    N.FAILED: frozenset({
        N.RELEASED,  # cleanup done (or the host written off): drop the hold
    }),
    N.RELEASED: frozenset(),  # terminal: a new allocation is a new node
}

C = ClusterState

J = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    J.QUEUED: frozenset({
        J.DISPATCHED,  # head of the cluster's FIFO queue handed to the master
        J.CANCELLED,  # user cancel or cluster released before dispatch
    }),
    J.DISPATCHED: frozenset({
        J.RUNNING,  # the master reported an application id
        J.FAILED,  # submission failed
        J.CANCELLED,  # cluster torn down before it started, or user cancel carried out by the coordinator
        J.QUEUED,  # coordinator restarted and found no trace of it: run it again (never lose a job;
        #            a job whose cancel was requested goes to CANCELLED instead)
    }),
    J.RUNNING: frozenset({
        J.SUCCEEDED,  # exit code 0
        J.FAILED,  # non-zero exit code or lost application
        J.CANCELLED,  # user cancel: the coordinator killed the driver on the master; or cluster teardown
    }),
    J.SUCCEEDED: frozenset(),
    J.FAILED: frozenset(),
    J.CANCELLED: frozenset(),
}

def leaving(state: str) -> NodeState:
    """Where a node chosen to go moves from ``state``: RELEASED (cancelled) while nothing ran on its host
    yet (REQUESTED), else DRAINING (its daemons stopped, for DP once its data is safe elsewhere)."""
    return N.RELEASED if state == N.REQUESTED else N.DRAINING


#: seconds a node may stay in a state before the reconciler treats it as stuck
NODE_TIMEOUTS: dict[NodeState, float | None] = {
    N.REQUESTED: 120.0,
    N.PROVISIONING: 600.0,
    N.RUNNING: None,
    N.DRAINING: 3600.0,  # DP re-replication can be long
    N.SUSPENDED: None,  # until lent, resumed or torn down
    N.LENT: None,  # as long as the borrower keeps the host
    N.FAILED: 600.0,
    N.RELEASED: None,
}

#: node states of a suspended worker (shrink_mode suspend): not counted for its cluster, whose host is
#: lendable (SUSPENDED) or lent (LENT, counted for the borrower); ``nodes.holds_host`` is NULL in both
#: once the worker is frozen
NODE_SUSPENDED = frozenset({N.SUSPENDED, N.LENT})
#: node states in which the node holds its host
NODE_HOLDING = frozenset(s for s in NodeState if s is not N.RELEASED)
#: cluster states that accept job submissions
CLUSTER_ACCEPTING_JOBS = frozenset({C.REQUESTED, C.DEPLOYING, C.LOADING, C.ACTIVE, C.HIBERNATING})
#: terminal job states
JOB_FINISHED = frozenset({J.SUCCEEDED, J.FAILED, J.CANCELLED})
#: the others, sorted (a query's ``state IN`` list: an index range, where ``NOT IN`` finished reads every job)
JOB_UNFINISHED = tuple(sorted(set(J) - JOB_FINISHED))


def check(table: Mapping, kind: str, ident: str, current: str, to: str) -> None:
    """Raise :class:`FawkesError` unless ``current -> to`` is an edge of ``table``."""
    allowed = table[type(next(iter(table)))(current)]
    if type(next(iter(table)))(to) not in allowed:
        nxt = ", ".join(sorted(allowed)) or "nothing (terminal)"
        raise FawkesError(f"{kind} {ident}: transition {current} -> {to} not allowed (from {current}: {nxt})")
