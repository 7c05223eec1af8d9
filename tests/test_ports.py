"""Ports per cluster (issue 30, item 3): each live cluster gets its own block of ports from the option
``port_range`` (the store allocates blocks, the lowest free one, kept until release), so two clusters on
one host (a lent host, an admin's own Spark) never clash; ``standard`` keeps the frameworks' own ports."""

from __future__ import annotations

import pytest

from fawkes.config import load_config
from fawkes.errors import ConfigError, FawkesError
from fawkes.frameworks.dask import DaskDriver
from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver
from fawkes.frameworks.render import cluster_ports, render_cluster
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import PORT_BLOCK, ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism import ClusterState, Role
from fawkes.store import Store

SPARK = FrameworkPaths("prod", "spark-hdfs", "/opt/spark", hadoop_home="/opt/hadoop")
FLINK = FrameworkPaths("fl", "flink-hdfs", flink_home="/opt/flink", hadoop_home="/opt/hadoop")
DASK = FrameworkPaths("dk", "dask", shared_dir="/srv/shared", python="/usr/bin/python3")


def spec(name="a", fw=SPARK, slot=None, **opts) -> ClusterSpec:
    nodes = (NodeSpec("h1", "10.7.0.1", Role.CORE, "/srv/fawkes", cores=4, memory_mb=8192),
             NodeSpec("h2", "10.7.0.2", Role.TR, "/srv/fawkes", cores=4, memory_mb=8192))
    return ClusterSpec(name, fw, nodes, options=opts, port_slot=slot)


def env_of(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and not ln.startswith(("#", " ")))


def test_two_clusters_on_one_host_render_disjoint_ports():
    a, b = render_cluster(spec("a", slot=0))["h1"], render_cluster(spec("b", slot=1))["h1"]
    ea, eb = env_of(a.files["conf/spark-env.sh"]), env_of(b.files["conf/spark-env.sh"])
    assert (ea["SPARK_MASTER_PORT"], ea["SPARK_MASTER_WEBUI_PORT"], ea["SPARK_WORKER_WEBUI_PORT"]) == ("21000", "21001",
                                                                                                       "21002")
    assert (eb["SPARK_MASTER_PORT"], eb["SPARK_MASTER_WEBUI_PORT"]) == ("21020", "21021")
    assert "<value>10.7.0.1:21003</value>" in a.files["conf/hdfs-site.xml"]  # the NameNode's RPC
    assert "<value>10.7.0.1:21026</value>" in b.files["conf/hdfs-site.xml"]  # b's DataNode transfer port
    assert "spark://10.7.0.1:21020" in b.files["conf/spark-defaults.conf"]
    pa, pb = set(cluster_ports(spec("a", slot=0)).values()), set(cluster_ports(spec("b", slot=1)).values())
    assert not pa & pb and len(pa) == len(cluster_ports(spec("a", slot=0)))


def test_the_drivers_address_the_ports_they_rendered():
    c = spec(slot=2, port_range="40000-40099")
    assert SparkHdfsDriver(None).urls(c)["master"] == "spark://10.7.0.1:40040"
    assert SparkHdfsDriver(None).urls(c)["master_ui"] == "http://10.7.0.1:40041"
    flink = spec(fw=FLINK, slot=2, port_range="40000-40099")
    assert FlinkHdfsDriver(None).urls(flink)["rest"] == "http://10.7.0.1:40050"
    d = spec(fw=DASK, slot=0)
    assert DaskDriver.urls(d)["scheduler"] == "tcp://10.7.0.1:21011"
    assert "DASK_SCHEDULER_PORT=21011" in render_cluster(d)["h1"].files["conf/dask-env.sh"]
    flink = render_cluster(spec(fw=FLINK, slot=0))["h2"].files["conf/config.yaml"]
    assert "port: 21009" in flink and "port: 21010" in flink


def test_standard_and_hand_built_clusters_keep_the_frameworks_ports():
    for c in (spec(slot=None), spec(slot=3, port_range="standard")):
        assert SparkHdfsDriver(None).urls(c)["master"] == "spark://10.7.0.1:7077"
        assert cluster_ports(c)["nn_http"] == 9870


def test_a_range_too_small_for_the_block_is_refused_naming_it():
    with pytest.raises(FawkesError, match="port_range 30000-30039 holds 2 block"):
        render_cluster(spec(slot=2, port_range="30000-30039"))


@pytest.mark.parametrize("value", [".nan", ".inf", "-1", "0", "1000000000000000000000000000000", '"21000-20000"',
                                   '"80-2000"', '"21000-99999"', '"21000-21005"', '"21000-31999\\n"',
                                   '"21000\\0-31999"',
                                   '"21000 - 31999"', "true", '"21000-31999; reboot"'])
def test_bad_port_ranges_are_refused_when_the_config_is_read(tmp_path, value):
    p = tmp_path / "cfg.yaml"
    p.write_text(f"cluster_options:\n  port_range: {value}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "\n" not in str(e.value) and "cluster_options: port_range:" in str(e.value)


# ------------------------------------------------------------------ the store: one block per live cluster
def test_blocks_are_the_lowest_free_kept_for_life_and_freed_at_release(tmp_path):
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        for name in ("a", "b", "c"):
            store.request_cluster(name, framework="spark", min_core=1)
        assert [store.port_slot(n) for n in ("a", "b", "c")] == [0, 1, 2]
        assert store.port_slot("b") == 1 and store.get_cluster("b").port_slot == 1  # kept
        store.transition_cluster("b", ClusterState.RELEASED)
        assert store.get_cluster("b").port_slot is None  # freed
        store.request_cluster("d", framework="spark", min_core=1)
        assert store.port_slot("d") == 1 and store.port_slot("c") == 2  # the lowest free; c keeps its own
        with pytest.raises(FawkesError, match="already released"):
            store.port_slot("b")


def test_the_fleet_gives_each_deployed_cluster_its_block(tmp_path):
    from fawkes.coordinator.fleet import Fleet
    from fawkes.inventory import load_inventory

    (tmp_path / "inv.yaml").write_text("hosts:\n  - {name: m1, address: 192.0.2.10}\n"
                                       "  - {name: m2, address: 192.0.2.11}\n")
    inv = load_inventory(tmp_path / "inv.yaml")
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": h.name, "address": h.address, "cores": 1} for h in inv.hosts])
        fleet = Fleet(store, inv, executor=object())
        for name, host in (("etl", "m1"), ("bi", "m2")):
            store.request_cluster(name, framework="spark", min_core=1)
            store.transition_cluster(name, ClusterState.DEPLOYING)
            store.allocate_node(name, host, Role.CORE)
        urls = {n: SparkHdfsDriver(None).urls(fleet.spec(n)[0])["master"] for n in ("etl", "bi")}
        assert urls == {"etl": "spark://192.0.2.10:21000", "bi": "spark://192.0.2.11:21020"}
        assert fleet.spec("etl")[0].port_slot == 0  # the same block at every later spec
    assert PORT_BLOCK == 20


def test_render_shows_the_configs_options_and_the_clusters_block(tmp_path):
    """``fawkes render`` writes what the coordinator would: the config's cluster_options (its port range,
    a heap it sets) and the block the store gave the cluster."""
    import json

    try:
        from test_cli_store import fawkes
    except ImportError:
        from tests.test_cli_store import fawkes

    (tmp_path / "inv.yaml").write_text("hosts:\n  - {name: m1, address: 192.0.2.10, cores: 2, memory: 16GiB}\n")
    (tmp_path / "cfg.yaml").write_text("state: state.db\ninventory: inv.yaml\n"
                                       "cluster_options: {port_range: 40000-40999, dn_heap: 700m}\n")
    with Store(str(tmp_path / "state.db")) as store:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.sync_hosts([{"name": "m1", "address": "192.0.2.10", "cores": 2, "memory_mb": 16384}])
        for name in ("x", "etl"):
            store.request_cluster(name, framework="spark", min_core=1)
        store.transition_cluster("etl", ClusterState.DEPLOYING)
        store.allocate_node("etl", "m1", Role.CORE)
        assert [store.port_slot("x"), store.port_slot("etl")] == [0, 1]
    r = fawkes("render", "etl", "--config", str(tmp_path / "cfg.yaml"), "--json")
    assert r.returncode == 0, r.stderr
    files = json.loads(r.stdout)["m1"]["files"]
    assert "SPARK_MASTER_PORT=40020" in files["conf/spark-env.sh"]
    assert "SPARK_DAEMON_MEMORY=1024m" in files["conf/spark-env.sh"]  # 16 GiB / 16
    assert "DN_OPTS=-Xmx700m" in files["conf/hadoop-env.sh"] and "NN_OPTS=-Xmx2048m" in files["conf/hadoop-env.sh"]
