#!/usr/bin/env python3
"""Benchmark: a streaming Flink job in reactive mode, rescaled by fawkes' grow and shrink (kind flink-hdfs).

A private lab of 2 hosts (``--cpus``, ``--memory`` each).  A flink-hdfs MR-cluster on h1 is deployed through
the driver; its JobManager then runs in application mode with the adaptive scheduler in reactive mode
(``standalone-job.sh start-foreground --job-classname fawkes.apps.FlinkCounter``, checkpoints every 2 s in
the cluster's HDFS), the job writing the numbers 0 .. COUNT-1 through an exactly-once file sink.  While it
runs, fawkes grows the cluster by a transient node (``add_nodes``: a TaskManager joins, reactive mode
rescales the job up from its last checkpoint) and later removes it by FP (``remove_nodes``: the TaskManager
stops, the job restarts at the lower parallelism from its last checkpoint).  Measured, from the JobManager's
REST API polled every 0.1 s:

  rescale pause: from the job leaving RUNNING (a restart begins) until the last of its tasks is RUNNING
                 again, from the JobManager's own timestamps;
  time to rescale: from the grow's (or shrink's) start until the job runs at the new parallelism.

At the end every number must appear exactly once in the committed output (``hdfs dfs -cat /out/part-*``):
nothing lost and nothing counted twice across the restarts.  Prints and writes (``--json``) the figures with
command, commit, date and load.  The hosts share this machine's cores: a pause depends on the quota.

usage: bench/bench_flink_rescale.py [--count 40000] [--rate 200] [--cpus 0.5] [--memory 2G]
                                    [--dir /tmp/fawkes-bench-flink-rescale] [--prefix fwfr] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.errors import FawkesError  # noqa: E402
from fawkes.frameworks import dists  # noqa: E402
from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver  # noqa: E402
from fawkes.frameworks.registry import node_spec  # noqa: E402
from fawkes.frameworks.render import CONTROL_SCRIPT  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.lab import Lab  # noqa: E402
from fawkes.mechanism.model import Role, ShrinkMode  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402

OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1", "replication": "1",
           "worker_timeout_s": "20"}  # flink_rescale_wait_s: the kind's default (5 s)


def job_view(drv: FlinkHdfsDriver, cluster: ClusterSpec) -> tuple[str | None, str, int, bool]:
    """(job id, state, parallelism of its vertices (the smallest), every task RUNNING)."""
    jobs = drv.rest(cluster, "/jobs/overview").get("jobs", [])
    if not jobs:
        return None, "NONE", 0, False
    j = jobs[0]
    d = drv.rest(cluster, f"/jobs/{j['jid']}")
    vs = d.get("vertices", [])
    par = min((int(v.get("parallelism", 0)) for v in vs), default=0)
    running = bool(vs) and all(v.get("status") == "RUNNING" for v in vs) and d.get("state") == "RUNNING"
    return j["jid"], str(d.get("state")), par, running


_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def pauses(log: str) -> list[float]:
    """Every restart's pause in the JobManager's log: from the job leaving RUNNING (``switched from state
    RUNNING to CANCELLING / RESTARTING / FAILING``) until the last of its tasks switched to RUNNING again
    (before the job's next change of state)."""
    out, left, back = [], None, None
    for line in log.splitlines():
        m = _TS.match(line)
        if not m:
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if re.search(r"\) switched from state RUNNING to (CANCELLING|RESTARTING|FAILING)", line):
            if left is not None and back is not None:
                out.append(round(back - left, 2))
            left, back = t, None
        elif left is not None and "switched from INITIALIZING to RUNNING" in line:
            back = t
        elif left is not None and "switched from state RUNNING to FINISHED" in line:
            break
    if left is not None and back is not None:
        out.append(round(back - left, 2))
    return out


def watch_rescale(drv, cluster, jid: str, want: int, start: float, timeout: float = 300.0) -> dict:
    """Poll until the job runs at parallelism ``want`` with every task RUNNING: the time to rescale
    (from ``start``); the pause comes from the JobManager's log at the end (:func:`pauses`)."""
    while time.monotonic() - start < timeout:
        try:
            _, state, par, running = job_view(drv, cluster)
        except FawkesError:
            state, par, running = "?", 0, False
        if state in ("FINISHED", "FAILED", "CANCELED"):
            raise SystemExit(f"the job ended ({state}) before it ran at parallelism {want}: make it longer (--count)")
        if running and par == want:
            return {"time_to_rescale_s": round(time.monotonic() - start, 2), "parallelism": want}
        time.sleep(0.1)
    raise SystemExit(f"the job did not run at parallelism {want} within {timeout:g}s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=40000)
    ap.add_argument("--rate", type=float, default=200.0, help="records a second per task")
    ap.add_argument("--cpus", default="0.5")
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--dir", default="/tmp/fawkes-bench-flink-rescale")
    ap.add_argument("--prefix", default="fwfr")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if not 1 <= a.count <= 10**7 or not 0 < a.rate <= 10**5:
        raise SystemExit("--count: 1..1e7, --rate: 0..1e5")
    d = dists.ensure_lab_dists()
    lab = Lab.up_free(2, Path(a.dir), prefix=a.prefix, nets=range(240, 250), cpus=a.cpus, memory=a.memory)
    inv = load_inventory(lab.inventory_path)
    core, tr = node_spec(inv.host("h1"), Role.CORE), node_spec(inv.host("h2"), Role.TR)
    fw = FrameworkPaths("b", "flink-hdfs", flink_home=str(d.flink_home), hdfs_jars=str(d.hdfs_home))
    cluster = ClusterSpec("reactive", fw, (core,), options=OPTIONS)
    out: dict = {"meta": {**meta(), "host_quota": {"cpus": a.cpus, "memory": a.memory},
                          "count": a.count, "rate_per_task": a.rate}}
    try:
        with lab.executor(command_timeout=300) as ex:
            drv = FlinkHdfsDriver(ex, poll_s=0.1)
            drv.deploy(cluster, timeout=300)
            nn = drv.hdfs_urls(cluster)["namenode"]
            cdir = cluster.cluster_dir(core)
            ctl = f"{cdir}/{CONTROL_SCRIPT}"
            # the session JobManager and its TaskManager make way for the application-mode JobManager
            ex.run([core.name], Script("/bin/sh {c} stop taskmanager && /bin/sh {c} stop jobmanager", c=ctl), timeout=120)
            app = Script(
                "cd {d} && (set -a; . conf/flink-env.sh; set +a; mkdir -p \"$FLINK_PID_DIR\"; "
                "nohup \"$FLINK_HOME/bin/standalone-job.sh\" start-foreground --job-classname fawkes.apps.FlinkCounter "
                "--jars {jar} -Dscheduler-mode=reactive -Dexecution.checkpointing.interval=2s "
                "-Dexecution.checkpointing.dir={ck} {outdir} {count} {rate} > logs/application.out 2>&1 < /dev/null &)",
                d=cdir, jar=f"file://{d.flink_apps}", ck=f"{nn}/checkpoints", outdir=f"{nn}/out", count=str(a.count),
                rate=f"{a.rate:g}")
            r = ex.run([core.name], app, timeout=60)[core.name]
            if not r.ok:
                raise SystemExit(f"starting the application JobManager failed: {r.error}")
            ex.run([core.name], Script("/bin/sh {c} start taskmanager", c=ctl), timeout=60)
            t = time.monotonic()
            while time.monotonic() - t < 300:
                try:
                    jid, state, par, running = job_view(drv, cluster)
                    if running and par == 1:
                        break
                except FawkesError:
                    pass
                time.sleep(0.2)
            else:
                raise SystemExit("the reactive job did not start")
            print(f"job {jid} running at parallelism 1 (load {os.getloadavg()[0]:.1f})", flush=True)
            time.sleep(10)
            t = time.monotonic()
            grown = drv.add_nodes(cluster, [tr], timeout=300).cluster
            registered = round(time.monotonic() - t, 2)
            up = watch_rescale(drv, cluster, jid, 2, t)
            up.update(load=round(os.getloadavg()[0], 2), taskmanager_registered_s=registered)
            print(f"grow: TaskManager registered in {registered}s, job at parallelism 2 after "
                  f"{up['time_to_rescale_s']}s", flush=True)
            time.sleep(10)
            t = time.monotonic()
            drv.remove_nodes(grown, [tr.name], ShrinkMode.FP, timeout=300)
            down = watch_rescale(drv, cluster, jid, 1, t)
            down["load"] = round(os.getloadavg()[0], 2)
            print(f"shrink (FP): job at parallelism 1 after {down['time_to_rescale_s']}s", flush=True)
            t = time.monotonic()
            state = "?"
            while time.monotonic() - t < 900:
                try:
                    _, state, _, _ = job_view(drv, cluster)
                except FawkesError:
                    state = "GONE"  # application mode: the JobManager exits once its job has ended
                if state in ("FINISHED", "FAILED", "CANCELED", "GONE"):
                    break
                time.sleep(1)
            log = ex.run([core.name], Script("cat {d}/logs/flink-*-standalonejob-*.log", d=cdir),
                         timeout=60)[core.name].stdout
            if "switched from state RUNNING to FINISHED" not in log:
                raise SystemExit(f"the job did not finish ({state}); see {cdir}/logs on {core.name}")
            ps = pauses(log)
            if len(ps) >= 2:
                up["pause_s"], down["pause_s"] = ps[-2], ps[-1]
            print(f"pauses (job left RUNNING until every task RUNNING again, the JobManager's log): {ps}", flush=True)
            text = drv.hdfs(cluster, "fs", "-cat", "/out/part-*", timeout=300)
            nums = [int(x) for x in text.split()]
            seen = set(nums)
            lost, twice = a.count - len(seen & set(range(a.count))), len(nums) - len(seen)
            print(f"output: {len(nums)} lines, {lost} number(s) lost, {twice} written twice", flush=True)
            out.update(grow=up, shrink=down, lines=len(nums), lost=lost, duplicated=twice)
            drv.teardown(grown)
    finally:
        lab.down()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0 if out.get("lost") == 0 and out.get("duplicated") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
