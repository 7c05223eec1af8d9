#!/usr/bin/env python3
"""Soak the real coordinator on a SIMULATED fleet (fawkes/simfleet) and time the paths that must be fast.

    python bench/bench_fleet.py [--hosts 1000] [--clusters 100] [--minutes 30] [--speedup 30] [--seed 1]
                                [--json FILE]

Two phases, each in its own process, in this order: the baseline (a tenth of the hosts and clusters)
and the full size, each playing ``--minutes`` of a seeded trace (fawkes/simfleet/scenario.py: clusters
of 4 core nodes, 30 jobs an hour each, c0 three times that; policy td-tc with T, the sample period and
tau compressed by ``--speedup``) on a SQLite state, with host failures (0.05 an hour per host) and 2 %
of daemon starts failing.  The coordinator is the real one (``fawkes.coordinator.service.build`` +
``Coordinator.run``: its scheduler, sampler, controller, reconciler, dispatcher; /metrics and the
dashboard served as ``coordinator run`` serves them); the bench only wraps its steps with a timer.

Per phase: the tick, sample and fast steps' p50 / p99 / max; the process' RSS at start, after the trace
and its maximum; ``GET /api/state`` and ``GET /metrics`` (median of 5, at the end), ``fawkes status``
(median of 3 processes); jobs done; the fault campaign's invariants.  Then each full-size figure
against its baseline.  The targets at 1,000 clusters (issue 26): a tick <= 1 s p99, /api/state <= 0.5 s,
/metrics <= 0.2 s, fawkes status <= 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
REPO = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    for ln in Path("/proc/self/status").read_text().splitlines():
        if ln.startswith("VmRSS:"):
            return int(ln.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(fn, into: list[float]):
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            into.append(time.perf_counter() - t0)
    return wrapper


def get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return time.perf_counter() - t0


def phase(hosts: int, clusters: int, minutes: float, speedup: float, seed: int) -> dict:
    """One soak in this process (``--one``): the figures as a dict."""
    from fawkes.config import load_config
    from fawkes.coordinator.metrics_http import serve
    from fawkes.coordinator.service import build, setup_logging
    from fawkes.inventory import load_inventory
    from fawkes.sim.costs import cost_model
    from fawkes.simfleet import invariants
    from fawkes.simfleet.player import Player
    from fawkes.simfleet.scenario import write_scenario
    from fawkes.store import Store
    from fawkes.traces.costfile import load_cost_file
    from fawkes.traces.trace import load_trace
    import logging

    rss0 = rss_mb()
    d = Path(tempfile.mkdtemp(prefix="fawkes-fleet-"))
    sc = write_scenario(d, hosts=hosts, clusters=clusters, min_core=4, minutes=minutes, speedup=speedup,
                        seed=seed, host_failures_per_hour=0.05, start_failure=0.02)
    inv = load_inventory(sc.inventory)
    store = Store(f"sqlite:///{sc.state}")
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores, "memory_mb": h.memory_mb,
                       "rack": None} for h in inv.hosts])
    store.register_framework("sim", "simulated", shared_dir="/simulated")
    wl = load_trace(sc.trace, capacity=hosts, min_core=4, period_s=120, clusters_file=sc.clusters,
                    cost=cost_model(load_cost_file(sc.costs)))
    player = Player(store, "sim", wl, speedup=speedup)
    cfg = load_config(sc.config)
    setup_logging(cfg.log_format, level=logging.WARNING)
    coord = build(cfg, inventory=inv)
    steps = {"tick": [], "sample": [], "fast": []}
    for k in steps:
        setattr(coord, k, timed(getattr(coord, k), steps[k]))
    _, _, port = serve(coord.store, coord.counters, "127.0.0.1", 0, web_ui=coord.sampler.web_ui)
    rss: list[tuple[float, float]] = []
    stop = threading.Event()

    def feed() -> None:
        player.t0 = time.time()
        while not player.done() and not stop.is_set():
            player.step()
            rss.append((time.time() - player.t0, rss_mb()))
            time.sleep(0.2)
        stop.wait(coord.settings.period_s)
        if not stop.is_set():
            at_end()

    base = f"http://127.0.0.1:{port}"
    end_figures: dict = {}

    def at_end() -> None:  # measured while the coordinator still runs, a period after the trace was played
        if not end_figures:
            end_figures["api_state_s"] = [get(base + "/api/state") for _ in range(5)]
            end_figures["metrics_s"] = [get(base + "/metrics") for _ in range(5)]
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            st = []
            for _ in range(3):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "fawkes", "status", "--state", f"sqlite:///{sc.state}"],
                               capture_output=True, env=env, check=True, timeout=120)
                st.append(time.perf_counter() - t0)
            end_figures["status_s"] = st
            end_figures["rss_end_mb"] = rss_mb()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    t0 = time.time()
    coord.run(duration_s=player.duration_s + 600.0 / speedup)
    wall = time.time() - t0
    stop.set()
    feeder.join(5)
    coord.fleet.ex.world.write_report()
    report = json.loads(sc.report.read_text())
    violations = invariants.check(store, report, player.submitted)
    jobs = Counter(j.state for j in store.list_jobs())
    out = {"hosts": hosts, "clusters": clusters, "minutes": minutes, "speedup": speedup, "seed": seed,
           "wall_s": round(wall, 1), "jobs": dict(jobs), "submitted": len(player.submitted),
           "reconfigurations": coord.counters["reconfigurations"], "ticks": len(steps["tick"]),
           "hosts_failed": len(report["failed_hosts"]), "start_failures": report["counts"].get("start_failures", 0),
           "unsimulated": report["unsimulated"], "violations": violations[:20],
           "rss_start_mb": round(rss0, 1), "rss_max_mb": round(max([r for _, r in rss] + [rss_mb()]), 1),
           "rss_series_mb": [(round(t, 1), round(r, 1)) for t, r in rss[:: max(1, len(rss) // 20)]]}
    for k, xs in steps.items():
        out[k] = {"n": len(xs), "p50_ms": round(1000 * pct(xs, 0.5), 1), "p99_ms": round(1000 * pct(xs, 0.99), 1),
                  "max_ms": round(1000 * max(xs, default=float("nan")), 1)}
    for k in ("api_state_s", "metrics_s", "status_s"):
        xs = end_figures.get(k, [])
        out[k] = {"median_ms": round(1000 * statistics.median(xs), 1) if xs else None,
                  "all_ms": [round(1000 * x, 1) for x in xs]}
    out["rss_end_mb"] = round(end_figures.get("rss_end_mb", rss_mb()), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--speedup", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if not (1 <= a.clusters and 4 * a.clusters <= a.hosts <= 100_000 and 0 < a.minutes <= 1440
            and 1 <= a.speedup <= 1000):
        ap.error("need 1 <= clusters, 4 x clusters <= hosts <= 100000, 0 < minutes <= 1440, 1 <= speedup <= 1000")
    if a.one:
        print(json.dumps(phase(a.hosts, a.clusters, a.minutes, a.speedup, a.seed)))
        return 0
    try:
        from bench.results_meta import meta
    except ImportError:
        from results_meta import meta

    runs = {}
    for name, h, c in (("baseline", max(4 * max(1, a.clusters // 10), a.hosts // 10), max(1, a.clusters // 10)),
                       ("full", a.hosts, a.clusters)):
        print(f"{name}: {h} simulated hosts, {c} clusters, {a.minutes:g} trace minutes at {a.speedup:g}x ...",
              flush=True)
        r = subprocess.run([sys.executable, __file__, "--one", "--hosts", str(h), "--clusters", str(c),
                            "--minutes", str(a.minutes), "--speedup", str(a.speedup), "--seed", str(a.seed)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        runs[name] = json.loads(r.stdout.strip().splitlines()[-1])
    b, f = runs["baseline"], runs["full"]
    rows = [("tick p50 ms", b["tick"]["p50_ms"], f["tick"]["p50_ms"], None),
            ("tick p99 ms", b["tick"]["p99_ms"], f["tick"]["p99_ms"], 1000),
            ("tick max ms", b["tick"]["max_ms"], f["tick"]["max_ms"], None),
            ("sample step p50 ms", b["sample"]["p50_ms"], f["sample"]["p50_ms"], None),
            ("sample step max ms", b["sample"]["max_ms"], f["sample"]["max_ms"], None),
            ("fast step p50 ms", b["fast"]["p50_ms"], f["fast"]["p50_ms"], None),
            ("RSS max MB", b["rss_max_mb"], f["rss_max_mb"], None),
            ("/api/state ms", b["api_state_s"]["median_ms"], f["api_state_s"]["median_ms"], 500),
            ("/metrics ms", b["metrics_s"]["median_ms"], f["metrics_s"]["median_ms"], 200),
            ("fawkes status ms", b["status_s"]["median_ms"], f["status_s"]["median_ms"], 1000)]
    print(f"{'':22} {'baseline':>10} {'full':>10} {'ratio':>7}  target (full)")
    for label, x, y, target in rows:
        ratio = (y / x) if x and y else float("nan")
        t = "" if target is None else (f"<= {target} {'met' if y is not None and y <= target else 'MISSED'}")
        print(f"{label:22} {x!s:>10} {y!s:>10} {ratio:7.2f}  {t}")
    for name, r in runs.items():
        print(f"{name}: {r['hosts']} hosts, {r['clusters']} clusters: {r['ticks']} ticks, wall {r['wall_s']} s, "
              f"jobs {r['jobs']} of {r['submitted']}, reconfigurations {r['reconfigurations']:g}, hosts failed "
              f"{r['hosts_failed']}, failed starts {r['start_failures']}, invariant violations {len(r['violations'])}"
              + (f", unsimulated commands {r['unsimulated']}" if r["unsimulated"] else ""))
    if a.json:
        Path(a.json).write_text(json.dumps({**meta(), "runs": runs}, indent=1) + "\n")
    return 1 if any(r["violations"] for r in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
