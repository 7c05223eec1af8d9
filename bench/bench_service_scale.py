#!/usr/bin/env python3
"""Soak: the real coordinator, as a service with a standby, on a SIMULATED fleet at scale, on PostgreSQL.

    python bench/bench_service_scale.py [--hosts 10000] [--clusters 1000] [--trace-hours 24] [--speedup 24]
                                        [--jobs-per-cluster-hour 2] [--seed 1] [--backend postgres|sqlite]
                                        [--shards 1] [--every 60] [--json FILE]

What runs (each a process of its own, as in production): a throwaway PostgreSQL 15 server (unix socket
only; ``--backend sqlite`` for a file instead, and then no standby), the leader and a standby, both
``fawkes coordinator run`` on one config (JSON logs), and this process, which plays the seeded trace
into the state as users would (fawkes/simfleet: ``--clusters`` clusters of 4 core nodes requested at
once, ``--jobs-per-cluster-hour`` jobs each, c0 three times that, host failures at 0.05 an hour per
host, 2 % of daemon starts failing) and measures from outside.  Time is compressed ``--speedup`` times:
T, the sample period, every timeout and the retention are divided by it (retention shortened to 2 trace
hours of samples, 6 of events, 500 decisions, pruned every trace hour, so that its bound shows within
the run); the fast step keeps its 2 s.

Every ``--every`` seconds: the leader's RSS; the database's size; ``GET /api/state`` and ``GET /metrics``
(one each); ``fawkes status`` (one process); nodes moved (node transitions into running / released).
At the end of the trace, at full load: ``kill -9`` of the leader, and the time until the standby's first
decision (target 2 T).  Then the standby is stopped.

Reported: tick p50 / p99 / max (the leader's log, ``took_s``), the fast and sample steps' histogram
(``fawkes_step_duration_seconds`` from its /metrics, just before the kill), nodes moved per minute, RSS
and database size over time (RSS: growth after the first trace hour, target at most 10 %), the three
read paths' latencies (targets: /api/state 0.5 s, /metrics 0.2 s, status 1 s), the takeover.  The
fault campaign's invariants are not checked here: the simulated world lives inside the leader and dies
with it (tests/test_simulated_fleet.py checks them on a short run).  Every host shares this machine's
cores with the database, the world and this process: the load average is printed with the figures.

``--shards N`` (PostgreSQL): N coordinators on N disjoint pools of ``--hosts / N`` hosts and
``--clusters / N`` clusters each (seeds ``--seed``, ``--seed + 1``, ...), each with its own database on
the one server, all at once: what sharding a pool costs each shard (docs/operations.md).  Only the
first shard has a standby and its leader is killed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def rss_mb(pid: int) -> float | None:
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024
    except OSError:
        return None
    return None


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def get(url: str, timeout: float = 120) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read()
    return time.perf_counter() - t0, body


class Coordinator:
    def __init__(self, cfg: Path, log: Path, seconds: float):
        self.log = log
        self.p = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config", str(cfg),
                                   "--for", str(int(seconds))], stdout=subprocess.DEVNULL,
                                  stderr=log.open("wb"), env={**os.environ, "PYTHONPATH": str(REPO)},
                                  cwd=cfg.parent)

    def lines(self) -> list[dict]:
        out = []
        for ln in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
        return out

    def port(self) -> int | None:
        import re

        hit = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", self.log.read_text(errors="replace"))
        return int(hit.group(1)) if hit else None

    def ticks(self) -> list[dict]:
        return [m for m in self.lines() if m.get("message", "").startswith("tick ") and "took_s" in m]


def histogram(metrics: str, name: str) -> dict[str, dict]:
    """Per label value of ``step``: the buckets (cumulative), count and sum of ``name``."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict] = {}
    for fam in text_string_to_metric_families(metrics):
        if fam.name != name:
            continue
        for s in fam.samples:
            d = out.setdefault(s.labels["step"], {"buckets": {}, "count": 0, "sum": 0.0})
            if s.name.endswith("_bucket"):
                d["buckets"][s.labels["le"]] = s.value
            elif s.name.endswith("_count"):
                d["count"] = s.value
            elif s.name.endswith("_sum"):
                d["sum"] = s.value
    return out


def quantile_bound(h: dict, q: float) -> str:
    """The smallest bucket bound at or under which ``q`` of the observations fall."""
    n = h["count"]
    for le, c in sorted(h["buckets"].items(), key=lambda kv: float(kv[0])):
        if n and c >= q * n:
            return le
    return "+Inf"


class Shard:
    """One coordinator (and, for the first shard on PostgreSQL, its standby) over its own pool and state."""

    def __init__(self, k: int, a, url: str, d: Path, hosts: int, clusters: int):
        from fawkes.inventory import load_inventory
        from fawkes.sim.costs import cost_model
        from fawkes.simfleet.player import Player
        from fawkes.simfleet.scenario import write_scenario
        from fawkes.store import Store
        from fawkes.traces.costfile import load_cost_file
        from fawkes.traces.trace import load_trace

        s = a.speedup
        self.k, self.url, self.d, self.hosts, self.clusters = k, url, d, hosts, clusters
        self.sc = write_scenario(d, hosts=hosts, clusters=clusters, min_core=4, minutes=a.trace_hours * 60,
                                 speedup=s, seed=a.seed + k, jobs_per_cluster_hour=a.jobs_per_cluster_hour,
                                 host_failures_per_hour=0.05, start_failure=0.02, state=url)
        hour = 3600.0 / s
        with self.sc.config.open("a") as f:
            f.write(f"log_format: json\nretention: {{samples_s: {2 * hour:g}, events_s: {6 * hour:g}, "
                    f"decisions_keep: 500, every_s: {max(1.0, hour):g}}}\n")
        inv = load_inventory(self.sc.inventory)
        self.store = Store(url)
        self.store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores, "memory_mb": h.memory_mb,
                                "rack": None} for h in inv.hosts])
        self.store.register_framework("sim", "simulated", shared_dir="/simulated")
        wl = load_trace(self.sc.trace, capacity=hosts, min_core=4, period_s=120, clusters_file=self.sc.clusters,
                        cost=cost_model(load_cost_file(self.sc.costs)))
        self.player = Player(self.store, "sim", wl, speedup=s)
        self.period = max(1.0, 120.0 / s)
        self.run_for = self.player.duration_s + 600.0
        self.leader = self.standby = None
        self.series: list[dict] = []
        self.base = ""

    def size_mb(self, server) -> float:
        from sqlalchemy import text

        if server is None:
            return sum(p.stat().st_size for p in self.d.glob("fawkes.db*")) / 2**20
        with self.store.engine.connect() as c:
            return c.execute(text("SELECT pg_database_size(current_database())")).scalar_one() / 2**20

    def moved_since(self, t: float) -> int:
        from sqlalchemy import text

        with self.store.engine.connect() as c:
            return c.execute(text("SELECT count(*) FROM node_transitions WHERE time > :t AND to_state IN "
                                  "('running', 'released')"), {"t": t}).scalar_one()

    def measure(self, a, server, t_start: float, stop: threading.Event) -> None:
        last = time.time()
        while not stop.wait(a.every):
            now = time.time()
            row = {"shard": self.k, "t_s": round(now - t_start, 1), "trace_h": round((now - t_start) * a.speedup / 3600, 2),
                   "rss_mb": rss_mb(self.leader.p.pid), "db_mb": round(self.size_mb(server), 1),
                   "moved": self.moved_since(last), "load": [round(x, 2) for x in os.getloadavg()]}
            last = now
            try:
                row["api_state_s"] = round(get(self.base + "/api/state")[0], 3)
                row["metrics_s"] = round(get(self.base + "/metrics")[0], 3)
            except OSError as exc:
                row["http_error"] = str(exc)[:200]
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "fawkes", "status", "--state", self.url], capture_output=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
            row["status_s"] = round(time.perf_counter() - t0, 3) if r.returncode == 0 else None
            self.series.append(row)
            print(json.dumps(row), flush=True)

    def takeover(self) -> float | None:
        """kill -9 of the leader; seconds until the standby's first decision (None: none within 20 T)."""
        from sqlalchemy import text

        with self.store.engine.connect() as c:
            last_id = c.execute(text("SELECT coalesce(max(id), 0) FROM decisions")).scalar_one()
        killed = time.time()
        os.kill(self.leader.p.pid, signal.SIGKILL)
        self.leader.p.wait()
        first = None
        while first is None and time.time() - killed < 20 * self.period:
            time.sleep(0.2)
            with self.store.engine.connect() as c:
                first = c.execute(text("SELECT min(time) FROM decisions WHERE id > :i"), {"i": last_id}).scalar_one()
        return None if first is None else round(first - killed, 2)

    def figures(self, a, steps: dict, takeover: float | None) -> dict:
        from collections import Counter

        jobs = Counter(j.state for j in self.store.list_jobs())
        ticks = [m["took_s"] for m in self.leader.ticks()]
        hour_mark = [r for r in self.series if r["trace_h"] >= 1.0 and r["rss_mb"]]
        rss_growth = (max(r["rss_mb"] for r in hour_mark) / hour_mark[0]["rss_mb"] - 1) if hour_mark else None
        reads = {k: [r[k] for r in self.series if r.get(k) is not None] for k in ("api_state_s", "metrics_s", "status_s")}
        per_min = [r["moved"] * 60.0 / a.every for r in self.series]
        return {"shard": self.k, "hosts": self.hosts, "clusters": self.clusters, "period_s": self.period,
                "jobs_submitted": len(self.player.submitted), "jobs": dict(jobs), "refused": self.player.refused[:10],
                "ticks": {"n": len(ticks), "p50_s": pct(ticks, 0.5), "p99_s": pct(ticks, 0.99),
                          "max_s": max(ticks, default=None)},
                "steps": {k: {"count": v["count"], "mean_s": round(v["sum"] / v["count"], 3) if v["count"] else None,
                              "p50_at_most_s": quantile_bound(v, 0.5), "p99_at_most_s": quantile_bound(v, 0.99)}
                          for k, v in steps.items()},
                "nodes_moved_per_min": {"mean": round(statistics.mean(per_min), 1) if per_min else None,
                                        "max": max(per_min, default=None)},
                "rss_mb": {"first": self.series[0]["rss_mb"] if self.series else None,
                           "max": max((r["rss_mb"] for r in self.series if r["rss_mb"]), default=None)},
                "rss_growth_after_first_trace_hour": None if rss_growth is None else round(rss_growth, 3),
                "db_mb": {"max": max((r["db_mb"] for r in self.series), default=None),
                          "end": self.series[-1]["db_mb"] if self.series else None},
                "reads_median_s": {k: round(statistics.median(v), 3) if v else None for k, v in reads.items()},
                "reads_max_s": {k: max(v, default=None) for k, v in reads.items()},
                "takeover_s": takeover, "series": self.series}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--clusters", type=int, default=1_000)
    ap.add_argument("--trace-hours", type=float, default=24.0)
    ap.add_argument("--speedup", type=float, default=24.0)
    ap.add_argument("--jobs-per-cluster-hour", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between two measurements")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    if not (1 <= a.shards <= 8 and 1 <= a.clusters and 4 * a.clusters <= a.hosts <= 100_000
            and 0 < a.trace_hours <= 24 * 7 and 1 <= a.speedup <= 1000 and 0 < a.jobs_per_cluster_hour <= 3600
            and 1 <= a.every <= 3600 and a.clusters >= a.shards and (a.shards == 1 or a.backend == "postgres")):
        ap.error("need 1 <= shards <= 8 (more than 1 on postgres), shards <= clusters, 4 x clusters <= hosts <= "
                 "100000, 0 < trace-hours <= 168, 1 <= speedup <= 1000, 0 < jobs-per-cluster-hour <= 3600, "
                 "1 <= every <= 3600")
    from bench.results_meta import meta

    started = meta()
    root = Path(tempfile.mkdtemp(prefix="fawkes-soak-"))
    server = None
    if a.backend == "postgres":
        from tests.store_fixtures import _PgServer

        server = _PgServer()
        server.start()
    try:
        shards = []
        for k in range(a.shards):
            d = root / f"shard{k}"
            d.mkdir()
            if server is not None:
                server.admin(f"CREATE DATABASE fawkes_soak_{k}")
                url = server.url(f"fawkes_soak_{k}")
            else:
                url = f"sqlite:///{d / 'fawkes.db'}"
            shards.append(Shard(k, a, url, d, a.hosts // a.shards, a.clusters // a.shards))
        for sh in shards:
            print(f"shard {sh.k}: {sh.hosts} simulated hosts, {sh.clusters} clusters, {len(sh.player.rows)} jobs over "
                  f"{a.trace_hours:g} trace hours at {a.speedup:g}x ({sh.player.duration_s / 60:.1f} min), "
                  f"T = {sh.period:g} s, on {a.backend}, in {sh.d}; load {started['load']}", flush=True)
        t_start = time.time()
        for sh in shards:
            sh.leader = Coordinator(sh.sc.config, sh.d / "leader.log", sh.run_for)
        for sh in shards:
            while sh.leader.port() is None:
                if sh.leader.p.poll() is not None:
                    print(sh.leader.log.read_text()[-3000:], file=sys.stderr)
                    return 1
                time.sleep(0.5)
            sh.base = f"http://127.0.0.1:{sh.leader.port()}"
        if server is not None:
            shards[0].standby = Coordinator(shards[0].sc.config, shards[0].d / "standby.log", shards[0].run_for + 600)
        stop = threading.Event()
        mons = [threading.Thread(target=sh.measure, args=(a, server, t_start, stop), daemon=True) for sh in shards]
        for m in mons:
            m.start()
        for sh in shards:
            sh.player.t0 = time.time()
        while not all(sh.player.done() for sh in shards):
            for sh in shards:
                sh.player.step()
                if sh.leader.p.poll() is not None:
                    print(f"shard {sh.k}: the leader exited early:\n" + sh.leader.log.read_text()[-3000:],
                          file=sys.stderr)
                    return 1
            time.sleep(0.2)
        time.sleep(2 * shards[0].period)
        steps = [histogram(get(sh.base + "/metrics")[1].decode(), "fawkes_step_duration_seconds") for sh in shards]
        stop.set()
        for m in mons:
            m.join(timeout=600)
        takeover = shards[0].takeover() if shards[0].standby is not None else None
        for sh in shards:
            for proc in (sh.leader, sh.standby):
                if proc is not None and proc.p.poll() is None:
                    proc.p.send_signal(signal.SIGTERM)
                    try:
                        proc.p.wait(timeout=300)
                    except subprocess.TimeoutExpired:
                        proc.p.kill()
        runs = [sh.figures(a, st, takeover if sh.k == 0 else None) for sh, st in zip(shards, steps)]
        out = {**started, "ended": meta()["date"], "load_end": [round(x, 2) for x in os.getloadavg()],
               "hosts": a.hosts, "clusters": a.clusters, "trace_hours": a.trace_hours, "speedup": a.speedup,
               "jobs_per_cluster_hour": a.jobs_per_cluster_hour, "backend": a.backend, "shards": runs,
               "wall_s": round(time.time() - t_start, 1)}
        print(json.dumps({**out, "shards": [{k: v for k, v in r.items() if k != "series"} for r in runs]}, indent=1))
        for r in runs:
            t = r["ticks"]
            print(f"shard {r['shard']} ({r['hosts']} hosts, {r['clusters']} clusters): tick p50 {t['p50_s']} s, "
                  f"p99 {t['p99_s']} s (target 1 s), max {t['max_s']} s over {t['n']} ticks")
            for k, target in (("api_state_s", 0.5), ("metrics_s", 0.2), ("status_s", 1.0)):
                m = r["reads_median_s"][k]
                print(f"  {k}: median {m} s, max {r['reads_max_s'][k]} s (target {target} s: "
                      f"{'met' if m is not None and m <= target else 'MISSED'})")
            if r["takeover_s"] is not None:
                print(f"  kill -9 of the leader -> the standby's first decision: {r['takeover_s']} s "
                      f"(target 2T = {2 * r['period_s']:g} s)")
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
        return 0
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
