#!/usr/bin/env python3
"""Time the paths a person or Prometheus hits at 1,000 clusters: ``fawkes status``, the dashboard's
``GET /api/state`` and ``GET /metrics``, on this code and on a baseline commit, in one run.

    python bench/bench_service_paths.py [--clusters 1000] [--hosts 10000] [--repeat 7]
                                        [--baseline f8d0134] [--json FILE]

The state (one SQLite file per code version, filled by the same seeded bulk inserts through that
version's own schema) is a pool that has run for a while: ``--hosts`` hosts, ``--clusters`` ACTIVE
MR-clusters holding 90 % of them (a third core, the rest TR and TC; 2 % draining), 10 released nodes
per cluster as history (half released in the last hour), one sample per cluster every 5 s over the
last 24 min (the snapshot's window and ten intervals more), a decision every 30 s for 6 h (the most
the page shows: 120 in its hour; weights, discriminations and targets of every cluster, a plan), 50
jobs per cluster (2 queued, 1 running, the rest done) and 100 events per cluster.

Each repetition runs, for each version in turn (alternated, so the machine's load falls on both):
``fawkes status`` as a process (wall time, and its CPU time: user + system, which the machine's
other work inflates less), then ``GET /api/state`` and ``GET /metrics`` on a server of that version
(``fawkes.coordinator.metrics_http.serve``, what the coordinator runs) started in its own process:
the wall time of the request and the server's CPU time for it.  The first ``/api/state`` of a
server is reported apart (cold: nothing cached).  A new decision is recorded before every
repetition (the coordinator records one per tick), so a cache that only holds until the next tick
is measured as the page meets it.  Python runs with its bytecode cache on (as an installed package
ships its .pyc; the cache goes to a temporary directory).

The outputs of the two versions are compared: ``fawkes status --json`` without the forecast (its
times are relative to the clock), the dashboard's document (``dashboard.state(store, now=...)``, what
``/api/state`` serves) at the same ``now``, ``/metrics`` line by line.  Targets (issue 26): status <= 1 s, /api/state <= 0.5 s,
/metrics <= 0.2 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PER_CLUSTER_JOBS, PER_CLUSTER_EVENTS, RELEASED_PER_CLUSTER = 50, 100, 10
DECISIONS, DECISION_EVERY = 720, 30.0
SAMPLE_EVERY, SAMPLE_SPAN = 5.0, 24 * 60.0
TARGETS = {"status": 1.0, "api_state": 0.5, "metrics": 0.2}


# ------------------------------------------------------------------ fill (runs in a child: --fill)
def fill(url: str, clusters: int, hosts: int, now: float, seed: int = 26) -> dict[str, int]:
    """Fill an empty store with bulk inserts (SQLAlchemy core) through the imported version's schema."""
    from sqlalchemy import insert

    from fawkes.mechanism import ClusterState, Role
    from fawkes.store import Store
    from fawkes.store.lifecycle import HostState, JobState, NodeState
    from fawkes.store.schema import (
        DecisionRecord,
        Event,
        Framework,
        Host,
        Job,
        MRCluster,
        Node,
        Sample,
    )

    rng = random.Random(seed)
    per = max(3, int(hosts * 0.9) // clusters)
    held = per * clusters
    if held > hosts:
        raise SystemExit(f"--hosts {hosts}: fewer than 3 per cluster")
    names = [f"c{c:04d}" for c in range(clusters)]
    store = Store(url)
    rows: dict[str, int] = {}
    with store.session(write=True) as s:
        s.execute(insert(Framework), [{"name": "spark", "kind": "spark-hdfs", "paths": {"spark_home": "/opt/spark"},
                                       "created": 0.0}])
        s.execute(insert(Host), [{"name": f"h{i:06d}", "address": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}",
                                  "cores": 8, "memory_mb": 32768, "position": i, "added_at": 0.0,
                                  "state": HostState.ALLOCATED if i < held else HostState.FREE}
                                 for i in range(hosts)])
        s.execute(insert(MRCluster), [{"id": c + 1, "name": names[c], "live_name": names[c], "framework": "spark",
                                       "min_core": per // 3, "state": ClusterState.ACTIVE, "queue_seq": c + 1,
                                       "requested_at": now - 86400 + c, "admitted_at": now - 86400 + c + 1,
                                       "active_at": now - 86400 + c + 60, "state_since": now - 86400 + c + 60}
                                      for c in range(clusters)])
        nodes = []
        for c in range(clusters):
            for j in range(per):
                h = f"h{c * per + j:06d}"
                role = Role.CORE if j < per // 3 else (Role.TR if j % 2 else Role.TC)
                since = now - 3600 + rng.random() * 3000
                draining = role != Role.CORE and rng.random() < 0.02
                nodes.append({"cluster_id": c + 1, "host": h, "holds_host": h, "role": role,
                              "state": NodeState.DRAINING if draining else NodeState.RUNNING,
                              "requested_at": since, "running_at": since + 30,
                              "draining_at": now - 60 if draining else None,
                              "state_since": now - 60 if draining else since + 30,
                              "stored_bytes": 0 if role == Role.TR else rng.randrange(10**10),
                              "running_tasks": 0 if role == Role.TC else rng.randrange(8)})
            for k in range(RELEASED_PER_CLUSTER):  # history: half released within the hour the page shows
                gone = now - (rng.random() * 3600 if k % 2 else 3600 + rng.random() * 80000)
                h = f"h{rng.randrange(hosts):06d}"
                nodes.append({"cluster_id": c + 1, "host": h, "holds_host": None, "role": Role.TR,
                              "state": NodeState.RELEASED, "requested_at": gone - 1800, "running_at": gone - 1770,
                              "draining_at": gone - 60, "released_at": gone, "state_since": gone})
        s.execute(insert(Node), nodes)
        rows.update(hosts=hosts, clusters=clusters, nodes=len(nodes))
        jobs = []
        for c in range(clusters):
            for k in range(PER_CLUSTER_JOBS):
                t = now - 86400 + k * 86400 / PER_CLUSTER_JOBS + rng.random() * 60
                state = JobState.QUEUED if k >= PER_CLUSTER_JOBS - 2 else (
                    JobState.RUNNING if k == PER_CLUSTER_JOBS - 3 else JobState.SUCCEEDED)
                done = state == JobState.SUCCEEDED
                jobs.append({"cluster_id": c + 1, "argv": ["app.py", str(k)], "state": state, "submitted_at": t,
                             "dispatched_at": None if state == JobState.QUEUED else t + 5,
                             "started_at": None if state == JobState.QUEUED else t + 10,
                             "ended_at": t + 600 if done else None, "exit_code": 0 if done else None,
                             "app_id": None if state == JobState.QUEUED else f"app-{c}-{k}", "detail": ""})
        jobs.sort(key=lambda j: j["submitted_at"])
        s.execute(insert(Job), jobs)
        events = sorted(({"time": now - 86400 + rng.random() * 86400, "kind": "node", "level": "info",
                          "cluster": names[c], "node": f"h{c * per:06d}", "message": f"node event {k} of {names[c]}"}
                         for c in range(clusters) for k in range(PER_CLUSTER_EVENTS)), key=lambda e: e["time"])
        s.execute(insert(Event), events)
        rows.update(jobs=len(jobs), events=len(events))
    # decisions, one transaction per 60 (each carries three maps over every cluster)
    for first in range(0, DECISIONS, 60):
        batch = []
        for k in range(first, min(DECISIONS, first + 60)):
            t = now - (DECISIONS - k) * DECISION_EVERY
            batch.append({"time": t, "policy": "TD", "inputs": {"capacity": hosts, "free": hosts - held},
                          "weights": {x: rng.random() / clusters for x in names},
                          "discriminations": {x: rng.random() * 0.1 for x in names},
                          "global_factor": rng.random(), "gate_open": bool(k % 2),
                          "targets": {x: per + rng.randrange(-2, 3) for x in names},
                          "plan": {"grows": [{"cluster": names[k % clusters], "host": f"h{held + k % 10:06d}",
                                              "role": "transient"}],
                                   "shrinks": [{"cluster": names[(k + 1) % clusters], "node": k, "role": "transient",
                                                "mode": "fp"}]},
                          "reason": "bench"})
        with store.session(write=True) as s:
            s.execute(insert(DecisionRecord), batch)
    rows["decisions"] = DECISIONS
    n_samples, t = 0, now - SAMPLE_SPAN
    while t <= now:
        batch = []
        for _ in range(24):
            if t > now:
                break
            for c in range(clusters):
                busy = rng.random() * per * 8
                batch.append({"cluster_id": c + 1, "time": t, "unfinished_jobs": 3, "pending_tasks": rng.randrange(500),
                              "running_tasks": int(busy), "busy_slots": busy, "configured_slots": float(per * 8),
                              "completed_jobs": 0, "completed_tasks": int((t - now + SAMPLE_SPAN) * 2)})
            t += SAMPLE_EVERY
        with store.session(write=True) as s:
            s.execute(insert(Sample), batch)
        n_samples += len(batch)
    rows["samples"] = n_samples
    store.close()
    return rows


def add_decision(url: str, now: float) -> None:
    """Record one more decision at ``now`` (as a tick does): a copy of the latest."""
    from sqlalchemy import insert, select

    from fawkes.store import Store
    from fawkes.store.schema import DecisionRecord

    store = Store(url)
    with store.session(write=True) as s:
        d = s.execute(select(DecisionRecord).order_by(DecisionRecord.id.desc()).limit(1)).scalar_one()
        s.execute(insert(DecisionRecord), [{"time": now, "policy": d.policy, "inputs": d.inputs,
                                            "weights": d.weights, "discriminations": d.discriminations,
                                            "global_factor": d.global_factor, "gate_open": d.gate_open,
                                            "targets": d.targets, "plan": d.plan, "reason": "bench tick"}])
    store.close()


def dump_state(url: str, now: float) -> None:
    """Print the dashboard's document at ``now`` (to compare two versions at the same clock)."""
    from fawkes.coordinator.dashboard import state
    from fawkes.store import Store

    store = Store(url)
    print(json.dumps(state(store, now=now), allow_nan=False))
    store.close()


def serve_forever(url: str) -> None:
    """The coordinator's HTTP server (/metrics, the dashboard) on the state; prints its port."""
    from fawkes.coordinator.metrics_http import serve
    from fawkes.store import Store

    store = Store(url)
    _, _thread, port = serve(store, {"ticks": 0.0}, "127.0.0.1", 0)
    print(port, flush=True)
    sys.stdin.read()  # until the bench closes our stdin


# ------------------------------------------------------------------ the driver
class Version:
    def __init__(self, name: str, tree: Path, work: Path):
        self.name, self.tree = name, tree
        self.url = f"sqlite:///{work / f'state-{name}.db'}"
        self.env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": str(work / "pyc")}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.server = None
        self.port = 0

    def child(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(Path(__file__).resolve()), "--tree", str(self.tree), *args],
                              env=self.env, check=True, **kw)

    def start_server(self) -> None:
        self.server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--tree", str(self.tree),
                                        "--serve", self.url], env=self.env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        self.port = int(self.server.stdout.readline())

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stdin.close()
            self.server.wait(timeout=60)
            self.server = None

    def server_cpu(self) -> float:
        fields = Path(f"/proc/{self.server.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def get(self, path: str) -> tuple[float, float, bytes]:
        cpu0, t0 = self.server_cpu(), time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        wall = time.perf_counter() - t0
        if r.status != 200:
            raise SystemExit(f"{self.name}: GET {path}: {r.status}")
        return wall, self.server_cpu() - cpu0, body

    def status(self, *extra: str) -> tuple[float, float, bytes]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "fawkes", "status", "--state", self.url, *extra], env=self.env,
                           capture_output=True, check=True, cwd=self.tree)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r.stdout


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` (git archive) under ``into``."""
    tar = into / "baseline.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "archive", commit], cwd=REPO, stdout=f, check=True)
    tree = into / "baseline"
    tree.mkdir()
    with tarfile.open(tar) as t:
        t.extractall(tree, filter="data")
    return tree


def normalized_state(body: bytes) -> dict:
    """The document (of ``state(store, now=...)`` at the same ``now`` for both) without the state's URL."""
    doc = json.loads(body)
    doc.pop("state", None)
    return doc


def normalized_metrics(body: bytes) -> list[str]:
    return sorted(ln for ln in body.decode().splitlines() if not ln.startswith("fawkes_oldest_drain_seconds"))


def summary(xs: list[float]) -> dict[str, float]:
    return {"min_ms": round(min(xs) * 1e3, 1), "median_ms": round(statistics.median(xs) * 1e3, 1),
            "max_ms": round(max(xs) * 1e3, 1), "n": len(xs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--baseline", default="f8d0134", help="the commit to compare with (empty: none)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--fill", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tick", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dump", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.tree:  # a child: the version under test first on the path
        sys.path.insert(0, args.tree)
        if args.fill:
            print(json.dumps(fill(args.fill, args.clusters, args.hosts, args.now)))
        elif args.tick:
            add_decision(args.tick, args.now)
        elif args.dump:
            dump_state(args.dump, args.now)
        elif args.serve:
            serve_forever(args.serve)
        return 0
    sys.path.insert(0, str(REPO))
    from bench.results_meta import meta

    print(json.dumps(meta()), flush=True)  # the results file's header (bench/results_meta.py)
    out = {"meta": meta(), "clusters": args.clusters, "hosts": args.hosts, "repeat": args.repeat,
           "targets_s": TARGETS, "versions": {}}
    with tempfile.TemporaryDirectory(prefix="fawkes-bench-paths-") as tmp:
        work = Path(tmp)
        versions = [Version("this", REPO, work)]
        if args.baseline:
            base = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=REPO, capture_output=True,
                                  text=True, check=True).stdout.strip()
            versions.append(Version(f"baseline {base}", export(args.baseline, work), work))
        now = time.time()
        for v in versions:
            t0 = time.perf_counter()
            r = v.child("--fill", v.url, "--clusters", str(args.clusters), "--hosts", str(args.hosts),
                        "--now", repr(now), capture_output=True, text=True)
            rows = json.loads(r.stdout)
            print(f"{v.name}: filled {', '.join(f'{n:,} {k}' for k, n in rows.items())} in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            out["rows"] = rows
        figures = {v.name: {"status_wall": [], "status_cpu": [], "api_state_wall": [], "api_state_cpu": [],
                            "api_state_cold_wall": [], "api_state_cold_cpu": [], "metrics_wall": [],
                            "metrics_cpu": []} for v in versions}
        bodies = {}
        loads = [os.getloadavg()[0]]
        try:
            for v in versions:
                v.status()  # warm the bytecode cache and the page cache
                v.start_server()
                wall, cpu, _ = v.get("/api/state")
                figures[v.name]["api_state_cold_wall"].append(wall)
                figures[v.name]["api_state_cold_cpu"].append(cpu)
            for rep in range(args.repeat):
                tick = repr(time.time())
                for v in versions:
                    v.child("--tick", v.url, "--now", tick)
                for v in versions:
                    f = figures[v.name]
                    wall, cpu, _ = v.status()
                    f["status_wall"].append(wall)
                    f["status_cpu"].append(cpu)
                    for path, key in (("/api/state", "api_state"), ("/metrics", "metrics")):
                        wall, cpu, body = v.get(path)
                        f[f"{key}_wall"].append(wall)
                        f[f"{key}_cpu"].append(cpu)
                        bodies[(v.name, key)] = body
                loads.append(os.getloadavg()[0])
                print(f"repetition {rep + 1}/{args.repeat} done (load average {loads[-1]:.1f})", flush=True)
            at = repr(time.time())
            for v in versions:
                bodies[(v.name, "state_at")] = v.child("--dump", v.url, "--now", at, capture_output=True).stdout
                bodies[(v.name, "status")] = json.loads(v.status("--json")[2])
                bodies[(v.name, "status")].pop("forecast")
                bodies[(v.name, "status")].pop("state")  # the file's URL
        finally:
            for v in versions:
                v.stop_server()
    names = [v.name for v in versions]
    out["load_average_during"] = {"min": min(loads), "max": max(loads)}
    print(f"\n{args.clusters:,} clusters, {args.hosts:,} hosts; {args.repeat} repetitions, alternated; load average "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    print(f"{'path':>22} " + " ".join(f"{n + ' wall':>22} {'cpu':>8}" for n in names) + f" {'target':>8}")
    for key, label in (("status", "fawkes status"), ("api_state", "GET /api/state"),
                       ("api_state_cold", "  (first, cold)"), ("metrics", "GET /metrics")):
        cells = []
        for n in names:
            f = figures[n]
            out["versions"].setdefault(n, {})[key] = {"wall": summary(f[f"{key}_wall"]), "cpu": summary(f[f"{key}_cpu"])}
            w, c = f[f"{key}_wall"], f[f"{key}_cpu"]
            cells.append(f"{min(w) * 1e3:>9.0f} / {statistics.median(w) * 1e3:>7.0f} ms {statistics.median(c) * 1e3:>6.0f} ms")
        target = TARGETS.get(key)
        print(f"{label:>22} " + " ".join(cells) + (f" {target * 1e3:>6.0f} ms" if target else ""))
    print("(wall: min / median; cpu: median CPU time of the status process, or of the server for the request)")
    for key, target in TARGETS.items():
        med = statistics.median(figures[names[0]][f"{key}_wall"])
        cpu = statistics.median(figures[names[0]][f"{key}_cpu"])
        verdict = "met" if med <= target else ("met in CPU time, not in wall time" if cpu <= target else "NOT met")
        out["versions"][names[0]][key]["target"] = verdict
        print(f"target {key} <= {target * 1e3:.0f} ms ({names[0]}): {verdict} "
              f"(median wall {med * 1e3:.0f} ms, CPU {cpu * 1e3:.0f} ms)")
    if len(names) == 2:
        same = {"status": bodies[(names[0], "status")] == bodies[(names[1], "status")],
                "api_state": normalized_state(bodies[(names[0], "state_at")])
                == normalized_state(bodies[(names[1], "state_at")]),
                "metrics": normalized_metrics(bodies[(names[0], "metrics")])
                == normalized_metrics(bodies[(names[1], "metrics")])}
        out["same_output_as_baseline"] = same
        if not same["api_state"]:
            a, b = (normalized_state(bodies[(n, "state_at")]) for n in names)
            out["api_state_differs_in"] = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            print(f"/api/state differs in: {', '.join(out['api_state_differs_in'])}")
        print("same output as the baseline: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
