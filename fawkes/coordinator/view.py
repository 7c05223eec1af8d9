"""Build the mechanism's :class:`Snapshot` from the durable state (the coordinator's eyes).

Pure reading: nothing here writes.  The snapshot reports only what is observed: the allocation
history of each cluster is derived from its nodes' request and release times, the samples of
the last interval come from the store.  What the loop planned and counted (targets, weights,
votes, clocks) is the controller's memory, stored beside it (:mod:`fawkes.coordinator.control`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fawkes.mechanism import ClusterRequest, ClusterState, ClusterView, NodeView, Role, Settings, Snapshot
from fawkes.mechanism.model import JobProgress, NodeUsage
from fawkes.mechanism import schedules
from fawkes.mechanism.admission import admission_key
from fawkes.store import Store
from fawkes.store.base import gc_paused
from fawkes.coordinator.suspend import suspension_gaps
from fawkes.store.lifecycle import NODE_SUSPENDED, HostState, NodeState

_USABLE = frozenset({HostState.FREE.value, HostState.ALLOCATED.value})  # host states counted in C
_ROLES = {r.value: r for r in Role}


@dataclass(frozen=True)
class Signals:
    """What the sampler measures for CERES and keeps in memory, not in the store
    (:class:`fawkes.coordinator.usage.NodeWindows`; ``docs/mechanism.md``, CERES): per node (the
    store's node id) its maximum use over the usage window, per cluster its running jobs' progress
    samples.  Empty (the default) = not measured: the snapshot is as without CERES."""

    usage: Mapping[int, NodeUsage] = field(default_factory=dict)
    progress: Mapping[str, tuple[JobProgress, ...]] = field(default_factory=dict)


NO_SIGNALS = Signals()


def allocation_history(nodes: Iterable, since: float, admitted_at: float | None = None,
                       gaps: dict | None = None) -> tuple[tuple[float, int], ...]:
    """Change points ``(time, nodes held)`` from node lifetimes, the first at or before ``since``.

    A cluster exists from its admission (``admitted_at``): one admitted with no nodes yet holds 0
    while it is entitled to a share, which is discrimination too.  ``gaps``: per node id, the
    stretches ``(start, end or None)`` in which it was suspended (shrink_mode suspend): its host
    counted for the cluster it was lent to, not for this one."""
    deltas: dict[float, int] = {}
    if admitted_at is not None:
        deltas[max(admitted_at, since)] = 0
    for n in nodes:
        start = n.requested_at
        end = n.released_at
        if end is not None and end <= since:
            continue
        deltas[max(start, since)] = deltas.get(max(start, since), 0) + 1
        if end is not None:
            deltas[end] = deltas.get(end, 0) - 1
        for g0, g1 in (gaps.get(n.id, ()) if gaps else ()):
            deltas[max(g0, since)] = deltas.get(max(g0, since), 0) - 1
            if g1 is not None:
                deltas[g1] = deltas.get(g1, 0) + 1
    held, points = 0, []
    for t in sorted(deltas):
        held += deltas[t]
        points.append((t, held))
    return tuple(points)


def interval_samples(samples, start: float) -> tuple:
    """The samples of the interval (start, now]; if the sampler got none in it (slow SSH, a busy
    master), the latest earlier one (``samples`` reach one period further back) stands in: a
    missing sample is not zero demand."""
    inside = tuple(m for m in samples if m.time > start)
    if inside or not samples:
        return inside
    return (samples[-1],)


def sample_window(settings: Settings) -> float:
    """How far back (s) a snapshot reads samples: the interval T, plus one period for the stand-in
    of an interval without samples (:func:`interval_samples`); T_idle if longer, so that an admin
    who lowers T still finds the samples of the idle period in the store.

    Retention never deletes samples younger than this (:mod:`fawkes.coordinator.retention`).
    """
    return max(settings.period_s, settings.longest_finite_idle_timeout) + settings.period_s


def build_snapshot(store: Store, settings: Settings, now: float, signals: Signals | None = None, *,
                   minima_at: float | None = None) -> Snapshot:
    """The snapshot of the tick at ``now`` (interval (now − T, now]); ``signals``: CERES' node usage
    and job progress as the sampler measured them (none: not measured).  Minima are raised by the
    schedules active at ``minima_at`` (default ``now``; :mod:`fawkes.mechanism.schedules`), as the
    simulator's snapshots are."""
    with gc_paused():  # ~100,000 small objects at 50,000 nodes
        snap = _build_snapshot(store, settings, now, signals or NO_SIGNALS)
    return schedules.apply(snap, settings.schedules, minima_at)


def _build_snapshot(store: Store, settings: Settings, now: float, signals: Signals) -> Snapshot:
    start = now - settings.period_s
    window = sample_window(settings)
    # a few batched reads instead of two per cluster: the pool (free hosts, how many are usable and
    # their fewest cores; nodes carry their own host's state and cores), the nodes that count in
    # the interval (holding a host or released after its start: allocation_history ignores older
    # ones), the interval's samples, and the latest earlier ones only for the clusters the sampler
    # missed (interval_samples)
    pool = store.pool_summary()
    free = tuple(pool["free"])
    pool_cores = max(1, int(pool["min_cores"] or 1)) if pool["usable"] else 1
    failed_held = 0
    views: list[ClusterView] = []
    queue: list[ClusterRequest] = []
    clusters = store.list_clusters(include_released=False)
    nodes_of = store.nodes_of_live_clusters(released_after=start)
    inside = store.samples_of_live_clusters(since=start, until=now)
    clusters = [c for c in clusters if c.state != ClusterState.HIBERNATING]  # holds nothing, not queued
    missed = [c.name for c in clusters if c.state != ClusterState.REQUESTED and c.name not in inside]
    before = store.samples_of_live_clusters(since=now - window, until=start, clusters=missed) if missed else {}
    # nodes suspended in the interval (shrink_mode suspend) count for no one of theirs meanwhile: their
    # history, read only for the nodes that are suspended or started, resumed or released in it
    touched = [n.id for ns in nodes_of.values() for n in ns if n.state in NODE_SUSPENDED
               or (n.running_at or 0.0) > start or (n.released_at or 0.0) > start]
    gaps = suspension_gaps(store, touched, start) if touched else {}
    usage = signals.usage
    for c in clusters:
        state = ClusterState(c.state)
        if state is ClusterState.REQUESTED:
            queue.append(ClusterRequest(c.name, c.min_core, c.requested_at, c.expected_duration_s, c.deadline_s))
            continue
        every = nodes_of.get(c.name, [])
        live = [n for n in every if n.holds_host is not None]
        nodes, slots = [], []
        for n in live:
            usable = n.host_state in _USABLE
            if n.state == NodeState.FAILED or not usable:
                failed_held += usable
                continue
            nodes.append(NodeView(n.host, _ROLES[n.role], running_tasks=n.running_tasks or 0,
                                  stored_bytes=n.stored_bytes or 0, added_at=n.requested_at,
                                  draining=n.state == NodeState.DRAINING, usage=usage.get(n.id),
                                  protected=bool(n.protected)))
            slots.append(max(1, int(n.host_cores or 1)))
        recent = inside.get(c.name) or before.get(c.name, [])
        views.append(ClusterView(
            name=c.name, state=state, min_core=c.min_core, nodes=tuple(nodes),
            samples=interval_samples(recent, start), allocation=allocation_history(every, start, c.admitted_at, gaps),
            # task slots per node = a Spark worker's cores = its host's cores; the fewest is the safe side
            slots_per_node=min(slots, default=pool_cores),
            since=c.requested_at, progress=tuple(signals.progress.get(c.name, ())),
        ))
    # admission order (the mechanism's tie and grow order), not request order: with backfill or another
    # admission discipline a later request can be admitted first
    admitted = {c.name: admission_key(c.admitted_at, c.queue_seq or 0) for c in clusters if c.admitted_at is not None}
    views.sort(key=lambda v: admitted.get(v.name, admission_key(now, 0)))
    racks = store.host_racks() if settings.placement != "none" else {}  # placement only (issue 12)
    return Snapshot(now=now, capacity=pool["usable"] - failed_held, free_hosts=free,
                    clusters=tuple(views), queue=tuple(queue), host_racks=racks)
