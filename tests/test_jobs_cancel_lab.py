"""Cancelling a real running Spark job on the lab: `fawkes jobs cancel` records the intent, the
dispatcher kills the driver on the master, the Spark master ends the application and its
executors go away.

A real MR-cluster (Spark standalone 4 + HDFS 2.7.3) on one lab host; the job is the lab's word
count made slow (60 s per partition), launched by the dispatcher exactly as the coordinator does.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.fleet import Fleet
from fawkes.frameworks import dists
from fawkes.frameworks.spark_hdfs import ui_ports
from fawkes.inventory import load_inventory
from fawkes.mechanism import ClusterState, Role
from fawkes.ssh.shell import Script
from fawkes.store import JobState, NodeState, Store
from tests.conftest import REPO, run_cli
from tests.coordinator_process import LAB_OPTIONS

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APP = REPO / "fawkes" / "apps" / "wordcount.py"
HOST = "h3"


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def wait_for(what: str, fn, timeout: float, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = fn()
        except (OSError, ValueError, LookupError):
            v = None
        if v:
            return v
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def driver_ui(spec, job: int, app: str) -> str | None:
    """The REST address of ``app`` on the job port where its driver's UI answers, if one does."""
    for port in ui_ports(spec, job):
        url = f"http://{spec.master.address}:{port}/api/v1/applications/{app}"
        try:
            get_json(url)
            return url
        except OSError:
            continue
    return None


def test_cancel_of_a_running_spark_job_ends_driver_application_and_executors(lab, tmp_path):
    d = dists.ensure_lab_dists()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    inv = load_inventory(lab.inventory_path)
    store = Store(url)
    store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": 1} for h in inv.hosts])
    name = f"jc{os.getpid() % 100000}"
    store.request_cluster(name, framework="lab", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING)
    node = store.allocate_node(name, HOST, Role.CORE)
    fleet = Fleet(store, inv, cluster_options=LAB_OPTIONS)
    spec, driver = fleet.spec(name)
    t0 = time.monotonic()
    try:
        driver.deploy(spec, timeout=240)
        store.transition_node(node.id, NodeState.PROVISIONING)
        store.transition_node(node.id, NodeState.RUNNING)
        src = tmp_path / "words.txt"
        src.write_text("".join(f"w{i % 13} w{i % 7} w{i % 5}\n" for i in range(2000)))
        driver.load_input(spec, str(src), "/input/words.txt")
        store.transition_cluster(name, ClusterState.LOADING)
        store.transition_cluster(name, ClusterState.ACTIVE)
        deployed = time.monotonic() - t0

        job = store.submit_job(name, [str(APP), "{input}", "{output}", "4", "60"], input_path="/input/words.txt").id
        dispatcher = Dispatcher(store, fleet, max_running=1)
        wait_for("the job running", lambda: (dispatcher.step(), store.get_job(job).state)[1] == JobState.RUNNING, 120)
        app = store.get_job(job).app_id
        ui = wait_for("the driver's UI", lambda: driver_ui(spec, job, app), 60)  # a job port of its block
        wait_for("tasks running", lambda: any(s["numActiveTasks"] > 0 for s in get_json(ui + "/stages")), 120)
        assert [a.id for a in driver.master_state(spec).active_apps] == [app]
        ps = Script("ps -eo pid=,args= | grep -v grep | grep -e {a} -e {j}; true", a=app,
                    j=f"fawkes-{name}-{job}")
        before = fleet.ex.run([HOST], ps, timeout=20)[HOST].stdout
        assert "CoarseGrainedExecutorBackend" in before and "SparkSubmit" in before, before
        # ps tells this job's processes apart: the driver's and the executor's JVMs name cluster and job
        tagged = [line for line in before.splitlines() if f"-Dfawkes.job={name}/{job} " in line + " "]
        assert any("SparkSubmit" in line for line in tagged) and any(
            "CoarseGrainedExecutorBackend" in line for line in tagged), before

        # the user's cancel: only intent, the job keeps running until the coordinator acts
        r = run_cli("jobs", "cancel", str(job), "--state", url)
        assert r.returncode == 0 and "cancel requested (running)" in r.stdout, r.stderr
        assert store.get_job(job).state == JobState.RUNNING
        t1 = time.monotonic()
        dispatcher.step()
        took = time.monotonic() - t1
        j = store.get_job(job)
        assert j.state == JobState.CANCELLED and j.detail.startswith(f"cancelled by the user: driver stopped on {HOST}")

        # the Spark master ends the application; the worker kills its executor
        done = wait_for("the application completed", lambda: [a for a in driver.master_state(spec).completed_apps
                                                               if a.id == app], 60)
        assert done[0].state in ("FINISHED", "KILLED") and not driver.master_state(spec).active_apps
        wait_for("no driver or executor process left",
                 lambda: fleet.ex.run([HOST], ps, timeout=20)[HOST].stdout.strip() == "", 60)
        listing = driver.hdfs(spec, "fs", "-ls", "-R", "/")
        assert "/input/words.txt" in listing and f"/output/{job}/_SUCCESS" not in listing  # never finished
        dispatcher.step()
        assert store.get_job(job).state == JobState.CANCELLED  # nothing re-dispatched
        print(f"deploy+load {deployed:.1f}s, cancel step {took:.1f}s, application {done[0].state}, "
              f"total {time.monotonic() - t0:.1f}s")
    finally:
        try:
            driver.teardown(spec, timeout=120)
        finally:
            fleet.close()
            store.close()
