#!/usr/bin/env python3
"""Benchmark: what starting a Spark worker and a DataNode costs on a lab host under a CPU quota.

Two private labs run side by side, each of 1 + RUNS hosts: one unlimited, one whose hosts run
under ``--cpus C --memory M``.  Each gets a one-node MR-cluster on h1 (Spark master, NameNode,
worker, DataNode; h1 is under its lab's quota too) and a few seconds to settle.  Then, run by run
and alternating between the labs (so that load from elsewhere on the machine hits both alike),
on a fresh host of each lab:

  worker:   `fawkes-daemon.sh start worker` over SSH until the master lists it ALIVE
  datanode: the worker stopped, `fawkes-daemon.sh start datanode` until the NameNode reports it live

and, at that moment, the CPU time the daemon's process has used (user + system, with its waited-for
children: Spark's launcher JVM runs before `exec java`), which hardly depends on the machine's
load: under a quota of C the start takes at least CPU / C seconds.

Node specs come from each lab's own inventory (cores = the quota rounded up, memory = the limit),
as the coordinator builds them.  Prints every run (with the 1-minute load average), min / median /
max per mode and the ratio of the medians.  All hosts share this machine's cores: run it on an
otherwise idle machine.

usage: bench/bench_lab_startup.py [--runs 3] [--cpus 0.25] [--memory 2G] [--dir /tmp/fawkes-bench-startup]
                                  [--prefix fwbs] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.frameworks import dists
from fawkes.frameworks.registry import node_spec
from fawkes.frameworks.render import CONTROL_SCRIPT
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.inventory import load_inventory
from fawkes.lab import Lab, netns
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script

KEYS = ("worker", "worker_cpu", "datanode", "datanode_cpu")
LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}
CLASSES = {"worker": b"org.apache.spark.deploy.worker.Worker",
           "datanode": b"org.apache.hadoop.hdfs.server.datanode.DataNode"}
SETTLE_S = 5.0   # after deployment: the master's and NameNode's JVMs finish warming up
TIMEOUT_S = 300.0


def ctl(drv: SparkHdfsDriver, cluster: ClusterSpec, node: NodeSpec, *args: str) -> None:
    script = f"{cluster.cluster_dir(node)}/{CONTROL_SCRIPT}"
    r = drv.ex.run([node.name], Script("/bin/sh {s} {a}", s=script, a=list(args)), timeout=120)[node.name]
    if not r.ok:
        raise SystemExit(f"{node.name}: fawkes-daemon.sh {' '.join(args)} failed: {r.error} {r.stderr.strip()}")


def cpu_seconds(ns: str, daemon: str) -> float:
    """CPU time of ``daemon``'s process in network namespace ``ns`` (user + system, self + waited-for children)."""
    for pid in netns.netns_pids(ns):
        try:
            if CLASSES[daemon] in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    raise SystemExit(f"{ns}: no {daemon} process found")


def timed_start(mode: "Mode", node: NodeSpec, daemon: str, up) -> tuple[float, float]:
    """Seconds from the SSH start command until ``up()`` is true (polled every 50 ms), and the CPU
    seconds the daemon had used by then."""
    t0 = time.monotonic()
    ctl(mode.drv, mode.cluster, node, "start", daemon)
    while time.monotonic() - t0 < TIMEOUT_S:
        try:
            if up():
                return time.monotonic() - t0, cpu_seconds(mode.lab.host(node.name).netns, daemon)
        except FawkesError:  # the master/NameNode HTTP not answering yet counts as "not yet"
            pass
        time.sleep(0.05)
    raise SystemExit(f"{node.name}: {daemon} did not register within {TIMEOUT_S:g}s")


@dataclass
class Mode:
    name: str
    lab: Lab
    drv: SparkHdfsDriver
    cluster: ClusterSpec
    runs: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KEYS})


def setup(name: str, fw: FrameworkPaths, hosts: int, lab_dir: Path, prefix: str, cpus: str | None,
          memory: str | None) -> Mode:
    """A lab of ``hosts`` hosts with a one-node MR-cluster on h1."""
    subnet = next(s for s in (f"10.{n}.0" for n in range(230, 250)) if Lab.subnet_free(s))
    lab = Lab.up(hosts, lab_dir, prefix=prefix, subnet=subnet, cpus=cpus, memory=memory)
    drv = SparkHdfsDriver(lab.executor(command_timeout=120), poll_s=0.05)
    h1 = node_spec(load_inventory(lab.inventory_path).host("h1"), Role.CORE)
    mode = Mode(name, lab, drv, ClusterSpec("startup", fw, (h1,), options=LAB_OPTIONS))
    try:
        drv.deploy(mode.cluster, timeout=TIMEOUT_S)
    except BaseException:
        close(mode)
        raise
    return mode


def measure(mode: Mode, host: str) -> None:
    """Start a worker, then (the worker stopped) a DataNode on ``host``: record both times."""
    drv = mode.drv
    node = node_spec(load_inventory(mode.lab.inventory_path).host(host), Role.TC)
    cluster = mode.cluster = mode.cluster.with_node(node)
    drv.push_configs(cluster, [node.name])
    load = os.getloadavg()[0]
    ups = {"worker": lambda: node.address in drv.master_state(cluster).workers_by_host("ALIVE"),
           "datanode": lambda: node.address in drv.datanodes(cluster).live}
    for daemon, up in ups.items():
        wall, cpu = timed_start(mode, node, daemon, up)
        ctl(drv, cluster, node, "stop", daemon)
        mode.runs[daemon].append(wall)
        mode.runs[f"{daemon}_cpu"].append(cpu)
    r = {k: v[-1] for k, v in mode.runs.items()}
    print(f"  {mode.name:<26} {host}: worker {r['worker']:5.2f}s (CPU {r['worker_cpu']:4.2f}s), DataNode "
          f"{r['datanode']:5.2f}s (CPU {r['datanode_cpu']:4.2f}s); load {load:.1f}", flush=True)


def close(mode: Mode) -> None:
    try:
        mode.drv.teardown(mode.cluster)
    finally:
        mode.drv.ex.close()
        mode.lab.down()


def summary(xs: list[float]) -> str:
    return f"{min(xs):6.2f} {statistics.median(xs):6.2f} {max(xs):6.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh hosts measured per mode")
    ap.add_argument("--cpus", default="0.25", help="the quota mode's --cpus")
    ap.add_argument("--memory", default="2G", help="the quota mode's --memory")
    ap.add_argument("--dir", default="/tmp/fawkes-bench-startup")
    ap.add_argument("--prefix", default="fwbs")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    d = dists.ensure_lab_dists(progress=lambda m: print(f"[dists] {m}", file=sys.stderr))
    fw = FrameworkPaths("lab", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    quota = f"--cpus {args.cpus} --memory {args.memory}"
    print(f"{args.runs} runs per mode; load average at start {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    modes: list[Mode] = []
    try:
        for name, sub, cpus, memory in (("unlimited", "u", None, None), (quota, "q", args.cpus, args.memory)):
            modes.append(setup(name, fw, 1 + args.runs, Path(args.dir) / sub, args.prefix + sub, cpus, memory))
        time.sleep(SETTLE_S)
        for i in range(2, 2 + args.runs):
            for mode in modes:
                measure(mode, f"h{i}")
    finally:
        for mode in modes:
            close(mode)
    results = {m.name: m.runs for m in modes}
    heads = {"worker": "worker ALIVE", "worker_cpu": "its CPU", "datanode": "DataNode live", "datanode_cpu": "its CPU"}
    print(f"\n{'seconds: min median max':<28}" + "".join(f"{heads[k]:>22}" for k in KEYS))
    for name, r in results.items():
        print(f"{name:<28}" + "".join(f"{summary(r[k]):>22}" for k in KEYS))
    base, limited = results.values()
    print(f"{'ratio of medians':<28}" + "".join(
        f"{statistics.median(limited[k]) / statistics.median(base[k]):>22.2f}" for k in KEYS))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
