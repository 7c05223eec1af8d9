"""The fault campaign's invariants (bench/fault_campaign.py), checked on the state and on a SIMULATED
fleet's report (what ran where when the coordinator stopped): no host held twice, none leaked, no core
node removed from an active cluster, no job lost (nor launched twice)."""

from __future__ import annotations

from collections import defaultdict

from fawkes.mechanism import Role
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
    bad = []
    for c in store.list_clusters():
        until = c.saving_at if c.saving_at is not None else float("inf")
        for n in store.list_nodes(c.name, live=False):
            if Role(n.role) is not Role.CORE:
                continue
            for t in store.node_history(n.id):
                if t.to_state in (NodeState.DRAINING, NodeState.RELEASED) and t.time < until:
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
