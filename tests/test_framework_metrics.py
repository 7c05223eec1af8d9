"""Metric parsers over JSON captured from real daemons (Spark 4.3 master and driver, HDFS 2.7.3 NameNode).

The fixtures in tests/fixtures/metrics were recorded by tests/test_spark_hdfs_lab.py with
FAWKES_CAPTURE_DIR set, during its word count: 3 core workers running, then a TR node stopped
(DEAD) and a TC node decommissioned (DECOMMISSIONED, DataNode "Decommission In Progress").
"""

from __future__ import annotations

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


def test_a_drivers_application_id_is_asked_once_and_asked_again_for_a_new_driver():
    """A sample asks a running driver only ``/stages`` once its application id is known; a driver that no
    longer serves that id (the job ended, another driver took the port) is asked for its ids again."""
    import http.server
    import threading

    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver

    stages = load("driver_stages_running.json").encode()
    state = {"app": "app-1", "asked": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            state["asked"].append(self.path)
            if self.path == "/api/v1/applications":
                body = json.dumps([{"id": state["app"], "name": "wc"}] if state["app"] else []).encode()
            elif self.path == f"/api/v1/applications/{state['app']}/stages":
                body = stages
            else:
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
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        drv = SparkHdfsDriver(None)
        want = M.parse_stages(stages)
        assert drv._driver_stages(base) == {"app-1": want}
        assert drv._driver_stages(base) == {"app-1": want}
        assert state["asked"] == ["/api/v1/applications", "/api/v1/applications/app-1/stages",
                                  "/api/v1/applications/app-1/stages"]
        state["app"], state["asked"] = "app-2", []  # another driver on the same port
        assert drv._driver_stages(base) == {"app-2": want}
        assert state["asked"] == ["/api/v1/applications/app-1/stages", "/api/v1/applications",
                                  "/api/v1/applications/app-2/stages"]
        # a driver with no application yet: nothing kept, so it is asked for its ids again next time
        state["app"], state["asked"] = None, []
        assert drv._driver_stages(base) == {} and drv._driver_stages(base) == {}
        assert state["asked"] == ["/api/v1/applications/app-2/stages", "/api/v1/applications", "/api/v1/applications"]
        with pytest.raises(FawkesError):  # no driver there
            drv._driver_stages(base + "/nothing")
    finally:
        srv.shutdown()
        srv.server_close()
