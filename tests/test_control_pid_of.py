"""The control script finds a daemon in every process it passes through on its way to the JVM.

Flink's ``taskmanager.sh start-foreground`` execs ``flink-console.sh taskexecutor``, which builds the
classpath (seconds on a loaded host) and then execs the JVM.  A ``start`` in that window used to find
nothing it knew (neither the class nor taskmanager.sh on the command line) and start a second
TaskManager; the pid file then named the second only, so a later stop left the first registered with the
JobManager for good (the kit's coordinator-kill test, kind flink-hdfs, failed so in a loaded CI run:
"timed out after 60s waiting for removed taskmanagers to leave the jobmanager", four attempts).
The rendered control script runs here on a stand-in process with that command line."""

from __future__ import annotations

import subprocess
import time

from fawkes.frameworks.flink_hdfs import FlinkHdfsDriver
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role

FW = FrameworkPaths("fl", "flink-hdfs", flink_home="/opt/flink", hdfs_jars="/opt/hdfs")


def _script(tmp_path):
    spec = ClusterSpec("pidc", FW, (NodeSpec("h1", "10.9.0.1", Role.CORE, str(tmp_path), cores=1, memory_mb=2048),),
                       options=dict(LAB_SIZES))
    host = FlinkHdfsDriver(None).render(spec)["h1"]
    ctl = next(p for p in host.files if p.endswith("fawkes-daemon.sh"))
    path = tmp_path / "ctl.sh"
    path.write_text(host.files[ctl])
    return path, host.cluster_dir


def _status(script, daemon: str) -> str:
    return subprocess.run(["/bin/sh", str(script), "status", daemon], capture_output=True, text=True,
                          timeout=30, check=False).stdout.strip()


def test_a_taskmanager_inside_flink_console_counts_as_running(tmp_path):
    from pathlib import Path

    script, cdir = _script(tmp_path)
    bindir = tmp_path / "flink" / "bin"
    bindir.mkdir(parents=True)
    for stage, args in (("flink-console.sh", ["taskexecutor", "--configDir", "x"]),
                        ("taskmanager.sh", ["start-foreground"])):
        (bindir / stage).write_text("sleep 30\n")
        proc = subprocess.Popen(["/bin/sh", str(bindir / stage), *args])
        try:
            pids = Path(cdir) / "pids"
            pids.mkdir(parents=True, exist_ok=True)
            (pids / "taskmanager.pid").write_text(f"{proc.pid}\n")
            time.sleep(0.1)
            assert _status(script, "taskmanager") == f"taskmanager running {proc.pid}", stage
            assert _status(script, "jobmanager") == "jobmanager stopped -"  # its own names only
        finally:
            proc.kill()
            proc.wait()
    assert _status(script, "taskmanager") == "taskmanager stopped -"  # the process gone: not running
