#!/usr/bin/env python3
"""Are the lab's hosts independent?  The same work on one busy host, then on three at once (issue 25: the
twin's None misses).

    sudo python3 bench/bench_lab_interference.py [--reps 2] [--partitions 12] [--core-s 1.5] [--dir DIR]
                                                 [--prefix fwif] [--subnet 10.228.0] [--json FILE]

The lab's hosts are CPU quotas of one machine (``fawkes.demo.DemoPlan``: 6 hosts of 0.33 CPU on 2 cores):
a host is a unit of capacity only if a busy neighbour does not slow it.  The simulator (and so the twin)
takes hosts as independent.  On the demo's lab (3 MR-clusters of 1 node, policy None), alternating
ABBA per repetition:

* **floor** (the physical floor: the work done directly, no Spark): the burn job's hashing for one task
  (``--core-s`` x 3.9 M SHA-256 steps, ``fawkes/apps/burn.py``), run over SSH by the host's Python on the
  first cluster's host alone, then on the three clusters' hosts at once; seconds each;
* **spark**: the demo's job (``--partitions`` x ``--core-s``) on the first cluster alone, then one on each
  of the three clusters at once; per job its response and the mean task seconds on its (only) node by
  the executors (``jobs.task_time``).

Prints each arm's figures and the ratio three-at-once / alone (1: independent hosts).  Results JSON with the
command, the commit, the date and the load.  Not part of CI (about 4 x reps x R).
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
    from bench.bench_lab_policies import latin_order
    from bench.results_meta import meta
except ImportError:  # run as a script: bench/ is on the path
    from bench_lab_policies import latin_order
    from results_meta import meta

from fawkes.demo import DemoPlan, Session
from fawkes.errors import FawkesError
from fawkes.ssh.shell import Script

ITERATIONS_PER_CORE_S = 3_900_000  # fawkes/apps/burn.py
BURN = ("import hashlib, time\nh = b'fawkes' * 10\nt = time.perf_counter()\nfor _ in range({n}):\n"
        "    h = hashlib.sha256(h).digest()\nprint(time.perf_counter() - t)")
ARMS = ("alone", "three")


def order(rep: int) -> list[str]:
    """ABBA: alone first in even repetitions, three first in odd ones (the live benchmark's Latin square)."""
    return latin_order(list(ARMS), rep)


def floor(ex, hosts: list[str], iterations: int, python: str) -> dict[str, float]:
    """The hashing of one task on each of ``hosts`` at once: host -> seconds."""
    res = ex.run(hosts, Script("{py} -c {code}", py=python, code=BURN.format(n=iterations)), timeout=600)
    bad = {h: r.error or r.stderr for h, r in res.items() if not r.ok}
    if bad:
        raise FawkesError(f"the floor run failed: {bad}")
    return {h: float(r.stdout.strip()) for h, r in res.items()}


def spark(s: Session, clusters: list[str]) -> list[dict]:
    """One demo job on each of ``clusters`` at once: per job its response and its node's mean task seconds."""
    from fawkes.store.lifecycle import JobState

    ids = [(s.submit(c), c) for c in clusters]
    s.wait("the jobs", lambda: s.finished([i for i, _ in ids]), 1800)
    out = []
    for i, c in ids:
        j = s.store.get_job(i)
        if JobState(j.state) is not JobState.SUCCEEDED:
            raise FawkesError(f"job {i} on {c} failed: {j.detail}")
        m = (j.task_time or {}).get("master") or [0, 0.0]
        out.append({"job": i, "cluster": c, "response_s": j.ended_at - j.submitted_at, "tasks": m[0],
                    "task_s": m[1] / m[0] if m[0] else None})
    return out


def ratio(three: list[float], alone: list[float]) -> float | None:
    return statistics.mean(three) / statistics.mean(alone) if three and alone else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--core-s", type=float, default=1.5)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--prefix", default="fwif")
    ap.add_argument("--subnet", default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    bad = [(n, why) for n, ok, why in (
        ("--reps", 1 <= a.reps <= 20, "1..20"), ("--partitions", 1 <= a.partitions <= 64, "1..64"),
        ("--core-s", 0.1 <= a.core_s <= 10, "0.1..10")) if not ok]
    if bad:
        print(f"error: {bad[0][0]}: expected {bad[0][1]}", file=sys.stderr)
        return 2
    plan = DemoPlan(partitions=a.partitions, core_s=a.core_s, stream=())
    signal.signal(signal.SIGTERM, lambda *x: (_ for _ in ()).throw(KeyboardInterrupt()))
    workdir = a.dir or Path(tempfile.mkdtemp(prefix="fawkes-interference-"))
    out_path = a.json or workdir / "result.json"
    t0 = time.time()
    s = Session(workdir, plan, prefix=a.prefix, subnet=a.subnet)
    doc: dict = {**meta(), "reps": a.reps, "job": {"partitions": a.partitions, "core_s": a.core_s},
                 "host_quota": {"cpus": plan.cpus, "memory": plan.memory, "hosts": plan.hosts},
                 "floor": [], "spark": []}
    iterations = int(a.core_s * ITERATIONS_PER_CORE_S)
    try:
        s.setup_clusters()
        s.start("None")
        s.wait("the active MR-clusters", s.active, 600)
        s.wait("every cluster at its minimum", s.at_minimum, 300)
        clusters = list(plan.clusters)
        hosts = [s.store.list_nodes(c)[0].host for c in clusters]
        with s.lab.executor(command_timeout=600) as ex:
            for rep in range(a.reps):
                for arm in order(rep):
                    got = floor(ex, hosts[:1] if arm == "alone" else hosts, iterations, sys.executable)
                    doc["floor"].append({"rep": rep, "arm": arm, "seconds": got})
                    print(f"floor rep {rep + 1} {arm:<5}: " + ", ".join(f"{h} {v:.2f} s" for h, v in got.items()),
                          flush=True)
        for rep in range(a.reps):
            for arm in order(rep):
                got = spark(s, clusters[:1] if arm == "alone" else clusters)
                doc["spark"].append({"rep": rep, "arm": arm, "jobs": got})
                print(f"spark rep {rep + 1} {arm:<5}: " + ", ".join(
                    f"{j['cluster']} {j['response_s']:.0f} s, {j['task_s']:.2f} s/task" for j in got)
                      + f" ({time.time() - t0:.0f} s)", flush=True)
                out_path.write_text(json.dumps(doc, indent=2, default=str))
    finally:
        s.close()
        doc["load_at_end"] = meta()["load"]
        doc["wall_s"] = time.time() - t0
        fl = {arm: [v for r in doc["floor"] if r["arm"] == arm for v in r["seconds"].values()] for arm in ARMS}
        tasks = {arm: [j["task_s"] for r in doc["spark"] if r["arm"] == arm for j in r["jobs"] if j["task_s"]]
                 for arm in ARMS}
        resp = {arm: [j["response_s"] for r in doc["spark"] if r["arm"] == arm for j in r["jobs"]] for arm in ARMS}
        doc["summary"] = {"floor_s": {k: statistics.mean(v) if v else None for k, v in fl.items()},
                          "floor_ratio": ratio(fl["three"], fl["alone"]),
                          "task_s": {k: statistics.mean(v) if v else None for k, v in tasks.items()},
                          "task_ratio": ratio(tasks["three"], tasks["alone"]),
                          "response_s": {k: statistics.mean(v) if v else None for k, v in resp.items()},
                          "response_ratio": ratio(resp["three"], resp["alone"])}
        out_path.write_text(json.dumps(doc, indent=2, default=str))
    sm = doc["summary"]
    print(f"\nthree hosts busy at once over one host alone (1: independent hosts): hashing {sm['floor_ratio']:.3f}, "
          f"Spark task seconds {sm['task_ratio']:.3f}, job response {sm['response_ratio']:.3f}")
    print(f"results: {out_path}; total {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
