"""The discrete-event loop: the pool, the MR-cluster lifecycle and the controllers.

The FAWKES controller is :mod:`fawkes.mechanism.controller`, the same loop the coordinator
runs: every ``sample_period`` the simulator builds one :class:`ClusterMetrics` per cluster with
:func:`sample_cluster`; every T it builds one :class:`Snapshot` and calls ``controller.tick``;
on a cluster request or when a host becomes free it calls ``controller.between``.  It keeps
the controller's :class:`Memory` in ``self.memory`` and only carries out the plans in
simulated time (FP: kill and free the host after ``fp_stop_s``; DP: kill, re-replicate, then
free).  A ``recorder`` (:mod:`fawkes.sim.record`) sees every step's snapshot and result.
Over idle time the ticks that cannot decide anything, and their samples, are skipped
(:meth:`Simulator._next_tick`): the cost follows the work, not the simulated time.

The ch. 2 controller calls :func:`fawkes.mechanism.koala_mr.on_offer` every offer period.
The static controller runs fixed clusters (reference runtimes and micro checks).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from dataclasses import dataclass, field, replace
from itertools import chain, repeat

from sortedcontainers import SortedSet

from fawkes.mechanism import (
    CLUSTER_TRANSITIONS,
    ClusterMetrics,
    ClusterRequest,
    ClusterState,
    ClusterView,
    JobFacts,
    NodeView,
    Role,
    Settings,
    ShrinkMode,
    Snapshot,
    controller,
    get_policy,
    sample_cluster,
)
from fawkes.mechanism import schedules
from fawkes.mechanism.admission import next_queue_change
from fawkes.mechanism.memory import Memory
from fawkes.mechanism.koala_mr import ResizeParams
from fawkes.sim.cluster import EV_CALL, EV_TASK, SimJob, SimCluster, Task, new_job
from fawkes.sim.record import Observed, ObservedJob
from fawkes.sim.workloads import Workload

_METRIC_FIELDS = tuple(f for f in ClusterMetrics.__dataclass_fields__ if f != "time")
_CH2_SAMPLING = Settings(policy="None")  # chapter-2 runners read pending and running tasks only


def _view(n) -> NodeView:
    """The node's NodeView, rebuilt only when something the mechanism sees has changed."""
    key = (n.running, int(n.stored), n.draining)
    v = n.view
    if v is None or n.view_key != key:
        v = n.view = NodeView(n.host, n.role, key[0], key[1], n.added_at, key[2])
        n.view_key = key
    return v


def _queue_clock(sim: "Simulator", now: float) -> None:
    """A queued request became purgeable or starving (admission.next_queue_change)."""
    sim._queue_wakeups.discard(now)
    if sim.queue:
        sim._between(now)


def _deferred_refill(sim: "Simulator", now: float) -> None:
    sim._refill_pending = False
    sim._between(now)


def _values(m: ClusterMetrics) -> tuple:
    """A sample without its time."""
    return tuple(getattr(m, f) for f in _METRIC_FIELDS)


def _first_tick(now: float, period: float, reached, at: float) -> int:
    """The smallest j >= 1 for which ``reached(now + j * period)`` holds; ``reached`` is monotone in
    time and turns true about ``at`` (the estimate is checked and corrected with ``reached`` itself,
    so the answer is what the tick at that time would compute)."""
    j = max(1, math.ceil((at - now) / period))
    while j > 1 and reached(now + (j - 1) * period):
        j -= 1
    while not reached(now + j * period):
        j += 1
    return j


# event kinds, in the order they run at equal times
EV_RELEASE, EV_READY, EV_SUBMIT, EV_REQUEST, EV_DEPLOYED, EV_LOADED, EV_SAVED, EV_SAMPLE, EV_TICK = range(1, 10)


def _facts(c: SimCluster) -> list:
    """The sampler's facts of ``c``'s unfinished jobs, in their order (a gated cluster's as the live
    sampler sees them: :func:`_gated_facts`)."""
    if c.gated:
        return _gated_facts(c)
    return [JobFacts(j.submit, j.spec.input_bytes, j.pending_count, j.running, j.started, j.ref) for j in c.jobs.values()]


def _gated_facts(c: SimCluster) -> list:
    """A gated cluster's jobs as the live sampler (fawkes/coordinator/sampler.py) sees them: a job
    whose tasks are not running yet counts the tasks an earlier job of the cluster had (learned
    while it ran; the live sampler learns per application, and a trace from the state has one
    application per cluster), at least one per 128 MB input split."""
    facts = []
    for j in c.jobs.values():
        if j.id in c.up:
            c.learned = max(c.learned, j.n_maps + j.n_reds)
            pending = j.pending_count
        else:
            pending = max(1, math.ceil(j.spec.input_bytes / SPLIT), c.learned)
        facts.append(JobFacts(j.submit, j.spec.input_bytes, pending, j.running, j.started, j.ref))
    return facts


SPLIT = 128 * 1024 * 1024  # the live sampler's input split (fawkes/coordinator/sampler.py)


class TickLog:
    """Each tick's (G, gate) as runs of equal consecutive values: ``[first tick time, G, gate, ticks]``.

    Idle stretches repeat the same tick; they cost one entry, not one per tick.  ``append`` takes
    one tick ``(t, G, gate)`` and ``count`` equal ones at once (ticks skipped over idle time)."""

    __slots__ = ("runs", "n")

    def __init__(self) -> None:
        self.runs: list[list] = []
        self.n = 0

    def append(self, tick: tuple[float, float, bool], count: int = 1) -> None:
        t, g, gate = tick
        runs = self.runs
        if runs and runs[-1][1] == g and runs[-1][2] == gate:
            runs[-1][3] += count
        else:
            runs.append([t, g, gate, count])
        self.n += count

    def __len__(self) -> int:
        return self.n

    def g_mean_max(self) -> tuple[float, float] | None:
        """Mean and maximum of the finite G over all ticks (the mean exactly as ``statistics.fmean``
        of the per-tick list: one correctly rounded sum), or None without any."""
        finite = [(g, c) for _, g, _, c in self.runs if math.isfinite(g)]
        if not finite:
            return None
        n = sum(c for _, c in finite)
        return math.fsum(chain.from_iterable(repeat(g, c) for g, c in finite)) / n, max(g for g, _ in finite)


@dataclass
class Stats:
    events: int = 0
    killed_tasks: int = 0
    lost_maps: int = 0
    wasted_s: float = 0.0
    busy_slot_s: float = 0.0
    rereplicated_bytes: float = 0.0
    reconfigurations: int = 0
    resizes: dict[str, int] = field(default_factory=dict)
    ticks: TickLog = field(default_factory=TickLog)  # (t, G, gate) of every tick, run-length encoded
    overall_d: dict[str, float] = field(default_factory=dict)
    admission_latency: dict[str, float] = field(default_factory=dict)
    reconfig_times: list[float] = field(default_factory=list)
    node_s: float = 0.0  # allocated node-seconds
    invariant_errors: list[str] = field(default_factory=list)
    rerequests: int = 0
    purged: list[str] = field(default_factory=list)  # requests purged (deadline, P-3), in order
    purged_jobs: int = 0


class Simulator:
    """Run one workload under one controller; ``run()`` returns the finished simulator."""

    def __init__(self, wl: Workload, settings: Settings | None = None, *, refs: list[float] | None = None,
                 timeline: bool = False, check_invariants: bool = False, ch2: ResizeParams | None = None,
                 seed: int = 0, recorder=None, host_racks: dict[str, str] | None = None):
        self.wl = wl
        # rack label per host (h00000 ...), as the inventory would give them; in the snapshot only with
        # placement hard/soft, as the coordinator's view reads them (issue 12)
        self.host_racks = dict(host_racks or {})
        self.cost = wl.cost
        self.settings = settings
        self.capacity = wl.capacity
        self.heap: list = []
        self.seq = 0
        self.now = 0.0
        self.stats = Stats()
        self.refs = refs
        self._rng = random.Random(seed)
        # free hosts in placement order (the inventory's, as the store lists them): a freed host is
        # offered again in its place, not last
        self.free = SortedSet(f"h{i:05d}" for i in range(wl.capacity))
        self.clusters: dict[str, SimCluster] = {c.name: SimCluster(self, c) for c in wl.clusters}
        self.order: list[SimCluster] = []  # clusters holding nodes, in admission order
        self.queue: list[SimCluster] = []  # global FIFO of requests
        self.jobs: dict[int, SimJob] = {}
        self.done_jobs: list[SimJob] = []
        self.successors: dict[int, list] = {}
        self.pending_jobs = len(wl.jobs)
        self.node_seq = 0
        self.check = check_invariants
        self.ch2 = ch2
        self.timeline = timeline
        self.alloc_tl: dict[str, list[tuple[float, int]]] = {c: [(0.0, 0)] for c in self.clusters}
        self.queue_tl: dict[str, list[tuple[float, int]]] = {c: [] for c in self.clusters}
        self._alloc_total = 0
        self._alloc_since = 0.0
        self.finished = False
        self.decisions = 0
        self._refill_pending = False
        self._queue_wakeups: set[float] = set()  # times a queued request turns purgeable or starving
        self.memory = Memory()  # the controller's memory (fawkes.mechanism.controller)
        self.recorder = recorder
        # idle time costs nothing: ticks that cannot decide anything are skipped (_next_tick).  Off
        # with a recorder, whose replay takes every step; tests turn it off to compare both ways.
        self._idle_jumps = recorder is None
        self.ticks_skipped = 0
        self._window = 0  # samples per interval when the shortcut's exact-time reasoning holds (run())

    # --- event plumbing -----------------------------------------------------------------------
    def push(self, t: float, kind: int, obj) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, obj))

    def rand(self, n: int) -> int:
        return int(self._rng.random() * n)

    def run(self) -> "Simulator":
        wl = self.wl
        for j in wl.jobs:
            if j.after is None:
                self.push(j.submit_s, EV_SUBMIT, j)
            else:
                self.successors.setdefault(j.after, []).append(j)
        if wl.controller == "fawkes":
            for c in wl.clusters:
                self.push(c.request_s, EV_REQUEST, self.clusters[c.name])
            sp = self.settings.sample_period_s
            self.push(sp, EV_SAMPLE, None)
            self.push(self.settings.period_s, EV_TICK, None)
            T = self.settings.period_s
            # the shortcut reasons on exact times: whole seconds, every tick also a sample time
            if (self.settings.discrimination_window == "interval" and float(T).is_integer()
                    and float(sp).is_integer() and T % sp == 0):
                self._window = int(T // sp)
        else:
            for c in wl.clusters:
                self._static_cluster(self.clusters[c.name], c.static or {Role.CORE: c.min_core})
            if wl.controller == "ch2":
                self.push(self.ch2.offer_period_s, EV_TICK, None)
            if self.timeline:
                self.push(5.0, EV_SAMPLE, None)
        heap = self.heap
        pop = heapq.heappop
        n = 0
        while heap and not self.finished:
            t, kind, _, obj = pop(heap)
            self.now = t
            n += 1
            if kind == EV_TASK:
                if obj.alive:
                    obj.node.cluster.finish(obj, t)
            elif kind == EV_SUBMIT:
                self._submit(obj, t)
            elif kind == EV_SAMPLE:
                self._sample(t)
            elif kind == EV_TICK:
                self._tick(t)
            elif kind == EV_RELEASE:
                self._release(obj, t)
            elif kind == EV_READY:
                obj.cluster.make_ready(obj)
                obj.cluster.dispatch(t)
            elif kind == EV_REQUEST:
                self._request(obj, t)
            elif kind == EV_DEPLOYED:
                self._deployed(obj, t)
            elif kind == EV_LOADED:
                self._loaded(obj, t)
            elif kind == EV_SAVED:
                self._saved(obj, t)
            elif kind == EV_CALL:
                obj(self, t)
        self.stats.events = n
        self._account_nodes(self.makespan_end())
        if self.timeline:  # queue lengths are change points: carry each to the end of the run
            for tl in self.queue_tl.values():
                if tl and tl[-1][0] < self.now:
                    tl.append((self.now, tl[-1][1]))
        return self

    @property
    def node_slots(self) -> int:
        """A node's task slots: map + reduce slots, a Spark-like cluster's cores when every cluster is one."""
        return min((c.slots_per_node for c in self.clusters.values()), default=self.cost.slots_per_node) if all(
            c.job_model == "spark" for c in self.clusters.values()) else self.cost.slots_per_node

    def makespan_end(self) -> float:
        return max((j.end for j in self.done_jobs), default=self.now)

    # --- statistics hooks called by clusters ---------------------------------------------------
    def stats_kill(self, t: Task, now: float) -> None:
        self.stats.killed_tasks += 1
        self.stats.wasted_s += now - t.start
        self.stats.busy_slot_s += now - t.start

    def stats_done(self, t: Task) -> None:
        self.stats.busy_slot_s += self.now - t.start

    def on_alloc_change(self, c: SimCluster, now: float) -> None:
        self._account_nodes(now)
        tl = self.alloc_tl[c.name]
        if tl[-1][0] == now:
            tl[-1] = (now, c.held)
        else:
            tl.append((now, c.held))

    def _account_nodes(self, now: float) -> None:
        if now > self._alloc_since:
            self.stats.node_s += self._alloc_total * (now - self._alloc_since)
            self._alloc_since = now
        self._alloc_total = sum(c.held for c in self.clusters.values())

    # --- jobs ---------------------------------------------------------------------------------
    def _submit(self, spec, now: float) -> None:
        c = self.clusters[spec.cluster]
        ref = self.refs[spec.id] if self.refs is not None else spec.ref_runtime_s
        job = new_job(spec, c.job_model, now, c.cost.slowstart, ref)
        self.jobs[spec.id] = job
        if c.state is ClusterState.RELEASED:  # it left after T_idle: request it again (redeploy, reload)
            c.submit(job, now)
            self._rerequest(c, now)
            return
        c.submit(job, now)  # queued until ACTIVE; a SAVING cluster is requested again once saved

    def on_job_done(self, c: SimCluster, job: SimJob) -> None:
        self.done_jobs.append(job)
        self.pending_jobs -= 1
        for nxt in self.successors.pop(job.id, ()):
            self.push(job.end + nxt.submit_s, EV_SUBMIT, nxt)
        if self.pending_jobs == 0:
            self.finished = True

    # --- nodes --------------------------------------------------------------------------------
    def _grow(self, c: SimCluster, host: str, role: Role, now: float, ready_now: bool = False) -> None:
        self.free.remove(host)
        self.node_seq += 1
        node = c.attach(host, role, now, self.node_seq)
        if role is Role.CORE and (ready_now or c.state in (ClusterState.REQUESTED, ClusterState.DEPLOYING)):
            c.make_ready(node)  # deployment time covers the daemons of the first core nodes
        else:
            cost = c.cost  # the cluster's own (CostModel.for_cluster)
            delay = {Role.TR: cost.tr_ready_s, Role.TC: cost.tc_ready_s}.get(role, cost.core_ready_s)
            if ready_now or delay <= 0:
                c.make_ready(node)
            else:
                self.push(now + delay, EV_READY, node)

    def at(self, t: float, fn) -> None:
        """Call ``fn(sim, t)`` at simulated time ``t`` (micro checks inject resizes this way)."""
        self.push(t, EV_CALL, fn)

    def fail_host(self, host: str, now: float) -> None:
        """A host dies (micro checks, parity): it leaves the pool, and the node on it, if any, is
        lost at once with its running tasks (what the coordinator's sampler and cleanup do to an
        unreachable host).  Then the loop reacts as between ticks (refill, admission)."""
        if self.recorder is not None:
            self.recorder.fail(host, now)
        if host in self.free:
            self.free.remove(host)
        else:
            for c in self.clusters.values():
                node = c.nodes.get(host)
                if node is not None:
                    c.detach(node, now)
                    c.dispatch(now)
                    break
            else:
                raise ValueError(f"fail_host: {host} is neither free nor held")
        self.capacity -= 1
        if self.wl.controller == "fawkes":
            self._between(now)

    def shrink(self, plan, now: float) -> None:
        """Carry out the shrinks of a plan outside the controller (micro checks)."""
        self._execute(plan, now)

    def _release(self, node, now: float) -> None:
        c = node.cluster
        if not node.attached:  # its cluster finished saving first and handed every host back
            return  # (freeing it again would free a host that may belong to another cluster by now)
        c.detach(node, now)
        if self.recorder is not None:
            self.recorder.release(c.name, node.host, now)
        self.free.add(node.host)
        if self.wl.controller == "fawkes":
            delay = self.cost.refill_delay_s
            if delay <= 0:
                self._between(now)
            elif not self._refill_pending:
                self._refill_pending = True
                self.at(now + delay, _deferred_refill)
        c.dispatch(now)

    def _static_cluster(self, c: SimCluster, comp: dict[Role, int]) -> None:
        c.reset_incarnation(0.0)
        c.state = ClusterState.ACTIVE
        self.order.append(c)
        for role in (Role.CORE, Role.TC, Role.TR):
            for _ in range(comp.get(role, 0)):
                self._grow(c, self.free[0], role, 0.0, ready_now=True)
        if self.recorder is not None:
            self.recorder.static(c.name, c.min_core, tuple((n.host, n.role) for n in c.nodes.values()), 0.0)

    # --- FAWKES: lifecycle ------------------------------------------------------------------------
    def _request(self, c: SimCluster, now: float) -> None:
        c.reset_incarnation(now)  # a new incarnation (a released cluster's request is a new one)
        c.state = ClusterState.REQUESTED
        self.queue.append(c)
        if self.recorder is not None:
            self.recorder.request(c.name, c.min_core, now, c.spec.expected_duration_s, c.spec.deadline_s)
        self._between(now)

    def _rerequest(self, c: SimCluster, now: float) -> None:
        c.first_incarnation = False
        self.stats.rerequests += 1
        self._request(c, now)

    def _between(self, now: float) -> None:
        """Admission, then refill (``controller.between``), when a request or a free host could change them."""
        if not self.queue and not (self.free and any(self._deficit(c) for c in self.order)):
            return
        # refill alone reads node roles, draining flags and counts, never running_tasks or
        # stored_bytes, so node views cached since the last change of a cluster's node set are
        # enough (keeps the cost per release O(clusters)); admission's reclaim needs fresh ones
        snap = self.snapshot(now, fresh=bool(self.queue))
        self._wake_for_queue(snap)
        b = controller.between(self.memory, snap, self.settings)
        self.memory = b.memory
        if self.recorder is not None:
            self.recorder.between(snap, b)
        if b.admission.purged:
            self._purged(b.admission.purged, now)
        if b.admission.admitted:
            self._admitted(b.admission.admitted, now)
            self._execute(b.admission_plan, now)
        if b.refill_plan.grows:
            self._execute(b.refill_plan, now)

    def _deficit(self, c: SimCluster) -> bool:
        t = self.memory.of(c.name, c.requested_at).target
        return t is not None and c.settled < t

    def _admitted(self, names, now: float) -> None:
        for name in names:
            c = self.clusters[name]
            self.queue.remove(c)
            self._transition(c, ClusterState.DEPLOYING)
            self.order.append(c)
            self.stats.admission_latency.setdefault(name, now - c.requested_at)
            c.record_alloc(now)

    def _wake_for_queue(self, snap: Snapshot) -> None:
        """The coordinator looks at its queue every few seconds, so a request that becomes purgeable
        or starving is acted on at once; the simulator wakes up for that moment (issue 12)."""
        if not snap.queue or (not self.settings.deadline_purge and self.settings.starvation_guard_s is None):
            return
        t = next_queue_change(snap, self.settings)
        if t is not None and t not in self._queue_wakeups:
            self._queue_wakeups.add(t)
            self.at(t, _queue_clock)

    def _purged(self, names, now: float) -> None:
        """Requests that can no longer meet their deadline leave the queue (P-3): withdrawn, their
        jobs dropped unstarted (counted in ``stats.purged_jobs``)."""
        for name in names:
            c = self.clusters[name]
            self.queue.remove(c)
            self._transition(c, ClusterState.RELEASED)
            self.stats.purged.append(name)
            for job in c.drop_jobs():
                self.jobs.pop(job.id, None)
                self.stats.purged_jobs += 1
                self.pending_jobs -= 1
                chain = [job.id]
                while chain:  # the jobs chained behind a dropped one never run either
                    for nxt in self.successors.pop(chain.pop(), ()):
                        self.pending_jobs -= 1
                        chain.append(nxt.id)
            if self.pending_jobs <= 0:
                self.finished = True

    def _maybe_deploy(self, c: SimCluster, now: float) -> None:
        if c.state is ClusterState.DEPLOYING and not c.deploy_pending and c.n_core >= c.min_core:
            c.deploy_pending = True
            pre = c.first_incarnation and c.spec.preloaded
            self.push(now + (0.0 if pre else self.cost.deploy_s), EV_DEPLOYED, c)

    def _deployed(self, c: SimCluster, now: float) -> None:
        if c.state is not ClusterState.DEPLOYING:
            return
        self._transition(c, ClusterState.LOADING)
        pre = c.first_incarnation and c.spec.preloaded
        self.push(now + (0.0 if pre else c.spec.dataset_bytes / self.cost.load_Bps), EV_LOADED, c)

    def _loaded(self, c: SimCluster, now: float) -> None:
        if c.state is ClusterState.LOADING:
            self._transition(c, ClusterState.ACTIVE)
            c.dispatch(now)

    def _saved(self, c: SimCluster, now: float) -> None:
        for node in list(c.nodes.values()):
            c.detach(node, now)
            if self.recorder is not None:
                self.recorder.release(c.name, node.host, now)
            self.free.add(node.host)
        self._transition(c, ClusterState.RELEASED)
        self.order.remove(c)
        if c.jobs:
            self._rerequest(c, now)
        self._between(now)

    def _transition(self, c: SimCluster, to: ClusterState) -> None:
        """Move a cluster along the one transition table (the store's too); ``--check`` reports a
        move outside it."""
        if self.check and to not in CLUSTER_TRANSITIONS[c.state]:
            self.stats.invariant_errors.append(f"t={self.now}: {c.name}: transition {c.state} -> {to} not allowed")
        c.state = to
        if self.recorder is not None:
            self.recorder.state(c.name, to, self.now)

    # --- FAWKES: sampling, ticks, plans ---------------------------------------------------------
    def _sample(self, now: float) -> None:
        if self.wl.controller != "fawkes":
            for c in self.order:
                self._queue_point(c, now)
            self.push(now + 5.0, EV_SAMPLE, None)
            return
        s = self.settings
        horizon = now - s.period_s
        clocked = get_policy(s.policy).clock_dependent
        for c in self.order:
            if c.state is ClusterState.SAVING:
                continue
            key = (c.version, c.state)
            if key == c.last_sample_version and not clocked:
                m = ClusterMetrics(now, *c.last_sample)  # nothing changed since the last sample
            else:
                m = self._measure(c, now, s)
                c.last_sample = tuple(getattr(m, f) for f in _METRIC_FIELDS)
                c.last_sample_version = key
            c.samples.append(m)
            if self.recorder is not None:
                self.recorder.sample(c.name, m, self._observed(c, s))
            while c.samples and c.samples[0].time <= horizon:
                c.samples.pop(0)
        if self.timeline:
            for c in self.clusters.values():
                self._queue_point(c, now)
        self.push(now + s.sample_period_s, EV_SAMPLE, None)

    def _queue_point(self, c: SimCluster, now: float) -> None:
        """The queue timeline keeps change points only (the first sample, then each change)."""
        tl = self.queue_tl[c.name]
        n = len(c.jobs)
        if not tl or tl[-1][1] != n:
            tl.append((now, n))

    # --- idle time: ticks that cannot decide anything are skipped ---------------------------------
    def _next_tick(self, now: float, dec) -> float:
        """When the tick after the one at ``now`` (decision ``dec``) runs: at ``now + T``, or later
        over idle time.

        Idle (:meth:`_steady`): no unfinished job, nothing queued, every allocated cluster ACTIVE
        with the same nodes and the same sample over the whole interval, and this tick decided
        nothing.  Until the next event (a job, a request, a node ready or released, a call) each
        further tick sees the same snapshot shifted by T and the same memory, so it decides the
        same, and nothing: it is skipped, and what it would have counted is added at once (the
        memory's tick count, its per-cluster discrimination and last folded sample; the tick
        statistics).  The first tick whose outcome the clock alone could change (an inactivity
        deadline, the end of a cooldown) runs again, as does the first at or after the next
        event.  The samples of the skipped time are not taken: the last interval skipped is
        filled with copies of the unchanged sample, as sampling would have left it.
        """
        s = self.settings
        T = s.period_s
        nxt = now + T
        if not self._idle_jumps or not self._window or not self._steady(now, dec):
            return nxt
        heap = self.heap
        if not heap or heap[0][1] != EV_SAMPLE or len(heap) < 2:
            return nxt  # the next sample is the only event before now + sp
        limit = min(heap[i][0] for i in (1, 2) if i < len(heap))  # the next event after it
        stop = _first_tick(now, T, lambda t: t >= limit, limit)
        for at, reached in controller.clock_deadlines(self.memory, now, s):
            stop = min(stop, _first_tick(now, T, reached, at))
        k = stop - 1  # ticks skipped: now + T .. now + k*T
        t_last = now + k * T
        if k < 1 or t_last + T >= 2.0**52:
            return nxt
        st = self.stats
        st.ticks.append((nxt, dec.global_discrimination, dec.gate_open), k)
        for name, d in dec.discrimination.items():  # added one tick at a time, as the ticks would
            acc = st.overall_d.get(name, 0.0)
            for _ in range(k):
                acc += d
            st.overall_d[name] = acc
        self.memory = controller.repeat(self.memory, dec, k, seen=t_last)
        self.decisions += k
        self.ticks_skipped += k
        sp = s.sample_period_s
        for c in self.order:
            base = c.samples[-1]
            c.samples = [dataclasses.replace(base, time=t_last - T + i * sp) for i in range(1, self._window + 1)]
        heapq.heappop(heap)  # the next sample, now + sp: sampling resumes after the last tick skipped
        self.push(t_last + sp, EV_SAMPLE, None)
        return t_last + T

    def _steady(self, now: float, dec) -> bool:
        """Idle at the tick at ``now`` (see :meth:`_next_tick`)."""
        if (dec.plan.grows or dec.plan.shrinks or dec.deactivate or dec.admission.admitted or dec.shrink_votes
                or any(dec.regrow_votes.values()) or self.queue or len(self.jobs) != len(self.done_jobs)):
            return False
        start = now - self.settings.period_s
        for c in self.order:
            smp = c.samples
            if (c.state is not ClusterState.ACTIVE or not c.alloc or c.alloc[-1][0] > start
                    or len(smp) != self._window or smp[-1].time != now):
                return False
            last = _values(smp[-1])
            if any(_values(m) != last for m in smp):
                return False
        return True

    def _measure(self, c: SimCluster, now: float, s: Settings):
        return sample_cluster(now, _facts(c), s, busy_slots=float(c.running_tasks),
                              configured_slots=float(c.configured_slots()), output_bytes=c.output_bytes,
                              storage_capacity=c.storage_capacity(), completed_jobs=c.completed_jobs,
                              completed_tasks=c.completed_tasks, loading=c.state is not ClusterState.ACTIVE,
                              node_cpu=self.node_cpu(c) if s.pu_signal == "measured" else ())

    def _observed(self, c: SimCluster, s: Settings) -> Observed:
        """What :meth:`_measure` measures ``c`` from, per job (for the recorder: the parity replay)."""
        jobs = tuple(ObservedJob(j.id, f, j.completions) for j, f in zip(c.jobs.values(), _facts(c)))
        return Observed(jobs, float(c.running_tasks), float(c.configured_slots()), c.output_bytes,
                        c.storage_capacity(), c.completed_jobs, c.completed_tasks, c.state is not ClusterState.ACTIVE,
                        tuple(self.node_cpu(c)) if s.pu_signal == "measured" else ())

    def node_cpu(self, c: SimCluster) -> list[float]:
        """UBIS U-7's telemetry, simulated: each configured node's (ready, not draining) measured CPU, the
        sum over its running tasks of what each uses of its slot (its application's ``map_cpu`` or
        ``red_cpu``; 1.0 for an application the cost model does not know) over the node's slots."""
        apps = self.cost.apps
        per = c.slots_per_node
        out = []
        for n in c.nodes.values():
            if not n.ready or n.draining:
                continue
            used = 0.0
            for t in n.tasks:
                p = apps.get(t.job.spec.app)
                used += 1.0 if p is None else (p.map_cpu if t.is_map else p.red_cpu)
            out.append(used / per)
        return out

    def snapshot(self, now: float, fresh: bool = True) -> Snapshot:
        period = self.settings.period_s if self.settings else 60.0
        keep_from = now - 2 * period
        views = []
        for c in self.order:
            alloc = c.alloc
            i = len(alloc) - 1
            while i > 0 and alloc[i][0] > keep_from:
                i -= 1
            if i > 0:
                del alloc[:i]
            if fresh or c.views_ver != c.node_ver:
                c.views = tuple(_view(n) for n in c.nodes.values())
                c.views_ver = c.node_ver
            nodes = c.views
            # the samples of the interval (now - T, now], as the live view reads them (the latest one if
            # none: coordinator/view.interval_samples); c.samples is trimmed at sample times only
            smp = c.samples
            if smp and smp[0].time <= now - period:
                smp = [m for m in smp if m.time > now - period] or smp[-1:]
            views.append(ClusterView(c.name, c.state, c.min_core, nodes, tuple(smp), tuple(alloc),
                                     c.slots_per_node, c.requested_at))
        queue = tuple(ClusterRequest(c.name, c.min_core, c.requested_at, c.spec.expected_duration_s,
                                     c.spec.deadline_s) for c in self.queue)
        racks = self.host_racks if self.settings is not None and self.settings.placement != "none" else {}
        snap = Snapshot(now, self.capacity, tuple(self.free), tuple(views), queue, host_racks=racks)
        # scheduled minima: the same function as the coordinator's snapshot (coordinator/view.py)
        return schedules.apply(snap, self.settings.schedules) if self.settings is not None else snap

    def _tick(self, now: float) -> None:
        if self.wl.controller == "ch2":
            self._offer(now)
            self.push(now + self.ch2.offer_period_s, EV_TICK, None)
            return
        s = self.settings
        snap = self.snapshot(now)
        self._wake_for_queue(snap)
        dec, self.memory = controller.tick(self.memory, snap, s)
        if self.recorder is not None:
            self.recorder.tick(snap, dec, self.memory)
        self.decisions += 1
        st = self.stats
        st.ticks.append((now, dec.global_discrimination, dec.gate_open))
        for name, d in dec.discrimination.items():
            st.overall_d[name] = st.overall_d.get(name, 0.0) + d
        if dec.resized:
            st.reconfigurations += 1
            st.reconfig_times.append(now)
            admitted = set(dec.admission.admitted)
            for name in dec.plan.changed_clusters() - admitted:
                st.resizes[name] = st.resizes.get(name, 0) + 1
        if self.check:
            self._check_tick(snap, dec)
        for name in dec.deactivate:
            self._deactivate(self.clusters[name], now)
        if dec.admission.purged:
            self._purged(dec.admission.purged, now)
        if dec.admission.admitted:
            self._admitted(dec.admission.admitted, now)
        self._execute(dec.plan, now)
        self.push(self._next_tick(now, dec), EV_TICK, None)

    def _deactivate(self, c: SimCluster, now: float) -> None:
        self._transition(c, ClusterState.SAVING)
        self.push(now + c.output_bytes / self.cost.replication / self.cost.save_Bps, EV_SAVED, c)

    def _execute(self, plan, now: float) -> None:
        dp: dict[str, list] = {}
        for sh in plan.shrinks:
            c = self.clusters[sh.cluster]
            node = c.nodes.get(sh.node)
            if node is None or node.draining:
                continue
            if sh.mode is ShrinkMode.FP:
                self._stop_fp(c, node, now)
            else:
                dp.setdefault(sh.cluster, []).append(node)
        for name, nodes in dp.items():
            c = self.clusters[name]
            n_dn = sum(1 for n in c.nodes.values() if n.role is not Role.TR and not n.draining)
            nodes.sort(key=lambda n: n.stored)
            k = len(nodes)
            cum = 0.0
            for node in nodes:
                c.stop_node(node, now, kill=c.cost.dp_kill_tasks)
                cum += node.stored
                self.stats.rereplicated_bytes += node.stored
                self.push(now + c.cost.removal_time(cum, k, n_dn), EV_RELEASE, node)
            self._spread_blocks(c, nodes)
        touched: dict[SimCluster, None] = {}  # ordered: event order must not depend on ids
        for g in plan.grows:
            c = self.clusters[g.cluster]
            if g.host not in self.free or c.state not in (ClusterState.DEPLOYING, ClusterState.LOADING,
                                                         ClusterState.ACTIVE):
                continue
            self._grow(c, g.host, g.role, now)
            touched[c] = None
        for c in touched:
            self._maybe_deploy(c, now)
            c.dispatch(now)

    def _stop_fp(self, c: SimCluster, node, now: float) -> None:
        """FP: the node's tasks are killed now and the host is free ``fp_stop_s`` later (a subclass
        may carry a TR shrink out otherwise: ``fawkes/seeds/bigc.py`` models BIG-C's suspend and
        graceful shrink)."""
        c.stop_node(node, now)
        self.push(now + c.cost.fp_stop_s, EV_RELEASE, node)

    def _spread_blocks(self, c: SimCluster, leaving) -> None:
        """Re-replicated blocks land on the DataNodes that stay."""
        stay = [n for n in c.nodes.values() if n.role is not Role.TR and not n.draining]
        if not stay:
            return
        total = sum(n.stored for n in leaving)
        for n in stay:
            n.stored += total / len(stay)

    # --- chapter 2 controller ---------------------------------------------------------------------
    def _offer(self, now: float) -> None:
        """A chapter-2 offer round through ``controller.offer``: each cluster's runner observes
        a sample measured now (what the coordinator's sampler would have stored)."""
        fresh = {}
        for c in self.order:
            m = fresh[c.name] = self._measure(c, now, _CH2_SAMPLING)
            if self.recorder is not None:
                self.recorder.sample(c.name, m, self._observed(c, _CH2_SAMPLING))
        snap = self.snapshot(now)
        snap = replace(snap, clusters=tuple(replace(v, samples=(fresh[v.name],)) for v in snap.clusters))
        dec, self.memory = controller.offer(self.memory, snap, self.ch2)
        if self.recorder is not None:
            self.recorder.tick(snap, dec, self.memory)
        self.stats.reconfigurations += len(dec.plan.changed_clusters())
        self._execute(dec.plan, now)

    # --- invariants (docs/mechanism.md) -----------------------------------------------------------
    def _check_tick(self, snap: Snapshot, dec) -> None:
        err = self.stats.invariant_errors
        t = snap.now
        if dec.weights:
            tot = sum(dec.weights.values())
            if abs(tot - 1.0) > 1e-6:
                err.append(f"t={t}: weights sum {tot}")
        for v in snap.clusters:
            # its own minimum: one a schedule raised is a target floor, grown towards (schedules.py)
            if v.state in (ClusterState.LOADING, ClusterState.ACTIVE) and v.count(Role.CORE) < v.core_minimum:
                err.append(f"t={t}: {v.name} has {v.count(Role.CORE)} core < min {v.core_minimum}")
            if v.state in (ClusterState.LOADING, ClusterState.ACTIVE) and v.held < v.core_minimum:
                err.append(f"t={t}: {v.name} holds {v.held} < min {v.core_minimum}")
        targets = dec.targets
        for name, tgt in targets.items():
            v = next((c for c in snap.clusters if c.name == name), None)
            m = v.min_core if v is not None else dec.admission.minima.get(name, 0)
            if tgt < m:
                err.append(f"t={t}: target {name}={tgt} < min {m}")
        pol = dec.policy
        leaving = set(dec.deactivate)
        saving = sum(v.held for v in snap.clusters if v.state is ClusterState.SAVING or v.name in leaving)
        if pol == "None":
            for name, tgt in targets.items():
                v = next((c for c in snap.clusters if c.name == name), None)
                if v is not None and tgt != v.min_core:
                    err.append(f"t={t}: None target {name}={tgt} != min")
        elif dec.gate_open and targets and not (self.settings.cap_to_demand or self.settings.min_change_nodes
                                                or self.settings.cooldown_s  # damping holds some clusters
                                                or self.settings.regrow_delay_ticks  # victims wait (BIG-C)
                                                or self.settings.shrink_amount != "full"
                                                or self.settings.reserve_fraction):  # the reserve may stay free
            pool = snap.capacity - saving  # nodes of clusters on their way out are not shared now
            if sum(targets.values()) != pool and sum(dec.admission.minima.values()) + sum(
                    v.min_core for v in snap.allocated if v.name not in leaving) <= pool:
                err.append(f"t={t}: not work-conserving: {sum(targets.values())} != {pool}")
        held = sum(c.held for c in self.clusters.values())
        if held + len(self.free) != self.capacity:
            err.append(f"t={t}: hosts: {held} held + {len(self.free)} free != capacity {self.capacity}")
        for sh in dec.plan.shrinks:
            if sh.role is Role.CORE:
                err.append(f"t={t}: core node {sh.node} removed")
        by_cluster: dict[str, list] = {}
        for sh in dec.plan.shrinks:
            if sh.mode is ShrinkMode.DP:
                v = snap.cluster(sh.cluster)
                by_cluster.setdefault(sh.cluster, []).append(next(n for n in v.nodes if n.id == sh.node).stored_bytes)
        for name, stored in by_cluster.items():
            if stored != sorted(stored):
                err.append(f"t={t}: DP order not by stored bytes in {name}: {stored}")
            v = snap.cluster(name)
            rest = [n.stored_bytes for n in v.nodes if n.role is Role.TC and not n.draining and n.id not in
                    {s.node for s in dec.plan.shrinks}]
            if rest and stored and max(stored) > min(rest):
                err.append(f"t={t}: DP in {name} removed {max(stored)} B while a TC node holds {min(rest)} B")
