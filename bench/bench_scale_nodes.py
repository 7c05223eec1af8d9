#!/usr/bin/env python3
"""Benchmark: time to grow a running MR-cluster by k TC nodes, against the physical floor, and to
shrink it by k (DP).

Runs on a private SSH lab (network namespaces; needs root): an MR-cluster of one core node
(Spark master + NameNode + worker + DataNode, deployed by the reconciler), then for k = 1, 4, 8,
on the same k lab hosts:

* **floor**: the same daemons (Spark worker + DataNode) started directly, without fawkes: one
  SSH command per host, all hosts at once over already open connections, each running the two
  daemons' launch lines in the background (the control script's ``run``: source the rendered
  env, ``exec`` spark-class / java), then polling the master's ``/json/`` and the NameNode's
  ``NameNodeInfo`` every 0.25 s (as fawkes does) until every worker is ALIVE and every DataNode
  live and In Service: the readiness criterion fawkes waits for.  The configs are already on the
  hosts (written before the clock starts), the exclude file does not list them;
* **fawkes**: what the coordinator does: k nodes allocated in the state (REQUESTED), then
  ``Reconciler.step`` until all are RUNNING (intent recorded, sync, the grow operation:
  ``add_nodes`` renders and writes the configs, checks the exclude file, starts the daemons,
  waits for the same criterion; then the states recorded).  The hosts were wiped after the
  floor.  The driver's own phases are printed (ssh: exclude file read, configs rendered; start:
  configs written and daemons started; register); the scheduling delay of the service (its
  ``fast`` job runs every 2 s) is not counted;
* **shrink**: the nodes marked DRAINING, then ``Reconciler.step`` until RELEASED (DP: Spark
  SIGPWR, exclude file + refreshNodes, until Decommissioned, then stop).

With ``--repeat N`` the order of floor and fawkes alternates (the machine's load drifts) and
the medians are printed.

Before each timed start the hosts hold no daemon and the master and the NameNode list none of
them (a stopped DataNode stays "live" until the NameNode's heartbeat expiry, so the bench waits
for it: otherwise a stale entry would count as registered).  Prints per k: floor, fawkes,
fawkes / floor (target <= 1.2 for every k; exit code 1 when missed), fawkes' own time (outside
the wait for the JVMs to register) against the floor's start command, and the ratio of k = 8 to
k = 1.  All hosts share this machine's CPUs, so starting 2k JVMs at once is CPU-bound here:
what counts is the ratio to the floor, measured in the same run.

usage: bench/bench_scale_nodes.py [--ks 1,4,8] [--repeat N] [--dir DIR] [--json FILE] [-v]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fawkes.coordinator.fleet import Fleet  # noqa: E402
from fawkes.coordinator.reconcile import Reconciler  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.render import CONTROL_SCRIPT  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec, NodeSpec  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism import ClusterState, Role  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.lifecycle import NodeState  # noqa: E402

# recheck_ms 3000: a stopped DataNode is declared dead after 2 * 3 s + 10 * 1 s = 16 s (the
# bench waits for that between measurements on the same hosts)
LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "3000", "decommission_interval_s": "1"}
NAME = "bench"


def ready(drv: SparkHdfsDriver, cluster: ClusterSpec, addrs: set[str]) -> bool:
    """fawkes' readiness criterion of a TC node: worker ALIVE in the master, DataNode live In Service."""
    try:
        alive = set(drv.master_state(cluster).workers_by_host("ALIVE"))
        if not addrs <= alive:
            return False
        live = drv.datanodes(cluster).live
    except Exception:  # noqa: BLE001 (a daemon not answering yet counts as not ready)
        return False
    return all(a in live and live[a].admin_state == "In Service" for a in addrs)


def gone(drv: SparkHdfsDriver, cluster: ClusterSpec, addrs: set[str]) -> bool:
    """No ALIVE worker and no live DataNode at these addresses."""
    alive = set(drv.master_state(cluster).workers_by_host("ALIVE"))
    live = set(drv.datanodes(cluster).live)
    return not (addrs & (alive | live))


def wait(what: str, fn, timeout: float = 120.0, poll: float = 0.25) -> float:
    t0 = time.monotonic()
    while not fn():
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"bench: timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll)
    return time.monotonic() - t0


def clean_slate(drv: SparkHdfsDriver, ex, cluster: ClusterSpec, nodes: list[NodeSpec]) -> None:
    """Untimed: the hosts hold nothing of the cluster, and neither master nor NameNode list them."""
    ex.run_each({n.name: Script("if [ -f {s} ]; then /bin/sh {s} wipe; fi",
                                s=str(PurePosixPath(cluster.cluster_dir(n)) / CONTROL_SCRIPT)) for n in nodes},
                timeout=60)
    addrs = {n.address for n in nodes}
    excl = drv._read_exclude(cluster)
    if addrs & set(excl):  # left there by the previous DP: a DataNode listed there never gets In Service
        drv._set_exclude(cluster, [a for a in excl if a not in addrs])
    wait("the hosts' old worker and DataNode entries to expire", lambda: gone(drv, cluster, addrs))


def floor_start(drv: SparkHdfsDriver, ex, grown: ClusterSpec, nodes: list[NodeSpec]) -> dict[str, float]:
    """The physical floor: the daemons' launch lines over SSH, all hosts at once, until registered."""
    drv.push_configs(grown, [n.name for n in nodes])  # untimed: the configs are in place
    ex.run([n.name for n in nodes], "true")  # connections open, as fawkes' are
    cmds = {}
    for n in nodes:
        d = PurePosixPath(grown.cluster_dir(n))
        # exactly what `fawkes-daemon.sh start` backgrounds, minus its pid-file bookkeeping
        cmds[n.name] = Script("cd {d} && mkdir -p logs pids work local tmp && "
                              "for x in datanode worker; do "
                              "nohup /bin/sh {s} run $x >>logs/$x.out 2>&1 </dev/null & echo $! >pids/$x.pid; "
                              "done", d=str(d), s=str(d / CONTROL_SCRIPT))
    addrs = {n.address for n in nodes}
    t0 = time.monotonic()
    res = ex.run_each(cmds, timeout=60)
    started = time.monotonic() - t0
    bad = [f"{h}: {r.error}" for h, r in res.items() if not r.ok]
    if bad:
        raise SystemExit(f"bench: floor start failed: {bad}")
    wait("the floor's daemons to register", lambda: ready(drv, grown, addrs), 300, drv.poll_s)
    return {"start": started, "total": time.monotonic() - t0}


def reconcile_until(r: Reconciler, done, what: str, timeout: float = 300.0) -> float:
    """Step the reconciler (as the service's fast job does, without its 2 s period) until ``done()``."""
    t0 = time.monotonic()
    r.step()
    while True:
        time.sleep(0.02)
        if r.idle():  # cheap; the state is read only once the operations are done (no CPU taken from the JVMs)
            if done():
                return time.monotonic() - t0
            r.step()
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"bench: timed out after {timeout:g}s waiting for {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,4,8", help="numbers of nodes to add (default 1,4,8)")
    ap.add_argument("--repeat", type=int, default=1, help="measure each k this many times; medians (default 1)")
    ap.add_argument("--dir", default="/tmp/fawkes-bench-lab")
    ap.add_argument("--prefix", default="fwb")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the driver's progress")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    d = dists.ensure_lab_dists(progress=lambda m: print(f"[dists] {m}", file=sys.stderr))
    subnet = next(s for s in (f"10.{n}.0" for n in range(210, 250)) if Lab.subnet_free(s))
    lab = Lab.up(1 + max(ks), Path(args.dir), prefix=args.prefix, subnet=subnet)
    runs: dict[int, list[dict[str, dict[str, float]]]] = {k: [] for k in ks}
    progress = (lambda e: print(f"  [{e.elapsed_s:6.2f}s] {e.step:<10} {e.host or '-':<4} {e.message}")) \
        if args.verbose else None
    tmp = tempfile.TemporaryDirectory(prefix="fawkes-bench-")
    store = Store(f"sqlite:///{tmp.name}/state.db")
    inv = load_inventory(lab.inventory_path)
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": 1, "memory_mb": 1024} for h in inv.hosts])
    store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    ex = lab.executor()
    fleet = Fleet(store, inv, executor=ex, progress=progress, cluster_options=LAB_OPTIONS)
    drv = fleet.driver("spark-hdfs")
    grows: list = []  # the driver's OpResult of each add_nodes the reconciler makes
    add = drv.add_nodes

    def add_nodes(*a, **kw):
        res = add(*a, **kw)
        grows.append(res)
        return res

    drv.add_nodes = add_nodes
    r = Reconciler(store, fleet)
    h = lab.hosts
    try:
        store.request_cluster(NAME, framework="lab", min_core=1)
        store.transition_cluster(NAME, ClusterState.DEPLOYING, "bench")
        store.allocate_node(NAME, h[0].name, Role.CORE)
        t = reconcile_until(r, lambda: store.get_cluster(NAME).state == ClusterState.ACTIVE, "the deployment")
        print(f"deployed a 1-core MR-cluster in {t:.1f}s on {len(h)} lab hosts", flush=True)
        for rep in range(args.repeat):
            for k in ks:
                cluster, _ = fleet.spec(NAME)
                new = [fleet.node_spec(x.name, Role.TC) for x in h[1:1 + k]]
                grown = cluster
                for n in new:
                    grown = grown.with_node(n)
                ids: list[int] = []

                def floor() -> dict[str, float]:
                    clean_slate(drv, ex, cluster, new)
                    return floor_start(drv, ex, grown, new)

                def fawkes() -> tuple[float, dict[str, float], float]:
                    clean_slate(drv, ex, cluster, new)
                    ids[:] = [store.allocate_node(NAME, n.name, Role.TC).id for n in new]
                    grows.clear()
                    fa = reconcile_until(r, lambda: all(store.get_node(i).state == NodeState.RUNNING for i in ids),
                                         f"{k} node(s) RUNNING")
                    g = dict(grows[-1].phases) if grows else {}
                    for i in ids:
                        store.transition_node(i, NodeState.DRAINING, "bench: shrink")
                    sh = reconcile_until(r, lambda: all(store.get_node(i).state == NodeState.RELEASED for i in ids),
                                         f"{k} node(s) RELEASED")
                    return fa, g, sh

                if rep % 2 == 0:  # alternate the order, so that a drift of the machine's load cancels out
                    fl = floor()
                    fa, g, sh = fawkes()
                else:
                    fa, g, sh = fawkes()
                    fl = floor()
                runs[k].append({"floor": fl, "grow": {"total": fa, **{f"driver_{p}": v for p, v in g.items()}},
                                "shrink": {"total": sh}})
                # fawkes' own work: everything but the wait for the JVMs to register (floor: its start command)
                own = fa - g.get("register", 0.0)
                runs[k][-1]["grow"]["own"] = own
                print(f"k={k}: floor {fl['total']:6.2f}s | fawkes grow {fa:6.2f}s (driver {g.get('total', 0):.2f}: "
                      f"ssh {g.get('ssh', 0):.2f}, start {g.get('start', 0):.2f}, register {g.get('register', 0):.2f})"
                      f" | fawkes/floor {fa / fl['total']:.2f} | before the JVMs: fawkes {own:.2f}s, floor "
                      f"{fl['start']:.2f}s | shrink DP {sh:6.2f}s"
                      + (f" [run {rep + 1}/{args.repeat}]" if args.repeat > 1 else ""), flush=True)
    finally:
        try:
            spec, _ = fleet.spec(NAME)
            ex.run_each({x.name: Script("if [ -f {s} ]; then /bin/sh {s} wipe; fi",  # the last floor's daemons
                                        s=str(PurePosixPath(spec.cluster_dir(fleet.node_spec(x.name, Role.TC)))
                                              / CONTROL_SCRIPT)) for x in h[1:]}, timeout=60)
            drv.teardown(spec)
        except Exception as exc:  # noqa: BLE001 (the lab goes down anyway; keep the first error)
            print(f"bench: teardown: {exc}", file=sys.stderr)
        finally:
            r.shutdown(10)
            store.close()
            ex.close()
            lab.down()
            tmp.cleanup()

    def med(k: int, what: str) -> float:
        return statistics.median(x[what]["total"] for x in runs[k])

    print(f"\n{'k':>3} {'floor s':>8} {'fawkes s':>9} {'ratio':>6} {'runs':>16}  {'own s':>6} {'floor start s':>13}"
          f"   (medians of {args.repeat}; target ratio <= 1.2)")
    summary = {}
    for k in ks:
        fl, fa = med(k, "floor"), med(k, "grow")
        per = [x["grow"]["total"] / x["floor"]["total"] for x in runs[k]]
        own = statistics.median(x["grow"]["own"] for x in runs[k])
        fst = statistics.median(x["floor"]["start"] for x in runs[k])
        summary[k] = {"floor_s": fl, "fawkes_s": fa, "ratio": fa / fl, "ratios": per, "fawkes_own_s": own,
                      "floor_start_s": fst, "shrink_s": med(k, "shrink")}
        print(f"{k:>3} {fl:8.2f} {fa:9.2f} {fa / fl:6.2f} {' '.join(f'{x:.2f}' for x in per):>16}  {own:6.2f} {fst:13.2f}")
    print("(own: fawkes' time outside the wait for the daemons to register: state, sync, exclude file, "
          "configs, start commands; floor start: the floor's start command)")
    if 1 in runs and 8 in runs:
        print(f"ratio k=8 / k=1: floor {med(8, 'floor') / med(1, 'floor'):.2f}, fawkes grow "
              f"{med(8, 'grow') / med(1, 'grow'):.2f}, shrink {med(8, 'shrink') / med(1, 'shrink'):.2f} "
              "(2k JVMs on this machine's 2 cores)")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    worst = max(v["ratio"] for v in summary.values())
    return 0 if worst <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
