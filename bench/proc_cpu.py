#!/usr/bin/env python3
"""CPU seconds by what a process runs (a JVM's main class, a Python script or module, else the command),
sampled from /proc while something else runs: where the suite's or a benchmark's CPU goes.

    python3 bench/proc_cpu.py [--interval 1] [--for SECONDS] [--top 25] [--json FILE]

Every ``--interval`` seconds each process' user + system ticks are read (``/proc/PID/stat``) with its command
line; at the end (``--for`` elapsed, or SIGINT/SIGTERM) the CPU each process used while it was seen is summed
by class and printed, largest first, with the processes counted and the lifetime seen.  A process that lived
less than one interval is missed and the CPU of the last interval of each process is lost: a lower bound per
class (``bench/suite_cpu.py`` counts every exited process by process accounting, by command name only).
Reads /proc only; about 1 % of one core at 1 s on a few hundred processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from results_meta import meta

TICK = os.sysconf("SC_CLK_TCK")


def classify(argv: list[str], comm: str) -> str:
    """What a process runs: ``java <main class>`` (the first argument after the JVM's options and class path),
    ``python <script or -m module>``, else its command name."""
    if not argv:
        return comm
    exe = Path(argv[0]).name
    if exe == "java":
        skip = False
        for a in argv[1:]:
            if skip:
                skip = False
                continue
            if a in ("-cp", "-classpath", "--class-path", "--add-opens", "--add-exports", "-jar"):
                if a == "-jar":
                    return "java -jar"
                skip = True
                continue
            if a.startswith("-"):
                continue
            return f"java {a.rsplit('.', 1)[-1]}"
        return "java"
    if exe.startswith("python"):
        rest = argv[1:]
        while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
            rest = rest[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return f"python -m {rest[1]}"
        if rest[:1] == ["-c"]:
            return "python -c"
        if rest:
            return f"python {Path(rest[0]).name}" + (f" {rest[1]}" if Path(rest[0]).name == "fawkes" and len(rest) > 1 else "")
        return "python"
    return exe or comm


def read(pid: str) -> tuple[str, int, float] | None:
    """(class, user + system ticks, start ticks) of ``pid``, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    f = stat[stat.rindex(")") + 2:].split()
    return classify([a.decode(errors="replace") for a in argv if a], comm), int(f[11]) + int(f[12]), float(f[19])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--for", dest="duration", type=float, default=None, help="seconds (default: until SIGINT/SIGTERM)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if not (0.1 <= a.interval <= 60) or (a.duration is not None and not 0 < a.duration <= 86400) or not 1 <= a.top <= 1000:
        print("error: --interval 0.1..60, --for 0..86400, --top 1..1000", file=sys.stderr)
        return 2
    stop = []
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.append(1))
    first: dict[tuple[str, float], int] = {}  # (pid, start) -> ticks when first seen
    last: dict[tuple[str, float], tuple[str, int, float]] = {}  # -> (class, ticks, time last seen)
    seen_at: dict[tuple[str, float], float] = {}
    me = str(os.getpid())
    head = meta()  # the command, the commit, the date and the load at the start
    t0 = time.monotonic()
    while not stop and (a.duration is None or time.monotonic() - t0 < a.duration):
        now = time.monotonic()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            r = read(pid)
            if r is None:
                continue
            key = (pid, r[2])
            if key not in first:
                first[key], seen_at[key] = r[1], now
            last[key] = (r[0], r[1], now)
        time.sleep(a.interval)
    by: dict[str, list[float]] = {}
    for key, (cls, ticks, at) in last.items():
        b = by.setdefault(cls, [0.0, 0, 0.0])
        b[0] += (ticks - first[key]) / TICK
        b[1] += 1
        b[2] += at - seen_at[key]
    rows = sorted(by.items(), key=lambda kv: -kv[1][0])
    wall = time.monotonic() - t0
    total = sum(v[0] for v in by.values())
    print(f"{wall:.0f} s sampled every {a.interval:g} s; {total:.1f} CPU s seen in {len(last)} processes")
    print(f"{'CPU s':>8} {'procs':>6} {'alive s':>9}  class")
    for cls, (cpu, n, alive) in rows[:a.top]:
        print(f"{cpu:8.1f} {n:6d} {alive:9.0f}  {cls}")
    if a.json:
        a.json.write_text(json.dumps({**head, "load_at_end": meta()["load"], "wall_s": wall, "interval_s": a.interval, "cpu_s": total,
                                      "by_class": {c: {"cpu_s": v[0], "processes": v[1], "alive_s": v[2]}
                                                   for c, v in rows}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
