#!/usr/bin/env python3
"""Simulator cost over idle time: a year of office hours against the same jobs with the idle time cut.

    python bench/bench_sim_idle.py [--jobs 5000] [--days 365] [--policy TD] [--period 60] [--keep DIR]

Generates two job traces (CSV, ``fawkes simulate --trace`` format) from one seeded draw:

* ``year.csv``: about 5,000 jobs of 4 teams over 365 days starting on a Monday, submitted in office
  hours (09:00-17:00) on weekdays only: nights and weekends are idle;
* ``cut.csv``: the same jobs, in the same order, with the nights and weekends cut out (the office
  hours of consecutive weekdays put end to end).

Each trace runs once under the same settings (TD, T = 60 s, 5 s samples, T_idle = 600 s, 32 nodes,
4 clusters of minimum 4) in its own forked process; the reference runtimes (each job alone on 10
core nodes) are computed once, before, and not timed.  Prints each run's simulated span, ticks
(all, and those actually run), events, wall and CPU time and peak RSS (the child's ``ru_maxrss``,
which includes what it inherits: the interpreter, the workloads), the ratios, and the targets of
issue 14 item 5: the year-long run takes at most 1.5x the wall time of the cut one and at most
500 MB.  Exit code 1 when a target is missed.  Each trace runs ``--repeat`` times (3), alternated;
the fastest wall and CPU times and the highest peak count.  The machine's other load shows in wall
times; the CPU-time ratio is printed beside the wall-time one.
``--no-shortcut`` runs the simulator without its idle-time shortcut (``Simulator._idle_jumps``),
for the figures before it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed fawkes

import numpy as np  # noqa: E402

from fawkes.traces.trace import TraceRow, load_trace, write_trace  # noqa: E402

DAY = 86400.0
OPEN, CLOSE = 9 * 3600.0, 17 * 3600.0  # office hours
TEAMS = (("etl", 0.4, ("sort", "wordcount")), ("bi", 0.3, ("wordcount", "grep")),
         ("ml", 0.15, ("kmeans", "pagerank")), ("adhoc", 0.15, ("grep", "wordcount", "sort")))
MB = 1024.0**2


def generate(jobs: int, days: int, seed: int) -> tuple[list[TraceRow], list[TraceRow]]:
    """(year rows, cut rows): the same jobs; submit times in office hours of weekdays over ``days``
    days (day 0 a Monday), and the same instants with nights and weekends removed."""
    rng = np.random.default_rng([seed, 14, 5])
    weekdays = [d for d in range(days) if d % 7 < 5]
    office = CLOSE - OPEN
    pos = np.sort(rng.uniform(0.0, len(weekdays) * office, jobs))  # instants of the office time
    names = [t[0] for t in TEAMS]
    share = np.array([t[1] for t in TEAMS])
    year, cut = [], []
    for k, p in enumerate(pos):
        i = int(rng.choice(len(TEAMS), p=share / share.sum()))
        name, _, apps = TEAMS[i]
        app = apps[int(rng.integers(0, len(apps)))]
        size = float(min(64 * 1024 * MB, max(256 * MB, rng.lognormal(math.log(3 * 1024 * MB), 1.1))))
        maps = max(1, math.ceil(size / (128 * MB)))
        reduces = 0 if app == "grep" else max(1, maps // 10)
        day, into = divmod(float(p), office)
        t_year = weekdays[int(day)] * DAY + OPEN + into
        job = f"{names[i]}-{k:05d}"
        year.append(TraceRow(round(t_year, 3), name, app, size, maps, reduces, job=job))
        cut.append(TraceRow(round(float(p), 3), name, app, size, maps, reduces, job=job))
    return year, cut


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return math.nan


def _child(wl, settings, refs, shortcut: bool, w) -> None:
    from fawkes.sim.engine import Simulator

    start_rss = _rss_mb()
    sim = Simulator(wl, settings, refs=refs)
    if hasattr(sim, "_idle_jumps"):
        sim._idle_jumps = shortcut
    t0, c0 = time.perf_counter(), time.process_time()
    sim.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    from fawkes.sim.metrics import collect

    r = collect(sim, wl.name, settings.policy, 0, wall)
    os.write(w, json.dumps({"wall": wall, "cpu": cpu, "peak": peak, "start": start_rss, "events": r.events,
                            "jobs": r.jobs, "end": sim.now, "reconf": r.reconfigurations,
                            "slowdown": r.mean_slowdown, "ticks": sim.decisions,
                            "run": sim.decisions - getattr(sim, "ticks_skipped", 0)}).encode())
    os.close(w)


def run_forked(wl, settings, refs, shortcut: bool) -> dict:
    """One run in a forked child (its own peak RSS); returns its figures."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code = 0
        try:
            _child(wl, settings, refs, shortcut, w)
        except BaseException as exc:  # noqa: BLE001 - reported by the parent
            os.write(w, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            code = 1
        os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    out = json.loads(b"".join(chunks).decode() or "{}")
    if "error" in out or os.WEXITSTATUS(status) != 0 or not out:
        raise SystemExit(f"run failed: {out.get('error', f'exit status {status}')}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", default="TD")
    ap.add_argument("--period", type=float, default=60.0, help="T in seconds")
    ap.add_argument("--idle-timeout", type=float, default=600.0, help="T_idle in seconds")
    ap.add_argument("--capacity", type=int, default=32)
    ap.add_argument("--min-core", type=int, default=4)
    ap.add_argument("--keep", metavar="DIR", help="write the two traces here (else a temporary directory)")
    ap.add_argument("--no-shortcut", action="store_true", help="step through idle time (the cost before)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each trace, alternated; the fastest counts")
    a = ap.parse_args()

    from fawkes.sim.runner import parse_policy, reference_runtimes, settings_for

    year, cut = generate(a.jobs, a.days, a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(a.keep or tmp)
        d.mkdir(parents=True, exist_ok=True)
        for name, rows in (("year.csv", year), ("cut.csv", cut)):
            with open(d / name, "w") as f:
                write_trace(rows, f)
        kw = dict(capacity=a.capacity, min_core=a.min_core, period_s=a.period, idle_timeout_s=a.idle_timeout)
        wl_year = load_trace(d / "year.csv", **kw)
        wl_cut = load_trace(d / "cut.csv", **kw)
    t0 = time.perf_counter()
    refs = list(reference_runtimes(wl_year))  # the same jobs and durations in both traces
    refs_s = time.perf_counter() - t0
    spec = parse_policy(a.policy)
    settings = settings_for(wl_year, spec)
    tasks = sum(j.tasks for j in wl_year.jobs)
    span = lambda rows: (rows[-1].submit_s - rows[0].submit_s) / DAY  # noqa: E731
    print(f"{len(year)} jobs, {tasks} tasks, {len(TEAMS)} clusters; year trace spans {span(year):.0f} days, "
          f"cut trace {span(cut):.1f} days; {settings.policy}, T = {settings.period_s:g} s, samples every "
          f"{settings.sample_period_s:g} s, T_idle = {settings.idle_timeout:g} s; capacity {a.capacity}; "
          f"reference runtimes {refs_s:.1f} s (not timed)"
          + ("; idle-time shortcut OFF" if a.no_shortcut else ""))
    runs: dict[str, list[dict]] = {"cut": [], "year": []}
    for _ in range(max(1, a.repeat)):  # alternated, so that the machine's other load hits both alike
        for label, wl in (("cut", wl_cut), ("year", wl_year)):
            runs[label].append(run_forked(wl, settings, refs, not a.no_shortcut))
    res = {}
    for label, rs in runs.items():
        res[label] = min(rs, key=lambda r: r["wall"]) | {"cpu": min(r["cpu"] for r in rs),
                                                          "peak": max(r["peak"] for r in rs)}
    print(f"{'trace':>5} {'sim days':>9} {'ticks':>8} {'run':>8} {'events':>10} {'wall_s':>8} {'cpu_s':>8} {'peak_MB':>8} "
          f"{'start_MB':>8} {'jobs':>5} {'reconf':>6} {'slowdown':>8}")
    for label, r in res.items():
        print(f"{label:>5} {r['end'] / DAY:>9.1f} {r['ticks']:>8} {r['run']:>8} {r['events']:>10} {r['wall']:>8.2f} "
              f"{r['cpu']:>8.2f} {r['peak']:>8.0f} {r['start']:>8.0f} {r['jobs']:>5} {r['reconf']:>6} "
              f"{r['slowdown']:>8.3f}")
    ratio = res["year"]["wall"] / res["cut"]["wall"]
    peak = res["year"]["peak"]
    ok_ratio, ok_rss = ratio <= 1.5, peak <= 500.0
    print(f"wall time year / cut: {ratio:.2f} (target <= 1.5: {'met' if ok_ratio else 'MISSED'}; CPU time "
          f"{res['year']['cpu'] / res['cut']['cpu']:.2f}); "
          f"peak RSS of the year run: {peak:.0f} MB (target <= 500 MB: {'met' if ok_rss else 'MISSED'})")
    return 0 if ok_ratio and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())
