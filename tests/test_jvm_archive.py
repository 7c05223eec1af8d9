"""Class-data archives (fawkes.frameworks.jvm_archive): the option, what the rendered scripts do with an
archive there and without one, and the builder's cache.  That the lab's daemons map their archive is
checked live in tests/test_spark_hdfs_lab.py; what it saves, in bench/bench_jvm_archive.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks import jvm_archive
from fawkes.frameworks.render import check_option, render_cluster
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role

FW = FrameworkPaths("lab", "spark-hdfs", "/opt/spark", hdfs_jars="/opt/hdfs-2.7.3")


def cluster(tmp_path: Path, fw: FrameworkPaths = FW, **opts) -> ClusterSpec:
    nodes = (NodeSpec("h1", "10.7.0.1", Role.CORE, str(tmp_path)), NodeSpec("h2", "10.7.0.2", Role.TR, str(tmp_path)))
    return ClusterSpec("ar", fw, nodes, options={"jvm_archive_dir": str(tmp_path / "jsa"), **opts})


def sourced(text: str, tmp_path: Path, *names: str) -> dict[str, str]:
    """``names`` as ``sh`` sees them after sourcing ``text``."""
    f = tmp_path / "env.sh"
    f.write_text(text)
    out = subprocess.run(["sh", "-c", ". \"$0\"; " + "; ".join(f'printf "%s\\n" "${n}"' for n in names), str(f)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return dict(zip(names, out))


def test_the_option_is_an_absolute_path_or_nothing():
    assert check_option("jvm_archive_dir", "") == ""
    assert check_option("jvm_archive_dir", "/var/cache/fawkes/jvm") == "/var/cache/fawkes/jvm"
    for bad in ("relative/dir", "/a b", "/a\nb", "/a\x00b", "/a;rm -rf /", "/x/../etc", "/" + "a" * 300):
        with pytest.raises(ValueError, match="jvm_archive_dir: expected an absolute path"):
            check_option("jvm_archive_dir", bad)
    with pytest.raises(FawkesError, match="jvm_archive_dir"):
        render_cluster(ClusterSpec("ar", FW, (NodeSpec("h1", "10.7.0.1", Role.CORE, "/srv"),),
                                   options={"jvm_archive_dir": "rel"}))


def test_daemons_use_their_archive_only_where_it_is(tmp_path):
    c = cluster(tmp_path)
    files = render_cluster(c)["h1"].files
    spark = jvm_archive.archive_file(str(tmp_path / "jsa"), "spark", "/opt/spark", "java")
    hdfs = jvm_archive.archive_file(str(tmp_path / "jsa"), "hdfs", "/opt/hdfs-2.7.3", "java")
    assert spark != hdfs and spark.startswith(f"{tmp_path}/jsa/spark-") and spark.endswith(".jsa")
    names = ("SPARK_DAEMON_JAVA_OPTS", "SPARK_DAEMON_CLASSPATH")
    hnames = ("NN_OPTS", "DN_OPTS", "TOOL_OPTS", "CPH")
    # no archive on the host: as without the option
    assert sourced(files["conf/spark-env.sh"], tmp_path, *names) == {names[0]: "", names[1]: ""}
    h = sourced(files["conf/hadoop-env.sh"], tmp_path, *hnames)
    assert h["CPH"] == "" and "SharedArchiveFile" not in h["NN_OPTS"] + h["DN_OPTS"] + h["TOOL_OPTS"]
    # the archives there: every JVM maps its own, its jars first on the classpath
    Path(spark).parent.mkdir(parents=True)
    Path(spark).write_bytes(b"x")
    Path(hdfs).write_bytes(b"x")
    s = sourced(files["conf/spark-env.sh"], tmp_path, *names)
    assert s == {names[0]: f"-XX:SharedArchiveFile={spark}", names[1]: "/opt/spark/jars/*"}
    h = sourced(files["conf/hadoop-env.sh"], tmp_path, *hnames)
    assert h["CPH"] == "/opt/hdfs-2.7.3/jars/*:"
    assert all(h[k].endswith(f" -XX:SharedArchiveFile={hdfs}") for k in ("NN_OPTS", "DN_OPTS", "TOOL_OPTS")), h
    control = files["bin/fawkes-daemon.sh"]
    assert '-cp "$CPH$CONF:$HCP"' in control and '-cp "$CONF' not in control


def test_a_job_names_the_archive_and_puts_its_jars_first(tmp_path):
    c = cluster(tmp_path, app_jvm_opts="-XX:+UseSerialGC")
    conf = SparkHdfsDriver(None).submit_conf(c)
    spark = jvm_archive.archive_file(str(tmp_path / "jsa"), "spark", "/opt/spark", "java")
    assert conf["spark.driver.extraJavaOptions"] == f"-XX:+UseSerialGC -XX:SharedArchiveFile={spark}"
    assert conf["spark.executor.extraClassPath"] == "/opt/spark/jars/*"
    off = SparkHdfsDriver(None).submit_conf(cluster(tmp_path, jvm_archive_dir=""))
    assert not any("SharedArchive" in v or k.endswith("extraClassPath") for k, v in off.items())


def test_a_hadoop_home_has_no_hdfs_archive(tmp_path):
    fw = FrameworkPaths("prod", "spark-hdfs", "/opt/spark", hadoop_home="/opt/hadoop")
    files = render_cluster(cluster(tmp_path, fw))["h1"].files
    assert "SharedArchiveFile" not in files["conf/hadoop-env.sh"] and "SharedArchiveFile" in files["conf/spark-env.sh"]


def test_the_builder_keeps_an_archive_until_java_or_a_jar_changes(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "a.jar"
    jar.write_bytes(b"one")
    first = jvm_archive._identity("hdfs", home, "java")
    assert jvm_archive._identity("hdfs", home, "java") == first
    jar.write_bytes(b"three")
    assert jvm_archive._identity("hdfs", home, "java") != first
    # kept: a stamp that matches is the archive, no build
    out = Path(jvm_archive.archive_file(str(tmp_path / "jsa"), "hdfs", str(home), "java"))
    out.parent.mkdir()
    out.write_bytes(b"archive")
    out.with_suffix(".id").write_text(jvm_archive._identity("hdfs", home, "java"))
    monkeypatch.setattr(jvm_archive, "_capture_hdfs", lambda *a: pytest.fail("rebuilt a current archive"))
    assert jvm_archive.ensure(tmp_path / "jsa", "hdfs", home) == out


def test_a_build_that_fails_says_so_and_leaves_no_archive(tmp_path):
    home = tmp_path / "home"
    (home / "jars").mkdir(parents=True)  # no HDFS in it: the capture's NameNode cannot start
    said: list[str] = []
    assert jvm_archive.ensure(tmp_path / "jsa", "hdfs", home, progress=said.append) is None
    assert said[-1].startswith("no hdfs class-data archive (") and "start without one" in said[-1]
    assert not list((tmp_path / "jsa").glob("*.jsa")) and not list((tmp_path / "jsa").glob("*.id"))


def test_the_command_refuses_bad_arguments():
    assert jvm_archive.main(["/tmp/x", "yarn", "/opt"]) == 2
    assert jvm_archive.main([]) == 2


def test_flink_daemons_and_client_use_their_archive(tmp_path):
    fw = FrameworkPaths("fl", "flink-hdfs", flink_home="/opt/flink", hdfs_jars="/opt/hdfs-2.7.3")
    c = cluster(tmp_path, fw)
    flink = jvm_archive.archive_file(str(tmp_path / "jsa"), "flink", "/opt/flink", "java")
    env = render_cluster(c)["h1"].files["conf/flink-env.sh"]
    assert sourced(env, tmp_path, "JVM_ARGS") == {"JVM_ARGS": ""}  # not on the host: Flink's scripts as ever
    Path(flink).parent.mkdir(parents=True)
    Path(flink).write_bytes(b"x")
    assert sourced(env, tmp_path, "JVM_ARGS") == {"JVM_ARGS": f"-XX:SharedArchiveFile={flink}"}

    class Job:
        id, argv, input_path = 3, ("/jobs/wc.jar", "{input}"), "/in"

    from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver
    launch = FlinkHdfsDriver(None).job_command(c, Job(), output="/out/3", driver_memory="512m")
    assert launch.env["JVM_ARGS"] == f"-Xmx512m -Dfawkes.job=ar/3 -XX:SharedArchiveFile={flink}"
    off = FlinkHdfsDriver(None).job_command(cluster(tmp_path, fw, jvm_archive_dir=""), Job(), output="/o",
                                            driver_memory="512m")
    assert off.env["JVM_ARGS"] == "-Xmx512m -Dfawkes.job=ar/3"
