"""A service user that is not root on the hosts (issue 30, item 2): the coordinator's whole cycle on a lab
whose hosts' SSH user is ``fawkes-svc``.

The lab's hosts are reached as ``fawkes-svc`` (created with ``useradd --system`` if missing; no password,
not locked), whose only writable place on a host is its work directory (owned by it).  The distributions
this machine keeps under root's 0700 home are shown to it read-only through bind mounts under
/run/fawkes-svc-lab (a real pool's hosts have their own Spark, Hadoop and Python where the service user
can read them).  The cluster runs with the production defaults (sizes derived from the hosts' inventory,
ports from the default range), not the lab's small fixed ones (only the JVMs' flags are the lab's).  One spark-hdfs MR-cluster, driven by the coordinator (``service.build``, its steps called
here): admitted and deployed with its input, grown by a transient-core node, a word count, the TC node
removed by DP, released with its output saved.  Checked: every step done as the service user (no JVM of
the cluster runs as root on any host; the daemons, the DP and the save run as ``fawkes-svc``), the job's
output exact, the input intact after the DP (fsck healthy), the saved output exact against its manifest,
nothing of the cluster left on the hosts.  What needs root there (suspend, UBIS' watchdog) is refused at
config check: tests/test_config_cli.py.  Two hosts of 0.5 CPU and 2 GiB.  About 3 minutes.
"""

from __future__ import annotations

import collections
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fawkes.frameworks import dists
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.mechanism import ClusterState, Role
from fawkes.ssh.shell import Script
from fawkes.store.lifecycle import JobState, NodeState
from tests.conftest import LAB_PREFIX, unavailable
from tests.test_hibernate_lab import counts  # word<TAB>count lines

pytestmark = [pytest.mark.lab, pytest.mark.spark]

SVC = "fawkes-svc"
NAME = "svc"
APP = Path(__file__).resolve().parent.parent / "fawkes" / "apps" / "wordcount.py"
OPTIONS = {"heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}
MOUNTS = Path("/run/fawkes-svc-lab")


def sh(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=60)


def service_user() -> bool:
    """``fawkes-svc`` exists (created here if missing: True), with no password and not locked (sshd
    without PAM refuses a locked account's keys)."""
    try:
        pwd.getpwnam(SVC)
        created = False
    except KeyError:
        r = sh("useradd", "--system", "--create-home", "--home-dir", f"/var/lib/{SVC}", "--shell", "/bin/bash", SVC)
        if r.returncode != 0:
            unavailable(f"cannot create the service user {SVC}: {r.stderr.strip()}")
        created = True
    r = sh("usermod", "-p", "*", SVC)
    assert r.returncode == 0, r.stderr
    return created


class Exposed:
    """Paths under a directory others cannot enter (root's 0700 home), shown read-only through bind mounts."""

    def __init__(self) -> None:
        self.mounts: dict[Path, Path] = {}

    def path(self, p: str | Path) -> str:
        p = Path(p).resolve()
        for parent in reversed(p.parents):  # from / down: the first directory others may not enter
            if parent != Path("/") and not parent.stat().st_mode & stat.S_IXOTH:
                top = p.relative_to(parent).parts[0]
                src = parent / top
                if src not in self.mounts:
                    dst = MOUNTS / f"{len(self.mounts)}{top}"
                    dst.mkdir(parents=True, exist_ok=True)
                    for cmd in (["mount", "--bind", str(src), str(dst)],
                                ["mount", "-o", "remount,bind,ro", str(dst)]):
                        r = sh(*cmd)
                        if r.returncode != 0:
                            self.close()
                            unavailable(f"cannot bind-mount {src} for the service user: {r.stderr.strip()}")
                    self.mounts[src] = dst
                return str(self.mounts[src] / p.relative_to(src))
        return str(p)

    def close(self) -> None:
        for dst in self.mounts.values():
            sh("umount", "-l", str(dst))
            try:
                dst.rmdir()
            except OSError:
                pass
        self.mounts.clear()


def test_the_coordinator_runs_a_whole_cycle_as_a_service_user(tmp_path):
    from bench.fault_campaign import saved_counts
    from fawkes.config import load_config
    from fawkes.coordinator.service import build
    from fawkes.lab import Lab

    if os.geteuid() != 0:
        unavailable("needs root (network namespaces, useradd, bind mounts)")
    created = service_user()
    uid, gid = pwd.getpwnam(SVC).pw_uid, pwd.getpwnam(SVC).pw_gid
    exposed = Exposed()
    top = Path(tempfile.mkdtemp(prefix="fawkes-svc-lab-", dir="/tmp"))  # not under pytest's 0700 tmp
    top.chmod(0o755)
    lab = coord = None
    try:
        d = dists.ensure_lab_dists()
        spark_home, hdfs_jars, python = (exposed.path(d.spark_home), exposed.path(d.hdfs_home),
                                         exposed.path(sys.executable))
        try:
            lab = Lab.up_free(2, top / "lab", prefix=f"{LAB_PREFIX}u", nets=range(214, 250), cpus=0.5, memory="2G")
        except Exception as exc:  # noqa: BLE001 - no netns, no cgroups: say why
            unavailable(f"lab for the service user cannot start: {exc}")
        for h in lab.hosts:
            os.chown(h.root, uid, gid)  # the user's work directory on each host: its own, nothing else
        inv = lab.inventory_path.with_name("inventory-svc.yaml")
        text = lab.inventory_path.read_text()
        assert "  user: root\n" in text
        inv.write_text(text.replace("  user: root\n", f"  user: {SVC}\n"))
        share = top / "share"  # the input and the job's script, readable by the user; saved outputs, its own
        (share / "saved").mkdir(parents=True)
        os.chown(share / "saved", uid, gid)
        app = share / "wordcount.py"
        shutil.copy(APP, app)
        app.chmod(0o644)
        words = [f"w{i % 23}" for i in range(9000)]
        src = share / "input.txt"
        src.write_text("\n".join(" ".join(words[i:i + 9]) for i in range(0, len(words), 9)) + "\n")
        src.chmod(0o644)
        want = collections.Counter(words)
        # the production defaults (no sizing.LAB_SIZES): sizes derived from the hosts' 2 GiB, ports from the
        # default range; only the job's Python is named, as on a real pool, and the JVMs' flags are the lab's
        # (C1 only: C2's compiler threads would take most of a 0.5-CPU host, as the suite runs beside it)
        jit = LAB_SIZES["daemon_jvm_opts"]
        options = {**OPTIONS, "job_python": python, "daemon_jvm_opts": jit, "app_jvm_opts": jit}
        cfg_path = top / "cfg.yaml"
        cfg_path.write_text(f"state: {top / 'state.db'}\ninventory: {inv}\npolicy: td-damped\nperiod: 2\n"
                            f"sample_period: 1\nidle_timeout_s: never\nshrink_mode: fp\nsave_to: {share / 'saved'}\n"
                            f"clusters:\n  {NAME}: {{max_nodes: 1}}\ncluster_options: {json.dumps(options)}\n")
        cfg = load_config(cfg_path)
        coord = build(cfg)
        store, fleet = coord.store, coord.fleet

        def until(what: str, pred, timeout: float, tick: bool = False) -> None:
            end = time.monotonic() + timeout
            next_tick = 0.0
            while not pred():
                assert time.monotonic() < end, f"timed out after {timeout:g}s waiting for {what}: " + "; ".join(
                    e.message for e in store.events(limit=12))
                coord.sample()
                if tick and time.monotonic() >= next_tick:
                    coord.tick()
                    next_tick = time.monotonic() + cfg.period
                coord.fast()
                time.sleep(0.3)

        def on(host: str, template: str, **values) -> str:
            r = fleet.ex.run([host], Script(template, **values), timeout=120)[host]
            assert r.ok, r.stderr or r.error
            return r.stdout

        def hdfs_text(path: str) -> str:
            spec, driver = fleet.spec(NAME)
            return driver.hdfs(spec, "fs", "-cat", path, timeout=120)

        store.register_framework("lab", "spark-hdfs", spark_home=spark_home, hdfs_jars=hdfs_jars)
        store.request_cluster(NAME, framework="lab", min_core=1, input_path=str(src))
        until("the cluster active", lambda: store.get_cluster(NAME).state == ClusterState.ACTIVE, 240, tick=True)
        core = store.list_nodes(NAME)[0].host
        assert on(core, "id -un").strip() == SVC

        # grown by a TC node (the plan's step, carried out by the coordinator's reconciler)
        tc = next(h.name for h in lab.hosts if h.name != core)
        n = store.allocate_node(NAME, tc, Role.TC)
        until("the TC node running", lambda: store.get_node(n.id).state == NodeState.RUNNING, 240)
        job = store.submit_job(NAME, [str(app), "{input}", "{output}", "4", "0"], input_path="/input").id
        until("the job done", lambda: store.get_job(job).state in (JobState.SUCCEEDED, JobState.FAILED), 300)
        assert store.get_job(job).state == JobState.SUCCEEDED, store.get_job(job).detail
        assert counts(hdfs_text(f"/output/{job}/part-*")) == want
        for host in (core, tc):  # the cluster's JVMs run as the service user, none as root
            users = on(host, "ps -eo user:32=,args= | grep '[j]ava' | cut -d' ' -f1 | sort | uniq -c; true")
            assert SVC in users and "root" not in users, f"{host}: {users}"

        # the TC node leaves by DP: its blocks copied away first, the input intact
        store.transition_node(n.id, NodeState.DRAINING, "shrink (test)")
        until("the TC node released", lambda: store.get_node(n.id).state == NodeState.RELEASED, 300)
        assert "decommissioned (DP)" in store.node_history(n.id)[-1].detail
        spec, driver = fleet.spec(NAME)
        assert "is HEALTHY" in driver.fsck(spec)
        assert hdfs_text("/input").split() == src.read_text().split()

        # released with its output saved (by the service user, where save_to says)
        store.request_release(NAME)
        until("the cluster released", lambda: store.get_cluster(NAME).state == ClusterState.RELEASED, 300)
        c = store.get_cluster(NAME)
        problem, got = saved_counts(fleet.ex, c.saved_output)
        assert problem is None, problem
        assert got == {job: want}
        saved = Path(json.loads(c.saved_output)["path"])
        assert saved.stat().st_uid == uid  # written by the service user
        for h in lab.hosts:
            left = on(h.name, "pgrep -u {u} java; ls {d}/clusters 2>/dev/null; true", u=SVC, d=str(lab.node_dir))
            assert left.strip() == "", f"{h.name}: {left}"
    finally:
        if coord is not None:
            coord.reconciler.shutdown(5)
            try:
                c = store.get_cluster(NAME)
                if c.state not in (ClusterState.RELEASED, ClusterState.REQUESTED):
                    spec, driver = fleet.spec(NAME)
                    driver.teardown(spec)
            except Exception:  # noqa: BLE001, S110 - nothing deployed, or gone already
                pass
            coord.close(5)
        if lab is not None:
            lab.down()
        exposed.close()
        sh("pkill", "-u", SVC)
        if created:
            sh("userdel", "--remove", SVC)
        if os.environ.get("FAWKES_TEST_KEEP"):  # the hosts' files and logs, to look at after a failure
            print(f"kept {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
