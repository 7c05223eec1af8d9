"""The expected-free-time table (issue 12, P-4): pure on snapshots, and shown by ``fawkes status``."""

from __future__ import annotations

import json
import time

from fawkes.mechanism import ClusterMetrics, ClusterState, NodeView, Role, Settings, Snapshot
from fawkes.mechanism.forecast import free_by, free_times, workload_end
from fawkes.store import NodeState, Store
from tests.mechanism_helpers import cluster, memory
from tests.test_cli_store import fawkes, ok

S = Settings(period_s=60.0, idle_timeout_s=120.0)


def busy(t, pending, running, completed):
    return ClusterMetrics(time=t, pending_tasks=pending, running_tasks=running, completed_tasks=completed,
                          unfinished_jobs=1)


def test_a_cluster_frees_its_nodes_when_its_workload_drains_plus_t_idle():
    # 100 tasks done in the last 50 s (2/s), 40 left at t=1000: done at 1020, gone at 1140
    a = cluster("a", 2, tr=1, samples=(busy(950, 100, 40, 0), busy(1000, 0, 40, 100)))
    rows = free_times(Snapshot(1000.0, 4, ("f0",), (a,)), S)
    assert workload_end(a, None) == (1020.0, "40 tasks left at 2/s")
    assert [(r.host, r.at) for r in rows] == [("f0", 1000.0), ("a-c0", 1140.0), ("a-c1", 1140.0), ("a-r0", 1140.0)]
    assert free_by(rows, 1, 1000.0) == 1000.0 and free_by(rows, 2, 1000.0) == 1140.0
    assert free_by(rows, 5, 1000.0) is None and free_by(rows, 0, 1000.0) == 1000.0


def test_surplus_draining_saving_idle_and_unknown():
    a = cluster("a", 1, tr=2, samples=(busy(990, 10, 2, 5), busy(1000, 10, 2, 5)))  # no completion: unknown
    a = a.__class__(**{**{f: getattr(a, f) for f in a.__slots__}, "nodes": a.nodes[:2] + (
        NodeView("a-r1", Role.TR, draining=True),)})
    idle = cluster("i", 1, samples=(busy(1000, 0, 0, 7),))
    saving = cluster("s", 2, state=ClusterState.SAVING)
    rows = {r.host: r for r in free_times(Snapshot(1000.0, 7, (), (a, idle, saving)), S,
                                          memory(a=dict(target=1), i=dict(idle_since=950.0)))}
    assert rows["a-r1"].at == 1000.0 and rows["a-r1"].why == "draining"
    assert rows["a-r0"].at == 1060.0 and "above target 1" in rows["a-r0"].why  # surplus: by the next tick
    assert rows["a-c0"].at is None and rows["a-c0"].why.startswith("unknown")
    assert rows["i-c0"].at == 1070.0  # idle since 950, T_idle 120
    assert rows["s-c0"].at == rows["s-c1"].at == 1000.0


def test_status_shows_the_forecast(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with Store(url) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.sync_hosts([{"name": f"n{i}", "cores": 8} for i in range(4)])
        s.request_cluster("a", framework="spark", min_core=1)
        s.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
        n = s.allocate_node("a", "n0", Role.CORE)
        s.transition_node(n.id, NodeState.PROVISIONING)
    st = json.loads(ok(fawkes("status", "--json", state=url)))
    rows = {r["host"]: r for r in st["forecast"]}
    assert set(rows) == {"n0", "n1", "n2", "n3"}
    assert rows["n0"]["cluster"] == "a" and rows["n0"]["at"] is None and rows["n0"]["why"] == "unknown: deploying"
    assert rows["n1"]["why"] == "free" and abs(rows["n1"]["at"] - time.time()) < 60
    table = ok(fawkes("status", state=url))
    assert "forecast: when hosts free up" in table and "unknown: deploying" in table and "(free)" in table
