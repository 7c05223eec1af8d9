"""Spark standalone on shared storage: the ``spark`` framework kind.

Inside SLURM allocations and most lab clusters Spark reads and writes a file system every host sees
(NFS, Lustre), not an HDFS on the compute nodes.  An MR-cluster of this kind:

* the first core node runs the Spark master, every node a Spark worker; nothing stores data;
* its input and output live under ``<shared_dir>/<cluster>/`` (the framework's ``--shared-dir``, the
  same path on every host): ``input/`` (``load_input`` copies the cluster's input there) and
  ``output/<job>`` (jobs write there: ``{input}`` / ``{output}`` expand to ``file://`` paths);
* with no storage on the nodes a transient-core node would be a transient one: the kind offers the
  roles core and transient only (``grow_type: transient-core`` is refused for its clusters), and
  removes nodes by FP, graceful (Spark decommissioning) or suspend, never DP;
* its samples feed task and slot counts (TD, JD, ...), not stored or written bytes (DU, PU, RU).

Everything else (configs, the control script, grow, shrink, teardown, observation) is the Spark half
of :mod:`fawkes.frameworks.spark_hdfs`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import PurePosixPath

from fawkes.errors import FawkesError
from fawkes.frameworks.base import OpResult, SavedOutput
from fawkes.frameworks.control import check_problems, refuse_save_inside_clusters, save_shared_script
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script


class SparkDriver(SparkHdfsDriver):
    kind = "spark"
    roles = (Role.CORE, Role.TR)
    removal_modes = frozenset({"fp", "graceful", "suspend"})
    signals = frozenset({"tasks", "slots", "job_progress"})
    storage_name = "shared storage"
    role_daemons = {Role.CORE: ("worker",), Role.TR: ("worker",)}
    master_daemons = ("master",)
    path_options = ("spark_home", "shared_dir")
    required_paths = ("spark_home", "shared_dir")

    # ================================================================== paths
    @staticmethod
    def data_dir(cluster: ClusterSpec) -> str:
        """Where the cluster's input and output live on the shared file system."""
        shared = cluster.framework.shared_dir
        if not shared:
            raise FawkesError(f"framework {cluster.framework.name}: kind spark needs --shared-dir")
        return str(PurePosixPath(shared) / cluster.name)

    def _shared(self, cluster: ClusterSpec, path: str) -> str:
        """A cluster path (``/input``, ``/output/7``) on the shared file system."""
        return self.data_dir(cluster) + "/" + path.lstrip("/")

    # ================================================================== framework check
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        """Spark's files, Java, and the shared directory: present and writable on every host."""
        if not framework.shared_dir:
            return {h: ["kind spark needs --shared-dir (a directory every host sees)"] for h in hosts}
        script = Script("test -f {sc} || echo {m1}; test -d {jars} || echo {m2}; "
                        "{j} -version >/dev/null 2>&1 || echo {m3}; "
                        "test -d {d} && test -w {d} || echo {m4}",
                        sc=framework.spark_home + "/bin/spark-class", jars=framework.spark_home + "/jars",
                        j=framework.java, d=framework.shared_dir,
                        m1=f"missing Spark home: {framework.spark_home}/bin/spark-class",
                        m2=f"missing Spark jars: {framework.spark_home}/jars",
                        m3=f"java does not run: {framework.java} -version failed",
                        m4=f"shared dir {framework.shared_dir}: not a writable directory")
        return check_problems(executor, hosts, script)

    # ================================================================== deploy, grow
    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        m = cluster.master
        self.emit(cluster, "deploy", f"{len(cluster.nodes)} node(s), master {m.name} ({m.address})", t0=t0)
        self.push_configs(cluster)
        phases = {"configs": time.monotonic() - t0}
        self._run({m.name: Script("mkdir -p {i} {o} && {ms}", i=self._shared(cluster, "input"),
                                  o=self._shared(cluster, "output"), ms=self._ctl(cluster, m, "start", "master"))},
                  "starting the Spark master", 120)
        self._wait(cluster, "the Spark master", lambda: self.master_state(cluster).status == "ALIVE", timeout, t0)
        self._ctl_each(cluster, {n.name: [("start", "worker")] for n in cluster.nodes}, "starting workers")
        self._wait_workers(cluster, cluster.nodes, timeout, t0)
        phases["total"] = time.monotonic() - t0
        self.emit(cluster, "done", f"deployed in {phases['total']:.1f}s", t0=t0)
        return OpResult(cluster, phases, tuple(n.name for n in cluster.nodes))

    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        bad = [n.name for n in nodes if n.role is Role.TC]
        if bad:
            raise FawkesError(f"cluster {cluster.name}: kind spark stores nothing on its nodes, so it has no "
                              f"transient-core nodes ({', '.join(bad)}): grow it by transient nodes")
        return super().add_nodes(cluster, nodes, timeout=timeout)

    # ================================================================== input / output
    def load_input(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> None:
        """Copy ``src`` (a file or directory the master host sees) to ``<shared_dir>/<cluster><dest>``."""
        t0 = time.monotonic()
        m, target = cluster.master, self._shared(cluster, dest)
        self.emit(cluster, "load", f"{src} -> {target}", m.name, t0)
        self._run({m.name: Script("rm -rf {t} && mkdir -p \"$(dirname {t})\" && cp -R {s} {t}", s=src, t=target)},
                  f"loading {src}", timeout)
        self.emit(cluster, "load", "done", m.name, t0)

    def save_output(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> SavedOutput | None:
        """Copy ``<shared_dir>/<cluster><src>`` to ``dest`` on the master host (through
        ``dest.fawkes-partial``, renamed once its size equals the source's), with a ``MANIFEST.sha256``."""
        t0 = time.monotonic()
        m, source = cluster.master, self._shared(cluster, src)
        refuse_save_inside_clusters(m, dest)
        self.emit(cluster, "save", f"{source} -> {dest}", m.name, t0)
        out = self._run({m.name: save_shared_script(source, dest)}, f"saving {source}", timeout)[m.name]
        return self._saved(cluster, out, dest, t0)

    def teardown(self, cluster: ClusterSpec, *, wipe: bool = True, timeout: float = 120.0) -> OpResult:
        """Stop every daemon (and delete the cluster's directories on the nodes; with ``wipe``, its
        directory on the shared file system too, once its output was saved elsewhere)."""
        res = super().teardown(cluster, wipe=wipe, timeout=timeout)
        if wipe and cluster.framework.shared_dir:
            self._run({cluster.master.name: Script("rm -rf {d}", d=self.data_dir(cluster))},
                      "deleting the cluster's shared directory", timeout)
        return res

    # ================================================================== jobs
    def default_fs(self, cluster: ClusterSpec) -> str:
        return "file:///"

    def expand(self, cluster: ClusterSpec, arg: str, job, output: str) -> str:
        """``{input}``: the job's input under the cluster's shared directory (a ``file://`` path; an
        absolute input path is taken as it is), ``{output}``: ``output`` there, ``{job}``: the job id."""
        inp = job.input_path or ""
        if inp and "://" not in inp:
            inp = "file://" + (self._shared(cluster, inp) if not inp.startswith(self.data_dir(cluster)) else inp)
        return (arg.replace("{input}", inp).replace("{output}", "file://" + self._shared(cluster, output))
                .replace("{job}", str(job.id)))


DRIVER = SparkDriver
