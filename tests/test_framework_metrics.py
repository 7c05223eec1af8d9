"""Metric parsers over JSON captured from real daemons (Spark 4.3 master and driver, HDFS 2.7.3 NameNode).

The fixtures in tests/fixtures/metrics were recorded by tests/test_spark_hdfs_lab.py with
FAWKES_CAPTURE_DIR set, during its word count: 3 core workers running, then a TR node stopped
(DEAD) and a TC node decommissioned (DECOMMISSIONED, DataNode "Decommission In Progress");
driver_allexecutors.json (2026-11-28) after both left, the job still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M

FIX = Path(__file__).parent / "fixtures" / "metrics"


def load(name: str) -> str:
    return (FIX / name).read_text()


def test_master_running():
    m = M.parse_master_json(load("master_running.json"))
    assert m.status == "ALIVE"
    assert m.alive_workers == 3 and m.cores == 3 and m.cores_used == 3  # PU = 1.0
    assert m.running_apps == 1 and m.waiting_apps == 0  # JD = 1
    assert m.active_apps[0].cores == 3 and m.active_apps[0].start_ms > 0
    assert len(m.workers_by_host("ALIVE")) == 3


def test_master_after_fp_and_dp():
    m = M.parse_master_json(load("master_decommissioned.json"))
    states = {w.host: w.state for w in m.workers}
    assert sorted(states.values()) == ["ALIVE", "ALIVE", "ALIVE", "DEAD", "DECOMMISSIONED"]
    # the master counts only ALIVE workers in its totals; DEAD ones linger in the list
    assert m.alive_workers == 3 and m.cores == 3
    assert len(m.workers_by_host("ALIVE")) == 3 and len(m.workers_by_host(None)) == 5


def test_master_completed():
    m = M.parse_master_json(load("master_completed.json"))
    assert m.active_apps == () and len(m.completed_apps) == 1  # JT: one job completed
    assert m.completed_apps[0].state == "FINISHED" and m.cores_used == 0


def test_driver_stages():
    t = M.parse_stages(load("driver_stages_running.json"))
    raw = json.loads(load("driver_stages_running.json"))
    live = [s for s in raw if s["status"] in ("ACTIVE", "PENDING")]
    assert t.total == sum(s["numTasks"] for s in live)
    assert t.running == sum(s["numActiveTasks"] for s in live) >= 1
    assert t.pending == t.total - t.running - sum(s["numCompleteTasks"] for s in live)
    assert t.active_stages >= 1 and t.pending_stages >= 1  # the word count's map and reduce stages
    assert (t + t).total == 2 * t.total and M.sum_tasks([t, t]).running == 2 * t.running


def test_driver_stages_count_a_retried_stage_once_as_the_jobs_tasks():
    """A shrink lost shuffle output: Spark runs the stage again as a new attempt with the tasks it lost.
    Completed counts every attempt's (the work done), distinct each stage once by its first attempt (the
    job's own tasks); a skipped stage (output an earlier job left) is none of them."""
    raw = json.loads(load("driver_stages_running.json"))[0]

    def stage(sid, attempt, status, num, active=0, complete=0):
        return {**raw, "stageId": sid, "attemptId": attempt, "status": status, "numTasks": num,
                "numActiveTasks": active, "numCompleteTasks": complete}

    doc = [stage(0, 0, "COMPLETE", 1, complete=1), stage(1, 0, "FAILED", 12, complete=12),
           stage(1, 1, "ACTIVE", 3, active=2, complete=1), stage(2, 0, "PENDING", 2), stage(3, 0, "SKIPPED", 4)]
    t = M.parse_stages(json.dumps(doc))
    assert (t.completed, t.running, t.pending, t.total) == (1 + 12 + 1, 2, 2, 3 + 2)
    assert t.distinct == 1 + 12 + 2
    assert M.parse_stages(load("driver_stages_running.json")).distinct == sum(
        s["numTasks"] for s in json.loads(load("driver_stages_running.json")) if s["status"] != "SKIPPED")


def test_fsnamesystem_state():
    h = M.parse_fsnamesystem_state(load("nn_fsnamesystemstate.json"))
    assert h.fs_state == "Operational" and h.live_datanodes == 3 and h.dead_datanodes == 0
    assert h.capacity_total > h.capacity_used > 0 and h.decommissioning == 0


def test_namenode_info_during_decommission():
    info = M.parse_namenode_info(load("nn_nameNodeInfo_decommissioning.json"))
    assert not info.safemode
    states = {a: d.admin_state for a, d in info.live.items()}
    assert list(states.values()).count("Decommission In Progress") == 1
    assert list(states.values()).count("In Service") == 3
    tc = next(a for a, s in states.items() if s == "Decommission In Progress")
    assert info.decommissioning == (tc,)
    assert info.live[tc].used > 0 and info.live[tc].blocks > 0  # the TC node held output blocks
    assert info.live[tc].key == f"{tc}:50010"


def test_host_stats_from_this_machine(tmp_path):
    """The same script the driver runs over SSH, run here on the real /proc/stat and df."""
    from fawkes.ssh.shell import Script

    script = str(Script(M.HOST_STATS_SCRIPT.replace("{interval}", "0.2"), path=str(tmp_path)))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    s = M.parse_host_stats(out)
    assert 0.0 <= s.cpu_busy <= 1.0
    st = os.statvfs(tmp_path)
    assert s.disk_total == pytest.approx(st.f_blocks * st.f_frsize, rel=0.01)
    assert 0 < s.disk_used <= s.disk_total


def test_bad_documents_are_one_line_errors():
    with pytest.raises(FawkesError, match="not JSON"):
        M.parse_master_json("<html>")
    with pytest.raises(FawkesError, match="no 'workers'"):
        M.parse_master_json("{}")
    with pytest.raises(FawkesError, match="NameNodeInfo"):
        M.parse_namenode_info(load("nn_fsnamesystemstate.json"))
    with pytest.raises(FawkesError, match="host stats"):
        M.parse_host_stats("nothing")


@contextlib.contextmanager
def driver_api(answer):
    """A stand-in driver REST API on 127.0.0.1: ``answer(path)`` gives a GET's body (bytes) or None (404);
    yields the base URL and the list of paths asked, in order."""
    import http.server
    import threading

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            asked.append(self.path)
            body = answer(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", asked
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_drivers_application_id_is_asked_once_and_asked_again_for_a_new_driver():
    """A sample asks a running driver only ``/stages`` once its application id is known; a driver that no
    longer serves that id (the job ended, another driver took the port) is asked for its ids again."""
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver

    stages = load("driver_stages_running.json").encode()
    state = {"app": "app-1"}

    def answer(path: str) -> bytes | None:
        if path == "/api/v1/applications":
            return json.dumps([{"id": state["app"], "name": "wc"}] if state["app"] else []).encode()
        return stages if path == f"/api/v1/applications/{state['app']}/stages" else None

    with driver_api(answer) as (base, asked):
        drv = SparkHdfsDriver(None)
        want = M.parse_stages(stages)
        assert drv._driver_stages(base) == {"app-1": want}
        assert drv._driver_stages(base) == {"app-1": want}
        assert asked == ["/api/v1/applications", "/api/v1/applications/app-1/stages",
                         "/api/v1/applications/app-1/stages"]
        state["app"] = "app-2"  # another driver on the same port
        asked.clear()
        assert drv._driver_stages(base) == {"app-2": want}
        assert asked == ["/api/v1/applications/app-1/stages", "/api/v1/applications",
                         "/api/v1/applications/app-2/stages"]
        # a driver with no application yet: nothing kept, so it is asked for its ids again next time
        state["app"] = None
        asked.clear()
        assert drv._driver_stages(base) == {} and drv._driver_stages(base) == {}
        assert asked == ["/api/v1/applications/app-2/stages", "/api/v1/applications", "/api/v1/applications"]
        with pytest.raises(FawkesError):  # no driver there
            drv._driver_stages(base + "/nothing")


def test_where_a_jobs_tasks_ended_per_executor_host():
    """The driver's /allexecutors after the grow and the shrink (tests/test_spark_hdfs_lab.py): the removed
    TR and TC nodes' executors (isActive false) still count, their tasks killed by the removal among the
    ended ones; the driver's own entry (its JVM's time, no task) is left out.  On the lab the core node
    that also ran the Spark master and the NameNode took ~2 s per task, the others ~1.1 s."""
    got = M.parse_executors(load("driver_allexecutors.json"))
    assert got == {"10.201.0.11": (14, 28.801), "10.201.0.12": (26, 29.159), "10.201.0.13": (26, 28.575),
                   "10.201.0.14": (3, 4.966), "10.201.0.15": (3, 7.274)}
    assert "10.201.0.1" not in got  # the driver
    # two executors of one application on one host are summed; malformed entries are skipped
    doc = [{"id": "1", "hostPort": "10.0.0.1:1", "completedTasks": 2, "failedTasks": 0, "totalDuration": 3000},
           {"id": "2", "hostPort": "10.0.0.1:2", "completedTasks": 1, "failedTasks": 1, "totalDuration": 500},
           {"id": "3", "hostPort": "10.0.0.2:1", "completedTasks": "x", "totalDuration": 1},
           {"id": "4", "hostPort": "10.0.0.3:1", "completedTasks": 1, "totalDuration": float("nan")},
           {"id": "5", "hostPort": "", "completedTasks": 1, "totalDuration": 1}, "not an executor"]
    assert M.parse_executors(json.dumps(doc)) == {"10.0.0.1": (4, 3.5)}
    with pytest.raises(FawkesError, match="expected a list of executors"):
        M.parse_executors("{}")


def test_a_drivers_executors_are_asked_only_when_its_ended_or_running_tasks_moved():
    """``/allexecutors`` is asked at the first sample of an application and again only when the same
    sample's ``/stages`` count of ended or of running tasks changed: about once per task, not once per
    sample; the sample maps executor addresses to node names."""
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver

    execs = load("driver_allexecutors.json").encode()
    want = M.parse_executors(execs), M.parse_active_tasks(execs)
    with driver_api(lambda path: execs if path == "/api/v1/applications/app-1/allexecutors" else None) as (base, asked):
        drv = SparkHdfsDriver(None)
        for completed, run in ((5, 2), (5, 2), (5, 2), (6, 2), (6, 2), (6, 1)):
            assert drv._driver_executors(base, "app-1", M.TaskCounts(completed=completed, failed=1, running=run)) == want
        assert len(asked) == 3  # at 5 ended (+1 failed), at 6, and when a running task ended without a new one
        with pytest.raises(FawkesError):
            drv._driver_executors(base, "app-2", M.TaskCounts(completed=1))
    s = M.spark_hdfs_sample(0.0, None, None, None, {}, node_of={"10.201.0.11": "h1", "10.201.0.12": "h2"},
                            task_time={"app-1": want[0], "app-2": {"10.9.9.9": (1, 1.0)}},
                            running={"app-1": {"10.201.0.11": 2, "10.201.0.12": 1}, "app-2": {"10.201.0.11": 1,
                                                                                            "10.9.9.9": 3}})
    assert s.task_time_by_job == {"app-1": {"h1": (14, 28.801), "h2": (26, 29.159)}}  # unknown addresses out
    assert s.running_by_node == {"h1": 3, "h2": 1}  # summed over the applications, per node
    assert M.spark_hdfs_sample(0.0, None, None, None, {}).running_by_node is None  # not read: not known


def test_what_runs_on_each_executor_host_now():
    """``activeTasks`` of the live executors per host (two on one host summed); removed executors (``isActive``
    false), the driver and malformed counts left out."""
    doc = [{"id": "driver", "hostPort": "10.0.0.9:1", "activeTasks": 0, "isActive": True},
           {"id": "1", "hostPort": "10.0.0.1:1", "activeTasks": 2, "isActive": True},
           {"id": "2", "hostPort": "10.0.0.1:2", "activeTasks": 1, "isActive": True},
           {"id": "3", "hostPort": "10.0.0.2:1", "activeTasks": 4, "isActive": False},
           {"id": "4", "hostPort": "10.0.0.3:1", "activeTasks": -1},
           {"id": "5", "hostPort": "10.0.0.4:1", "activeTasks": "2"},
           {"id": "6", "hostPort": "10.0.0.5:1", "activeTasks": True},
           {"id": "7", "hostPort": "10.0.0.6:1", "activeTasks": 0, "isActive": True}, "not an executor"]
    assert M.parse_active_tasks(json.dumps(doc)) == {"10.0.0.1": 3, "10.0.0.6": 0}
    with pytest.raises(FawkesError, match="expected a list of executors"):
        M.parse_active_tasks("{}")
