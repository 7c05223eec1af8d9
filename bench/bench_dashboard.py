#!/usr/bin/env python3
"""Time the dashboard's ``/api/state`` (what the open page fetches every 3 s) as the state grows.

    python bench/bench_dashboard.py [--clusters 10,100,1000] [--repeat 5]

A SQLite store with N ACTIVE MR-clusters of 50 nodes each (a third core, the rest TR and TC,
all running, requested during the last hour), as many released TR nodes from the last hour, 120
decisions over the last hour (a weight, a discrimination and a target per cluster), 1,000 jobs
and 1,000 events; filled with bulk inserts.  Prints per N: the median time of
``dashboard.state()``, of a whole ``GET /api/state`` over HTTP (the server the coordinator runs),
and the size of the JSON.  The page redraws every 3 s, so the request should take well under that.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert  # noqa: E402

from fawkes.coordinator.dashboard import state  # noqa: E402
from fawkes.coordinator.metrics_http import serve  # noqa: E402
from fawkes.mechanism import ClusterState, Role  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.lifecycle import HostState, JobState, NodeState  # noqa: E402
from fawkes.store.schema import DecisionRecord, Event, Framework, Host, Job, MRCluster, Node  # noqa: E402

PER = 50
NOW = time.time()


def populate(store: Store, n: int) -> None:
    hosts = n * PER
    with store.session(write=True) as s:
        s.execute(insert(Framework), [{"name": "spark", "kind": "spark-hdfs", "paths": {}, "created": 0.0}])
        s.execute(insert(Host), [{"name": f"h{i:06d}", "address": f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}",
                                  "cores": 8, "memory_mb": 32768, "position": i, "added_at": 0.0,
                                  "state": HostState.ALLOCATED} for i in range(hosts)])
        s.execute(insert(MRCluster), [{"id": c + 1, "name": f"c{c:04d}", "live_name": f"c{c:04d}", "framework": "spark",
                                       "min_core": PER // 3, "state": ClusterState.ACTIVE, "queue_seq": c + 1,
                                       "requested_at": NOW - 7200, "state_since": NOW - 7000} for c in range(n)])
        nodes = []
        for c in range(n):
            for j in range(PER):
                h = f"h{c * PER + j:06d}"
                since = NOW - 3600 + (j * 61) % 3000
                role = Role.CORE if j < PER // 3 else (Role.TR if j % 2 else Role.TC)
                nodes.append({"cluster_id": c + 1, "host": h, "holds_host": h, "role": role, "state": NodeState.RUNNING,
                              "requested_at": since, "running_at": since + 30, "state_since": since + 30})
                nodes.append({"cluster_id": c + 1, "host": h, "holds_host": None, "role": Role.TR,
                              "state": NodeState.RELEASED, "requested_at": since - 600, "released_at": since - 60,
                              "state_since": since - 60})
        s.execute(insert(Node), nodes)
        names = [f"c{c:04d}" for c in range(n)]
        s.execute(insert(DecisionRecord), [{"time": NOW - 3600 + 30 * k, "policy": "TD", "inputs": {},
                                      "weights": {x: 1.0 / n for x in names},
                                      "discriminations": {x: 0.01 * (k % 7) for x in names},
                                      "global_factor": 0.5, "gate_open": True, "targets": {x: PER for x in names},
                                      "plan": {"grows": [], "shrinks": []}, "reason": "bench"} for k in range(120)])
        s.execute(insert(Job), [{"cluster_id": k % n + 1, "argv": ["app.py"], "state": JobState.QUEUED,
                                 "submitted_at": NOW - 1000 + k} for k in range(1000)])
        s.execute(insert(Event), [{"time": NOW - 1000 + k, "kind": "bench", "message": f"event {k}"}
                                  for k in range(1000)])


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", default="10,100,1000")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'clusters':>8} {'live nodes':>10} {'state() s':>10} {'GET /api/state s':>17} {'JSON MB':>8}")
    for n in (int(x) for x in args.clusters.split(",")):
        with tempfile.TemporaryDirectory() as d:
            store = Store(f"sqlite:///{d}/bench.db")
            populate(store, n)
            srv, _, port = serve(store, {}, "127.0.0.1", 0)
            try:
                body = b""

                def get():
                    nonlocal body
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                    c.request("GET", "/api/state")
                    r = c.getresponse()
                    body = r.read()
                    assert r.status == 200, r.status
                    c.close()

                t_state = median_s(lambda: state(store), args.repeat)
                t_get = median_s(get, args.repeat)
                print(f"{n:>8} {n * PER:>10} {t_state:>10.3f} {t_get:>17.3f} {len(body) / 1e6:>8.2f}", flush=True)
            finally:
                srv.shutdown()
                srv.server_close()
                store.close()


if __name__ == "__main__":
    main()
