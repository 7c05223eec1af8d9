"""Scale to zero on real Spark + HDFS on the SSH lab (issue 27, item 4; docs/scale-to-zero.md).

The coordinator (``service.build`` from a config with ``on_idle: hibernate``, its steps called here) deploys
a spark-hdfs cluster at its minimum (one node; ``max_nodes: 1`` keeps the policy from growing it), loads
its input, runs a word count, and once the cluster has been idle for its T_idle hibernates it: the output
saved to ``save_to`` (a directory every lab host sees, outside their own ``node/``) with its manifest, the
node released, the cluster's directory gone.  A second word count submitted to it wakes it: admitted
again, deployed, the saved output restored into HDFS (checked against its manifest) and the input loaded
again before the job is dispatched.  Checked: the saved output exact (manifest and word counts), the
restored output and input exact in the new HDFS, the second job's output exact; printed: the wake-up
time (the waking job's submission to the cluster active, and to the job running).  Runs in the
background lab run (not in FOREGROUND_LAB_MODULES); two deployments and two short word counts, meant to
stay under 4 minutes (not yet run).
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import pytest

from fawkes.frameworks import dists
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.mechanism import ClusterState
from fawkes.ssh.shell import Script
from fawkes.store.lifecycle import JobState, NodeState

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APPS = Path(__file__).resolve().parent.parent / "fawkes" / "apps"
NAME = "hib"
OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}


def counts(text: str) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for line in text.splitlines():
        if line.strip():
            w, n = line.split("\t")
            out[w] += int(n)
    return out


def test_an_idle_cluster_hibernates_and_a_job_wakes_it_with_its_data(lab, tmp_path):
    from bench.fault_campaign import saved_counts
    from fawkes.config import load_config
    from fawkes.coordinator.service import build

    d = dists.ensure_lab_dists()
    saved_dir = tmp_path / "saved"  # outside every host's node/: the same directory on every lab host
    saved_dir.mkdir()
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(
        f"state: {tmp_path / 'state.db'}\ninventory: {lab.inventory_path}\npolicy: td-damped\nperiod: 2\n"
        f"sample_period: 1\nidle_timeout_s: never\nclusters:\n  {NAME}: {{on_idle: hibernate, idle_timeout_s: 8, "
        f"max_nodes: 1, save_to: {saved_dir}}}\ncluster_options: {json.dumps(OPTIONS)}\n")
    cfg = load_config(cfg_path)
    coord = build(cfg)
    store, fleet = coord.store, coord.fleet
    words = [f"w{i % 31}" for i in range(12000)]
    src = tmp_path / "input.txt"
    src.write_text("\n".join(" ".join(words[i:i + 8]) for i in range(0, len(words), 8)) + "\n")
    want = collections.Counter(words)
    ticking = [True]

    def until(what: str, pred, timeout: float) -> None:
        end = time.monotonic() + timeout
        next_sample = next_tick = 0.0
        while not pred():
            assert time.monotonic() < end, f"timed out after {timeout:g}s waiting for {what}: " + "; ".join(
                e.message for e in store.events(limit=12))
            now = time.monotonic()
            if now >= next_sample:
                coord.sample()
                next_sample = now + cfg.sample_period
            if ticking[0] and now >= next_tick:
                coord.tick()
                next_tick = now + cfg.period
            coord.fast()
            time.sleep(0.2)

    def hdfs_text(path: str) -> str:
        spec, driver = fleet.spec(NAME)
        return driver.hdfs(spec, "fs", "-cat", path, timeout=120)

    try:
        store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
        store.request_cluster(NAME, framework="lab", min_core=1, input_path=str(src))
        app = [str(APPS / "wordcount.py"), "{input}", "{output}", "4", "0"]
        first = store.submit_job(NAME, app, input_path="/input").id
        until("the first job done", lambda: store.get_job(first).state in (JobState.SUCCEEDED, JobState.FAILED), 240)
        assert store.get_job(first).state == JobState.SUCCEEDED, store.get_job(first).detail
        old = store.get_cluster(NAME)
        spec, _ = fleet.spec(NAME)
        master, cluster_dir = spec.master.name, spec.cluster_dir(spec.master)

        # idle for T_idle: hibernated, the output saved exact, the node released, nothing left on the host
        until("hibernating", lambda: store.get_cluster(NAME).state == ClusterState.HIBERNATING, 120)
        c = store.get_cluster(NAME)
        rec = json.loads(c.saved_output)
        assert rec["path"] == f"{saved_dir}/{NAME}/{old.id}"
        problem, got = saved_counts(fleet.ex, c.saved_output)  # its manifest checked, the counts per job
        assert problem is None, problem
        assert got == {first: want}
        ever = store.list_nodes(NAME, live=False)
        assert ever and all(n.state == NodeState.RELEASED for n in ever)
        assert not store.list_nodes()  # every host free
        gone = fleet.ex.run([master], Script("ls -d {d} 2>&1; true", d=cluster_dir))[master].stdout
        assert "No such file or directory" in gone, gone

        # a job wakes it: deployed again, restored, then dispatched
        second = store.submit_job(NAME, app, input_path="/input").id
        submitted = store.get_job(second).submitted_at
        until("the waking job done", lambda: store.get_job(second).state in (JobState.SUCCEEDED, JobState.FAILED),
              300)
        ticking[0] = False  # no tick, no deactivation: the new HDFS stays to be read
        job = store.get_job(second)
        assert job.state == JobState.SUCCEEDED, job.detail
        new = store.get_cluster(NAME)
        assert new.id != old.id and new.state == ClusterState.ACTIVE and json.loads(new.restore_from) == rec
        restored = [e for e in store.events(cluster=NAME, limit=200) if e.message.startswith("output restored from")]
        assert len(restored) == 1 and restored[0].time <= new.active_at <= job.dispatched_at
        # the restored output, the input loaded again and the waking job's output, exact in the new HDFS
        assert counts(hdfs_text(f"/output/{first}/part-*")) == want
        assert hdfs_text("/input").split() == src.read_text().split()  # loaded again, word for word
        assert counts(hdfs_text(f"/output/{second}/part-*")) == want
        spec, driver = fleet.spec(NAME)
        listing = driver.hdfs(spec, "fs", "-ls", "-R", "/output", timeout=120)
        assert f"/output/{first}/_SUCCESS" in listing  # the job's marker came back too; the manifest did not
        assert "MANIFEST.sha256" not in listing, listing
        running = job.started_at or job.ended_at
        print(f"wake-up time: {new.active_at - submitted:.1f} s to active ({restored[0].message}), "
              f"{running - submitted:.1f} s to the job running")
    finally:
        coord.reconciler.shutdown(5)
        c = next((x for x in store.list_clusters(include_released=False) if x.name == NAME), None)
        if c is not None and c.state not in (ClusterState.RELEASED, ClusterState.HIBERNATING, ClusterState.REQUESTED):
            try:  # the woken cluster, left active to be read: its daemons stopped and directories wiped
                spec, driver = fleet.spec(NAME)
                driver.teardown(spec)
            except Exception:  # noqa: BLE001, S110 - nothing deployed, or gone already
                pass
        coord.close(5)
        store.close()
