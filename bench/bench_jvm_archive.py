#!/usr/bin/env python3
"""Benchmark: what the class-data archives (``jvm_archive_dir``) save on a cluster's life, paired.

On a lab of 3 hosts (each ``--cpus`` of a core and 2 GiB), one cycle: deploy a spark-hdfs MR-cluster on its
core node, grow it by a transient and a transient-core node, load an input and run the lab's word count
through the driver's ``job_command`` (driver and executors), tear it down.  Each repetition runs the cycle
with the archives (the lab's option) and without (``jvm_archive_dir: ""``), in alternating order (ABBA over
the repetitions), nothing else changed.  Per cycle it prints the machine's busy CPU seconds (``/proc/stat``,
every process: run it on an otherwise idle machine), the deploy's and the grow's wall seconds and the job's;
then the medians and the paired ratios (with / without) with their range.  The lab's hosts are CPU quotas
of this machine: a grow's seconds are those of a host of ``--cpus`` of a core.

usage: bench/bench_jvm_archive.py [--reps 3] [--cpus 0.5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_meta import meta  # noqa: E402
from fawkes.errors import FawkesError  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism.model import Role  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402

OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1",
           "replication": "1"}


def busy() -> float:
    """The machine's busy CPU seconds so far (user + nice + system + irq + softirq + steal)."""
    f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    v = [int(x) for x in f]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / 100


class Job:
    def __init__(self, argv):
        self.id, self.argv, self.input_path = 1, argv, "/input"


def cycle(lab: Lab, fw: FrameworkPaths, options: dict, tmp: Path, n: int) -> dict:
    nodes = [NodeSpec(h.name, h.address, role, str(lab.node_dir), cores=1, memory_mb=1024)
             for h, role in zip(lab.hosts, (Role.CORE, Role.TR, Role.TC))]
    name = f"ja{n}"
    c = ClusterSpec(name, fw, (nodes[0],), options=options)
    src = tmp / f"input{n}.txt"
    src.write_text("\n".join(" ".join(f"w{(i + j) % 31}" for j in range(8)) for i in range(3000)) + "\n")
    row: dict = {}
    with lab.executor(command_timeout=600) as ex:
        drv = SparkHdfsDriver(ex)
        b0, t0 = busy(), time.monotonic()
        try:
            drv.deploy(c, timeout=600)
            row["deploy_s"] = round(time.monotonic() - t0, 1)
            t1 = time.monotonic()
            c = drv.add_nodes(c, nodes[1:], timeout=600).cluster
            row["grow_s"] = round(time.monotonic() - t1, 1)
            drv.load_input(c, str(src), "/input")
            launch = drv.job_command(c, Job([str(REPO / "fawkes/apps/wordcount.py"), "{input}", "{output}", "6",
                                             "0"]), output="/output/1", python=sys.executable)
            t2 = time.monotonic()
            r = ex.run([nodes[0].name], Script("cd {d} && env {e} {argv} > {log} 2>&1", d=str(tmp),
                                               e=[f"{k}={v}" for k, v in launch.env.items()],
                                               argv=list(launch.argv), log=str(tmp / f"job{n}.log")),
                       timeout=900)[nodes[0].name]
            if not r.ok:
                raise FawkesError(f"the job failed: {(tmp / f'job{n}.log').read_text()[-800:]}")
            row["job_s"] = round(time.monotonic() - t2, 1)
        finally:
            drv.teardown(ClusterSpec(name, fw, tuple(nodes), options=options))
        row["cycle_s"] = round(time.monotonic() - t0, 1)
        row["cpu_s"] = round(busy() - b0, 1)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpus", type=float, default=0.5)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not 1 <= a.reps <= 20:
        print("error: --reps: expected 1..20", file=sys.stderr)
        return 2
    if not 0.05 <= a.cpus <= 2:  # NaN fails too
        print("error: --cpus: expected 0.05..2", file=sys.stderr)
        return 2
    info = meta()
    d = dists.ensure_lab_dists(progress=lambda m: print(m, flush=True))
    fw = FrameworkPaths("bench", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    arms = {"archive": OPTIONS, "none": {**OPTIONS, "jvm_archive_dir": ""}}
    tmp = Path(tempfile.mkdtemp(prefix="fawkes-bench-jsa-"))
    Lab.cleanup("fwjsa", "10.238.0", tmp / "lab")
    lab = Lab.up_free(3, tmp / "lab", prefix="fwjsa", nets=range(238, 250), cpus=a.cpus, memory="2G")
    runs: list[dict] = []
    try:
        for rep in range(a.reps):
            order = ("archive", "none") if rep % 2 == 0 else ("none", "archive")
            for arm in order:
                row = {"rep": rep, "arm": arm, **cycle(lab, fw, arms[arm], tmp, len(runs)),
                       "load_1m": float(Path("/proc/loadavg").read_text().split()[0])}
                runs.append(row)
                print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    except FawkesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        lab.down()
        shutil.rmtree(tmp, ignore_errors=True)
    keys = ("cpu_s", "deploy_s", "grow_s", "job_s", "cycle_s")
    summary: dict = {}
    for k in keys:
        on = {r["rep"]: r[k] for r in runs if r["arm"] == "archive"}
        off = {r["rep"]: r[k] for r in runs if r["arm"] == "none"}
        ratios = [on[i] / off[i] for i in on if off.get(i)]
        summary[k] = {"archive": statistics.median(on.values()), "none": statistics.median(off.values()),
                      "ratio_median": round(statistics.median(ratios), 3),
                      "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]}
        s = summary[k]
        print(f"{k:<9} archive {s['archive']:7.1f}  none {s['none']:7.1f}  paired ratio {s['ratio_median']:.2f} "
              f"({s['ratio_range'][0]:.2f}-{s['ratio_range'][1]:.2f})")
    if a.json:
        a.json.write_text(json.dumps({**info, "cpus": a.cpus, "runs": runs, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
