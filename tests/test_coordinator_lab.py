"""End to end on the lab: the real coordinator process balances 3 real MR-clusters.

Scenario (8 lab hosts, 3 clusters with 2 core nodes each, TD with TC growth, T = 10 s):

1. three clusters are requested (CLI) and deployed by the coordinator (subprocess);
2. while all are idle, TD's equal weights hand the 2 free hosts out (TC growth; the preset sets
   ``all_zero: equal``, the literal A-1 reading; the default ``hold`` would keep them free);
3. the coordinator is killed with SIGKILL while a node is being provisioned, and restarted;
4. an imbalanced stream of real word counts is submitted (CLI): the loaded cluster grows,
   the idle ones shrink to their minimum by DP;
5. the coordinator is killed again while a node drains, and restarted;
6. every job succeeds with the right output; no host is ever held by two clusters, no core
   node is removed while its cluster is active, no job is lost; after release no daemon is left.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fawkes.frameworks import dists
from fawkes.mechanism import Role
from fawkes.store import Store
from fawkes.store.lifecycle import JobState, NodeState
from tests.conftest import REPO, cluster_dirs_marker, pids_with_cmdline, run_cli

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APP = REPO / "fawkes" / "apps" / "wordcount.py"
CLUSTERS = ("busy", "calm", "quiet")
LAB_OPTIONS = {"heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1",
               "replication": "2", "executor_memory": "512m"}


def words(n: int, seed: int) -> str:
    vocab = [f"w{i}" for i in range(40)]
    return "\n".join(" ".join(vocab[(seed * 7 + i * 13 + j * 3) % 40] for j in range(10)) for i in range(n)) + "\n"


class CoordinatorProcess:
    def __init__(self, config: Path, log: Path):
        self.config, self.log = config, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                                      str(self.config), "--no-metrics"],
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                     start_new_session=True)

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the coordinator and any child it started
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)


def wait_for(what: str, fn, timeout: float, proc: CoordinatorProcess, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        if proc.proc is not None and proc.proc.poll() is not None:
            raise AssertionError(f"coordinator exited ({proc.proc.returncode}) while waiting for {what}:\n"
                                 + proc.log.read_text()[-3000:])
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n" + proc.log.read_text()[-3000:])


def check_invariants(store: Store, seen: dict) -> None:
    """No host held twice; core nodes of active clusters never drained; record the largest sizes."""
    owners: dict[str, str] = {}
    clusters = {c.id: c for c in store.list_clusters()}
    for n in store.list_nodes():
        c = clusters[n.cluster_id]
        assert n.host not in owners, f"host {n.host} held by {owners.get(n.host)} and {c.name}"
        owners[n.host] = c.name
        if n.role == Role.CORE.value and c.state == "active":
            assert n.state != NodeState.DRAINING, f"core node {n.host} of active {c.name} draining"
    for name in CLUSTERS:
        held = sum(1 for n in store.list_nodes(name))
        seen[name] = max(seen.get(name, 0), held)


def test_coordinator_balances_three_real_clusters_and_survives_kill9(lab, tmp_path):
    d = dists.ensure_lab_dists()
    state = tmp_path / "state.db"
    url = f"sqlite:///{state}"
    preset = tmp_path / "td-lab.yaml"
    preset.write_text("policy: TD\ngrow_type: transient-core\nperiod_s: 10\nsample_period_s: 2\ntau: 0.5\n"
                      "idle_timeout_s: 3600\nall_zero: equal\n")  # step 2 needs the literal 1/n rebalance of idle clusters
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {url}\ninventory: {lab.inventory_path}\npolicy: {preset}\nperiod: 10\n"
                      f"sample_period: 2\ncluster_options: {LAB_OPTIONS!r}\n".replace("'", '"'))
    with Store(url) as store:
        store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    texts = {}
    for i, name in enumerate(CLUSTERS):
        texts[name] = words(300, i)
        (tmp_path / f"{name}.txt").write_text(texts[name])
        r = run_cli("cluster", "request", name, "--framework", "lab", "--min-core", "2",
                    "--input", str(tmp_path / f"{name}.txt"), "--state", url)
        assert r.returncode == 0, r.stderr

    coord = CoordinatorProcess(config, tmp_path / "coordinator.log")
    coord.start()
    store = Store(url)
    seen: dict[str, int] = {}
    try:
        # 1-2: deployed, then the 2 free hosts go to the idle clusters (equal TD weights)
        wait_for("3 active clusters", lambda: all(store.get_cluster(n).state == "active" for n in CLUSTERS),
                 300, coord)
        wait_for("a node provisioning", lambda: any(n.state in (NodeState.REQUESTED, NodeState.PROVISIONING)
                                                    for n in store.list_nodes()), 60, coord, poll=0.2)
        # 3: kill -9 during the reconfiguration, restart
        coord.kill9()
        check_invariants(store, seen)
        coord.start()
        wait_for("the free hosts running as TC nodes",
                 lambda: sum(1 for n in store.list_nodes() if n.role == Role.TC.value and n.state == NodeState.RUNNING) == 2,
                 180, coord)
        check_invariants(store, seen)

        # 4: the imbalanced stream: 3 jobs for busy, none for the others
        jobs = []
        for k in range(3):
            r = run_cli("submit", "busy", "--input", "/input", "--state", url, "--",
                        str(APP), "{input}", "{output}", "4", "2")
            assert r.returncode == 0, r.stderr
            jobs.append(int(r.stdout.split()[-1]) if r.stdout.split()[-1].isdigit() else None)
        assert all(jobs), "submit must print the job id"
        wait_for("a TC node draining", lambda: any(n.state == NodeState.DRAINING for n in store.list_nodes()),
                 120, coord, poll=0.2)
        # 5: kill -9 during the DP drain, restart
        coord.kill9()
        check_invariants(store, seen)
        coord.start()

        def done():
            check_invariants(store, seen)
            return all(store.get_job(j).state in (JobState.SUCCEEDED, JobState.FAILED) for j in jobs)

        wait_for("every job finished", done, 600, coord, poll=1.0)
        for j in jobs:
            job = store.get_job(j)
            assert job.state == JobState.SUCCEEDED, f"job {j}: {job.state} {job.detail}"
        # the loaded cluster grew beyond its minimum; the idle ones are back at their minimum
        assert seen["busy"] >= 4
        wait_for("idle clusters at their minimum",
                 lambda: all(len(store.list_nodes(n)) == 2 for n in ("calm", "quiet")), 120, coord)
        assert seen["calm"] == 3 or seen["quiet"] == 3  # they had grown while idle (step 2)

        # every job's output is right (read back from HDFS on the busy cluster)
        from fawkes.coordinator.fleet import Fleet
        from fawkes.inventory import load_inventory

        fleet = Fleet(store, load_inventory(lab.inventory_path), cluster_options=LAB_OPTIONS)
        try:
            spec, driver = fleet.spec("busy")
            expected = collections.Counter(texts["busy"].split())
            for j in jobs:
                out = driver.hdfs(spec, "fs", "-cat", f"/output/{j}/part-*")
                got = collections.Counter()
                for line in out.splitlines():
                    w, c = line.split("\t")
                    got[w] += int(c)
                assert got == expected, f"job {j}: wrong word counts"
        finally:
            fleet.close()

        # 6: release everything; the coordinator tears down; no daemon is left on any host
        for name in CLUSTERS:
            assert run_cli("cluster", "release", name, "--state", url).returncode == 0
        wait_for("all released", lambda: all(store.get_cluster(n).state == "released" for n in CLUSTERS), 300, coord)
        assert coord.stop() == 0
        assert not store.list_nodes(), "no node may stay held"
        left = pids_with_cmdline(cluster_dirs_marker(lab))
        assert not left, f"daemons left running: {left}"
    finally:
        if coord.proc and coord.proc.poll() is None:
            coord.kill9()
        store.close()
