#!/usr/bin/env python3
"""50 DP shrinks in a row of TC nodes holding HDFS data, under a running job: nothing lost.

    python3 bench/bench_dp_shrinks.py [--rounds 50] [--hosts 4] [--cpus 0.5] [--memory 2G] [--out FILE.json]

Brings up its own lab (prefix ``fwfd``, CPU quotas: docs/lab.md) and one MR-cluster of 2 core nodes
(h1: Spark master + NameNode; replication 2), deployed by the reconciler, with a stream of real word
counts kept running on it by the dispatcher (the coordinator's own parts, stepped here).  Two TC hosts
take turns; each round:

1. a TC node is added (allocated REQUESTED, the reconciler grows it: worker + DataNode);
2. a new file is written into HDFS (replication 2) until the TC DataNode holds blocks of it; its
   checksum is recorded;
3. the TC node is marked DRAINING and the reconciler shrinks it by DP (Spark decommission, exclude
   file + refreshNodes, wait for Decommissioned, stop, wipe) until RELEASED;
4. checked: the NameNode's fsck of / is HEALTHY with 0 missing and 0 corrupt blocks, every file
   written so far has its recorded checksum, and a job was running during the DP.

At the end every job that ran succeeded with the exact word counts.  Prints one line per round
(blocks on the node before its DP, DP seconds) and the totals; exit code 1 on any loss.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fault_campaign import saved_counts  # noqa: E402
from bench.results_meta import meta  # noqa: E402
from fawkes.coordinator.dispatch import Dispatcher  # noqa: E402
from fawkes.coordinator.fleet import Fleet  # noqa: E402
from fawkes.coordinator.reconcile import Reconciler  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.render import cluster_ports  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism import ClusterState, Role  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.lifecycle import JobState, NodeState  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "fawkes" / "apps" / "wordcount.py"
OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1", "replication": "2",
           "executor_memory": "512m"}
NAME = "dp"


def run_until(what: str, steps, done, timeout: float, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        for s in steps:
            s()
        v = done()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll)


def fsck(spec) -> str:
    url = f"http://{spec.master.address}:{cluster_ports(spec)['nn_http']}/fsck?ugi=root&path=%2F"
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode(errors="replace")


def count(text: str, label: str) -> int:
    m = re.search(rf"{label}:\s+(\d+)", text)
    return int(m.group(1)) if m else -1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--cpus", default="0.5")
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--prefix", default="fwfd")
    ap.add_argument("--minutes", type=float, default=None, help="start no round after this many minutes")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    info = meta()
    if not 1 <= a.rounds <= 10000 or not 4 <= a.hosts <= 16:
        ap.error("--rounds 1..10000, --hosts 4..16")
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="fawkes-dp-"))
    work.mkdir(parents=True, exist_ok=True)
    d = dists.ensure_lab_dists()
    Lab.cleanup(a.prefix, "10.210.0")
    subnet = next(s for s in [f"10.{n}.0" for n in range(210, 250)] if Lab.subnet_free(s))
    lab = Lab.up(a.hosts, work / "lab", prefix=a.prefix, subnet=subnet, cpus=a.cpus, memory=a.memory)
    store = Store(f"sqlite:///{work / 'state.db'}")
    inv = load_inventory(lab.inventory_path)
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores or 1, "memory_mb": h.memory_mb or 1024}
                      for h in inv.hosts])
    store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    fleet = Fleet(store, inv, cluster_options=OPTIONS)
    rec = Reconciler(store, fleet)
    disp = Dispatcher(store, fleet)
    steps = (rec.step, disp.step)
    text = "\n".join(" ".join(f"w{(i * 7 + j * 3) % 50}" for j in range(10)) for i in range(2000)) + "\n"
    src = work / "input.txt"
    src.write_text(text)
    cores, tcs = [h.name for h in lab.hosts[:2]], [h.name for h in lab.hosts[2:4]]
    print(f"DP shrinks: {a.rounds} rounds, {a.hosts} hosts of {a.cpus} CPU / {a.memory} ({subnet}.0/24), "
          f"work {work}; load {os.getloadavg()[0]:.1f}", flush=True)
    t_start = time.monotonic()
    checksums: dict[str, str] = {}
    lost, rows = [], []
    try:
        store.request_cluster(NAME, framework="lab", min_core=2, input_path=str(src))
        store.transition_cluster(NAME, ClusterState.DEPLOYING, "admitted")
        for h in cores:
            store.allocate_node(NAME, h, Role.CORE)
        run_until("the cluster active", steps, lambda: store.get_cluster(NAME).state == ClusterState.ACTIVE, 600)
        spec, driver = fleet.spec(NAME)
        master = spec.master.name

        def job_running() -> bool:
            live = store.list_jobs(NAME, states=[JobState.QUEUED, JobState.DISPATCHED, JobState.RUNNING])
            if not live:
                store.submit_job(NAME, [str(APP), "{input}", "{output}", "16", "3"], input_path="/input")
            return any(j.state == JobState.RUNNING for j in live)

        for r in range(1, a.rounds + 1):
            if a.minutes and time.monotonic() - t_start > a.minutes * 60:
                print(f"time budget of {a.minutes:g} min used: stopping after {r - 1} rounds", flush=True)
                break
            t0 = time.monotonic()
            tc = tcs[r % 2]
            node = store.allocate_node(NAME, tc, Role.TC)
            run_until(f"round {r}: {tc} running", steps,
                      lambda: store.get_node(node.id).state == NodeState.RUNNING and job_running(), 600)
            spec, driver = fleet.spec(NAME)
            addr = spec.node(tc).address
            path = f"/data/r{r}.txt"
            local = f"{spec.cluster_dir(spec.master)}/tmp/r{r}.txt"
            blocks = 0
            for attempt in range(5):  # replication 2 over 3 DataNodes: a few files land on the TC node
                fleet.ex.run([master], Script("head -c 3000000 /dev/urandom > {f}", f=local))
                p = f"{path}.{attempt}"
                driver.hdfs(spec, "fs", "-mkdir", "-p", "/data")
                driver.hdfs(spec, "fs", "-put", "-f", local, p)
                checksums[p] = driver.hdfs(spec, "fs", "-checksum", p).split()[-1]
                deadline = time.monotonic() + 10  # block reports reach the NameNode within a heartbeat or two
                while not (blocks := driver.datanodes(spec).live[addr].blocks) and time.monotonic() < deadline:
                    time.sleep(0.5)
                if blocks:
                    break
            running = job_running()
            store.transition_node(node.id, NodeState.DRAINING, f"shrink (bench round {r})")
            t1 = time.monotonic()
            run_until(f"round {r}: {tc} released", steps,
                      lambda: store.get_node(node.id).state == NodeState.RELEASED, 900)
            dp_s = time.monotonic() - t1
            report = fsck(spec)
            # HDFS 2.7's summary: "Corrupt blocks: N"; missing ones only in a "MISSING BLOCKS: N" line
            missing, corrupt = max(0, count(report, "MISSING BLOCKS")), count(report, "Corrupt blocks")
            out = driver.hdfs(spec, "fs", "-checksum", *sorted(checksums))
            now = {ln.split()[0]: ln.split()[-1] for ln in out.splitlines() if ln.startswith("/")}  # PATH ALGO SUM
            changed = [p for p, c in checksums.items() if now.get(p) != c]
            healthy = "is HEALTHY" in report
            if not healthy or missing or corrupt or changed or not blocks:
                lost.append({"round": r, "healthy": healthy, "missing": missing, "corrupt": corrupt,
                             "changed": changed, "blocks_on_node": blocks})
            rows.append({"round": r, "host": tc, "blocks": blocks, "job_running": running,
                         "dp_s": round(dp_s, 1), "round_s": round(time.monotonic() - t0, 1)})
            print(f"round {r:>3}: {tc} held {blocks} blocks, job running {running}, DP {dp_s:.1f}s, fsck "
                  f"{'HEALTHY' if healthy else 'NOT HEALTHY'} (missing {missing}, corrupt {corrupt}), "
                  f"{len(checksums)} checksums {'equal' if not changed else f'CHANGED {changed}'}", flush=True)
        run_until("the last job finished", steps, lambda: not store.list_jobs(
            NAME, states=[JobState.QUEUED, JobState.DISPATCHED, JobState.RUNNING]), 1800, 2.0)
        expected = collections.Counter(text.split())
        jobs = store.list_jobs(NAME)
        exact = 0
        for j in jobs:
            got = collections.Counter()
            if j.state == JobState.SUCCEEDED:
                for line in driver.hdfs(spec, "fs", "-cat", f"/output/{j.id}/part-*").splitlines():
                    w, n = line.split("\t")
                    got[w] += int(n)
            exact += got == expected
        store.request_release(NAME)
        run_until("released", steps, lambda: store.get_cluster(NAME).state == ClusterState.RELEASED, 600)
        # the release saved every job's output where teardown cannot reach: its manifest checks, and each
        # succeeded job's counts there are exact (issue 29)
        problem, saved = saved_counts(fleet.ex, store.get_cluster(NAME).saved_output)
        saved_exact = sum(saved.get(j.id) == expected for j in jobs if j.state == JobState.SUCCEEDED)
        print(f"saved output after the release: {problem or 'manifest checks'}; {saved_exact} of "
              f"{len(jobs)} jobs exact there", flush=True)
    finally:
        rec.shutdown(10)
        fleet.close()
        store.close()
        lab.down()
    total = time.monotonic() - t_start
    dps = sorted(x["dp_s"] for x in rows)
    print(f"\n{len(rows)} DP shrinks in {total / 60:.1f} min: node held {min(x['blocks'] for x in rows)}-"
          f"{max(x['blocks'] for x in rows)} blocks, a job running during {sum(x['job_running'] for x in rows)}; "
          f"DP {dps[0]:.1f} / {dps[len(dps) // 2]:.1f} / {dps[-1]:.1f} s (min / median / max); "
          f"rounds with a loss: {len(lost)}; jobs {len(jobs)}, exact {exact}; load {os.getloadavg()[0]:.1f}")
    if a.out:
        Path(a.out).write_text(json.dumps({**info, "rounds": rows, "lost": lost, "jobs": len(jobs), "exact": exact,
                                           "saved_problem": problem, "saved_exact": saved_exact,
                                           "minutes": round(total / 60, 1)}, indent=1))
    return 1 if lost or exact != len(jobs) or problem or saved_exact != len(jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
