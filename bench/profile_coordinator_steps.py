#!/usr/bin/env python3
"""Profile the coordinator's scheduled steps (fast, sample, tick) on a SIMULATED fleet, under cProfile.

    python bench/profile_coordinator_steps.py [--hosts 1000] [--clusters 100] [--minutes 5] [--speedup 30]
                                              [--state URL] [--top 35]

The real coordinator (``fawkes.coordinator.service.build`` + ``Coordinator.run``) over a seeded
scenario (fawkes/simfleet/scenario.py: 4 core nodes a cluster, 30 jobs an hour each, host failures,
failed starts), each step wrapped in a profiler of its own; prints each step's count, p50 and max, then
its ``--top`` most expensive calls (cumulative).  A diagnostic, not a benchmark: the profiler roughly
doubles the times and there is no baseline; speed figures come from bench/bench_fleet.py and
bench/bench_service_scale.py.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=5.0, help="trace minutes")
    ap.add_argument("--speedup", type=float, default=30.0)
    ap.add_argument("--state", help="a state URL (default: a new SQLite file)")
    ap.add_argument("--top", type=int, default=35)
    a = ap.parse_args(argv)
    if not (1 <= a.clusters and 4 * a.clusters <= a.hosts <= 100_000 and 0 < a.minutes <= 1440
            and 1 <= a.speedup <= 1000 and 1 <= a.top <= 1000):
        ap.error("need 1 <= clusters, 4 x clusters <= hosts <= 100000, 0 < minutes <= 1440, 1 <= speedup <= 1000")
    from fawkes.config import load_config
    from fawkes.coordinator.service import build, setup_logging
    from fawkes.inventory import load_inventory
    from fawkes.sim.costs import cost_model
    from fawkes.simfleet.player import Player
    from fawkes.simfleet.scenario import write_scenario
    from fawkes.store import Store
    from fawkes.traces.costfile import load_cost_file
    from fawkes.traces.trace import load_trace

    d = Path(tempfile.mkdtemp(prefix="fawkes-prof-"))
    sc = write_scenario(d, hosts=a.hosts, clusters=a.clusters, min_core=4, minutes=a.minutes, speedup=a.speedup,
                        seed=1, host_failures_per_hour=0.05, start_failure=0.02, state=a.state)
    inv = load_inventory(sc.inventory)
    store = Store(a.state or f"sqlite:///{sc.state}")
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores, "memory_mb": h.memory_mb,
                       "rack": None} for h in inv.hosts])
    store.register_framework("sim", "simulated", shared_dir="/simulated")
    wl = load_trace(sc.trace, capacity=a.hosts, min_core=4, period_s=120, clusters_file=sc.clusters,
                    cost=cost_model(load_cost_file(sc.costs)))
    player = Player(store, "sim", wl, speedup=a.speedup)
    setup_logging(load_config(sc.config).log_format, level=logging.WARNING)
    coord = build(load_config(sc.config), inventory=inv)
    profiles = {k: cProfile.Profile() for k in ("fast", "sample", "tick")}
    times: dict[str, list[float]] = {k: [] for k in profiles}
    for k, prof in profiles.items():
        step = getattr(coord, k)

        def wrapped(step=step, k=k, prof=prof):
            t0 = time.perf_counter()
            prof.enable()
            try:
                return step()
            finally:
                prof.disable()
                times[k].append(time.perf_counter() - t0)
        setattr(coord, k, wrapped)

    def feed() -> None:
        player.t0 = time.time()
        while not player.done():
            player.step()
            time.sleep(0.2)
    threading.Thread(target=feed, daemon=True).start()
    coord.run(duration_s=player.duration_s + 20)
    for k, prof in profiles.items():
        xs = sorted(times[k])
        print(f"== {k}: n={len(xs)} p50={xs[len(xs) // 2] if xs else 0:.3f} max={max(xs, default=0):.3f}")
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(a.top)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
