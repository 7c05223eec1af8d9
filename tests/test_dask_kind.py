"""Kind dask: what its driver reads from the scheduler, its declared offer, and (on the lab) a real
cluster: observe / health / metrics, a graceful removal under a running job, reconfigure, teardown."""

from __future__ import annotations

import collections
import sys
import threading
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from fawkes.frameworks.base import driver_class, shrink_mode_for
from fawkes.frameworks.dask import DaskDriver, dask_sample, parse_prometheus
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.ssh.shell import Script

# what distributed 2026.8's scheduler serves on /metrics (no bokeh), trimmed: a job of 18 tasks running
METRICS = """\
# HELP dask_scheduler_clients Number of clients connected
# TYPE dask_scheduler_clients gauge
dask_scheduler_clients 1.0
dask_scheduler_workers{state="idle"} 0.0
dask_scheduler_workers{state="partially_saturated"} 1.0
dask_scheduler_tasks_suspicious_total{task_prefix_name="sum-part"} 0.0
dask_scheduler_tasks{state="memory"} 2.0
dask_scheduler_tasks{state="no-worker"} 0.0
dask_scheduler_tasks{state="queued"} 5.0
dask_scheduler_tasks{state="erred"} 0.0
dask_scheduler_tasks{state="processing"} 3.0
dask_scheduler_tasks{state="waiting"} 10.0
python_info{implementation="CPython",major="3"} 1.0
"""
IDENTITY = {"type": "Scheduler", "workers": {"tcp://10.0.0.1:4001": {"name": "h1", "nthreads": 2},
                                             "tcp://10.0.0.3:4002": {"name": "h3", "nthreads": 1}}}


def test_metrics_map_to_the_neutral_sample():
    g = parse_prometheus(METRICS)
    assert g["clients"] == 1 and g["tasks:queued"] == 5 and g["workers:partially_saturated"] == 1
    assert not any(k.startswith("tasks_suspicious") for k in g)
    s = dask_sample(1.0, IDENTITY, g)
    assert (s.tasks.pending, s.tasks.running, s.tasks.total, s.tasks.completed) == (15, 3, 18, 2)
    assert s.slots == 3 and s.busy_slots == 3 and s.unfinished_jobs == 1
    empty = dask_sample(1.0, None, None, ["GET x: refused"])
    assert empty.slots == 0 and empty.tasks.total == 0 and empty.errors == ("GET x: refused",)


def test_declared_offer():
    cls = driver_class("dask")
    assert cls is DaskDriver and cls.roles == (Role.CORE, Role.TR)
    assert cls.removal_modes == {"fp", "graceful"} and cls.default_shrink_mode == "fp"
    assert shrink_mode_for("dask") == "fp" and shrink_mode_for("dask", "graceful") == "graceful"
    with pytest.raises(FawkesError, match="not offered"):
        shrink_mode_for("dask", "suspend")
    with pytest.raises(FawkesError, match="not offered by kind dask"):
        cls.suspend_hooks("c", "/srv")
    fw = FrameworkPaths("d", "dask", shared_dir="/shared")
    c = ClusterSpec("c", fw, (NodeSpec("h1", "10.0.0.1", Role.CORE, "/srv"),))
    with pytest.raises(FawkesError, match="not offered by kind dask"):
        cls(None).opportunistic_worker(c, c.nodes[0])
    with pytest.raises(FawkesError, match="no transient-core"):
        cls(None).add_nodes(c, [NodeSpec("h2", "10.0.0.2", Role.TC, "/srv")])
    with pytest.raises(FawkesError, match="core node"):
        cls(None).remove_nodes(c, ["h1"])


def test_job_command_and_paths():
    fw = FrameworkPaths("d", "dask", shared_dir="/shared")
    c = ClusterSpec("c", fw, (NodeSpec("h1", "10.0.0.1", Role.CORE, "/srv"),))

    class Job:
        id, argv, input_path = 7, ["/apps/wc.py", "{input}", "{output}", "4", "0"], "/input"

    launch = DaskDriver(None).job_command(c, Job, output="/output/7", driver_memory="1g", python="/usr/bin/python3")
    assert launch.argv == ("/usr/bin/python3", "/apps/wc.py", "/shared/c/input", "/shared/c/output/7", "4", "0")
    assert launch.env["DASK_SCHEDULER_ADDRESS"] == "tcp://10.0.0.1:8786"
    withpy = ClusterSpec("c", FrameworkPaths("d", "dask", shared_dir="/shared", python="/opt/py"), c.nodes)
    assert DaskDriver(None).job_command(withpy, Job, output="/o", driver_memory="1g", python="/x").argv[0] == "/opt/py"
    for bad in ("rel/py", "/a b", "/a\nb", "/a\x00b"):
        with pytest.raises(FawkesError, match="absolute path"):
            FrameworkPaths("d", "dask", shared_dir="/shared", python=bad)


# ---------------------------------------------------------------------------------------------- lab
APP = Path(__file__).resolve().parent.parent / "fawkes" / "apps" / "dask_wordcount.py"


def _scheduler_routes_env() -> str:
    """The routes the control script gives the scheduler (its DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES)."""
    import re

    text = (Path(__file__).resolve().parent.parent / "templates" / "dask" / "fawkes-daemon.sh.j2").read_text()
    m = re.search(r'DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES="([^"]*)"', text)
    assert m, "the control script sets the scheduler's routes"
    return m.group(1).replace("\\\n", "")


def test_identity_while_tasks_run_falls_back_to_the_api(tmp_path):
    """distributed's /json/identity.json answers 500 while tasks run (tuple-keyed metrics in the workers'
    heartbeats); the driver then reads the workers' names and threads from the api route the control
    script turns on.  A real scheduler and worker on loopback, started as the control script starts them."""
    import json
    import os
    import socket
    import subprocess
    import time
    import urllib.error
    import urllib.request

    from tests.conftest import unavailable

    try:
        import distributed  # noqa: F401
    except ImportError:
        unavailable("needs distributed (the lab extra: scripts/setup installs it)")

    def free_port() -> int:
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            return so.getsockname()[1]

    sport, hport = free_port(), free_port()
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": _scheduler_routes_env()}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(sport), "--dashboard-address", f"127.0.0.1:{hport}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)]
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{sport}",
                                       "--name", "h1", "--nthreads", "2", "--no-nanny", "--host", "127.0.0.1",
                                       "--dashboard-address", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=tmp_path))
        client = procs.append(subprocess.Popen([sys.executable, "-c", (
            "import time, distributed\n"
            "def burn(x):\n t = time.time()\n while time.time() - t < 0.2: pass\n return x\n"
            f"c = distributed.Client('tcp://127.0.0.1:{sport}', timeout=30)\n"
            "print(sum(c.gather(c.map(burn, range(300)))))")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=tmp_path))
        del client
        drv = DaskDriver(None)
        drv.urls = lambda cluster: {"http": f"http://127.0.0.1:{hport}"}
        base = f"http://127.0.0.1:{hport}"
        seen_500 = False
        deadline = time.time() + 60
        while time.time() < deadline and not seen_500:
            try:
                with urllib.request.urlopen(base + "/json/identity.json", timeout=5) as r:
                    json.loads(r.read())
            except urllib.error.HTTPError as exc:
                seen_500 = exc.code == 500
            except (urllib.error.URLError, OSError):
                pass  # not up yet
            if not seen_500:
                time.sleep(0.3)
        assert seen_500, "distributed's identity.json no longer fails while tasks run: the fallback may go"
        ident = drv.identity(None)
        assert [w["name"] for w in ident["workers"].values()] == ["h1"] and ident["total_threads"] == 2, ident
        assert drv.workers_by_name(None).keys() == {"h1"}
        assert dask_sample(0.0, ident, None).slots == 2.0
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


@pytest.mark.lab
def test_graceful_removal_observe_reconfigure_on_the_lab(lab, tmp_path):
    from tests.conftest import cluster_dirs_marker, pids_with_cmdline
    from tests.test_spark_hdfs_lab import node, wait_for

    shared = tmp_path / "shared"
    shared.mkdir()
    fw = FrameworkPaths("dk", "dask", shared_dir=str(shared), python=sys.executable)
    name = "dgrace"
    core, tr = node(lab, 1, Role.CORE), node(lab, 2, Role.TR)
    cluster = ClusterSpec(name, fw, (core,))
    words = [f"v{i % 31}" for i in range(20000)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(" ".join(words[i:i + 10]) for i in range(0, len(words), 10)) + "\n")
    result: dict = {}
    with lab.executor(command_timeout=300) as ex:
        drv = DaskDriver(ex)
        try:
            drv.deploy(cluster, timeout=120)
            grown = drv.add_nodes(cluster, [tr], timeout=120).cluster
            facts = drv.observe(grown)
            assert all(f.up for f in facts.values()), {h: f.summary() for h, f in facts.items()}
            assert facts[core.name].daemons == {"scheduler": True, "worker": True}
            assert drv.health(grown).ok, drv.health(grown).problems
            assert drv.metrics(grown).slots == 2
            drv.load_input(grown, str(src), "/input")

            class Job:
                id, argv, input_path = 3, [str(APP), "{input}", "{output}", "40", "1.0"], "/input"

            launch = drv.job_command(grown, Job, output="/output/3", driver_memory="512m", python=sys.executable)
            run = Script("cd {d} && env {e} {argv} > {log} 2>&1", d=str(tmp_path),
                         e=[f"{k}={v}" for k, v in launch.env.items()], argv=list(launch.argv),
                         log=str(tmp_path / "job.log"))
            t = threading.Thread(target=lambda: result.update(ex.run([core.name], run, timeout=300)))
            t.start()
            wait_for("tasks running", lambda: drv.metrics(grown).tasks.running >= 2, 90)
            res = drv.remove_nodes(grown, [tr.name], ShrinkMode.DP, timeout=120, drain_s=5)
            assert res.hosts == (tr.name,) and "graceful" in res.phases
            assert tr.name not in drv.workers_by_name(cluster)
            assert t.is_alive(), "the job ended before the graceful removal: make it longer"
            t.join(300)
            assert result[core.name].ok, (tmp_path / "job.log").read_text()[-2000:]
            got: collections.Counter = collections.Counter()
            for p in sorted((shared / name / "output" / "3").glob("part-*")):
                for line in p.read_text().splitlines():
                    w, c = line.split("\t")
                    got[w] += int(c)
            assert got == collections.Counter(words)
            # reconfigure: nothing changed -> nothing restarted; more memory -> the worker restarts
            assert drv.reconfigure(cluster) == {}
            more = ClusterSpec(name, fw, (core,), options={"worker_memory_mb": "1536"})
            assert drv.reconfigure(more) == {core.name: ["scheduler", "worker"]}
            assert drv.observe(more)[core.name].up
        finally:
            drv.teardown(ClusterSpec(name, fw, (core, tr)))
        marker = cluster_dirs_marker(lab, name)
        wait_for("no process of the cluster", lambda: not pids_with_cmdline(marker), 30)
        assert not (shared / name).exists()
