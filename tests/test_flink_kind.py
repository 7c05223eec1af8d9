"""Kind ``flink-hdfs`` without the lab: its REST documents as samples, its rendered configs, its options
and its job command (the lab part: tests/test_conformance_lab.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import run_cli
from fawkes.errors import FawkesError
from fawkes.frameworks.base import driver_class
from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver, flink_sample, job_tasks, taskmanager_hosts
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role

FW = FrameworkPaths("fl", "flink-hdfs", flink_home="/opt/flink", hdfs_jars="/opt/hdfs")
CORE = NodeSpec("h1", "10.0.0.1", Role.CORE, "/srv/fawkes", cores=2)
TR = NodeSpec("h2", "10.0.0.2", Role.TR, "/srv/fawkes")
TC = NodeSpec("h3", "10.0.0.3", Role.TC, "/srv/fawkes")

#: /jobs/overview of Flink 2.3 (trimmed): a batch job running, a finished one
JOBS = {"jobs": [
    {"jid": "e2c5d6ccdf798926a00fb269f7a114cc", "name": "fawkes-c-1", "state": "RUNNING",
     "tasks": {"running": 3, "canceling": 0, "canceled": 0, "total": 25, "created": 9, "scheduled": 1,
               "deploying": 0, "reconciling": 0, "finished": 12, "initializing": 0, "failed": 0}},
    {"jid": "0" * 32, "name": "fawkes-c-0", "state": "FINISHED",
     "tasks": {"running": 0, "total": 10, "created": 0, "scheduled": 0, "finished": 10, "failed": 0}},
]}
OVERVIEW = {"taskmanagers": 3, "slots-total": 4, "slots-available": 1, "jobs-running": 1, "jobs-finished": 1}


def test_a_flink_job_is_pending_running_and_done_tasks():
    t = job_tasks(JOBS["jobs"][0])
    assert (t.pending, t.running, t.completed, t.total) == (10, 3, 12, 13)


def test_the_sample_counts_unfinished_jobs_slots_and_busy_slots():
    s = flink_sample(1.0, OVERVIEW, JOBS["jobs"], None, None)
    assert list(s.tasks_by_job) == ["e2c5d6ccdf798926a00fb269f7a114cc"]
    assert (s.slots, s.busy_slots, s.unfinished_jobs, s.completed_jobs) == (4.0, 3.0, 1, 1)
    assert s.tasks.pending == 10 and s.stored_bytes is None  # the NameNode did not answer
    empty = flink_sample(1.0, None, None, None, None, errors=["GET ...: refused"])
    assert empty.slots == 0 and empty.unfinished_jobs == 0 and empty.errors


def test_taskmanagers_are_known_by_their_host_address():
    doc = {"taskmanagers": [{"id": "10.0.0.2:45185-b78b2a", "path": "pekko.tcp://flink@10.0.0.2:45185/user/rpc/taskmanager_0",
                             "slotsNumber": 1, "freeSlots": 1},
                            {"id": "x", "path": "garbage"}]}
    assert list(taskmanager_hosts(doc)) == ["10.0.0.2"]


def test_configs_render_as_yaml_with_the_masters_address_and_one_slot_per_core():
    c = ClusterSpec("c1", FW, (CORE, TR, TC), options={"flink_tm_memory": "900m", "heartbeat_s": "2"})
    r = FlinkHdfsDriver(None).render(c)
    conf = yaml.safe_load(r["h2"].files["conf/config.yaml"])
    assert conf["jobmanager"]["rpc"]["address"] == "10.0.0.1" and conf["rest"]["address"] == "10.0.0.1"
    assert conf["taskmanager"]["host"] == "10.0.0.2" and conf["taskmanager"]["memory"]["process"]["size"] == "900m"
    assert yaml.safe_load(r["h1"].files["conf/config.yaml"])["taskmanager"]["numberOfTaskSlots"] == 2
    assert conf["jobmanager"]["adaptive-scheduler"]["executing"]["resource-stabilization-timeout"] == "5 s"
    assert conf["heartbeat"]["interval"] == 2000 and "--add-opens=java.base/java.util=ALL-UNNAMED" in \
        conf["env"]["java"]["opts"]["all"]
    assert "conf/core-site.xml" in r["h3"].files and "hdfs://10.0.0.1:8020" in r["h3"].files["conf/core-site.xml"]
    ctl = r["h2"].files["bin/fawkes-daemon.sh"]
    assert "TaskManagerRunner" in ctl and "/bin/taskmanager.sh start-foreground" in ctl
    assert set(r["h1"].hashes) == {"flink", "hdfs"}


@pytest.mark.parametrize("key, value", [
    ("flink_tm_memory", "1g\nrest.port: 1"), ("flink_tm_memory", "NaN"), ("flink_jm_memory", "-1m"),
    ("flink_jm_memory", str(10**30)), ("flink_tm_memory", "1g\x00"), ("flink_jm_memory", "inf"),
    ("flink_rescale_wait_s", "-5"), ("flink_rescale_wait_s", "nan"), ("flink_rescale_wait_s", "5\nx: 1"),
])
def test_bad_flink_options_are_refused(key, value):
    c = ClusterSpec("c1", FW, (CORE,), options={key: value})
    with pytest.raises(FawkesError, match=f"option {key}"):
        FlinkHdfsDriver(None).render(c)


def test_the_job_command_is_flink_run_with_hdfs_uris_and_the_clusters_conf():
    class Job:
        id, argv, input_path = 7, ["/apps/wc.jar", "{input}", "{output}", "4"], "books"

    launch = FlinkHdfsDriver(None).job_command(ClusterSpec("c1", FW, (CORE,)), Job(), output="/output/7",
                                               driver_memory="256m", python="python3")
    assert launch.argv == ("/opt/flink/bin/flink", "run", "-Dpipeline.name=fawkes-c1-7", "/apps/wc.jar",
                           "hdfs://10.0.0.1:8020/input/books", "hdfs://10.0.0.1:8020/output/7", "4")
    assert launch.env["FLINK_CONF_DIR"] == "/srv/fawkes/clusters/c1/conf"
    assert launch.env["JVM_ARGS"] == "-Xmx256m -Dfawkes.job=c1/7"


def test_the_kind_declares_what_it_offers():
    d = driver_class("flink-hdfs")
    assert d.removal_modes == {"fp", "dp"} and d.default_shrink_mode == "fp"
    assert {"tasks", "slots", "stored_bytes"} <= d.signals and d.required_paths == ("flink_home",)
    with pytest.raises(FawkesError, match="suspend is not offered"):
        d.suspend_hooks("c1", "/srv/fawkes")


@pytest.mark.parametrize("extra, message", [
    ([], "kind flink-hdfs needs --flink-home"),
    (["--flink-home", "/opt/flink", "--spark-home", "/opt/spark", "--hdfs-jars", "/j"],
     "--spark-home is not an option of kind flink-hdfs"),
    (["--flink-home", "relative", "--hdfs-jars", "/j"], "flink home must be an absolute path without spaces"),
    (["--flink-home", "/a\nb", "--hdfs-jars", "/j"], "flink home must be an absolute path without spaces"),
    (["--flink-home", "/opt/flink"], "give --shared-dir, or exactly one of --hadoop-home and --hdfs-jars"),
])
def test_framework_add_flink_options_are_checked_and_nothing_is_written(tmp_path, extra, message):
    r = run_cli("framework", "add", "fl", "--kind", "flink-hdfs", *extra, "--no-check",
                env={"FAWKES_STATE": str(tmp_path / "state.db")})
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


def test_framework_kinds_lists_flink_hdfs():
    r = run_cli("framework", "kinds", "--json")
    row = {k["kind"]: k for k in json.loads(r.stdout)}["flink-hdfs"]
    assert row["roles"] == ["core", "transient-core", "transient"] and row["removal_modes"] == ["dp", "fp"]
    assert row["options"] == ["flink_home", "hadoop_home", "hdfs_jars"]
