"""The dispatcher's cancel path over real SSH on a lab host, with stand-in drivers.

What is real: the lab host and its sshd, the dispatcher's launch and poll scripts, the job
directory files, the process groups and signals, the store (SQLite).  What stands in: the
driver.  ``spark-submit`` here is a tiny script that drops the ``--name``/``--conf`` options
and runs the application, and each application is a shell script whose process tree looks
like a Spark client driver (a parent with long-running children, like java with its python
process); none of them talks to a Spark master.  ``test_jobs_cancel_lab.py`` cancels a real
Spark job.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.fleet import Fleet
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.inventory import load_inventory
from fawkes.mechanism import ClusterState, Role
from fawkes.ssh.shell import Script
from fawkes.store import JobState, NodeState, Store

pytestmark = pytest.mark.lab

MASTER = "h1"
SPARK_SUBMIT = """#!/bin/sh
# stand-in for spark-submit (tests only): drop the --name/--conf options, run the application
while [ $# -gt 0 ]; do case "$1" in --name|--conf) shift 2;; *) break;; esac; done
exec "$@"
"""
APPS = {
    # a driver that runs until it is killed: a child shell with its own child, and a second child
    "long.sh": "#!/bin/sh\necho app-20990101000000-0001\nsh -c 'sleep 600; true' &\nsleep 600 &\nwait\n",
    # a driver that ignores SIGTERM (its children inherit that): only SIGKILL stops it
    "stubborn.sh": "#!/bin/sh\ntrap '' TERM\necho app-20990101000000-0002\nsleep 600 &\nsleep 600\n",
    # a driver that ends on its own at once
    "quick.sh": "#!/bin/sh\necho app-20990101000000-0003\nexit 0\n",
}


@pytest.fixture
def world(lab, tmp_path):
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text(SPARK_SUBMIT)
    (home / "bin" / "spark-submit").chmod(0o755)
    for name, body in APPS.items():
        (tmp_path / name).write_text(body)
        (tmp_path / name).chmod(0o755)
    inv = load_inventory(lab.inventory_path)
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    store.register_framework("standin", "spark-hdfs", spark_home=str(home), hdfs_jars=str(tmp_path))
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": 1} for h in inv.hosts])
    name = f"cx{uuid.uuid4().hex[:10]}"  # its own directory on the master, whatever earlier tests left
    store.request_cluster(name, framework="standin", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING)
    n = store.allocate_node(name, MASTER, Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE)
    fleet = Fleet(store, inv, cluster_options=LAB_SIZES)
    dispatcher = Dispatcher(store, fleet, max_running=1, cancel_grace_s=2.0)
    spec, _ = fleet.spec(name)
    yield store, dispatcher, name, spec, tmp_path
    # never leave a stand-in behind, whatever the test did
    for j in store.list_jobs():
        fleet.ex.run([MASTER], Script(_TREE + "p=$(cat {pid} 2>/dev/null) && kill -9 -$p $(tree $p) 2>/dev/null; true",
                                      pid=f"{dispatcher.job_dir(spec, j.id)}/pid"), timeout=10)
    fleet.ex.run([MASTER], Script("rm -rf {d}", d=spec.cluster_dir(spec.master)), timeout=20)
    fleet.close()
    store.close()


_TREE = "tree() {{ echo $1; for k in $(ps -o pid= --ppid $1); do tree $k; done; }}; "


def remote(dispatcher: Dispatcher, script: Script | str) -> str:
    res = dispatcher.fleet.ex.run([MASTER], script, timeout=20)[MASTER]
    assert res.ok, res.error
    return res.stdout


def driver_processes(dispatcher: Dispatcher, spec, job_id: int) -> dict[int, str]:
    """Live (non-zombie) processes of the job's pid tree on the master: pid -> command line."""
    out = remote(dispatcher, Script(
        _TREE + "for x in $(tree $(cat {pid})); do ps -o pid=,stat=,args= -p $x; done | "
        "awk '$2 !~ /^Z/ {{print}}'", pid=f"{dispatcher.job_dir(spec, job_id)}/pid"))
    return {int(line.split()[0]): " ".join(line.split()[2:]) for line in out.splitlines() if line.strip()}


def alive(dispatcher: Dispatcher, pids) -> list[int]:
    out = remote(dispatcher, "for p in " + " ".join(str(p) for p in pids)
                 + "; do s=$(ps -o stat= -p $p); [ -n \"$s\" ] && [ \"${s#Z}\" = \"$s\" ] && echo $p; done; true")
    return [int(x) for x in out.split()]


def wait_until(what: str, fn, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def dispatch_running(store, dispatcher, name, app: Path) -> int:
    job = store.submit_job(name, [str(app)]).id
    dispatcher.step()  # launch on the master
    wait_until(f"job {job} running", lambda: (dispatcher.step(), store.get_job(job).state)[1] == JobState.RUNNING)
    return job


def test_cancel_of_a_running_driver_kills_its_whole_tree_and_the_queue_moves_on(world):
    store, dispatcher, name, spec, tmp = world
    job = dispatch_running(store, dispatcher, name, tmp / "long.sh")
    nxt = store.submit_job(name, [str(tmp / "long.sh")]).id
    procs = wait_until("the stand-in's 4 processes", lambda: (p := driver_processes(dispatcher, spec, job))
                       and len(p) >= 4 and p)
    assert sum(a == "sleep 600" for a in procs.values()) == 2, procs
    dispatcher.step()
    assert store.get_job(nxt).state == JobState.QUEUED  # max_running 1: waits behind the running job

    [(_, outcome)] = store.cancel_jobs([job])
    assert outcome == "requested" and store.get_job(job).state == JobState.RUNNING  # intent only, so far
    t0 = time.monotonic()
    dispatcher.step()  # carries the cancel out, then dispatches the next job
    took = time.monotonic() - t0
    j = store.get_job(job)
    assert j.state == JobState.CANCELLED, j.detail
    assert j.detail == f"cancelled by the user: driver stopped on {MASTER} (sigterm)"
    assert alive(dispatcher, procs) == [], "every process of the driver's tree is gone"
    assert took < 10
    d = dispatcher.job_dir(spec, job)
    assert remote(dispatcher, Script("ls {d}", d=d)).split() == ["cancelled", "log", "pid"]  # no rc: killed
    assert store.get_job(nxt).state == JobState.DISPATCHED  # its slot went to the next job
    evs = [e.message for e in store.events(cluster=name, limit=10)]
    assert f"job {job}: cancel requested (running); the coordinator stops its driver" in evs
    assert f"job {job} cancelled: driver stopped on {MASTER} (sigterm)" in evs


def test_cancel_of_a_driver_that_ignores_sigterm_ends_with_sigkill(world):
    store, dispatcher, name, spec, tmp = world
    job = dispatch_running(store, dispatcher, name, tmp / "stubborn.sh")
    procs = wait_until("the stand-in's processes", lambda: (p := driver_processes(dispatcher, spec, job))
                       and len(p) >= 3 and p)
    store.cancel_jobs([job])
    t0 = time.monotonic()
    assert dispatcher.cancel_requested(name) == [job]
    assert time.monotonic() - t0 >= 2.0  # waited the grace period first
    assert store.get_job(job).detail == f"cancelled by the user: driver stopped on {MASTER} (sigkill)"
    assert alive(dispatcher, procs) == []


def test_cancel_of_a_driver_started_without_its_own_process_group(world):
    """A driver launched the way fawkes did before process groups (plain nohup): found by its pid tree."""
    store, dispatcher, name, spec, tmp = world
    job = store.submit_job(name, [str(tmp / "long.sh")]).id
    store.transition_job(job, JobState.DISPATCHED)
    d = dispatcher.job_dir(spec, job)
    remote(dispatcher, Script("mkdir -p {d} && cd {d} && if [ -e pid ]; then exit 0; fi; "  # the old launch
                              "nohup sh -c {inner} > log 2>&1 < /dev/null & echo $! > {d}/pid",
                              d=d, inner=f"{tmp / 'long.sh'}; echo $? > {d}/rc"))
    procs = wait_until("the stand-in's processes", lambda: (p := driver_processes(dispatcher, spec, job))
                       and len(p) >= 4 and p)
    leader = int(remote(dispatcher, Script("cat {d}/pid", d=d)))
    assert remote(dispatcher, f"ps -o pgid= -p {leader}").strip() != str(leader)  # not a group leader
    store.cancel_jobs([job])
    assert dispatcher.cancel_requested(name) == [job]
    assert store.get_job(job).state == JobState.CANCELLED
    assert alive(dispatcher, procs) == []


def test_cancel_that_comes_too_late_keeps_the_real_outcome(world):
    store, dispatcher, name, spec, tmp = world
    job = store.submit_job(name, [str(tmp / "quick.sh")]).id
    dispatcher.step()
    d = dispatcher.job_dir(spec, job)
    wait_until("rc written", lambda: remote(dispatcher, Script("cat {d}/rc 2>/dev/null; true", d=d)).strip() == "0")
    assert store.get_job(job).state == JobState.DISPATCHED  # not polled yet
    store.cancel_jobs([job])
    assert dispatcher.cancel_requested(name) == []
    j = store.get_job(job)
    assert (j.state, j.exit_code) == (JobState.SUCCEEDED, 0)
    assert f"job {job}: cancel came too late, it had already ended (exit code 0)" in \
        [e.message for e in store.events(cluster=name, limit=5)]


def test_cancel_of_a_dispatched_job_that_never_reached_the_master(world):
    store, dispatcher, name, spec, tmp = world
    job = store.submit_job(name, [str(tmp / "long.sh")]).id
    store.transition_job(job, JobState.DISPATCHED)  # the coordinator died before the launch
    store.cancel_jobs([job])
    assert dispatcher.cancel_requested(name) == [job]
    assert store.get_job(job).detail == "cancelled by the user: nothing had been started on the master"


def test_cancel_never_signals_a_process_that_reuses_the_drivers_pid(world):
    """After a reboot the pid in the job directory may belong to someone else: left alone."""
    store, dispatcher, name, spec, tmp = world
    job = store.submit_job(name, [str(tmp / "long.sh")]).id
    store.transition_job(job, JobState.DISPATCHED)
    store.transition_job(job, JobState.RUNNING)
    d = dispatcher.job_dir(spec, job)
    other = int(remote(dispatcher, "cd / && { nohup sleep 600 > /dev/null 2>&1 < /dev/null & echo $!; }"))
    try:
        remote(dispatcher, Script("mkdir -p {d} && echo {pid} > {d}/pid", d=d, pid=other))
        store.cancel_jobs([job])
        assert dispatcher.cancel_requested(name) == [job]
        assert store.get_job(job).detail == f"cancelled by the user: no driver process was left on {MASTER}"
        assert alive(dispatcher, [other]) == [other]
    finally:
        remote(dispatcher, f"kill -9 {other}; true")
