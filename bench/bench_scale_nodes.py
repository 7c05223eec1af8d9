#!/usr/bin/env python3
"""Benchmark: time to grow a running MR-cluster by k TC nodes and to shrink it by k (DP).

Runs on a private SSH lab (network namespaces; needs root): an MR-cluster of one core node
(Spark master + NameNode + worker + DataNode), then for k = 1, 4, 8: add k TC nodes (until every
new worker is ALIVE in the master and every new DataNode is live), then remove them by DP
(exclude file + refreshNodes, until Decommissioned, then stop).  Prints each phase:

  grow:   ssh (render + write configs over SSH), start (daemon start commands), register
  shrink: decommission (Spark SIGPWR + HDFS until Decommissioned), stop, cleanup

and the ratio of k = 8 to k = 1 (target at most 2).  All hosts share this machine's CPUs, so
starting 2k JVMs at once is CPU-bound here; the ratio on real hosts is expected to be lower.

usage: bench/bench_scale_nodes.py [--ks 1,4,8] [--dir /tmp/fawkes-bench-lab] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from fawkes.frameworks import dists
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.lab import Lab
from fawkes.mechanism.model import Role, ShrinkMode

LAB_OPTIONS = {"heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,4,8")
    ap.add_argument("--dir", default="/tmp/fawkes-bench-lab")
    ap.add_argument("--prefix", default="fwb")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the driver's progress")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    d = dists.ensure_lab_dists(progress=lambda m: print(f"[dists] {m}", file=sys.stderr))
    fw = FrameworkPaths("lab", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    subnet = next(s for s in (f"10.{n}.0" for n in range(230, 250)) if Lab.subnet_free(s))
    lab = Lab.up(1 + max(ks), Path(args.dir), prefix=args.prefix, subnet=subnet)
    results: dict[int, dict[str, dict[str, float]]] = {}
    progress = (lambda e: print(f"  [{e.elapsed_s:6.2f}s] {e.step:<10} {e.host or '-':<4} {e.message}")) \
        if args.verbose else None
    ex = lab.executor()
    drv = SparkHdfsDriver(ex, progress=progress)
    h = lab.hosts
    core = NodeSpec(h[0].name, h[0].address, Role.CORE, str(lab.node_dir), cores=1, memory_mb=1024)
    cluster = ClusterSpec("bench", fw, (core,), options=LAB_OPTIONS)
    try:
        t = time.monotonic()
        drv.deploy(cluster)
        print(f"deployed a 1-core MR-cluster in {time.monotonic() - t:.1f}s on {len(h)} lab hosts")
        for k in ks:
            new = [NodeSpec(x.name, x.address, Role.TC, str(lab.node_dir), cores=1, memory_mb=1024)
                   for x in h[1:1 + k]]
            grow = drv.add_nodes(cluster, new, timeout=300)
            shrink = drv.remove_nodes(grow.cluster, [n.name for n in new], ShrinkMode.DP, timeout=300)
            cluster = shrink.cluster
            g, s = grow.phases, shrink.phases
            results[k] = {"grow": g, "shrink": s}
            print(f"k={k}: grow {g['total']:6.2f}s (ssh {g['ssh']:.2f}, start {g['start']:.2f}, "
                  f"register {g['register']:.2f}) | shrink DP {s['total']:6.2f}s "
                  f"(decommission {s.get('hdfs_decommission', 0):.2f}, stop {s.get('dp_stop', 0):.2f}, "
                  f"cleanup {s.get('cleanup', 0):.2f})", flush=True)
    finally:
        drv.teardown(cluster)
        ex.close()
        lab.down()
    if 1 in results and 8 in results:
        rg = results[8]["grow"]["total"] / results[1]["grow"]["total"]
        rs = results[8]["shrink"]["total"] / results[1]["shrink"]["total"]
        print(f"ratio k=8 / k=1: grow {rg:.2f}, shrink {rs:.2f} (target <= 2)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
