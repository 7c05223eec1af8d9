"""Parsers of the real daemons' JSON (pure functions) and the per-cluster sample they make.

Sources (see docs/metrics.md for which policy each value feeds):

* Spark master ``GET http://<master>:8080/json/``: workers (ALIVE / DECOMMISSIONED / DEAD),
  cores, cores used, active applications (WAITING / RUNNING), completed applications.
* Spark driver ``GET http://<driver>:4040/api/v1/applications/<id>/stages``: task counts per stage.
* Spark driver ``GET .../api/v1/applications/<id>/allexecutors``: per executor (removed ones too), the
  tasks that ended on it and their summed duration (the twin's task time per node).
* NameNode JMX ``GET http://<nn>:50070/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState``
  (capacity, used, live / dead / decommissioning DataNodes) and ``...,name=NameNodeInfo``
  (``LiveNodes``: used bytes and adminState per DataNode; ``DeadNodes``: whether decommissioned).
* The host over SSH: ``/proc/stat`` (CPU) and ``df`` (disk of the node's directory).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fawkes.errors import FawkesError
from fawkes.frameworks.sample import FrameworkSample, HostStats, TaskCounts, sum_tasks  # noqa: F401


def _load(doc: str | bytes | Mapping | list) -> object:
    if isinstance(doc, (str, bytes)):
        try:
            return json.loads(doc)
        except ValueError as exc:
            raise FawkesError(f"not JSON: {exc}") from None
    return doc


# --------------------------------------------------------------------------- Spark master
@dataclass(frozen=True)
class SparkWorker:
    id: str
    host: str
    state: str  # ALIVE | DECOMMISSIONED | DEAD | UNKNOWN
    cores: int
    cores_used: int
    memory_mb: int
    memory_used_mb: int


@dataclass(frozen=True)
class SparkApp:
    id: str
    name: str
    state: str  # WAITING | RUNNING (active) or FINISHED | KILLED | FAILED (completed)
    cores: int  # cores granted now
    submit_ms: int
    start_ms: int
    duration_ms: int


@dataclass(frozen=True)
class SparkMasterState:
    status: str
    alive_workers: int
    cores: int  # of ALIVE workers
    cores_used: int
    memory_mb: int
    memory_used_mb: int
    workers: tuple[SparkWorker, ...]
    active_apps: tuple[SparkApp, ...]
    completed_apps: tuple[SparkApp, ...]

    @property
    def waiting_apps(self) -> int:
        return sum(1 for a in self.active_apps if a.state == "WAITING")

    @property
    def running_apps(self) -> int:
        return sum(1 for a in self.active_apps if a.state == "RUNNING")

    def workers_by_host(self, state: str | None = "ALIVE") -> dict[str, SparkWorker]:
        """Latest worker per host (DEAD ones linger in the list: filter by state)."""
        return {w.host: w for w in self.workers if state is None or w.state == state}


def _app(a: Mapping) -> SparkApp:
    return SparkApp(id=str(a.get("id", "")), name=str(a.get("name", "")), state=str(a.get("state", "")),
                    cores=int(a.get("cores", 0)), submit_ms=_ms(a.get("submitdate")),
                    start_ms=int(a.get("starttime", 0) or 0), duration_ms=int(a.get("duration", 0) or 0))


def _ms(v: object) -> int:
    if isinstance(v, (int, float)):
        return int(v)
    return 0  # the master prints submitdate as a Date string; starttime (ms) is the number we use


def parse_master_json(doc: str | bytes | Mapping) -> SparkMasterState:
    """Spark standalone master ``/json/``."""
    d = _load(doc)
    if not isinstance(d, Mapping) or "workers" not in d:
        raise FawkesError("Spark master JSON: no 'workers' field (is this /json/ of a master?)")
    workers = tuple(SparkWorker(id=str(w.get("id", "")), host=str(w.get("host", "")), state=str(w.get("state", "")),
                                cores=int(w.get("cores", 0)), cores_used=int(w.get("coresused", 0)),
                                memory_mb=int(w.get("memory", 0)), memory_used_mb=int(w.get("memoryused", 0)))
                    for w in d.get("workers", ()))
    return SparkMasterState(
        status=str(d.get("status", "")), alive_workers=int(d.get("aliveworkers", 0)),
        cores=int(d.get("cores", 0)), cores_used=int(d.get("coresused", 0)),
        memory_mb=int(d.get("memory", 0)), memory_used_mb=int(d.get("memoryused", 0)),
        workers=workers, active_apps=tuple(_app(a) for a in d.get("activeapps", ())),
        completed_apps=tuple(_app(a) for a in d.get("completedapps", ())))


# --------------------------------------------------------------------------- Spark driver
def parse_stages(doc: str | bytes | list) -> TaskCounts:
    """Driver monitoring REST ``/api/v1/applications/<id>/stages``: pending/running/completed tasks, and
    the job's distinct tasks (a stage retried after lost shuffle output is listed once per attempt, each
    attempt with the tasks it re-runs: counted once, by its first attempt)."""
    stages = _load(doc)
    if not isinstance(stages, list):
        raise FawkesError("Spark stages JSON: expected a list of stages")
    total = running = pending = completed = failed = n_active = n_pending = 0
    first: dict[object, tuple[int, int]] = {}  # stage id -> (its first attempt listed, that attempt's tasks)
    for s in stages:
        status = s.get("status")
        num, act, comp = int(s.get("numTasks", 0)), int(s.get("numActiveTasks", 0)), int(s.get("numCompleteTasks", 0))
        if status != "SKIPPED":  # a stage whose output an earlier job left: none of its tasks runs
            attempt = int(s.get("attemptId", 0))
            if s.get("stageId") not in first or attempt < first[s.get("stageId")][0]:
                first[s.get("stageId")] = (attempt, num)
        completed += comp
        failed += int(s.get("numFailedTasks", 0))
        if status in ("ACTIVE", "PENDING"):
            total += num
            running += act
            pending += max(0, num - act - comp)
            n_active += status == "ACTIVE"
            n_pending += status == "PENDING"
    return TaskCounts(total, running, pending, completed, failed, n_active, n_pending,
                      sum(n for _, n in first.values()))


def parse_executors(doc: str | bytes | list) -> dict[str, tuple[int, float]]:
    """Driver monitoring REST ``/api/v1/applications/<id>/allexecutors``: per host address, the tasks that
    ended on the application's executors there (``completedTasks`` + ``failedTasks``) and their summed
    duration in seconds (``totalDuration``, ms); the driver's own entry and malformed ones left out."""
    execs = _load(doc)
    if not isinstance(execs, list):
        raise FawkesError("Spark executors JSON: expected a list of executors")
    out: dict[str, tuple[int, float]] = {}
    for e in execs:
        if not isinstance(e, Mapping) or e.get("id") == "driver":
            continue
        try:
            host = str(e.get("hostPort", "")).rsplit(":", 1)[0]
            n = int(e.get("completedTasks", 0)) + int(e.get("failedTasks", 0))
            secs = float(e.get("totalDuration", 0)) / 1000.0
        except (TypeError, ValueError):
            continue
        if not host or n < 0 or not 0.0 <= secs < 1e9:  # (NaN fails the comparison)
            continue
        had_n, had_s = out.get(host, (0, 0.0))
        out[host] = (had_n + n, had_s + secs)
    return out


def parse_active_tasks(doc: str | bytes | list) -> dict[str, int]:
    """The same document: per host address, the tasks running now on the application's live executors there
    (``activeTasks`` of those with ``isActive``); the driver's entry, removed executors and malformed
    entries left out."""
    execs = _load(doc)
    if not isinstance(execs, list):
        raise FawkesError("Spark executors JSON: expected a list of executors")
    out: dict[str, int] = {}
    for e in execs:
        if not isinstance(e, Mapping) or e.get("id") == "driver" or e.get("isActive") is False:
            continue
        host = str(e.get("hostPort", "")).rsplit(":", 1)[0]
        n = e.get("activeTasks", 0)
        if not host or isinstance(n, bool) or not isinstance(n, int) or n < 0:
            continue
        out[host] = out.get(host, 0) + n
    return out


# --------------------------------------------------------------------------- NameNode JMX
def _bean(doc: str | bytes | Mapping, name: str) -> Mapping:
    d = _load(doc)
    beans = d.get("beans", []) if isinstance(d, Mapping) else []
    for b in beans:
        if str(b.get("name", "")).endswith(f"name={name}"):
            return b
    raise FawkesError(f"NameNode JMX: no {name} bean")


@dataclass(frozen=True)
class HdfsState:
    fs_state: str
    capacity_total: int
    capacity_used: int  # DFS used (all replicas)
    capacity_remaining: int
    blocks_total: int
    under_replicated: int
    live_datanodes: int
    dead_datanodes: int
    decommissioning: int
    decommissioned_live: int
    decommissioned_dead: int


def parse_fsnamesystem_state(doc: str | bytes | Mapping) -> HdfsState:
    b = _bean(doc, "FSNamesystemState")
    return HdfsState(
        fs_state=str(b.get("FSState", "")), capacity_total=int(b.get("CapacityTotal", 0)),
        capacity_used=int(b.get("CapacityUsed", 0)), capacity_remaining=int(b.get("CapacityRemaining", 0)),
        blocks_total=int(b.get("BlocksTotal", 0)), under_replicated=int(b.get("UnderReplicatedBlocks", 0)),
        live_datanodes=int(b.get("NumLiveDataNodes", 0)), dead_datanodes=int(b.get("NumDeadDataNodes", 0)),
        decommissioning=int(b.get("NumDecommissioningDataNodes", 0)),
        decommissioned_live=int(b.get("NumDecomLiveDataNodes", 0)),
        decommissioned_dead=int(b.get("NumDecomDeadDataNodes", 0)))


@dataclass(frozen=True)
class DataNodeInfo:
    key: str  # "host:port" as the NameNode names it
    address: str  # the DataNode's IP (from xferaddr)
    admin_state: str  # "In Service" | "Decommission In Progress" | "Decommissioned"
    used: int  # bytes of HDFS blocks stored on it (DP victim order)
    capacity: int
    remaining: int
    blocks: int
    last_contact_s: int


@dataclass(frozen=True)
class NameNodeInfo:
    safemode: bool
    live: dict[str, DataNodeInfo] = field(default_factory=dict)  # by address
    dead: tuple[str, ...] = ()  # addresses
    decommissioning: tuple[str, ...] = ()
    missing_blocks: int = 0
    dead_decommissioned: tuple[str, ...] = ()  # dead DataNodes the NameNode reports decommissioned

    def admin_state(self, address: str) -> str:
        """What the NameNode says of the DataNode at ``address``: its adminState when live
        ("In Service", "Decommission In Progress", "Decommissioned"), "dead, decommissioned" or
        "dead" when dead (a DataNode stopped after its decommission, or lost), "absent" when the
        NameNode does not know it (never registered since the NameNode started)."""
        if address in self.live:
            return self.live[address].admin_state
        if address in self.dead_decommissioned:
            return "dead, decommissioned"
        return "dead" if address in self.dead else "absent"


def _addr(key: str, info: Mapping) -> str:
    x = str(info.get("xferaddr") or key)
    return x.rsplit(":", 1)[0]


def _nested(v: object) -> Mapping:
    if isinstance(v, str):
        return json.loads(v) if v.strip() else {}
    return v if isinstance(v, Mapping) else {}


def parse_namenode_info(doc: str | bytes | Mapping) -> NameNodeInfo:
    """NameNodeInfo bean: ``LiveNodes``, ``DeadNodes`` and ``DecomNodes`` are JSON inside strings."""
    b = _bean(doc, "NameNodeInfo")
    live = {}
    for key, info in _nested(b.get("LiveNodes")).items():
        a = _addr(key, info)
        live[a] = DataNodeInfo(key=key, address=a, admin_state=str(info.get("adminState", "")),
                               used=int(info.get("used", info.get("usedSpace", 0))),
                               capacity=int(info.get("capacity", 0)), remaining=int(info.get("remaining", 0)),
                               blocks=int(info.get("numBlocks", 0)), last_contact_s=int(info.get("lastContact", 0)))
    dead_nodes = _nested(b.get("DeadNodes"))
    dead = tuple(sorted(_addr(k, v) for k, v in dead_nodes.items()))
    dead_decom = tuple(sorted(_addr(k, v) for k, v in dead_nodes.items()
                              if isinstance(v, Mapping) and v.get("decommissioned") in (True, "true")))
    decom = tuple(sorted(_addr(k, v) for k, v in _nested(b.get("DecomNodes")).items()))
    return NameNodeInfo(safemode=bool(str(b.get("Safemode", "")).strip()), live=live, dead=dead,
                        decommissioning=decom, missing_blocks=int(b.get("NumberOfMissingBlocks", 0)),
                        dead_decommissioned=dead_decom)


# --------------------------------------------------------------------------- host stats over SSH
HOST_STATS_SCRIPT = "head -1 /proc/stat; sleep {interval}; head -1 /proc/stat; df -P -B1 {path} | tail -1"


def parse_host_stats(text: str) -> HostStats:
    """Output of :data:`HOST_STATS_SCRIPT`: two ``cpu`` lines of /proc/stat and one ``df -P -B1`` line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    cpu = [ln for ln in lines if ln.startswith("cpu ")]
    if len(cpu) != 2 or len(lines) < 3:
        raise FawkesError(f"host stats: unexpected output {text[:120]!r}")

    def ticks(ln: str) -> tuple[int, int]:
        v = [int(x) for x in ln.split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
        return sum(v), idle

    (t0, i0), (t1, i1) = ticks(cpu[0]), ticks(cpu[1])
    busy = 0.0 if t1 <= t0 else max(0.0, min(1.0, 1 - (i1 - i0) / (t1 - t0)))
    df = lines[-1].split()
    return HostStats(cpu_busy=busy, disk_total=int(df[1]), disk_used=int(df[2]))


# --------------------------------------------------------------------------- one cluster sample
@dataclass(frozen=True)
class SparkHdfsSample(FrameworkSample):
    """The neutral sample of a ``spark-hdfs`` cluster, with what it was made of (the master's state,
    the NameNode's), for this kind's own tools and tests; the coordinator reads only the neutral fields."""

    master: SparkMasterState | None = None
    hdfs: HdfsState | None = None
    datanodes: NameNodeInfo | None = None

    @property
    def tasks_by_app(self) -> Mapping[str, TaskCounts]:
        return self.tasks_by_job


def spark_hdfs_sample(time: float, master: SparkMasterState | None, hdfs: HdfsState | None,
                      datanodes: NameNodeInfo | None, by_app: Mapping[str, TaskCounts], *,
                      node_of: Mapping[str, str] | None = None, hosts: Mapping[str, HostStats] | None = None,
                      task_time: Mapping[str, Mapping[str, tuple[int, float]]] | None = None,
                      running: Mapping[str, Mapping[str, int]] | None = None,
                      errors: Iterable[str] = ()) -> SparkHdfsSample:
    """The neutral sample from the parsed documents: slots are the ALIVE workers' cores, stored bytes
    the NameNode's DFS used (None when it did not answer), per node the DataNode's used bytes
    (``node_of``: DataNode address -> node name; addresses not in it are left out); ``task_time``: per
    application, :func:`parse_executors`' figures by address (mapped to node names the same way); ``running``:
    per application, :func:`parse_active_tasks`' by address, summed per node (None: some application's
    executors were not read, so no node's figure is known)."""
    node_of = node_of or {}
    stored = {node_of[a]: d.used for a, d in (datanodes.live.items() if datanodes else ()) if a in node_of}
    per_node = {app: {node_of[a]: v for a, v in by_addr.items() if a in node_of}
                for app, by_addr in (task_time or {}).items()}
    by_node: dict[str, int] | None = None
    if running is not None:
        by_node = {}
        for by_addr in running.values():
            for a, n in by_addr.items():
                if a in node_of:
                    by_node[node_of[a]] = by_node.get(node_of[a], 0) + n
    return SparkHdfsSample(
        time=time, tasks=sum_tasks(by_app.values()), tasks_by_job=dict(by_app),
        slots=float(master.cores) if master else 0.0, busy_slots=float(master.cores_used) if master else 0.0,
        unfinished_jobs=len(master.active_apps) if master else 0,
        completed_jobs=len(master.completed_apps) if master else 0,
        stored_bytes=float(hdfs.capacity_used) if hdfs else None,
        storage_capacity=float(hdfs.capacity_total) if hdfs else 0.0,
        stored_by_node=stored, task_time_by_job={a: t for a, t in per_node.items() if t}, running_by_node=by_node,
        hosts=dict(hosts or {}), errors=tuple(errors),
        master=master, hdfs=hdfs, datanodes=datanodes)
