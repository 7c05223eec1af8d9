"""One simulated MR-cluster: its nodes, its FIFO job queue and Hadoop-1 slot scheduling (B.3).

* FIFO: a free slot goes to the earliest-submitted job with a pending task of that type.
* Reduce slow-start: reduces are eligible once ``slowstart`` of the job's maps are done.
* A reduce copies while the maps run and cannot pass the end of the map phase; the rest of
  its work (``1 - shuffle_frac``) follows the last map.
* Slots ask for work as soon as they are free; core nodes first, then TC, then TR (so the
  load-aware node-type penalty only bites when transient nodes are actually used).
* A node's running tasks are killed when it is removed; map outputs it holds are re-run
  when some reduce of the job has not fetched them yet (``lose_map_outputs``).
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections import deque
from math import ceil

from fawkes.mechanism.model import ClusterState, Role
from fawkes.sim import stages
from fawkes.sim.costs import penalty

RANK = {Role.CORE: 0, Role.TC: 1, Role.TR: 2}
EV_TASK, EV_CALL = 0, 10  # the engine's event kinds for a task end and a callable (fawkes/sim/engine.py)


class SimNode:
    __slots__ = ("host", "role", "cluster", "rank", "seq", "running", "ready", "draining", "stored",
                 "added_at", "attached", "free_map", "free_red", "in_map_heap", "in_red_heap", "tasks",
                 "map_outputs", "view", "view_key")

    def __init__(self, host: str, role: Role, cluster: "SimCluster", seq: int, now: float):
        self.host, self.role, self.cluster, self.seq = host, role, cluster, seq
        self.rank = RANK[role]
        self.running = 0
        self.ready = False
        self.draining = False
        self.stored = 0.0
        self.added_at = now
        self.attached = True
        self.free_map = self.free_red = 0
        self.in_map_heap = self.in_red_heap = False
        self.tasks: dict[Task, None] = {}  # ordered set: iteration order must not depend on ids
        self.map_outputs: list[tuple[SimJob, int]] = []
        self.view = None
        self.view_key = None

    @property
    def usable(self) -> bool:
        return self.attached and self.ready and not self.draining


class Task:
    __slots__ = ("job", "is_map", "idx", "node", "start", "dur", "end", "alive")

    def __init__(self, job: "SimJob", is_map: bool, idx: int, node: SimNode, start: float, dur: float):
        self.job, self.is_map, self.idx, self.node, self.start, self.dur = job, is_map, idx, node, start, dur
        self.end = -1.0
        self.alive = True

    def __lt__(self, other: "Task") -> bool:  # heap ties never compare tasks (seq is unique)
        return id(self) < id(other)


class SimJob:
    """A MapReduce job (Hadoop-1 slots, slow-start, copy overlap); :class:`fawkes.sim.stages.StageJob`
    is the Spark-like one."""

    staged = False
    __slots__ = ("spec", "id", "submit", "map_d", "red_d", "pend_maps", "pend_reds", "n_maps", "n_reds",
                 "maps_done", "reds_done", "completions", "running", "waiting", "scheduled_reds", "slow_need", "started",
                 "end", "out_per_writer", "ref", "in_rq")

    def __init__(self, spec, submit: float, slowstart: float, ref: float | None):
        self.spec = spec
        self.id = spec.id
        self.submit = submit
        self.map_d, self.red_d = spec.map_d, spec.red_d
        self.n_maps, self.n_reds = spec.maps, spec.reduces
        self.pend_maps = list(range(self.n_maps - 1, -1, -1))
        self.pend_reds = list(range(self.n_reds - 1, -1, -1))
        self.maps_done = self.reds_done = self.running = self.scheduled_reds = 0
        self.completions = 0  # tasks finished, re-runs of lost outputs included (a driver's completed tasks)
        self.waiting: list[Task] = []
        self.slow_need = max(1, ceil(slowstart * self.n_maps)) if self.n_maps else 0
        self.started: float | None = None
        self.end: float | None = None
        writers = self.n_reds or self.n_maps
        self.out_per_writer = spec.output_bytes / writers if writers else 0.0
        self.ref = ref
        self.in_rq = False  # in the cluster's queue of jobs with eligible pending reduces

    @property
    def pending_count(self) -> int:
        return len(self.pend_maps) + len(self.pend_reds)


def new_job(spec, cluster_model: str, submit: float, slowstart: float, ref: float | None):
    """The job of ``spec`` under its model (its own, else its cluster's)."""
    if (spec.model or cluster_model) == stages.SPARK:
        return stages.StageJob(spec, submit, ref)
    return SimJob(spec, submit, slowstart, ref)


def _fifo(job: SimJob) -> tuple[float, int]:
    return (job.submit, job.id)


class SimCluster:
    """Nodes, jobs and slot scheduling of one MR-cluster incarnation."""

    ev_call = EV_CALL

    def __init__(self, sim, spec):
        self.sim = sim
        self.spec = spec
        self.name = spec.name
        # a Spark-like cluster's node runs every stage on map_slots cores (fawkes/sim/stages.py)
        self.job_model = spec.job_model
        # the pool's cost model with the cluster's own fields (a pool of several kinds: CostModel.for_cluster)
        self.cost = sim.cost.for_cluster(spec.name)
        self.map_slots = self.cost.map_slots
        self.red_slots = 0 if spec.job_model == stages.SPARK else self.cost.reduce_slots
        self.min_core = spec.min_core
        self.state = ClusterState.REQUESTED
        self.jobs: dict[int, SimJob] = {}  # unfinished, in submission order
        self.mq: list[SimJob] = []  # jobs with pending maps, FIFO (submit, id)
        self.rq: list[SimJob] = []  # jobs with pending reduces, FIFO
        # The live dispatcher's gate (cost fields max_running_jobs / job_startup_s; off at 0, the
        # thesis' model): see submit().
        self.gated = self.cost.gated()
        self.waiting: deque[SimJob] = deque()  # submitted, not dispatched (gated only)
        self.dispatched: set[int] = set()  # job ids between dispatch and end, start-up included
        self.up: set[int] = set()  # dispatched job ids whose tasks are schedulable
        # tasks of a job seen running here (the live sampler's estimate for a queued job)
        self.learned = spec.tasks_known
        self.first_incarnation = True
        self.reset_incarnation(0.0)

    def reset_incarnation(self, now: float) -> None:
        self.nodes: dict[str, SimNode] = {}
        self.map_heap: list = []
        self.red_heap: list = []
        self.free_map = self.free_red = 0
        self.n_core = self.busy_tr = self.busy_tc = 0
        self.master: SimNode | None = None  # the first core node: its tasks take cost.master_task_factor as long
        self.n_ready_tr = self.n_ready_tc = self.n_ready_core = 0
        self.n_dn = 0  # DataNodes (core + TC) not draining
        self.n_draining = 0
        self.version = 0  # bumped on every change a sample could see
        self.node_ver = 0  # bumped when the set of DataNodes changes
        self._dns: list = []
        self._dns_ver = -1
        self.views: tuple = ()
        self.views_ver = -1
        self.last_sample = None
        self.last_sample_version = -1
        self.samples: list = []
        self.alloc: list[tuple[float, int]] = []
        self.completed_jobs = self.completed_tasks = 0
        self.output_bytes = 0.0
        self.requested_at = now
        self.deploy_pending = False
        self.running_tasks = 0

    # --- nodes ------------------------------------------------------------------------------
    @property
    def held(self) -> int:
        return len(self.nodes)

    @property
    def runnable(self) -> bool:
        return self.state is ClusterState.ACTIVE

    def record_alloc(self, now: float) -> None:
        n = len(self.nodes)
        if self.alloc and self.alloc[-1][0] == now:
            self.alloc[-1] = (now, n)
        elif not self.alloc or self.alloc[-1][1] != n:
            self.alloc.append((now, n))
        self.sim.on_alloc_change(self, now)

    def attach(self, host: str, role: Role, now: float, seq: int) -> SimNode:
        node = SimNode(host, role, self, seq, now)
        self.nodes[host] = node
        if role is Role.CORE:
            self.n_core += 1
            if self.master is None:
                self.master = node
        if role is not Role.TR:
            self.n_dn += 1
        self.version += 1
        self.node_ver += 1
        self.record_alloc(now)
        return node

    def make_ready(self, node: SimNode) -> None:
        if not node.attached or node.draining or node.ready:
            return
        node.ready = True
        node.free_map, node.free_red = self.map_slots, self.red_slots
        self.free_map += node.free_map
        self.free_red += node.free_red
        if node.role is Role.TR:
            self.n_ready_tr += 1
        elif node.role is Role.TC:
            self.n_ready_tc += 1
        else:
            self.n_ready_core += 1
        self.version += 1
        self._push_map(node)
        self._push_red(node)

    def _push_map(self, node: SimNode) -> None:
        if not node.in_map_heap and node.free_map > 0:
            node.in_map_heap = True
            heapq.heappush(self.map_heap, (node.rank, node.seq, node))

    def _push_red(self, node: SimNode) -> None:
        if not node.in_red_heap and node.free_red > 0:
            node.in_red_heap = True
            heapq.heappush(self.red_heap, (node.rank, node.seq, node))

    def _take(self, heap: list, is_map: bool) -> SimNode:
        while True:
            node = heap[0][2]
            if node.usable and (node.free_map if is_map else node.free_red) > 0:
                if is_map:
                    node.free_map -= 1
                    self.free_map -= 1
                    if node.free_map == 0:
                        heapq.heappop(heap)
                        node.in_map_heap = False
                else:
                    node.free_red -= 1
                    self.free_red -= 1
                    if node.free_red == 0:
                        heapq.heappop(heap)
                        node.in_red_heap = False
                return node
            heapq.heappop(heap)
            if is_map:
                node.in_map_heap = False
            else:
                node.in_red_heap = False

    def stop_node(self, node: SimNode, now: float, kill: bool = True) -> int:
        """Take ``node`` out of scheduling (draining): its free slots go, its tasks are killed."""
        if node.draining:
            return 0
        if node.ready:
            self.free_map -= node.free_map
            self.free_red -= node.free_red
            node.free_map = node.free_red = 0
            if node.role is Role.TR:
                self.n_ready_tr -= 1
            elif node.role is Role.TC:
                self.n_ready_tc -= 1
            else:
                self.n_ready_core -= 1
        if node.role is not Role.TR:
            self.n_dn -= 1
        self.n_draining += 1
        self.version += 1
        self.node_ver += 1
        node.draining = True
        killed = 0
        if kill:
            for t in list(node.tasks):
                self._kill(t, now)
                killed += 1
            if node.map_outputs:
                self._lose_outputs(node, now)
        return killed

    def detach(self, node: SimNode, now: float) -> None:
        if not node.draining:
            self.stop_node(node, now)
        for t in list(node.tasks):  # DP without kill: whatever still runs dies with the node
            self._kill(t, now)
        node.attached = False
        del self.nodes[node.host]
        self.node_ver += 1
        self.n_draining -= 1
        if node.role is Role.CORE:
            self.n_core -= 1
        self.version += 1
        self.record_alloc(now)

    def _kill(self, t: Task, now: float) -> None:
        t.alive = False
        node, job = t.node, t.job
        node.tasks.pop(t, None)
        self._task_off_node(node)
        job.running -= 1
        self.running_tasks -= 1
        self.version += 1
        if job.staged:
            stages.killed(self, job, t, now)
        elif t.is_map:
            self._add_maps(job, (t.idx,))
        else:
            if t.end >= 0:
                job.scheduled_reds -= 1
            job.pend_reds.append(t.idx)
            self._eligible(job)
        self.sim.stats_kill(t, now)

    def _eligible(self, job: SimJob) -> None:
        """Queue ``job`` for reduce slots once it has pending reduces past its slow-start."""
        if not job.in_rq and job.pend_reds and job.maps_done >= job.slow_need and job.end is None:
            job.in_rq = True
            insort(self.rq, job, key=_fifo)

    def _add_maps(self, job: SimJob, idxs) -> None:
        if not job.pend_maps and job.end is None:
            insort(self.mq, job, key=_fifo)
        job.pend_maps.extend(idxs)

    def _lose_outputs(self, node: SimNode, now: float) -> None:
        """Map (shuffle) outputs on ``node`` are lost with it; those still needed run again."""
        entries, node.map_outputs = node.map_outputs, []
        staged = [e for e in entries if e[0].staged]
        if staged:
            self.sim.stats.lost_maps += stages.lose_outputs(self, staged, node, now)
        for job, idx in entries:
            if job.staged:
                continue
            if job.end is None and (job.pend_reds or job.scheduled_reds + job.reds_done < job.n_reds):
                job.maps_done -= 1
                self._add_maps(job, (idx,))
                self.sim.stats.lost_maps += 1

    def _task_off_node(self, node: SimNode) -> None:
        node.running -= 1
        if node.running == 0:
            if node.role is Role.TR:
                self.busy_tr -= 1
            elif node.role is Role.TC:
                self.busy_tc -= 1

    # --- scheduling -------------------------------------------------------------------------
    def submit(self, job: SimJob, now: float) -> None:
        """A job arrives.  In the thesis' Hadoop-1 model its tasks join the FIFO slot scheduling at
        once.  Gated (the live dispatcher, fawkes/coordinator/dispatch.py): it counts in the demand
        at once, as the live sampler counts a queued job, but at most ``max_running_jobs`` jobs are
        between dispatch and end, and a dispatched job's tasks become schedulable ``job_startup_s``
        later (its driver and executors starting on a CPU-limited host; a job of a live export
        carries its own measured start-up, ``JobSpec.startup_s``)."""
        self.jobs[job.id] = job
        if self.gated:
            self.version += 1
            self.waiting.append(job)
            self._launch(now)
            return
        if job.pend_maps:
            insort(self.mq, job, key=_fifo)
        self._eligible(job)
        self.version += 1
        self.dispatch(now)

    def drop_jobs(self) -> list[SimJob]:
        """Take every unfinished job away unstarted (a purged request's workload, P-3)."""
        gone = list(self.jobs.values())
        self.jobs.clear()
        self.mq.clear()
        self.rq.clear()
        self.waiting.clear()
        self.dispatched.clear()
        self.up.clear()
        for job in gone:
            job.in_rq = False
        self.version += 1
        return gone

    def _launch(self, now: float) -> None:
        limit = self.cost.max_running_jobs or 10**9
        while self.waiting and len(self.dispatched) < limit:
            job = self.waiting.popleft()
            self.dispatched.add(job.id)
            startup = job.spec.startup_s if job.spec.startup_s is not None else self.cost.job_startup_s
            self.sim.push(now + startup, EV_CALL, lambda sim, t, job=job: self._up(job, t))

    def _up(self, job: SimJob, now: float) -> None:
        """A gated job's driver and executors are up: its tasks join the FIFO slot scheduling."""
        if job.id not in self.jobs:
            return
        self.up.add(job.id)
        if job.pend_maps:
            insort(self.mq, job, key=_fifo)
        self._eligible(job)
        self.version += 1
        self.dispatch(now)

    def dispatch(self, now: float) -> None:
        """Fill free slots FIFO: maps from the oldest job with pending maps, reduces from the
        oldest job with pending reduces past its slow-start."""
        if self.state is not ClusterState.ACTIVE:
            return
        fm = self.free_map
        mq = self.mq
        while fm > 0 and mq:
            job = mq[0]
            pend = job.pend_maps
            while fm > 0 and pend:
                self._start(job, True, pend.pop(), self._take(self.map_heap, True), now)
                fm -= 1
            if not pend:
                mq.pop(0)
        fr = self.free_red
        if fr > 0 and self.rq:
            rq = self.rq
            i = 0
            while fr > 0 and i < len(rq):
                job = rq[i]
                if job.maps_done >= job.slow_need:
                    pend = job.pend_reds
                    while fr > 0 and pend:
                        self._start(job, False, pend.pop(), self._take(self.red_heap, False), now)
                        fr -= 1
                    if not pend:
                        rq.pop(i)
                        job.in_rq = False
                        continue
                i += 1

    def _start(self, job: SimJob, is_map: bool, idx: int, node: SimNode, now: float) -> None:
        if node.running == 0:
            if node.role is Role.TR:
                self.busy_tr += 1
            elif node.role is Role.TC:
                self.busy_tc += 1
        node.running += 1
        self.running_tasks += 1
        self.version += 1
        d = job.map_d[idx] if is_map else job.red_d[idx]
        if node is self.master:
            d *= self.cost.master_task_factor
        if job.spec.beta_in or job.spec.beta_out:
            mode = self.cost.penalty
            if mode == "load_aware":
                n = self.n_core + self.busy_tr + self.busy_tc
                d *= penalty(job.spec.beta_in, job.spec.beta_out, n, self.n_core, self.n_core + self.busy_tc)
            elif mode == "literal":
                n = self.n_core + self.n_ready_tr + self.n_ready_tc
                d *= penalty(job.spec.beta_in, job.spec.beta_out, n, self.n_core, self.n_core + self.n_ready_tc)
        t = Task(job, is_map, idx, node, now, d)
        node.tasks[t] = None
        job.running += 1
        if job.started is None:
            job.started = now
        if job.staged:
            stages.started(job, t)
        if is_map:
            t.end = now + d
            self.sim.push(t.end, EV_TASK, t)
        elif job.maps_done >= job.n_maps:
            t.end = now + d
            job.scheduled_reds += 1
            self.sim.push(t.end, EV_TASK, t)
        else:
            job.waiting.append(t)

    def finish(self, t: Task, now: float) -> None:
        """A task ends at ``now`` (only called for live tasks)."""
        node, job = t.node, t.job
        node.tasks.pop(t, None)
        self._task_off_node(node)
        job.running -= 1
        job.completions += 1
        self.running_tasks -= 1
        self.completed_tasks += 1
        self.version += 1
        self.sim.stats_done(t)
        if job.staged:
            stages.finish(self, t, now)
            return
        if node.usable:
            if t.is_map:
                node.free_map += 1
                self.free_map += 1
                self._push_map(node)
            else:
                node.free_red += 1
                self.free_red += 1
                self._push_red(node)
        if t.is_map:
            job.maps_done += 1
            if job.maps_done == job.slow_need:
                self._eligible(job)
            if job.n_reds and node.role is not Role.CORE and self.cost.lose_map_outputs:
                node.map_outputs.append((job, t.idx))
            if job.n_reds == 0:
                self._write_output(node, job.out_per_writer)
            elif job.maps_done >= job.n_maps and job.waiting:
                sh = self.cost.shuffle_frac
                for r in job.waiting:
                    if r.alive:
                        r.end = max(r.start + sh * r.dur, now) + (1.0 - sh) * r.dur
                        job.scheduled_reds += 1
                        self.sim.push(r.end, EV_TASK, r)
                job.waiting.clear()
        else:
            job.reds_done += 1
            job.scheduled_reds -= 1
            self._write_output(node, job.out_per_writer)
        if job.maps_done >= job.n_maps and job.reds_done >= job.n_reds and job.running == 0:
            self._job_done(job, now)
        self.dispatch(now)

    def _job_done(self, job, now: float) -> None:
        del self.jobs[job.id]
        job.end = now + self.cost.job_overhead_s
        self.completed_jobs += 1
        self.sim.on_job_done(self, job)
        if job.id in self.dispatched:  # the dispatcher sees the end (after the overhead), launches the next
            self.dispatched.discard(job.id)
            self.up.discard(job.id)
            self.sim.push(job.end, EV_CALL, lambda sim, at: self._launch(at))

    def _free_map_slot(self, node: SimNode) -> None:
        node.free_map += 1
        self.free_map += 1
        self._push_map(node)

    def _write_output(self, node: SimNode, out: float) -> None:
        if out <= 0:
            return
        rep = self.cost.replication
        self.output_bytes += out * rep
        if self._dns_ver != self.node_ver:
            self._dns = [n for n in self.nodes.values() if n.role is not Role.TR and not n.draining]
            self._dns_ver = self.node_ver
        dns = self._dns
        if not dns:
            return
        first = node if node.role is not Role.TR and not node.draining else dns[self.sim.rand(len(dns))]
        first.stored += out
        for _ in range(min(rep - 1, len(dns))):
            dns[self.sim.rand(len(dns))].stored += out

    # --- facts for sampling -----------------------------------------------------------------
    @property
    def slots_per_node(self) -> int:
        return self.map_slots + self.red_slots

    def configured_slots(self) -> int:
        return self.slots_per_node * (self.n_ready_core + self.n_ready_tr + self.n_ready_tc)

    def storage_capacity(self) -> float:
        return self.cost.hdfs_capacity_bytes * self.n_dn

    @property
    def settled(self) -> int:
        return len(self.nodes) - self.n_draining
