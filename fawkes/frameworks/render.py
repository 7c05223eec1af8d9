"""Render an MR-cluster's config files from ``templates/`` (pure: no I/O besides reading templates).

``render_cluster(cluster)`` returns ``{host: RenderedHost}``; each RenderedHost holds the files
(path relative to the cluster's dir on that host -> content), a hash per component (the daemons
that must restart when it changes) and one hash for the whole host.  The exclude file is state,
not config: it is rendered by :func:`render_exclude` and hashed nowhere.

Template sets (``templates/<set>/``):

* ``spark-hdfs``: Spark standalone + HDFS (the lab's Spark 4 + HDFS 2.7.3, or Hadoop 3 HDFS).
* ``spark``: Spark standalone on shared storage (its Spark files and control script are spark-hdfs's).
* ``dask``: Dask distributed on shared storage (settings and the control script of the scheduler and workers).
* ``flink-hdfs``: Flink standalone (its ``config.yaml``, daemon settings, log4j2 files and control script)
  with the HDFS configs in ``hdfs/``, shared with ``spark-hdfs``; ``control/`` holds what their control
  scripts share.
* ``hadoop3``: HDFS + YARN configs for real Hadoop 3.x deployments (rendered and checked in tests;
  no YARN daemon runs on the development machine).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath

import jinja2

from fawkes.errors import FawkesError
from fawkes.frameworks import jvm_archive, sizing
from fawkes.frameworks.sizing import RULES
from fawkes.frameworks.spec import PORT_BLOCK, ClusterSpec, NodeSpec, option_path
from fawkes.mechanism.model import Role
from fawkes.resources import data_dir


@dataclass(frozen=True)
class TemplateFile:
    src: str  # relative to templates/
    dest: str  # relative to the cluster dir on the host
    component: str  # daemons restarted when it changes ("spark", "hdfs", "yarn"; "control" = all; "meta" = none)
    where: str = "all"  # "all" hosts or only the "master"
    mode: int = 0o644


TEMPLATE_SETS: dict[str, tuple[TemplateFile, ...]] = {
    "spark-hdfs": (
        TemplateFile("spark-hdfs/spark-env.sh.j2", "conf/spark-env.sh", "spark"),
        TemplateFile("spark-hdfs/spark-defaults.conf.j2", "conf/spark-defaults.conf", "spark"),
        TemplateFile("spark-hdfs/metrics.properties.j2", "conf/metrics.properties", "spark"),
        TemplateFile("spark-hdfs/log4j2.properties.j2", "conf/log4j2.properties", "spark"),
        TemplateFile("hdfs/core-site.xml.j2", "conf/core-site.xml", "hdfs"),
        TemplateFile("hdfs/hdfs-site.xml.j2", "conf/hdfs-site.xml", "hdfs"),
        TemplateFile("hdfs/log4j.properties.j2", "conf/log4j.properties", "hdfs"),
        TemplateFile("hdfs/hadoop-env.sh.j2", "conf/hadoop-env.sh", "hdfs"),
        TemplateFile("spark-hdfs/fawkes-daemon.sh.j2", "bin/fawkes-daemon.sh", "control", mode=0o755),
    ),
    # kind spark (Spark standalone on shared storage): the Spark files and the control script of spark-hdfs,
    # no HDFS config (spark-defaults.conf sets fs.defaultFS file:/// when the framework has a shared_dir)
    "spark": (
        TemplateFile("spark-hdfs/spark-env.sh.j2", "conf/spark-env.sh", "spark"),
        TemplateFile("spark-hdfs/spark-defaults.conf.j2", "conf/spark-defaults.conf", "spark"),
        TemplateFile("spark-hdfs/metrics.properties.j2", "conf/metrics.properties", "spark"),
        TemplateFile("spark-hdfs/log4j2.properties.j2", "conf/log4j2.properties", "spark"),
        TemplateFile("spark-hdfs/fawkes-daemon.sh.j2", "bin/fawkes-daemon.sh", "control", mode=0o755),
    ),
    # kind dask (Dask distributed on shared storage): its settings and its own control script
    "dask": (
        TemplateFile("dask/dask-env.sh.j2", "conf/dask-env.sh", "dask"),
        TemplateFile("dask/fawkes-daemon.sh.j2", "bin/fawkes-daemon.sh", "control", mode=0o755),
    ),
    # kind flink-hdfs: Flink standalone (a session cluster) over the HDFS of spark-hdfs
    "flink-hdfs": (
        TemplateFile("flink-hdfs/config.yaml.j2", "conf/config.yaml", "flink"),
        TemplateFile("flink-hdfs/flink-env.sh.j2", "conf/flink-env.sh", "flink"),
        TemplateFile("flink-hdfs/log4j-console.properties.j2", "conf/log4j-console.properties", "flink"),
        TemplateFile("flink-hdfs/log4j-cli.properties.j2", "conf/log4j-cli.properties", "meta"),
        TemplateFile("hdfs/core-site.xml.j2", "conf/core-site.xml", "hdfs"),
        TemplateFile("hdfs/hdfs-site.xml.j2", "conf/hdfs-site.xml", "hdfs"),
        TemplateFile("hdfs/log4j.properties.j2", "conf/log4j.properties", "hdfs"),
        TemplateFile("hdfs/hadoop-env.sh.j2", "conf/hadoop-env.sh", "hdfs"),
        TemplateFile("flink-hdfs/fawkes-daemon.sh.j2", "bin/fawkes-daemon.sh", "control", mode=0o755),
    ),
    "hadoop3": (
        TemplateFile("hadoop3/core-site.xml.j2", "conf/core-site.xml", "hdfs"),
        TemplateFile("hadoop3/hdfs-site.xml.j2", "conf/hdfs-site.xml", "hdfs"),
        TemplateFile("hadoop3/yarn-site.xml.j2", "conf/yarn-site.xml", "yarn"),
        TemplateFile("hadoop3/mapred-site.xml.j2", "conf/mapred-site.xml", "yarn"),
        TemplateFile("hadoop3/capacity-scheduler.xml.j2", "conf/capacity-scheduler.xml", "yarn"),
        TemplateFile("hadoop3/workers.j2", "conf/workers", "meta", where="master"),
    ),
}
COMPONENTS = ("spark", "hdfs", "yarn", "dask", "flink")
#: kind dask: the scheduler's ports on the master's address (its workers' ports are chosen by Dask)
DASK_PORTS = {"scheduler": 8786, "dashboard": 8787}
#: kind flink-hdfs: the JobManager's RPC and REST (web UI) ports on the master's address (TaskManagers: any)
FLINK_PORTS = {"jobmanager_rpc": 6123, "rest": 8081}
#: Flink on Java 17 needs these (as Flink's own conf/config.yaml sets them in env.java.opts.all)
FLINK_JAVA_OPENS = " ".join(
    [f"--add-exports={m}=ALL-UNNAMED" for m in (
        "java.rmi/sun.rmi.registry", "jdk.compiler/com.sun.tools.javac.api", "jdk.compiler/com.sun.tools.javac.file",
        "jdk.compiler/com.sun.tools.javac.parser", "jdk.compiler/com.sun.tools.javac.tree",
        "jdk.compiler/com.sun.tools.javac.util", "java.security.jgss/sun.security.krb5")]
    + [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")])
EXCLUDE_FILE = "conf/dfs.exclude"
CONTROL_SCRIPT = "bin/fawkes-daemon.sh"

#: tunables (strings, as they come from a config file or the store); ClusterSpec.options override.  A size
#: left "" is derived from the hosts' inventory (fawkes.frameworks.sizing.RULES); the lab passes its own
#: small sizes explicitly (sizing.LAB_SIZES)
DEFAULT_OPTIONS: dict[str, str] = {
    "replication": "3",  # clamped to the number of core nodes
    "blocksize": "128m",
    "spark_daemon_memory": "",  # derived: 1/16 of the node's memory, 256m..1g
    "daemon_jvm_opts": "",  # JVM flags of every daemon (the JVM's defaults when empty)
    "app_jvm_opts": "",  # JVM flags of each job's driver and executors (spark.{driver,executor}.extraJavaOptions)
    # a directory on the hosts with the installations' class-data archives (fawkes.frameworks.jvm_archive): the
    # Spark and HDFS JVMs start in about half the CPU; "": none
    "jvm_archive_dir": "",
    "nn_heap": "",  # derived: 1/8 of the master's memory, 256m..8g
    "dn_heap": "",  # derived: 1/16 of the node's memory, 256m..2g
    "tool_heap": "",  # derived: 1/16 of the node's memory, 256m..1g
    "executor_memory": "",  # derived: 1/2 of a worker's memory, 512m..64g (at submission: the smallest worker's)
    "driver_memory": "",  # a job's driver (Flink: its client's heap); derived: 1/8 of the master's memory, 512m..4g
    "job_python": "",  # a job's Python on the hosts (spark.pyspark.python; Dask's client); "": the framework's
    "worker_memory_mb": "",  # default: the node's memory_mb
    "worker_timeout_s": "60",
    # FIRST-LAST: the ports a cluster's daemons listen on are its block of PORT_BLOCK ports in this range (the
    # store gives each live cluster its own block); "standard": the frameworks' own (7077, 8080, 8020, ...)
    "port_range": "21000-31999",
    # who may decommission a Spark worker through the master's web UI (POST /workers/kill/): DENY, nobody;
    # fawkes decommissions by a signal to the worker on its host, never through the UI
    "decommission_allow_mode": "DENY",
    "spark_log_level": "info",
    "heartbeat_s": "3",
    "recheck_ms": "300000",
    "decommission_interval_s": "5",
    "decommission_retry_s": "30",  # spark.storage.decommission.replicationReattemptInterval (Spark's default)
    "replication_max_streams": "4",
    "replication_max_streams_hard": "8",
    "replication_work_multiplier": "4",
    # flink-hdfs only: the JobManager's and each TaskManager's whole process (Flink's *.memory.process.size);
    # derived: 1/8 of the master's memory (768m..4g), 1/2 of the node's (1g..64g)
    "flink_jm_memory": "",
    "flink_tm_memory": "",
    # a job under the adaptive scheduler (reactive mode) rescales this long after the TaskManagers stop
    # changing (Flink's default: 60 s; the cooldown after a rescale is Flink's 30 s)
    "flink_rescale_wait_s": "5",
    # hadoop3/YARN only
    "yarn_min_allocation_mb": "256",
    "graceful_decommission_timeout_s": "3600",
    "nm_expiry_ms": "600000",
    "reduce_slowstart": "0.05",
    "max_am_resource_percent": "0.5",
}
_INT_MAX = 2**31 - 1  # a Java int: every integer option ends up in a Java config
_SIZE = re.compile(r"[1-9][0-9]{0,12}[kKmMgGtT]?")  # a JVM memory size / HDFS block size: 512m, 1g, 134217728
_JVM_FLAGS = re.compile(r"(-[A-Za-z0-9:+=._/-]+)( -[A-Za-z0-9:+=._/-]+)*")
_SIZE_OPTS = ("blocksize", "spark_daemon_memory", "nn_heap", "dn_heap", "tool_heap", "executor_memory",
              "driver_memory", "flink_jm_memory", "flink_tm_memory")
_PORT_RANGE = re.compile(r"([0-9]{4,5})-([0-9]{4,5})")
_INT_OPTS = ("replication", "worker_timeout_s", "heartbeat_s", "recheck_ms", "decommission_interval_s",
             "decommission_retry_s", "flink_rescale_wait_s",
             "replication_max_streams", "replication_max_streams_hard", "replication_work_multiplier",
             "yarn_min_allocation_mb", "graceful_decommission_timeout_s", "nm_expiry_ms")
_FRACTION_OPTS = ("reduce_slowstart", "max_am_resource_percent")
_CHOICES = {"decommission_allow_mode": ("ALLOW", "LOCAL", "DENY"),  # spark.master.ui.decommission.allow.mode
            "spark_log_level": ("off", "fatal", "error", "warn", "info", "debug", "trace", "all")}


def check_option(key: str, value: object) -> str:
    """``value`` of the framework option ``key`` as the templates write it, or ValueError saying why.

    Every option is typed: integers (1 .. 2^31-1), sizes (``512m``, ``1g``; "" derives it from the
    hosts' memory), fractions (0..1), a choice, a path (``job_python``), or JVM flags
    (``-Xss1m -XX:+UseSerialGC``); so no value can add a line to a config file
    or a word to a command line (a newline, ``;``, a quote)."""
    if key not in DEFAULT_OPTIONS:
        raise ValueError(f"unknown option {key!r}; known: {', '.join(sorted(DEFAULT_OPTIONS))}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{key}: expected a string or a number, got {type(value).__name__}")
    text = str(value)
    if key in _INT_OPTS or key == "worker_memory_mb":
        if key == "worker_memory_mb" and text == "":
            return text  # the node's memory
        if not re.fullmatch(r"[0-9]{1,10}", text) or not 1 <= int(text) <= _INT_MAX:
            raise ValueError(f"{key}: expected an integer 1..{_INT_MAX}, got {text!r}")
        return str(int(text))
    if key in _SIZE_OPTS:
        if text == "" and key in RULES:
            return text  # derived from the hosts' memory (fawkes.frameworks.sizing)
        if not _SIZE.fullmatch(text):
            raise ValueError(f"{key}: expected a size such as 512m, 1g or 134217728, got {text!r}")
        return text
    if key in _FRACTION_OPTS:
        try:
            f = float(text)
        except ValueError:
            f = float("nan")
        if not 0 <= f <= 1:  # NaN fails too
            raise ValueError(f"{key}: expected a number 0..1, got {text!r}")
        return text
    if key in _CHOICES:
        match = next((c for c in _CHOICES[key] if c.lower() == text.lower()), None)
        if match is None:
            raise ValueError(f"{key}: expected one of {', '.join(_CHOICES[key])}, got {text!r}")
        return match
    if key == "port_range":
        m = _PORT_RANGE.fullmatch(text)
        if text.lower() == "standard":
            return "standard"
        if not m or not 1024 <= int(m[1]) <= int(m[2]) <= 65535 or int(m[2]) - int(m[1]) + 1 < PORT_BLOCK:
            raise ValueError(f"{key}: expected FIRST-LAST, ports 1024..65535 holding at least one block of "
                             f"{PORT_BLOCK} (e.g. 21000-31999), or standard, got {text!r}")
        return f"{int(m[1])}-{int(m[2])}"
    if key in ("job_python", "jvm_archive_dir"):
        if text and not option_path(text):
            raise ValueError(f"{key}: expected an absolute path such as "
                             f"{'/usr/bin/python3' if key == 'job_python' else '/var/cache/fawkes/jvm'} (letters, "
                             f"digits and ._+/- only), got {text!r}")
        return text
    if key in ("daemon_jvm_opts", "app_jvm_opts"):
        if text and not _JVM_FLAGS.fullmatch(text):
            raise ValueError(f"{key}: expected JVM flags such as '-XX:+UseSerialGC -Xss1m' (letters, digits "
                             f"and :+=._/- only), got {text!r}")
        return text
    raise ValueError(f"{key}: no rule for this option")  # a new option needs its rule above


def ports_for(hdfs_major: int) -> dict[str, int]:
    p = {"spark_master": 7077, "spark_master_ui": 8080, "spark_worker_ui": 8081, "nn_rpc": 8020}
    if hdfs_major >= 3:
        p |= {"nn_http": 9870, "nn_secondary_http": 9868, "dn_xfer": 9866, "dn_http": 9864, "dn_ipc": 9867}
    else:
        p |= {"nn_http": 50070, "nn_secondary_http": 50090, "dn_xfer": 50010, "dn_http": 50075, "dn_ipc": 50020}
    return p


#: each named port's offset in a cluster's block (PORT_BLOCK ports): the Spark, HDFS, Flink and Dask daemons
PORT_OFFSETS = {"spark_master": 0, "spark_master_ui": 1, "spark_worker_ui": 2, "nn_rpc": 3, "nn_http": 4,
                "nn_secondary_http": 5, "dn_xfer": 6, "dn_http": 7, "dn_ipc": 8, "jobmanager_rpc": 9, "rest": 10,
                "scheduler": 11, "dashboard": 12}
#: the rest of a block: the ports of the cluster's job drivers' own servers (a Spark driver's UI), one per
#: job running at once, offsets JOB_PORT_OFFSET .. PORT_BLOCK - 1
JOB_PORT_OFFSET = 13
assert max(PORT_OFFSETS.values()) < JOB_PORT_OFFSET < PORT_BLOCK


def _port_range(cluster: ClusterSpec) -> str:
    """The cluster's option ``port_range`` (or its default), checked: FIRST-LAST or ``standard``."""
    given = cluster.options.get("port_range")
    try:
        return check_option("port_range", given if given is not None else DEFAULT_OPTIONS["port_range"])
    except ValueError as exc:
        raise FawkesError(f"cluster {cluster.name}: option {exc}") from None


def own_port_block(cluster: ClusterSpec) -> bool:
    """Whether ``cluster`` listens in a block of ports of its own (the store gave it one and ``port_range``
    is not ``standard``): then no other cluster uses them, on any host."""
    text = _port_range(cluster)
    return cluster.port_slot is not None and text != "standard"


def cluster_ports(cluster: ClusterSpec) -> dict[str, int]:
    """Every named port of ``cluster``'s daemons: its block in the option ``port_range`` when the store gave
    it one (:attr:`ClusterSpec.port_slot`), else (or with ``port_range: standard``) the frameworks' own."""
    if not own_port_block(cluster):
        return {**ports_for(cluster.framework.hdfs_major), **FLINK_PORTS, **DASK_PORTS}
    text = _port_range(cluster)
    first, last = (int(x) for x in text.split("-"))
    base = first + cluster.port_slot * PORT_BLOCK
    if base + PORT_BLOCK - 1 > last:
        raise FawkesError(f"cluster {cluster.name}: port_range {text} holds {(last - first + 1) // PORT_BLOCK} "
                          f"block(s) of {PORT_BLOCK} ports, all taken by live clusters: widen it")
    return {name: base + off for name, off in PORT_OFFSETS.items()}


def job_ports(cluster: ClusterSpec) -> range | None:
    """The ports in ``cluster``'s own block kept for its job drivers' servers (one per job running at once),
    or None when it has no block of its own (the frameworks' standard ports, :func:`own_port_block`)."""
    if not own_port_block(cluster):
        return None
    base = cluster_ports(cluster)["spark_master"] - PORT_OFFSETS["spark_master"]
    return range(base + JOB_PORT_OFFSET, base + PORT_BLOCK)


@dataclass(frozen=True)
class RenderedHost:
    host: str
    role: Role
    cluster_dir: str
    files: dict[str, str]
    modes: dict[str, int]
    hashes: dict[str, str]  # component -> hash
    hash: str  # of every file

    def changed_components(self, old: Mapping[str, str] | None) -> set[str]:
        """Components whose hash differs from ``old`` (all of them when there is no record)."""
        if not old:
            return set(self.hashes)
        return {c for c, h in self.hashes.items() if old.get(c) != h}


def shell_quote(value: object) -> str:
    """Jinja2 filter ``sq``: one shell word, whatever the value holds."""
    return shlex.quote("" if value is None else str(value))


@lru_cache(maxsize=4)
def _env(root: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("xml.j2",), default_for_string=False),
        keep_trailing_newline=True,
    )
    env.filters["sq"] = shell_quote
    return env


def _options(cluster: ClusterSpec, node: NodeSpec | None = None) -> dict[str, str]:
    """The cluster's options over the defaults, sizes left empty derived for ``node`` (default: the master)."""
    unknown = set(cluster.options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise FawkesError(f"cluster {cluster.name}: unknown option(s) {', '.join(sorted(unknown))}")
    opt = dict(DEFAULT_OPTIONS)
    for k, v in cluster.options.items():
        try:
            opt[k] = check_option(k, v)
        except ValueError as exc:
            raise FawkesError(f"cluster {cluster.name}: option {exc}") from None
    return sizing.fill(cluster, node or cluster.master, opt)


def cluster_dirs(cluster: ClusterSpec, node: NodeSpec) -> dict[str, str]:
    c = PurePosixPath(cluster.cluster_dir(node))
    return {"cluster": str(c), "conf": str(c / "conf"), "bin": str(c / "bin"), "logs": str(c / "logs"),
            "pids": str(c / "pids"), "work": str(c / "work"), "local": str(c / "local"), "tmp": str(c / "tmp"),
            "dfs_name": str(c / "dfs" / "name"), "dfs_data": str(c / "dfs" / "data")}


def context(cluster: ClusterSpec, node: NodeSpec) -> dict[str, object]:
    fw = cluster.framework
    opt = _options(cluster, node)
    ports = cluster_ports(cluster)
    n_core = len(cluster.by_role(Role.CORE))
    return {
        "cluster": cluster,
        "node": node,
        "master": cluster.master,
        "fw": fw,
        "java": fw.java,
        "hdfs_classpath": ":".join(fw.hdfs_classpath),
        "dirs": cluster_dirs(cluster, node),
        "ports": ports,
        "opt": opt,
        "replication": max(1, min(int(opt["replication"]), n_core)),
        "worker_memory_mb": int(opt["worker_memory_mb"] or node.memory_mb),
        "python": fw.python or sys.executable,  # kind dask: the hosts' Python (the lab: fawkes' own)
        "dask_ports": {k: ports[k] for k in DASK_PORTS},
        "flink_ports": {k: ports[k] for k in FLINK_PORTS},
        "flink_java_opens": FLINK_JAVA_OPENS,
        **archives(fw, opt),
    }


def archives(fw, opt: dict[str, str]) -> dict[str, str]:
    """``spark_archive``, ``hdfs_archive`` and ``flink_archive``: the class-data archive of each installation
    the cluster runs (its path on the hosts), "" when ``jvm_archive_dir`` is not set or the layout has none (a
    Hadoop home)."""
    d = opt.get("jvm_archive_dir") or ""
    homes = {"spark": fw.spark_home, "hdfs": fw.hdfs_jars, "flink": fw.flink_home}
    return {f"{family}_archive": jvm_archive.archive_file(d, family, home, fw.java) if d and home else ""
            for family, home in homes.items()}


def _digest(parts: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, content in sorted(parts):
        h.update(name.encode() + b"\0" + content.encode() + b"\0")
    return h.hexdigest()[:16]


def render_node(cluster: ClusterSpec, node: NodeSpec, template_set: str | None = None) -> RenderedHost:
    tset = template_set or cluster.framework.kind
    if tset not in TEMPLATE_SETS:
        raise FawkesError(f"no templates for {tset!r} (known: {', '.join(sorted(TEMPLATE_SETS))})")
    env = _env(str(data_dir("templates")))
    ctx = context(cluster, node)
    files: dict[str, str] = {}
    modes: dict[str, int] = {}
    comp_of: dict[str, str] = {}
    for tf in TEMPLATE_SETS[tset]:
        if tf.where == "master" and node.name != cluster.master.name:
            continue
        try:
            files[tf.dest] = env.get_template(tf.src).render(ctx)
        except jinja2.TemplateError as exc:
            raise FawkesError(f"template {tf.src}: {exc}") from None
        modes[tf.dest] = tf.mode
        comp_of[tf.dest] = tf.component
    control = [(d, files[d]) for d, c in comp_of.items() if c == "control"]
    hashes = {}
    for comp in COMPONENTS:
        mine = [(d, files[d]) for d, c in comp_of.items() if c == comp]
        if mine:
            hashes[comp] = _digest(mine + control)
    return RenderedHost(host=node.name, role=node.role, cluster_dir=cluster.cluster_dir(node), files=files,
                        modes=modes, hashes=hashes, hash=_digest(files.items()))


def render_cluster(cluster: ClusterSpec, hosts: Iterable[str] | None = None,
                   template_set: str | None = None) -> dict[str, RenderedHost]:
    """Render every node of ``cluster`` (or only ``hosts``)."""
    wanted = set(hosts) if hosts is not None else None
    if wanted is not None:
        unknown = wanted - {n.name for n in cluster.nodes}
        if unknown:
            raise FawkesError(f"cluster {cluster.name} has no host {', '.join(sorted(unknown))}")
    return {n.name: render_node(cluster, n, template_set) for n in cluster.nodes
            if wanted is None or n.name in wanted}


def render_exclude(addresses: Iterable[str]) -> str:
    """The HDFS exclude file (``dfs.hosts.exclude``): one address a line, sorted."""
    env = _env(str(data_dir("templates")))
    return env.get_template("hdfs/dfs.exclude.j2").render(excluded=sorted(set(addresses)))
