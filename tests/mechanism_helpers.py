"""Builders for mechanism snapshots used by several test modules."""

from __future__ import annotations

from fawkes.mechanism import ClusterMemory, ClusterMetrics, ClusterState, ClusterView, Memory, NodeView, Role


def cluster(name, core, *, tr=0, tc=0, state=ClusterState.ACTIVE, min_core=None, t0=0.0, samples=(), **kw):
    nodes = [NodeView(f"{name}-c{i}", Role.CORE) for i in range(core)]
    nodes += [NodeView(f"{name}-r{i}", Role.TR, added_at=float(i)) for i in range(tr)]
    nodes += [NodeView(f"{name}-t{i}", Role.TC, stored_bytes=1000 * (tc - i), added_at=float(i)) for i in range(tc)]
    held = len(nodes)
    kw.setdefault("allocation", ((t0, held),))
    return ClusterView(
        name=name, state=state, min_core=core if min_core is None else min_core, nodes=tuple(nodes),
        samples=tuple(samples), **kw,
    )


def demand(t, pending, running=0, **kw):
    return ClusterMetrics(time=t, pending_tasks=pending, running_tasks=running, unfinished_jobs=1 if pending + running else 0, **kw)


def memory(**per_cluster) -> Memory:
    """A controller memory: ``memory(a=dict(target=14), b=dict(weight=.25))`` (incarnations requested at 0)."""
    return Memory(tuple(sorted((n, ClusterMemory(since=0.0, **kw)) for n, kw in per_cluster.items())))
