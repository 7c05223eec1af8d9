"""Memory sizes of a cluster's daemons and jobs, derived from its hosts' inventory (pure).

A size option (``nn_heap``, ``executor_memory``, ...) the config leaves out is not a lab constant: it
is a fraction of a host's ``memory`` in the inventory (:attr:`NodeSpec.memory_mb`), between a floor
and a ceiling, rounded down to a MiB.  Which host: the master's for what runs once per cluster on the
master (the NameNode, the Flink JobManager, a job's driver), each node's own for what runs on every
node (the DataNode, the Spark daemons, the HDFS tools, a Flink TaskManager), so growing a cluster by a
smaller host never changes the configs of the others.  A job's executors run on every worker: their
memory at submission is the smallest worker's share.  A host's cores are its workers' slots already
(``SPARK_WORKER_CORES``, Flink's task slots, Dask's threads); the sizes here follow its memory only.

:data:`RULES` is the one table (docs/frameworks.md "Sizes" prints it); :data:`LAB_SIZES` are the small
fixed sizes the lab passes explicitly (its hosts share one small machine).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from fawkes.frameworks import jvm_archive
from fawkes.frameworks.spec import ClusterSpec, NodeSpec


@dataclass(frozen=True)
class Rule:
    """``fraction`` of a host's memory, clamped to ``floor_mb`` .. ``ceiling_mb``; ``scope``: whose memory
    (``master``: the cluster's master host, ``node``: the host being configured); ``of_worker``: of the
    memory its Spark worker offers (``worker_memory_mb``), never above it."""

    scope: str
    fraction: float
    floor_mb: int
    ceiling_mb: int
    of_worker: bool = False
    what: str = ""

    def size_mb(self, memory_mb: int) -> int:
        mb = min(max(int(memory_mb * self.fraction), self.floor_mb), self.ceiling_mb)
        return min(mb, memory_mb) if self.of_worker else mb


#: option -> how its default is derived (an option given in the config wins)
RULES: dict[str, Rule] = {
    "nn_heap": Rule("master", 1 / 8, 256, 8192, what="NameNode heap"),
    "dn_heap": Rule("node", 1 / 16, 256, 2048, what="DataNode heap"),
    "tool_heap": Rule("node", 1 / 16, 256, 1024, what="HDFS tools' heap (dfsadmin, put, get)"),
    "spark_daemon_memory": Rule("node", 1 / 16, 256, 1024, what="Spark master and worker daemons' heap"),
    "executor_memory": Rule("node", 1 / 2, 512, 65536, of_worker=True,
                            what="a job's executor on a worker (at submission: the smallest worker's)"),
    "driver_memory": Rule("master", 1 / 8, 512, 4096, what="a job's driver on the master (Flink: its client)"),
    "flink_jm_memory": Rule("master", 1 / 8, 768, 4096, what="the Flink JobManager's process"),
    "flink_tm_memory": Rule("node", 1 / 2, 1024, 65536, of_worker=True, what="a Flink TaskManager's process"),
}

#: the lab's explicit sizes (its hosts are network namespaces sharing a small machine: docs/lab.md); with
#: ``-XX:TieredStopAtLevel=1`` the daemons and each job's driver and executors JIT with C1 only, which under a
#: 0.33-CPU quota starts them faster (a job's response 0.77 of the JVM's defaults: docs/lab.md),
#: ``decommission_allow_mode: ALLOW``, jobs run by fawkes' own interpreter and the frameworks' standard ports,
#: as the lab has always run
LAB_SIZES: dict[str, str] = {
    "nn_heap": "192m", "dn_heap": "128m", "tool_heap": "128m", "spark_daemon_memory": "128m",
    "executor_memory": "512m", "driver_memory": "512m", "flink_jm_memory": "768m", "flink_tm_memory": "1024m",
    "daemon_jvm_opts": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1", "decommission_allow_mode": "ALLOW",
    "app_jvm_opts": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "job_python": sys.executable,  # every lab host sees this machine's files
    "port_range": "standard",  # the frameworks' own ports (each lab host has its own address)
    # the lab's class-data archives, built by dists.ensure_lab_dists (a daemon starts without one until then)
    "jvm_archive_dir": jvm_archive.lab_dir(),
}


def worker_memory_mb(node: NodeSpec, opt: Mapping[str, str]) -> int:
    """What ``node``'s worker offers to executors: ``worker_memory_mb`` when given, else the host's memory."""
    return int(opt.get("worker_memory_mb") or node.memory_mb)


def derived(key: str, cluster: ClusterSpec, node: NodeSpec, opt: Mapping[str, str]) -> str:
    """The derived value of size option ``key`` for ``node`` of ``cluster`` (``512m``)."""
    rule = RULES[key]
    host = cluster.master if rule.scope == "master" else node
    memory = worker_memory_mb(host, opt) if rule.of_worker else host.memory_mb
    return f"{rule.size_mb(memory)}m"


def fill(cluster: ClusterSpec, node: NodeSpec, opt: dict[str, str]) -> dict[str, str]:
    """``opt`` with every size option left empty replaced by its derived value for ``node``."""
    out = dict(opt)
    for key in RULES:
        if not out.get(key):
            out[key] = derived(key, cluster, node, out)
    return out


def submit_executor_memory(cluster: ClusterSpec) -> str:
    """A job's ``spark.executor.memory``: the cluster's option when given, else the smallest worker's derived
    share (an executor larger than a worker's memory would never start there)."""
    opt = cluster.options  # as given (checked by the caller's render._options)
    if opt.get("executor_memory"):
        return str(opt["executor_memory"])
    rule = RULES["executor_memory"]
    return f"{min(rule.size_mb(worker_memory_mb(n, opt)) for n in cluster.nodes)}m"
