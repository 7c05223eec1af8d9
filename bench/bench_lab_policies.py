#!/usr/bin/env python3
"""The live benchmark: one stream of real CPU-bound Spark jobs under None, EQ, TD and td-damped, interleaved.

    sudo python3 bench/bench_lab_policies.py [--reps 3] [--policies None,td-tc,td-damped,EQ] [--dir DIR]
                                             [--prefix fwbench] [--subnet 10.232.0] [--json FILE] [--no-twin]
                                             [--mixed]

With ``--mixed`` (issue 24, the mixed pool): fawkes.demo.MIXED_PLAN, one Spark (spark-hdfs), one Flink
(flink-hdfs) and one Dask MR-cluster on the same 6 hosts, each with its own CPU-bound job (burn.py,
FlinkBurn, dask_burn.py), a burst on each in turn, policies None,td-damped-tr by default (growth by
transient nodes: Dask has no transient-core role; plain TD moved Flink's nodes to Dask's burst mid-job,
docs/live.md), R per cluster (one job alone on each kind's cluster), and the target
checked for every cluster (each is the loaded one in its turn, whatever its kind).

One lab (fawkes/demo.py: DemoPlan: 6 hosts of 0.33 CPU and 2 GiB, three MR-clusters of 1 core node),
one reference runtime R (one job alone on a 1-node cluster, policy None), then the demo's stream
(a burst on etl, one job on ml, a burst on bi) once per policy per repetition, in an order
counterbalanced across repetitions (a cyclic Latin square: None, td-tc, td-damped, EQ; then td-tc,
td-damped, EQ, None; ...) so that the machine's drift (other work, page cache, JIT) hits every
policy alike; each policy is also compared with None of the same repetition (paired ratios, their
spread and, with 3 or more repetitions, a 95 % interval).  Every run starts from every cluster at its minimum (the
coordinator under None shrinks them back first).  Presets keep their own keys (grow type,
damping) with T = 10 s, sample period 2 s, tau 0.5 (fawkes.demo.preset_for).

Prints per policy: per-cluster mean slowdown (mean over repetitions, with min-max), the overall
mean slowdown, the ratio to None, reconfigurations and makespan; and the target check: TD or
td-damped gives the most loaded cluster (etl, the first burst) a mean slowdown >= 20 % lower
than None, the overall mean no worse, at most 16 reconfigurations.  Then (unless --no-twin) the
twin of every run, next to it: the run exported from the state and replayed under its policy and
under None (bench/bench_twin_of_runs.py; the runs are kept in DIR/runs.json).  Takes about 6-8
minutes per run on this machine: 3 x 3 runs ~ 1 h.  Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path

try:
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from results_meta import meta
from fawkes.demo import MIXED_PLAN, DemoPlan, Session, calibrate, calibrate_kinds, report, run_stream


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--policies", default="None,td-tc,td-damped,EQ")
    ap.add_argument("--prefix", default="fwbench")
    ap.add_argument("--subnet", default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-twin", action="store_true", help="skip the twin of every run at the end")
    ap.add_argument("--mixed", action="store_true", help="the mixed pool: one Spark, one Flink, one Dask cluster")
    args = ap.parse_args()
    if args.mixed and args.policies == ap.get_default("policies"):
        args.policies = "None,td-damped-tr"
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="fawkes-bench-lab-"))
    t0 = time.time()
    plan = MIXED_PLAN if args.mixed else DemoPlan()
    s = Session(workdir, plan, prefix=args.prefix, subnet=args.subnet)
    runs: dict[str, list] = {p: [] for p in policies}
    try:
        s.setup_clusters()
        ref = calibrate_kinds(s) if args.mixed else calibrate(s)
        print(f"reference runtime R = {ref} s ({time.time() - t0:.0f} s)", flush=True)
        for rep in range(args.reps):
            order = latin_order(policies, rep)  # counterbalanced: each policy in each position once per n reps
            print(f"--- rep {rep + 1}: order {', '.join(order)}", flush=True)
            for p in order:
                out = run_stream(s, p, ref)
                runs[p].append(out)
                print(f"--- rep {rep + 1} {p} ({time.time() - t0:.0f} s)\n{report(out)}", flush=True)
                text = json.dumps({**meta(), "reference_s": ref,
                                   "orders": [latin_order(policies, r) for r in range(rep + 1)], "runs": {
                    k: [{"slowdowns": o.slowdowns(), "mean": o.mean_slowdown(), "reconf": o.reconfigurations,
                         "makespan": o.makespan_s, "peak": o.peak_nodes(), "jobs": o.jobs} for o in v]
                    for k, v in runs.items()}}, indent=2)
                (workdir / "runs.json").write_text(text)
                if args.json:
                    args.json.write_text(text)
    finally:
        s.close()
    summarize(runs, plan)
    print(f"total {time.time() - t0:.0f} s")
    if not args.no_twin and any(runs.values()):
        import bench_twin_of_runs  # beside this file

        print("\nthe twin of every run (bench/bench_twin_of_runs.py):", flush=True)
        bench_twin_of_runs.main(["--state", str(workdir / "fawkes.db"), "--json", str(workdir / "runs.json"),
                                 "--out", str(workdir / "twin")] + (["--mixed"] if args.mixed else []))


def latin_order(policies: list[str], rep: int) -> list[str]:
    """The policies' order in repetition ``rep``: a cyclic Latin square (rotated by one each repetition),
    so that over len(policies) repetitions each policy runs once in each position, and None is not
    always first on a machine that drifts."""
    k = rep % len(policies)
    return policies[k:] + policies[:k]


#: two-sided 95 % quantiles of Student's t, by degrees of freedom (1..10)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def paired_ratios(policy: list[float], base: list[float]) -> dict:
    """Per repetition, ``policy``'s figure over None's of the same repetition; their mean, min, max and,
    with 3 or more repetitions, a 95 % t interval of the mean."""
    ratios = [a / b for a, b in zip(policy, base) if b > 0]
    out = {"ratios": ratios, "mean": statistics.fmean(ratios) if ratios else float("nan"),
           "min": min(ratios, default=float("nan")), "max": max(ratios, default=float("nan"))}
    n = len(ratios)
    if 3 <= n <= 11:
        half = _T95[n - 1] * statistics.stdev(ratios) / n ** 0.5
        out["ci95"] = (out["mean"] - half, out["mean"] + half)
    return out


def summarize(runs: dict[str, list], plan: DemoPlan) -> None:
    clusters = list(dict.fromkeys(c for _, c in plan.stream))
    base = runs.get("None")

    def mean(xs):
        return statistics.fmean(xs) if xs else float("nan")

    def cell(xs):
        return f"{mean(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"

    print(f"\n{'policy':<10} " + " ".join(f"{c:>18}" for c in clusters)
          + f" {'overall':>18} {'vs None':>8} {'reconf':>7} {'makespan s':>10}")
    summary = {}
    for p, outs in runs.items():
        if not outs:
            continue
        per = {c: [o.slowdowns()[c] for o in outs if c in o.slowdowns()] for c in clusters}
        overall = [o.mean_slowdown() for o in outs]
        ratio = mean(overall) / mean([o.mean_slowdown() for o in base]) if base else float("nan")
        summary[p] = {c: mean(v) for c, v in per.items()} | {"overall": mean(overall),
                                                              "reconf": mean([o.reconfigurations for o in outs])}
        print(f"{p:<10} " + " ".join(f"{cell(per[c]):>18}" for c in clusters) + f" {cell(overall):>18} "
              f"{ratio:>8.2f} {mean([o.reconfigurations for o in outs]):>7.1f} "
              f"{mean([o.makespan_s for o in outs]):>10.0f}")
    if base:
        loaded = clusters[0]
        print(f"\npaired with None inside each repetition ({loaded}'s mean slowdown, and overall):")
        for p, outs in runs.items():
            if p == "None" or not outs:
                continue
            for what, f in ((loaded, lambda o: o.slowdowns().get(loaded, float("nan"))),
                            ("overall", lambda o: o.mean_slowdown())):
                r = paired_ratios([f(o) for o in outs], [f(o) for o in base])
                ci = f", 95 % interval {r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}" if "ci95" in r else ""
                print(f"  {p:<10} {what:<8} ratio {r['mean']:.2f} [{r['min']:.2f}-{r['max']:.2f}]{ci} "
                      f"({', '.join(f'{x:.2f}' for x in r['ratios'])})")
    if base and "None" in summary:
        # the loaded cluster: the first burst's; in a mixed pool every cluster is loaded in its turn
        loaded_ones = clusters if plan.kinds else clusters[:1]
        for p in ("td-tc", "TD", "td-damped"):
            if p in summary:
                for loaded in loaded_ones:
                    gain = 1 - summary[p][loaded] / summary["None"][loaded]
                    ok = (gain >= 0.20 and summary[p]["overall"] <= summary["None"]["overall"]
                          and summary[p]["reconf"] <= 16)
                    print(f"target {p}: {loaded} ({plan.kind_of(loaded)}) {100 * gain:.0f} % below None (>= 20 %), "
                          f"overall {summary[p]['overall']:.2f} vs {summary['None']['overall']:.2f}, "
                          f"{summary[p]['reconf']:.1f} reconfigurations (<= 16): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
