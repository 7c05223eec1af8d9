"""Config rendering (pure): well-formed XML, the keys Hadoop/Spark read, safe shell quoting, stable hashes."""

from __future__ import annotations

import shlex
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks.render import render_cluster, render_exclude, render_node
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role

FW = FrameworkPaths("lab", "spark-hdfs", "/opt/spark", hdfs_jars="/opt/hdfs-2.7.3")
FW3 = FrameworkPaths("prod", "spark-hdfs", "/opt/spark", hadoop_home="/opt/hadoop-3.4.1", java_home="/usr/lib/jvm/java-17")


def cluster(fw=FW, **opts) -> ClusterSpec:
    roles = [Role.CORE, Role.CORE, Role.CORE, Role.TR, Role.TC]
    nodes = tuple(NodeSpec(f"h{i}", f"10.200.0.{10 + i}", r, "/srv/fawkes", cores=2 + i % 2, memory_mb=2048)
                  for i, r in enumerate(roles, start=1))
    return ClusterSpec("c1", fw, nodes, options=opts)


def props(xml_text: str) -> dict[str, str]:
    root = ET.fromstring(xml_text)
    assert root.tag == "configuration"
    out = {}
    for p in root.findall("property"):
        name, value = p.findtext("name"), p.findtext("value")
        assert name and value is not None, f"property without name/value in {xml_text[:80]}"
        assert name not in out, f"duplicate key {name}"
        out[name] = value
    return out


def test_spark_hdfs_xml_keys_and_bind_addresses():
    r = render_cluster(cluster())
    core, tr = r["h1"], r["h4"]
    c = props(core.files["conf/core-site.xml"])
    assert c["fs.defaultFS"] == "hdfs://10.200.0.11:8020"
    h = props(tr.files["conf/hdfs-site.xml"])
    assert h["dfs.replication"] == "3"
    assert h["dfs.hosts.exclude"] == "/srv/fawkes/clusters/c1/conf/dfs.exclude"
    assert h["dfs.namenode.rpc-address"] == "10.200.0.11:8020"
    assert h["dfs.datanode.address"] == "10.200.0.14:50010"  # own address, never 0.0.0.0
    assert h["dfs.webhdfs.enabled"] == "false"  # Hadoop 2.7 on Java 17
    for f in r.values():
        for name, text in f.files.items():
            assert "0.0.0.0" not in text, name


def test_replication_clamped_to_core_nodes():
    c = cluster()
    small = replace(c, nodes=c.nodes[:2])
    h = props(render_node(small, small.nodes[0]).files["conf/hdfs-site.xml"])
    assert h["dfs.replication"] == "2"


def test_hadoop3_ports_and_classpath():
    r = render_cluster(cluster(FW3))
    h = props(r["h5"].files["conf/hdfs-site.xml"])
    assert h["dfs.namenode.http-address"] == "10.200.0.11:9870"
    assert h["dfs.datanode.address"] == "10.200.0.15:9866"
    assert "dfs.webhdfs.enabled" not in h
    env = r["h5"].files["conf/hadoop-env.sh"]
    assert "/opt/hadoop-3.4.1/share/hadoop/hdfs/*" in env
    assert "JAVA=/usr/lib/jvm/java-17/bin/java" in env


def test_hadoop3_yarn_templates():
    r = render_cluster(cluster(FW3), template_set="hadoop3")
    assert set(r["h1"].files) == {"conf/core-site.xml", "conf/hdfs-site.xml", "conf/yarn-site.xml",
                                  "conf/mapred-site.xml", "conf/capacity-scheduler.xml", "conf/workers"}
    assert "conf/workers" not in r["h2"].files  # master only
    y = props(r["h3"].files["conf/yarn-site.xml"])
    assert y["yarn.resourcemanager.hostname"] == "10.200.0.11"
    assert y["yarn.nodemanager.resource.cpu-vcores"] == "3"  # h3: 2 + 3 % 2
    assert y["yarn.nodemanager.resource.memory-mb"] == "2048"
    assert y["yarn.nodemanager.local-dirs"] == "/srv/fawkes/clusters/c1/local"
    assert y["yarn.resourcemanager.nodes.exclude-path"].endswith("/conf/yarn.exclude")
    assert y["yarn.nodemanager.bind-host"] == "10.200.0.13"
    m = props(r["h1"].files["conf/mapred-site.xml"])
    assert m["mapreduce.framework.name"] == "yarn"
    assert m["mapreduce.job.am.node-label-expression"] == "core"
    cs = props(r["h1"].files["conf/capacity-scheduler.xml"])
    assert cs["yarn.scheduler.capacity.root.queues"] == "default"
    assert cs["yarn.scheduler.capacity.root.default.ordering-policy"] == "fifo"
    assert float(cs["yarn.scheduler.capacity.maximum-am-resource-percent"]) > 0.1
    assert props(r["h1"].files["conf/hdfs-site.xml"])["dfs.replication"] == "3"
    assert r["h1"].files["conf/workers"].split() == [f"10.200.0.{10 + i}" for i in range(1, 6)]
    assert set(r["h1"].hashes) == {"hdfs", "yarn"}


def test_spark_files():
    r = render_cluster(cluster())
    env = r["h3"].files["conf/spark-env.sh"]
    assert "SPARK_WORKER_CORES=3\n" in env and "SPARK_LOCAL_IP=10.200.0.13\n" in env
    assert "SPARK_MASTER_HOST=10.200.0.11\n" in env
    assert "SPARK_LOCAL_DIRS=/srv/fawkes/clusters/c1/local\n" in env
    defaults = dict(ln.split(None, 1) for ln in r["h3"].files["conf/spark-defaults.conf"].splitlines()
                    if ln.strip() and not ln.startswith("#"))
    assert defaults["spark.decommission.enabled"] == "true"
    assert defaults["spark.master"] == "spark://10.200.0.11:7077"
    assert "spark.cores.max" not in defaults


def test_shell_values_are_quoted():
    """A hostile value ends up as one literal word when the rendered spark-env.sh is sourced."""
    evil = "/tmp/x; touch /tmp/pwned-$(id -u) `id` 'q\""
    fw = replace(FW, spark_home="/opt/spark")
    c = cluster(fw, daemon_jvm_opts="-XX:+UseSerialGC")
    # spark_home is validated (no white space), so put the hostile string where free text may go:
    # render spark-env.sh with a node root that is legal but odd, and check a sourced shell reads it back
    node = replace(c.nodes[0], root="/srv/o'dd$(x)")
    c = replace(c, nodes=(node, *c.nodes[1:]))
    env = render_node(c, node).files["conf/spark-env.sh"]
    out = subprocess.run(["sh", "-c", env + '\nprintf %s "$SPARK_LOCAL_DIRS"'], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "/srv/o'dd$(x)/clusters/c1/local"
    assert shlex.quote(evil) != evil  # the filter is shlex.quote
    from fawkes.frameworks.render import shell_quote
    assert shlex.split(shell_quote(evil)) == [evil]
    script = render_node(c, node).files["bin/fawkes-daemon.sh"]
    assert subprocess.run(["sh", "-n", "-c", script]).returncode == 0  # syntactically valid


def test_bad_options_rejected():
    with pytest.raises(FawkesError, match="unknown option"):
        render_cluster(cluster(no_such_option="1"))
    with pytest.raises(FawkesError, match="nn_heap: expected a size"):
        render_cluster(cluster(nn_heap="1g; rm -rf /"))
    with pytest.raises(FawkesError, match="daemon_jvm_opts: expected JVM flags"):
        render_cluster(cluster(daemon_jvm_opts="-Xss1m\n-javaagent:/x.jar"))
    with pytest.raises(FawkesError, match="without spaces"):
        NodeSpec("h", "10.0.0.1", Role.CORE, "/a b")
    with pytest.raises(FawkesError, match="exactly one"):
        FrameworkPaths("x", "spark-hdfs", "/opt/spark")


def test_hashes_change_only_where_inventory_changed():
    base = render_cluster(cluster())
    c = cluster()
    # more cores on h4 (a TR node): only h4's spark hash changes
    h4 = replace(c.nodes[3], cores=8)
    changed = render_cluster(replace(c, nodes=(*c.nodes[:3], h4, c.nodes[4])))
    for h in base:
        if h == "h4":
            assert changed[h].hashes["spark"] != base[h].hashes["spark"]
            assert changed[h].hashes["hdfs"] == base[h].hashes["hdfs"]
            assert changed[h].hash != base[h].hash
        else:
            assert changed[h].hashes == base[h].hashes and changed[h].hash == base[h].hash, h
    # an HDFS tunable changes every host's hdfs hash and no spark hash
    tuned = render_cluster(cluster(decommission_interval_s="2"))
    for h in base:
        assert tuned[h].hashes["hdfs"] != base[h].hashes["hdfs"]
        assert tuned[h].hashes["spark"] == base[h].hashes["spark"]
    # growing the cluster does not touch the existing hosts
    grown = render_cluster(c.with_node(NodeSpec("h6", "10.200.0.16", Role.TR, "/srv/fawkes")))
    assert all(grown[h].hash == base[h].hash for h in base)
    # rendering is deterministic
    assert {h: r.hash for h, r in render_cluster(cluster()).items()} == {h: r.hash for h, r in base.items()}
    assert base["h1"].changed_components(None) == {"spark", "hdfs"}
    assert changed["h4"].changed_components(base["h4"].hashes) == {"spark"}


def test_exclude_file():
    assert render_exclude(["10.0.0.2", "10.0.0.1", "10.0.0.2"]) == "10.0.0.1\n10.0.0.2\n"
    assert render_exclude([]) == ""


def test_dask_files_bind_to_the_hosts_addresses():
    """Kind dask: its settings and control script per host; the scheduler on the master's address
    (8786, HTTP 8787), each worker on its own host's address, never 0.0.0.0; the script parses."""
    fw = FrameworkPaths("d", "dask", shared_dir="/tmp/shared", python="/opt/py/bin/python3")
    c = ClusterSpec("dk", fw, (NodeSpec("h1", "10.9.0.1", Role.CORE, "/srv/n1", cores=2),
                               NodeSpec("h3", "10.9.0.3", Role.TR, "/srv/n3", cores=3, memory_mb=2048)))
    r = render_cluster(c)
    assert set(r["h3"].files) == {"conf/dask-env.sh", "bin/fawkes-daemon.sh"} and set(r["h3"].hashes) == {"dask"}
    env = dict(ln.split("=", 1) for ln in r["h3"].files["conf/dask-env.sh"].splitlines() if "=" in ln
               and not ln.startswith("#"))
    assert env["DASK_HOST"] == "10.9.0.3" and env["DASK_NAME"] == "h3" and env["DASK_NTHREADS"] == "3"
    assert env["DASK_SCHEDULER"] == "tcp://10.9.0.1:8786" and env["DASK_DASHBOARD_ADDRESS"] == "10.9.0.1:8787"
    assert env["DASK_PYTHON"] == "/opt/py/bin/python3" and env["DASK_MEMORY_LIMIT"] == "2048MiB"
    for h in r.values():
        for text in h.files.values():
            assert "0.0.0.0" not in text
        script = h.files["bin/fawkes-daemon.sh"]
        assert '--host "$DASK_HOST"' in script and '--dashboard-address "$DASK_HOST:0"' in script
        assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    # a change of one host's cores restarts that host only
    c2 = ClusterSpec("dk", fw, (c.nodes[0], NodeSpec("h3", "10.9.0.3", Role.TR, "/srv/n3", cores=1, memory_mb=2048)))
    r2 = render_cluster(c2)
    assert r2["h1"].hashes == r["h1"].hashes and r2["h3"].hashes != r["h3"].hashes
