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

from collections.abc import Sequence

from fawkes.errors import FawkesError
from fawkes.frameworks.base import OpResult
from fawkes.frameworks.control import SharedStorage, check_problems
from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script


class SparkDriver(SharedStorage, SparkHdfsDriver):
    kind = "spark"
    map_only_note = "a Spark standalone worker (spark) runs any task, it cannot be confined to map tasks"
    roles = (Role.CORE, Role.TR)
    removal_modes = frozenset({"fp", "graceful", "suspend"})
    signals = frozenset({"tasks", "slots", "job_progress"})
    storage_name = "shared storage"
    role_daemons = {Role.CORE: ("worker",), Role.TR: ("worker",)}
    master_daemons = ("master",)
    path_options = ("spark_home", "shared_dir")
    required_paths = ("spark_home", "shared_dir")

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
    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        bad = [n.name for n in nodes if n.role is Role.TC]
        if bad:
            raise FawkesError(f"cluster {cluster.name}: kind spark stores nothing on its nodes, so it has no "
                              f"transient-core nodes ({', '.join(bad)}): grow it by transient nodes")
        return super().add_nodes(cluster, nodes, timeout=timeout)

    def master_ready(self, cluster: ClusterSpec) -> bool:
        return self.master_state(cluster).status == "ALIVE"

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
