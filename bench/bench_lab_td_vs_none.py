#!/usr/bin/env python3
"""TD against a static partition (policy None) on the lab, in one run: mean job slowdown and ratio.

    sudo python3 bench/bench_lab_td_vs_none.py [--dir DIR]

The demo's lab and stream (fawkes/demo.py: DemoPlan: 6 hosts of 0.33 CPU, three MR-clusters of 1
core node, CPU-bound jobs in two bursts on different clusters).  The reference runtime R is one
job alone on a minimum-size cluster; slowdown = response time / R.  The stream runs first under
None (the baseline: clusters stay at their minima), then under TD with TC growth, on the same
clusters.  One repetition of each; bench/bench_lab_policies.py runs more policies, interleaved.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from fawkes.demo import DemoPlan, Session, calibrate, report, run_stream


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="fawkes-bench-lab-"))
    s = Session(workdir, DemoPlan(), prefix="fwbench")
    try:
        s.setup_clusters()
        ref = calibrate(s)
        print(f"reference runtime R = {ref:.1f} s")
        base = run_stream(s, "None", ref)
        print(report(base))
        td = run_stream(s, "TD", ref)
        print(report(td))
    finally:
        s.close()
    b, t = base.slowdowns(), td.slowdowns()
    print(f"\n{'':<18} {'None':>8} {'TD':>8} {'TD/None':>8}")
    print(f"{'mean slowdown':<18} {base.mean_slowdown():>8.2f} {td.mean_slowdown():>8.2f} "
          f"{td.mean_slowdown() / base.mean_slowdown():>8.2f}")
    for c in b:
        print(f"{c + ' slowdown':<18} {b[c]:>8.2f} {t[c]:>8.2f} {t[c] / b[c]:>8.2f}")
    print(f"{'makespan s':<18} {base.makespan_s:>8.0f} {td.makespan_s:>8.0f} {td.makespan_s / base.makespan_s:>8.2f}")
    print(f"{'reconfigurations':<18} {base.reconfigurations:>8} {td.reconfigurations:>8}")


if __name__ == "__main__":
    main()
