"""Real MR-clusters (Spark standalone 4 + HDFS 2.7.3) on the SSH lab: deploy, load, run, grow, shrink.

One scenario, because JVMs are expensive on 2 cores: deploy MR-cluster A on 3 core hosts and a
second MR-cluster B on two other hosts; load an input into A's HDFS; start a real word count on
A (and a small job on B); while A's job runs, grow A by one TR and one TC node (executors appear
on them), write a file through the TC node's DataNode, then shrink the TR by FP and the TC by DP.
A's output must be right, ``fsck`` HEALTHY and the checksums unchanged after DP; B must be
untouched; after teardown no daemon of either cluster is left on any host.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from fawkes.frameworks import dists
from fawkes.frameworks.base import DecommissionInterrupted, DecommissionTimeout, ProgressEvent
from fawkes.frameworks.render import archives
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.ssh.shell import Script
from tests.conftest import cluster_dirs_marker, pids_with_cmdline

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APP = Path(__file__).resolve().parent.parent / "fawkes" / "apps" / "wordcount.py"
#: fast HDFS reactions for a lab (the defaults are Hadoop's production values)
LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}
CAPTURE = os.environ.get("FAWKES_CAPTURE_DIR")  # set to record the daemons' JSON as test fixtures


def framework() -> FrameworkPaths:
    d = dists.ensure_lab_dists()
    return FrameworkPaths("lab", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))


def node(lab, i: int, role: Role) -> NodeSpec:
    h = lab.hosts[i]
    return NodeSpec(h.name, h.address, role, str(lab.node_dir), cores=1, memory_mb=1024)


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def capture(name: str, url: str) -> None:
    if CAPTURE:
        Path(CAPTURE).mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=5) as r:
            (Path(CAPTURE) / name).write_bytes(r.read())


def wait_for(what: str, fn, timeout: float = 60.0, poll: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = fn()
        except (OSError, ValueError, LookupError):  # not up yet / not JSON yet / no app yet
            v = None
        if v:
            return v
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def submit(drv: SparkHdfsDriver, cluster: ClusterSpec, lab, ui_port: int, args: list[str], log: Path,
           app: Path = APP) -> subprocess.Popen:
    """spark-submit ``app`` (client mode, the driver on the controller) to ``cluster``'s master."""
    d = dists.ensure_lab_dists()
    conf = {**drv.submit_conf(cluster), "spark.driver.host": lab.controller_address,
            "spark.driver.bindAddress": lab.controller_address, "spark.ui.port": str(ui_port),
            "spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable,
            "spark.driver.memory": "512m", "spark.executor.memory": "512m",
            "spark.port.maxRetries": "1", "spark.ui.showConsoleProgress": "false"}
    argv = [str(d.spark_home / "bin" / "spark-submit"), "--deploy-mode", "client"]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    argv += [str(app), *args]
    env = {**os.environ, "SPARK_HOME": str(d.spark_home), "SPARK_LOCAL_IP": lab.controller_address,
           "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_CONF_DIR", None)
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def cluster_processes(lab, name: str) -> list[int]:
    """Pids (seen from the root namespace) of any process running from the cluster's directories."""
    return pids_with_cmdline(cluster_dirs_marker(lab, name))


def checksum(drv, cluster, path: str) -> str:
    out = drv.hdfs(cluster, "fs", "-checksum", path)
    return out.split()[-1]


def test_mr_cluster_grow_shrink_under_a_running_job(lab, tmp_path):
    assert len(lab.hosts) >= 7, "the scenario needs 7 lab hosts"
    fw = framework()
    suffix = str(os.getpid() % 10000)
    a = ClusterSpec(f"wca{suffix}", fw, tuple(node(lab, i, Role.CORE) for i in range(3)), options=LAB_OPTIONS)
    # a second cluster beside A, deployed at the same time; its daemons must not see A's (the fault
    # campaign and the mixed pool run several clusters under the coordinator, with jobs)
    b = ClusterSpec(f"wcb{suffix}", fw, (node(lab, 5, Role.CORE),), options=LAB_OPTIONS)
    tr, tc = node(lab, 3, Role.TR), node(lab, 4, Role.TC)
    events: list[ProgressEvent] = []
    lock = threading.Lock()

    def progress(e: ProgressEvent) -> None:
        with lock:
            events.append(e)
        print(f"[{e.cluster} {e.elapsed_s:6.2f}s] {e.step:<11} {e.host or '-':<4} {e.message}", flush=True)

    ex = lab.executor()
    drv = SparkHdfsDriver(ex, progress=progress)
    jobs: list[subprocess.Popen] = []
    try:
        # ---- deploy both clusters (B concurrently with A)
        tb = threading.Thread(target=lambda: drv.deploy(b, timeout=240))
        tb.start()
        a_res = drv.deploy(a, timeout=240)
        tb.join()
        assert drv.health(a).ok, drv.health(a).problems
        hb = drv.health(b)
        assert hb.ok, hb.problems
        drv.deploy(a, timeout=60)  # idempotent: nothing restarts, nothing breaks
        # every daemon started from its installation's class-data archive (fawkes.frameworks.jvm_archive; the
        # lab's, built by dists.ensure_lab_dists), the cluster's conf dir still read (its addresses are bound)
        want = archives(fw, {"jvm_archive_dir": LAB_OPTIONS["jvm_archive_dir"]})
        maps = [(Path(f"/proc/{p}/cmdline").read_bytes(), Path(f"/proc/{p}/maps").read_text())
                for p in cluster_processes(lab, a.name) if Path(f"/proc/{p}/exe").resolve().name == "java"]
        for cls, family in (("deploy.master.Master", "spark_archive"), ("deploy.worker.Worker", "spark_archive"),
                            ("namenode.NameNode", "hdfs_archive"), ("datanode.DataNode", "hdfs_archive")):
            mine = [m for c, m in maps if cls.encode() in c]
            assert mine and all(want[family] in m for m in mine), (cls, want[family], len(mine))
        assert drv.health(a).ok and a_res.phases["total"] > 0
        # the two clusters do not see each other's daemons
        urls_a, urls_b = drv.urls(a), drv.urls(b)
        assert {w["host"] for w in get_json(urls_a["master_ui"] + "/json/")["workers"]} == {n.address for n in a.nodes}
        assert {w["host"] for w in get_json(urls_b["master_ui"] + "/json/")["workers"]} == {n.address for n in b.nodes}

        # ---- input: known word counts; loaded while only core DataNodes exist
        words = [f"w{i % 37}" for i in range(40000)]
        lines = [" ".join(words[i:i + 8]) for i in range(0, len(words), 8)]
        src = tmp_path / "input.txt"
        src.write_text("\n".join(lines) + "\n")
        expected = collections.Counter(words)
        drv.load_input(a, str(src), "/data/input.txt")
        drv.load_input(a, str(src), "/data/input.txt")  # idempotent
        sum_before = checksum(drv, a, "/data/input.txt")

        # ---- a word count on A (slow enough to resize under it)
        job_a = submit(drv, a, lab, 4061, ["/data/input.txt", "/out/wc", "48", "2.5"], tmp_path / "job_a.log")
        jobs.append(job_a)
        driver_a = f"http://{lab.controller_address}:4061"
        app_id = wait_for("job A's application", lambda: get_json(driver_a + "/api/v1/applications")[0]["id"], 240)
        wait_for("job A to run tasks",
                 lambda: any(s["numActiveTasks"] > 0 for s in get_json(f"{driver_a}/api/v1/applications/{app_id}/stages")), 180)
        capture("master_running.json", urls_a["master_ui"] + "/json/")
        capture("driver_stages_running.json", f"{driver_a}/api/v1/applications/{app_id}/stages")
        capture("nn_fsnamesystemstate.json", urls_a["namenode_ui"] + "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState")
        sample = drv.metrics(a, driver_urls=[driver_a], host_stats=True)
        assert sample.master.running_apps == 1 and sample.tasks.running >= 1 and sample.tasks.total >= 48
        assert sample.hdfs.live_datanodes == 3 and sample.hdfs.capacity_total > 0
        assert set(sample.hosts) == {n.name for n in a.nodes} and not sample.errors, sample.errors

        # ---- grow A by one TR and one TC node while the job runs
        grown = drv.add_nodes(a, [tr, tc], timeout=120)
        a = grown.cluster
        assert {"ssh", "start", "register"} <= set(grown.phases)
        executors_on = lambda: {e["hostPort"].rsplit(":", 1)[0]
                                for e in get_json(f"{driver_a}/api/v1/applications/{app_id}/executors")}
        wait_for("executors on the new TR and TC nodes", lambda: {tr.address, tc.address} <= executors_on(), 180)
        assert drv.add_nodes(a, [tr, tc], timeout=60).cluster == a  # idempotent
        # where the job's tasks ended, per node (the twin's master factor: the driver's /allexecutors)
        ended_on = lambda: {n: v for n, v in drv.metrics(a, driver_urls=[driver_a]).task_time_by_job.get(
            app_id, {}).items() if v[0] > 0}
        where = wait_for("tasks ended on the grown TR and TC nodes", lambda: (
            w if {tr.name, tc.name, a.master.name} <= set(w := ended_on()) else None), 180, poll=1.0)
        assert set(where) <= {n.name for n in a.nodes} and all(secs > 0 for _, secs in where.values()), where
        # the TC DataNode joined after the load: it holds none of the input
        tc_dn = drv.datanodes(a).live[tc.address]
        assert tc_dn.admin_state == "In Service"
        # write a file through the TC node (first replica lands on its own DataNode): DP must save it
        tc_file = tmp_path / "tc-output.txt"
        tc_file.write_text("output written on a transient-core node\n" * 200000)
        ctl = f"{a.cluster_dir(tc)}/bin/fawkes-daemon.sh"
        r = ex.run(tc.name, Script("/bin/sh {c} hdfs org.apache.hadoop.fs.FsShell -put -f {s} /data/tc-output.txt",
                                   c=ctl, s=str(tc_file)), timeout=120)[tc.name]
        assert r.ok, r.error
        wait_for("the TC DataNode to report its blocks", lambda: drv.datanodes(a).live[tc.address].blocks > 0, 30)
        sum_tc = checksum(drv, a, "/data/tc-output.txt")

        # ---- shrink while the job still runs: TR by FP, TC by DP
        assert any(x["id"] == app_id and x["state"] == "RUNNING"
                   for x in get_json(urls_a["master_ui"] + "/json/")["activeapps"]), "job A ended before the shrink"
        a = drv.remove_nodes(a, [tr.name], ShrinkMode.FP).cluster
        n_before = len(events)
        dp_thread_done = threading.Event()

        def capture_during_dp():
            while not dp_thread_done.is_set():
                info = get_json(urls_a["namenode_ui"] + "/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")
                if '"Decommission In Progress"' in info["beans"][0]["LiveNodes"] or \
                        '"Decommissioned"' in info["beans"][0]["LiveNodes"]:
                    capture("nn_nameNodeInfo_decommissioning.json",
                            urls_a["namenode_ui"] + "/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo")
                    capture("master_decommissioned.json", urls_a["master_ui"] + "/json/")
                    return
                time.sleep(0.1)

        cap = threading.Thread(target=capture_during_dp)
        cap.start()
        dp = drv.remove_nodes(a, [tc.name], timeout=180)
        dp_thread_done.set()
        cap.join()
        a = dp.cluster
        assert [n.name for n in a.nodes] == [n.name for n in a.nodes if n.role is Role.CORE]
        dp_events = [e.message for e in events[n_before:] if e.step == "dp"]
        assert any("Decommissioned" in m for m in dp_events), dp_events  # stopped only after this
        assert "hdfs_decommission" in dp.phases
        info = drv.datanodes(a)
        assert tc.address not in info.live or info.live[tc.address].admin_state == "Decommissioned"
        assert drv.remove_nodes(a, [tc.name]).hosts == ()  # idempotent: already gone
        capture("driver_allexecutors.json", f"{driver_a}/api/v1/applications/{app_id}/allexecutors")

        # ---- the job finishes with the right answer
        assert job_a.wait(timeout=300) == 0, (tmp_path / "job_a.log").read_text()[-3000:]
        capture("master_completed.json", urls_a["master_ui"] + "/json/")
        got = collections.Counter()
        for ln in drv.hdfs(a, "fs", "-cat", "/out/wc/part-*").splitlines():
            w, c = ln.split("\t")
            got[w] += int(c)
        assert got == expected
        # ---- nothing lost: fsck HEALTHY, checksums unchanged after DP
        fsck = drv.hdfs(a, "fsck", "/")
        assert "is HEALTHY" in fsck, fsck[-2000:]
        assert checksum(drv, a, "/data/input.txt") == sum_before
        assert checksum(drv, a, "/data/tc-output.txt") == sum_tc
        # B was not disturbed
        hb = drv.health(b)
        assert hb.ok, hb.problems
        assert {w["host"] for w in get_json(urls_b["master_ui"] + "/json/")["workers"] if w["state"] == "ALIVE"} \
            == {n.address for n in b.nodes}
    finally:
        for j in jobs:
            if j.poll() is None:
                j.kill()
                j.wait()
        for c in (a, b):
            drv.teardown(c.with_node(tr).with_node(tc) if c is a else c)
        ex.close()
    for c in (a, b):
        left = cluster_processes(lab, c.name)
        assert not left, f"daemons left after teardown of {c.name}: {left}"
    drv2 = SparkHdfsDriver(lab.executor())
    drv2.teardown(b)  # idempotent on a torn-down cluster
    drv2.ex.close()


def test_reconfigure_restarts_only_what_changed(lab):
    """A changed inventory or option re-renders, and restarts only the daemons whose configs changed."""
    from dataclasses import replace

    fw = framework()
    c = ClusterSpec(f"rc{os.getpid() % 10000}", fw, (node(lab, 7, Role.CORE),), options=LAB_OPTIONS)
    ex = lab.executor()
    drv = SparkHdfsDriver(ex)
    h = c.nodes[0]

    def pids() -> dict[str, str]:
        out = ex.run(h.name, Script("cat {d}/pids/namenode.pid {d}/pids/datanode.pid {d}/pids/master.pid "
                                    "{d}/pids/worker.pid", d=c.cluster_dir(h)))[h.name].stdout.split()
        return dict(zip(["namenode", "datanode", "master", "worker"], out))

    try:
        drv.deploy(c, timeout=180)
        assert drv.reconfigure(c) == {}  # nothing changed: nothing restarts
        p0 = pids()
        # an HDFS tunable: NameNode and DataNode restart, Spark daemons keep running
        c = replace(c, options={**LAB_OPTIONS, "decommission_interval_s": "2"})
        assert drv.reconfigure(c) == {h.name: ["namenode", "datanode"]}
        p1 = pids()
        assert p1["master"] == p0["master"] and p1["worker"] == p0["worker"]
        assert p1["namenode"] != p0["namenode"] and p1["datanode"] != p0["datanode"]
        # the host's cores change in the inventory: only the Spark daemons restart, with 2 cores
        c = replace(c, nodes=(replace(h, cores=2),))
        assert drv.reconfigure(c) == {h.name: ["master", "worker"]}
        p2 = pids()
        assert p2["namenode"] == p1["namenode"] and p2["worker"] != p1["worker"]
        assert drv.master_state(c).cores == 2
        assert drv.health(c).ok
    finally:
        drv.teardown(c)
        ex.close()
    assert not cluster_processes(lab, c.name)


def test_dp_that_cannot_finish_stops_nothing_and_can_be_taken_back(lab, tmp_path):
    """A TC node holds the only replica of a file and the only other DataNode does not answer
    (SIGSTOP): HDFS can never finish decommissioning it.  A timeout and a cancelled wait both leave
    its DataNode running and decommissioning; ``recommission`` puts it back In Service with its
    worker ALIVE; the file is intact."""
    fw = framework()
    c = ClusterSpec(f"dp{os.getpid() % 10000}", fw, (node(lab, 5, Role.CORE),), options=LAB_OPTIONS)
    core, tc = c.nodes[0], node(lab, 6, Role.TC)
    ex = lab.executor()
    drv = SparkHdfsDriver(ex)
    try:
        drv.deploy(c, timeout=180)
        c = drv.add_nodes(c, [tc], timeout=120).cluster
        src = tmp_path / "tc-only.txt"
        src.write_text("a block only the transient-core node holds\n" * 50000)
        r = ex.run(tc.name, Script("/bin/sh {c} hdfs org.apache.hadoop.fs.FsShell -put -f {s} /tc-only.txt",
                                   c=f"{c.cluster_dir(tc)}/bin/fawkes-daemon.sh", s=str(src)), timeout=120)[tc.name]
        assert r.ok, r.error  # replication 1 (one core node): the writer's own DataNode holds the block
        wait_for("the block on the TC DataNode", lambda: drv.datanodes(c).live[tc.address].blocks > 0, 30)
        assert drv.datanodes(c).live[core.address].blocks == 0
        before = checksum(drv, c, "/tc-only.txt")
        assert ex.run(core.name, Script("kill -STOP $(cat {d}/pids/datanode.pid)", d=c.cluster_dir(core)))[core.name].ok

        def still_decommissioning():
            assert drv.health(c).daemons[tc.name]["datanode"], "DataNode stopped before Decommissioned"
            assert drv.datanodes(c).live[tc.address].admin_state == "Decommission In Progress"

        with pytest.raises(DecommissionTimeout, match="nothing was stopped"):
            drv.remove_nodes(c, [tc.name], timeout=8)
        still_decommissioning()
        cancel = threading.Event()
        threading.Timer(2.0, cancel.set).start()
        t0 = time.monotonic()
        with pytest.raises(DecommissionInterrupted, match="nothing was stopped"):
            drv.remove_nodes(c, [tc.name], timeout=300, cancel=cancel)
        assert time.monotonic() - t0 < 60  # the wait ended on the cancel, not on the timeout
        still_decommissioning()

        back = drv.recommission(c, [tc.name], timeout=120)
        assert back.hosts == (tc.name,)
        assert drv.datanodes(c).live[tc.address].admin_state == "In Service"
        assert tc.address in drv.master_state(c).workers_by_host("ALIVE")
        exclude = ex.run(c.master.name, Script("cat {f}", f=drv._exclude_path(c)))[c.master.name].stdout
        assert tc.address not in exclude
        assert drv.recommission(c, [tc.name]).hosts == ()  # idempotent: nothing is decommissioning
    finally:
        ex.run(core.name, Script("kill -CONT $(cat {d}/pids/datanode.pid) 2>/dev/null || true", d=c.cluster_dir(core)))
    try:
        wait_for("the core DataNode back", lambda: drv.health(c).ok, 60)
        assert checksum(drv, c, "/tc-only.txt") == before
        assert drv.datanodes(c).live[tc.address].admin_state == "In Service"  # nothing moved it since
    finally:
        drv.teardown(c)
        ex.close()
    assert not cluster_processes(lab, c.name)
