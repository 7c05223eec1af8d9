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

The HDFS half and the orchestration of grow and shrink around it are :mod:`fawkes.frameworks.hdfs`
(shared with ``flink-hdfs``); this module is the Spark half.  Shrinking (docs/frameworks.md): FP stops a
TR node's worker (Spark re-runs its tasks).  DP decommissions the Spark worker (SIGPWR, with
``spark.decommission.enabled``), then the DataNode as :class:`~fawkes.frameworks.hdfs.HdfsStorage` does,
and lets the worker's executors drain (bounded) before it stops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import PurePosixPath

from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M
from fawkes.frameworks.base import JobLaunch, SuspendHooks, WorkerLaunch
from fawkes.frameworks.control import HASH_FILE, ControlScriptDriver, check_problems  # noqa: F401  (HASH_FILE: re-exported)
from fawkes.frameworks.hdfs import HdfsStorage, hdfs_checks, hdfs_path
from fawkes.frameworks.render import CONTROL_SCRIPT, cluster_ports, job_ports
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script

UI_PORT_BASE = 4040


def ui_port(job_id: int) -> int:
    """The driver UI port of a job of a cluster on the frameworks' standard ports, fixed by its id."""
    return UI_PORT_BASE + 1 + job_id % 2000


def ui_ports(cluster: ClusterSpec, job_id: int) -> Sequence[int]:
    """The ports where the driver UI of job ``job_id`` of ``cluster`` listens (where its task counts are
    read): in a cluster with its own port block, one of the block's job ports (the first free one when the
    driver started: Spark tries them in turn, ``spark.port.maxRetries``); else :func:`ui_port`."""
    ports = job_ports(cluster)
    return ports if ports is not None else (ui_port(job_id),)


def expand(arg: str, job, output: str) -> str:
    """A job argument with ``{input}`` (the job's --input as an HDFS URI), ``{output}`` (``output``
    as an HDFS URI) and ``{job}`` (the job id) replaced."""
    inp = job.input_path or ""
    if inp and "://" not in inp:
        inp = "hdfs://" + hdfs_path(inp)
    return arg.replace("{input}", inp).replace("{output}", f"hdfs://{output}").replace("{job}", str(job.id))


class SparkHdfsDriver(HdfsStorage, ControlScriptDriver):
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
    compute_master, worker = "master", "worker"
    compute_ok = {"master": "ALIVE", "worker": "ALIVE"}
    daemon_component = {"master": "spark", "worker": "spark", "namenode": "hdfs", "datanode": "hdfs"}
    daemon_ports = {"master": ("spark_master", "spark_master_ui"), "worker": ("spark_worker_ui",),
                    **HdfsStorage.hdfs_ports}

    # ================================================================== framework check
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        tests = [("Spark home", framework.spark_home + "/bin/spark-class", "-f"),
                 ("Spark jars", framework.spark_home + "/jars", "-d"), *hdfs_checks(framework)]
        parts = [Script("test " + flag + " {p} || echo {msg};", p=path, msg=f"missing {what}: {path}")
                 for what, path, flag in tests]
        java = Script("{j} -version >/dev/null 2>&1 || echo {msg}", j=framework.java,
                      msg=f"java does not run: {framework.java} -version failed")
        script = Script(" ".join(["{p%d}" % i for i in range(len(parts))] + ["{java}"]),
                        **{f"p{i}": p for i, p in enumerate(parts)}, java=java)
        return check_problems(executor, hosts, script)

    # ================================================================== the Spark master and workers
    def urls(self, cluster: ClusterSpec) -> dict[str, str]:
        p = cluster_ports(cluster)
        m = cluster.master.address
        return {"master": f"spark://{m}:{p['spark_master']}", "master_ui": f"http://{m}:{p['spark_master_ui']}",
                **self.hdfs_urls(cluster)}

    def web_ui(self, cluster: ClusterSpec) -> str | None:
        """The Spark master's web UI."""
        return self.urls(cluster)["master_ui"] + "/"

    def master_state(self, cluster: ClusterSpec) -> M.SparkMasterState:
        return M.parse_master_json(self._http_json(self.urls(cluster)["master_ui"] + "/json/"))

    def master_ready(self, cluster: ClusterSpec) -> bool:
        return self.master_state(cluster).status == "ALIVE"

    def workers_alive(self, cluster: ClusterSpec) -> set[str]:
        return set(self.master_state(cluster).workers_by_host("ALIVE"))

    def compute_registration(self, cluster: ClusterSpec) -> tuple[str, dict[str, str]]:
        master = self.master_state(cluster)
        by_host: dict[str, str] = {}
        for w in master.workers:  # DEAD entries linger after a restart: ALIVE wins
            if by_host.get(w.host) != "ALIVE":
                by_host[w.host] = w.state
        return master.status, by_host

    def _worker_cores_used(self, cluster: ClusterSpec, node: NodeSpec) -> int:
        """Cores the worker on ``node`` has granted to executors now, from its own web UI."""
        port = cluster_ports(cluster)["spark_worker_ui"]
        return int(self._http_json(f"http://{node.address}:{port}/json/").get("coresused", 0))

    def _decommission_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], t0: float) -> None:
        """SIGPWR: no new tasks, blocks migrate, running tasks finish."""
        self.emit(cluster, "dp", f"decommissioning Spark workers on {', '.join(n.name for n in nodes)}", t0=t0)
        self._run({n.name: Script("{c} || true", c=self._ctl_if_present(cluster, n, "signal", "worker", "PWR"))
                   for n in nodes}, "decommissioning workers", 60)

    def _drain_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], drain_s: float, t0: float) -> None:
        def drained():
            # the worker's own count: the master forgets a decommissioned worker's executors at once and
            # never hears of their exit, so its coresused for that worker stays at the last value
            ws = self.master_state(cluster).workers_by_host(None)
            return all(self._worker_cores_used(cluster, n) == 0 for n in nodes if n.address in ws)

        try:
            self._wait(cluster, "decommissioned workers to drain", drained, drain_s, t0)
        except FawkesError:
            self.emit(cluster, "dp", f"workers still busy after {drain_s:g}s: stopping them "
                      "(their tasks are re-run)", t0=t0)

    # ================================================================== metrics
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
        block = job_ports(cluster)
        ports = (block if jobs else ()) if block is not None else [ui_port(j) for j in jobs]
        urls = [f"http://{cluster.master.address}:{p}" for p in ports]
        quiet = set(urls) if block is not None else set()  # a free job port of the block is no error
        task_time: dict[str, dict[str, tuple[int, float]]] = {}
        running: dict[str, dict[str, int]] | None = {}  # None once an application's executors went unread
        answered = 0
        for base in urls + list(driver_urls):
            if base in quiet and answered >= len(jobs):
                continue  # every running job's driver found: the block's higher job ports are not asked
            api = base.rstrip("/")
            try:
                got = self._driver_stages(api)
                by_app.update(got)
                answered += 1
            except (FawkesError, KeyError, TypeError) as exc:
                if base not in quiet:
                    errors.append(str(exc))
                continue
            for app, counts in got.items():
                try:
                    task_time[app], active = self._driver_executors(api, app, counts)
                    if running is not None:
                        running[app] = active
                except FawkesError:  # (where tasks ran and run: the sample stands without it)
                    running = None
        if block is not None and jobs and not by_app:
            errors.append(f"cluster {cluster.name}: no job driver UI answered on ports "
                          f"{block.start}-{block.stop - 1} of {cluster.master.address}")
        if answered < len(jobs):  # a running job's driver not read: what runs where is not known
            running = None
        hosts = self.host_stats(cluster, errors) if host_stats else {}
        return M.spark_hdfs_sample(time.time(), master, hdfs, dn, by_app,
                                   node_of={n.address: n.name for n in cluster.nodes}, hosts=hosts,
                                   task_time=task_time, running=running if master is not None else None,
                                   errors=errors)

    #: how many drivers' application ids :meth:`_driver_stages` keeps (base URL -> ids; the oldest forgotten first)
    _APP_IDS_KEPT = 256

    def _driver_stages(self, base: str) -> dict[str, M.TaskCounts]:
        """The task counts of each application the driver REST API at ``base`` serves.  A driver serves one
        application for its whole life, so its id is asked once (``/api/v1/applications``) and kept: a sample
        then asks only ``/stages``.  A kept id the API no longer knows (the job ended and another driver took
        the port) is forgotten and the ids asked again."""
        def stages(ids) -> dict[str, M.TaskCounts]:
            return {a: M.parse_stages(self._http_json(f"{base}/api/v1/applications/{a}/stages")) for a in ids}

        known = self.__dict__.setdefault("_app_ids", {})
        ids = known.get(base)
        if ids is not None:
            try:
                return stages(ids)
            except FawkesError:
                known.pop(base, None)
        ids = tuple(str(app["id"]) for app in self._http_json(base + "/api/v1/applications"))
        out = stages(ids)
        if ids:
            self._keep(known, base, ids)  # per-job ports: the oldest forgotten first
        return out

    #: the sampler reads several clusters of this kind at once, through one driver: the caches change under a lock
    _KEEP_LOCK = threading.Lock()

    @classmethod
    def _keep(cls, kept: dict, key, value) -> None:
        """``kept[key] = value`` as its newest entry, the oldest forgotten beyond :data:`_APP_IDS_KEPT`."""
        with cls._KEEP_LOCK:
            kept.pop(key, None)
            kept[key] = value
            while len(kept) > cls._APP_IDS_KEPT:
                kept.pop(next(iter(kept)))

    def _driver_executors(self, base: str, app: str,
                          counts: M.TaskCounts) -> tuple[dict[str, tuple[int, float]], dict[str, int]]:
        """Per executor address, the tasks of ``app`` that ended there and their seconds
        (:func:`~fawkes.frameworks.metrics.parse_executors`) and the tasks running there now
        (:func:`~fawkes.frameworks.metrics.parse_active_tasks`).  Asked again only when the driver's count
        of ended or of running tasks (``counts``, from the same sample's ``/stages``) moved: about once per
        task started or ended, not once per sample."""
        kept = self.__dict__.setdefault("_task_time", {})
        moved = (counts.completed + counts.failed, counts.running)
        if app in kept and kept[app][0] == moved:
            return kept[app][1]
        doc = self._http_json(f"{base}/api/v1/applications/{app}/allexecutors")
        got = (M.parse_executors(doc), M.parse_active_tasks(doc))
        self._keep(kept, app, (moved, got))
        return got

    # ================================================================== for drivers (spark-submit)
    def submit_conf(self, cluster: ClusterSpec) -> dict[str, str]:
        """``--conf`` keys for a client-mode driver of this cluster.  ``spark.cores.max`` stays unset, so
        an application takes executors on every worker, the ones a grow adds included."""
        from fawkes.frameworks.render import _options, archives
        from fawkes.frameworks.sizing import submit_executor_memory

        u, opt = self.urls(cluster), _options(cluster)
        archive = archives(cluster.framework, opt)["spark_archive"]
        jvm = " ".join(filter(None, (opt["app_jvm_opts"], archive and f"-XX:SharedArchiveFile={archive}")))
        return {"spark.master": u["master"], "spark.hadoop.fs.defaultFS": self.default_fs(cluster),
                "spark.decommission.enabled": "true", "spark.storage.decommission.enabled": "true",
                "spark.storage.decommission.rddBlocks.enabled": "true",
                "spark.storage.decommission.shuffleBlocks.enabled": "true",
                # a decommissioned executor exits once a migration pass finds nothing left: passes this far apart
                "spark.storage.decommission.replicationReattemptInterval": f"{opt['decommission_retry_s']}s",
                "spark.executor.memory": submit_executor_memory(cluster),
                **({"spark.driver.extraJavaOptions": jvm, "spark.executor.extraJavaOptions": jvm} if jvm else {}),
                # the archive's jars first (fawkes.frameworks.jvm_archive); the file must be on every host
                **({"spark.driver.extraClassPath": f"{cluster.framework.spark_home}/jars/*",
                    "spark.executor.extraClassPath": f"{cluster.framework.spark_home}/jars/*"} if archive else {})}

    @staticmethod
    def _ui_conf(cluster: ClusterSpec, job_id: int) -> dict[str, str]:
        """The driver UI's port: the first free job port of the cluster's block (Spark tries each in turn),
        or, on the standard ports, :func:`ui_port` of the job and no other."""
        ports = job_ports(cluster)
        if ports is None:
            return {"spark.ui.port": str(ui_port(job_id)), "spark.port.maxRetries": "0"}
        return {"spark.ui.port": str(ports.start), "spark.port.maxRetries": str(len(ports) - 1)}

    def max_jobs(self, cluster: ClusterSpec) -> int | None:
        """As many jobs at once as the cluster's block has job ports (each driver's UI takes one)."""
        ports = job_ports(cluster)
        return None if ports is None else len(ports)

    def expand(self, cluster: ClusterSpec, arg: str, job, output: str) -> str:
        """A job argument with ``{input}``, ``{output}`` and ``{job}`` replaced (:func:`expand`)."""
        return expand(arg, job, output)

    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str | None = None,
                    python: str | None = None) -> JobLaunch:
        """The ``spark-submit`` command line of ``job`` on ``cluster``'s master (client mode).  The driver's
        memory: ``driver_memory`` when given, else the cluster's option of that name (derived from the master's
        memory when not set).  The job's Python: the cluster's option ``job_python``, else the framework's
        ``--python``, else ``python``; with none, Spark's own choice on the host (``python3``).  Its
        processes carry the cluster and the job id, so ``ps`` tells them apart: the application is
        named ``fawkes-<cluster>-<job>`` and the driver's and executors' JVMs get
        ``-Dfawkes.job=<cluster>/<job>`` (``ps -ef | grep fawkes.job=etl/7``).  Its driver UI listens
        on one of :func:`ui_ports` (where :meth:`metrics` reads its task counts)."""
        from fawkes.frameworks.render import _options

        opt = _options(cluster)
        python = opt["job_python"] or cluster.framework.python or python
        tag = f"-Dfawkes.job={cluster.name}/{job.id}"
        conf = dict(self.submit_conf(cluster))
        conf.update({
            "spark.driver.host": cluster.master.address, "spark.driver.bindAddress": cluster.master.address,
            **self._ui_conf(cluster, job.id),
            "spark.driver.memory": driver_memory or opt["driver_memory"],
            **({"spark.pyspark.python": python, "spark.pyspark.driver.python": python} if python else {}),
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
