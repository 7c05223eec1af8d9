#!/usr/bin/env python3
"""Benchmark: graceful shrink of a TR node (Spark decommissioning) against FP, mid-job, on real Spark + HDFS.

BIG-C (seed 000) reports that killing tasks costs Spark jobs 70 % on average; Spark's own decommissioning
lets the running tasks finish and moves the node's shuffle blocks away first.  A private lab of 2 hosts
(``--cpus``, ``--memory`` each): one spark-hdfs cluster (1 core node + 1 TR node), a word count of
``--tasks`` tasks of ``--task-s`` seconds each, and the TR node removed while it runs tasks: once by FP
(``ShrinkMode.FP``: stop the worker) and once gracefully (``ShrinkMode.DP`` on a TR node: SIGPWR, wait for
its executor to drain, bounded, then stop), ``--reps`` times, the order alternated.  Both outputs must be
exact.  Per run: failed or killed task attempts of those run (from the driver's REST API), the task-seconds
wasted (work thrown away and done again: killed attempts, and map output lost with the node and re-run),
the shrink's and the job's seconds, and whether graceful fell back to FP.  ``--remove-after`` removes the
TR node that many seconds into its tasks (a kill at once throws little away).

The drain is read from the worker's own web UI (``coresused``): the master drops a decommissioned worker's
executors from its books at once and never hears of their exit.  The suite's check of graceful removal under
a job is the conformance kit's (tests/test_conformance_lab.py); this is the measurement (docs/mechanism.md).
The hosts share this machine's cores: the times depend on the quota and the load printed with them.

usage: bench/bench_graceful_shrink.py [--reps 1] [--tasks 12] [--task-s 6] [--remove-after 0] [--cpus 0.5] [--memory 2G]
                                      [--dir DIR] [--prefix fwgs] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.frameworks.base import ProgressEvent  # noqa: E402
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism.model import Role, ShrinkMode  # noqa: E402
from tests.test_spark_hdfs_lab import LAB_OPTIONS, framework, get_json, node, submit, wait_for  # noqa: E402


def attempts(driver: str, app_id: str) -> dict:
    """Over all stage attempts: failed or killed task attempts, task attempts run, and the task-seconds
    they took (``task_s``) and wasted (``wasted_s``).  Wasted is the work thrown away and done again: every
    ended attempt's duration, less, for each task (stage, partition), the duration of its last successful
    attempt; so a killed attempt counts, and so does a successful map attempt whose shuffle output was
    lost with its executor and had to run again."""
    failed = run = 0
    total_ms = 0.0
    last_ok: dict[tuple[int, int], tuple[str, float]] = {}
    for s in get_json(f"{driver}/api/v1/applications/{app_id}/stages?details=true"):
        bad = int(s.get("numFailedTasks", 0)) + int(s.get("numKilledTasks", 0))
        failed += bad
        run += int(s.get("numCompleteTasks", 0)) + bad
        for t in (s.get("tasks") or {}).values():
            if t.get("status") not in ("SUCCESS", "FAILED", "KILLED") or t.get("duration") is None:
                continue  # still running: counted once it has ended
            total_ms += float(t["duration"])
            key = (int(s["stageId"]), int(t["index"]))
            if t["status"] == "SUCCESS" and (key not in last_ok or t["launchTime"] >= last_ok[key][0]):
                last_ok[key] = (t["launchTime"], float(t["duration"]))
    needed_ms = sum(d for _, d in last_ok.values())
    return {"failed": failed, "run": run, "task_s": round(total_ms / 1000, 1),
            "wasted_s": round((total_ms - needed_ms) / 1000, 1)}


def one(drv, c: ClusterSpec, tr, lab, label: str, mode: ShrinkMode, port: int, k: int, a, work: Path,
        events: list, expected: collections.Counter) -> tuple[ClusterSpec, dict]:
    c = drv.add_nodes(c, [tr], timeout=180).cluster
    t0 = time.monotonic()
    job = submit(drv, c, lab, port, ["/data/input.txt", f"/out/gs{k}", str(a.tasks), f"{a.task_s:g}"],
                 work / f"{label}-{k}.log")
    try:
        driver = f"http://{lab.controller_address}:{port}"
        app_id = wait_for("the application", lambda: get_json(driver + "/api/v1/applications")[0]["id"], 120)
        wait_for("tasks running on the TR node", lambda: any(
            e["hostPort"].rsplit(":", 1)[0] == tr.address and e["activeTasks"] > 0
            for e in get_json(f"{driver}/api/v1/applications/{app_id}/executors")), 180)
        seen = {"failed": 0, "run": 0, "task_s": 0.0, "wasted_s": 0.0}
        stop = threading.Event()

        def poll():  # the driver's REST API goes away with the job: keep the last counts
            while not stop.is_set():
                try:
                    seen.update(attempts(driver, app_id))
                except (OSError, ValueError):
                    pass
                time.sleep(0.5)

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        time.sleep(a.remove_after)  # into the TR node's tasks: what a kill throws away grows with it
        n_ev = len(events)
        t_shrink = time.monotonic()
        c = drv.remove_nodes(c, [tr.name], mode, timeout=180, drain_s=300).cluster
        shrink_s = time.monotonic() - t_shrink
        if job.wait(timeout=600) != 0:
            raise SystemExit(f"{label}: the job failed: {(work / f'{label}-{k}.log').read_text()[-2000:]}")
        job_s = time.monotonic() - t0
        stop.set()
        th.join()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    got = collections.Counter()
    for ln in drv.hdfs(c, "fs", "-cat", f"/out/gs{k}/part-*").splitlines():
        w, n = ln.split("\t")
        got[w] += int(n)
    fell_back = any("still busy" in e.message for e in events[n_ev:])
    return c, dict(seen, mode=label, exact=got == expected, shrink_s=round(shrink_s, 2), job_s=round(job_s, 2),
                   fell_back=fell_back)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--task-s", type=float, default=6.0)
    ap.add_argument("--cpus", default="0.5")
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--prefix", default="fwgs")
    ap.add_argument("--remove-after", type=float, default=0.0, metavar="S",
                    help="remove the TR node S seconds after its first task started (default: at once)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if not (1 <= a.reps <= 20 and 2 <= a.tasks <= 1000 and 0 < a.task_s <= 600 and 0 <= a.remove_after <= 600):
        ap.error("--reps 1..20, --tasks 2..1000, --task-s in (0, 600], --remove-after in [0, 600]")
    work = Path(a.dir or tempfile.mkdtemp(prefix="fawkes-bench-graceful-"))
    work.mkdir(parents=True, exist_ok=True)
    info = meta()
    print(f"graceful vs FP: {a.reps} rep(s), {a.tasks} tasks of {a.task_s:g} s, the TR node removed "
          f"{a.remove_after:g} s into its tasks, 2 hosts of {a.cpus} CPU / "
          f"{a.memory}; load {info['load']}", flush=True)
    lab = Lab.up_free(2, work / "lab", prefix=a.prefix, nets=range(230, 250), cpus=a.cpus, memory=a.memory)
    # migration passes 5 s apart instead of 30 s: a drained executor exits sooner (graceful's cost)
    c = ClusterSpec(f"gs{os.getpid() % 10000}", framework(), (node(lab, 0, Role.CORE),),
                    options={**LAB_OPTIONS, "decommission_retry_s": "5"})
    tr = node(lab, 1, Role.TR)
    events: list[ProgressEvent] = []
    drv = SparkHdfsDriver(lab.executor(), progress=events.append)
    words = [f"w{i % 23}" for i in range(12000)]
    src = work / "input.txt"
    src.write_text("\n".join(" ".join(words[i:i + 6]) for i in range(0, len(words), 6)) + "\n")
    expected = collections.Counter(words)
    rows = []
    try:
        drv.deploy(c, timeout=240)
        drv.load_input(c, str(src), "/data/input.txt")
        arms = (("FP", ShrinkMode.FP), ("graceful", ShrinkMode.DP))
        for rep in range(a.reps):
            for i, (label, mode) in enumerate(arms if rep % 2 == 0 else arms[::-1]):
                k = 2 * rep + i
                c, r = one(drv, c, tr, lab, label, mode, 4071 + i, k, a, work, events, expected)
                r["rep"] = rep + 1
                rows.append(r)
                print(f"rep {rep + 1} {label:>8}: {r['failed']} failed/killed task attempts of {r['run']} run, "
                      f"{r['wasted_s']:.0f} of {r['task_s']:.0f} task-seconds wasted, "
                      f"shrink {r['shrink_s']:.1f} s, job {r['job_s']:.1f} s, output "
                      f"{'exact' if r['exact'] else 'NOT exact'}{', fell back to FP' if r['fell_back'] else ''}",
                      flush=True)
    finally:
        try:
            drv.teardown(c.with_node(tr) if all(n.name != tr.name for n in c.nodes) else c)
        finally:
            drv.ex.close()
            lab.down()
    out = {**info, "load_end": [round(x, 2) for x in os.getloadavg()], "tasks": a.tasks, "task_s": a.task_s,
           "remove_after_s": a.remove_after,
           "cpus": a.cpus, "memory": a.memory, "rows": rows}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    for label in ("FP", "graceful"):
        mine = [r for r in rows if r["mode"] == label]
        if mine:
            print(f"{label:>8}: mean over {len(mine)} run(s): wasted {statistics.mean(r['wasted_s'] for r in mine):.1f} "
                  f"task-seconds, shrink {statistics.mean(r['shrink_s'] for r in mine):.1f} s, job "
                  f"{statistics.mean(r['job_s'] for r in mine):.1f} s")
    bad = [r for r in rows if not r["exact"]]
    print(f"load at the end {out['load_end']}; outputs exact: {len(rows) - len(bad)}/{len(rows)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
