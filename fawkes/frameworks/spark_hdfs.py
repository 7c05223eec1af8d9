"""Spark standalone over its own HDFS: the ``spark-hdfs`` framework kind.

Layout of an MR-cluster (docs/frameworks.md; roles: docs/mechanism.md):

* the first core node runs the Spark master and the NameNode;
* core nodes run a Spark worker and a DataNode holding the input;
* transient-core (TC) nodes run a worker and a DataNode that joins after the input is loaded
  (the HDFS balancer is never run, so they hold output only);
* transient (TR) nodes run a worker only.

Each host gets ``<root>/clusters/<cluster>/`` with ``conf/`` (Spark and Hadoop configs),
``bin/fawkes-daemon.sh`` (start/stop/status by pid file), ``logs/``, ``pids/``, ``work/``,
``local/``, ``tmp/`` and ``dfs/``.  ``conf/.fawkes-hashes`` records the hash of the rendered configs.

Shrinking (docs/frameworks.md): FP stops a TR node's worker (Spark re-runs its tasks).  DP
decommissions the Spark worker (SIGPWR, with ``spark.decommission.enabled``) and the DataNode
(exclude file + ``DFSAdmin -refreshNodes``) and stops the DataNode only after the NameNode
reports it ``Decommissioned``; with a timeout, and cancellable.  Core nodes are never removed
while the cluster is active.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from fawkes import faults
from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M
from fawkes.frameworks.base import (DecommissionInterrupted, DecommissionTimeout, Health, JobLaunch, NodeFacts,
                                    OpResult, SavedOutput, SuspendHooks, WorkerLaunch)
from fawkes.frameworks.control import HASH_FILE, ControlScriptDriver, check_problems  # noqa: F401  (HASH_FILE: re-exported)
from fawkes.frameworks.render import CONTROL_SCRIPT, EXCLUDE_FILE, ports_for, render_exclude
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import SHRINK_MODE, Role, ShrinkMode
from fawkes.ssh.shell import Script

DAEMON_COMPONENT = {"master": "spark", "worker": "spark", "namenode": "hdfs", "datanode": "hdfs"}
FSSHELL = "org.apache.hadoop.fs.FsShell"
DFSADMIN = "org.apache.hadoop.hdfs.tools.DFSAdmin"
DFSCK = "org.apache.hadoop.hdfs.tools.DFSck"
UI_PORT_BASE = 4040
INPUT_ROOT = "/input"  # where a relative --input lives in HDFS


def ui_port(job_id: int) -> int:
    """The driver UI port of a job (where its task counts are read), fixed by its id."""
    return UI_PORT_BASE + 1 + job_id % 2000


def expand(arg: str, job, output: str) -> str:
    """A job argument with ``{input}`` (the job's --input as an HDFS URI), ``{output}`` (``output``
    as an HDFS URI) and ``{job}`` (the job id) replaced."""
    inp = job.input_path or ""
    if inp and "://" not in inp:
        inp = "hdfs://" + inp if inp.startswith("/") else f"hdfs://{INPUT_ROOT}/{inp}"
    return arg.replace("{input}", inp).replace("{output}", f"hdfs://{output}").replace("{job}", str(job.id))


_FSCK_FILE = re.compile(r"^(/\S*) \d+ bytes, \d+ block\(s\)")
_FSCK_BLOCK = re.compile(r"^\d+\. \S+?:(blk_\d+_\d+)(\S*) len=\d+ .*?\[(.*)\]\s*$")
_FSCK_REPLICA = re.compile(r"DatanodeInfoWithStorage\[([^:\],]+):\d+")


def unsafe_blocks(fsck: str, leaving: set[str]) -> list[str]:
    """From ``fsck -files -blocks -locations``: the blocks of closed files whose every replica is on a
    DataNode in ``leaving`` (addresses), as ``"PATH BLOCK"``.  Stopping those DataNodes would lose them:
    HDFS 2.7 never copies a block from a node that is already Decommissioned, and a block finalised there
    after the NameNode's last scan of the node (a write still running when its DP began) is not seen by
    the decommission.  Open files are not counted (their writer fails and retries); missing blocks have
    no location to blame."""
    out, path = [], None
    for line in fsck.splitlines():
        m = _FSCK_FILE.match(line)
        if m:
            path = None if "OPENFORWRITE" in line else m.group(1)
            continue
        m = _FSCK_BLOCK.match(line.strip())
        if path is None or not m or m.group(2):  # m.group(2): {UCState=...}, a block under construction
            continue
        where = set(_FSCK_REPLICA.findall(m.group(3)))
        if where and where <= leaving:
            out.append(f"{path} {m.group(1)}")
    return out


class SparkHdfsDriver(ControlScriptDriver):
    kind = "spark-hdfs"
    #: B-6: FP unless the config says otherwise.  BIG-C proposes graceful for Spark, but on the lab's
    #: short tasks it cost about what FP cost (2 attempts re-run vs 1, job +2.6 %, host held 11 s
    #: longer; docs/mechanism.md) and SIM-B1 ranks it worst for short jobs, so graceful is opt-in
    default_shrink_mode = "fp"
    roles = (Role.CORE, Role.TC, Role.TR)
    removal_modes = frozenset({"fp", "dp", "graceful", "suspend"})
    signals = frozenset({"tasks", "slots", "stored_bytes", "job_progress"})
    map_only_workers = False
    storage_name = "HDFS"
    job_id_pattern = "app-[0-9]*-[0-9]*"  # a Spark standalone application id, as its driver logs it
    # the live opportunistic unit is a whole Spark standalone worker, and a standalone worker runs any
    # task of its applications (no node labels, no per-stage executor placement)
    map_only_note = ("a Spark standalone worker (spark-hdfs) runs any task, it cannot be confined to map tasks")
    role_daemons = {Role.CORE: ("datanode", "worker"), Role.TC: ("datanode", "worker"), Role.TR: ("worker",)}
    #: the installation paths ``fawkes framework add`` takes for this kind (besides --java-home)
    path_options = ("spark_home", "hadoop_home", "hdfs_jars")
    required_paths = ("spark_home",)
    master_daemons = ("namenode", "master")

    # ================================================================== framework check
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        tests = [("Spark home", framework.spark_home + "/bin/spark-class", "-f"),
                 ("Spark jars", framework.spark_home + "/jars", "-d")]
        if framework.hdfs_jars:
            tests += [("HDFS jars", framework.hdfs_jars + "/jars/hadoop-hdfs-2.7.3.jar", "-f"),
                      ("HDFS webapps", framework.hdfs_jars + "/webapps/hdfs", "-d")]
        else:
            tests += [("Hadoop home", framework.hadoop_home + "/share/hadoop/hdfs", "-d")]
        parts = [Script("test " + flag + " {p} || echo {msg};", p=path, msg=f"missing {what}: {path}")
                 for what, path, flag in tests]
        java = Script("{j} -version >/dev/null 2>&1 || echo {msg}", j=framework.java,
                      msg=f"java does not run: {framework.java} -version failed")
        script = Script(" ".join(["{p%d}" % i for i in range(len(parts))] + ["{java}"]),
                        **{f"p{i}": p for i, p in enumerate(parts)}, java=java)
        return check_problems(executor, hosts, script)

    # ================================================================== low-level helpers
    def urls(self, cluster: ClusterSpec) -> dict[str, str]:
        p = ports_for(cluster.framework.hdfs_major)
        m = cluster.master.address
        return {"master": f"spark://{m}:{p['spark_master']}", "master_ui": f"http://{m}:{p['spark_master_ui']}",
                "namenode": f"hdfs://{m}:{p['nn_rpc']}", "namenode_ui": f"http://{m}:{p['nn_http']}"}

    def web_ui(self, cluster: ClusterSpec) -> str | None:
        """The Spark master's web UI."""
        return self.urls(cluster)["master_ui"] + "/"

    def master_state(self, cluster: ClusterSpec) -> M.SparkMasterState:
        return M.parse_master_json(self._http_json(self.urls(cluster)["master_ui"] + "/json/"))

    def _worker_cores_used(self, cluster: ClusterSpec, node: NodeSpec) -> int:
        """Cores the worker on ``node`` has granted to executors now, from its own web UI."""
        port = ports_for(cluster.framework.hdfs_major)["spark_worker_ui"]
        return int(self._http_json(f"http://{node.address}:{port}/json/").get("coresused", 0))

    def _jmx(self, cluster: ClusterSpec, bean: str):
        return self._http_json(self.urls(cluster)["namenode_ui"] + f"/jmx?qry=Hadoop:service=NameNode,name={bean}")

    def hdfs_state(self, cluster: ClusterSpec) -> M.HdfsState:
        return M.parse_fsnamesystem_state(self._jmx(cluster, "FSNamesystemState"))

    def datanodes(self, cluster: ClusterSpec) -> M.NameNodeInfo:
        return M.parse_namenode_info(self._jmx(cluster, "NameNodeInfo"))

    # ================================================================== configs
    def _exclude_path(self, cluster: ClusterSpec) -> str:
        return f"{cluster.cluster_dir(cluster.master)}/{EXCLUDE_FILE}"

    def _read_exclude(self, cluster: ClusterSpec) -> list[str]:
        out = self._run({cluster.master.name: Script("cat {f} 2>/dev/null || true", f=self._exclude_path(cluster))},
                        "reading the exclude file", 30)
        return [ln.strip() for ln in out[cluster.master.name].splitlines() if ln.strip()]

    def _set_exclude(self, cluster: ClusterSpec, addresses: Iterable[str]) -> None:
        """Write the exclude file and make the NameNode re-read it (refreshNodes)."""
        m = cluster.master
        self.write_files({m.name: [(self._exclude_path(cluster), render_exclude(addresses))]}, "writing the exclude file")
        faults.point("exclude-written")
        self._ctl_each(cluster, {m.name: [("hdfs", DFSADMIN, "-refreshNodes")]}, "DFSAdmin -refreshNodes", 120)
        faults.point("exclude-refreshed")

    # ================================================================== deploy
    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        m = cluster.master
        self.emit(cluster, "deploy", f"{len(cluster.nodes)} node(s), master {m.name} ({m.address})", t0=t0)
        self.push_configs(cluster)
        phases["configs"] = time.monotonic() - t0
        # start everything, then wait for all of it: the Spark master (it needs no HDFS: it boots while
        # the NameNode is formatted, once), the NameNode, the DataNodes (a DataNode that finds no
        # NameNode retries only after 5 s), and the workers as soon as the master answers (a worker
        # that finds no master retries only after 5-15 s), so that they boot while the DataNodes register
        t = time.monotonic()
        self._run({m.name: Script("touch {f} && {ms} && {fmt} && {nn}", f=self._exclude_path(cluster),
                                  fmt=self._ctl(cluster, m, "format"), nn=self._ctl(cluster, m, "start", "namenode"),
                                  ms=self._ctl(cluster, m, "start", "master"))},
                  "starting the Spark master and the NameNode", 120)
        dns = [n for n in cluster.nodes if "datanode" in self.daemons_for(cluster, n)]
        self._ctl_each(cluster, {n.name: [("start", "datanode")] for n in dns}, "starting DataNodes")
        self.emit(cluster, "start", f"NameNode, Spark master and {len(dns)} DataNode(s) started", m.name, t0)
        self._wait(cluster, "the Spark master", lambda: self.master_state(cluster).status == "ALIVE", timeout, t0)
        self._ctl_each(cluster, {n.name: [("start", "worker")] for n in cluster.nodes}, "starting workers")
        phases["start"] = time.monotonic() - t
        want = {n.address for n in dns}

        def hdfs_ready():
            info = self.datanodes(cluster)
            return not info.safemode and want <= set(info.live)

        self._wait(cluster, f"{len(want)} live DataNode(s) and no safe mode", hdfs_ready, timeout, t0)
        phases["hdfs"] = time.monotonic() - t
        self.emit(cluster, "register", f"HDFS up: {len(want)} DataNode(s) live", m.name, t0)
        self._wait_workers(cluster, cluster.nodes, timeout, t0)
        phases["spark"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        self.emit(cluster, "done", f"deployed in {phases['total']:.1f}s", t0=t0)
        return OpResult(cluster, phases, tuple(n.name for n in cluster.nodes))

    def _wait_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], timeout: float, t0: float) -> None:
        want = {n.address for n in nodes}

        def alive():
            return want <= set(self.master_state(cluster).workers_by_host("ALIVE"))

        self._wait(cluster, f"{len(want)} ALIVE worker(s)", alive, timeout, t0)
        self.emit(cluster, "register", f"{len(want)} worker(s) ALIVE", t0=t0)

    # ================================================================== input / output
    def load_input(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> None:
        t0 = time.monotonic()
        m = cluster.master
        parent = str(PurePosixPath(dest).parent)
        self.emit(cluster, "load", f"{src} -> hdfs:{dest}", m.name, t0)
        self._run({m.name: Script("{mk} && {put}",
                                  mk=self._ctl(cluster, m, "hdfs", FSSHELL, "-mkdir", "-p", parent),
                                  put=self._ctl(cluster, m, "hdfs", FSSHELL, "-put", "-f", src, dest))},
                  f"loading {src} into HDFS", timeout)
        self.emit(cluster, "load", "done", m.name, t0)

    def save_output(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> SavedOutput | None:
        """Copy HDFS ``src`` into ``dest`` on the master host, which must lie outside every cluster
        directory (teardown wipes those).  FsShell verifies each block's CRC as it reads; the copy goes to
        ``dest.fawkes-partial`` first and is renamed only once its size equals what HDFS reports, with a
        ``MANIFEST.sha256`` (one sha256 per file) written beside the files.  None when ``src`` does not
        exist (nothing was written)."""
        t0 = time.monotonic()
        m = cluster.master
        root = str(PurePosixPath(m.root) / "clusters")
        if dest == root or dest.startswith(root + "/"):
            raise FawkesError(f"save to {dest}: inside {root}, which teardown wipes; choose a path outside it")
        tmp = dest.rstrip("/") + ".fawkes-partial"
        self.emit(cluster, "save", f"hdfs:{src} -> {dest}", m.name, t0)
        script = Script(
            "du=$({du} 2>&1); rc=$?; "
            "if [ $rc -ne 0 ]; then case \"$du\" in *'No such file'*) echo 'fawkes-saved: none'; exit 0;; esac; "
            "echo \"$du\" >&2; exit $rc; fi; "
            "want=$(printf '%s\\n' \"$du\" | awk 'NF >= 2 {{print $1; exit}}'); "
            "rm -rf {tmp} && mkdir -p \"$(dirname {tmp})\" && {get} && "
            "(cd {tmp} && find . -type f ! -path ./MANIFEST.sha256 -print0 | sort -z | xargs -0r sha256sum "
            "> MANIFEST.sha256) && "
            "got=$(find {tmp} -type f ! -path {man} -printf '%s\\n' | awk '{{s += $1}} END {{print s + 0}}') && "
            "files=$(wc -l < {man}) && "
            "if [ \"$got\" != \"$want\" ]; then echo \"saved $got bytes, HDFS holds $want\" >&2; exit 3; fi && "
            "rm -rf {dest} && mv {tmp} {dest} && "
            "echo \"fawkes-saved: $files $got $(sha256sum < {dest}/MANIFEST.sha256 | cut -d' ' -f1)\"",
            du=self._ctl(cluster, m, "hdfs", FSSHELL, "-du", "-s", src), tmp=tmp, dest=dest,
            man=f"{tmp}/MANIFEST.sha256", get=self._ctl(cluster, m, "hdfs", FSSHELL, "-get", src, tmp))
        out = self._run({m.name: script}, f"saving hdfs:{src}", timeout)[m.name]
        return self._saved(cluster, out, dest, t0)

    def hdfs(self, cluster: ClusterSpec, tool: str, *args: str, timeout: float = 300.0) -> str:
        """Run an HDFS tool (``fs``, ``dfsadmin``, ``fsck``) on the master host; its stdout."""
        cls = {"fs": FSSHELL, "dfsadmin": DFSADMIN, "fsck": DFSCK}[tool]
        m = cluster.master
        return self._ctl_each(cluster, {m.name: [("hdfs", cls, *args)]}, f"hdfs {tool}", timeout)[m.name]

    # ================================================================== grow
    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        for n in nodes:
            # a core node joining a running cluster replaces a failed one (worker + DataNode, like TC;
            # HDFS re-replicates onto it); it is never removed while the cluster is active
            if n.role is Role.CORE and cluster.master.name == n.name:
                raise FawkesError(f"{n.name}: the master node joins only at deployment")
            if any(o.name == n.name and o.role is not n.role for o in cluster.nodes):
                raise FawkesError(f"{n.name} is already in cluster {cluster.name} as {cluster.node(n.name).role}")
        new = cluster
        for n in nodes:
            new = new.with_node(n)
        names = [n.name for n in nodes]
        self.emit(new, "grow", f"adding {', '.join(f'{n.name} ({n.role})' for n in nodes)}", t0=t0)
        tcs = [n for n in nodes if n.role is Role.TC]
        # a host decommissioned earlier must leave the exclude file before its DataNode starts
        excl = self._read_exclude(new) if tcs else []
        held = {n.address for n in tcs} & set(excl)
        # then one SSH round, every new host at once: write its configs and start its daemons (no
        # per-host hash check first: a joining host gets its whole config anyway)
        rendered = self.render(new, names)
        phases["ssh"] = time.monotonic() - t0  # exclude file read, configs rendered
        t = time.monotonic()
        cmds = {}
        for n in nodes:
            ds = [d for d in self.role_daemons[n.role] if not (d == "datanode" and n.address in held)]
            cmds[n.name] = Script("{w} && {s}", w=self._write_script(self._config_files(rendered[n.name])),
                                  s=Script(" && ".join("{c%d}" % i for i in range(len(ds))),
                                           **{f"c{i}": self._ctl(new, n, "start", d) for i, d in enumerate(ds)}))
        self._run(cmds, "writing configs and starting daemons", 120)
        faults.point("daemons-started")
        phases["start"] = time.monotonic() - t  # configs written and daemons started: one round
        self.emit(new, "start", f"configs written and daemons started on {len(nodes)} node(s)", t0=t0)
        if held:  # their workers start meanwhile; their DataNodes once the NameNode re-read the file
            t = time.monotonic()
            self._set_exclude(new, [a for a in excl if a not in held])
            self._ctl_each(new, {n.name: [("start", "datanode")] for n in tcs if n.address in held},
                           "starting DataNodes")
            phases["exclude"] = time.monotonic() - t
        t = time.monotonic()
        want_dn = {n.address for n in tcs}
        want_w = {n.address for n in nodes}

        def registered():
            ok = want_w <= set(self.master_state(new).workers_by_host("ALIVE"))
            if ok and want_dn:
                live = self.datanodes(new).live
                ok = all(a in live and live[a].admin_state == "In Service" for a in want_dn)
            return ok

        self._wait(new, "new workers ALIVE and DataNodes live", registered, timeout, t0)
        phases["register"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        self.emit(new, "register", f"{len(nodes)} node(s) registered in {phases['total']:.1f}s", t0=t0)
        return OpResult(new, phases, tuple(names))

    # ================================================================== shrink
    def remove_nodes(self, cluster: ClusterSpec, names: Sequence[str], mode: ShrinkMode | None = None, *,
                     timeout: float = 600.0, cancel: threading.Event | None = None,
                     drain_s: float = 2.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        present = [cluster.node(n) for n in names if any(x.name == n for x in cluster.nodes)]
        if not present:  # idempotent: already gone
            return OpResult(cluster, {"total": 0.0}, ())
        for n in present:
            if n.role is Role.CORE:
                raise FawkesError(f"{n.name} is a core node of {cluster.name}: core nodes are never removed "
                                  "while the cluster is active (tear the cluster down instead)")
        modes = {n.name: (mode or SHRINK_MODE[n.role]) for n in present}
        for n in present:
            if n.role is Role.TC and modes[n.name] is ShrinkMode.FP:
                raise FawkesError(f"{n.name} is a TC node: it stores HDFS blocks, so it is removed by DP, never FP")
        fp = [n for n in present if modes[n.name] is ShrinkMode.FP]
        dp = [n for n in present if modes[n.name] is ShrinkMode.DP]
        if fp:  # fast preemption: stop the worker; Spark re-runs its tasks elsewhere
            self.emit(cluster, "fp", f"stopping {', '.join(n.name for n in fp)}", t0=t0)
            self._ctl_each(cluster, {n.name: [("stop", "worker")] for n in fp}, "stopping workers (FP)",
                           if_present=True)
            phases["fp_stop"] = time.monotonic() - t0
        if dp:
            self._decommission(cluster, dp, timeout, cancel, t0, phases, drain_s)
        gone = [n.name for n in fp + dp]
        t = time.monotonic()

        def not_alive():
            alive = self.master_state(cluster).workers_by_host("ALIVE")
            return not ({cluster.node(h).address for h in gone} & set(alive))

        self._wait(cluster, "removed workers to leave the master", not_alive, 60, t0)
        self._ctl_each(cluster, {h: [("wipe",)] for h in gone}, "wiping removed nodes", if_present=True)
        faults.point("node-wiped")
        phases["cleanup"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        new = cluster
        for h in gone:
            new = new.without(h)
        self.emit(new, "shrink", f"removed {', '.join(gone)} in {phases['total']:.1f}s", t0=t0)
        return OpResult(new, phases, tuple(gone))

    def _decommission(self, cluster: ClusterSpec, dp: list[NodeSpec], timeout: float,
                      cancel: threading.Event | None, t0: float, phases: dict[str, float],
                      spark_drain_s: float) -> None:
        names = ", ".join(n.name for n in dp)
        # 1. Spark: decommission the workers (SIGPWR): no new tasks, blocks migrate, running tasks finish
        self.emit(cluster, "dp", f"decommissioning Spark workers on {names}", t0=t0)
        self._run({n.name: Script("{c} || true", c=self._ctl_if_present(cluster, n, "signal", "worker", "PWR"))
                   for n in dp}, "decommissioning workers", 60)
        faults.point("worker-decommissioned")
        # 2. HDFS: exclude file + refreshNodes, then wait for Decommissioned
        with_dn = [n for n in dp if "datanode" in self.role_daemons[n.role]]
        addrs = {n.address for n in with_dn}
        if with_dn:
            t = time.monotonic()
            gone = self._revive_datanodes(cluster, with_dn, t0)
            excl = set(self._read_exclude(cluster))
            info = self.datanodes(cluster)
            told = {a for a in addrs if info.admin_state(a) in ("Decommission In Progress", "Decommissioned")}
            if not (addrs <= excl and addrs - gone <= told):
                # write + refreshNodes unless the NameNode already decommissions them: after a crash
                # between the two, the file alone says nothing about what the NameNode was told
                self._set_exclude(cluster, excl | addrs)
            self.emit(cluster, "dp", f"DataNodes {', '.join(sorted(addrs))} in the exclude file; waiting for "
                      "the NameNode to report them Decommissioned", t0=t0)
            self._wait_decommissioned(cluster, addrs, gone, names, timeout, cancel, t0)
            phases["hdfs_decommission"] = time.monotonic() - t
        # 3. let the decommissioned executors drain (bounded), then stop the workers
        t = time.monotonic()

        def drained():
            # the worker's own count: the master forgets a decommissioned worker's executors at once and
            # never hears of their exit, so its coresused for that worker stays at the last value
            ws = self.master_state(cluster).workers_by_host(None)
            return all(self._worker_cores_used(cluster, n) == 0 for n in dp if n.address in ws)

        try:
            self._wait(cluster, "decommissioned workers to drain", drained, spark_drain_s, t0)
        except FawkesError:
            self.emit(cluster, "dp", f"workers still busy after {spark_drain_s:g}s: stopping them "
                      "(their tasks are re-run)", t0=t0)
        self._ctl_each(cluster, {n.name: [("stop", "worker")] for n in dp}, "stopping decommissioned workers",
                       if_present=True)
        # 4. no local writer is left: the DataNodes stop only once no closed file has a block on them alone
        if with_dn:
            self._verify_nothing_only_on(cluster, addrs, gone, names, timeout, cancel, t0)
            self._ctl_each(cluster, {n.name: [("stop", "datanode")] for n in with_dn},
                           "stopping decommissioned DataNodes", if_present=True)
        faults.point("datanode-stopped")
        phases["dp_stop"] = time.monotonic() - t

    def _revive_datanodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], t0: float) -> set[str]:
        """A leaving DataNode that does not run but whose directory is still there may hold the only copy
        of blocks (it died: an OOM kill, a crash, or a DP stopped it and the coordinator died before the
        wipe).  HDFS reports a dead DataNode in the exclude file "decommissioned" at once, without copying
        anything, so it is started again first: it registers, is decommissioned for real, then stopped.
        Returns the addresses whose cluster directory is gone (nothing of the cluster there)."""
        status = self._status(cluster, nodes)
        gone, down = set(), []
        for n in nodes:
            st = status.get(n.name)
            if st is None:
                continue  # no answer: its facts are unknown; the wait below says so
            if not st:
                gone.add(n.address)  # no cluster directory (already wiped): it holds nothing
            elif not st.get("datanode"):
                down.append(n)
        if down:
            self.emit(cluster, "dp", f"DataNode on {', '.join(n.name for n in down)} not running: started again, "
                      "so that HDFS copies its blocks before it is stopped", t0=t0)
            self._ctl_each(cluster, {n.name: [("start", "datanode")] for n in down}, "starting DataNodes again")
            # the NameNode decommissions a registered DataNode whose block report it has not processed yet
            # at once (it knows no block there): wait until it counts at least the block files on the disk
            held = self._run({n.name: Script("find {d} -name 'blk_*' ! -name '*.meta' 2>/dev/null | wc -l",
                                             d=f"{cluster.cluster_dir(n)}/dfs/data") for n in down},
                             "counting block files", 60)
            want = {n.address: int(held[n.name].strip() or 0) for n in down}

            def reported():
                live = self.datanodes(cluster).live
                return all(a in live and live[a].blocks >= k for a, k in want.items())

            self._wait(cluster, "the restarted DataNodes' block reports", reported, 180, t0)
            self.emit(cluster, "dp", "restarted DataNodes reported their blocks: "
                      + ", ".join(f"{a}: {k}" for a, k in sorted(want.items())), t0=t0)
        return gone

    def _wait_decommissioned(self, cluster: ClusterSpec, addrs: set[str], gone: set[str], names: str,
                             timeout: float, cancel: threading.Event | None, t0: float) -> None:
        """Wait until the NameNode reports every DataNode of ``addrs`` live and Decommissioned (a dead one
        is never taken as done: HDFS marks a dead DataNode decommissioned without copying its blocks)."""
        last: dict[str, str] = {}

        def decommissioned():
            info = self.datanodes(cluster)
            states = {a: info.admin_state(a) for a in addrs}
            if states != last:
                last.clear()
                last.update(states)
                self.emit(cluster, "dp", ", ".join(f"{a}: {s}" for a, s in sorted(states.items())), t0=t0)
            return all(s == "Decommissioned" or a in gone for a, s in states.items())

        try:
            done = self._wait(cluster, "DataNodes to be Decommissioned", decommissioned, timeout, t0, cancel)
        except FawkesError as exc:
            raise DecommissionTimeout(f"DP of {names} did not finish in {timeout:g}s ({last or exc}); "
                                      "nothing was stopped: retry, or recommission to put the nodes back "
                                      "in service") from None
        if not done:  # the caller stopped waiting: HDFS goes on decommissioning, nothing is stopped
            raise DecommissionInterrupted(f"DP of {names}: wait cancelled ({last}); nothing was stopped, "
                                          "the NameNode goes on decommissioning")

    def fsck(self, cluster: ClusterSpec, *, blocks: bool = False) -> str:
        """``fsck /`` from the NameNode's own servlet (no JVM to start); with ``blocks``: every file,
        block and replica location."""
        m = cluster.master
        url = (self.urls(cluster)["namenode_ui"] + f"/fsck?ugi={urllib.parse.quote(m.user)}&path=%2F"
               + ("&files=1&blocks=1&locations=1" if blocks else ""))
        try:
            with urllib.request.urlopen(url, timeout=max(self.http_timeout, 60.0)) as resp:  # noqa: S310
                return resp.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            raise FawkesError(f"GET {url}: {getattr(exc, 'reason', exc)}") from None

    def _verify_nothing_only_on(self, cluster: ClusterSpec, addrs: set[str], gone: set[str], names: str,
                                timeout: float, cancel: threading.Event | None, t0: float) -> None:
        """Before the DataNodes of ``addrs`` stop: no block of a closed file may be on them alone
        (:func:`unsafe_blocks`).  HDFS 2.7 decommissions a node without seeing a block that was still being
        written on it and is finalised later, and never copies from a Decommissioned node: such blocks are
        found here, and the nodes are put back in service and decommissioned again, so that the
        NameNode's new scan copies them."""
        leaving = addrs - gone
        for attempt in range(1, 4):
            unsafe = unsafe_blocks(self.fsck(cluster, blocks=True), leaving)
            if not unsafe:
                return
            self.emit(cluster, "dp", f"{len(unsafe)} block(s) only on the leaving DataNodes ({', '.join(unsafe[:3])}"
                      f"{', ...' if len(unsafe) > 3 else ''}): decommissioning them again (attempt {attempt})", t0=t0)
            excl = set(self._read_exclude(cluster))
            self._set_exclude(cluster, excl - leaving)
            self._wait(cluster, "DataNodes back in service",
                       lambda: all(self.datanodes(cluster).admin_state(a) == "In Service" for a in leaving),
                       timeout, t0, cancel)
            self._set_exclude(cluster, excl | leaving)
            self._wait_decommissioned(cluster, leaving, set(), names, timeout, cancel, t0)
        raise DecommissionTimeout(f"DP of {names}: blocks still only on the leaving DataNodes after 3 "
                                  f"decommissions ({', '.join(unsafe[:3])}); nothing was stopped")

    def recommission(self, cluster: ClusterSpec, names: Sequence[str], *, timeout: float = 180.0) -> OpResult:
        """Take back a DP that has not finished: drop the nodes from the exclude file (refreshNodes puts
        their DataNodes back in service, blocks and all) and restart their Spark workers (a worker told
        to decommission cannot be re-enabled).  A DataNode already Decommissioned stays so: its DP is
        done and only ``remove_nodes`` finishes it."""
        t0 = time.monotonic()
        nodes = [cluster.node(n) for n in names if any(x.name == n for x in cluster.nodes)]
        live = self.datanodes(cluster).live
        excl = set(self._read_exclude(cluster))
        alive = set(self.master_state(cluster).workers_by_host("ALIVE"))

        def state(n: NodeSpec) -> str:
            return live[n.address].admin_state if n.address in live else "not live"

        # being decommissioned: excluded, reported so, or a worker told to decommission (no longer ALIVE)
        back = [n for n in nodes if n.role is not Role.CORE and state(n) != "Decommissioned"
                and (n.address in excl or state(n) == "Decommission In Progress" or n.address not in alive)]
        if not back:
            return OpResult(cluster, {"total": 0.0}, ())
        addrs = {n.address for n in back}
        self.emit(cluster, "recommission", f"putting {', '.join(n.name for n in back)} back in service", t0=t0)
        if excl & addrs:
            self._set_exclude(cluster, excl - addrs)
        restart = [n for n in back if n.address not in alive or n.address in excl]
        self._ctl_each(cluster, {n.name: [("stop", "worker"), ("start", "worker")] for n in restart},
                       "restarting workers")
        self._wait_workers(cluster, back, timeout, t0)
        with_dn = {n.address for n in back if "datanode" in self.role_daemons[n.role]}

        def in_service():
            live = self.datanodes(cluster).live
            return all(a in live and live[a].admin_state == "In Service" for a in with_dn)

        self._wait(cluster, "DataNodes back In Service", in_service, timeout, t0)
        total = time.monotonic() - t0
        self.emit(cluster, "recommission", f"back in service in {total:.1f}s", t0=t0)
        return OpResult(cluster, {"total": total}, tuple(n.name for n in back))

    # ================================================================== teardown
    # ================================================================== reconfigure
    def reconfigure(self, cluster: ClusterSpec) -> dict[str, list[str]]:
        t0 = time.monotonic()
        changed = self.push_configs(cluster)
        plan = {}
        for h, comps in changed.items():
            node = cluster.node(h)
            ds = [d for d in self.daemons_for(cluster, node) if DAEMON_COMPONENT[d] in comps]
            if ds:
                plan[h] = ds
        # restart the HDFS side before Spark, masters before workers
        order = ["namenode", "datanode", "master", "worker"]
        for d in order:
            per = {h: [("stop", d), ("start", d)] for h, ds in plan.items() if d in ds}
            if per:
                self._ctl_each(cluster, per, f"restarting {d}")
                self.emit(cluster, "reconfigure", f"restarted {d} on {', '.join(sorted(per))}", t0=t0)
        if plan:
            self._wait_workers(cluster, [cluster.node(h) for h in plan if "worker" in plan[h]] or [cluster.master],
                               120, t0)
        return plan

    # ================================================================== health, observation and metrics
    def _running(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], daemon: str) -> dict[str, bool | None]:
        return {h: (None if st is None else st.get(daemon, False)) for h, st in self._status(cluster, nodes).items()}

    def observe(self, cluster: ClusterSpec, hosts: Sequence[str] | None = None) -> dict[str, NodeFacts]:
        nodes = list(cluster.nodes) if hosts is None else [cluster.node(h) for h in hosts]
        status = self._status(cluster, nodes, timeout=15)
        problems: list[str] = []
        master = info = None
        try:
            master = self.master_state(cluster)
        except FawkesError as exc:
            problems.append(f"master: {exc}")
        if any("datanode" in self.daemons_for(cluster, n) for n in nodes):
            try:
                info = self.datanodes(cluster)
            except FawkesError as exc:
                problems.append(f"namenode: {exc}")
        out = {}
        for n in nodes:
            want = self.daemons_for(cluster, n)
            st = status.get(n.name)
            daemons = {d: (None if st is None else st.get(d, False)) for d in want}
            reg: dict[str, str | None] = {}
            for d in want:
                if d == "worker":
                    if master is None:
                        reg[d] = None
                    else:  # DEAD entries linger after a restart: ALIVE wins
                        ws = [w.state for w in master.workers if w.host == n.address]
                        reg[d] = "ALIVE" if "ALIVE" in ws else (ws[-1] if ws else "absent")
                elif d == "datanode":
                    reg[d] = None if info is None else info.admin_state(n.address)
                elif d == "master":
                    reg[d] = None if master is None else master.status
                elif d == "namenode":
                    reg[d] = None if info is None else ("safe mode" if info.safemode else "active")
            ok = {"worker": "ALIVE", "datanode": "In Service", "master": "ALIVE", "namenode": "active"}
            up = all(daemons[d] is True and reg[d] == ok[d] for d in want)
            dn = reg.get("datanode", "absent") if "datanode" in want else None
            decommissioned = ("datanode" not in want or dn in ("Decommissioned", "dead, decommissioned")
                              or (dn == "absent" and daemons["datanode"] is False))
            decommissioning = (False if "datanode" not in want else None if dn is None
                               else dn == "Decommission In Progress")
            host_problems = tuple(problems) + ((f"{n.name}: no answer over SSH",) if st is None else ())
            out[n.name] = NodeFacts(n.name, daemons, reg, up, decommissioned, host_problems, decommissioning)
        return out

    def health(self, cluster: ClusterSpec) -> Health:
        out = self.ex.run_each({n.name: Script("if [ -f {s} ]; then /bin/sh {s} status-all; fi",
                                                s=str(PurePosixPath(cluster.cluster_dir(n)) / CONTROL_SCRIPT))
                                for n in cluster.nodes}, timeout=30)
        daemons: dict[str, dict[str, bool]] = {}
        problems = []
        for n in cluster.nodes:
            r = out[n.name]
            running = {ln.split()[0]: ln.split()[1] == "running" for ln in r.stdout.splitlines() if len(ln.split()) >= 2}
            want = self.daemons_for(cluster, n)
            daemons[n.name] = {d: running.get(d, False) for d in want}
            if not r.ok:
                problems.append(f"{n.name}: {r.error}")
            problems += [f"{n.name}: {d} not running" for d in want if r.ok and not running.get(d, False)]
        try:
            alive = self.master_state(cluster).workers_by_host("ALIVE")
            problems += [f"{n.name}: worker not ALIVE in the master" for n in cluster.nodes if n.address not in alive]
        except FawkesError as exc:
            problems.append(f"master: {exc}")
        if "namenode" not in self.master_daemons:
            return Health(not problems, daemons, tuple(problems))
        try:
            info = self.datanodes(cluster)
            if info.safemode:
                problems.append("namenode: in safe mode")
            problems += [f"{n.name}: DataNode not live" for n in cluster.nodes
                         if "datanode" in self.role_daemons[n.role] and n.address not in info.live]
        except FawkesError as exc:
            problems.append(f"namenode: {exc}")
        return Health(not problems, daemons, tuple(problems))

    def metrics(self, cluster: ClusterSpec, *, jobs: Sequence[int] = (), host_stats: bool = False,
                driver_urls: Sequence[str] = ()) -> M.SparkHdfsSample:
        """The neutral sample (:class:`~fawkes.frameworks.sample.FrameworkSample`) with the parsed
        master and NameNode states; ``jobs``: running jobs started by :meth:`job_command`, whose
        drivers' REST APIs give the per-application task counts (``driver_urls``: more such APIs)."""
        errors = []
        master = hdfs = dn = None
        try:
            master = self.master_state(cluster)
        except FawkesError as exc:
            errors.append(str(exc))
        if "namenode" in self.master_daemons:
            try:
                hdfs, dn = self.hdfs_state(cluster), self.datanodes(cluster)
            except FawkesError as exc:
                errors.append(str(exc))
        by_app: dict[str, M.TaskCounts] = {}
        urls = [f"http://{cluster.master.address}:{ui_port(j)}" for j in jobs] + list(driver_urls)
        for base in urls:
            try:
                for app in self._http_json(base.rstrip("/") + "/api/v1/applications"):
                    by_app[app["id"]] = M.parse_stages(
                        self._http_json(f"{base.rstrip('/')}/api/v1/applications/{app['id']}/stages"))
            except (FawkesError, KeyError, TypeError) as exc:
                errors.append(str(exc))
        hosts = {}
        if host_stats:
            res = self.ex.run_each({n.name: Script(M.HOST_STATS_SCRIPT.replace("{interval}", "0.5"),
                                                   path=cluster.cluster_dir(n)) for n in cluster.nodes}, timeout=30)
            for h, r in res.items():
                try:
                    hosts[h] = M.parse_host_stats(r.stdout) if r.ok else None
                except FawkesError as exc:
                    errors.append(f"{h}: {exc}")
                if not r.ok:
                    errors.append(f"{h}: {r.error}")
            hosts = {h: s for h, s in hosts.items() if s is not None}
        return M.spark_hdfs_sample(time.time(), master, hdfs, dn, by_app,
                                   node_of={n.address: n.name for n in cluster.nodes}, hosts=hosts, errors=errors)

    # ================================================================== for drivers (spark-submit)
    def submit_conf(self, cluster: ClusterSpec) -> dict[str, str]:
        """``--conf`` keys for a client-mode driver of this cluster.  ``spark.cores.max`` stays unset, so
        an application takes executors on every worker, the ones a grow adds included."""
        from fawkes.frameworks.render import _options

        u, opt = self.urls(cluster), _options(cluster)
        return {"spark.master": u["master"], "spark.hadoop.fs.defaultFS": self.default_fs(cluster),
                "spark.decommission.enabled": "true", "spark.storage.decommission.enabled": "true",
                "spark.storage.decommission.rddBlocks.enabled": "true",
                "spark.storage.decommission.shuffleBlocks.enabled": "true",
                # a decommissioned executor exits once a migration pass finds nothing left: passes this far apart
                "spark.storage.decommission.replicationReattemptInterval": f"{opt['decommission_retry_s']}s",
                "spark.executor.memory": opt["executor_memory"],
                **({"spark.driver.extraJavaOptions": opt["app_jvm_opts"],
                    "spark.executor.extraJavaOptions": opt["app_jvm_opts"]} if opt["app_jvm_opts"] else {})}

    def default_fs(self, cluster: ClusterSpec) -> str:
        """The file system a job's relative paths resolve in: the cluster's HDFS."""
        return self.urls(cluster)["namenode"]

    def expand(self, cluster: ClusterSpec, arg: str, job, output: str) -> str:
        """A job argument with ``{input}``, ``{output}`` and ``{job}`` replaced (:func:`expand`)."""
        return expand(arg, job, output)

    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str,
                    python: str) -> JobLaunch:
        """The ``spark-submit`` command line of ``job`` on ``cluster``'s master (client mode).  Its
        processes carry the cluster and the job id, so ``ps`` tells them apart: the application is
        named ``fawkes-<cluster>-<job>`` and the driver's and executors' JVMs get
        ``-Dfawkes.job=<cluster>/<job>`` (``ps -ef | grep fawkes.job=etl/7``).  Its driver UI listens
        on :func:`ui_port` of the job id (where :meth:`metrics` reads its task counts)."""
        tag = f"-Dfawkes.job={cluster.name}/{job.id}"
        conf = dict(self.submit_conf(cluster))
        conf.update({
            "spark.driver.host": cluster.master.address, "spark.driver.bindAddress": cluster.master.address,
            "spark.ui.port": str(ui_port(job.id)), "spark.port.maxRetries": "0",
            "spark.driver.memory": driver_memory, "spark.pyspark.python": python,
            "spark.pyspark.driver.python": python,
        })
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):  # the tag, then app_jvm_opts
            conf[key] = " ".join(filter(None, (tag, conf.get(key))))
        fw = cluster.framework
        argv = [f"{fw.spark_home}/bin/spark-submit", "--name", f"fawkes-{cluster.name}-{job.id}"]
        for k, v in conf.items():
            argv += ["--conf", f"{k}={v}"]
        env = {**({"JAVA_HOME": fw.java_home} if fw.java_home else {}), "SPARK_HOME": fw.spark_home}
        return JobLaunch(tuple(argv + [self.expand(cluster, a, job, output) for a in job.argv]), env)

    # ================================================================== suspend and opportunistic hooks
    @classmethod
    def suspend_hooks(cls, cluster: str, root: str) -> SuspendHooks:
        """The worker's pid from the control script's pid file (checked by class), and its ``wipe``."""
        script = str(PurePosixPath(root) / "clusters" / cluster / CONTROL_SCRIPT)
        return SuspendHooks(pid=Script("/bin/sh {s} status worker | awk '$2 == \"running\" {{print $3}}'", s=script),
                            wipe=Script("if [ -f {s} ]; then /bin/sh {s} wipe; fi", s=script))

    def opportunistic_worker(self, cluster: ClusterSpec, node: NodeSpec) -> WorkerLaunch:
        """The borrower's configs on the host (as for a TR node), then ``fawkes-daemon.sh run worker``
        in the foreground; its pid file is the worker daemon's, so a promoted worker is the node's."""
        self.push_configs(cluster, [node.name])
        cdir = PurePosixPath(cluster.cluster_dir(node))
        return WorkerLaunch(argv=("/bin/sh", str(cdir / CONTROL_SCRIPT), "run", "worker"),
                            pidfile=str(cdir / "pids" / "worker.pid"), log_dir=str(cdir / "logs"))


DRIVER = SparkHdfsDriver
