"""Write what the mechanism decided into the durable state, before anything touches a host.

Intent first, action second: a decision becomes store rows (clusters admitted or leaving,
nodes allocated in state REQUESTED, nodes marked DRAINING); the reconciler then carries
them out.  A crash between the two leaves intent that the next run completes, never a
daemon the store does not know about.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from fawkes import faults
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, Decision, Plan, Settings, Snapshot
from fawkes.mechanism.memory import Memory
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState, leaving


def record_decision(store: Store, d: Decision, snap: Snapshot, settings: Settings, memory: Memory) -> int:
    """Persist one tick: inputs, weights, discriminations, gate, targets, plan and reason, and the
    controller memory it leaves (read back by the next step, :meth:`Control.memory`)."""
    inputs: dict[str, Any] = {
        "capacity": snap.capacity,
        "free_hosts": len(snap.free_hosts),
        "period_s": settings.period_s,
        "tau": settings.tau,
        "queue": [r.name for r in snap.queue],
        "clusters": {
            c.name: {"state": c.state.value, "min_core": c.min_core, "held": c.held, "settled": c.settled,
                     "samples": len(c.samples), "mean_sample": d.mean_samples.get(c.name)}
            | ({"scheduled_from": c.core_min} if c.core_min is not None else {})  # min_core raised by a schedule
            for c in snap.clusters
        },
        "admitted": list(d.admission.admitted),
        "deactivate": list(d.deactivate),
        "shrink_votes": dict(d.shrink_votes),
    }
    g = d.global_discrimination
    return store.record_decision(
        policy=d.policy, inputs=inputs, weights=d.weights, discriminations=d.discrimination,
        global_factor=g if math.isfinite(g) else -1.0, gate_open=d.gate_open,
        targets=d.targets, plan=d.to_dict()["plan"], reason=d.reason, time=d.time, memory=memory.to_json(),
    )


def apply(store: Store, plan: Plan, *, admitted: Iterable[str] = (), deactivate: Iterable[str] = (),
          why: str = "") -> list[str]:
    """Turn a plan into intent.  Returns one line per part that could not be applied.

    Every step is guarded by the lifecycle tables, so a race with a CLI call (a release, say)
    fails that step alone and is reported, not fatal.  Admissions and deactivations are one
    short transaction each; a plan's many node steps go through the store's batch writes
    (:meth:`Store.transition_nodes`, :meth:`Store.allocate_nodes`: a few transactions, the
    same checks per step, each refused step reported on its own).
    """
    problems: list[str] = []

    def attempt(what: str, fn, *args, **kw) -> None:
        try:
            fn(*args, **kw)
        except FawkesError as exc:
            problems.append(f"{what}: {exc}")

    for name in deactivate:
        attempt(f"deactivate {name}", store.transition_cluster, name, ClusterState.SAVING, "inactive for T_idle")
    for name in admitted:
        attempt(f"admit {name}", store.transition_cluster, name, ClusterState.DEPLOYING, "admitted: minimum share fits")
    if plan.shrinks:
        node_ids = store.live_node_ids({s.cluster for s in plan.shrinks})
        shrunk: list[str | None] = [None] * len(plan.shrinks)
        moves, where = [], []
        for k, s in enumerate(plan.shrinks):
            found = node_ids.get((s.cluster, s.node))
            if found is None:
                shrunk[k] = f"shrink {s.cluster}/{s.node}: node not found"
                continue
            node_id, state = found
            to = leaving(state)
            moves.append((node_id, to, f"{s.mode.value} ({why or 'plan'})" if to is NodeState.DRAINING
                          else f"cancelled before it started ({why or 'plan'})"))
            where.append(k)
        for k, err in zip(where, store.transition_nodes(moves)):
            if err is not None:
                s = plan.shrinks[k]
                shrunk[k] = f"shrink {s.cluster}/{s.node}: {err}"
        problems += [p for p in shrunk if p is not None]
        if moves:
            faults.point("drain-requested")
    if plan.grows:
        done = store.allocate_nodes([(g.cluster, g.host, g.role, f"{g.role.value} for {g.cluster} ({why or 'plan'})")
                                     for g in plan.grows])
        problems += [f"grow {g.cluster}/{g.host}: {r}" for g, r in zip(plan.grows, done) if isinstance(r, FawkesError)]
        faults.point("node-requested")
    store.record_events("plan", problems, level="warning")
    return problems
