"""A seeded SIMULATED-fleet scenario on disk: inventory, cost file, trace, cluster file and coordinator
config, every period and timeout of the config divided by the fleet's ``speedup`` (the CI test and
``bench/bench_fleet.py`` run the real coordinator on it).

The trace: ``clusters`` MR-clusters, each requested at 0 with ``min_core`` core nodes, jobs arriving
Poisson at ``jobs_per_cluster_hour`` per cluster over ``minutes`` (trace time), each of 8-160 tasks
of 5-30 slot-seconds (uniform), at least one per cluster; cluster ``c0`` gets three times the others'
rate (the imbalance the policy corrects).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from fawkes.traces.trace import TraceRow, write_trace

#: the lab's measured costs (bench/results/HISTORY.md, the twin: the second export; 2-core loaded lab, so slow)
#: where one was measured, the cost model's defaults otherwise
LAB_COSTS = {"map_slots": 1, "job_startup_s": 115.0, "job_overhead_s": 8.0, "tc_ready_s": 97.0,
             "tr_ready_s": 97.0, "core_ready_s": 97.0, "dp_fixed_s": 25.0, "fp_stop_s": 5.0, "deploy_s": 30.0,
             "cv": 0.3}


@dataclass(frozen=True)
class Scenario:
    dir: Path
    inventory: Path
    config: Path
    trace: Path
    clusters: Path
    costs: Path
    report: Path
    state: Path
    speedup: float
    minutes: float


def write_scenario(d: Path, *, hosts: int = 100, clusters: int = 5, min_core: int = 4, minutes: float = 10.0,
                   speedup: float = 20.0, seed: int = 1, jobs_per_cluster_hour: float = 30.0, cores: int = 4,
                   host_failures_per_hour: float = 0.0, start_failure: float = 0.0, policy: str = "td-tc",
                   period_s: float = 120.0, sample_period_s: float = 5.0, state: str | None = None,
                   costs: dict | None = None) -> Scenario:
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    costs_path = d / "costs.yaml"
    costs_path.write_text("# SIMULATED fleet costs (fawkes/simfleet/scenario.py: LAB_COSTS)\n"
                          + "".join(f"{k}: {v}\n" for k, v in (costs or LAB_COSTS).items()))
    report = d / "fleet-report.json"
    inv = d / "inventory.yaml"
    inv.write_text(f"simulated:\n  hosts: {hosts}\n  cores: {cores}\n  costs: costs.yaml\n  speedup: {speedup}\n"
                   f"  seed: {seed}\n  host_failures_per_hour: {host_failures_per_hour}\n"
                   f"  start_failure: {start_failure}\n  report: {report.name}\n")
    names = [f"c{i}" for i in range(clusters)]
    rows = []
    for i, c in enumerate(names):
        rate = jobs_per_cluster_hour * (3 if i == 0 else 1) / 3600.0
        t = rng.expovariate(rate)
        if t >= minutes * 60:  # every cluster of the trace has a job (the trace names its clusters by them)
            t = rng.uniform(0, minutes * 60)
        while t < minutes * 60:
            tasks = rng.randint(8, 160)
            rows.append(TraceRow(round(t, 3), c, "wordcount", float(tasks * 128 * 1024 * 1024), tasks, 0,
                                 map_s=round(rng.uniform(5, 30), 3)))
            t += rng.expovariate(rate)
    rows.sort(key=lambda r: r.submit_s)
    trace = d / "trace.csv"
    with trace.open("w") as f:
        write_trace(rows, f)
    cl = d / "clusters.csv"
    cl.write_text("cluster,request_s,min_core\n" + "".join(f"{c},0,{min_core}\n" for c in names))
    s = speedup
    state_path = d / "fawkes.db"
    preset = _compressed_preset(d, policy, s)
    cfg = d / "config.yaml"
    cfg.write_text(f"state: {state or state_path.name}\ninventory: {inv.name}\npolicy: {preset.name}\n"
                   f"period: {max(1.0, period_s / s):g}\nsample_period: {max(0.1, sample_period_s / s):g}\n"
                   f"host_grace: {max(0.5, 30.0 / s):g}\n"
                   "metrics: {bind: 127.0.0.1, port: 0}\n"
                   f"timeouts: {{requested: {max(5.0, 600 / s):g}, provisioning: {max(5.0, 900 / s):g}, "
                   f"draining: {max(5.0, 3600 / s):g}, op: {max(5.0, 600 / s):g}, drain: {max(1.0, 60 / s):g}, "
                   f"graceful: {max(1.0, 120 / s):g}}}\n"
                   "idle_timeout_s: never\n")
    return Scenario(d, inv, cfg, trace, cl, costs_path, report, state_path, speedup, minutes)


def _compressed_preset(d: Path, policy: str, speedup: float) -> Path:
    """The preset ``policy`` with its seconds divided by ``speedup`` and tau by its square (the global
    factor is a mean of squared integrals over T: compressing time by k divides it by k^2), so that the
    compressed run decides as the uncompressed one would."""
    import yaml

    from fawkes.presets import find_preset

    doc = yaml.safe_load(find_preset(policy).read_text())
    for k in list(doc):
        if k.endswith("_s") and isinstance(doc[k], (int, float)) and not isinstance(doc[k], bool):
            doc[k] = max(1.0 if k == "period_s" else 0.1 if k == "sample_period_s" else 0.0, doc[k] / speedup)
    if isinstance(doc.get("tau"), (int, float)):
        doc["tau"] = doc["tau"] / speedup**2
    doc["description"] = f"{policy}, time compressed {speedup:g}x for a SIMULATED fleet (fawkes/simfleet)"
    out = d / f"{policy}-x{speedup:g}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out
