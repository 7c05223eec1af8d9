"""A job's driver command line names its cluster and job (``ps`` tells drivers and executors apart).

The command is built from real store rows, a real inventory and the real spark-hdfs driver (no
host is contacted), then run through ``sh -c`` as the dispatcher runs it, with a stand-in
``spark-submit`` that prints its arguments: what ``ps`` shows of the processes it starts.
"""

from __future__ import annotations

import shlex
import subprocess

from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.fleet import Fleet
from fawkes.inventory import load_inventory
from fawkes.mechanism import ClusterState, Role
from fawkes.store import Store


def submitted_args(tmp_path, cluster_options=None) -> tuple[list[list[str]], list]:
    """What the stand-in spark-submit receives for one job on etl and one on ml."""
    inv_file = tmp_path / "inventory.yaml"
    inv_file.write_text("hosts:\n  - {name: m1, address: 192.0.2.10, cores: 2, memory: 2GiB}\n"
                        "  - {name: m2, address: 192.0.2.11, cores: 2, memory: 2GiB}\n")
    inv = load_inventory(inv_file)
    spark = tmp_path / "spark"
    (spark / "bin").mkdir(parents=True)
    (spark / "bin" / "spark-submit").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (spark / "bin" / "spark-submit").chmod(0o755)
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home=str(spark), hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": h.name, "address": h.address, "cores": 2, "memory_mb": 2048} for h in inv.hosts])
        fleet = Fleet(store, inv, cluster_options=cluster_options)
        try:
            for name in ("etl", "ml"):
                store.request_cluster(name, framework="spark", min_core=1)
                store.transition_cluster(name, ClusterState.DEPLOYING)
                store.allocate_node(name, "m1" if name == "etl" else "m2", Role.CORE)
            jobs = [store.submit_job("etl", ["app.py", "{input}", "x y"], input_path="/in"),
                    store.submit_job("ml", ["app.py"])]
            dispatcher = Dispatcher(store, fleet)
            runs = []
            for job, cluster in zip(jobs, ("etl", "ml")):
                spec, driver = fleet.spec(cluster)
                argv = dispatcher.driver_argv(spec, driver, job)
                out = subprocess.run(["sh", "-c", shlex.join(argv)], capture_output=True, text=True, check=True)
                runs.append(out.stdout.splitlines())
            return runs, jobs
        finally:
            fleet.close()


def test_driver_argv_carries_the_cluster_and_job_id(tmp_path):
    runs, jobs = submitted_args(tmp_path)
    seen = []
    for args, job, cluster in zip(runs, jobs, ("etl", "ml")):
        tag = f"-Dfawkes.job={cluster}/{job.id}"
        assert args[args.index("--name") + 1] == f"fawkes-{cluster}-{job.id}"
        assert f"spark.driver.extraJavaOptions={tag}" in args
        assert f"spark.executor.extraJavaOptions={tag}" in args
        assert args[-3:] == ["app.py", "hdfs:///in", "x y"] if cluster == "etl" else args[-1:] == ["app.py"]
        seen.append(tag)
    assert seen == [f"-Dfawkes.job=etl/{jobs[0].id}", f"-Dfawkes.job=ml/{jobs[1].id}"]


def test_app_jvm_opts_follow_the_tag_in_one_argument(tmp_path):
    runs, jobs = submitted_args(tmp_path, {"app_jvm_opts": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    for args, job, cluster in zip(runs, jobs, ("etl", "ml")):
        want = f"-Dfawkes.job={cluster}/{job.id} -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
        assert f"spark.driver.extraJavaOptions={want}" in args
        assert f"spark.executor.extraJavaOptions={want}" in args
        assert sum(a.startswith("spark.driver.extraJavaOptions=") for a in args) == 1


def test_no_python_of_the_coordinators_is_assumed_on_the_hosts(tmp_path):
    """Issue 30: the job's Python is the cluster's option job_python (else Spark's own choice on the host),
    never the interpreter the coordinator runs under; the driver's memory follows the master's 2 GiB."""
    import sys

    runs, _ = submitted_args(tmp_path)
    for args in runs:
        assert not any(a.startswith("spark.pyspark.") for a in args) and sys.executable not in args
        assert "spark.driver.memory=512m" in args  # 2048/8 = 256, below the 512m floor
    (tmp_path / "py").mkdir()
    runs, _ = submitted_args(tmp_path / "py", {"job_python": "/opt/py/bin/python3", "driver_memory": "1g"})
    for args in runs:
        assert "spark.pyspark.python=/opt/py/bin/python3" in args and "spark.driver.memory=1g" in args


class _Answers:
    """An executor that answers every job poll ``running`` and every launch ok (nothing runs)."""

    def __init__(self):
        self.launched = 0

    def run(self, hosts, script, timeout=None):
        from types import SimpleNamespace

        text = str(script)
        if "setsid nohup" in text:
            self.launched += 1
        out = "running\n" if "kill -0" in text else ""
        return {h: SimpleNamespace(ok=True, stdout=out, error="") for h in hosts}

    def close(self):
        pass


def test_jobs_per_cluster_follow_max_running_jobs_per_cluster(tmp_path):
    """The dispatcher starts at most the cluster's max_running_jobs jobs (a function of its name, as the
    config's clusters: give it); the others stay queued."""
    from fawkes.store.lifecycle import JobState

    inv_file = tmp_path / "inventory.yaml"
    inv_file.write_text("hosts:\n  - {name: m1, address: 192.0.2.10}\n  - {name: m2, address: 192.0.2.11}\n")
    inv = load_inventory(inv_file)
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": h.name, "address": h.address, "cores": 1} for h in inv.hosts])
        ex = _Answers()
        fleet = Fleet(store, inv, executor=ex)
        for name, host in (("etl", "m1"), ("bi", "m2")):
            store.request_cluster(name, framework="spark", min_core=1)
            store.transition_cluster(name, ClusterState.DEPLOYING)
            store.allocate_node(name, host, Role.CORE)
            store.transition_cluster(name, ClusterState.ACTIVE)
            for _ in range(4):
                store.submit_job(name, ["app.py"])
        Dispatcher(store, fleet, max_running={"etl": 3, "bi": 1}.__getitem__).step()
        started = {n: len(store.list_jobs(n, states=[JobState.DISPATCHED, JobState.RUNNING])) for n in ("etl", "bi")}
        assert started == {"etl": 3, "bi": 1} and ex.launched == 4
        assert [len(store.list_jobs(n, states=[JobState.QUEUED])) for n in ("etl", "bi")] == [1, 3]


def test_the_kinds_job_limit_caps_max_running_jobs(tmp_path, caplog):
    """A Spark cluster with its own port block runs at most as many jobs at once as the block has job ports
    (each driver's UI takes one), whatever max_running_jobs says; the cap is logged once per cluster."""
    import logging

    from fawkes.frameworks.render import job_ports
    from fawkes.store.lifecycle import JobState

    inv_file = tmp_path / "inventory.yaml"
    inv_file.write_text("hosts:\n  - {name: m1, address: 192.0.2.10}\n")
    inv = load_inventory(inv_file)
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": "m1", "address": "192.0.2.10", "cores": 1}])
        ex = _Answers()
        fleet = Fleet(store, inv, executor=ex)
        store.request_cluster("etl", framework="spark", min_core=1)
        store.transition_cluster("etl", ClusterState.DEPLOYING)
        store.allocate_node("etl", "m1", Role.CORE)
        store.transition_cluster("etl", ClusterState.ACTIVE)
        for _ in range(10):
            store.submit_job("etl", ["app.py"])
        block = len(job_ports(fleet.spec("etl")[0]))
        dispatcher = Dispatcher(store, fleet, max_running=9)
        with caplog.at_level(logging.WARNING, logger="fawkes"):
            dispatcher.step()
            dispatcher.step()
        assert block == 7 and ex.launched == 7
        assert len(store.list_jobs("etl", states=[JobState.DISPATCHED, JobState.RUNNING])) == 7
        capped = [r.getMessage() for r in caplog.records if "at most 7 jobs at once" in r.getMessage()]
        assert capped == ["cluster etl: at most 7 jobs at once, not max_running_jobs 9: the spark-hdfs kind's "
                          "limit (its port block's job ports)"]
