"""The conformance kit (issue 23): what every live framework kind must do on the SSH lab.

One test runs the kit of every live kind (spark-hdfs, spark, dask, flink-hdfs) at once on a lab of its own
(10 hosts, disjoint per kind), each through the driver contract only
(nothing kind-specific below but the framework record each kind is registered with and the word count
it runs; the job is seen running through ``metrics`` and new nodes registered through ``observe``):

1. bad options are refused before anything starts (each required path of the kind and --java-home
   relative, with a space, a newline or a NUL; no storage), and so is a deploy whose master port (in the
   cluster's own port block) another process listens on (named in one line): nothing is written on any host;
2. its configs render for every node, with the control script, and their hash is stable;
3. deploy on one core node; load an input; start a real job through :meth:`job_command`, run over
   SSH on the master as the dispatcher runs it;
4. while the job runs, grow by one node of each non-core role the kind offers (the job gets
   executors there), then shrink each by its role's removal mode (transient-core: DP; transient: graceful
   where the kind offers it, else FP), a transient node's worker first suspended and resumed where the
   kind offers suspend;
5. the job's output, saved through :meth:`save_output` (size-checked, with a manifest), holds the
   exact word counts;
6. teardown leaves no process of the cluster on any host and no directory.

7. then the real coordinator, one per kind with its own state, killed (SIGKILL) in the middle of a grow
   (``daemons-started``) and in the middle of a removal under a running job (DP: ``exclude-refreshed``; FP:
   ``node-wiped``), restarted each time: no host held twice or leaked, every node up, the job's output saved
   exact at the release, nothing left.

The suspended node's lending to another cluster is the coordinator's (tests/test_suspend_lab.py).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from fawkes.coordinator.suspend import resume_worker, suspend_worker
from fawkes.errors import FawkesError
from fawkes.frameworks import dists
from fawkes.frameworks.base import driver_class
from fawkes.frameworks.render import cluster_ports
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.ssh.cgroups import Footprint
from fawkes.ssh.shell import Script
from tests.conftest import cluster_dirs_marker, own_lab, pids_with_cmdline
from tests.test_spark_hdfs_lab import node, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APPS = Path(__file__).resolve().parent.parent / "fawkes" / "apps"
#: the word count each kind runs (same usage: INPUT OUTPUT PARTITIONS SLEEP_PER_PARTITION_S); flink-hdfs: the
#: jar of fawkes/apps/flink compiled by `fawkes framework dists`
APP = {"dask": lambda: APPS / "dask_wordcount.py", "flink-hdfs": lambda: dists.ensure_lab_dists().flink_apps}
OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1", "replication": "1"}


def removal(cls, role: Role) -> ShrinkMode:
    """How the kit removes a node of ``role``: transient-core by DP; transient gracefully (a DP of a TR node:
    its running tasks may finish, bounded) where the kind offers it, else by FP.  FP of a transient node
    under a job is the kit's coordinator test's (every kind's default shrink mode)."""
    if role is Role.TC:
        return ShrinkMode.DP
    return ShrinkMode.DP if "graceful" in cls.removal_modes else ShrinkMode.FP


def framework(kind: str, shared: Path) -> FrameworkPaths:
    """The framework record each kind is registered with on the lab (the kit's only kind-specific part,
    with the word count it runs, :data:`APP`)."""
    if kind == "dask":  # the hosts' Python is the lab's own (default: sys.executable)
        return FrameworkPaths("kit", kind, shared_dir=str(shared))
    d = dists.ensure_lab_dists()
    if kind == "flink-hdfs":
        return FrameworkPaths("kit", kind, flink_home=str(d.flink_home), hdfs_jars=str(d.hdfs_home))
    if kind == "spark":
        return FrameworkPaths("kit", kind, str(d.spark_home), shared_dir=str(shared))
    return FrameworkPaths("kit", kind, str(d.spark_home), hdfs_jars=str(d.hdfs_home))


class Job:  # what job_command reads of a stored job
    def __init__(self, jid: int, argv: list[str], input_path: str):
        self.id, self.argv, self.input_path = jid, argv, input_path


#: each kind's lab hosts (indices): the first is its core node, the next ones its grown nodes; disjoint,
#: so that the kinds' kits run at the same time (JVM and Python start-ups overlap on the 2 cores)
HOSTS = {"spark-hdfs": (0, 1, 2), "flink-hdfs": (3, 4, 5), "spark": (6, 7), "dask": (8, 9)}


@pytest.fixture(scope="module")
def kit_lab(tmp_path_factory):
    """The kit's own lab: one host per node of every kind's clusters (the shared lab has 8)."""
    lab = own_lab(tmp_path_factory, "k", 10, 236, "the conformance kit's lab")
    yield lab
    lab.down()


def every_kind(lab, tmp_path: Path, part) -> None:
    """``part(lab, tmp_path / kind, kind, hosts)`` for every live kind at once, each on its hosts; the
    failures, each naming its kind, in one assertion."""
    import concurrent.futures
    import traceback

    with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
        futs = {k: pool.submit(part, lab, tmp_path / k, k, idx) for k, idx in HOSTS.items()}
    failed = {}
    for k, f in futs.items():
        exc = f.exception()
        if exc is not None:
            failed[k] = "".join(traceback.format_exception(exc))[-3000:]
    assert not failed, "\n\n".join(f"kind {k}:\n{tb}" for k, tb in failed.items())


def test_every_live_kind_passes_the_conformance_kit(kit_lab, tmp_path):
    """The kit of every live kind, the kinds at once on disjoint hosts; a failure names its kind."""
    every_kind(kit_lab, tmp_path, kit)


def kit(lab, tmp_path: Path, kind: str, hosts: tuple[int, ...]) -> None:
    """The conformance kit of ``kind`` on the lab hosts ``hosts`` (its core node first)."""
    tmp_path.mkdir(parents=True)
    shared = tmp_path / "shared"  # the machine's /tmp: every lab host sees it (docs/lab.md)
    shared.mkdir()
    fw = framework(kind, shared)
    cls = driver_class(kind)
    name = f"kit{kind.replace('-', '')[:6]}{os.getpid() % 1000}"
    core = node(lab, hosts[0], Role.CORE)
    grow = [r for r in cls.roles if r is not Role.CORE]
    assert len(hosts) == 1 + len(grow), f"kind {kind}: one host per role it grows by"
    extra = [node(lab, hosts[1 + i], r) for i, r in enumerate(grow)]
    cluster = ClusterSpec(name, fw, (core,), options=OPTIONS)
    marker = cluster_dirs_marker(lab, name)

    # 1. bad options: refused in one line, before anything starts
    given = {k: v for k, v in fw.as_dict().items() if k not in ("name", "kind") and v}
    for opt in (*cls.required_paths, "java_home"):
        for value in ("relative/dir", "/a b", "/a\nb", "/a\x00b"):
            with pytest.raises(FawkesError, match="absolute path without spaces"):
                FrameworkPaths("kit", kind, **{**given, opt: value})
    with pytest.raises(FawkesError):
        FrameworkPaths("kit", kind, fw.spark_home)  # neither storage: no HDFS and no shared dir
    with pytest.raises(FawkesError, match="option"):
        cls(None).render(ClusterSpec(name, fw, (core,), options={**OPTIONS, "heartbeat_s": "1\n"}))
    assert not pids_with_cmdline(marker)

    # 2. configs for every node, with the control script, stable
    full = ClusterSpec(name, fw, (core, *extra), options=OPTIONS)
    rendered = cls(None).render(full)
    assert set(rendered) == {n.name for n in full.nodes}
    assert all("bin/fawkes-daemon.sh" in r.files and r.hash for r in rendered.values())
    assert {h: r.hash for h, r in cls(None).render(full).items()} == {h: r.hash for h, r in rendered.items()}

    words = [f"w{i % 29}" for i in range(24000)]
    src = tmp_path / "input.txt"
    src.write_text("\n".join(" ".join(words[i:i + 8]) for i in range(0, len(words), 8)) + "\n")
    with lab.executor(command_timeout=300) as ex:
        drv = cls(ex)
        result: dict = {}
        try:
            # 1b. a port of the master's daemons in use on the core host (another process listens there):
            # the deploy is refused in one line naming host and port, before anything is written or started
            # (a cluster with a port block of its own: on the standard ports, the lab's, another cluster's
            # daemons may rightly be there, so only a block is checked)
            blocked = ClusterSpec(name, fw, (core,), options={**OPTIONS, "port_range": "21000-31999"}, port_slot=0)
            pname = next(p for d in cls.master_daemons for p in cls.daemon_ports.get(d, ()))
            port = cluster_ports(blocked)[pname]
            hold = ex.run([core.name], Script(
                "nohup {py} -c {code} >/dev/null 2>&1 & echo $!", py=sys.executable,
                code=f"import socket, time\ns = socket.socket()\ns.bind(('{core.address}', {port}))\n"
                     "s.listen()\ntime.sleep(120)"))[core.name]
            assert hold.ok, hold.error
            try:
                wait_for(f"a listener on {core.name}:{port}", lambda: f":{port} " in ex.run(
                    [core.name], Script("ss -ltnH 2>/dev/null || netstat -ltn"))[core.name].stdout, 30)
                with pytest.raises(FawkesError, match=rf"port\(s\) already in use by another process "
                                                      rf"\({core.name}: {port}\)"):
                    drv.deploy(blocked, timeout=60)
                nothing = ex.run([core.name], Script("test -e {d} && echo LEFT; true", d=blocked.cluster_dir(core)))
                assert "LEFT" not in nothing[core.name].stdout, "the refused deploy wrote on the host"
            finally:
                ex.run([core.name], Script("kill {p}", p=hold.stdout.strip()))
            wait_for(f"{core.name}:{port} free again", lambda: f":{port} " not in ex.run(
                [core.name], Script("ss -ltnH 2>/dev/null || netstat -ltn"))[core.name].stdout, 30)

            # 3. deploy, load, a real job started as the dispatcher starts it
            t_deploy = time.monotonic()
            drv.deploy(cluster, timeout=240)
            t_deploy = time.monotonic() - t_deploy
            assert drv.health(cluster).ok, drv.health(cluster).problems
            drv.load_input(cluster, str(src), "/input")
            app = APP[kind]() if kind in APP else APPS / "wordcount.py"
            # 24 tasks of at least 1.5 s on the core node's slot: longer on a loaded machine, where the grow
            # takes as long as the deployment did, so that the job still runs when the new nodes join
            sleep = max(1.5, round(1.5 * t_deploy / 24, 1))
            job = Job(1, [str(app), "{input}", "{output}", "24", f"{sleep:g}"], "/input")
            launch = drv.job_command(cluster, job, output="/output/1", driver_memory="512m", python=sys.executable)
            env = [f"{k}={v}" for k, v in launch.env.items()]
            run = Script("cd {d} && env {e} {argv} > {log} 2>&1", d=str(tmp_path), e=env, argv=list(launch.argv),
                         log=str(tmp_path / "job.log"))
            t = threading.Thread(target=lambda: result.update(ex.run([core.name], run, timeout=600)))
            t.start()
            wait_for("the job to run", lambda: drv.metrics(cluster).unfinished_jobs, 120)

            # 4. grow by each non-core role while it runs, then shrink each by its removal mode
            grown = drv.add_nodes(cluster, extra, timeout=180).cluster
            wait_for("workers on the new nodes",
                     lambda: all(f.up for f in drv.observe(grown, [n.name for n in extra]).values()), 60)
            assert t.is_alive(), "the job ended before the grow: make it longer"
            for n in extra:
                if n.role is Role.TR and "suspend" in cls.removal_modes:
                    # suspend: the worker's process tree held at 1 % CPU in a cgroup of its own, then resumed,
                    # through the kind's suspend hooks (what the coordinator's suspender runs)
                    s = suspend_worker(ex, n.name, cls.suspend_hooks(name, n.root).pid, name, Footprint(1.0))
                    assert s.root > 0 and s.pids and s.pids <= s.tree, s
                    assert s.root in resume_worker(ex, n.name, name)
                grown = drv.remove_nodes(grown, [n.name], removal(cls, n.role), timeout=180, drain_s=30).cluster
            assert grown.nodes == cluster.nodes
            t.join(600)
            r = result[core.name]
            assert r.ok, (tmp_path / "job.log").read_text()[-2000:]

            # 5. the output, saved through the contract, is exact
            saved = drv.save_output(cluster, "/output", f"{lab.node_dir}/kit-saved/{name}", timeout=300)
            assert saved is not None and saved.files >= 4
            out = ex.run([core.name], Script("cd {d} && sha256sum -c --quiet MANIFEST.sha256 && cat 1/part-*",
                                             d=saved.path))[core.name]
            assert out.ok, out.stderr
            got: collections.Counter = collections.Counter()
            for line in out.stdout.splitlines():
                w, c = line.split("\t")
                got[w] += int(c)
            assert got == collections.Counter(words)
        finally:
            # 6. teardown leaves nothing
            drv.teardown(ClusterSpec(name, fw, (core, *extra), options=OPTIONS))
            ex.run([core.name], Script("rm -rf {d}", d=f"{lab.node_dir}/kit-saved"))
        deadline = time.monotonic() + 30
        while pids_with_cmdline(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not pids_with_cmdline(marker), "processes of the cluster left"
        left = ex.run([n.name for n in (core, *extra)], Script("test -e {d} && echo LEFT; true",
                                                                d=cluster.cluster_dir(core)))
        assert not any("LEFT" in x.stdout for x in left.values())
        if fw.shared_dir:
            assert not (shared / name).exists(), "the shared directory of the cluster left"


# ---------------------------------------------------------------------------------------------------------
# The kit's second part: the real coordinator, killed (SIGKILL) mid-grow and mid-drain, with every kind.

#: where each kill lands: mid-grow, the new node's daemons started but not registered (every kind reaches
#: ``daemons-started`` in its add_nodes); mid-drain, inside the removal: a node leaving by DP is killed while its
#: storage decommissions (the NameNode told, not finished), one leaving by FP once its worker is stopped and
#: its directory wiped but the node not yet released
MID_GROW = "daemons-started"
MID_DRAIN = {Role.TC: "exclude-refreshed", Role.TR: "node-wiped"}


def test_every_live_kind_survives_the_coordinator_killed_mid_grow_and_mid_drain(kit_lab, tmp_path):
    """One coordinator per kind (its own state, the kind's hosts of the kit), killed at a point in the middle
    of a grow and in the middle of a DP/FP removal under a running job, each time restarted: no host held
    twice or leaked, in the state or by the daemons running on the hosts; every node up; the job's output,
    saved at the release, exact; nothing left on any host.  The kinds at once; a failure names its kind."""
    every_kind(kit_lab, tmp_path, crash)


def crash(lab, tmp_path: Path, kind: str, hosts: tuple[int, ...]) -> None:
    import json

    import yaml

    from bench.fault_campaign import CoordinatorProc, running_clusters, saved_counts
    from fawkes.coordinator.fleet import Fleet
    from fawkes.inventory import load_inventory
    from fawkes.simfleet import invariants
    from fawkes.store import Store
    from fawkes.store.lifecycle import JobState, NodeState

    tmp_path.mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    fw = framework(kind, shared)
    cls = driver_class(kind)
    grow_role = Role.TC if Role.TC in cls.roles else Role.TR
    name = f"cr{kind.replace('-', '')[:6]}{os.getpid() % 1000}"
    marker = cluster_dirs_marker(lab, name)
    mine = {lab.hosts[i].name for i in hosts}
    inv = yaml.safe_load(lab.inventory_path.read_text())
    inv["hosts"] = [h for h in inv["hosts"] if h["name"] in mine]
    inv["groups"] = {g: [h for h in m if h in mine] for g, m in (inv.get("groups") or {}).items()}
    inventory = lab.inventory_path.parent / f"inventory-crash-{kind}.yaml"  # its relative key paths stay valid
    inventory.write_text(yaml.safe_dump(inv))
    preset = tmp_path / "preset.yaml"
    preset.write_text(f"policy: TD\ngrow_type: {grow_role.value}\nperiod_s: 5\nsample_period_s: 1\ntau: 0.5\n"
                      "idle_timeout_s: never\nall_zero: equal\n")
    config = tmp_path / "coordinator.json"
    url = f"sqlite:///{tmp_path / 'state.db'}"

    def configure(max_nodes: int) -> None:  # the cluster's ceiling: how the test makes it grow and shrink
        config.write_text(json.dumps({
            "state": url, "inventory": str(inventory), "policy": str(preset), "period": 5, "sample_period": 1,
            "host_grace": 60, "cluster_options": {**OPTIONS, "executor_memory": "512m"}, "timeouts": {"drain": 90},
            "clusters": {name: {"max_nodes": max_nodes}}}))

    store = Store(url)
    store.register_framework("kit", kind, **{k: v for k, v in fw.as_dict().items() if k not in ("name", "kind") and v})
    fleet = Fleet(store, load_inventory(inventory), cluster_options=OPTIONS)
    coord = CoordinatorProc(config, tmp_path / "coordinator.log")
    words = [f"w{i % 23}" for i in range(16000)]
    src = tmp_path / "input.txt"
    src.write_text("\n".join(" ".join(words[i:i + 8]) for i in range(0, len(words), 8)) + "\n")
    log = (tmp_path / "coordinator.log")

    def wait(what: str, fn, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = fn()
            if v:
                return v
            if coord.proc is not None and coord.proc.poll() is not None:
                raise AssertionError(f"{kind}: the coordinator exited ({coord.proc.returncode}) waiting for {what}: "
                                     f"{log.read_text()[-1500:]}")
            time.sleep(1)
        raise AssertionError(f"{kind}: timed out after {timeout:g}s waiting for {what}: {log.read_text()[-1500:]}")

    def sound(when: str) -> None:
        ran = running_clusters(fleet.ex, lab.node_dir, sorted(mine), timeout=60)
        bad = invariants.ownership(store, {"daemons": ran}) + invariants.core_nodes(store, {})
        assert not bad, f"{kind}, {when}: {bad}"

    def settled(n: int):
        nodes = store.list_nodes(name)
        if len(nodes) != n or any(NodeState(x.state) is not NodeState.RUNNING for x in nodes):
            return False
        spec, drv = fleet.spec(name)
        return all(f.up for f in drv.observe(spec).values())

    def killed_at(point: str, timeout: float = 300) -> None:
        coord.start(point)
        wait_dead = time.monotonic() + timeout
        while coord.alive() and time.monotonic() < wait_dead:
            time.sleep(0.5)
        assert not coord.alive() and coord.proc.returncode == -9, \
            f"{kind}: not killed at {point} within {timeout:g}s: {log.read_text()[-1500:]}"
        assert f"fault point {point}:1 reached" in log.read_text()

    try:
        configure(1)
        store.request_cluster(name, framework="kit", min_core=1, input_path=str(src))
        coord.start()
        wait("the cluster deployed", lambda: settled(1) and store.get_cluster(name).state == "active", 300)
        assert coord.stop() == 0

        # mid-grow: killed with the new nodes' daemons started, not registered; restarted, the grow completes
        configure(len(hosts))
        killed_at(MID_GROW)
        sound("killed mid-grow")
        coord.start()
        wait(f"{len(hosts)} nodes up", lambda: settled(len(hosts)), 300)
        sound("after the grow")

        # a job on every node, then mid-drain under it: killed inside the removal; restarted, it completes
        app = APP[kind]() if kind in APP else APPS / "wordcount.py"
        job = store.submit_job(name, [str(app), "{input}", "{output}", "24", "3"], input_path="/input").id
        wait("the job running", lambda: JobState(store.get_job(job).state) is JobState.RUNNING, 180)
        assert coord.stop() == 0
        configure(len(hosts) - 1)
        killed_at(MID_DRAIN[grow_role])
        sound("killed mid-drain")
        coord.start()
        wait(f"{len(hosts) - 1} nodes up", lambda: settled(len(hosts) - 1), 300)
        sound("after the drain")
        wait("the job done", lambda: JobState(store.get_job(job).state) in (JobState.SUCCEEDED, JobState.FAILED), 600)
        assert JobState(store.get_job(job).state) is JobState.SUCCEEDED, store.get_job(job).detail

        # released: the output saved exact, nothing left on any host
        store.request_release(name)
        wait("the cluster released", lambda: store.get_cluster(name).state == "released", 300)
        assert coord.stop() == 0
        saved = store.get_cluster(name).saved_output
        rec = json.loads(saved)
        problem, got = saved_counts(fleet.ex, saved)  # its manifest checked, each job's counts
        assert problem is None, f"{kind}: {problem}"
        assert got.get(job) == collections.Counter(words), f"{kind}: the saved output is not exact"
        sound("released")
        assert not pids_with_cmdline(marker), f"{kind}: processes of the cluster left"
        fleet.ex.run([rec["host"]], Script("rm -rf {d}", d=rec["path"]))
    finally:
        if coord.alive():
            coord.kill9()
        if store.get_cluster(name).state != "released":
            try:
                spec, drv = fleet.spec(name)
                drv.teardown(spec)
            except Exception:  # noqa: BLE001 - nothing deployed, or gone already
                pass
        fleet.close()
        store.close()
        inventory.unlink(missing_ok=True)
