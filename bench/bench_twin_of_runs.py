#!/usr/bin/env python3
"""The twin of every run of a live benchmark: each run exported from the state and replayed.

    python3 bench/bench_twin_of_runs.py --state DIR/fawkes.db --json RUNS.json [--seeds 5] [--out DIR] [--mixed]

RUNS.json is what ``bench/bench_lab_policies.py --json`` writes (per policy, its runs with their
jobs); the state is that benchmark's SQLite file.  For each run: the jobs submitted in the run's
window (its first submission to its last end) are exported with ``fawkes trace from-state`` and
replayed (``fawkes simulate`` with the measured cost file, ``--seeds``) under the policy that ran and
under None, at the live periods (``fawkes.demo.preset_for``).  Prints, per run and per policy (mean
over its runs), each cluster's live mean slowdown, the twin's replay of the same policy and their
difference, and the twin's None; so the live benchmark's figures stand next to the simulation's,
and the None the twin predicts from a TD run can be set against the None measured on the lab.
Runs of the mixed pool (``--mixed``, or runs whose clusters are fawkes.demo.MIXED_PLAN's): the
plan's clusters, growth and periods, and each cluster replayed with its own kind's measured costs
(the cost file's ``clusters:``, docs/live.md).
Reads the state only; writes the exports under --out.  No lab, a few seconds per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_meta import meta  # noqa: E402
from fawkes.demo import MIXED_PLAN, DemoPlan, replay_window  # noqa: E402
from fawkes.errors import FawkesError  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", type=Path, required=True, help="the benchmark's SQLite state file")
    ap.add_argument("--json", type=Path, required=True, help="what bench_lab_policies.py --json wrote")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="where the exports go (default: a new temp dir)")
    ap.add_argument("--result", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--mixed", action="store_true",
                    help="runs of the mixed pool (bench_mixed_pool.py): fawkes.demo.MIXED_PLAN's clusters, growth "
                         "and periods; the export gives each cluster its own kind's costs")
    a = ap.parse_args(argv)
    if not 1 <= a.seeds <= 50:
        print("error: --seeds: expected 1..50", file=sys.stderr)
        return 2
    for path, what in ((a.state, "--state"), (a.json, "--json")):
        if not path.is_file():
            print(f"error: {what}: {path}: not a regular file", file=sys.stderr)
            return 2
    try:
        runs = json.loads(a.json.read_text(encoding="utf-8"))["runs"]
        windows = {p: [(min(j["submitted"] for j in r["jobs"]) - 1, max(j["ended"] for j in r["jobs"]),
                        r["slowdowns"]) for r in rs] for p, rs in runs.items()}
        seen = {j["cluster"] for rs in runs.values() for r in rs for j in r["jobs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: --json: {a.json}: not a bench_lab_policies.py result ({e})", file=sys.stderr)
        return 2
    out = a.out or Path(tempfile.mkdtemp(prefix="fawkes-twin-runs-"))
    url = f"sqlite:///{a.state.resolve()}"
    mixed = a.mixed or (seen <= set(MIXED_PLAN.clusters) and not seen <= set(DemoPlan().clusters))
    plan, seeds = (MIXED_PLAN if mixed else DemoPlan()), tuple(range(1, a.seeds + 1))
    clusters = list(dict.fromkeys(c for _, c in plan.stream))
    rows: dict[str, list[dict]] = {}
    for policy, ws in windows.items():
        for i, (since, until, live) in enumerate(ws, start=1):
            try:
                res = replay_window(url, plan, since, until, dict.fromkeys((policy, "None")),
                                    out / f"{policy}-{i}", seeds=seeds)
            except (FawkesError, OSError, ValueError) as e:
                print(f"error: {policy} run {i}: {e}", file=sys.stderr)
                return 1
            row = {"live": live, "twin": res[policy]["cluster_mean_slowdown"],
                   "none_twin": res["None"]["cluster_mean_slowdown"]}
            rows.setdefault(policy, []).append(row)
            print(f"{policy:<10} run {i}: " + "  ".join(
                f"{c} {live[c]:.2f} / {row['twin'][c]:.2f} ({100 * (row['twin'][c] / live[c] - 1):+.0f} %)"
                f" None(twin) {row['none_twin'][c]:.2f}" for c in clusters if c in live and c in row["twin"]),
                flush=True)
            gone = [c for c in clusters if c in live and c not in row["twin"]]
            if gone:  # its jobs left no task in the samples: not in the export (fawkes trace from-state says so)
                print(f"{'':<10} not replayed (no task of theirs in the samples): {', '.join(gone)}", flush=True)
    print(f"\nmean over runs, live / twin of the same policy (difference), None (twin); {a.seeds} seeds per replay:")
    summary = {}
    for policy, rs in rows.items():
        per = {}
        for c in (c for c in clusters if all(c in r["twin"] and c in r["live"] for r in rs)):
            live = statistics.fmean(r["live"][c] for r in rs)
            tw = statistics.fmean(r["twin"][c] for r in rs)
            nt = statistics.fmean(r["none_twin"][c] for r in rs)
            per[c] = {"live": live, "twin": tw, "diff": tw / live - 1, "none_twin": nt}
        summary[policy] = per
        print(f"{policy:<10} " + "  ".join(f"{c} {v['live']:.2f} / {v['twin']:.2f} ({100 * v['diff']:+.0f} %),"
                                           f" None(twin) {v['none_twin']:.2f}" for c, v in per.items()))
    if "None" in summary:
        print("None measured on the lab: " + "  ".join(f"{c} {v['live']:.2f}" for c, v in summary["None"].items()))
    if a.result:
        a.result.write_text(json.dumps({**meta(), "seeds": a.seeds, "runs": rows, "mean": summary}, indent=1))
    print(f"exports: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
