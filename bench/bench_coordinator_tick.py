#!/usr/bin/env python3
"""Time one whole coordinator tick at scale: store -> snapshot -> controller -> intent written.

    python bench/bench_coordinator_tick.py [--repeat 3] [--backend sqlite,postgres]

A store holding 1,000 ACTIVE MR-clusters with 50,000 nodes in total (a third core, the rest TR
and TC) over 55,000 hosts (5,000 free), one sample per cluster every 5 s over the snapshot's
window (2 T, T = 120 s) plus older samples and released nodes as history, on a SQLite file and
on a PostgreSQL database (a throwaway server started like the tests' one,
``tests/store_fixtures.py``).  Each run times ``Control(store, settings, clock).tick()`` on a
fresh copy of that state (the same first tick every time; after one untimed snapshot, as the
coordinator's between-ticks step reads the same rows every few seconds, unless ``--cold``) and
splits it by phase:
``build_snapshot`` (store -> Snapshot), ``controller.tick`` (the pure decision: the baseline,
measured in the same run), ``record_decision`` (decision + memory in one transaction) and
``apply`` (the plan written as intent: ~5,000 grows and ~400 shrinks).  Target: at most 1 s per
tick on each backend.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import func, insert, select, text  # noqa: E402

from fawkes.coordinator import control as control_mod  # noqa: E402
from fawkes.mechanism import ClusterState, Role, Settings  # noqa: E402
from fawkes.mechanism import controller as controller_mod  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.lifecycle import HostState, NodeState  # noqa: E402
from fawkes.store.schema import Framework, Host, MRCluster, Node, Sample  # noqa: E402

CLUSTERS = 1_000
NODES = 50_000
FREE = 5_000
T = 120.0
SAMPLE_EVERY = 5.0
NOW = 1_000_000.0
PHASES = ("build_snapshot", "controller.tick", "record_decision", "apply")


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def settings() -> Settings:
    return Settings(policy="TD", period_s=T, sample_period_s=SAMPLE_EVERY, tau=0.0)


def populate(store: Store, *, history_intervals: int, released: int, seed: int = 1) -> dict[str, int]:
    """Fill an empty store with bulk inserts (SQLAlchemy core); return the row counts."""
    rng = random.Random(seed)
    n_hosts = NODES + FREE
    per = NODES // CLUSTERS
    core = per // 3
    rows = {"hosts": n_hosts, "clusters": CLUSTERS, "nodes": NODES + released}
    with store.session(write=True) as s:
        s.execute(insert(Framework), [{"name": "spark", "kind": "spark-hdfs",
                                       "paths": {"spark_home": "/opt/spark", "hdfs_jars": "/opt/hdfs"},
                                       "created": 0.0}])
        s.execute(insert(Host), [{"name": f"h{i:06d}", "address": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}",
                                  "cores": 8, "memory_mb": 32768, "position": i, "added_at": 0.0,
                                  "state": HostState.ALLOCATED if i < NODES else HostState.FREE}
                                 for i in range(n_hosts)])
        s.execute(insert(MRCluster), [{"id": c + 1, "name": f"c{c:04d}", "live_name": f"c{c:04d}",
                                       "framework": "spark", "min_core": core, "state": ClusterState.ACTIVE,
                                       "queue_seq": c + 1, "requested_at": float(c), "admitted_at": float(c) + 1,
                                       "active_at": float(c) + 60, "state_since": float(c) + 60}
                                      for c in range(CLUSTERS)])
        nodes = []
        for c in range(CLUSTERS):
            for j in range(per):
                h = c * per + j
                role = Role.CORE if j < core else (Role.TR if j % 2 else Role.TC)
                since = NOW - 3600 + rng.random() * 3000
                nodes.append({"cluster_id": c + 1, "host": f"h{h:06d}", "holds_host": f"h{h:06d}", "role": role,
                              "state": NodeState.RUNNING, "requested_at": since, "running_at": since + 30,
                              "state_since": since + 30, "stored_bytes": 0 if role == Role.TR else rng.randrange(10**10),
                              "running_tasks": 0 if role == Role.TC else rng.randrange(8)})
        for k in range(released):  # history: nodes released long before the interval
            since = NOW - 86400 + rng.random() * 40000
            nodes.append({"cluster_id": rng.randrange(CLUSTERS) + 1, "host": f"h{rng.randrange(n_hosts):06d}",
                          "holds_host": None, "role": Role.TR, "state": NodeState.RELEASED, "requested_at": since,
                          "running_at": since + 30, "draining_at": since + 900, "released_at": since + 960,
                          "state_since": since + 960})
        s.execute(insert(Node), nodes)
    # samples: the snapshot's window (2 T) plus `history_intervals` older intervals; one transaction
    # per slice of time so no single statement carries a million parameters
    first = NOW - (2 + history_intervals) * T
    t, n_samples = first + SAMPLE_EVERY, 0
    while t <= NOW:
        batch = []
        for _ in range(int(T / SAMPLE_EVERY)):
            if t > NOW:
                break
            for c in range(CLUSTERS):
                busy = rng.random() * per * 8
                batch.append({"cluster_id": c + 1, "time": t, "unfinished_jobs": rng.randrange(50),
                              "pending_tasks": rng.randrange(5000), "running_tasks": int(busy),
                              "busy_slots": busy, "configured_slots": float(per * 8),
                              "completed_jobs": rng.randrange(3), "completed_tasks": rng.randrange(300)})
            t += SAMPLE_EVERY
        with store.session(write=True) as s:
            s.execute(insert(Sample), batch)
        n_samples += len(batch)
    rows["samples"] = n_samples
    return rows


class Timed:
    """Wraps the functions Control.tick calls, adding each call's wall time to ``times``."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self.saved = []

    def wrap(self, owner, attr: str, phase: str) -> None:
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.times[phase] = self.times.get(phase, 0.0) + time.perf_counter() - t0

        self.saved.append((owner, attr, fn))
        setattr(owner, attr, timed)

    def __enter__(self) -> Timed:
        self.wrap(control_mod, "build_snapshot", "build_snapshot")
        self.wrap(controller_mod, "tick", "controller.tick")
        self.wrap(control_mod, "record_decision", "record_decision")
        self.wrap(control_mod, "apply", "apply")
        return self

    def __exit__(self, *exc) -> None:
        for owner, attr, fn in reversed(self.saved):
            setattr(owner, attr, fn)


def one_tick(url: str, *, warm: bool) -> tuple[float, dict[str, float], dict[str, int]]:
    store = Store(url, clock=Clock(NOW))
    try:
        ctl = control_mod.Control(store, settings(), store.clock)
        if warm:  # a running coordinator reads the same rows every few seconds (between ticks)
            control_mod.build_snapshot(store, ctl.settings, NOW)
        with Timed() as tm:
            c0, t0 = time.process_time(), time.perf_counter()
            _, d, problems = ctl.tick()
            total = time.perf_counter() - t0
            tm.times["cpu"] = time.process_time() - c0
        with store.session() as s:
            states = dict(s.execute(select(Node.state, func.count()).where(Node.holds_host.is_not(None))
                                    .group_by(Node.state)).all())
        outcome = {"grows": len(d.plan.grows), "shrinks": len(d.plan.shrinks), "problems": len(problems),
                   "requested": states.get(NodeState.REQUESTED, 0), "draining": states.get(NodeState.DRAINING, 0)}
        return total, tm.times, outcome
    finally:
        store.close()


class SqliteBackend:
    name = "sqlite"

    def __init__(self, root: Path):
        self.root = root
        self.template = root / "template.db"

    def template_url(self) -> str:
        return f"sqlite:///{self.template}"

    def seal(self) -> None:
        store = Store(self.template_url())
        with store.engine.connect() as c:
            c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()

    def fresh(self) -> str:
        path = self.root / f"run-{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(self.template, path)
        return f"sqlite:///{path}"

    def close(self) -> None:
        pass


class PostgresBackend:
    name = "postgres"

    def __init__(self):
        from tests.store_fixtures import _PgServer

        self.server = _PgServer()
        self.server.start()
        self.server.admin("CREATE DATABASE bench_template")

    def template_url(self) -> str:
        return self.server.url("bench_template")

    def seal(self) -> None:
        store = Store(self.template_url())
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("VACUUM ANALYZE"))
        store.close()

    def fresh(self) -> str:
        name = "run_" + uuid.uuid4().hex[:8]
        self.server.admin(f"CREATE DATABASE {name} TEMPLATE bench_template")
        return self.server.url(name)

    def close(self) -> None:
        self.server.stop()


def bench(backend, args) -> dict[str, float]:
    t0 = time.perf_counter()
    store = Store(backend.template_url(), clock=Clock(NOW))
    rows = populate(store, history_intervals=args.history_intervals, released=args.released)
    store.close()
    backend.seal()
    print(f"\n{backend.name} (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores): populated {', '.join(f'{n:,} {k}' for k, n in rows.items())} "
          f"in {time.perf_counter() - t0:.1f} s")
    totals, cpu, phases, outcome = [], [], {p: [] for p in PHASES}, None
    for _ in range(args.repeat):
        url = backend.fresh()
        total, times, outcome = one_tick(url, warm=not args.cold)
        totals.append(total)
        cpu.append(times["cpu"])
        for p in PHASES:
            phases[p].append(times.get(p, 0.0))
    base = statistics.median(phases["controller.tick"])
    print(f"{'phase':>16} {'min ms':>8} {'median ms':>10} {'max ms':>8} {'x decision':>11}")
    for p in PHASES:
        xs = phases[p]
        print(f"{p:>16} {min(xs) * 1e3:>8.0f} {statistics.median(xs) * 1e3:>10.0f} {max(xs) * 1e3:>8.0f} "
              f"{statistics.median(xs) / base:>11.2f}")
    other = [tt - sum(phases[p][i] for p in PHASES) for i, tt in enumerate(totals)]
    print(f"{'other':>16} {min(other) * 1e3:>8.0f} {statistics.median(other) * 1e3:>10.0f} {max(other) * 1e3:>8.0f} "
          f"{statistics.median(other) / base:>11.2f}")
    med = statistics.median(totals)
    print(f"{'whole tick':>16} {min(totals) * 1e3:>8.0f} {med * 1e3:>10.0f} {max(totals) * 1e3:>8.0f} "
          f"{med / base:>11.2f}")
    print(f"{'(cpu, this proc)':>16} {min(cpu) * 1e3:>8.0f} {statistics.median(cpu) * 1e3:>10.0f} "
          f"{max(cpu) * 1e3:>8.0f} {statistics.median(cpu) / base:>11.2f}")
    print(f"plan: {outcome['grows']} grows, {outcome['shrinks']} shrinks, {outcome['problems']} problems; "
          f"written: {outcome['requested']} nodes requested, {outcome['draining']} draining")
    print(f"target: <= 1000 ms per tick: {'met' if med <= 1.0 else 'NOT met'} ({med * 1e3:.0f} ms median)")
    return {"median": med, "decision": base}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    ap.add_argument("--history-intervals", type=int, default=10,
                    help="intervals of older samples before the snapshot's window (default 10)")
    ap.add_argument("--released", type=int, default=20_000, help="released nodes kept as history (default 20,000)")
    ap.add_argument("--cold", action="store_true",
                    help="no untimed snapshot before the tick (caches cold, as on the first tick after a start)")
    args = ap.parse_args()
    results = {}
    for name in args.backend.split(","):
        name = name.strip()
        with tempfile.TemporaryDirectory(prefix="fawkes-bench-tick-") as tmp:
            backend = SqliteBackend(Path(tmp)) if name == "sqlite" else PostgresBackend()
            try:
                results[name] = bench(backend, args)
            finally:
                backend.close()
    if len(results) == 2:
        print(f"\npostgres / sqlite (whole tick): {results['postgres']['median'] / results['sqlite']['median']:.2f}")


if __name__ == "__main__":
    main()
