"""The main job: MR-clusters on a local lab of CPU-limited hosts, a stream of real CPU-bound Spark jobs.

``fawkes demo`` (and the lab benchmarks ``bench/bench_lab_*.py``, and ``tests/test_twin_lab.py``) do,
on this machine alone:

1. fetch the lab's distributions; bring up an SSH lab of network-namespace hosts, each under a
   CPU quota and a memory limit (``DemoPlan.cpus``, ``DemoPlan.memory``: a host is a unit of capacity);
2. state in SQLite under the work dir; register the lab framework; request the MR-clusters
   (``DemoPlan.min_core`` core nodes each, 1 by default: most of the pool is movable), each with a
   generated input;
3. start the real coordinator (``fawkes coordinator run``) with policy None and run one job alone on
   the first cluster at its minimum: its response time is the reference R of every job's slowdown
   (response time / R; R is stored with each job, ``ref_runtime``);
4. restart the coordinator with the policy under test and submit the stream: a burst on one
   cluster, a job on another, then a burst on a second cluster (``DemoPlan.stream``), so that the
   loaded cluster grows and gives its nodes back when the burst moves;
5. collect jobs, allocations over time, queues and reconfigurations (:class:`Outcome`).

The jobs are ``fawkes/apps/burn.py``: CPU-bound map tasks (SHA-256 chains), a small reduce.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fawkes.coordinator.view import allocation_history
from fawkes.errors import FawkesError
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.store import Store
from fawkes.store.lifecycle import JOB_FINISHED, JobState

REPO = Path(__file__).resolve().parent.parent
APP = Path(__file__).resolve().parent / "apps" / "burn.py"
#: a job's driver and executors JIT with C1 only, like the daemons (LAB_SIZES' app_jvm_opts: under a 0.33-CPU
#: quota C2's compiler threads eat the tasks' CPU, docs/lab.md)
LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1",
               "replication": "1", "executor_memory": "512m"}


@dataclass(frozen=True)
class DemoPlan:
    """What a live run looks like: the lab, the clusters, the jobs and the stream."""

    hosts: int = 6
    cpus: float = 0.33  # CPU quota per host (cores); hosts x cpus <= the machine
    memory: str = "2G"  # memory limit per host
    clusters: tuple[str, ...] = ("etl", "bi", "ml")
    min_core: int = 1
    partitions: int = 12  # map tasks per job
    core_s: float = 1.5  # CPU seconds (one unthrottled core) per map task: 4.5 s on a 0.33-CPU host
    #: (seconds after the stream starts, cluster): a burst on etl, one job on ml, the burst moves to bi
    #: (at +110 s, while etl's second job runs: the twin of a run with it at +150 s gave a makespan 36 s
    #: shorter for it, and etl's TD slowdown 0.88 against 0.78, None's 1.39)
    stream: tuple[tuple[float, str], ...] = (
        (0, "etl"), (10, "etl"), (20, "ml"),
        (110, "bi"), (120, "bi"),
    )
    period_s: float = 10.0
    sample_period_s: float = 2.0
    tau: float = 0.5
    grow_type: str = "transient-core"
    #: the framework kind of each cluster, in the order of ``clusters`` (empty: every one spark-hdfs); a pool
    #: of several kinds grows by transient nodes (kind dask has no transient-core role)
    kinds: tuple[str, ...] = ()

    @property
    def job_args(self) -> tuple[str, ...]:
        return ("{input}", "{output}", str(self.partitions), f"{self.core_s:g}")

    def kind_of(self, cluster: str) -> str:
        return self.kinds[self.clusters.index(cluster)] if self.kinds else "spark-hdfs"


#: the mixed pool (issue 24): one Spark, one Flink and one Dask MR-cluster on the same hosts, a burst of
#: CPU-bound jobs on each in turn
MIXED_PLAN = DemoPlan(clusters=("spark", "flink", "dask"), kinds=("spark-hdfs", "flink-hdfs", "dask"),
                      grow_type="transient",
                      stream=((0, "spark"), (10, "spark"), (120, "flink"), (130, "flink"), (240, "dask"),
                              (250, "dask")))
#: the framework registered for each kind in a demo's state (the kinds' lab distributions)
FRAMEWORK_OF = {"spark-hdfs": "lab", "flink-hdfs": "lab-flink", "dask": "lab-dask"}


#: Settings the live runs give a policy on top of its own (a period of 10 s instead of 120 s)
def file_name(label: str) -> str:
    """``label`` (a policy name or a preset's path) as a file name: letters, digits, ``-`` and ``_``."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)


def preset_for(policy: str, plan: DemoPlan) -> dict:
    """A preset dict for ``policy`` (a policy name or a preset of policies/) at the plan's periods.

    A preset keeps its own keys (grow type, damping); T, the sample period, tau (scaled with T) and
    T_idle (long: idle clusters stay) are the plan's."""
    from fawkes.presets import _is_policy_name

    if _is_policy_name(policy):
        base = {"policy": policy, "grow_type": plan.grow_type}
    else:
        path = Path(policy) if Path(policy).suffix in (".yaml", ".yml") else REPO / "policies" / f"{policy}.yaml"
        base = {k: v for k, v in yaml.safe_load(path.read_text()).items() if k != "description"}
    base.update(period_s=plan.period_s, sample_period_s=plan.sample_period_s, tau=plan.tau, idle_timeout_s=3600)
    return base


@dataclass
class Outcome:
    policy: str
    reference_s: float | dict[str, float]  # R, or R per cluster (a mixed pool)
    jobs: list[dict] = field(default_factory=list)
    reconfigurations: int = 0
    ticks: int = 0
    allocation: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    queue: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0

    def slowdowns(self) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for j in self.jobs:
            per.setdefault(j["cluster"], []).append(j["slowdown"])
        return {c: sum(v) / len(v) for c, v in per.items()}

    def mean_slowdown(self) -> float:
        return sum(j["slowdown"] for j in self.jobs) / len(self.jobs) if self.jobs else float("nan")

    def peak_nodes(self) -> dict[str, int]:
        return {c: max((n for _, n in pts), default=0) for c, pts in self.allocation.items()}

    @property
    def makespan_s(self) -> float:
        return self.end - self.start


def words(n: int, seed: int) -> str:
    vocab = [f"w{i}" for i in range(50)]
    return "\n".join(" ".join(vocab[(seed * 7 + i * 13 + j * 3) % 50] for j in range(12)) for i in range(n)) + "\n"


class Session:
    """A lab, a state store and a coordinator process, for the demo, the lab benchmarks and the twin test."""

    def __init__(self, workdir: Path, plan: DemoPlan = DemoPlan(), say=print, prefix: str = "fwdemo",
                 subnet: str | None = None):
        from fawkes.frameworks import dists
        from fawkes.lab import Lab

        self.workdir = workdir
        self.plan = plan
        self.say = say
        workdir.mkdir(parents=True, exist_ok=True)
        self.dists = dists.ensure_lab_dists(install=True, progress=lambda m: None)
        nets = [int(subnet.split(".")[1])] if subnet else range(220, 250)
        self.lab = Lab.up_free(plan.hosts, workdir / "lab", prefix=prefix, nets=nets, cpus=plan.cpus,
                               memory=plan.memory)
        say(f"lab: {plan.hosts} SSH hosts (network namespaces) on {self.lab.subnet}.0/24, "
            f"{plan.cpus:g} CPU and {plan.memory} memory each")
        self.url = f"sqlite:///{workdir / 'fawkes.db'}"
        self.store = Store(self.url)
        self.proc: subprocess.Popen | None = None
        self.policy: str | None = None
        self.options = dict(LAB_OPTIONS)  # the clusters' framework options (the coordinator's config)

    def config(self, policy: str) -> Path:
        safe = file_name(policy.lower())
        preset = self.workdir / f"{safe}-live.yaml"
        preset.write_text(yaml.safe_dump(preset_for(policy, self.plan), sort_keys=False))
        cfg = self.workdir / f"config-{safe}.yaml"
        cfg.write_text(json.dumps({"state": self.url, "inventory": str(self.lab.inventory_path),
                                   "policy": str(preset), "period": self.plan.period_s,
                                   "sample_period": self.plan.sample_period_s, "cluster_options": self.options}))
        return cfg

    def start(self, policy: str) -> None:
        self.stop()
        log = (self.workdir / "coordinator.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                                      str(self.config(policy)), "--no-metrics"], stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
        self.policy = policy

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def setup_clusters(self) -> None:
        d = self.dists
        paths = {"spark-hdfs": {"spark_home": str(d.spark_home), "hdfs_jars": str(d.hdfs_home)},
                 "flink-hdfs": {"flink_home": str(d.flink_home), "hdfs_jars": str(d.hdfs_home)},
                 "dask": {"shared_dir": str(self.workdir / "shared")}}
        (self.workdir / "shared").mkdir(exist_ok=True)
        for kind in sorted({self.plan.kind_of(c) for c in self.plan.clusters}):
            self.store.register_framework(FRAMEWORK_OF[kind], kind, replace=True, **paths[kind])
        for i, name in enumerate(self.plan.clusters):
            src = self.workdir / f"{name}.txt"
            src.write_text(words(400, i))
            self.store.request_cluster(name, framework=FRAMEWORK_OF[self.plan.kind_of(name)],
                                       min_core=self.plan.min_core, input_path=str(src))

    def job_argv(self, cluster: str) -> list[str]:
        """The CPU-bound job of ``cluster``'s kind (burn.py, FlinkBurn, dask_burn.py), with the plan's arguments."""
        app = {"spark-hdfs": [str(APP)], "dask": [str(APP.with_name("dask_burn.py"))],
               "flink-hdfs": ["-c", "fawkes.apps.FlinkBurn", str(self.dists.flink_apps)]}[self.plan.kind_of(cluster)]
        return [*app, *self.plan.job_args]

    def submit(self, cluster: str, ref_runtime: float | None = None) -> int:
        return self.store.submit_job(cluster, self.job_argv(cluster), input_path="/input",
                                     ref_runtime=ref_runtime).id

    def wait(self, what: str, cond, timeout: float, show=None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise FawkesError(f"the coordinator exited while waiting for {what}; see {self.workdir}/coordinator.log")
            if show:
                show()
            time.sleep(0.5)
        raise FawkesError(f"timed out after {timeout:.0f}s waiting for {what}; see {self.workdir}/coordinator.log")

    def active(self) -> bool:
        return all(self.store.get_cluster(n).state == "active" for n in self.plan.clusters)

    def at_minimum(self) -> bool:
        """Every cluster holds its minimum and no node is on its way in or out."""
        return all(len(self.store.list_nodes(n)) == self.plan.min_core
                   and all(x.state == "running" for x in self.store.list_nodes(n)) for n in self.plan.clusters)

    def finished(self, ids) -> bool:
        return all(JobState(self.store.get_job(i).state) in JOB_FINISHED for i in ids)

    def release(self, show=None) -> None:
        for name in self.plan.clusters:
            self.store.request_release(name)
        self.wait("the clusters' release", lambda: all(
            self.store.get_cluster(n).state == "released" for n in self.plan.clusters), 300, show)

    def close(self) -> None:
        self.stop()
        self.store.close()
        self.lab.down()


#: The measured R of earlier demos, per machine and plan (``fawkes demo`` reuses it: the calibration job is
#: about 3 of a first run's minutes).
REFERENCE_CACHE = "demo-reference.json"


def reference_key(plan: DemoPlan) -> str:
    """What R depends on: the machine (CPU count and model, memory), the host quota, the job, the lab's
    Spark.  A cached R is reused only under the same key."""
    from fawkes.frameworks.dists import PYSPARK_LAB_VERSION

    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return (f"cpus={os.cpu_count()} model={model} mem_mib={mem} host_cpus={plan.cpus:g} host_mem={plan.memory} "
            f"min_core={plan.min_core} job={plan.partitions}x{plan.core_s:g} spark={PYSPARK_LAB_VERSION} "
            f"options={json.dumps(LAB_OPTIONS, sort_keys=True)}")


def cached_reference(plan: DemoPlan, path: Path) -> tuple[float, str] | None:
    """(R, when it was measured) from ``path`` if it holds one for this machine and plan; None if it
    holds none (absent, not a regular file, unreadable, another key, or a value out of [1, 86400] s)."""
    import math

    try:
        if not path.is_file():  # a FIFO or a directory is not read (no hang)
            return None
        entry = json.loads(path.read_text(encoding="utf-8")).get(reference_key(plan))
        r, when = float(entry["reference_s"]), str(entry["measured_at"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return (r, when) if math.isfinite(r) and 1 <= r <= 86400 else None


def remember_reference(plan: DemoPlan, r: float, path: Path) -> None:
    """Store R for this machine and plan in ``path`` (other keys kept; written whole, then renamed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[reference_key(plan)] = {"reference_s": round(r, 3),
                                 "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                 "load_average_1m": round(os.getloadavg()[0], 2)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)


def calibrate(s: Session, show=None, cluster: str | None = None) -> float:
    """Run one job alone on ``cluster`` (default: the first) at its minimum (policy None): the reference
    runtime R."""
    s.start("None")
    s.wait("the active MR-clusters", s.active, 600, show)
    s.wait("every cluster at its minimum", s.at_minimum, 300, show)
    j = s.submit(cluster or s.plan.clusters[0])
    s.wait("the calibration job", lambda: s.finished([j]), 900, show)
    job = s.store.get_job(j)
    if job.state != JobState.SUCCEEDED:
        raise FawkesError(f"calibration job failed: {job.detail}")
    return job.ended_at - job.submitted_at


def calibrate_kinds(s: Session, show=None) -> dict[str, float]:
    """R per cluster: one job alone on the first cluster of each kind (one after the other), R of a
    cluster the one of its kind (a job's slowdown is against a job of its own framework)."""
    first: dict[str, str] = {}
    for c in s.plan.clusters:
        first.setdefault(s.plan.kind_of(c), c)
    by_kind = {k: calibrate(s, show, c) for k, c in first.items()}
    return {c: by_kind[s.plan.kind_of(c)] for c in s.plan.clusters}


def run_stream(s: Session, policy: str, reference: float | dict[str, float], show=None) -> Outcome:
    """Submit the plan's stream under ``policy`` from every cluster at its minimum; collect jobs,
    allocations, queues and reconfigurations.  ``reference``: R, or R per cluster (a mixed pool)."""
    from sqlmodel import select

    from fawkes.store.schema import DecisionRecord

    if not (s.policy == "None" and s.at_minimum()):  # every run starts from the minima
        s.start("None")
        s.wait("the active MR-clusters", s.active, 600, show)
        s.wait("every cluster at its minimum", s.at_minimum, 300, show)
    s.start(policy)
    latest = s.store.latest_decision()
    first_tick = latest.id if latest else 0
    t0 = time.time()
    ids: list[tuple[int, str]] = []
    ref_of = reference if isinstance(reference, dict) else {c: reference for c in s.plan.clusters}
    for at, cluster in s.plan.stream:
        s.wait(f"submit time +{at:g}s", lambda: time.time() - t0 >= at, at + 5, show)
        ids.append((s.submit(cluster, ref_of[cluster]), cluster))
    s.wait("every job of the stream", lambda: s.finished([i for i, _ in ids]), 1800, show)
    end = time.time()
    out = Outcome(policy=policy, reference_s=reference, start=t0, end=end)
    for i, cluster in ids:
        j = s.store.get_job(i)
        out.jobs.append({"id": i, "cluster": cluster, "state": str(j.state), "submitted": j.submitted_at,
                         "started": j.started_at, "ended": j.ended_at,
                         "response_s": j.ended_at - j.submitted_at,
                         "kind": s.plan.kind_of(cluster),
                         "slowdown": (j.ended_at - j.submitted_at) / ref_of[cluster]})
    with s.store.session() as sess:
        rows = list(sess.exec(select(DecisionRecord).where(DecisionRecord.id > first_tick)
                              .where(DecisionRecord.time <= end)))
    out.ticks = len(rows)
    out.reconfigurations = sum(1 for d in rows if d.plan.get("grows") or d.plan.get("shrinks"))
    for name in s.plan.clusters:
        out.allocation[name] = [(t, n) for t, n in allocation_history(s.store.list_nodes(name, live=False), t0)
                                if t <= end] + [(end, _held_at(s.store.list_nodes(name, live=False), end))]
        jobs = s.store.list_jobs(name)
        times = sorted({t0, end, *[j.submitted_at for j in jobs if t0 <= j.submitted_at <= end],
                        *[j.started_at for j in jobs if j.started_at and t0 <= j.started_at <= end]})
        out.queue[name] = [(t, sum(1 for j in jobs if j.submitted_at <= t and (j.started_at or 1e18) > t))
                           for t in times]
    failed = [j for j in out.jobs if j["state"] != JobState.SUCCEEDED]
    if failed:
        raise FawkesError(f"{len(failed)} job(s) of the stream failed; see {s.workdir}/coordinator.log")
    return out


def replay_window(url: str, plan: DemoPlan, since: float, until: float, labels, workdir: Path,
                  seeds: tuple[int, ...] = (1, 2, 3), *, master_factor: bool = False) -> dict[str, dict]:
    """The twin of a live run: the jobs of the state at ``url`` submitted in ``[since, until]``,
    exported (``fawkes trace from-state``: ``stream.csv``, ``stream-costs.yaml``,
    ``stream-clusters.csv`` and ``presets/`` in ``workdir``) and replayed under each of ``labels``
    (policy names or presets, at the plan's periods: :func:`preset_for`); replay rows by label.
    ``master_factor``: the export applies the measured ``master_task_factor`` (off by default)."""
    from fawkes.traces.from_state import export, replay
    from fawkes.traces.trace import write_trace

    store = Store(url)
    try:
        ex = export(store, since=since, until=until, master_factor=master_factor)
    finally:
        store.close()
    workdir.mkdir(parents=True, exist_ok=True)
    trace, costs, clusters = workdir / "stream.csv", workdir / "stream-costs.yaml", workdir / "stream-clusters.csv"
    with trace.open("w") as f:
        write_trace(ex.rows, f)
    costs.write_text(ex.cost_text())
    clusters.write_text(ex.clusters_csv())
    presets = {}
    (workdir / "presets").mkdir(exist_ok=True)
    for label in labels:
        path = workdir / "presets" / f"{file_name(label)}.yaml"
        path.write_text(yaml.safe_dump(preset_for(label, plan), sort_keys=False))
        presets[label] = str(path)
    return replay(str(trace), str(costs), str(clusters), capacity=ex.capacity, min_core=plan.min_core,
                  period_s=plan.period_s, policies=presets, seeds=seeds)


def _held_at(nodes, t: float) -> int:
    return sum(1 for n in nodes if n.requested_at <= t and (n.released_at is None or n.released_at > t))


def report(out: Outcome, predicted: dict | None = None) -> str:
    """Per cluster: jobs, mean response, mean slowdown, peak nodes; with ``predicted`` (policy ->
    per-cluster mean slowdown from the twin) a column per predicted policy."""
    pred = predicted or {}
    head = f"{'cluster':<8} {'jobs':>4} {'mean response s':>16} {'slowdown':>9} {'peak nodes':>10}"
    head += "".join(f" {p + ' (twin)':>16}" for p in pred)
    r = out.reference_s
    rs = (", ".join(f"{c} {v:.1f} s" for c, v in r.items()) if isinstance(r, dict) else f"{r:.1f} s")
    lines = [f"policy {out.policy}: {len(out.jobs)} jobs, reference runtime R = {rs} "
             "(one job alone on a minimum-size cluster)", head]
    peak = out.peak_nodes()
    for c, sd in out.slowdowns().items():
        js = [j for j in out.jobs if j["cluster"] == c]
        ln = (f"{c:<8} {len(js):>4} {sum(j['response_s'] for j in js) / len(js):>16.1f} {sd:>9.2f} "
              f"{peak.get(c, 0):>10}")
        ln += "".join(f" {p['cluster_mean_slowdown'].get(c, float('nan')):>16.2f}" for p in pred.values())
        lines.append(ln)
    ln = f"{'overall':<8} {len(out.jobs):>4} {'':>16} {out.mean_slowdown():>9.2f} {'':>10}"
    ln += "".join(f" {p['mean_slowdown']:>16.2f}" for p in pred.values())
    lines.append(ln)
    lines.append(f"reconfigurations {out.reconfigurations} in {out.ticks} ticks; makespan {out.makespan_s:.0f} s")
    return "\n".join(lines)


def plot(out: Outcome, path: Path, clusters=None, kinds: dict[str, str] | None = None) -> Path:
    """The allocation plot of a live run; with ``kinds`` (cluster -> kind, a mixed pool) each cluster's
    label names its kind, so the plot reads by kind."""
    from fawkes.traces.plot import plot_allocations

    clusters = list(clusters or out.allocation)
    label = {c: f"{c} ({kinds[c]})" if kinds and c in kinds else c for c in clusters}

    def since_start(pts):
        return [(t - out.start, n) for t, n in pts]

    return plot_allocations(
        path, {label[c]: since_start(out.allocation[c]) for c in clusters},
        {label[c]: since_start(out.queue[c]) for c in clusters},
        end=out.end - out.start, queue_label="queued jobs", unit="s since the stream started",
        title=f"fawkes demo: allocation and queue per MR-cluster ({out.policy})")
