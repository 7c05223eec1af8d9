"""HDFS, the storage half of the kinds that keep their data on the cluster's own nodes (spark-hdfs,
flink-hdfs): a NameNode on the master, a DataNode on every core and transient-core node.

:class:`HdfsStorage` is mixed in before a :class:`~fawkes.frameworks.control.ControlScriptDriver` and holds
everything HDFS (the NameNode's JMX, the exclude file, loading input and saving output, the DP of a
node's DataNode with its safety checks) and the orchestration of deploy, grow, shrink, recommission,
reconfigure, observe and health around it.  The kind's compute half (Spark's master and workers, Flink's
JobManager and TaskManagers) plugs in through a few hooks: :attr:`compute_master` and :attr:`worker` (its
daemon names), :meth:`master_ready`, :meth:`workers_alive`, :meth:`compute_registration`, and, around a
DP, :meth:`_decommission_workers` and :meth:`_drain_workers`.

Shrinking (docs/frameworks.md): FP stops a node's worker (its tasks re-run elsewhere).  DP tells the
workers to decommission (where the compute half can), decommissions the DataNodes (exclude file +
``DFSAdmin -refreshNodes``), lets the workers drain (bounded), stops them, and stops a DataNode only once
the NameNode reports it live and ``Decommissioned`` and no closed file has a block on the leaving nodes
alone; with a timeout, and cancellable.  Core nodes are never removed while the cluster is active.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from fawkes import faults
from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M
from fawkes.frameworks.base import (DecommissionInterrupted, DecommissionTimeout, Health, NodeFacts, OpResult,
                                    SavedOutput)
from fawkes.frameworks.control import check_saved_script
from fawkes.frameworks.render import EXCLUDE_FILE, cluster_ports, render_exclude
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import SHRINK_MODE, Role, ShrinkMode
from fawkes.ssh.shell import Script

FSSHELL = "org.apache.hadoop.fs.FsShell"
DFSADMIN = "org.apache.hadoop.hdfs.tools.DFSAdmin"
DFSCK = "org.apache.hadoop.hdfs.tools.DFSck"
INPUT_ROOT = "/input"  # where a relative --input lives in HDFS
HDFS_DAEMONS = ("namenode", "datanode")


def hdfs_path(path: str) -> str:
    """A job's input path in HDFS: an absolute path as it is, a relative one under :data:`INPUT_ROOT`."""
    return path if path.startswith("/") else f"{INPUT_ROOT}/{path}"


def hdfs_checks(framework: FrameworkPaths) -> list[tuple[str, str, str]]:
    """What ``check_framework`` tests of an HDFS installation: (what, path, ``test`` flag)."""
    if framework.hdfs_jars:
        return [("HDFS jars", framework.hdfs_jars + "/jars/hadoop-hdfs-2.7.3.jar", "-f"),
                ("HDFS webapps", framework.hdfs_jars + "/webapps/hdfs", "-d")]
    return [("Hadoop home", framework.hadoop_home + "/share/hadoop/hdfs", "-d")]


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


class HdfsStorage:
    """The HDFS half of a kind, and the operations that interleave it with the kind's compute half."""

    #: the compute half's daemons: its master (on the master node) and its worker (on every node)
    compute_master: str = "master"
    worker: str = "worker"
    #: the HDFS daemons' named ports (render.PORT_OFFSETS), merged into each kind's ``daemon_ports``
    hdfs_ports: Mapping[str, tuple[str, ...]] = {"namenode": ("nn_rpc", "nn_http"),
                                                  "datanode": ("dn_xfer", "dn_http", "dn_ipc")}
    #: what the compute half's registration of a healthy master and worker reads (``compute_registration``)
    compute_ok: Mapping[str, str] = {"master": "ALIVE", "worker": "ALIVE"}
    #: the config component (templates) each daemon restarts on (``reconfigure``)
    daemon_component: Mapping[str, str] = {"namenode": "hdfs", "datanode": "hdfs"}
    storage_name = "HDFS"

    # ------------------------------------------------------------------ the compute half's hooks
    def master_ready(self, cluster: ClusterSpec) -> bool:
        raise NotImplementedError

    def workers_alive(self, cluster: ClusterSpec) -> set[str]:
        """The addresses of the workers the compute master counts as registered and usable now."""
        raise NotImplementedError

    def compute_registration(self, cluster: ClusterSpec) -> tuple[str, dict[str, str]]:
        """What the compute master says of itself and of the worker on each address (``observe``)."""
        raise NotImplementedError

    def _decommission_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], t0: float) -> None:
        """DP, step 1: tell the leaving workers to take no new tasks (where the compute half can)."""

    def _drain_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], drain_s: float, t0: float) -> None:
        """DP, step 3: let the leaving workers finish what they run, for at most ``drain_s`` seconds."""

    # ------------------------------------------------------------------ HDFS
    def hdfs_urls(self, cluster: ClusterSpec) -> dict[str, str]:
        p = cluster_ports(cluster)
        m = cluster.master.address
        return {"namenode": f"hdfs://{m}:{p['nn_rpc']}", "namenode_ui": f"http://{m}:{p['nn_http']}"}

    def _jmx(self, cluster: ClusterSpec, bean: str):
        return self._http_json(self.hdfs_urls(cluster)["namenode_ui"] + f"/jmx?qry=Hadoop:service=NameNode,name={bean}")

    def hdfs_state(self, cluster: ClusterSpec) -> M.HdfsState:
        return M.parse_fsnamesystem_state(self._jmx(cluster, "FSNamesystemState"))

    def datanodes(self, cluster: ClusterSpec) -> M.NameNodeInfo:
        return M.parse_namenode_info(self._jmx(cluster, "NameNodeInfo"))

    def default_fs(self, cluster: ClusterSpec) -> str:
        """The file system a job's relative paths resolve in: the cluster's HDFS."""
        return self.hdfs_urls(cluster)["namenode"]

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

    def restore_output(self, cluster: ClusterSpec, saved: SavedOutput, dest: str, *, timeout: float = 600.0) -> None:
        """Put the checked saved output (:func:`check_saved_script`) back into HDFS at ``dest`` (whatever
        it held replaced), without its manifest."""
        t0 = time.monotonic()
        m = cluster.master
        self.emit(cluster, "restore", f"{saved.path} -> hdfs:{dest}", m.name, t0)
        self._run({m.name: Script(
            "{check} && {mk} && {rm} && {put} && {rmman}", check=check_saved_script(saved),
            mk=self._ctl(cluster, m, "hdfs", FSSHELL, "-mkdir", "-p", str(PurePosixPath(dest).parent)),
            rm=self._ctl(cluster, m, "hdfs", FSSHELL, "-rm", "-r", "-f", "-skipTrash", dest),
            put=self._ctl(cluster, m, "hdfs", FSSHELL, "-put", saved.path, dest),
            rmman=self._ctl(cluster, m, "hdfs", FSSHELL, "-rm", "-skipTrash", f"{dest}/MANIFEST.sha256"))},
            f"restoring {saved.path} into HDFS", timeout)
        self.emit(cluster, "restore", "done", m.name, t0)

    def hdfs(self, cluster: ClusterSpec, tool: str, *args: str, timeout: float = 300.0) -> str:
        """Run an HDFS tool (``fs``, ``dfsadmin``, ``fsck``) on the master host; its stdout."""
        cls = {"fs": FSSHELL, "dfsadmin": DFSADMIN, "fsck": DFSCK}[tool]
        m = cluster.master
        return self._ctl_each(cluster, {m.name: [("hdfs", cls, *args)]}, f"hdfs {tool}", timeout)[m.name]

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
        url = (self.hdfs_urls(cluster)["namenode_ui"] + f"/fsck?ugi={urllib.parse.quote(m.user)}&path=%2F"
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


    # ------------------------------------------------------------------ deploy
    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        m = cluster.master
        self.emit(cluster, "deploy", f"{len(cluster.nodes)} node(s), master {m.name} ({m.address})", t0=t0)
        self._refuse_busy_ports(cluster, cluster.nodes)
        self.push_configs(cluster)
        phases["configs"] = time.monotonic() - t0
        # start everything, then wait for all of it: the compute master (it needs no HDFS: it boots while
        # the NameNode is formatted, once), the NameNode, the DataNodes (a DataNode that finds no
        # NameNode retries only after 5 s), and the workers as soon as the compute master answers (a
        # worker that finds none retries only after seconds), so that they boot while the DataNodes register
        t = time.monotonic()
        self._run({m.name: Script("touch {f} && {ms} && {fmt} && {nn}", f=self._exclude_path(cluster),
                                  fmt=self._ctl(cluster, m, "format"), nn=self._ctl(cluster, m, "start", "namenode"),
                                  ms=self._ctl(cluster, m, "start", self.compute_master))},
                  f"starting the {self.compute_master} and the NameNode", 120)
        dns = [n for n in cluster.nodes if "datanode" in self.daemons_for(cluster, n)]
        self._ctl_each(cluster, {n.name: [("start", "datanode")] for n in dns}, "starting DataNodes")
        self.emit(cluster, "start", f"NameNode, {self.compute_master} and {len(dns)} DataNode(s) started", m.name, t0)
        self._wait(cluster, f"the {self.compute_master}", lambda: self.master_ready(cluster), timeout, t0)
        self._ctl_each(cluster, {n.name: [("start", self.worker)] for n in cluster.nodes}, f"starting {self.worker}s")
        phases["start"] = time.monotonic() - t
        want = {n.address for n in dns}

        def hdfs_ready():
            info = self.datanodes(cluster)
            return not info.safemode and want <= set(info.live)

        self._wait(cluster, f"{len(want)} live DataNode(s) and no safe mode", hdfs_ready, timeout, t0)
        phases["hdfs"] = time.monotonic() - t
        self.emit(cluster, "register", f"HDFS up: {len(want)} DataNode(s) live", m.name, t0)
        self._wait_workers(cluster, cluster.nodes, timeout, t0)
        phases["compute"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        self.emit(cluster, "done", f"deployed in {phases['total']:.1f}s", t0=t0)
        return OpResult(cluster, phases, tuple(n.name for n in cluster.nodes))

    def _wait_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], timeout: float, t0: float) -> None:
        want = {n.address for n in nodes}
        self._wait(cluster, f"{len(want)} registered {self.worker}(s)", lambda: want <= self.workers_alive(cluster),
                   timeout, t0)
        self.emit(cluster, "register", f"{len(want)} {self.worker}(s) registered", t0=t0)

    # ------------------------------------------------------------------ grow
    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        # a core node joining a running cluster replaces a failed one (worker + DataNode, like TC; HDFS
        # re-replicates onto it); it is never removed while the cluster is active
        new, names = self._joining(cluster, nodes, t0)
        self._refuse_busy_ports(new, nodes)
        tcs = [n for n in nodes if "datanode" in self.role_daemons[n.role]]
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
            ok = want_w <= self.workers_alive(new)
            if ok and want_dn:
                live = self.datanodes(new).live
                ok = all(a in live and live[a].admin_state == "In Service" for a in want_dn)
            return ok

        self._wait(new, f"new {self.worker}s registered and DataNodes live", registered, timeout, t0)
        phases["register"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        self.emit(new, "register", f"{len(nodes)} node(s) registered in {phases['total']:.1f}s", t0=t0)
        return OpResult(new, phases, tuple(names))

    # ------------------------------------------------------------------ shrink
    def remove_nodes(self, cluster: ClusterSpec, names: Sequence[str], mode: ShrinkMode | None = None, *,
                     timeout: float = 600.0, cancel: threading.Event | None = None,
                     drain_s: float = 2.0) -> OpResult:
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        present = self._leaving(cluster, names)
        if not present:  # idempotent: already gone
            return OpResult(cluster, {"total": 0.0}, ())
        modes = {n.name: (mode or SHRINK_MODE[n.role]) for n in present}
        for n in present:
            if "datanode" in self.role_daemons[n.role] and modes[n.name] is ShrinkMode.FP:
                raise FawkesError(f"{n.name} is a {n.role} node: it stores HDFS blocks, so it is removed by DP, "
                                  "never FP")
        fp = [n for n in present if modes[n.name] is ShrinkMode.FP]
        dp = [n for n in present if modes[n.name] is ShrinkMode.DP]
        if fp:  # fast preemption: stop the worker; its tasks re-run elsewhere
            self.emit(cluster, "fp", f"stopping {', '.join(n.name for n in fp)}", t0=t0)
            self._ctl_each(cluster, {n.name: [("stop", self.worker)] for n in fp}, f"stopping {self.worker}s (FP)",
                           if_present=True)
            phases["fp_stop"] = time.monotonic() - t0
        if dp:
            self._decommission(cluster, dp, timeout, cancel, t0, phases, drain_s)
        gone = [n.name for n in fp + dp]
        addrs = {cluster.node(h).address for h in gone}
        return self._gone(cluster, gone, lambda: addrs & self.workers_alive(cluster),
                          f"removed {self.worker}s to leave the {self.compute_master}", t0, phases)

    def _decommission(self, cluster: ClusterSpec, dp: list[NodeSpec], timeout: float,
                      cancel: threading.Event | None, t0: float, phases: dict[str, float],
                      drain_s: float) -> None:
        names = ", ".join(n.name for n in dp)
        # 1. the compute half: no new tasks on the leaving workers (where it can)
        self._decommission_workers(cluster, dp, t0)
        faults.point("worker-decommissioned")
        # 2. HDFS: exclude file + refreshNodes, then wait for Decommissioned
        with_dn = [n for n in dp if "datanode" in self.role_daemons[n.role]]
        addrs = {n.address for n in with_dn}
        gone: set[str] = set()
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
        # 3. let the leaving workers drain (bounded), then stop them
        t = time.monotonic()
        self._drain_workers(cluster, dp, drain_s, t0)
        self._ctl_each(cluster, {n.name: [("stop", self.worker)] for n in dp}, f"stopping decommissioned {self.worker}s",
                       if_present=True)
        # 4. no local writer is left: the DataNodes stop only once no closed file has a block on them alone
        if with_dn:
            self._verify_nothing_only_on(cluster, addrs, gone, names, timeout, cancel, t0)
            self._ctl_each(cluster, {n.name: [("stop", "datanode")] for n in with_dn},
                           "stopping decommissioned DataNodes", if_present=True)
        faults.point("datanode-stopped")
        phases["dp_stop"] = time.monotonic() - t

    def recommission(self, cluster: ClusterSpec, names: Sequence[str], *, timeout: float = 180.0) -> OpResult:
        """Take back a DP that has not finished: drop the nodes from the exclude file (refreshNodes puts
        their DataNodes back in service, blocks and all) and restart their workers (a Spark worker told
        to decommission cannot be re-enabled).  A DataNode already Decommissioned stays so: its DP is
        done and only ``remove_nodes`` finishes it."""
        t0 = time.monotonic()
        nodes = [cluster.node(n) for n in names if any(x.name == n for x in cluster.nodes)]
        live = self.datanodes(cluster).live
        excl = set(self._read_exclude(cluster))
        alive = self.workers_alive(cluster)

        def state(n: NodeSpec) -> str:
            return live[n.address].admin_state if n.address in live else "not live"

        # being decommissioned: excluded, reported so, or a worker told to decommission (no longer alive)
        back = [n for n in nodes if n.role is not Role.CORE and state(n) != "Decommissioned"
                and (n.address in excl or state(n) == "Decommission In Progress" or n.address not in alive)]
        if not back:
            return OpResult(cluster, {"total": 0.0}, ())
        addrs = {n.address for n in back}
        self.emit(cluster, "recommission", f"putting {', '.join(n.name for n in back)} back in service", t0=t0)
        if excl & addrs:
            self._set_exclude(cluster, excl - addrs)
        restart = [n for n in back if n.address not in alive or n.address in excl]
        self._ctl_each(cluster, {n.name: [("stop", self.worker), ("start", self.worker)] for n in restart},
                       f"restarting {self.worker}s")
        self._wait_workers(cluster, back, timeout, t0)
        with_dn = {n.address for n in back if "datanode" in self.role_daemons[n.role]}

        def in_service():
            live = self.datanodes(cluster).live
            return all(a in live and live[a].admin_state == "In Service" for a in with_dn)

        self._wait(cluster, "DataNodes back In Service", in_service, timeout, t0)
        total = time.monotonic() - t0
        self.emit(cluster, "recommission", f"back in service in {total:.1f}s", t0=t0)
        return OpResult(cluster, {"total": total}, tuple(n.name for n in back))

    # ------------------------------------------------------------------ reconfigure
    def reconfigure(self, cluster: ClusterSpec) -> dict[str, list[str]]:
        t0 = time.monotonic()
        changed = self.push_configs(cluster)
        plan = {}
        for h, comps in changed.items():
            node = cluster.node(h)
            ds = [d for d in self.daemons_for(cluster, node) if self.daemon_component[d] in comps]
            if ds:
                plan[h] = ds
        # restart the HDFS side before the compute half, masters before workers
        for d in ("namenode", "datanode", self.compute_master, self.worker):
            per = {h: [("stop", d), ("start", d)] for h, ds in plan.items() if d in ds}
            if per:
                self._ctl_each(cluster, per, f"restarting {d}")
                self.emit(cluster, "reconfigure", f"restarted {d} on {', '.join(sorted(per))}", t0=t0)
        if plan:
            self._wait_workers(cluster, [cluster.node(h) for h in plan if self.worker in plan[h]] or [cluster.master],
                               120, t0)
        return plan

    # ------------------------------------------------------------------ observation and health
    def observe(self, cluster: ClusterSpec, hosts: Sequence[str] | None = None) -> dict[str, NodeFacts]:
        nodes = list(cluster.nodes) if hosts is None else [cluster.node(h) for h in hosts]
        status = self._status(cluster, nodes, timeout=15)
        problems: list[str] = []
        compute = info = None
        try:
            compute = self.compute_registration(cluster)
        except FawkesError as exc:
            problems.append(f"{self.compute_master}: {exc}")
        if any("datanode" in self.daemons_for(cluster, n) for n in nodes):
            try:
                info = self.datanodes(cluster)
            except FawkesError as exc:
                problems.append(f"namenode: {exc}")
        ok = {**self.compute_ok, "datanode": "In Service", "namenode": "active"}
        out = {}
        for n in nodes:
            want = self.daemons_for(cluster, n)
            st = status.get(n.name)
            daemons = {d: (None if st is None else st.get(d, False)) for d in want}
            reg: dict[str, str | None] = {}
            for d in want:
                if d == self.worker:
                    reg[d] = None if compute is None else compute[1].get(n.address, "absent")
                elif d == self.compute_master:
                    reg[d] = None if compute is None else compute[0]
                elif d == "datanode":
                    reg[d] = None if info is None else info.admin_state(n.address)
                elif d == "namenode":
                    reg[d] = None if info is None else ("safe mode" if info.safemode else "active")
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
        status = self._status(cluster, cluster.nodes)
        daemons: dict[str, dict[str, bool]] = {}
        problems = []
        for n in cluster.nodes:
            st = status.get(n.name)
            want = self.daemons_for(cluster, n)
            daemons[n.name] = {d: bool(st and st.get(d, False)) for d in want}
            if st is None:
                problems.append(f"{n.name}: no answer over SSH")
            problems += [f"{n.name}: {d} not running" for d in want if st is not None and not st.get(d, False)]
        try:
            alive = self.workers_alive(cluster)
            problems += [f"{n.name}: {self.worker} not registered with the {self.compute_master}"
                         for n in cluster.nodes if n.address not in alive]
        except FawkesError as exc:
            problems.append(f"{self.compute_master}: {exc}")
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

    def host_stats(self, cluster: ClusterSpec, errors: list[str]) -> dict:
        """Per node, the host's CPU, memory and disk as the sampler reads them (``metrics(host_stats=True)``)."""
        hosts = {}
        res = self.ex.run_each({n.name: Script(M.HOST_STATS_SCRIPT.replace("{interval}", "0.5"),
                                               path=cluster.cluster_dir(n)) for n in cluster.nodes}, timeout=30)
        for h, r in res.items():
            try:
                hosts[h] = M.parse_host_stats(r.stdout) if r.ok else None
            except FawkesError as exc:
                errors.append(f"{h}: {exc}")
            if not r.ok:
                errors.append(f"{h}: {r.error}")
        return {h: s for h, s in hosts.items() if s is not None}
