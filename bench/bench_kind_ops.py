#!/usr/bin/env python3
"""Benchmark: what fawkes' grow and shrink of one transient node cost per framework kind, against the
physical floor (the same daemon started and stopped directly, in the same run).

One private lab (hosts under ``--cpus C --memory M``); per kind in turn, a one-core-node MR-cluster on h1
(deployed through the driver), then ``--runs`` repetitions on h2, each with both variants in
counterbalanced order (fawkes first in odd repetitions, the floor first in even ones):

  fawkes grow:   ``driver.add_nodes([TR node])`` (render, configs written and the worker started in one
                 SSH round, then polled until the kind's master counts the worker)
  floor grow:    the configs already on the host, ``fawkes-daemon.sh start WORKER`` over SSH, then the
                 same poll (what any tool must at least do: start the daemon and see it registered)
  fawkes shrink: ``driver.remove_nodes([TR node], FP)`` (stop the worker, wait until the master lets it
                 go, wipe the host's cluster directory)
  floor shrink:  ``fawkes-daemon.sh stop WORKER`` over SSH, then the same wait

Prints every run (with the 1-minute load average), the median per variant and the ratio fawkes / floor
per kind, and writes them with command, commit, date and load (``--json``).  All hosts share this
machine's cores: a figure depends on the host quota (say it with the figure).

usage: bench/bench_kind_ops.py [--kinds spark-hdfs,flink-hdfs,spark,dask] [--runs 3] [--cpus 0.5] [--memory 2G]
                               [--dir /tmp/fawkes-bench-kinds] [--prefix fwbk] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.base import driver_class  # noqa: E402
from fawkes.frameworks.registry import node_spec  # noqa: E402
from fawkes.frameworks.render import CONTROL_SCRIPT  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism.model import Role, ShrinkMode  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402

OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1", "replication": "1"}
TIMEOUT_S = 300.0


def framework(kind: str, shared: Path) -> FrameworkPaths:
    d = dists.ensure_lab_dists()
    return {"spark-hdfs": lambda: FrameworkPaths("b", kind, str(d.spark_home), hdfs_jars=str(d.hdfs_home)),
            "flink-hdfs": lambda: FrameworkPaths("b", kind, flink_home=str(d.flink_home), hdfs_jars=str(d.hdfs_home)),
            "spark": lambda: FrameworkPaths("b", kind, str(d.spark_home), shared_dir=str(shared)),
            "dask": lambda: FrameworkPaths("b", kind, shared_dir=str(shared))}[kind]()


def poll(check, what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT_S:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - a master not answering yet counts as "not yet"
            pass
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def bench_kind(lab: Lab, kind: str, runs: int, shared: Path) -> dict:
    inv = load_inventory(lab.inventory_path)
    cls = driver_class(kind)
    core, tr = node_spec(inv.host("h1"), Role.CORE), node_spec(inv.host("h2"), Role.TR)
    cluster = ClusterSpec(f"bk{kind.replace('-', '')[:8]}", framework(kind, shared), (core,), options=OPTIONS)
    worker = cls.role_daemons[Role.TR][0]
    with lab.executor(command_timeout=120) as ex:
        drv = cls(ex, poll_s=0.05)
        alive = drv.workers_alive
        out = {v: [] for v in ("fawkes_grow", "floor_grow", "fawkes_shrink", "floor_shrink")}
        try:
            drv.deploy(cluster, timeout=TIMEOUT_S)
            grown = cluster.with_node(tr)
            script = f"{grown.cluster_dir(tr)}/{CONTROL_SCRIPT}"

            def ctl(action: str) -> None:
                r = ex.run([tr.name], Script("/bin/sh {s} {a} {d}", s=script, a=action, d=worker), timeout=120)[tr.name]
                if not r.ok:
                    raise SystemExit(f"{tr.name}: {action} {worker}: {r.error}")

            def fawkes_variant() -> tuple[float, float]:
                t0 = time.monotonic()
                g = drv.add_nodes(cluster, [tr], timeout=TIMEOUT_S).cluster
                t1 = time.monotonic()
                drv.remove_nodes(g, [tr.name], ShrinkMode.FP, timeout=TIMEOUT_S)
                return t1 - t0, time.monotonic() - t1

            def floor_variant() -> tuple[float, float]:
                drv.push_configs(grown, [tr.name])  # the configs in place: the floor starts the daemon only
                t0 = time.monotonic()
                ctl("start")
                poll(lambda: tr.address in alive(grown), f"{worker} registered")
                t1 = time.monotonic()
                ctl("stop")
                poll(lambda: tr.address not in alive(grown), f"{worker} gone")
                t2 = time.monotonic()
                ex.run([tr.name], Script("if [ -f {s} ]; then /bin/sh {s} wipe; fi", s=script), timeout=120)
                return t1 - t0, t2 - t1

            for i in range(runs):
                order = [("fawkes", fawkes_variant), ("floor", floor_variant)]
                if i % 2:
                    order.reverse()
                for name, fn in order:
                    load = os.getloadavg()[0]
                    g, s = fn()
                    out[f"{name}_grow"].append(g)
                    out[f"{name}_shrink"].append(s)
                    print(f"  {kind:<11} run {i + 1} {name:<6}: grow {g:6.2f}s  shrink {s:6.2f}s  (load {load:.1f})",
                          flush=True)
        finally:
            drv.teardown(cluster.with_node(tr))
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"runs": out, "median": med,
            "ratio_grow": med["fawkes_grow"] / med["floor_grow"],
            "ratio_shrink": med["fawkes_shrink"] / med["floor_shrink"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="spark-hdfs,flink-hdfs,spark,dask")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpus", default="0.5")
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--dir", default="/tmp/fawkes-bench-kinds")
    ap.add_argument("--prefix", default="fwbk")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    for k in kinds:
        driver_class(k)  # an unknown kind: one line, before the lab starts
    if not 1 <= a.runs <= 100:
        raise SystemExit("--runs: 1..100")
    subnet = next(s for s in (f"10.{n}.0" for n in range(240, 250)) if Lab.subnet_free(s))
    Lab.cleanup(a.prefix, subnet)
    lab = Lab.up(2, Path(a.dir), prefix=a.prefix, subnet=subnet, cpus=a.cpus, memory=a.memory)
    results = {"meta": {**meta(), "host_quota": {"cpus": a.cpus, "memory": a.memory}}, "kinds": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="fawkes-bench-kinds-shared-") as shared:
            for k in kinds:
                results["kinds"][k] = r = bench_kind(lab, k, a.runs, Path(shared))
                m = r["median"]
                print(f"{k:<11} grow: fawkes {m['fawkes_grow']:.2f}s / floor {m['floor_grow']:.2f}s = "
                      f"{r['ratio_grow']:.2f}x; shrink (FP): fawkes {m['fawkes_shrink']:.2f}s / floor "
                      f"{m['floor_shrink']:.2f}s = {r['ratio_shrink']:.2f}x", flush=True)
    finally:
        lab.down()
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
