"""Metrics of one simulated run (docs/simulation.md) and their aggregation over seeds."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunResult:
    experiment: str
    policy: str
    seed: int
    mean_slowdown: float
    cluster_mean_slowdown: dict[str, float]
    p50_slowdown: float
    p95_slowdown: float
    p95_over_p50: float
    mean_response_s: float
    cluster_mean_response_s: dict[str, float]
    reconfigurations: int
    cluster_resizes: dict[str, int]
    global_discrimination: float  # mean over ticks of E[D^2]
    global_discrimination_max: float
    overall_discrimination: dict[str, float]  # D_i over the cluster's life (fraction * s)
    makespan_s: float
    cluster_makespan_s: dict[str, float]
    utilization: float  # busy slot-seconds / (C * slots per node * makespan)
    allocated_fraction: float  # node-seconds held / (C * makespan)
    killed_tasks: int
    lost_map_outputs: int
    rereplicated_bytes: float
    jobs: int
    tasks: int
    events: int
    wall_s: float
    rerequests: int = 0
    invariant_errors: list[str] = field(default_factory=list)
    timeline: dict[str, Any] | None = None

    def to_dict(self, timeline: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not timeline:
            d.pop("timeline", None)
        return d


def collect(sim, experiment: str, policy: str, seed: int, wall_s: float, timeline: bool = False) -> RunResult:
    jobs = sim.done_jobs
    slow: dict[str, list[float]] = {}
    resp: dict[str, list[float]] = {}
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    all_slow = []
    for j in jobs:
        c = j.spec.cluster
        r = j.end - j.submit
        resp.setdefault(c, []).append(r)
        if j.ref:
            s = r / j.ref
            slow.setdefault(c, []).append(s)
            all_slow.append(s)
        first[c] = min(first.get(c, math.inf), j.submit)
        last[c] = max(last.get(c, 0.0), j.end)
    names = [c.name for c in sim.wl.clusters]
    p50 = float(np.percentile(all_slow, 50)) if all_slow else math.nan
    p95 = float(np.percentile(all_slow, 95)) if all_slow else math.nan
    g = sim.stats.ticks.g_mean_max()  # (mean, max) of the finite G over every tick, or None
    start = min(first.values(), default=0.0)
    end = max(last.values(), default=0.0)
    makespan = end - start
    cap_slots = sim.capacity * sim.cost.slots_per_node
    st = sim.stats
    res = RunResult(
        experiment=experiment,
        policy=policy,
        seed=seed,
        mean_slowdown=_mean(all_slow),
        cluster_mean_slowdown={c: _mean(slow.get(c, [])) for c in names},
        p50_slowdown=p50,
        p95_slowdown=p95,
        p95_over_p50=p95 / p50 if all_slow and p50 > 0 else math.nan,
        mean_response_s=_mean([r for v in resp.values() for r in v]),
        cluster_mean_response_s={c: _mean(resp.get(c, [])) for c in names},
        reconfigurations=st.reconfigurations,
        cluster_resizes={c: st.resizes.get(c, 0) for c in names},
        global_discrimination=g[0] if g else 0.0,
        global_discrimination_max=g[1] if g else 0.0,
        overall_discrimination={c: st.overall_d.get(c, 0.0) for c in names},
        makespan_s=makespan,
        cluster_makespan_s={c: last.get(c, 0.0) - first.get(c, 0.0) for c in names},
        utilization=st.busy_slot_s / (cap_slots * makespan) if makespan > 0 else 0.0,
        allocated_fraction=st.node_s / (sim.capacity * end) if end > 0 else 0.0,
        killed_tasks=st.killed_tasks,
        lost_map_outputs=st.lost_maps,
        rereplicated_bytes=st.rereplicated_bytes,
        jobs=len(jobs),
        tasks=sim.wl.tasks,
        events=st.events,
        wall_s=wall_s,
        rerequests=st.rerequests,
        invariant_errors=list(st.invariant_errors[:20]),
    )
    if timeline:
        res.timeline = {
            "allocation": {c: sim.alloc_tl[c] for c in names},
            "queue": {c: sim.queue_tl[c] for c in names},
            "reconfigurations": list(st.reconfig_times),
            "capacity": sim.capacity,
        }
    return res


def _mean(xs) -> float:
    return float(statistics.fmean(xs)) if xs else math.nan


SCALARS = ("mean_slowdown", "p50_slowdown", "p95_slowdown", "p95_over_p50", "mean_response_s", "reconfigurations",
           "global_discrimination", "makespan_s", "utilization", "allocated_fraction", "killed_tasks",
           "rereplicated_bytes")
PER_CLUSTER = ("cluster_mean_slowdown", "cluster_mean_response_s", "cluster_makespan_s", "cluster_resizes",
               "overall_discrimination")


def aggregate(results: list[RunResult]) -> dict[str, Any]:
    """Means over seeds plus their spread (population standard deviation, min and max)."""
    r0 = results[0]
    out: dict[str, Any] = {"experiment": r0.experiment, "policy": r0.policy, "seeds": [r.seed for r in results]}
    spread: dict[str, Any] = {}
    for k in SCALARS:
        vals = [float(getattr(r, k)) for r in results]
        out[k] = _nanmean(vals)
        spread[k] = _spread(vals)
    for k in PER_CLUSTER:
        names = list(getattr(r0, k))
        out[k] = {c: _nanmean([float(getattr(r, k)[c]) for r in results]) for c in names}
        spread[k] = {c: _spread([float(getattr(r, k)[c]) for r in results]) for c in names}
    out["spread"] = spread
    out["per_seed"] = [{"seed": r.seed, "mean_slowdown": r.mean_slowdown,
                        "cluster_mean_slowdown": r.cluster_mean_slowdown,
                        "reconfigurations": r.reconfigurations, "makespan_s": r.makespan_s} for r in results]
    out["jobs"] = r0.jobs
    out["tasks"] = r0.tasks
    out["events"] = sum(r.events for r in results)
    out["invariant_errors"] = sum(len(r.invariant_errors) for r in results)
    return out


def _nanmean(vals: list[float]) -> float:
    v = [x for x in vals if not math.isnan(x)]
    return float(statistics.fmean(v)) if v else math.nan


def _spread(vals: list[float]) -> dict[str, float]:
    v = [x for x in vals if not math.isnan(x)]
    if not v:
        return {"std": math.nan, "min": math.nan, "max": math.nan}
    return {"std": float(statistics.pstdev(v)), "min": min(v), "max": max(v)}
