"""The expected-free-time table (issue 12; the YARN placement project's P-4 ``free_times``).

When will each node free up?  Computed from the snapshot, the settings and the controller's
memory only (no I/O, no clock), so the simulator and the coordinator forecast alike and
``fawkes status`` can show it.  Per held node, the earliest of what is known:

* a free host is free now;
* a draining node, or any node of a SAVING cluster, frees when its removal ends: ``now``
  (the time that takes is the framework's, not the mechanism's: shown as ``draining``/``saving``);
* nodes above their cluster's standing target (a deferred shrink) free by the next tick: ``now + T``;
* every node of an ACTIVE cluster frees when its workload is done and it has then been idle for
  T_idle (A-12): the workload's end is estimated from the interval's samples as the tasks left
  (pending + running) over the rate at which it completed tasks; a cluster already idle leaves at
  ``idle_since + T_idle``.  With no completed task in the interval the end is unknown (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fawkes.mechanism.memory import Memory
from fawkes.mechanism.model import ClusterState, ClusterView, Role, Snapshot
from fawkes.mechanism.settings import Settings


@dataclass(frozen=True, slots=True)
class FreeAt:
    host: str
    cluster: str  # "" for a free host
    at: float | None  # expected time the host is free; None = unknown
    why: str


def workload_end(c: ClusterView, idle_since: float | None) -> tuple[float | None, str]:
    """When the cluster's workload is expected to be done (tasks left / completion rate)."""
    if not c.samples:
        return None, "no sample"
    last = c.samples[-1]
    left = last.pending_tasks + last.running_tasks
    if left == 0:
        return (idle_since if idle_since is not None else last.time), "idle"
    first = c.samples[0]
    span = last.time - first.time
    done = last.completed_tasks - first.completed_tasks
    if span <= 0 or done <= 0:
        return None, f"{left} tasks left, no completion rate yet"
    return last.time + left * span / done, f"{left} tasks left at {done / span:.3g}/s"


def free_times(snap: Snapshot, settings: Settings, memory: Memory = Memory()) -> tuple[FreeAt, ...]:
    """One row per host of the pool that is free or held, soonest first (unknown last)."""
    rows = [FreeAt(h, "", snap.now, "free") for h in snap.free_hosts]
    for c in snap.clusters:
        m = memory.of(c.name, c.since)
        if c.state is ClusterState.SAVING:
            rows += [FreeAt(n.id, c.name, snap.now, "saving") for n in c.nodes]
            continue
        end, why = (workload_end(c, m.idle_since) if c.state is ClusterState.ACTIVE
                    else (None, f"{c.state.value}"))
        idle = settings.idle_timeout_of(c.name)
        leave = None if end is None or idle == float("inf") else max(snap.now, end + idle)
        surplus = 0 if m.target is None else max(0, c.settled - max(m.target, c.min_core))
        # the nodes a shrink would take first: transient before transient-core, fewest tasks first
        spare = sorted((n for n in c.nodes if n.role is not Role.CORE and not n.draining),
                       key=lambda n: (n.role is not Role.TR, n.running_tasks, n.stored_bytes, -n.added_at))
        early = {n.id for n in spare[:surplus]}
        for n in c.nodes:
            if n.draining:
                rows.append(FreeAt(n.id, c.name, snap.now, "draining"))
            elif n.id in early:
                at = snap.now + settings.period_s
                rows.append(FreeAt(n.id, c.name, at if leave is None else min(at, leave),
                                   f"above target {m.target}: next tick"))
            else:
                rows.append(FreeAt(n.id, c.name, leave, ("unknown: " + why if end is None else
                                                         "never: T_idle is never") if leave is None
                                   else f"workload done ({why}), then T_idle {idle:g} s"))
    return tuple(sorted(rows, key=lambda r: (r.at is None, r.at or 0.0, r.cluster, r.host)))


def free_by(rows: tuple[FreeAt, ...], count: int, now: float) -> float | None:
    """When ``count`` hosts are expected free (W of the wait-or-go rule), None if not foreseeable."""
    if count <= 0:
        return now
    known = [r.at for r in rows if r.at is not None]
    return known[count - 1] if len(known) >= count else None
