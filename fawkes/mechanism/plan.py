"""From targets to a plan: which nodes to remove and which free hosts to add (A-18, A-19).

Shrinking removes transient (TR) nodes first by fast preemption (FP), fewest running tasks
first, then transient-core (TC) nodes by delayed preemption (DP) in non-decreasing order of
stored bytes.  Core nodes are never removed and no cluster goes below its minimum.
Nodes already draining count for their cluster until released but are not removed twice.
Grows use only hosts that are free now; hosts freed by this plan are used by a later call
(shrink first, grow as nodes become free).  With ``placement`` hard or soft and rack labels in
the snapshot, which free hosts a cluster takes, and whether it leaves some of its deficit for
hosts on its preferred racks to free up, is :func:`fawkes.mechanism.placement.grow_hosts`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fawkes.mechanism import forecast, placement
from fawkes.mechanism.forecast import FreeAt
from fawkes.mechanism.memory import Memory
from fawkes.mechanism.model import SHRINK_MODE, ClusterView, Grow, NodeView, Plan, Role, Shrink, Snapshot
from fawkes.mechanism.settings import Settings


def shrink_victims(view: ClusterView, k: int, settings: Settings) -> list[NodeView]:
    """Up to ``k`` nodes to remove from ``view``, in removal order; never core, never a protected node,
    never below the minimum."""
    keep = max(view.min_core, view.count(Role.CORE))
    k = min(k, view.settled - keep)
    if k <= 0:
        return []
    tr = [n for n in view.nodes if n.role is Role.TR and not n.draining and not n.protected]
    tc = [n for n in view.nodes if n.role is Role.TC and not n.draining and not n.protected]
    if settings.fp_victim_order == "fewest_tasks":
        tr.sort(key=lambda n: (n.running_tasks, -n.added_at, n.id))
    else:
        tr.sort(key=lambda n: (-n.added_at, n.id))
    tc.sort(key=lambda n: (n.stored_bytes, n.running_tasks, -n.added_at, n.id))
    return (tr + tc)[:k]


def plan_towards(
    snap: Snapshot,
    targets: Mapping[str, int],
    settings: Settings,
    grow_order: Sequence[str] | None = None,
    memory: Memory | None = None,
) -> Plan:
    """The plan that moves every cluster in ``targets`` towards its target.

    ``grow_order`` ranks the clusters that grow (most negative discrimination first); by
    default the order of ``snap.clusters``.  Clusters named in ``targets`` but not yet in the
    snapshot (just admitted) grow core nodes from zero.  ``memory`` (the controller's) feeds the
    expected-free-time table that ``placement: soft`` waits by.
    """
    views = {c.name: c for c in snap.clusters}
    shrinks: list[Shrink] = []
    deficits: dict[str, int] = {}
    kept: list[str] = []
    for name, target in targets.items():
        view = views.get(name)
        settled = view.settled if view else 0
        if settled > target and view is not None:
            victims = shrink_victims(view, settled - target, settings)
            for n in victims:
                shrinks.append(Shrink(name, n.id, n.role, SHRINK_MODE[n.role]))
            guarded = [n.id for n in view.nodes if n.protected and not n.draining and n.role is not Role.CORE]
            if guarded and len(victims) < settled - target:
                kept.append(f"{name}: protected node(s) {', '.join(sorted(guarded))} stayed "
                            f"({settled - len(victims)} held, target {target})")
        elif settled < target:
            deficits[name] = target - settled
    grows: list[Grow] = []
    if settings.placement != "none" and snap.host_racks:
        grows, placed = _placed_grows(snap, deficits, settings, grow_order, memory or Memory(), shrinks)
        return Plan(grows=tuple(grows), shrinks=tuple(shrinks), targets=dict(targets), placed=tuple(placed),
                    kept=tuple(kept))
    free = snap.free_hosts
    next_free = 0
    requested = {r.name: r.min_core for r in snap.queue}
    order = list(grow_order) if grow_order is not None else [c.name for c in snap.clusters]
    order += [n for n in deficits if n not in set(order)]
    for name in order:
        need = deficits.pop(name, 0)
        if need <= 0:
            continue
        view = views.get(name)
        if view is not None:
            cores_missing = max(0, view.core_minimum - view.count(Role.CORE))
        else:
            cores_missing = requested.get(name, need)
        for i in range(min(need, len(free) - next_free)):
            role = Role.CORE if i < cores_missing else settings.grow_type
            grows.append(Grow(name, free[next_free], role))
            next_free += 1
    return Plan(grows=tuple(grows), shrinks=tuple(shrinks), targets=dict(targets), kept=tuple(kept))


def _placed_grows(snap: Snapshot, deficits: dict[str, int], settings: Settings, grow_order: Sequence[str] | None,
                  memory: Memory, shrinks: list[Shrink]) -> tuple[list[Grow], list[str]]:
    """The grows with placement hard/soft: per cluster in grow order, :func:`placement.grow_hosts` on
    the hosts still free.  W comes from the expected-free-time table (:mod:`fawkes.mechanism.forecast`),
    in which the nodes this plan removes free now; the work left (``dur_fast``) is the cluster's
    workload end as the table estimates it, less now (unknown: 0, so soft goes).  Also returns, for
    each cluster some of whose deficit waits for its racks or goes to other racks, the reason."""
    views = {c.name: c for c in snap.clusters}
    racks = snap.host_racks
    taken: set[str] = set()
    grows: list[Grow] = []
    placed: list[str] = []
    requested = {r.name: r.min_core for r in snap.queue}
    order = list(grow_order) if grow_order is not None else [c.name for c in snap.clusters]
    order += [n for n in deficits if n not in set(order)]
    table: list[FreeAt] | None = None
    leaving = {(s.cluster, s.node) for s in shrinks}
    for name in order:
        need = deficits.pop(name, 0)
        if need <= 0:
            continue
        view = views.get(name)
        cores_missing = (max(0, view.core_minimum - view.count(Role.CORE)) if view is not None
                         else requested.get(name, need))
        core_hosts = [n.id for n in view.nodes if n.role is Role.CORE] if view is not None else []
        preferred = placement.preferred_racks(core_hosts, racks)
        free = [h for h in snap.free_hosts if h not in taken]
        dur_fast = 0.0
        if view is not None and settings.placement == "soft":
            end, _ = forecast.workload_end(view, memory.of(name, view.since).idle_since)
            dur_fast = 0.0 if end is None else max(0.0, end - snap.now)

        def wait_for(count: int, name: str = name, preferred: frozenset[str] = preferred) -> float | None:
            nonlocal table
            if table is None:
                table = [r if (r.cluster, r.host) not in leaving else FreeAt(r.host, r.cluster, snap.now, "removed now")
                         for r in forecast.free_times(snap, settings, memory) if r.cluster]
            rows = tuple(r for r in table if r.cluster != name and racks.get(r.host) in preferred
                         and r.host not in taken)
            at = forecast.free_by(rows, count, snap.now)
            return None if at is None else max(0.0, at - snap.now)

        choice = placement.grow_hosts(need, free, racks, preferred, settings.placement, dur_fast=dur_fast,
                                      locality_penalty=settings.locality_penalty, wait_for=wait_for)
        for i, host in enumerate(choice.hosts):
            grows.append(Grow(name, host, Role.CORE if i < cores_missing else settings.grow_type))
            taken.add(host)
        if choice.wait or not choice.preferred and preferred:
            placed.append(f"placement {name}: {choice.reason}")
    return grows, placed
