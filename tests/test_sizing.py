"""Real hosts' defaults (issue 30, item 3): the daemons' heaps, the executors', the driver's and Flink's
memory follow the inventory's memory of the hosts, not lab constants; the job's Python and the jobs per
cluster are settings; every new input is refused in one line naming it, before anything is written."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from fawkes.config import load_config
from fawkes.errors import ConfigError
from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver
from fawkes.frameworks.jvm_archive import archive_file
from fawkes.frameworks.render import DEFAULT_OPTIONS, render_cluster
from fawkes.frameworks.sizing import LAB_SIZES, RULES
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role

try:
    from test_cli_store import fawkes, refused
except ImportError:
    from tests.test_cli_store import fawkes, refused

SPARK = FrameworkPaths("prod", "spark-hdfs", "/opt/spark", hadoop_home="/opt/hadoop", java_home="/usr/lib/jvm/java-17")
FLINK = FrameworkPaths("fl", "flink-hdfs", flink_home="/opt/flink", hadoop_home="/opt/hadoop")


def spec(fw=SPARK, memories=(65536, 16384, 4096), **opts) -> ClusterSpec:
    """A master of ``memories[0]`` MiB, then a core node and a transient node of the others."""
    roles = (Role.CORE, Role.CORE, Role.TR)
    nodes = tuple(NodeSpec(f"h{i}", f"10.7.0.{i}", r, "/srv/fawkes", cores=8, memory_mb=m)
                  for i, (r, m) in enumerate(zip(roles, memories), start=1))
    return ClusterSpec("big", fw, nodes, options=opts)


def env_of(text: str) -> dict[str, str]:
    """``K=V`` lines of a rendered shell file, values unquoted as the shell reads them."""
    return {k: " ".join(shlex.split(v)) for k, v in (ln.split("=", 1) for ln in text.splitlines()
                                                      if "=" in ln and not ln.startswith(("#", " ", "export ")))}


def spark_defaults(text: str) -> dict[str, str]:
    return dict(ln.split(None, 1) for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))


def test_heaps_follow_each_hosts_memory_within_floors_and_ceilings():
    r = render_cluster(spec())
    master, core, small = (env_of(r[h].files["conf/hadoop-env.sh"]) for h in ("h1", "h2", "h3"))
    # NameNode: 1/8 of the master's 64 GiB, at its 8 GiB ceiling; DataNode: 1/16 of each node's own memory
    assert master["NN_OPTS"].split()[0] == "-Xmx8192m"
    assert master["DN_OPTS"].split()[0] == "-Xmx2048m"  # 4 GiB, above the 2 GiB ceiling
    assert core["DN_OPTS"].split()[0] == "-Xmx1024m" and core["TOOL_OPTS"].split()[0] == "-Xmx1024m"
    assert small["DN_OPTS"].split()[0] == "-Xmx256m"  # 4096/16 = 256: at the floor
    assert env_of(r["h2"].files["conf/spark-env.sh"])["SPARK_DAEMON_MEMORY"] == "1024m"
    assert env_of(r["h3"].files["conf/spark-env.sh"])["SPARK_DAEMON_MEMORY"] == "256m"
    # the executor: half of each worker's memory in its own spark-defaults.conf
    assert spark_defaults(r["h2"].files["conf/spark-defaults.conf"])["spark.executor.memory"] == "8192m"
    # no lab constant reaches a production host
    for h in r.values():
        for text in h.files.values():
            assert "TieredStopAtLevel" not in text and "-Xmx192m" not in text and "-Xmx128m" not in text
    assert spark_defaults(r["h1"].files["conf/spark-defaults.conf"])[
        "spark.master.ui.decommission.allow.mode"] == "DENY"


def test_a_small_host_gets_the_floors_and_never_more_than_it_has():
    r = render_cluster(spec(memories=(1024, 512, 256)))
    assert env_of(r["h1"].files["conf/hadoop-env.sh"])["NN_OPTS"].split()[0] == "-Xmx256m"
    # half of 512 MiB is below the 512m floor: the floor; a 256 MiB worker never gets more than it offers
    assert spark_defaults(r["h2"].files["conf/spark-defaults.conf"])["spark.executor.memory"] == "512m"
    assert spark_defaults(r["h3"].files["conf/spark-defaults.conf"])["spark.executor.memory"] == "256m"


def test_worker_memory_mb_sizes_the_executors_and_given_options_win():
    r = render_cluster(spec(worker_memory_mb="6000", dn_heap="3g", nn_heap="700m"))
    assert spark_defaults(r["h2"].files["conf/spark-defaults.conf"])["spark.executor.memory"] == "3000m"
    env = env_of(r["h1"].files["conf/hadoop-env.sh"])
    assert env["NN_OPTS"].split()[0] == "-Xmx700m" and env["DN_OPTS"].split()[0] == "-Xmx3g"


def test_growing_by_a_smaller_host_changes_no_other_hosts_configs():
    small = spec(memories=(65536, 16384))
    grown = spec(memories=(65536, 16384, 1024))
    before, after = render_cluster(small), render_cluster(grown)
    for h in ("h1", "h2"):
        assert before[h].hashes == after[h].hashes, h


def test_the_lab_sizes_render_as_the_lab_always_ran():
    r = render_cluster(replace(spec(memories=(2048, 2048, 2048)), options=LAB_SIZES))
    env = env_of(r["h1"].files["conf/hadoop-env.sh"])
    assert env["NN_OPTS"] == "-Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    assert env["DN_OPTS"] == "-Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    spark_env = env_of(r["h2"].files["conf/spark-env.sh"])
    assert spark_env["SPARK_DAEMON_MEMORY"] == "128m"
    conf = spark_defaults(r["h1"].files["conf/spark-defaults.conf"])
    assert conf["spark.executor.memory"] == "512m" and conf["spark.master.ui.decommission.allow.mode"] == "ALLOW"
    # a job's JVMs as the daemons': C1 only (docs/lab.md, bench/bench_app_jvm_opts.py)
    # and the lab's class-data archive of its Spark (fawkes.frameworks.jvm_archive), its jars first
    c = replace(spec(memories=(2048, 2048, 2048)), options=LAB_SIZES)
    sub = SparkHdfsDriver(None).submit_conf(c)
    archive = archive_file(LAB_SIZES["jvm_archive_dir"], "spark", c.framework.spark_home, c.framework.java)
    assert sub["spark.executor.extraJavaOptions"] == sub["spark.driver.extraJavaOptions"] == \
        f"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}"
    assert sub["spark.executor.extraClassPath"] == sub["spark.driver.extraClassPath"] == \
        f"{c.framework.spark_home}/jars/*"


class Job:
    id = 7
    argv = ("app.py",)
    input_path = None


def conf_of(argv) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def test_a_jobs_driver_and_executors_follow_the_master_and_the_smallest_worker():
    launch = SparkHdfsDriver(None).job_command(spec(), Job(), output="/output/7")
    conf = conf_of(launch.argv)
    assert conf["spark.driver.memory"] == "4096m"  # 1/8 of 64 GiB, at the 4 GiB ceiling
    assert conf["spark.executor.memory"] == "2048m"  # half of the smallest worker's 4 GiB
    # no Python is assumed on the hosts: Spark's own choice (python3 on the host) unless configured
    assert "spark.pyspark.python" not in conf and "spark.pyspark.driver.python" not in conf


def test_the_jobs_python_and_memories_are_options():
    c = spec(job_python="/opt/py311/bin/python3", driver_memory="2g", executor_memory="3g")
    conf = conf_of(SparkHdfsDriver(None).job_command(c, Job(), output="/output/7").argv)
    assert conf["spark.pyspark.python"] == conf["spark.pyspark.driver.python"] == "/opt/py311/bin/python3"
    assert conf["spark.driver.memory"] == "2g" and conf["spark.executor.memory"] == "3g"


def test_flink_memories_follow_the_hosts():
    r = render_cluster(spec(FLINK, memories=(16384, 8192, 4096)))
    assert "size: \"2048m\"" in r["h1"].files["conf/config.yaml"]  # the JobManager: 1/8 of the master's
    assert "size: \"4096m\"" in r["h2"].files["conf/config.yaml"]  # a TaskManager: half of its node's 8 GiB
    launch = FlinkHdfsDriver(None).job_command(spec(FLINK, memories=(16384, 8192, 4096)), Job(), output="/o")
    assert launch.env["JVM_ARGS"].startswith("-Xmx2048m ")  # the client: 1/8 of the master's


def test_every_derived_option_is_empty_by_default_and_documented():
    assert all(DEFAULT_OPTIONS[k] == "" for k in RULES)
    for k, rule in RULES.items():
        assert rule.floor_mb <= rule.ceiling_mb and 0 < rule.fraction < 1 and rule.what, k


# ------------------------------------------------------------------ new inputs: one line naming the field
def config_error(tmp_path, text: str) -> str:
    p = tmp_path / "cfg.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}:")
    return msg


BAD = [".nan", ".inf", "-.inf", "-1", "0", "1000000000000000000000000000000", '"1\\n"', '"1\\0"', "1.5", "true",
       '"1g; reboot"']


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("key", ["driver_memory", "executor_memory", "nn_heap", "flink_tm_memory"])
def test_bad_sizes_are_refused(tmp_path, key, value):
    assert f"cluster_options: {key}:" in config_error(tmp_path, f"cluster_options:\n  {key}: {value}\n")


@pytest.mark.parametrize("value", ['"python3"', '"/usr/bin/python3\\n"', '"/usr/bin/py thon"', '"/usr/bin/python3\\0"',
                                   '"/opt/$(reboot)/python"', '"/a;b"', "1", ".nan", '"' + "/p" * 200 + '"'])
def test_bad_job_python_is_refused(tmp_path, value):
    assert "cluster_options: job_python:" in config_error(tmp_path, f"cluster_options:\n  job_python: {value}\n")


@pytest.mark.parametrize("value", BAD[:-1] + ['"2"'])
@pytest.mark.parametrize("where", ["", "clusters:\n  etl:\n    "])
def test_bad_max_running_jobs_is_refused(tmp_path, where, value):
    assert "max_running_jobs" in config_error(tmp_path, f"{where}max_running_jobs: {value}\n")


def test_max_running_jobs_per_cluster_over_the_configs(tmp_path):
    (tmp_path / "cfg.yaml").write_text("max_running_jobs: 3\nclusters:\n  etl: {max_running_jobs: 1}\n")
    cfg = load_config(tmp_path / "cfg.yaml")
    assert (cfg.max_running_jobs_of("etl"), cfg.max_running_jobs_of("bi")) == (1, 3)
    assert load_config(None).max_running_jobs_of("x") == 1


def test_coordinator_with_a_bad_job_python_creates_no_state(tmp_path, monkeypatch):
    monkeypatch.setenv("FAWKES_HOME", str(tmp_path / "home"))
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    (tmp_path / "cfg.yaml").write_text("state: s.db\ninventory: inv.yaml\ncluster_options:\n"
                                       "  job_python: 'python3; reboot'\n")
    refused(fawkes("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"),
            "cfg.yaml:3: cluster_options: job_python: expected an absolute path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "inv.yaml"]


def test_the_docs_table_is_the_rules():
    """docs/frameworks.md prints RULES: every option with its fraction, floor and ceiling."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "frameworks.md").read_text()
    rows = {ln.split("|")[1].strip(" `"): [c.strip() for c in ln.split("|")[2:-1]]
            for ln in text.splitlines() if ln.startswith("| `") and ln.count("|") == 7}
    for key, rule in RULES.items():
        what, _, fraction, floor, ceiling = rows[key]
        assert (fraction, floor, ceiling) == (f"1/{round(1 / rule.fraction)}", f"{rule.floor_mb}m",
                                              f"{rule.ceiling_mb}m"), key
        assert what == rule.what.split(" (at submission")[0], key
