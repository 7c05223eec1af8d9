"""The CPU and memory collector (fawkes/coordinator/usage.py) over real SSH on lab hosts: two readings
two seconds apart, while one host runs a busy loop, become a window of maxima per host; and CERES'
C-1 live: on lab hosts with CPU quotas a coordinator built from a config (preset with
``swollen_threshold``) reads each held host's usage in its sampling step, its snapshot carries it,
and its tick takes the idle swollen cluster's node instead of the busy cluster's."""

from __future__ import annotations

import json
import time

import pytest

from fawkes.coordinator.usage import Reading, UsageWindow, collect
from tests.conftest import own_lab
from tests.test_reconcile import active_cluster

pytestmark = pytest.mark.lab

QUOTA = 0.3  # cores per host of the CERES lab (5 hosts: 1.5 of this machine's 2)


def test_usage_over_ssh_on_lab_hosts(lab, ex):
    hosts = [h.name for h in lab.hosts[:2]]
    busy = ex.run([hosts[0]], "nohup sh -c 'end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do :; done' "
                  ">/dev/null 2>&1 &", timeout=10)
    assert busy[hosts[0]].ok, busy[hosts[0]].error
    windows = {h: UsageWindow(60.0) for h in hosts}
    t0 = time.monotonic()
    for _ in range(2):
        got = collect(ex, hosts)
        for h in hosts:
            r = got[h]
            assert isinstance(r, Reading), r
            assert r.cpus > 0 and 0 < r.mem_used <= r.mem_held and r.cpu_scope and r.mem_scope
            windows[h].add(r)
        time.sleep(2.0)
    for h in hosts:
        u = windows[h].usage()
        assert u is not None and 0 <= u.cpu_max <= 1 and 0 < u.mem_max < 1 and 1.5 < u.window_s < 30, (h, u)
    # the loop burns one core: on a host with the whole machine (2 cores) that is at least a quarter of it
    assert windows[hosts[0]].usage().cpu_max > 0.25
    assert time.monotonic() - t0 < 60


@pytest.fixture(scope="module")
def quota_lab(tmp_path_factory):
    """Five lab hosts, each with a CPU quota and a memory limit (its own cgroup)."""
    lab = own_lab(tmp_path_factory, "c", 5, 210, "lab with CPU quotas", cpus=QUOTA, memory=512)
    try:
        yield lab
    finally:
        lab.down()


def test_coordinator_takes_the_idle_swollen_hosts_node_first(quota_lab, tmp_path):
    from fawkes.config import load_config
    from fawkes.coordinator.service import build
    from fawkes.coordinator.view import build_snapshot
    from fawkes.frameworks.sizing import LAB_SIZES
    from fawkes.mechanism import ClusterMetrics, controller
    from fawkes.mechanism.memory import Memory
    from fawkes.store.lifecycle import NodeState

    lab = quota_lab
    t_start = time.monotonic()
    h = [x.name for x in lab.hosts]
    preset = tmp_path / "ceres.yaml"
    preset.write_text("policy: TD\ngrow_type: transient\nperiod_s: 60\nsample_period_s: 1\ntau: 0\n"
                      "shrink_amount: demand_capped\nswollen_threshold: 0.5\nusage_window_s: 2\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"state: sqlite:///{tmp_path / 'state.db'}\ninventory: {lab.inventory_path}\n"
                      f"policy: {preset}\ncluster_options: {json.dumps(LAB_SIZES)}\n")
    coord = build(load_config(config))
    store = coord.store
    try:
        # what the reconciler and the sampler would have recorded: A (busy) holds h[0] (core) and h[1]
        # (transient, running a task), B (idle) h[2] and h[3], C h[4]; C's pending tasks need one
        # node more, no host is free, A and B each have one node over their share
        store.register_framework("lab", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        for name, core, tr in (("A", h[0], (h[1],)), ("B", h[2], (h[3],)), ("C", h[4], ())):
            active_cluster(store, name, (core,), tr, framework="lab")
        store.update_node(next(n.id for n in store.list_nodes("A") if n.host == h[1]), running_tasks=1)
        slots = min(x.cores for x in store.list_hosts())  # task slots per node = a lab host's cores
        now = time.time()
        for t in (now - 20, now - 10):
            store.record_sample("A", ClusterMetrics(time=t, unfinished_jobs=1, running_tasks=1))
            store.record_sample("B", ClusterMetrics(time=t, unfinished_jobs=1, running_tasks=1))
            store.record_sample("C", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=2 * slots))

        burn = coord.fleet.ex.run(h[:2], "setsid timeout 30 sh -c 'while :; do :; done' >/dev/null 2>&1 </dev/null &",
                                  timeout=10)
        assert all(r.ok for r in burn.values()), burn
        steps = []
        for _ in range(2):  # the usage part of two sampling steps (the Spark part has no daemons to ask here)
            t0 = time.monotonic()
            coord.sampler.check_hosts()
            coord.sampler.read_usage()
            steps.append(time.monotonic() - t0)
            time.sleep(2.5)
        assert coord.sampler.windows.errors == {} and coord.sampler.windows.reads == 10  # one per host per step
        snap = coord.control.snapshot()
        use = {n.id: n.usage for c in snap.clusters for n in c.nodes}
        print(f"\nusage steps over SSH (5 hosts): {', '.join(f'{s:.2f} s' for s in steps)}\n" +
              "\n".join(f"{x}: {use[x]}" for x in h))
        assert all(use[x] is not None and use[x].window_s >= 2.0 for x in h)
        # a busy loop in a host's quota reads as (nearly) the whole quota; idle hosts nearly nothing
        assert min(use[h[0]].cpu_max, use[h[1]].cpu_max) > 0.6
        assert max(use[x].ratio for x in h[2:]) < 0.3

        settings = coord.settings
        blind = controller.tick(Memory(), build_snapshot(store, settings, time.time()), settings)[0]
        assert [(s.cluster, s.node) for s in blind.plan.shrinks] == [("A", h[1])]  # without usage: the busy node
        coord.tick()
        d = store.latest_decision()
        assert "C-1 reclaimed idle swollen nodes first: B 1" in d.reason, d.reason
        assert {n.host: n.state for n in store.list_nodes("B")}[h[3]] == NodeState.DRAINING  # B's idle node
        assert {n.host: n.state for n in store.list_nodes("A")}[h[1]] == NodeState.RUNNING  # A's busy node kept
    finally:
        coord.close(grace_s=5)
        store.close()
    assert time.monotonic() - t_start < 90
