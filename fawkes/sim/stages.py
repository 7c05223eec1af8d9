"""The Spark-like job model: a job is a chain of stages with barriers, beside the MapReduce model
of ``fawkes/sim/cluster.py`` (chosen per cluster, ``WorkloadCluster.job_model``, or per job,
``JobSpec.model``: a trace's ``model`` column).

A job's stages are its maps then its reduces (a trace row's map-side and shuffle-reading
stages, as ``fawkes trace from-spark`` counts them).  The rules, each from the Spark event logs
fawkes imports (``bench/results/spark_stage_calibration_2026-11-27.json``: 5 applications of
Spark 1.2, 1.4 and 4.3, 8 stage boundaries), written down before the model ran on any check:

* **barrier**: a stage's tasks are pending only once every task of the stage before has
  finished (no slow-start, no copy overlapping the maps: 0 of the logs' child tasks launched
  before their parent stage's last task finished), ``STAGE_GAP_S`` after it (the logs' mean gap
  between the two, 0.13 s; 0.009-0.351 s);
* **one pool of cores**: every stage runs on the same executor cores (8 of 8 boundaries ran the
  child on the parent's executors): a node of a Spark-like cluster has ``map_slots`` cores and no
  reduce slots, so that the seeds' loads, stated against the map slots, are the same under both
  models;
* **executors are held**: a core whose task ended while its job's stage still runs other tasks
  and has none pending stays with the job (idle: the siblings wait at the barrier; the logs'
  stages left up to 88 % of their cores idle at their tail) until the stage ends or it has been
  idle ``EXECUTOR_IDLE_S`` (Spark's ``spark.dynamicAllocation.executorIdleTimeout`` default: not in
  the logs); a task of the job that must run again takes a held core first;
* **a killed task re-runs and holds back its stage**: it is pending again in its stage, and the
  stage (so the next one) waits for it; a suspended (frozen) task likewise stalls its stage;
* **shuffle output lost with a node**: a finished task's output lives on its node until the
  next stage has finished; a node that leaves with its tasks killed (FP, DP, a failure) loses it,
  those tasks run again, and when the job is already in the next stage, that stage's running tasks
  fail (Spark's FetchFailed: killed, their work lost) and the job goes back to the lost stage.
"""

from __future__ import annotations

MR, SPARK = "mr", "spark"
JOB_MODELS = (MR, SPARK)

#: calibration (bench/results/spark_stage_calibration_2026-11-27.json): mean gap between a stage's last
#: task end and its shuffle reader's first launch
STAGE_GAP_S = 0.13
#: Spark's default spark.dynamicAllocation.executorIdleTimeout
EXECUTOR_IDLE_S = 60.0


class StageJob:
    """A Spark-like job, with the attributes the cluster's FIFO scheduling and sampling read from a
    :class:`fawkes.sim.cluster.SimJob`.  Task indexes run over all stages (stage k's are
    ``bounds[k] .. bounds[k + 1] - 1``); ``pend_maps`` holds the current stage's pending ones and
    ``map_d`` every task's duration; ``maps_done`` counts finished tasks of all stages."""

    staged = True
    __slots__ = ("spec", "id", "submit", "map_d", "red_d", "pend_maps", "pend_reds", "n_maps", "n_reds",
                 "maps_done", "reds_done", "completions", "running", "waiting", "scheduled_reds", "slow_need", "started",
                 "end", "out_per_writer", "ref", "in_rq", "bounds", "stage", "done", "loc", "run_idx", "live",
                 "held", "hold_gen")

    def __init__(self, spec, submit: float, ref: float | None):
        self.spec, self.id, self.submit, self.ref = spec, spec.id, submit, ref
        stages = [d for d in (spec.map_d, spec.red_d) if d]
        self.map_d = tuple(x for d in stages for x in d)
        self.red_d = ()
        self.bounds = [0]
        for d in stages:
            self.bounds.append(self.bounds[-1] + len(d))
        self.n_maps, self.n_reds = len(self.map_d), 0
        self.maps_done = self.reds_done = self.running = self.scheduled_reds = 0
        self.completions = 0  # tasks finished, re-runs of lost outputs included (a driver's completed tasks)
        self.slow_need = 0
        self.waiting: list = []
        self.pend_reds: list = []
        self.stage = 0
        self.pend_maps = list(range(self.bounds[1] - 1, -1, -1)) if len(self.bounds) > 1 else []
        self.done = bytearray(self.n_maps)
        self.loc: list = [None] * self.n_maps
        self.run_idx: set[int] = set()
        self.live: dict = {}  # running Task -> None
        self.held: list = []  # nodes of the cores the job keeps idle (executors at the barrier)
        self.hold_gen = 0
        self.started = self.end = None
        self.out_per_writer = spec.output_bytes / (self.bounds[-1] - self.bounds[-2]) if len(self.bounds) > 1 else 0.0
        self.in_rq = False

    def stage_of(self, idx: int) -> int:
        k = 0
        while idx >= self.bounds[k + 1]:
            k += 1
        return k

    @property
    def pending_count(self) -> int:
        """Tasks not finished and not running: the current stage's and the later ones' (the live
        sampler counts the tasks of a Spark job's active and pending stages)."""
        return self.n_maps - self.maps_done - len(self.run_idx)

    def _stage_done(self, k: int) -> bool:
        return all(self.done[self.bounds[k]:self.bounds[k + 1]])

    def _running_in(self, k: int) -> bool:
        lo, hi = self.bounds[k], self.bounds[k + 1]
        return any(lo <= i < hi for i in self.run_idx)


def started(job: StageJob, t) -> None:
    job.run_idx.add(t.idx)
    job.live[t] = None


def finish(c, t, now: float) -> None:
    """A task of a Spark-like job ends at ``now`` on cluster ``c`` (``SimCluster.finish``)."""
    node, job = t.node, t.job
    job.run_idx.discard(t.idx)
    job.live.pop(t, None)
    k = job.stage_of(t.idx)
    if not job.done[t.idx]:
        job.done[t.idx] = 1
        job.loc[t.idx] = node
        job.maps_done += 1
        if k + 2 < len(job.bounds):  # a later stage reads this output
            node.map_outputs.append((job, t.idx))
        else:
            c._write_output(node, job.out_per_writer)
    if node.usable:
        if not job.pend_maps and job.end is None and job._running_in(job.stage) and not job._stage_done(job.stage):
            _hold(c, job, node, now)
        else:
            c._free_map_slot(node)
    if job._stage_done(job.stage):
        _advance(c, job, now)
    c.dispatch(now)


def _hold(c, job: StageJob, node, now: float) -> None:
    job.held.append(node)
    gen = job.hold_gen
    c.sim.push(now + EXECUTOR_IDLE_S, c.ev_call, lambda sim, at: _release_one(c, job, node, gen, at))


def _release_one(c, job: StageJob, node, gen: int, now: float) -> None:
    """An executor idle for EXECUTOR_IDLE_S goes back to the cluster."""
    if job.hold_gen == gen and node in job.held:
        job.held.remove(node)
        if node.usable:
            c._free_map_slot(node)
            c.dispatch(now)


def release_held(c, job: StageJob) -> None:
    job.hold_gen += 1
    for node in job.held:
        if node.usable:
            c._free_map_slot(node)
    job.held.clear()


def _advance(c, job: StageJob, now: float) -> None:
    """The current stage has finished: the next unfinished one starts after the gap, or the job ends."""
    release_held(c, job)
    nxt = next((k for k in range(job.stage + 1, len(job.bounds) - 1) if not job._stage_done(k)), None)
    if nxt is None:
        if job.running == 0 and job.end is None:
            c._job_done(job, now)
        return
    job.stage = nxt
    c.sim.push(now + STAGE_GAP_S, c.ev_call, lambda sim, at: _open_stage(c, job, nxt, at))


def _open_stage(c, job: StageJob, k: int, now: float) -> None:
    if job.end is not None or job.stage != k or job.id not in c.jobs:
        return
    lo, hi = job.bounds[k], job.bounds[k + 1]
    pend = [i for i in range(hi - 1, lo - 1, -1) if not job.done[i] and i not in job.run_idx]
    if pend:
        c._add_maps(job, pend)
    c.version += 1
    c.dispatch(now)


def killed(c, job: StageJob, t, now: float) -> None:
    """A task of a Spark-like job was killed (its slot already given up): it runs again in its stage,
    on a core the job holds if it has one."""
    job.run_idx.discard(t.idx)
    job.live.pop(t, None)
    if job.done[t.idx] or job.stage_of(t.idx) != job.stage or job.end is not None:
        return
    while job.held:
        node = job.held.pop()
        if node.usable:
            c._start(job, True, t.idx, node, now)
            return
    c._add_maps(job, (t.idx,))


def lose_outputs(c, entries, node, now: float) -> int:
    """Shuffle outputs on ``node`` lost with it; returns the tasks that must run again."""
    back: dict[StageJob, int] = {}
    lost = 0
    for job, idx in entries:
        if job.end is not None or not job.done[idx] or job.loc[idx] is not node:
            continue
        k = job.stage_of(idx)
        if job._stage_done(k + 1):
            continue  # the stage that read it has finished: no longer needed
        job.done[idx] = 0
        job.maps_done -= 1
        lost += 1
        back[job] = min(back.get(job, k), k)
    for job, k in back.items():
        if k < job.stage:  # the job's stage reads the lost output: its running tasks fail to fetch it
            job.stage = k
            release_held(c, job)
            if job.pend_maps:
                job.pend_maps.clear()
                if job in c.mq:
                    c.mq.remove(job)
            for t in [t for t in job.live if t.alive and t.node.usable]:
                c._kill(t, now)
                c._free_map_slot(t.node)  # the executor lives on: its core takes other work
        elif k > job.stage:
            continue  # pended when that stage starts
        lo, hi = job.bounds[k], job.bounds[k + 1]
        pend = set(job.pend_maps)
        more = [i for i in range(hi - 1, lo - 1, -1) if not job.done[i] and i not in job.run_idx and i not in pend]
        if more:
            c._add_maps(job, more)
    if back:  # once the plan being carried out is done (the node may be one of several leaving)
        c.sim.push(now, c.ev_call, lambda sim, at: c.dispatch(at))
    return lost
