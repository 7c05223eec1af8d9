#!/usr/bin/env python3
"""Time one full FAWKES decision (weights, discrimination, targets, plan) at scale.

    python bench/bench_decision.py [--repeat 5]

Snapshots of 10, 100 and 1,000 MR-clusters over 50,000 nodes (90 % held by the clusters,
the rest free; one sample per 5 s over T = 120 s; every cluster with TR and TC nodes to choose
victims from).  Target: at most 100 ms per decision at 1,000 clusters, growing no worse
than linearly.  The baseline in the same run is the cost of merely walking every node of the
snapshot once (a lower bound for any decision that looks at nodes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from fawkes.mechanism import ClusterMetrics, ClusterState, ClusterView, NodeView, Role, Settings, Snapshot, decide

NODES = 50_000
T = 120.0


def build(n_clusters: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    held_total = NODES * 9 // 10
    per = held_total // n_clusters
    clusters = []
    for i in range(n_clusters):
        core = max(1, per // 3)
        nodes = [NodeView(f"c{i}-n{j}", Role.CORE) for j in range(core)]
        for j in range(core, per):
            role = Role.TR if j % 2 else Role.TC
            nodes.append(NodeView(f"c{i}-n{j}", role, running_tasks=rng.randrange(8),
                                  stored_bytes=rng.randrange(10**10), added_at=float(j)))
        samples = tuple(
            ClusterMetrics(time=t, unfinished_jobs=rng.randrange(50), pending_tasks=rng.randrange(5000),
                           running_tasks=rng.randrange(800), busy_slots=rng.random() * 800, configured_slots=800)
            for t in range(5, int(T) + 1, 5)
        )
        alloc = ((0.0, per - 3), (rng.random() * T, per))
        clusters.append(ClusterView(f"c{i}", ClusterState.ACTIVE, core, tuple(nodes), samples, alloc))
    free = tuple(f"free{j}" for j in range(NODES - per * n_clusters))
    return Snapshot(now=T, capacity=NODES, free_hosts=free, clusters=tuple(clusters))


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cfg = Settings(policy="TD", period_s=T, tau=0.0)
    print(f"{'clusters':>8} {'nodes':>7} {'decision ms':>12} {'walk ms':>8} {'ratio':>6} {'grows':>6} {'shrinks':>7}")
    base = None
    for n in (10, 100, 1000):
        snap = build(n)
        d = decide(snap, cfg)
        t_dec = timed(lambda: decide(snap, cfg), args.repeat)
        t_walk = timed(lambda: sum(len(c.nodes) for c in snap.clusters) + sum(1 for c in snap.clusters for _ in c.nodes), args.repeat)
        base = base or t_dec
        print(f"{n:>8} {NODES:>7} {t_dec * 1e3:>12.1f} {t_walk * 1e3:>8.1f} {t_dec / t_walk:>6.1f} "
              f"{len(d.plan.grows):>6} {len(d.plan.shrinks):>7}")
    print(f"target: <= 100 ms at 1,000 clusters; growth 10 -> 1000 clusters: {t_dec / base:.1f}x")


if __name__ == "__main__":
    main()
