#!/usr/bin/env python3
"""Simulated events per second and wall time for workload D at 1x, 10x and 100x scale.

    python bench/bench_sim.py [--scales 1,10,100] [--policy TD]

Scale multiplies the jobs, the nodes and the minima.  The baseline in the same run is the
1x workload: the last column is wall time per task relative to it (about 1 means cost grows
linearly with the number of tasks).
"""

from __future__ import annotations

import argparse
import time

from fawkes.sim.runner import parse_policy, run_one
from fawkes.sim.workloads import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="1,10,100")
    ap.add_argument("--policy", default="TD")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    spec = parse_policy(args.policy, "D")
    print(f"{'scale':>5} {'jobs':>7} {'tasks':>9} {'events':>10} {'gen s':>7} {'sim s':>8} {'events/s':>10} "
          f"{'s/ktask':>8} {'vs 1x':>6}")
    base = None
    for scale in (int(s) for s in args.scales.split(",")):
        t0 = time.perf_counter()
        wl = generate("D", args.seed, scale)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = run_one(wl, spec, args.seed, experiment="D")
        t_sim = time.perf_counter() - t0
        per_task = t_sim / r.tasks
        base = base or per_task
        print(f"{scale:>5} {r.jobs:>7} {r.tasks:>9} {r.events:>10} {t_gen:>7.2f} {t_sim:>8.2f} "
              f"{r.events / t_sim:>10.0f} {per_task * 1e3:>8.3f} {per_task / base:>6.2f}")


if __name__ == "__main__":
    main()
