#!/usr/bin/env python3
"""The parity replay at the soak's size: the simulator and the coordinator's Control decide alike.

    python bench/bench_parity_scale.py [--hosts 10000] [--clusters 1000] [--minutes 60] [--policy td-tc]
                                       [--failures-per-hour 0.05] [--state URL] [--out FILE]

The trace comes from the generator bench/bench_service_scale.py plays to its simulated fleet
(fawkes/simfleet/scenario.py, seed 1, 4 core nodes a cluster) at the generator's default rate of 30 jobs an hour
per cluster (three times that on c0; the soak runs 2 an hour), uncompressed (T = 120 s); the run goes on until
the trace's jobs have ended.
The simulator runs it with a recorder (invariants checked); tests/parity.py then replays every recorded
observation into a real store (a new SQLite file, or ``--state``) and, at every tick and every step between
ticks, compares the snapshot the store gives, the decision, the plans and the memory with the simulator's,
field by field.  Host failures: a transient node's host killed at seeded times (``--failures-per-hour`` per
host, as the soak's fleet fails them).  Prints the steps compared and the time of each part; exits 1 at the
first difference (printed).  With ``--out`` the figures go to a JSON file (command, commit, date, load).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=60.0, help="trace minutes (default 60)")
    ap.add_argument("--policy", default="td-tc", help="a FAWKES policy or preset (default td-tc, the soak's)")
    ap.add_argument("--failures-per-hour", type=float, default=0.05, help="host failures an hour per host")
    ap.add_argument("--state", help="a state URL (default: a new SQLite file)")
    ap.add_argument("--out", help="write the figures to this JSON file")
    a = ap.parse_args(argv)
    if not (1 <= a.clusters and 4 * a.clusters <= a.hosts <= 100_000 and 0 < a.minutes <= 1440
            and 0 <= a.failures_per_hour <= 10):
        ap.error("need 1 <= clusters, 4 x clusters <= hosts <= 100000, 0 < minutes <= 1440, "
                 "0 <= failures-per-hour <= 10")
    from fawkes.mechanism import Settings
    from fawkes.presets import read_preset
    from fawkes.sim.costs import cost_model
    from fawkes.sim.engine import Simulator
    from fawkes.sim.record import Recorder
    from fawkes.simfleet.scenario import write_scenario
    from fawkes.store import Store
    from fawkes.traces.costfile import load_cost_file
    from fawkes.traces.trace import load_trace
    from tests.parity import Clock, Mismatch, replay
    from tests.test_parity import fail_a_host

    preset = read_preset(a.policy)
    if preset.settings is None:
        ap.error(f"--policy {a.policy}: a FAWKES policy or preset, not a chapter-2 runner")
    settings = Settings(**{**preset.settings.model_dump(), "period_s": 120.0})
    d = Path(tempfile.mkdtemp(prefix="fawkes-parity-scale-"))
    sc = write_scenario(d, hosts=a.hosts, clusters=a.clusters, min_core=4, minutes=a.minutes, speedup=1, seed=1)
    wl = load_trace(sc.trace, capacity=a.hosts, min_core=4, period_s=settings.period_s, clusters_file=sc.clusters,
                    cost=cost_model(load_cost_file(sc.costs)))
    rng = random.Random(2)
    horizon = a.minutes * 60.0
    failures, t = [], 0.0
    rate = a.failures_per_hour * a.hosts / 3600.0
    while rate > 0:
        t += rng.expovariate(rate)
        if t >= horizon:
            break
        failures.append(t)
    print(f"# {a.hosts} hosts, {a.clusters} clusters, {len(wl.jobs)} jobs over {a.minutes:g} trace minutes, "
          f"{len(failures)} host failures, policy {a.policy} (T = {settings.period_s:g} s)", flush=True)
    rec = Recorder()
    t0 = time.perf_counter()
    sim = Simulator(wl, settings, recorder=rec, check_invariants=True)
    for t in failures:
        sim.at(t, fail_a_host)
    sim.run()
    sim_s = time.perf_counter() - t0
    print(f"simulated: {sim_s:.1f} s, {len(rec.events)} events, {rec.steps} controller steps, "
          f"{sim.stats.reconfigurations} reconfigurations, invariant errors {len(sim.stats.invariant_errors)}",
          flush=True)
    url = a.state or f"sqlite:///{d / 'parity.db'}"
    clock = Clock()
    store = Store(url, clock=clock)
    t0 = time.perf_counter()
    mismatch = None
    steps = 0
    try:
        steps = replay(rec, store, clock, settings, wl.capacity, wl.cost.slots_per_node)
    except Mismatch as exc:
        mismatch = str(exc)
    finally:
        store.close()
    replay_s = time.perf_counter() - t0
    ok = mismatch is None and steps == rec.steps and not sim.stats.invariant_errors
    print(f"replayed through Control on {url.split(':', 1)[0]}: {replay_s:.1f} s, {steps} of {rec.steps} steps "
          f"compared: {'the same snapshots, decisions, plans and memory' if ok else 'DIFFERENT'}", flush=True)
    if mismatch:
        print(f"first difference: {mismatch}", flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak_mb:.0f} MB", flush=True)
    if a.out:
        from bench.results_meta import meta

        doc = {**meta(), "hosts": a.hosts, "clusters": a.clusters,
               "trace_minutes": a.minutes, "jobs": len(wl.jobs), "host_failures": len(failures),
               "policy": a.policy, "period_s": settings.period_s, "events": len(rec.events),
               "steps_recorded": rec.steps, "steps_compared": steps, "same": ok, "first_difference": mismatch,
               "reconfigurations": sim.stats.reconfigurations, "simulate_s": round(sim_s, 1),
               "replay_s": round(replay_s, 1), "peak_rss_mb": round(peak_mb)}
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
