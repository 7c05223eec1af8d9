#!/usr/bin/env python3
"""What the twin's master factor changes in a held-out prediction: the same export replayed with and without it.

    python3 bench/twin_heldout_ablation.py --dir WORKDIR --result RESULT.json [--out FILE]

``WORKDIR`` and ``RESULT.json`` are a finished run of ``bench/bench_twin_heldout.py`` (its ``--dir`` and
``--result``): its state (``fawkes.db``), its seed and the window of its policy run.  The policy run is
exported and replayed under None twice, with the simulation seeds the benchmark used (1-5): with the
measured ``master_task_factor`` applied (``export(master_factor=True)``: the cost field, and ``map_s`` a
task's time on a node other than the master) and without it (the export's default since 2026-11-28).
The prediction the benchmark wrote down before its None run is the one of the model its commit ran
(the factor applied at f9c0b62, the runs of 2026-11-28; not applied after): the matching replay is
checked against it (within 0.1 %: the state also holds the None run's first samples now, inside the
export's margins around the window).  Both are printed and written (``--out``) against the measured
None run, with each run's masters' task seconds (``bench_twin_heldout.master_task_s``).  Nothing is
tuned here: both models are fixed, the measurement is the benchmark's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from bench.bench_twin_heldout import heldout_plan, master_task_s
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from bench_twin_heldout import heldout_plan, master_task_s
    from results_meta import meta
from fawkes.demo import replay_window

SEEDS = (1, 2, 3, 4, 5)  # bench_twin_heldout.py's default --seeds 5


def predict_none(db: Path, plan, since: float, until: float, work: Path, master_factor: bool) -> dict[str, float]:
    rows = replay_window(f"sqlite:///{db}", plan, since, until, ("None",), work, seeds=SEEDS,
                         master_factor=master_factor)
    return dict(rows["None"]["cluster_mean_slowdown"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, required=True, help="the benchmark's --dir (holds fawkes.db)")
    ap.add_argument("--result", type=Path, required=True, help="the benchmark's results JSON")
    ap.add_argument("--out", type=Path, default=None, help="write the comparison here (JSON)")
    a = ap.parse_args(argv)
    db = a.dir / "fawkes.db"
    for p in (db, a.result):
        if not p.is_file():
            print(f"twin_heldout_ablation.py: {p}: not a regular file", file=sys.stderr)
            return 2
    try:
        res = json.loads(a.result.read_text())
        seed, run = int(res["seed"]), res["policy_run"]
        since, until = float(run["start"]) - 1, float(run["end"])
        recorded = res["prediction"]["predicted"]["None"]["cluster_mean_slowdown"]
        measured = res["measured"]["None"]["slowdowns"]
    except (ValueError, KeyError, TypeError) as exc:
        print(f"twin_heldout_ablation.py: {a.result}: not a finished held-out run ({exc})", file=sys.stderr)
        return 2
    plan = heldout_plan(seed)
    with tempfile.TemporaryDirectory(prefix="fawkes-ablation-") as tmp:
        tmp = Path(tmp)
        copy = tmp / "state.db"  # a consistent copy (the WAL included), read only from here on
        src, dst = sqlite3.connect(f"file:{db}?mode=ro", uri=True), sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        dst.close()
        with_f = predict_none(copy, plan, since, until, tmp / "w", True)
        costs = (tmp / "w" / "stream-costs.yaml").read_text()
        without = predict_none(copy, plan, since, until, tmp / "wo", False)
    # the recorded prediction is the model the benchmark's commit ran: the factor applied in the runs of f9c0b62
    # (their results hold no "master_factor"), as the benchmark's --master-factor says after it
    applied = res.get("master_factor", True)
    matching = with_f if applied else without
    diff = max(abs(matching[c] / recorded[c] - 1) for c in recorded)
    same = diff <= 1e-3
    speed = master_task_s(f"sqlite:///{db}", {"policy": res["policy_run"], "None": res["measured"]["None"]})
    factor = next((ln.split(":")[1].split("#")[0].strip() for ln in costs.splitlines()
                   if ln.startswith("master_task_factor:")), None)
    rows = []
    for c in sorted(measured):
        rows.append({"cluster": c, "measured": measured[c], "with_factor": with_f[c], "without_factor": without[c],
                     "error_with": with_f[c] / measured[c] - 1, "error_without": without[c] / measured[c] - 1})
    doc = {**meta(), "seed": seed, "result": str(a.result), "master_task_factor": factor,
           "reproduces_recorded_prediction": same, "max_rel_diff_from_recorded": diff, "master_task_s": speed, "rows": rows,
           "median_abs_error_with": statistics.median(abs(r["error_with"]) for r in rows),
           "median_abs_error_without": statistics.median(abs(r["error_without"]) for r in rows)}
    print(f"seed {seed}: master_task_factor {factor}; the benchmark's prediction reproduced: {same} "
          f"(largest difference {100 * diff:.4f} %); the masters' task seconds, None run over policy run: "
          f"{speed['ratio'].get('None')}")
    print(f"{'cluster':<8} {'measured':>9} {'with f':>8} {'error':>7} {'without':>8} {'error':>7}")
    for r in rows:
        print(f"{r['cluster']:<8} {r['measured']:>9.2f} {r['with_factor']:>8.2f} {100 * r['error_with']:>+6.0f}% "
              f"{r['without_factor']:>8.2f} {100 * r['error_without']:>+6.0f}%")
    if a.out:
        a.out.write_text(json.dumps(doc, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
