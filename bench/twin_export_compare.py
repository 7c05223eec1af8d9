#!/usr/bin/env python3
"""Where a held-out twin missed: what the export of the policy's run and of the None run measured, per cluster.

    python3 bench/twin_export_compare.py RESULT.json [RESULT.json ...] [--state-of RESULT=DB ...] [--out FILE]

For each run of ``bench/bench_twin_heldout.py`` (its results JSON, and the state database it ran on:
``DIR/work/fawkes.db`` beside ``DIR/result.json`` unless ``--state-of`` says otherwise), exports the policy's
run and the None run from the state, each over its own window (``fawkes.traces.from_state.export``, as
``fawkes trace from-state --since --until`` does), and prints per cluster the jobs' mean tasks, mean seconds
per task (``map_s``) and mean start-up (``startup_s``; of it, ``serial_s``: the intervals the export took
for one-task stages, ran at most one task with a slot free and tasks to come, charged to start-up; and of
those, ``idle``: the seconds no task ran), and a job's work on one slot (start-up + tasks x
seconds per task) in each run, with the policy run's over the None run's.  The twin predicts None from the
policy run's export: where the policy run's per-job work is higher than the None run's, the twin's None is
too slow by about that much.  Reads the state only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from results_meta import meta
from fawkes.store import Store
from fawkes.traces.from_state import export


def per_cluster(ex) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    rows = ex.rows
    for c in sorted({r.cluster for r in rows}):
        mine = [r for r in rows if r.cluster == c]
        out[c] = {"jobs": len(mine), "tasks": statistics.fmean(r.maps for r in mine),
                  "map_s": statistics.fmean(r.map_s for r in mine),
                  "startup_s": statistics.fmean(r.startup_s or 0.0 for r in mine),
                  "serial_s": statistics.fmean(ex.serial_s.get(r.job, 0.0) for r in mine),
                  "serial_idle_s": statistics.fmean(ex.serial_idle_s.get(r.job, 0.0) for r in mine),
                  "work_s": statistics.fmean((r.startup_s or 0.0) + r.maps * r.map_s for r in mine)}
    return out


def compare(result: Path, state: Path) -> dict:
    doc = json.loads(result.read_text())
    runs = {"policy": doc["policy_run"], "None": doc["measured"]["None"]}
    store = Store(f"sqlite:///{state}")
    try:
        seen = {k: per_cluster(export(store, since=r["start"] - 1, until=r["end"])) for k, r in runs.items()}
    finally:
        store.close()
    errors = {r["cluster"]: r["error"] for r in doc["comparison"]["rows"] if r["label"] == "None"}
    return {"seed": doc["seed"], "policy": doc["policy"], "load": doc.get("load"), "runs": seen,
            "twin_none_error": errors,
            "work_ratio": {c: seen["policy"][c]["work_s"] / seen["None"][c]["work_s"]
                           for c in seen["policy"] if c in seen["None"] and seen["None"][c]["work_s"] > 0}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--state-of", action="append", default=[], help="RESULT=DB: the state a result ran on")
    ap.add_argument("--out", type=Path, default=None, help="write the figures (JSON) here")
    a = ap.parse_args(argv)
    states = {}
    for item in a.state_of:
        res, sep, db = item.partition("=")
        if not sep:
            print(f"error: --state-of: expected RESULT=DB, got {item!r}", file=sys.stderr)
            return 2
        states[Path(res)] = Path(db)
    out = []
    for res in a.results:
        state = states.get(res, res.parent / "work" / "fawkes.db")
        for p in (res, state):
            if not p.is_file():
                print(f"error: {p}: no such file", file=sys.stderr)
                return 2
        c = compare(res, state)
        out.append(c)
        print(f"seed {c['seed']} ({c['policy']} then None; load at the start {c['load']})")
        print(f"  {'cluster':<8} {'run':<7} {'jobs':>4} {'tasks':>6} {'s/task':>7} {'start-up':>9} {'serial':>7} "
              f"{'idle':>5} {'work s':>7}")
        for cl in sorted(c["runs"]["policy"]):
            for k in ("policy", "None"):
                r = c["runs"][k].get(cl)
                if r:
                    print(f"  {cl:<8} {k:<7} {r['jobs']:>4} {r['tasks']:>6.1f} {r['map_s']:>7.2f} "
                          f"{r['startup_s']:>9.1f} {r['serial_s']:>7.1f} {r['serial_idle_s']:>5.1f} {r['work_s']:>7.1f}")
            if cl in c["work_ratio"]:
                err = c["twin_none_error"].get(cl)
                print(f"  {cl:<8} work {c['policy']} / None x{c['work_ratio'][cl]:.2f}; the twin's None "
                      + (f"{100 * err:+.0f} %" if err is not None else "-"))
    if a.out:
        a.out.write_text(json.dumps({**meta(), "seeds": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
