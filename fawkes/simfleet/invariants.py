"""The fault campaign's invariants (bench/fault_campaign.py), checked on the state and on a SIMULATED
fleet's report (what ran where when the coordinator stopped): no host held twice, none leaked, no core
node removed from an active cluster, no job lost (nor launched twice)."""

from __future__ import annotations

from collections import defaultdict

from fawkes.mechanism import ClusterState, Role
from fawkes.store.lifecycle import JobState, NodeState


def ownership(store, report: dict) -> list[str]:
    bad = []
    holders: dict[str, list[str]] = defaultdict(list)
    names = {c.id: c.name for c in store.list_clusters()}
    for n in store.list_nodes():
        holders[n.host].append(names[n.cluster_id])
    for h in store.list_hosts():
        held = holders.get(h.name, [])
        if len(held) > 1:
            bad.append(f"host {h.name} held by {' and '.join(held)}")
        if h.state == "allocated" and not held:
            bad.append(f"host {h.name} leaked: allocated, held by no live node")
        if h.state == "free" and held:
            bad.append(f"host {h.name} free in the store but held by {held[0]}")
    for host, running in report.get("daemons", {}).items():
        if len(running) > 1:
            bad.append(f"host {host} runs daemons of {' and '.join(sorted(running))}")
        for c in running:
            if c not in holders.get(host, []):
                bad.append(f"host {host} leaked: daemons of {c} run there, no live node of {c} holds it")
    return bad


def core_nodes(store, report: dict) -> list[str]:
    """No core node drained or released while its cluster was ACTIVE (from each time it became active to
    its next transition: a deployment that lost a core node releases the others and queues the cluster
    again, a legitimate release before it was ever active)."""
    bad = []
    cores = defaultdict(list)  # cluster row id -> its core nodes (a name requested again is another row)
    for n in store.list_nodes(live=False):
        if Role(n.role) is Role.CORE:
            cores[n.cluster_id].append(n)
    for c in store.list_clusters():
        history = store.cluster_history(cluster_id=c.id)
        active = [(t.time, nxt.time if nxt is not None else float("inf"))
                  for t, nxt in zip(history, history[1:] + [None]) if t.to_state == ClusterState.ACTIVE]
        if not active:
            continue
        for n in cores[c.id]:
            for t in store.node_history(n.id):
                if t.to_state in (NodeState.DRAINING, NodeState.RELEASED) and any(a <= t.time < b for a, b in active):
                    bad.append(f"core node {n.host} of {c.name} {t.to_state} while the cluster was active")
    bad += [f"core daemons of {r['cluster']} stopped on {r['host']} ({r['how']})" for r in report.get("removed", ())
            if r["role"] == Role.CORE.value and r["how"] != "teardown"]
    return bad


def jobs_lost(store, report: dict, submitted: dict[int, str]) -> list[str]:
    """Every submitted job in the state; none failed or cancelled; each launched at most once; every job
    the state has started was launched on the fleet."""
    bad = []
    jobs = {j.id: j for j in store.list_jobs()}
    bad += [f"job {j} lost from the state" for j in sorted(set(submitted) - set(jobs))]
    launches = report.get("launches", {})
    for j in jobs.values():
        key = f"{submitted.get(j.id, '?')}/{j.id}"
        if JobState(j.state) in (JobState.FAILED, JobState.CANCELLED):
            bad.append(f"job {j.id} {j.state}: {j.detail}")
        if launches.get(key, 0) > 1:
            bad.append(f"job {j.id} launched {launches[key]} times")
        if JobState(j.state) in (JobState.RUNNING, JobState.SUCCEEDED) and launches.get(key, 0) == 0:
            bad.append(f"job {j.id} {j.state} in the state, never launched on the fleet")
    return bad


def check(store, report: dict, submitted: dict[int, str]) -> list[str]:
    return ownership(store, report) + core_nodes(store, report) + jobs_lost(store, report, submitted)
