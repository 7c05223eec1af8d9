"""A host that stops answering is marked failed after the grace period and its capacity replaced.

Two MR-clusters (2 core nodes each, policy None) on a 5-host pool: one host is free.  The
non-master core host of cluster ``a`` crashes (every process of the host killed at once):
the coordinator marks the node and the host failed, gives ``a`` a replacement core node
from the free host, and leaves cluster ``b`` alone.
"""

from __future__ import annotations

import json

import pytest
import yaml

from fawkes.frameworks import dists
from fawkes.mechanism import Role
from fawkes.store import Store
from fawkes.store.lifecycle import HostState, NodeState
from tests.conftest import run_cli
from tests.coordinator_process import LAB_OPTIONS, CoordinatorProcess, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.spark]


def test_failed_core_host_is_replaced_from_the_free_pool(lab, tmp_path):
    d = dists.ensure_lab_dists()
    inv = yaml.safe_load(lab.inventory_path.read_text())
    inv["hosts"] = inv["hosts"][:5]
    kept = {h["name"] for h in inv["hosts"]}
    inv["groups"] = {g: [h for h in members if h in kept] for g, members in (inv.get("groups") or {}).items()}
    inventory = lab.inventory_path.parent / "inventory-failover.yaml"  # its relative key paths stay valid
    inventory.write_text(yaml.safe_dump(inv))
    url = f"sqlite:///{tmp_path / 'state.db'}"
    preset = tmp_path / "none.yaml"
    preset.write_text("policy: None\nperiod_s: 10\nsample_period_s: 2\nidle_timeout_s: 3600\n")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"state": url, "inventory": str(inventory), "policy": str(preset), "period": 10,
                                  "sample_period": 2, "host_grace": 6, "cluster_options": LAB_OPTIONS}))
    with Store(url) as store:
        store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    for name in ("a", "b"):
        assert run_cli("cluster", "request", name, "--framework", "lab", "--min-core", "2", "--state", url).returncode == 0
    coord = CoordinatorProcess(config, tmp_path / "coordinator.log")
    coord.start()
    store = Store(url)
    crashed = None
    try:
        wait_for("2 active clusters", lambda: all(store.get_cluster(n).state == "active" for n in "ab"), 300, coord)
        a_nodes = store.list_nodes("a")
        b_before = sorted((n.host, n.state) for n in store.list_nodes("b"))
        free = store.free_hosts()
        assert len(free) == 1
        crashed = a_nodes[1].host  # not the master (the oldest core node)
        lab.crash(crashed)
        wait_for("the crashed host marked failed", lambda: any(
            h.name == crashed and h.state == HostState.FAILED for h in store.list_hosts()), 90, coord)
        wait_for("a replacement core node running", lambda: any(
            n.host == free[0] and n.role == Role.CORE.value and n.state == NodeState.RUNNING
            for n in store.list_nodes("a")), 180, coord)
        failed = [n for n in store.list_nodes("a") if n.host == crashed]
        assert failed and failed[0].state == NodeState.FAILED
        assert sorted((n.host, n.state) for n in store.list_nodes("b")) == b_before
        for name in "ab":
            assert run_cli("cluster", "release", name, "--state", url).returncode == 0
        wait_for("released", lambda: all(store.get_cluster(n).state == "released" for n in "ab"), 180, coord)
        assert coord.stop() == 0
        assert not store.list_nodes()
    finally:
        if coord.proc and coord.proc.poll() is None:
            coord.kill9()
        if crashed:
            lab.revive(crashed)
        store.close()
        inventory.unlink(missing_ok=True)
