"""Sample every MR-cluster: the daemons' metrics and the job table become a ClusterMetrics row.

Which metric feeds which policy (see docs/metrics.md): jobs from fawkes' own queue
(JD, DD, JS, JT); tasks from the drivers' REST APIs, queued jobs counted by their input
splits (TD, TT); cores used / cores from the Spark master (PU); HDFS used above the level
right after the input load / capacity from the NameNode (DU).  All of it through the kind's neutral
:class:`~fawkes.frameworks.sample.FrameworkSample`; the DU baseline (the level after the load) is kept
in the state (``mr_clusters.stored_baseline``), so a restarted coordinator weighs as before.  A job that has not started
counts the tasks an earlier run of the same application had on that cluster (stored with each
job as ``tasks_seen``, so a restart keeps it), at least one per input split; so does a started
job whose driver lists no stage yet.  DataNode bytes per node
go to the store for DP's victim order.  Hosts that stop answering SSH for ``grace_s`` are
marked failed (their nodes too), and the mechanism replaces their capacity; they are checked every
quarter of ``grace_s`` (at most 30 s), not at every sample.

CERES (``docs/mechanism.md``): with ``swollen_threshold`` set, each sample also reads every
running node's host once (:class:`~fawkes.coordinator.usage.NodeWindows`: one SSH command per
host, bounded, a host that fails is unknown); with ``straggler_factor`` set, each running job's
progress (completed tasks / tasks seen, from the driver's stages, which the sampling reads anyway)
is kept over its last three samples.  Both reach the snapshot as
:class:`~fawkes.coordinator.view.Signals` (:meth:`Sampler.signals`); the usage windows are also saved
in the state every 30 s (``sampler_memory``) and a restarted coordinator resumes them, the progress
stays in memory (three samples rebuild it).  With both off nothing of this runs.

UBIS U-7 (``pu_signal: measured``): PU reads the CPU the cluster's nodes are measured to use instead of
the slots its framework reports occupied.  The readings are the per-node utilisation the coordinator
already collects: with lending on (config ``opportunistic:``), the UBIS agent's monitors
(:meth:`fawkes.coordinator.ubis.Lender.cpu_use`, handed over by :meth:`Sampler.use_host_cpu`; a lent
host is left out, its reading holds its borrower's worker); otherwise the same per-node windows as
CERES' C-1 (:class:`~fawkes.coordinator.usage.NodeWindows`, the CPU between a node's last two
readings).  They reach the sample through the neutral ``node_cpu`` of
:func:`~fawkes.mechanism.sampling.sample_cluster`, as in the simulator; a node not measured is left out
of the mean, and a cluster with none keeps its occupied slots.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.finished import FinishedJobs, Tally
from fawkes.coordinator.fleet import Fleet
from fawkes.coordinator.usage import SAVE_EVERY_S, NodeWindows
from fawkes.coordinator.view import Signals
from fawkes.errors import FawkesError
from fawkes.frameworks.sample import TaskCounts
from fawkes.mechanism import ClusterMetrics, ClusterState, JobFacts, Settings, ceres, sample_cluster
from fawkes.mechanism.model import JobProgress
from fawkes.store import Store
from fawkes.store.jobs import job_program, tasks_learned
from fawkes.store.lifecycle import JOB_UNFINISHED, HostState, JobState, NodeState
from fawkes.store.samples import SampleWrite

log = logging.getLogger("fawkes.sampler")

SPLIT_BYTES = 128 * 1024 * 1024  # an input split (dfs.blocksize): tasks of a job not yet started


class Sampler:
    def __init__(self, store: Store, fleet: Fleet, dispatcher: Dispatcher, settings: Settings, *,
                 clock: Callable[[], float] = time.time, grace_s: float = 30.0):
        self.store = store
        self.fleet = fleet
        self.dispatcher = dispatcher
        self.settings = settings
        self.clock = clock
        self.grace_s = grace_s
        self.unreachable_since: dict[str, float] = {}
        #: how often the hosts' SSH liveness is checked: every quarter of the grace (at most 30 s), not at every
        #: sample (one SSH command per host each time); a host that stops answering is failed within 1.5 grace
        self.liveness_every_s = min(grace_s / 4, 30.0)
        self.hosts_checked_at: float | None = None  # this clock's time of the last check
        # CERES' signals, in memory (docs/mechanism.md, CERES): only when their setting is on
        self.measure_pu = settings.pu_signal == "measured"
        self.windows = NodeWindows(settings.usage_window_s) \
            if settings.swollen_threshold is not None or self.measure_pu else None
        self.windows_restored = False  # taken back from the state at the first reading (a restart resumes them)
        self.windows_saved_at: float | None = None  # this clock's time of the last save
        self.host_cpu: Callable[[], Mapping[str, float]] | None = None  # U-7: the UBIS agent's readings
        self.track_progress = settings.straggler_factor is not None
        self.progress: dict[str, dict[int, tuple]] = {}  # cluster -> job id -> (time, fraction) samples kept
        self.job_info: dict[int, tuple[float | None, float | None]] = {}  # job id -> (reference runtime, start)
        self.web_ui: dict[str, str | None] = {}  # cluster -> its kind's web UI, as last sampled
        self.finished = FinishedJobs()  # each live cluster's finished jobs, read incrementally

    def step(self) -> None:
        """One sample of every loading and active cluster.  The state is read for all of them at once
        (the clusters, their nodes, their unfinished jobs, the jobs finished since the last step:
        :class:`~fawkes.coordinator.finished.FinishedJobs`), not cluster by cluster."""
        now = self.clock()
        if self.hosts_checked_at is None or now - self.hosts_checked_at >= self.liveness_every_s:
            self.hosts_checked_at = now
            self.check_hosts()
        if self.windows is not None:
            self.read_usage()
        clusters = self.store.live_clusters()
        todo = [c for c in clusters if ClusterState(c.state) in (ClusterState.LOADING, ClusterState.ACTIVE)]
        if todo:
            nodes = self.store.live_nodes_by_cluster()
            specs = self.fleet.specs(todo, states={NodeState.RUNNING, NodeState.DRAINING}, nodes=nodes)
            unfinished = self.store.unfinished_jobs_by_cluster()
            tallies = self.finished.refresh(self.store, {c.name: c.id for c in clusters})
            read = read_metrics({c.name: (*specs[c.name], [j.id for j in unfinished.get(c.name, [])
                                                          if j.state == JobState.RUNNING])
                                 for c in todo if not isinstance(specs[c.name], FawkesError)})
            writes = []
            for c in todo:
                got = specs[c.name]
                try:
                    if isinstance(got, FawkesError):
                        raise got
                    fs = read[c.name]
                    if isinstance(fs, FawkesError):
                        raise fs
                    writes.append(self._sample(c, *got, nodes.get(c.name, []), unfinished.get(c.name, []),
                                               tallies.get(c.name) or Tally(), loading=c.state == ClusterState.LOADING,
                                               fs=fs))
                except FawkesError as exc:
                    log.warning("sampling %s: %s", c.name, exc)
            self._write(writes)
        live = {c.name for c in clusters}
        for name in [n for n in self.web_ui if n not in live]:
            del self.web_ui[name]
        if self.track_progress:
            for name in [n for n in self.progress if n not in live]:
                del self.progress[name]

    def use_host_cpu(self, fn: Callable[[], Mapping[str, float]]) -> None:
        """U-7 reads the CPU of each host from ``fn`` (host -> fraction: the UBIS agent's monitors); the
        sampler's own windows then run only for CERES' C-1 (one collector per host, not two)."""
        self.host_cpu = fn
        if self.settings.swollen_threshold is None:
            self.windows = None

    def node_cpu(self, nodes) -> list[float]:
        """U-7: the measured CPU fraction of each of ``nodes`` (the store's running nodes of one cluster)
        that has a reading, from the UBIS agent's monitors if handed over, else from the windows."""
        if self.host_cpu is not None:
            try:
                by_host = self.host_cpu()
            except Exception as exc:  # noqa: BLE001 - a failing collector means unmeasured, not a dead sampler
                log.warning("usage: %s", exc)
                return []
            return [by_host[n.host] for n in nodes if n.host in by_host]
        by_node = self.windows.cpu_now() if self.windows is not None else {}
        return [by_node[n.id] for n in nodes if n.id in by_node]

    def read_usage(self) -> None:
        """CERES C-1: one reading of every RUNNING node's host (those the liveness check just
        found unreachable are skipped: unknown), folded into the node's window.  Never raises."""
        try:
            nodes = {n.id: n.host for n in self.store.list_nodes() if n.state == NodeState.RUNNING
                     and n.host not in self.unreachable_since}
            if not self.windows_restored:
                self.restore_windows(nodes)
            errors = self.windows.step(self.fleet.ex, nodes)
        except FawkesError as exc:  # the store away: the windows stay as they were, the step goes on
            log.warning("usage: %s", exc)
            return
        for host, err in sorted(errors.items()):
            log.info("usage of %s unknown: %s", host, err)
        now = self.clock()
        if self.windows_saved_at is None or now - self.windows_saved_at >= SAVE_EVERY_S:
            try:
                self.store.save_usage_windows(self.windows.to_doc(), now)
                self.windows_saved_at = now
            except FawkesError as exc:  # kept in memory; saved at a later step
                log.warning("usage: cannot save the windows: %s", exc)

    def restore_windows(self, nodes: dict[int, str]) -> None:
        """Take back the usage windows a previous coordinator saved, of the nodes still running on the
        same hosts (once, at the first reading)."""
        doc = self.store.load_usage_windows()
        self.windows_restored = True
        if doc is None:
            return
        taken, refused = self.windows.restore(doc, nodes)
        for line in refused[:5]:
            log.warning("%s: starting it afresh", line)
        if taken:
            log.info("usage: %d node window(s) resumed from the state", taken)

    def signals(self) -> Signals:
        """What the snapshot takes from this sampler's memory (empty with CERES off)."""
        usage = self.windows.usage() if self.windows is not None else {}
        progress = {c: tuple(JobProgress(str(j), tuple(q), *self.job_info.get(j, (None, None)))
                             for j, q in sorted(jobs.items()) if q) for c, jobs in self.progress.items()}
        return Signals(usage, {c: p for c, p in progress.items() if p})

    def note_progress(self, name: str, now: float, jobs, tasks_by_job) -> None:
        """CERES C-2: per running job with stages listed by its driver, the fraction of its tasks
        done (completed / (pending + running + completed), Spark's per-stage counts summed), the samples
        the estimate over ``straggler_window_s`` needs kept (:func:`~fawkes.mechanism.ceres.keep_progress`);
        jobs no longer running are forgotten."""
        mine = self.progress.setdefault(name, {})
        running = set()
        for j in jobs:
            if j.state != JobState.RUNNING or not j.app_id:
                continue
            running.add(j.id)
            counts = tasks_by_job.get(j.app_id)
            if counts is None or not counts.total:  # between two actions no stage is listed: no sample
                continue
            seen = counts.pending + counts.running + counts.completed
            mine[j.id] = ceres.keep_progress(mine.get(j.id, ()), now, counts.completed / seen if seen else 0.0,
                                             self.settings.straggler_window_s)
            self.job_info[j.id] = (j.ref_runtime, j.started_at)
        for jid in [k for k in mine if k not in running]:
            del mine[jid]
            self.job_info.pop(jid, None)

    def sample(self, name: str, *, loading: bool = False) -> None:
        """One sample of the cluster ``name`` alone, read from the state as it is now (``step`` reads
        every cluster's at once).  ``loading``: the cluster is loading its input (no DU baseline yet)."""
        c = self.store.get_cluster(name)
        spec, driver = self.fleet.spec(name, states={NodeState.RUNNING, NodeState.DRAINING})
        jobs = self.store.list_jobs(name, states=JOB_UNFINISHED)
        self._write([self._sample(c, spec, driver, self.store.list_nodes(name), jobs,
                                  Tally.of(self.store.list_jobs(name, states=[JobState.SUCCEEDED, JobState.FAILED])),
                                  loading=loading)])

    def _write(self, writes: list[SampleWrite]) -> None:
        """Every cluster's sample of the step in one transaction (one per cluster cost ~2 ms each on
        PostgreSQL: seconds a step at 1,000 clusters); a cluster released meanwhile is skipped, logged."""
        try:
            problems = self.store.record_samples(writes)
        except FawkesError as exc:
            log.warning("sampling: %s", exc)
            return
        for p in problems:
            log.warning("sampling: %s", p)

    def _sample(self, c, spec, driver, nodes, jobs, finished: Tally, *, loading: bool, fs=None) -> SampleWrite:
        """The sample of the live cluster row ``c`` from its spec, its nodes (the store's, holding a host),
        its unfinished jobs and the tally of its finished ones: what to write (:meth:`_write`).  ``fs``: its
        daemons' sample, read already (:func:`read_metrics`); None: read here."""
        name = c.name
        self.web_ui[name] = driver.web_ui(spec)  # the dashboard's link to the kind's own page
        running = [j for j in jobs if j.state == JobState.RUNNING]  # their task counts, per job
        if fs is None:
            fs = driver.metrics(spec, jobs=[j.id for j in running])
        now = self.clock()
        # DU: bytes written since the input load, stored above the baseline (kept in the state: a restart
        # weighs as before), unless the framework counts the bytes its jobs wrote itself
        base = c.stored_baseline
        if base is None and not loading and fs.stored_bytes is not None:
            base = self.store.note_stored_baseline(name, fs.stored_bytes)
        node_cpu = self.node_cpu([n for n in nodes if n.state == NodeState.RUNNING]) if self.measure_pu else ()
        m, seen = cluster_metrics(now, self.settings, fs, running, jobs, finished, stored_baseline=base,
                                  loading=loading, node_cpu=node_cpu)
        if self.track_progress:
            self.note_progress(name, now, jobs, fs.tasks_by_job)
        stored = {n.id: int(fs.stored_by_node[n.host]) for n in nodes
                  if n.host in fs.stored_by_node and fs.stored_by_node[n.host] != n.stored_bytes}
        where = task_time_by_role(spec.master.name, running, fs.task_time_by_job) if fs.task_time_by_job else {}
        busy = {} if fs.running_by_node is None else {
            n.id: int(fs.running_by_node.get(n.host, 0)) for n in nodes
            if int(fs.running_by_node.get(n.host, 0)) != (n.running_tasks or 0)}
        return SampleWrite(name, m, seen, stored, where, busy)

    def check_hosts(self) -> None:
        """SSH liveness of every allocated host; failed after ``grace_s`` without an answer."""
        held = self.store.host_names(HostState.ALLOCATED)
        if not held:
            return
        now = self.clock()
        results = self.fleet.ex.run(held, "true", timeout=10)
        for host, r in results.items():
            if r.ok:
                self.unreachable_since.pop(host, None)
                continue
            since = self.unreachable_since.setdefault(host, now)
            if now - since < self.grace_s:
                continue
            log.warning("host %s unreachable for %.0fs: %s", host, now - since, r.error)
            for n in self.store.list_nodes():
                if n.host == host and n.state not in (NodeState.FAILED, NodeState.RELEASED):
                    try:
                        self.store.transition_node(n.id, NodeState.FAILED, f"host unreachable: {r.error}")
                    except FawkesError as exc:
                        log.info("skipped: %s", exc)
            try:
                self.store.set_host_state(host, HostState.FAILED, detail=r.error or "unreachable")
            except FawkesError as exc:
                log.info("skipped: %s", exc)
            self.unreachable_since.pop(host, None)


#: how many clusters' daemons a sample step reads at once (each read waits on HTTP APIs of busy daemons:
#: one after another, a step over N clusters took N times one cluster's requests)
SAMPLE_WORKERS = 16


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The process' sampling threads (started as needed, at most :data:`SAMPLE_WORKERS`, kept between steps)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(SAMPLE_WORKERS, thread_name_prefix="fawkes-sample")
        return _POOL


def read_metrics(todo: Mapping[str, tuple]) -> dict[str, object]:
    """``driver.metrics(spec, jobs=running)`` of every cluster of ``todo`` (name -> (spec, driver, running
    job ids)), up to :data:`SAMPLE_WORKERS` at once for kinds whose reads wait on the network
    (``metrics_wait``), the others in turn: name -> its sample, or the FawkesError its read raised (any
    other exception is raised, as a read in turn raises it)."""
    out: dict[str, object] = {}
    waiting = [n for n, (_, drv, _) in todo.items() if getattr(drv, "metrics_wait", True)]

    def one(name: str):
        spec, drv, ids = todo[name]
        try:
            return drv.metrics(spec, jobs=ids)
        except FawkesError as exc:
            return exc

    if len(waiting) > 1:
        out.update(zip(waiting, _pool().map(one, waiting)))
    for name in todo:
        if name not in out:
            out[name] = one(name)
    return out


def cluster_metrics(now: float, settings: Settings, fs, running: Sequence, jobs: Sequence,
                    finished: Sequence | Tally, *,
                    stored_baseline: float | None, loading: bool = False,
                    node_cpu: Sequence[float] = ()) -> tuple[ClusterMetrics, dict[int, int]]:
    """One sample of a cluster from its kind's neutral sample ``fs`` and its jobs: what
    :meth:`Sampler.sample` records (pure; the parity replay runs it on daemon documents too).

    ``running``: the jobs whose task counts ``fs`` holds (asked for before it was taken); ``jobs``: the
    unfinished ones; ``finished``: the succeeded and failed ones; ``stored_baseline``: the stored bytes
    right after the input load (None: not known yet, nothing written counted).  Also returns, per job,
    a count of its tasks larger than the one stored (``tasks_seen``).  Completed tasks (TT) are counted
    since the deployment, as the model says: every finished job's tasks (the most it reported) and what
    the unfinished ones completed."""
    done = finished if isinstance(finished, Tally) else Tally.of(finished)
    learned = dict(done.learned)
    for prog, n in tasks_learned(jobs).items():
        learned[prog] = max(learned.get(prog, 0), n)
    facts, seen = [], {}
    only = cluster_wide_job(fs, running)
    for j in jobs:
        counts = fs.tasks_by_job.get(j.app_id) if j.app_id else None
        if only is not None and j.id == only:
            counts = fs.tasks
        pending, run, n = job_tasks(j, counts, learned)
        if n > (j.tasks_seen or 0):
            seen[j.id] = n
            learned[job_program(j)] = max(learned.get(job_program(j), 0), n)
        facts.append(JobFacts(submit_time=j.submitted_at, input_bytes=float(j.input_bytes or 0),
                              pending_tasks=pending, running_tasks=run, started_at=j.started_at,
                              ref_runtime=j.ref_runtime))
    used = fs.stored_bytes if fs.stored_bytes is not None else 0.0
    written = fs.written_bytes if fs.written_bytes is not None else \
        max(0.0, used - (used if stored_baseline is None else stored_baseline))
    completed = fs.tasks.completed if only is not None else sum(c.completed for c in fs.tasks_by_job.values())
    m = sample_cluster(
        now, facts, settings,
        busy_slots=fs.busy_slots, configured_slots=fs.slots, output_bytes=written,
        storage_capacity=fs.storage_capacity, completed_jobs=done.jobs,
        completed_tasks=completed + done.tasks, loading=loading,
        node_cpu=node_cpu,
    )
    return m, seen


def task_time_by_role(master: str, running: Sequence, by_job) -> dict[int, dict[str, tuple[int, float]]]:
    """Per running job whose kind reports where its tasks ran (``by_job``: the kind's job id -> node name ->
    (tasks, seconds)), the tasks that ended on the cluster's master node (``master``: it also runs the
    cluster's masters and the jobs' drivers) and on the others, with their seconds: ``{job id: {"master":
    (n, s), "other": (n, s)}}`` (what the twin's export reads: ``fawkes.traces.from_state``)."""
    out = {}
    for j in running:
        where = by_job.get(j.app_id) if j.app_id else None
        if not where:
            continue
        sums = {"master": [0, 0.0], "other": [0, 0.0]}
        for node, (n, secs) in where.items():
            acc = sums["master" if node == master else "other"]
            acc[0] += n
            acc[1] += secs
        out[j.id] = {k: (n, secs) for k, (n, secs) in sums.items()}
    return out


def cluster_wide_job(fs, running) -> int | None:
    """The job a kind's cluster-wide task counts belong to, when the kind counts tasks per cluster only
    (``tasks_by_job`` empty, ``tasks`` not: a Dask scheduler knows no application per job) and exactly one
    job runs: that job's id (its tasks are the cluster's); else None (per-job counts, or several jobs
    whose share of the cluster's tasks is unknown: each counted as not started, as before)."""
    if fs.tasks_by_job or not fs.tasks.total or len(running) != 1:
        return None
    return running[0].id


def job_tasks(job, counts: TaskCounts | None, learned: dict[str, int]) -> tuple[int, int, int]:
    """``(pending, running, seen)`` of one unfinished job: what its driver reports while a stage is
    listed (``seen`` = its pending + running + completed tasks, each task once where the kind tells a
    re-run attempt from a task: its distinct tasks); otherwise (not started, or started
    with no stage listed yet: between the driver registering and its first stage, or between two
    actions) the most tasks a run of the same application had, at least one per input split, less
    what this run completed, and at least 1 (a dip to 0 there moved nodes away and back)."""
    if counts is not None and counts.total:
        attempts = counts.pending + counts.running + counts.completed
        return counts.pending, counts.running, min(attempts, counts.distinct) if counts.distinct else attempts
    splits = max(1, math.ceil((job.input_bytes or 0) / SPLIT_BYTES))
    done = counts.completed if counts is not None else 0
    return max(1, max(splits, learned.get(job_program(job), 0), job.tasks_seen or 0) - done), 0, done

