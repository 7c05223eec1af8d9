#!/usr/bin/env python3
"""CERES C-2 live (issue 28, item 3): a real Spark job straggles, the coordinator expands its cluster from
idle capacity, and the job ends sooner than the same job without C-2.  Paired runs, counterbalanced.

    sudo python3 bench/bench_ceres_straggler.py [--reps 3] [--work 3] [--factor 1.5] [--expand 1] [--window S]
                                                [--dir DIR] [--prefix fwcr] [--subnet 10.226.0] [--json FILE]

One lab (fawkes.demo.Session: ``--hosts`` hosts of 0.33 CPU and 2 GiB), one MR-cluster of 1 core node; the
other hosts are idle capacity.  The policy is TD with tau = 1000 (the weights keep the allocation, so
idle hosts stay idle unless C-2 takes them: the case CERES' expansion is for, ``docs/mechanism.md``).

1. R: the demo's job (``--partitions`` map tasks of ``--core-s`` CPU-seconds) alone on the cluster, policy None;
2. each repetition, in an order that alternates (ABBA: on, off; off, on; ...): the *straggler*, the same
   job with ``--work`` times the map tasks (the skewed input: ``--work`` x the data its reference runtime R
   was measured on), submitted with R as its reference runtime, under
   * ``on``: ``straggler_factor: --factor``, ``straggler_expand_nodes: --expand`` (C-2: elapsed + ETA
     from the driver's stages > factor x R, so the cluster grows by transient nodes from the idle hosts),
   * ``off``: the same preset without them;
   every run from the cluster at its minimum (the coordinator under None shrinks it back first);
3. per run: the job's response time, the nodes the cluster held (peak), the decisions whose reason flags
   the straggler (``C-2 stragglers``) and the first tick that flagged it; per pair: on / off.

Prints each run and the paired ratios (their median and spread; a 95 % interval from 3 repetitions on);
writes the results JSON with the command, the commit, the date and the load.  Lab caveat: the hosts are
CPU quotas of one 2-core machine; what a grown node adds is its quota's share.  Not part of CI (about
``reps x (2 x work x R + 2 min)``).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from bench.bench_lab_policies import latin_order, paired_ratios
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from bench_lab_policies import latin_order, paired_ratios
    from results_meta import meta

from fawkes.demo import DemoPlan, Session, calibrate
from fawkes.errors import FawkesError
from fawkes.mechanism import Settings

ARMS = ("on", "off")


def order(rep: int) -> list[str]:
    """ABBA: on first in even repetitions, off first in odd ones (the live benchmark's Latin square)."""
    return latin_order(list(ARMS), rep)


def preset(arm: str, factor: float, expand: int, window: float | None = None) -> dict:
    """The policy of an arm: TD, growth by transient nodes; ``on`` adds C-2 (``window``: its speed window,
    None = the default)."""
    p = {"policy": "TD", "grow_type": "transient"}
    if arm == "on":
        p.update(straggler_factor=factor, straggler_expand_nodes=expand)
        if window is not None:
            p["straggler_window_s"] = window
    return p


def paired(on: list[float], off: list[float]) -> dict:
    """Per repetition on / off (the live benchmark's paired ratios: mean, min, max, a 95 % t-interval of the
    mean from 3 repetitions), with their median."""
    out = paired_ratios(on, off)
    out["median"] = statistics.median(out["ratios"]) if out["ratios"] else None
    return out


def run_one(s: Session, arm: str, a, ref: float, presets: dict[str, Path]) -> dict:
    """The straggler from the cluster at its minimum under ``arm``: its response, peak nodes, C-2 flags."""
    from sqlmodel import select

    from fawkes.coordinator.view import allocation_history
    from fawkes.store.lifecycle import JobState
    from fawkes.store.schema import DecisionRecord

    name = s.plan.clusters[0]
    if not (s.policy == "None" and s.at_minimum()):
        s.start("None")
        s.wait("the active MR-cluster", s.active, 600)
        s.wait("the cluster at its minimum", s.at_minimum, 300)
    s.start(str(presets[arm]))
    latest = s.store.latest_decision()
    first_tick = latest.id if latest else 0
    argv = [*s.job_argv(name)[:-4], "{input}", "{output}", str(a.partitions * a.work), f"{a.core_s:g}"]
    t0 = time.time()
    jid = s.store.submit_job(name, argv, input_path="/input", ref_runtime=ref).id
    s.wait("the straggler", lambda: s.finished([jid]), 3600)
    end = time.time()
    job = s.store.get_job(jid)
    if JobState(job.state) is not JobState.SUCCEEDED:
        raise FawkesError(f"the straggler failed: {job.detail}; see {s.workdir}/coordinator.log")
    with s.store.session() as sess:
        rows = list(sess.exec(select(DecisionRecord).where(DecisionRecord.id > first_tick)
                              .where(DecisionRecord.time <= end)))
    flagged = [d for d in rows if "C-2 stragglers" in (d.reason or "")]
    alloc = [(t, n) for t, n in allocation_history(s.store.list_nodes(name, live=False), t0) if t <= end]
    return {"arm": arm, "job": jid, "response_s": job.ended_at - job.submitted_at,
            "started_s": (job.started_at or job.submitted_at) - job.submitted_at,
            "peak_nodes": max((n for _, n in alloc), default=1), "allocation": alloc, "ticks": len(rows),
            "ticks_flagged": len(flagged), "first_flag_s": (flagged[0].time - t0) if flagged else None,
            "reasons": sorted({(d.reason or "")[:300] for d in flagged})[:3]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", type=int, default=3, help="the straggler's map tasks over the reference job's")
    ap.add_argument("--factor", type=float, default=1.5, help="straggler_factor of the on arm")
    ap.add_argument("--expand", type=int, default=1, help="straggler_expand_nodes of the on arm")
    ap.add_argument("--window", type=float, default=None,
                    help="straggler_window_s of the on arm (default: the setting's default; 0 = CERES' last pair)")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--core-s", type=float, default=1.5)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--prefix", default="fwcr")
    ap.add_argument("--subnet", default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    bad = [(n, why) for n, ok, why in (
        ("--reps", 1 <= a.reps <= 20, "1..20"), ("--work", 2 <= a.work <= 20, "2..20"),
        ("--factor", 1 < a.factor <= 100, "above 1, at most 100"), ("--expand", 1 <= a.expand <= 10, "1..10"),
        ("--hosts", 2 <= a.hosts <= 12, "2..12"), ("--partitions", 1 <= a.partitions <= 64, "1..64"),
        ("--core-s", 0.1 <= a.core_s <= 10, "0.1..10"),
        ("--window", a.window is None or 0 <= a.window <= 3600, "0..3600 seconds")) if not ok]
    if bad:
        print(f"error: {bad[0][0]}: expected {bad[0][1]}", file=sys.stderr)
        return 2
    plan = DemoPlan(hosts=a.hosts, clusters=("straggle",), stream=(), tau=1000.0, grow_type="transient",
                    partitions=a.partitions, core_s=a.core_s)
    signal.signal(signal.SIGTERM, lambda *x: (_ for _ in ()).throw(KeyboardInterrupt()))
    workdir = a.dir or Path(tempfile.mkdtemp(prefix="fawkes-ceres-"))
    out_path = a.json or workdir / "result.json"
    t0 = time.time()
    s = Session(workdir, plan, prefix=a.prefix, subnet=a.subnet)
    presets = {}
    for arm in ARMS:
        presets[arm] = workdir / f"c2-{arm}.yaml"
        presets[arm].write_text(json.dumps(preset(arm, a.factor, a.expand, a.window)))
    doc: dict = {**meta(), "reps": a.reps, "work": a.work, "factor": a.factor, "expand": a.expand,
                 "window_s": a.window if a.window is not None else Settings().straggler_window_s,
                 "job": {"partitions": a.partitions, "core_s": a.core_s},
                 "host_quota": {"cpus": plan.cpus, "memory": plan.memory, "hosts": plan.hosts}, "runs": []}
    try:
        s.setup_clusters()
        ref = calibrate(s)
        doc["reference_s"] = ref
        print(f"R = {ref:.1f} s ({time.time() - t0:.0f} s); the straggler: {a.work} x {a.partitions} tasks, "
              f"bound {a.factor:g} x R = {a.factor * ref:.0f} s", flush=True)
        for rep in range(a.reps):
            for arm in order(rep):
                r = run_one(s, arm, a, ref, presets)
                r["rep"] = rep
                doc["runs"].append(r)
                print(f"rep {rep + 1} {arm:<3}: response {r['response_s']:.1f} s ({r['response_s'] / ref:.2f} R), "
                      f"peak {r['peak_nodes']} nodes, flagged on {r['ticks_flagged']} of {r['ticks']} ticks"
                      + (f" (first at +{r['first_flag_s']:.0f} s)" if r["first_flag_s"] is not None else "")
                      + f" ({time.time() - t0:.0f} s)", flush=True)
                out_path.write_text(json.dumps(doc, indent=2, default=str))
    finally:
        s.close()
        doc["load_at_end"] = meta()["load"]
        doc["wall_s"] = time.time() - t0
        by = {arm: [r["response_s"] for r in sorted(doc["runs"], key=lambda r: r["rep"]) if r["arm"] == arm]
              for arm in ARMS}
        n = min(len(by["on"]), len(by["off"]))
        doc["paired"] = paired(by["on"][:n], by["off"][:n]) if n else None
        out_path.write_text(json.dumps(doc, indent=2, default=str))
    p = doc["paired"]
    print(f"\nresponse on / off per repetition: {', '.join(f'{x:.3f}' for x in p['ratios'])}; median "
          f"{p['median']:.3f} (min {p['min']:.3f}, max {p['max']:.3f})"
          + (f"; mean {p['mean']:.3f}, 95 % interval {p['ci95'][0]:.3f} .. {p['ci95'][1]:.3f}" if "ci95" in p else ""))
    print(f"results: {out_path}; total {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
