"""The coordinator's history as simulator input: a job trace and a cost file (``fawkes trace from-state``).

What the store holds and how it becomes the twin's input (docs/live.md):

* **jobs** (finished successfully, submitted in ``[since, until]``): one trace row each;
  ``submit_s`` from the first job's submission, the job's cluster, its input bytes and the
  reference runtime R it was submitted with (``ref_runtime``, so that the replay's slowdowns
  are against the same R as the live ones).
* **tasks**, from the sampler's rows of the job's cluster while it ran (a cluster runs one job
  at a time, so the driver's task counts in those samples are that job's): task count = the
  largest ``completed + running`` seen, slot seconds = the integral of ``running_tasks`` over
  the samples, capped at the cluster's slots with an executor up (a grown node's from its start
  plus an executor's start); every task becomes a map (``reduces`` 0) of mean ``map_s`` = slot seconds / tasks.
  Time a job ran at most one task while it had a free slot and tasks to come (a one-task stage,
  the driver between stages) is serial: its wall time joins the row's ``startup_s``, its slot
  seconds leave ``map_s`` (on more nodes it would take as long; spread as map work, the replay
  of a grown cluster ran 10-15 % fast).
* **the master node's tasks** (``master_task_factor``): a cluster's master node (its first core node)
  runs the masters and the jobs' drivers beside its executor, in the same CPU, while a node grown under
  a job starts a cold executor for it (the job's first tasks there start its workers): a task's time
  differs between the two, either way round depending on the job.  Where the kind says where each job's tasks ended
  (``jobs.task_time``: tasks and seconds on the master and on the others; Spark's driver
  ``/allexecutors``), the factor is the median over jobs with tasks on both sides of the ratio of their
  mean task times, and a row's ``map_s`` becomes a task's time on another node: the job's mean over its
  share ``q`` of tasks on the master, ``map_s = mean / (q f + 1 - q)``; the replay runs the master's
  tasks ``f`` times as long.  A pool of several kinds: per kind (1 for a kind that does not say).
  Applied only with ``export(master_factor=True)`` (``--master-factor``); by default measured and shown.
* **per-job start-up and overhead**: dispatch to the first sample seeing a running task (driver
  and executors start) -> the row's ``startup_s`` (the job's own: on a shared machine it varied
  from 66 to 201 s within one run, and a cluster with one job took the median's error whole) and,
  as their median, ``job_startup_s`` (for rows without one); the last such sample to the job's end (result
  commit, driver stop) -> ``job_overhead_s``; medians over jobs, half a sample period taken off
  each (a task starts, on average, that long before a sample sees it).  The dispatcher runs one
  job per cluster at a time: ``max_running_jobs`` 1.  Both are honoured by the simulator's
  gate (:meth:`fawkes.sim.cluster.SimCluster.submit`).
* **nodes**: each node's transitions ``requested -> running`` (per role: ``core_ready_s``,
  ``tr_ready_s``, ``tc_ready_s``, each plus an executor's start: a node grown under a running job
  serves it once the job's executor there is up, measured as the median of a job's application
  registered -> its first task seen) and ``draining -> released`` (TR: ``fp_stop_s``; TC: DP,
  ``dp_fixed_s``), medians; slots per node = the hosts' cores (a Spark worker's cores are its
  concurrent tasks): ``map_slots`` = cores, ``reduce_slots`` 1 (unused, every task is a map).
* **pool and loop**: usable hosts (``--capacity``), minima, T (median gap between decisions) and
  the policies that decided, for the ``fawkes simulate`` command printed with the export.
* **a pool of several kinds** (a mixed pool: spark-hdfs, flink-hdfs and dask clusters under one
  coordinator; a cluster's kind is the ``frameworks`` row it names): the start-up, overhead,
  executor start, node ready and stop times above are also measured per kind, on that kind's jobs
  and nodes only, and given to each cluster of the kind (``Export.cluster_costs``, the cost file's
  ``clusters:``, which ``fawkes simulate`` applies with ``CostModel.for_cluster``); a row's slot
  cap uses its kind's executor start.  Clusters of one kind: no per-cluster costs, as before.
* **what the sampler knew** (the cluster file's ``tasks_known``): the live sampler counts a job
  whose tasks it has not seen yet as the most tasks an earlier run of the same program on that
  cluster reported (at least one per input split); the export gives each cluster that count from
  the jobs that finished before the window, so a replay's first jobs are counted as live counted
  them (td-damped's ``cap_to_demand`` grows a cluster only up to that demand).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from sqlmodel import col, select

from fawkes.traces.trace import TraceRow
from fawkes.store import Store
from fawkes.store.jobs import job_program, tasks_learned
from fawkes.store.lifecycle import JobState, NodeState
from fawkes.store.schema import DecisionRecord, Framework, Host, Job, MRCluster, Node, NodeTransition, Sample

#: cost-model fields the export can measure, and where they come from
MEASURED = {
    "map_slots": "hosts' cores (Spark worker cores)",
    "max_running_jobs": "jobs a cluster runs at once",
    "job_startup_s": "median dispatch to the first sample seeing a task (- half a sample period)",
    "job_overhead_s": "median last sample seeing a task (+ half a sample period) to the job's end",
    "core_ready_s": "median requested -> running of core nodes added to active clusters, + executor start",
    "tr_ready_s": "median requested -> running of TR nodes, + executor start",
    "tc_ready_s": "median requested -> running of TC nodes, + executor start",
    "fp_stop_s": "median draining -> released of TR nodes (FP)",
    "dp_fixed_s": "median draining -> released of TC nodes (DP)",
    "master_task_factor": "median over jobs of a task's seconds on the master node / on the others (jobs.task_time)",
}

#: a job's task time per node counts toward the master factor when both its master node and the others
#: ended at least this many of its tasks
MIN_TASKS_PER_SIDE = 2


@dataclass
class JobTasks:
    tasks: int
    slot_s: float
    span_s: float  # from the first to the last sample seeing a running task (+ one sample period)
    samples: int
    first_busy: float = 0.0  # time of the first / last sample seeing a running task
    last_busy: float = 0.0
    serial_s: float = 0.0  # wall time its stages ran at most one task with free slots and tasks to come
    serial_idle_s: float = 0.0  # of it, the wall time no task of it ran (the driver between stages, or waiting)


@dataclass
class Export:
    rows: list[TraceRow]
    costs: dict[str, float | int]
    minima: dict[str, int]
    capacity: int
    period_s: float | None
    policies: list[str]
    sample_period_s: float | None
    skipped: dict[str, int] = field(default_factory=dict)
    measured: dict[str, str] = field(default_factory=dict)  # field -> how many observations
    origin: float = 0.0
    tasks_known: dict[str, int] = field(default_factory=dict)  # cluster -> what its sampler knew at the start
    #: cluster -> its framework kind (the ``frameworks`` row its MR-cluster names; else the framework's name)
    kinds: dict[str, str] = field(default_factory=dict)
    #: a pool of several kinds: cluster -> its own kind's costs (``kind`` and fields of
    #: fawkes.sim.costs.PER_CLUSTER; the cost file's ``clusters:``), and how many observations each
    cluster_costs: dict[str, dict[str, float | str]] = field(default_factory=dict)
    cluster_measured: dict[str, dict[str, str]] = field(default_factory=dict)
    #: job id -> the serial seconds its row's ``startup_s`` includes (:func:`job_tasks`; what replays charge
    #: to start-up rather than spread over slots)
    serial_s: dict[str, float] = field(default_factory=dict)
    #: job id -> of its serial seconds, those in which no task ran (the rest ran one task: on one slot the
    #: replay takes as long either way; these add time the slot seconds never held)
    serial_idle_s: dict[str, float] = field(default_factory=dict)
    #: the pool's measured ``master_task_factor`` and over how many jobs (None: no job had tasks on both sides)
    master_factor: tuple[float, int] | None = None
    master_factor_applied: bool = False  # in the costs and the rows' map_s (export(master_factor=True))

    def cost_text(self) -> str:
        """The cost file (:func:`dump_costs`), per-cluster costs included; a factor measured but not applied
        is a comment."""
        import io

        buf = io.StringIO()
        dump_costs(self.costs, self.measured, buf, self.cluster_costs, self.cluster_measured)
        if self.master_factor is not None and not self.master_factor_applied:
            f, n = self.master_factor
            buf.write(f"# master_task_factor: {f}  measured over {n} jobs, not applied (fawkes trace from-state "
                      "--master-factor applies it; docs/live.md)\n")
        return buf.getvalue()

    def clusters_csv(self) -> str:
        """The cluster file (``fawkes simulate --clusters``): every cluster at t = 0 with its minimum and
        the task count the live sampler already knew for its jobs."""
        return "cluster,request_s,min_core,tasks_known\n" + "".join(
            f"{c},0,{m},{self.tasks_known.get(c, 0)}\n" for c, m in self.minima.items())


def job_tasks(samples: list, start: float, end: float, period: float, usable=None) -> JobTasks | None:
    """Tasks and slot seconds of the one job a cluster ran in ``[start, end]`` from its samples.

    ``usable(t)``, when given, is the cluster's slots with an executor up at ``t``: running tasks
    are capped at it too (a grown node's worker counts in the configured slots from its
    registration, but it runs tasks only once the job's executor there has started).

    **Serial time**: between the first and the last task seen, an interval where the job ran at most
    one task although a second slot was free and some of its tasks had not started (a one-task stage,
    such as reading a small input, or the driver between two stages) is the job's own structure, not
    a lack of nodes: its wall time is ``serial_s`` and its slot seconds are left out of ``slot_s``.
    On more slots the interval would take as long; the replay charges it with the start-up
    (:func:`export`) instead of spreading it over the slots as map work."""
    inside = [s for s in samples if start <= s.time <= end]
    if not inside:
        return None
    # completed tasks count since the deployment (the earlier jobs' too): this job's are those above the
    # lowest count in its window
    base = min(s.completed_tasks for s in inside)
    tasks = max(s.completed_tasks - base + s.running_tasks for s in inside)
    slot_s = serial_s = idle_s = 0.0
    busy = [s.time for s in inside if s.running_tasks > 0]
    if tasks <= 0 or not busy:
        return None
    for k, s in enumerate(inside):
        nxt = inside[k + 1].time if k + 1 < len(inside) else end
        dt = max(0.0, min(nxt, end) - s.time)
        # the tasks seen run until the next sample (a late sample is a slow coordinator, not idle
        # tasks); never more than the cluster's slots: the driver's REST API counts a task as
        # running until it has handled its result, when the next one already runs on that core
        slots = s.configured_slots if s.configured_slots > 0 else math.inf
        if usable is not None and (up := usable(s.time)) > 0:
            slots = min(slots, up)
        running = min(s.running_tasks, slots)
        to_come = tasks - (s.completed_tasks - base) - s.running_tasks
        if busy[0] <= s.time < busy[-1] and running <= 1 < slots < math.inf and to_come > 0:
            serial_s += dt
            idle_s += dt if running == 0 else 0.0
        else:
            slot_s += running * dt
    if slot_s <= 0:
        return None
    return JobTasks(tasks, slot_s, busy[-1] - busy[0] + period, len(inside), busy[0], busy[-1], serial_s, idle_s)


@dataclass(frozen=True)
class NodeTimes:
    """A node's transitions (the first of each), from its transition rows; ``grown``: added to an
    active cluster or not a core node (a deployed core node starts with its cluster)."""

    req: float
    run: float | None
    drain: float | None
    rel: float | None
    grown: bool


def _node_times(n, ts: list, clusters: dict) -> NodeTimes:
    def first(state):
        return next((t.time for t in ts if t.to_state == state), None)

    req = first(NodeState.REQUESTED)
    req = n.requested_at if req is None else req
    c = clusters.get(n.cluster_id)
    grown = n.role != "core" or (c is not None and c.active_at is not None and req >= c.active_at)
    return NodeTimes(req, first(NodeState.RUNNING), first(NodeState.DRAINING), first(NodeState.RELEASED), grown)


def _usable_slots(nodes, times: dict[int, NodeTimes], cores: dict[str, int], ex_s):
    """``usable(cluster_id, t)``: the cores of the cluster's nodes that can run a task at ``t``: a node
    deployed with the cluster from its start, a grown one ``ex_s(cluster_id)`` after it ran (its
    executor's start, its kind's), each until it was released."""
    spans: dict[int, list[tuple[float, float, int]]] = {}
    for n in nodes:
        nt = times[n.id]
        run = nt.run if nt.run is not None else n.running_at
        if run is None:
            continue
        rel = nt.rel if nt.rel is not None else n.released_at
        spans.setdefault(n.cluster_id, []).append((run + ex_s(n.cluster_id) if nt.grown else float("-inf"),
                                                   rel if rel is not None else float("inf"),
                                                   cores.get(n.host, 1) or 1))

    def usable(cid: int, t: float) -> float:
        return float(sum(k for a, b, k in spans.get(cid, ()) if a <= t < b))

    return usable


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def export(store: Store, *, since: float | None = None, until: float | None = None,
           master_factor: bool = False) -> Export:
    """Read the store (read only) into trace rows, measured costs, minima and the loop's facts.

    ``master_factor``: apply the measured ``master_task_factor`` (the cost field, and each row's ``map_s``
    as a task's time on a node other than the master); off by default: it is measured and reported
    (:attr:`Export.master_factor`, a comment in the cost file) but the rows and costs are as before it
    (on the held-out seeds of 2026-11-28 it moved the twin's None away from the measurement: docs/live.md)."""
    with store.session() as s:
        clusters = {c.id: c for c in s.exec(select(MRCluster))}
        q = select(Job).where(Job.state == JobState.SUCCEEDED)
        if since is not None:
            q = q.where(Job.submitted_at >= since)
        if until is not None:
            q = q.where(Job.submitted_at <= until)
        jobs = list(s.exec(q.order_by(Job.submitted_at, Job.id)))
        others = {st: n for st, n in ((st, len(list(s.exec(select(Job.id).where(Job.state == st)))))
                                      for st in (JobState.FAILED, JobState.CANCELLED))}
        if jobs:
            lo, hi = jobs[0].submitted_at, max(j.ended_at or j.submitted_at for j in jobs)
        else:
            lo = hi = 0.0
        samples: dict[int, list] = {}
        for row in s.exec(select(Sample).where(Sample.time >= lo - 60, Sample.time <= hi + 60)
                          .order_by(Sample.time, Sample.id)):
            samples.setdefault(row.cluster_id, []).append(row)
        decisions = list(s.exec(select(DecisionRecord.time, DecisionRecord.policy)
                                .where(DecisionRecord.time >= lo - 600, DecisionRecord.time <= hi + 600)
                                .order_by(DecisionRecord.id)))
        nodes = list(s.exec(select(Node)))
        trans: dict[int, list[NodeTransition]] = {}
        for t in s.exec(select(NodeTransition).order_by(NodeTransition.node_id, NodeTransition.time,
                                                        col(NodeTransition.id))):
            trans.setdefault(t.node_id, []).append(t)
        hosts = list(s.exec(select(Host)))
        known = _tasks_known(s, jobs, lo)
        fw_kind = {f.name: f.kind for f in s.exec(select(Framework))}
    kind = {cid: fw_kind.get(c.framework, c.framework) for cid, c in clusters.items()}
    gaps = [b.time - a.time for a, b in zip(decisions, decisions[1:]) if b.time > a.time]
    period = _median(gaps)
    sgaps = [b.time - a.time for ss in samples.values() for a, b in zip(ss, ss[1:]) if b.time > a.time]
    sample_period = _median(sgaps) or 5.0
    rows: list[TraceRow] = []
    overheads: dict[str, list[float]] = {}  # by kind
    startups: dict[str, list[float]] = {}
    skipped = {str(k): v for k, v in others.items() if v}
    no_tasks = 0
    # each finished job's window and its tasks as the samples saw them: the first task seen gives an
    # executor's start (application registered -> first task, median over jobs), which the cap on
    # the slot time below needs (the cap does not move the first task seen)
    runs = [(j, begin, job_tasks(samples.get(j.cluster_id, []), begin, j.ended_at, sample_period))
            for j in jobs if j.ended_at is not None
            for begin in (j.dispatched_at or j.started_at or j.submitted_at,)]
    serial: dict[str, float] = {}
    serial_idle: dict[str, float] = {}
    executors: dict[str, list[float]] = {}  # by kind: a Spark executor, a Flink TaskManager's slots, a Dask worker
    for j, _, jt in runs:
        if jt is not None and j.started_at is not None and jt.first_busy >= j.started_at:
            executors.setdefault(kind[j.cluster_id], []).append(jt.first_busy - sample_period / 2 - j.started_at)
    ex_s = _median(_flat(executors)) or 0.0
    ex_kind = {k: _median(xs) or 0.0 for k, xs in executors.items()}
    factors = _master_factors(jobs, kind)
    n_factor = {k: len(xs) for k, xs in factors.items()}
    measured_factor = _median([f for xs in factors.values() for f in xs])
    factor_of = {k: _median(xs) for k, xs in factors.items()} if master_factor else {}
    pool_factor = measured_factor if master_factor else None
    times = {n.id: _node_times(n, trans.get(n.id, []), clusters) for n in nodes}
    usable = _usable_slots(nodes, times, {h.name: h.cores for h in hosts},
                           lambda cid: ex_kind.get(kind.get(cid, ""), ex_s))
    for j, begin, seen in runs:
        if seen is None:
            no_tasks += 1
            continue
        c = clusters[j.cluster_id]
        jt = job_tasks(samples.get(j.cluster_id, []), begin, j.ended_at, sample_period,
                       usable=lambda t, cid=j.cluster_id: usable(cid, t))
        # a task runs about half a sample period before the first sample sees it, and after the last
        startup = max(0.0, jt.first_busy - sample_period / 2 - begin)
        startups.setdefault(kind[j.cluster_id], []).append(startup)
        startup += jt.serial_s  # the job's one-task stages take as long on any number of slots
        serial[str(j.id)] = round(jt.serial_s, 2)
        serial_idle[str(j.id)] = round(jt.serial_idle_s, 2)
        overheads.setdefault(kind[j.cluster_id], []).append(max(0.0, j.ended_at - (jt.last_busy + sample_period / 2)))
        # the job's own tasks: the samples count every attempt (a task re-run after a shrink lost its
        # output counts twice) where its stored count (tasks_seen) takes each task once; the slot time
        # is the attempts', so a task's time is per attempt
        tasks = min(jt.tasks, j.tasks_seen) if j.tasks_seen else jt.tasks
        # with a master factor f (its kind's), the row's task time is a task's on a node other than the
        # master: the replay runs the master's tasks f times as long, so the job's mean, with its own share
        # q of tasks on the master, is kept: mean = t (q f + 1 - q)
        f = factor_of.get(kind[j.cluster_id])
        q = _master_share(j.task_time)
        scale = 1.0 if f is None or q is None else q * f + 1.0 - q
        rows.append(TraceRow(submit_s=j.submitted_at - lo, cluster=c.name, app="wordcount",
                             input_bytes=float(j.input_bytes or 0), maps=tasks, reduces=0,
                             ref_runtime_s=j.ref_runtime if j.ref_runtime and j.ref_runtime > 0 else None,
                             map_s=round(jt.slot_s / jt.tasks / scale, 3), reduce_s=None, job=str(j.id),
                             startup_s=round(startup, 2)))
    if no_tasks:
        skipped["without task samples"] = no_tasks
    costs: dict[str, float | int] = {}
    measured: dict[str, str] = {}
    cores = [h.cores for h in hosts if h.state in ("free", "allocated")]
    if cores:
        costs["map_slots"] = int(statistics.median_low(cores))
        costs["reduce_slots"] = 1
        measured["map_slots"] = f"{len(cores)} hosts"
    if overheads:
        costs["max_running_jobs"] = 1  # the dispatcher's (fawkes/coordinator/dispatch.py)
        measured["max_running_jobs"] = "the live dispatcher"
    ready: dict[tuple[str, str], list[float]] = {}  # (kind, role) -> seconds
    stop: dict[tuple[str, str], list[float]] = {}
    for n in nodes:
        nt, c = times[n.id], clusters.get(n.cluster_id)
        k = kind.get(n.cluster_id, "")
        if nt.run is not None and nt.grown and lo - 600 <= nt.req <= hi + 600:
            ready.setdefault((k, n.role), []).append(nt.run - nt.req)
        if (nt.drain is not None and nt.rel is not None and lo - 600 <= nt.drain <= hi + 600
                and (c is None or c.release_requested_at is None or nt.drain < c.release_requested_at)):
            stop.setdefault((k, n.role), []).append(nt.rel - nt.drain)
    pool = _lifecycle(_flat(startups), _flat(overheads), _by_role(ready), _by_role(stop), ex_s, len(_flat(executors)))
    costs.update(pool[0])
    measured.update(pool[1])
    if pool_factor is not None:
        costs["master_task_factor"] = round(pool_factor, 3)
        measured["master_task_factor"] = f"{sum(n_factor.values())} jobs"
    used = {j.cluster_id for j in jobs}
    minima = {clusters[i].name: clusters[i].min_core for i in used}
    kinds = {clusters[i].name: kind[i] for i in sorted(used)}
    cluster_costs: dict[str, dict[str, float | str]] = {}
    cluster_measured: dict[str, dict[str, str]] = {}
    # (a cluster whose jobs left no task in the samples has no row: no costs of its own either, and the
    # export counts its jobs under ``skipped``, "without task samples")
    exported = {r.cluster for r in rows}
    if len(set(kinds.values())) > 1:  # a pool of several kinds: each cluster gets its own kind's costs
        for k in dict.fromkeys(kinds.values()):
            kc, km = _lifecycle(startups.get(k, []), overheads.get(k, []), _by_role(ready, k), _by_role(stop, k),
                                ex_kind.get(k, ex_s), len(executors.get(k, [])))
            if factor_of.get(k) is not None:
                kc["master_task_factor"] = round(factor_of[k], 3)
                km["master_task_factor"] = f"{n_factor[k]} jobs"
            elif pool_factor is not None:  # a kind that does not say where its tasks ran: the thesis' model,
                kc["master_task_factor"] = 1.0  # not the pool's factor (another kind's)
            for name in (n for n, nk in kinds.items() if nk == k and n in exported):
                cluster_costs[name] = {"kind": k, **kc}
                cluster_measured[name] = {f: f"{how} of kind {k}" for f, how in km.items()}
    policies = list(dict.fromkeys(p for t, p in decisions if lo <= t <= hi))
    capacity = sum(1 for h in hosts if h.state in ("free", "allocated"))
    # a cluster with jobs in the window but none exported holds its minimum all along in the replay's
    # eyes: its hosts leave the capacity, and it leaves the cluster file (a trace cluster needs a job)
    silent = {n: m for n, m in minima.items() if n not in exported}
    if silent:
        capacity -= sum(silent.values())
        minima = {n: m for n, m in minima.items() if n in exported}
        kinds = {n: k for n, k in kinds.items() if n in exported}
        skipped["clusters without task samples (their minimum taken from the capacity)"] = len(silent)
    report_factor = None if measured_factor is None else (round(measured_factor, 3), sum(n_factor.values()))
    return Export(rows=rows, costs=costs, minima=minima, capacity=capacity, period_s=period, policies=policies,
                  sample_period_s=sample_period, skipped=skipped, measured=measured, origin=lo,
                  tasks_known={clusters[i].name: known[i] for i in used if known.get(i)}, kinds=kinds,
                  cluster_costs=cluster_costs, cluster_measured=cluster_measured, serial_s=serial,
                  serial_idle_s=serial_idle, master_factor=report_factor, master_factor_applied=master_factor)


def _master_factors(jobs: list, kind: dict[int, str]) -> dict[str, list[float]]:
    """Per kind, each job's mean task seconds on its cluster's master node over those on the other nodes
    (``jobs.task_time``), for the jobs with at least :data:`MIN_TASKS_PER_SIDE` tasks ended on each side."""
    out: dict[str, list[float]] = {}
    for j in jobs:
        tt = j.task_time or {}
        try:
            (nm, sm), (no, so) = tt["master"], tt["other"]
        except (KeyError, TypeError, ValueError):
            continue
        if nm >= MIN_TASKS_PER_SIDE and no >= MIN_TASKS_PER_SIDE and sm > 0 and so > 0:
            out.setdefault(kind[j.cluster_id], []).append((sm / nm) / (so / no))
    return out


def _master_share(task_time) -> float | None:
    """Of a job's ended tasks, the share that ran on the master node (None: not reported)."""
    try:
        nm, no = task_time["master"][0], task_time["other"][0]
    except (KeyError, TypeError, IndexError):
        return None
    return nm / (nm + no) if nm + no > 0 else None


def _flat(by_kind: dict[str, list[float]]) -> list[float]:
    return [x for xs in by_kind.values() for x in xs]


def _by_role(by: dict[tuple[str, str], list[float]], kind: str | None = None) -> dict[str, list[float]]:
    """``(kind, role) -> seconds`` as ``role -> seconds``, of one kind or (None) of all."""
    out: dict[str, list[float]] = {}
    for (k, role), xs in by.items():
        if kind is None or k == kind:
            out.setdefault(role, []).extend(xs)
    return out


def _lifecycle(startups: list[float], overheads: list[float], ready: dict[str, list[float]],
               stop: dict[str, list[float]], ex_s: float, n_ex: int) -> tuple[dict, dict]:
    """The start-up and stop costs of some jobs and nodes (the pool's, or one kind's): medians, and how
    many observations each; a node grown under a running job serves it once the job's executor there
    is up, so a ready time is the node's start plus an executor's (``ex_s``, from ``n_ex`` jobs)."""
    costs: dict[str, float] = {}
    measured: dict[str, str] = {}
    if overheads:
        costs["job_startup_s"] = round(_median(startups), 2)
        measured["job_startup_s"] = f"{len(startups)} jobs"
        costs["job_overhead_s"] = round(_median(overheads), 2)
        measured["job_overhead_s"] = f"{len(overheads)} jobs"
    for role, key in (("core", "core_ready_s"), ("transient", "tr_ready_s"), ("transient-core", "tc_ready_s")):
        if ready.get(role):
            costs[key] = round(_median(ready[role]) + ex_s, 2)
            measured[key] = (f"{len(ready[role])} nodes: {_median(ready[role]):.1f} s"
                             + (f" + executor start {ex_s:.1f} s ({n_ex} jobs)" if ex_s else ""))
    for role, key in (("transient", "fp_stop_s"), ("transient-core", "dp_fixed_s")):
        if stop.get(role):
            costs[key] = round(_median(stop[role]), 2)
            measured[key] = f"{len(stop[role])} nodes"
    return costs, measured


def _tasks_known(s, jobs: list, lo: float) -> dict[int, int]:
    """Per cluster of ``jobs``: the most tasks a finished run of the application of its first job in
    the window had reported before ``lo`` (``jobs.tasks_seen``): what the live sampler counted for a
    job of it that had not started (``tasks_learned``, as the sampler reads it)."""
    app: dict[int, str] = {}
    for j in jobs:
        app.setdefault(j.cluster_id, job_program(j))
    if not app:
        return {}
    finished: dict[int, list] = {}
    for j in s.exec(select(Job).where(col(Job.cluster_id).in_(list(app)), Job.ended_at < lo,
                                      col(Job.state).in_([JobState.SUCCEEDED, JobState.FAILED]))):
        finished.setdefault(j.cluster_id, []).append(j)
    known = {cid: tasks_learned(js).get(app[cid], 0) for cid, js in finished.items()}
    return {cid: n for cid, n in known.items() if n}


def dump_costs(costs: dict, measured: dict, out, clusters: dict | None = None,
               cluster_measured: dict | None = None) -> None:
    """The cost file: YAML of CostModel fields, one per line with where it came from; with ``clusters``
    (a pool of several kinds) a ``clusters:`` section, each cluster's kind and its kind's own costs."""
    out.write("# fawkes cost file (fawkes simulate --cost-file): CostModel fields measured on the live service\n")
    for k, v in costs.items():
        out.write(f"{k}: {v}{_comment(k, measured.get(k, ''))}\n")
    if clusters:
        out.write("clusters:  # a pool of several kinds: each cluster's fields measured on its kind's jobs and "
                  "nodes (the pool's above for the others)\n")
        for name, fields in clusters.items():
            out.write(f"  {_yaml_str(name)}:\n")
            for k, v in fields.items():
                v = _yaml_str(v) if isinstance(v, str) else v
                out.write(f"    {k}: {v}{_comment(k, (cluster_measured or {}).get(name, {}).get(k, ''))}\n")


def _yaml_str(text: str) -> str:
    """A name as YAML: as is when it is a plain name, else double-quoted with escapes (a newline or a NUL
    byte in the state stays on its line and reaches the reader, which refuses it naming the field)."""
    import json
    import re

    from fawkes.sim.costs import NAME_PATTERN

    return text if re.fullmatch(NAME_PATTERN, text) else json.dumps(text)


def _comment(key: str, how: str) -> str:
    how = how if how.isprintable() else repr(how)[1:-1]  # a kind's name from the state stays on its line
    note = MEASURED.get(key, "")
    return f"  # {note}" + (f" ({how})" if how else "") if note else ""


def finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def replay(trace: str, costs: str | None, clusters: str | None, *, capacity: int, min_core: int, period_s: float,
           policies: dict[str, str], seeds: tuple[int, ...] = (1, 2, 3), idle_timeout_s: float | None = 3600.0,
           workers: int | None = 1) -> dict[str, dict]:
    """``fawkes simulate --trace`` in-process: each of ``policies`` (label -> policy name, preset or
    YAML path) on the trace with the cost file; the aggregated rows (``metrics.aggregate``) by label."""
    from fawkes.sim import runner
    from fawkes.traces.costfile import load_cost_file
    from fawkes.sim.costs import cost_model
    from fawkes.sim.metrics import aggregate
    from fawkes.traces.trace import load_trace

    over = load_cost_file(costs) if costs else ()
    wl = load_trace(trace, capacity=capacity, min_core=min_core, period_s=period_s, clusters_file=clusters,
                    idle_timeout_s=idle_timeout_s, cost=cost_model(over))
    specs = [runner.parse_policy(p, wl.name) for p in policies.values()]
    matrix = runner.run_matrix(wl.name, specs, list(seeds), workers=workers, workload=wl, cost=over)
    return {label: aggregate(matrix[s.label]) for label, s in zip(policies, specs)}
