#!/usr/bin/env python3
"""BIG-C's and CERES' simulation checks (SIM-B1..B4, SIM-C1, SIM-C2) under one job model.

    python bench/bench_seed_job_models.py --job-model spark [--out FILE]
    python bench/bench_seed_job_models.py --checks SIM-U3 --out FILE      # any other check, seed 1
    python bench/bench_seed_job_models.py --checks SIM-U7 --out FILE      # UBIS U-7, seeds 1-5
    python bench/bench_seed_job_models.py --checks SIM-C2 --seeds 1,2,3,4,5 --out FILE

Runs each check on the seeds its test uses (tests/test_bigc.py, tests/test_ceres.py: 1-3; SIM-B4:
1) and writes its rows, note and directions with bench/results_meta.py's command, commit, date and
load; docs/reproduction.md's Spark-like column cites the file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed fawkes

from bench.results_meta import meta  # noqa: E402
from fawkes.seeds.seed_checks import run_check  # noqa: E402

SEEDS = {"SIM-B1": [1, 2, 3], "SIM-B2": [1, 2, 3], "SIM-B3": [1, 2, 3], "SIM-B4": [1], "SIM-C1": [1, 2, 3],
         "SIM-C2": [1, 2, 3], "SIM-U7": [1, 2, 3, 4, 5]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job-model", choices=("mr", "spark"))
    ap.add_argument("--checks", default=",".join(SEEDS))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seeds", default=None, help="comma-separated seeds for every check (default: its test's)")
    a = ap.parse_args()
    try:
        given = [int(x) for x in a.seeds.split(",")] if a.seeds else None
    except ValueError:
        ap.error(f"--seeds: expected comma-separated integers, got {a.seeds!r}")
    if given is not None and not (0 < len(given) <= 50 and all(0 <= x < 2**32 for x in given)):
        ap.error("--seeds: 1..50 seeds, each 0 .. 2**32-1")
    out = {"meta": meta(), "job_model": a.job_model, "checks": {}}
    for name in a.checks.split(","):
        t0 = time.monotonic()
        seeds = given or SEEDS.get(name, [1])
        r = run_check(name, seeds, a.job_model)
        r["seeds"], r["wall_s"] = seeds, round(time.monotonic() - t0, 1)
        out["checks"][name] = r
        print(name, r["wall_s"], "s:", *(f"\n  [{'holds' if e['holds'] else 'FAILS'}] {e['expected']}"
                                           for e in r["expect"]), file=sys.stderr, flush=True)
    text = json.dumps(out, indent=1, default=str)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
