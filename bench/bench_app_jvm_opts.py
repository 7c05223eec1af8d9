#!/usr/bin/env python3
"""Benchmark: one job alone on a 0.33-CPU lab host, with and without ``app_jvm_opts``.

A lab of one host (the demo's quota: ``Plan.cpus``, ``Plan.memory``), one MR-cluster on it, the
real coordinator (policy None) and the demo's job (``fawkes/apps/burn.py``: 12 CPU-bound tasks).
The job runs alone, RUNS times with the JVM's defaults for its driver and executors and RUNS
times with ``--opts`` (the daemons' flags by default), the two alternated so that drift in the
machine's load hits both alike.  For each run it prints the response time (queued -> ended, as the
demo's R), and from the driver's log the executor's start (granted -> registered) and the map
stage of the 12 tasks; then the medians and the ratio of the medians.  The host shares this
machine's cores: run it on an otherwise idle machine (the 1-minute load is printed per run).

usage: bench/bench_app_jvm_opts.py [--runs 2] [--opts '-XX:+UseSerialGC -XX:TieredStopAtLevel=1']
                                   [--dir /tmp/fawkes-bench-jvm] [--prefix fwjvm] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import fawkes.demo as D  # noqa: E402
from bench.results_meta import meta  # noqa: E402
from fawkes.errors import FawkesError  # noqa: E402
from fawkes.frameworks.render import check_option  # noqa: E402

DEFAULT_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def phases(log: Path) -> dict[str, float]:
    """Seconds of the executor's start and of the map stage, from a driver's log (empty if absent)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return {}

    def at(pattern: str):
        for ln in lines:
            if re.search(pattern, ln):
                return datetime.strptime(" ".join(ln.split()[:2]), "%y/%m/%d %H:%M:%S")
        return None

    granted, registered = at("Granted executor"), at("Registered executor")
    stage = at(r"ShuffleMapStage 1 .*finished")
    out = {}
    if granted and registered:
        out["executor_start_s"] = (registered - granted).total_seconds()
    if registered and stage:
        out["tasks_s"] = (stage - registered).total_seconds()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--opts", default=DEFAULT_OPTS, help="the app_jvm_opts under test")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fawkes-bench-jvm"))
    ap.add_argument("--prefix", default="fwjvm")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not 1 <= a.runs <= 20:
        print("error: --runs: expected 1..20", file=sys.stderr)
        return 2
    try:
        check_option("app_jvm_opts", a.opts)
    except ValueError as e:
        print(f"error: --opts: {e}", file=sys.stderr)
        return 2
    info = meta()  # command, commit, date, load: what a results file carries
    shutil.rmtree(a.dir, ignore_errors=True)
    plan = D.DemoPlan(hosts=1, clusters=("etl",))
    base = {k: v for k, v in D.LAB_OPTIONS.items() if k != "app_jvm_opts"}
    runs: list[dict] = []
    s = D.Session(a.dir, plan, prefix=a.prefix, say=lambda m: print(m, flush=True))
    try:
        s.setup_clusters()
        for i in range(2 * a.runs):
            mode = "defaults" if i % 2 else "opts"
            s.options = {**base, **({"app_jvm_opts": a.opts} if mode == "opts" else {})}
            s.stop()
            s.policy = None  # calibrate() restarts the coordinator with the options of this run
            r = D.calibrate(s)
            job = max(j.id for j in s.store.list_jobs("etl"))
            log = s.lab.hosts[0].root / "clusters" / "etl" / "jobs" / str(job) / "log"
            row = {"mode": mode, "response_s": round(r, 1), **phases(log),
                   "load_1m": float(Path("/proc/loadavg").read_text().split()[0])}
            runs.append(row)
            print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    except FawkesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        s.close()
    summary = {}
    for mode in ("defaults", "opts"):
        rows = [r for r in runs if r["mode"] == mode]
        summary[mode] = {k: statistics.median(r[k] for r in rows if k in r)
                         for k in ("response_s", "executor_start_s", "tasks_s") if any(k in r for r in rows)}
    print(f"app_jvm_opts {a.opts!r} against the JVM's defaults, medians of {a.runs}:")
    for k in summary["defaults"]:
        d, o = summary["defaults"][k], summary["opts"].get(k)
        print(f"  {k:<17} defaults {d:7.1f}  opts {o:7.1f}  ratio {o / d:.2f}")
    if a.json:
        a.json.write_text(json.dumps({**info, "opts": a.opts, "plan": {"cpus": plan.cpus, "memory": plan.memory},
                                      "runs": runs, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
