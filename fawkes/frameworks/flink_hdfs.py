"""Flink standalone over its own HDFS: the ``flink-hdfs`` framework kind.

An MR-cluster of this kind (docs/frameworks.md, "Kind flink-hdfs"):

* the first core node runs the JobManager (a standalone *session* cluster: ``jobmanager.sh
  start-foreground``, RPC on 6123, REST and web UI on 8081, both on the master's address) and the
  NameNode; every node runs a TaskManager (``taskmanager.sh start-foreground``, one slot per core);
  core and transient-core nodes a DataNode too: the HDFS half is :mod:`fawkes.frameworks.hdfs`, as for
  ``spark-hdfs``;
* Flink comes from its distribution on every host (``--flink-home``: in the lab the PyPI wheels
  ``apache-flink`` and ``apache-flink-libraries`` unpacked by ``fawkes framework dists``); each host's
  ``conf/`` holds the rendered ``config.yaml``, ``flink-env.sh`` (``FLINK_CONF_DIR``, ``FLINK_LOG_DIR``,
  ``HADOOP_CLASSPATH`` for ``hdfs://``) and log4j2 files;
* a job is ``flink run [OPTIONS] JAR ARGS`` on the master (attached: the client lives as long as the
  job), named ``fawkes-<cluster>-<job>``; ``{input}`` / ``{output}`` expand to ``hdfs://`` URIs on the
  cluster's NameNode.  A batch job gets the slots of TaskManagers that join while it runs;
* removal: FP stops a TaskManager (Flink restarts the regions whose tasks ran there: ``region``
  failover, a fixed-delay restart strategy with many attempts); DP of a transient-core node
  decommissions its DataNode first, then stops its TaskManager.  Flink has no graceful TaskManager
  decommission and no suspend here;
* samples, from the JobManager's REST API: a task is a Flink subtask (``/jobs/overview``: created,
  scheduled and reconciling are pending, deploying, initializing and running are running, finished
  are done), a slot a TaskManager slot (``/overview``), stored bytes the NameNode's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence

from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M
from fawkes.frameworks.base import JobLaunch, SuspendHooks, WorkerLaunch
from fawkes.frameworks.control import ControlScriptDriver, check_problems
from fawkes.frameworks.hdfs import HdfsStorage, hdfs_checks, hdfs_path
from fawkes.frameworks.render import _options, archives, cluster_dirs, cluster_ports
from fawkes.frameworks.sample import FrameworkSample, TaskCounts, sum_tasks
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script

_TM_HOST = re.compile(r"@([^:/@]+):\d+/")
_PENDING = ("created", "scheduled", "reconciling")
_RUNNING = ("deploying", "initializing", "running")
_TERMINAL = frozenset({"FINISHED", "CANCELED", "FAILED"})


def job_tasks(job: Mapping) -> TaskCounts:
    """One entry of ``/jobs/overview`` as task counts."""
    t = job.get("tasks") or {}
    pending = sum(int(t.get(k, 0)) for k in _PENDING)
    running = sum(int(t.get(k, 0)) for k in _RUNNING)
    return TaskCounts(total=pending + running, running=running, pending=pending,
                      completed=int(t.get("finished", 0)), failed=int(t.get("failed", 0)))


def taskmanager_hosts(doc: Mapping) -> dict[str, dict]:
    """``/taskmanagers``: each registered TaskManager's entry by its host's address (from its RPC path)."""
    out = {}
    for tm in doc.get("taskmanagers") or ():
        m = _TM_HOST.search(str(tm.get("path", "")))
        if m:
            out[m.group(1)] = tm
    return out


def flink_sample(t: float, overview: Mapping | None, jobs: Sequence[Mapping] | None, hdfs: M.HdfsState | None,
                 datanodes: M.NameNodeInfo | None, *, node_of: Mapping[str, str] | None = None,
                 hosts: Mapping | None = None, errors: Sequence[str] = ()) -> FrameworkSample:
    """The neutral sample of one Flink session cluster and its HDFS: per job (by Flink's job id) the task
    counts of the jobs not finished, slots from the JobManager's overview, stored bytes from the NameNode."""
    active = [j for j in jobs or () if str(j.get("state", "")).upper() not in _TERMINAL]
    by_job = {str(j.get("jid")): job_tasks(j) for j in active}
    ov = overview or {}
    slots = float(ov.get("slots-total", 0))
    node_of = node_of or {}
    stored = {node_of[a]: d.used for a, d in (datanodes.live.items() if datanodes else ()) if a in node_of}
    return FrameworkSample(
        time=t, tasks=sum_tasks(by_job.values()), tasks_by_job=by_job, slots=slots,
        busy_slots=max(0.0, slots - float(ov.get("slots-available", 0))),
        unfinished_jobs=len(active), completed_jobs=int(ov.get("jobs-finished", 0)),
        stored_bytes=float(hdfs.capacity_used) if hdfs else None,
        storage_capacity=float(hdfs.capacity_total) if hdfs else 0.0,
        stored_by_node=stored, hosts=dict(hosts or {}), errors=tuple(errors))


class FlinkHdfsDriver(HdfsStorage, ControlScriptDriver):
    kind = "flink-hdfs"
    roles = (Role.CORE, Role.TC, Role.TR)
    removal_modes = frozenset({"fp", "dp"})
    default_shrink_mode = "fp"
    signals = frozenset({"tasks", "slots", "stored_bytes", "job_progress"})
    storage_name = "HDFS"
    job_id_pattern = "[0-9a-f]\\{32\\}"  # a Flink JobID, as `flink run` prints it ("submitted with JobID ...")
    map_only_note = "a Flink TaskManager (flink-hdfs) runs any task of its jobs, it cannot be confined to map tasks"
    role_daemons = {Role.CORE: ("datanode", "taskmanager"), Role.TC: ("datanode", "taskmanager"),
                    Role.TR: ("taskmanager",)}
    master_daemons = ("namenode", "jobmanager")
    path_options = ("flink_home", "hadoop_home", "hdfs_jars")
    required_paths = ("flink_home",)
    compute_master, worker = "jobmanager", "taskmanager"
    compute_ok = {"jobmanager": "running", "taskmanager": "registered"}
    daemon_component = {"jobmanager": "flink", "taskmanager": "flink", "namenode": "hdfs", "datanode": "hdfs"}
    #: a TaskManager's own ports are ephemeral (taskmanager.rpc.port and the data port: 0)
    daemon_ports = {"jobmanager": ("jobmanager_rpc", "rest"), **HdfsStorage.hdfs_ports}

    # ================================================================== framework check
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        """Flink's scripts and its dist jar, the HDFS installation, Java."""
        f = framework.flink_home or ""
        tests = [("Flink home", f + "/bin/jobmanager.sh", "-f"), ("Flink home", f + "/bin/config.sh", "-f"),
                 ("Flink lib", f + "/lib", "-d"), *hdfs_checks(framework)]
        parts = [Script("test " + flag + " {p} || echo {msg};", p=path, msg=f"missing {what}: {path}")
                 for what, path, flag in tests]
        dist = Script("ls {lib}/flink-dist-*.jar >/dev/null 2>&1 || echo {msg};", lib=f + "/lib",
                      msg=f"missing Flink's dist jar: {f}/lib/flink-dist-*.jar")
        java = Script("{j} -version >/dev/null 2>&1 || echo {msg}", j=framework.java,
                      msg=f"java does not run: {framework.java} -version failed")
        script = Script(" ".join(["{p%d}" % i for i in range(len(parts))] + ["{dist}", "{java}"]),
                        **{f"p{i}": p for i, p in enumerate(parts)}, dist=dist, java=java)
        return check_problems(executor, hosts, script)

    # ================================================================== the JobManager and TaskManagers
    def urls(self, cluster: ClusterSpec) -> dict[str, str]:
        m = cluster.master.address
        p = cluster_ports(cluster)
        return {"rest": f"http://{m}:{p['rest']}", "jobmanager": f"{m}:{p['jobmanager_rpc']}",
                **self.hdfs_urls(cluster)}

    def web_ui(self, cluster: ClusterSpec) -> str | None:
        """The JobManager's web UI (the Flink dashboard)."""
        return self.urls(cluster)["rest"] + "/"

    def rest(self, cluster: ClusterSpec, path: str):
        return self._http_json(self.urls(cluster)["rest"] + path)

    def master_ready(self, cluster: ClusterSpec) -> bool:
        return "slots-total" in self.rest(cluster, "/overview")

    def taskmanagers(self, cluster: ClusterSpec) -> dict[str, dict]:
        return taskmanager_hosts(self.rest(cluster, "/taskmanagers"))

    def workers_alive(self, cluster: ClusterSpec) -> set[str]:
        return set(self.taskmanagers(cluster))

    def compute_registration(self, cluster: ClusterSpec) -> tuple[str, dict[str, str]]:
        return "running", {a: "registered" for a in self.taskmanagers(cluster)}

    # ================================================================== metrics
    def metrics(self, cluster: ClusterSpec, *, jobs: Sequence[int] = (), host_stats: bool = False) -> FrameworkSample:
        """Jobs and their task counts from ``/jobs/overview``, slots from ``/overview``, HDFS from the NameNode."""
        errors: list[str] = []
        overview = listed = hdfs = dn = None
        try:
            overview = self.rest(cluster, "/overview")
            listed = self.rest(cluster, "/jobs/overview").get("jobs", [])
        except FawkesError as exc:
            errors.append(str(exc))
        try:
            hdfs, dn = self.hdfs_state(cluster), self.datanodes(cluster)
        except FawkesError as exc:
            errors.append(str(exc))
        hosts = self.host_stats(cluster, errors) if host_stats else {}
        return flink_sample(time.time(), overview, listed, hdfs, dn, node_of={n.address: n.name for n in cluster.nodes},
                            hosts=hosts, errors=errors)

    # ================================================================== jobs
    def expand(self, cluster: ClusterSpec, arg: str, job, output: str) -> str:
        """``{input}``: the job's input as an ``hdfs://`` URI on the cluster's NameNode (a relative path
        under ``/input``; a URI is taken as it is), ``{output}``: ``output`` there, ``{job}``: the job id."""
        nn = self.hdfs_urls(cluster)["namenode"]
        inp = job.input_path or ""
        if inp and "://" not in inp:
            inp = nn + hdfs_path(inp)
        return arg.replace("{input}", inp).replace("{output}", nn + output).replace("{job}", str(job.id))

    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str | None = None,
                    python: str | None = None) -> JobLaunch:
        """``flink run -Dpipeline.name=fawkes-<cluster>-<job> ARGV...`` on the master with the cluster's
        configuration (the JobManager's address); ``ARGV``: the job's own (``[-c CLASS] JAR ARGS``, or any
        other option of ``flink run`` before the jar).  The client's JVM gets ``-Xmx<driver_memory>`` (else
        the cluster's option ``driver_memory``, derived from the master's memory when not set) and
        ``-Dfawkes.job=<cluster>/<job>`` (``ps`` tells it apart); ``python`` has no meaning here."""
        fw = cluster.framework
        d = cluster_dirs(cluster, cluster.master)
        argv = (f"{fw.flink_home}/bin/flink", "run", f"-Dpipeline.name=fawkes-{cluster.name}-{job.id}",
                *(self.expand(cluster, a, job, output) for a in job.argv))
        opt = _options(cluster)
        archive = archives(fw, opt)["flink_archive"]  # must be on the master host (fawkes.frameworks.jvm_archive)
        env = {"FLINK_CONF_DIR": d["conf"], "FLINK_LOG_DIR": d["logs"], "HADOOP_CONF_DIR": d["conf"],
               "HADOOP_CLASSPATH": ":".join(fw.hdfs_classpath),
               "JVM_ARGS": " ".join(filter(None, (f"-Xmx{driver_memory or opt['driver_memory']}",
                                                  f"-Dfawkes.job={cluster.name}/{job.id}",
                                                  archive and f"-XX:SharedArchiveFile={archive}"))),
               **({"JAVA_HOME": fw.java_home} if fw.java_home else {})}
        return JobLaunch(argv, env)

    # ================================================================== suspend / opportunistic: not offered
    @classmethod
    def suspend_hooks(cls, cluster: str, root: str) -> SuspendHooks:
        raise FawkesError("suspend is not offered by kind flink-hdfs (removal modes: fp, dp)")

    def opportunistic_worker(self, cluster: ClusterSpec, node: NodeSpec) -> WorkerLaunch:
        raise FawkesError("opportunistic workers are not offered by kind flink-hdfs (it does not declare suspend)")


DRIVER = FlinkHdfsDriver
