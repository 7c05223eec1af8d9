"""DP never loses data (issue 29): a TC node's DataNode is stopped and wiped only once HDFS holds
every block of it elsewhere, even when the DataNode died before its DP.

The hazard, reproduced on real HDFS 2.7.3: a TC node holds the only replica of a closed file
(replication 1, written from the TC host, so its first replica is local), and its DataNode dies
(an OOM kill, a crash).  The NameNode marks it dead and its blocks missing; ``refreshNodes`` then
reports a dead node in the exclude file "decommissioned" at once, although nothing was copied.  A DP
that trusted that state stopped and wiped the node: the file was gone for good and ``fsck`` said
CORRUPT from then on.  The driver now brings a dead DataNode whose directory still exists back
before it decommissions it, so HDFS copies its blocks first, and checks with ``fsck`` (every
block's locations) that no closed file keeps a block only on the leaving nodes before it stops them.
"""

from __future__ import annotations

import os
import urllib.request

import pytest

from fawkes.frameworks.base import ProgressEvent
from fawkes.frameworks.render import cluster_ports
from fawkes.frameworks.hdfs import FSSHELL
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script
from tests.test_spark_hdfs_lab import framework, node, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.spark]

#: a DataNode is dead 2 x recheck + 10 x heartbeat after its last heartbeat: 14 s here
OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "2000", "decommission_interval_s": "1", "replication": "1"}


def fsck(cluster: ClusterSpec, extra: str = "") -> str:
    url = (f"http://{cluster.master.address}:{cluster_ports(cluster)['nn_http']}/fsck?ugi=root&path=%2F{extra}")
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode(errors="replace")


def test_a_dead_datanode_is_brought_back_and_drained_before_its_dp_finishes(lab, tmp_path):
    events: list[ProgressEvent] = []
    suffix = str(os.getpid() % 10000)
    cluster = ClusterSpec(f"dps{suffix}", framework(), (node(lab, 0, Role.CORE),), options=OPTIONS)
    tc = node(lab, 1, Role.TC)
    with lab.executor(command_timeout=120) as ex:
        drv = SparkHdfsDriver(ex, progress=events.append)
        try:
            drv.deploy(cluster)
            grown = drv.add_nodes(cluster, [tc]).cluster
            ctl = f"{grown.cluster_dir(tc)}/bin/fawkes-daemon.sh"
            # a closed 3-MB file written from the TC host: its one replica is on the TC DataNode
            r = ex.run([tc.name], Script("head -c 3000000 /dev/urandom > {f} && sha256sum < {f} && "
                                         "/bin/sh {ctl} hdfs {sh} -put {f} /only-on-tc.bin",
                                         f=f"{grown.cluster_dir(tc)}/tmp/src.bin", ctl=ctl, sh=FSSHELL),
                       timeout=120)[tc.name]
            assert r.ok, r.stderr
            digest = r.stdout.split()[0]
            located = fsck(grown, "&files=1&blocks=1&locations=1")
            assert f"{tc.address}:" in located and f"{cluster.master.address}:50010" not in located, located
            # the DataNode dies (kill -9) and HDFS sees it dead: the file's block is missing
            ex.run([tc.name], Script("kill -9 $(cat {p})", p=f"{grown.cluster_dir(tc)}/pids/datanode.pid"))
            wait_for("the DataNode dead", lambda: drv.datanodes(grown).admin_state(tc.address) == "dead", 60)
            wait_for("the file's block missing", lambda: "is CORRUPT" in fsck(grown), 60)
            # DP of the TC node: the DataNode comes back, its blocks are copied, then it is stopped and wiped
            drv.remove_nodes(grown, [tc.name], timeout=180)
            report = fsck(cluster, "&files=1&blocks=1&locations=1")
            assert "is HEALTHY" in report and f"{cluster.master.address}:" in report, report
            out = ex.run([cluster.master.name], Script(
                "/bin/sh {ctl} hdfs {sh} -cat /only-on-tc.bin | sha256sum",
                ctl=f"{cluster.cluster_dir(cluster.master)}/bin/fawkes-daemon.sh", sh=FSSHELL), timeout=120)
            assert out[cluster.master.name].stdout.split()[0] == digest
            said = [e.message for e in events if e.step == "dp"]
            assert any("not running: started again" in m for m in said), said
            assert not ex.run([tc.name], Script("test -e {d}", d=grown.cluster_dir(tc)))[tc.name].ok, "not wiped"
        finally:
            drv.teardown(cluster)
            ex.run([tc.name], Script("rm -rf {d}", d=cluster.cluster_dir(tc)))
