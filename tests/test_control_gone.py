"""A removal's last step (``ControlScriptDriver._gone``) when the master keeps listing a removed worker.

The spark-hdfs control script is rendered for real into a host directory here and run with ``sh``
exactly as it runs over SSH; the "worker" is a real process whose command line names Spark's worker
class (what the script's ``pid_of`` checks).  The master's registration is a function of the test: a
real master drops a stopped worker when its connection closes, or at its own heartbeat timeout when it
missed that (the clean-clone CI of f4c742f saw a removed node's worker listed ALIVE for over 120 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks.base import ProgressEvent
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role
from tests.local_executor import LocalExecutor

WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@pytest.fixture
def world(tmp_path):
    events: list[ProgressEvent] = []
    ex = LocalExecutor()
    driver = SparkHdfsDriver(ex, progress=events.append, poll_s=0.05)
    driver.leave_timeout_s = 0.5
    fw = FrameworkPaths(name="spark", kind="spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    core = NodeSpec("h1", "10.9.0.1", Role.CORE, str(tmp_path / "h1"))
    tc = NodeSpec("h2", "10.9.0.2", Role.TC, str(tmp_path / "h2"))
    cluster = ClusterSpec("c1", fw, (core, tc))
    for name, rh in driver.render(cluster).items():
        for rel, text in rh.files.items():
            p = Path(rh.cluster_dir) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    pids: list[int] = []

    def start_worker() -> int:
        """A worker in the background of a shell that exits at once (not this process's child: the
        machine's init reaps it, as on a host), its pid in the worker's pid file."""
        out = subprocess.run(["sh", "-c", 'nohup "$0" -c "import time; time.sleep(600)" "$1" >/dev/null 2>&1 & '
                              'echo $!', sys.executable, WORKER_CLASS], capture_output=True, text=True, check=True)
        pid = int(out.stdout)
        pids.append(pid)
        d = Path(cluster.cluster_dir(tc)) / "pids"
        d.mkdir(parents=True, exist_ok=True)
        (d / "worker.pid").write_text(f"{pid}\n")
        return pid

    yield driver, cluster, start_worker, events, ex
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0  # a zombie has exited


def test_a_worker_whose_process_exited_is_removed_although_the_master_still_lists_it(world):
    driver, cluster, start_worker, events, _ = world
    pid = start_worker()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    out = driver._gone(cluster, ["h2"], lambda: {"10.9.0.2"}, "the worker to leave", time.monotonic(), {})
    assert [n.name for n in out.cluster.nodes] == ["h1"] and out.hosts == ("h2",)
    assert not Path(cluster.cluster_dir(cluster.node("h2"))).exists(), "the removed node is wiped"
    said = [e.message for e in events if "has exited on h2: going on" in e.message]
    assert len(said) == 1 and "timed out after 0.5s waiting for the worker to leave" in said[0]


def test_a_worker_still_running_is_stopped_again_and_then_leaves(world):
    driver, cluster, start_worker, events, ex = world
    pid = start_worker()
    out = driver._gone(cluster, ["h2"], lambda: alive(pid), "the worker to leave", time.monotonic(), {})
    assert not alive(pid), "the second stop ended the worker"
    assert out.hosts == ("h2",)
    assert any("still runs" in e.message and "stopping it again" in e.message for e in events)
    assert any("stop worker 10" in text for _, text in ex.commands)


def test_a_worker_the_master_keeps_listing_after_a_second_stop_fails_the_removal_by_name(world):
    driver, cluster, start_worker, events, _ = world
    start_worker()
    with pytest.raises(FawkesError, match=r"waiting for the worker to leave \(after a second stop on h2\)"):
        driver._gone(cluster, ["h2"], lambda: {"10.9.0.2"}, "the worker to leave", time.monotonic(), {})
    assert Path(cluster.cluster_dir(cluster.node("h2"))).exists(), "nothing is wiped while it is listed"
