#!/usr/bin/env python3
"""The locality penalty on the lab: one job on an MR-cluster grown by a transient node on the core
node's rack, then by one on another rack (placement, issue 12; docs/mechanism.md "Placement").

    flock /work/runs/lab.lock python3 bench/bench_locality.py [--rate 100mbit] [--mb 96] [--reps 2]

A lab of 3 hosts on 2 racks (h1 h2 on r1, h3 on r2; one bridge per rack, traffic between racks limited
to --rate by tc htb; no added latency: this kernel has no sch_netem).  MR-cluster: core node h1 (HDFS
holds the input there).  Each repetition runs the word count (fawkes/apps/wordcount.py: reads the
input from HDFS, repartitions it, counts) once with a TR node on h2 (same rack) and once with one on
h3 (other rack), in alternating order; the penalty is mean(other rack) / mean(same rack).  What it
measures is this lab's penalty at this rate, not a universal constant: a cluster's own network
decides its factor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism.model import Role, ShrinkMode  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "fawkes" / "apps" / "wordcount.py"
OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}


def run_job(drv, cluster, lab, out: str, parts: int, log: Path) -> float:
    d = dists.ensure_lab_dists()
    conf = {**drv.submit_conf(cluster), "spark.driver.host": lab.controller_address,
            "spark.driver.bindAddress": lab.controller_address, "spark.ui.port": "4071",
            "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
            "spark.driver.memory": "512m", "spark.executor.memory": "512m", "spark.port.maxRetries": "1",
            "spark.ui.showConsoleProgress": "false"}
    argv = [str(d.spark_home / "bin" / "spark-submit"), "--deploy-mode", "client"]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    argv += [str(APP), "/data/input.txt", out, str(parts), "0"]
    env = {**os.environ, "SPARK_HOME": str(d.spark_home), "SPARK_LOCAL_IP": lab.controller_address,
           "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_CONF_DIR", None)
    t0 = time.monotonic()
    with log.open("ab") as fh:
        subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, check=True, timeout=900)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="100mbit", help="bandwidth between racks (tc htb)")
    ap.add_argument("--mb", type=int, default=96, help="input size in MiB")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cpus", default="0.6", help="CPU quota per lab host")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    info = meta()
    print(json.dumps(info), flush=True)  # command, commit, date, load: what a results file carries
    work = Path(tempfile.mkdtemp(prefix="fawkes-bench-locality-"))
    subnet = next(s for s in [f"10.{n}.0" for n in range(240, 250)] if Lab.subnet_free(s))
    lab = Lab.up(3, work / "lab", prefix="fwloc", subnet=subnet, cpus=args.cpus, racks=2,
                 rack_bandwidth=args.rate)
    d = dists.ensure_lab_dists()
    fw = FrameworkPaths("lab", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))

    def node(name: str, role: Role) -> NodeSpec:
        h = lab.host(name)
        return NodeSpec(h.name, h.address, role, str(lab.node_dir), cores=1, memory_mb=1024)

    drv = SparkHdfsDriver(lab.executor())
    base = ClusterSpec("loc", fw, (node("h1", Role.CORE),), options=OPTIONS)
    times: dict[str, list[float]] = {"same rack (h2)": [], "other rack (h3)": []}
    try:
        drv.deploy(base, timeout=300)
        src = work / "input.txt"
        words = [f"word{i % 5003}" for i in range(64)]
        line = " ".join(words) + "\n"
        with src.open("w") as fh:
            for _ in range(args.mb * (1 << 20) // len(line)):
                fh.write(line)
        drv.load_input(base, str(src), "/data/input.txt")
        log = work / "jobs.log"
        for rep in range(args.reps):
            order = [("same rack (h2)", "h2"), ("other rack (h3)", "h3")]
            for label, host in (order if rep % 2 == 0 else order[::-1]):
                grown = drv.add_nodes(base, [node(host, Role.TR)], timeout=180).cluster
                secs = run_job(drv, grown, lab, f"/out/{host}-{rep}", args.parts, log)
                times[label].append(secs)
                print(f"rep {rep}: {label}: {secs:.1f} s", flush=True)
                drv.remove_nodes(grown, [host], ShrinkMode.FP, timeout=120)
        same, other = (statistics.mean(v) for v in times.values())
        print(f"\n{args.mb} MiB word count, core h1 + 1 TR, {args.rate} between racks, {args.cpus} CPU per host, "
              f"{args.reps} reps")
        for label, v in times.items():
            print(f"  {label:<16} " + " ".join(f"{x:.1f}" for x in v) + f"  mean {statistics.mean(v):.1f} s")
        print(f"locality penalty (other / same) = {other / same:.3f}")
        if args.json:
            Path(args.json).write_text(json.dumps({**info, "load_end": [round(x, 2) for x in os.getloadavg()],
                                                   "rate": args.rate, "mb": args.mb, "parts": args.parts,
                                                   "cpus": args.cpus, "times_s": times,
                                                   "penalty": round(other / same, 4)}, indent=1) + "\n")
    finally:
        try:
            drv.teardown(base.with_node(node("h2", Role.TR)).with_node(node("h3", Role.TR)))
        finally:
            lab.down()


if __name__ == "__main__":
    main()
