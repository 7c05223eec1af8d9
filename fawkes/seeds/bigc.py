"""BIG-C's simulation checks on the FAWKES simulator (spec seeds §000, SIM-B1..B4).

The workload is BIG-C's synthetic mix (§5.2) shrunk to this simulator: two MR-clusters on 40
nodes of 6 map + 2 reduce slots, 900 s.  **L** runs long jobs (24 maps of about 600 s, one every
200 s from t = 0; SIM-B1/B3: 16 maps every 50 s, so that L alone keeps about 80 % of the map
slots busy); **S** runs short jobs (6 maps of about 10 s and a 5 s reduce) arriving as a Poisson
stream at about 20 % of the map slots, and at 40 % (``low``) or 90 % (``high``) from 300 to
700 s, or at 85 % in two peaks (``multi``: 300-450 s and 550-700 s).  FAWKES runs TD with τ = 0
every T = 30 s and grows with transient nodes, so a shrink is FP: the tasks of the removed nodes
are killed and re-run (BIG-C's kill).  SIM-B4 replays a Google-trace-like mix over 3.8 h
(:func:`trace_like`).

:class:`BigCSimulator` carries a TR shrink of L out BIG-C's other ways (:class:`ShrinkModel`:
suspend, graceful in steps, Spark-like decommissioning, no preemption); the mechanism decides as
before.  Magnitudes depend on this cost model (the chapter-3 one, ``fawkes/sim/costs.py``, with
BIG-C's figures for swapping and GP, calibration in ``docs/reproduction.md``); they are not
calibrated on BIG-C's cluster.  Each check returns rows of figures, the paper's, and the
direction the spec expects as (statement, holds) pairs (``tests/test_bigc.py`` asserts them).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fawkes.mechanism import Role, Settings
from fawkes.sim import stages
from fawkes.sim.cluster import EV_TASK, SimCluster, Task
from fawkes.sim.costs import GB, cost_model
from fawkes.sim.engine import EV_RELEASE, Simulator
from fawkes.sim.workloads import WorkloadCluster, Workload, make_job

CAPACITY = 40
HORIZON = 900.0
PERIOD = 30.0
#: S's offered load (fraction of the pool's map slots) as a function of time
BURSTS = {
    "low": lambda t: 0.4 if 300 <= t < 700 else 0.2,
    "high": lambda t: 0.9 if 300 <= t < 700 else 0.2,
    "multi": lambda t: 0.85 if (300 <= t < 450 or 550 <= t < 700) else 0.2,
}


def bursts(seed: int, burst: str = "high", l_maps: int = 24, l_every: float = 200.0, job_model: str = "mr") -> Workload:
    """The two-cluster mix (module docstring) for one seed; ``l_maps`` maps per long job, one job
    every ``l_every`` seconds (16 every 50 s: L alone keeps about 80 % of the map slots busy,
    BIG-C's setting, with enough long jobs for percentiles: SIM-B1, B3); ``job_model`` "spark" runs both
    clusters' jobs as Spark-like stages (``fawkes/sim/stages.py``)."""
    cost = cost_model((), map_slots=6, reduce_slots=2)
    rng = np.random.default_rng([seed, 1000])
    jobs = []
    t = 0.0
    while t < HORIZON:
        jobs.append(make_job(cost, rng, 0, "L", "wordcount", l_maps / 8 * GB, l_maps, 4, t, map_s=600.0, reduce_s=60.0,
                             size="long"))
        t += l_every
    jobs += short_stream(cost, rng, BURSTS[burst], CAPACITY, HORIZON, "short")
    jobs.sort(key=lambda j: j.submit_s)
    jobs = [replace(j, id=k) for k, j in enumerate(jobs)]
    clusters = (WorkloadCluster("L", 0.0, 4, 10 * GB, job_model=job_model),
                WorkloadCluster("S", 0.0, 4, 10 * GB, job_model=job_model))
    return Workload(f"BIG-C {burst}", clusters, tuple(jobs), CAPACITY, period_s=PERIOD, grow_type=Role.TR,
                    cost=cost, settings={"idle_timeout_s": 3600.0},
                    note="BIG-C's synthetic mix: L long jobs, S short jobs with a burst at 300-700 s")


def short_stream(cost, rng, load, capacity: int, horizon: float, size: str) -> list:
    """Cluster S's jobs (6 maps of 10 s, 1 reduce of 5 s), Poisson arrivals that offer the fraction
    ``load(t)`` of ``capacity`` nodes' map slots, until ``horizon``."""
    slots = capacity * cost.map_slots
    jobs, t = [], 0.0
    while True:
        t += float(rng.exponential(6 * 10.0 / (load(t) * slots)))
        if t >= horizon:
            return jobs
        jobs.append(make_job(cost, rng, 0, "S", "wordcount", 0.5 * GB, 6, 1, t, map_s=10.0, reduce_s=5.0,
                             size=size))


def settings(**extra: Any) -> Settings:
    return Settings(**({"policy": "TD", "period_s": PERIOD, "sample_period_s": 5.0, "tau": 0.0,
                        "grow_type": Role.TR, "idle_timeout_s": 3600.0} | extra))


# --- how a taken TR node gives its host up: kill, suspend, graceful (in steps) ----------------------

@dataclass(frozen=True)
class ShrinkModel:
    """How the simulator carries out a TR node's shrink (the plan's FP), BIG-C's three ways.

    It applies to the nodes of the ``victims`` (the long-job cluster L: BIG-C preempts long jobs'
    containers only); a node taken from any other cluster leaves by FP, its tasks (seconds long,
    here) re-run.

    * ``kill`` (FP, the default and the engine's own): the node's tasks are killed now, their work
      is lost and re-run; the host is free ``fp_stop_s`` later.
    * ``graceful``: the node takes no new task and its running tasks go on where they run; the host
      is handed over ``fp_stop_s`` later and its next holder gets each slot as the task in it ends
      (the host is shared meanwhile, as BIG-C's containers share a machine).  With ``step`` = 0
      (Spark's decommissioning, the live ``shrink_mode: graceful``) whatever still runs after
      ``timeout_s`` (``timeouts.graceful``) is killed, the live fallback to FP; ``timeout_s = inf``
      is no preemption at all (BIG-C's FIFO).  With ``step`` > 0 (BIG-C's GP, ``r_GP`` in basic
      units of one slot ⟨1 CPU, 2 GB⟩), every ``round_s`` the maps left give up ``step`` more
      slots while the host's holder has pending maps (BIG-C stops once the short jobs' demand is
      met); they share the slots they keep, each slowed in proportion to the capacity removed; at
      zero they are frozen (BIG-C freezes a container that swaps and takes it out of reclamation)
      and resume as suspended tasks do; GP kills nothing.
    * ``suspend`` (BIG-C's IP): the tasks are frozen at once (their work is kept) and their memory
      swapped out, ``swap_s_per_gb`` per GB of ``gb_per_slot`` per task, one after the other,
      before the next holder gets their slots; they resume, after reloading (``reload_factor`` times
      the swap-out), once the host is free, back with their own cluster or its holder has no pending
      maps for ``resume_rounds`` rounds in a row (BIG-C's D), and are frozen again when its holder
      has pending maps.  A task frozen ``suspend_max_s`` is killed
      (a bound, so that every run ends; counted in ``frozen_killed``).
    """

    mode: str = "kill"  # kill | graceful | suspend
    step: int = 0
    round_s: float = 3.0  # BIG-C's resource monitor runs every 3 s (B-8)
    timeout_s: float = 120.0  # timeouts.graceful
    swap_s_per_gb: float = 3.0  # BIG-C: about 3 s to reclaim 1 GB of dirty memory
    reload_factor: float = 2.0  # BIG-C Fig. 3: reloading took longer than reclaiming
    gb_per_slot: float = 2.0  # BIG-C's basic unit ⟨1 CPU, 2 GB⟩
    suspend_max_s: float = 1800.0
    resume_rounds: int = 3  # BIG-C's D = 3: a preempted container tries D times before it really resumes
    victims: tuple[str, ...] = ("L",)  # whose TR nodes leave this way; any other's by FP

    def __post_init__(self) -> None:
        if self.mode not in ("kill", "graceful", "suspend"):
            raise ValueError(f"shrink mode {self.mode!r}: kill, graceful or suspend")
        if self.step < 0 or self.round_s <= 0 or self.timeout_s <= 0 or self.resume_rounds < 1:
            raise ValueError("step >= 0, round_s > 0, timeout_s > 0 and resume_rounds >= 1")


class _Left:
    """The tasks of a taken node left on its host: running on (graceful) or frozen (suspend)."""

    __slots__ = ("host", "node", "cluster", "work", "maps_cap", "frozen", "swapped", "frozen_at", "busy", "votes")

    def __init__(self, node, cluster: SimCluster, tasks: list[Task], now: float):
        self.host, self.node, self.cluster = node.host, node, cluster
        # task -> [work left at speed 1 as of ``at``, speed, at]; a reduce still waiting for the
        # maps has no end yet and is tracked once it has one
        self.work: dict[Task, list[float]] = {t: [t.end - now if t.end >= 0 else -1.0, 1.0, now] for t in tasks}
        self.maps_cap = sum(1 for t in tasks if t.is_map)
        self.frozen = False
        self.swapped = False  # suspend: memory swapped out, the slots are the holder's
        self.frozen_at = 0.0
        self.busy = False  # suspend: swapping out or reloading (the slots are not free)
        self.votes = 0  # consecutive rounds the tasks could have their slots back (BIG-C's D)

    def maps(self) -> int:
        return sum(1 for t in self.work if t.is_map)

    def held(self) -> tuple[int, int]:
        """(map, reduce) slots of the host these tasks keep from its holder."""
        if self.swapped:
            return 0, 0
        reds = sum(1 for t in self.work if not t.is_map)
        return min(self.maps_cap, self.maps()), reds


class _Cluster(SimCluster):
    """A SimCluster that tells the BIG-C simulator when a left task ends and when one of its nodes
    becomes ready on a host that tasks left by another cluster still share."""

    def finish(self, t: Task, now: float) -> None:
        left = self.sim.left_of.pop(t, None)
        if left is not None:
            del left.work[t]
        super().finish(t, now)
        if left is not None:
            self.sim._update(left, now)

    def make_ready(self, node) -> None:
        ready = node.ready
        super().make_ready(node)
        if node.ready and not ready:
            self.sim._sync(node.host, self.sim.now)

    def stop_node(self, node, now: float, kill: bool = True) -> int:
        self.sim.withheld.pop(node, None)
        return super().stop_node(node, now, kill)


class BigCSimulator(Simulator):
    """The FAWKES simulator with a TR shrink carried out as :class:`ShrinkModel` says."""

    def __init__(self, wl: Workload, settings: Settings, shrink: ShrinkModel = ShrinkModel(), **kw: Any):
        super().__init__(wl, settings, **kw)
        self.clusters = {c.name: _Cluster(self, c) for c in wl.clusters}
        self.shrink_model = shrink
        self.left: dict[str, list[_Left]] = {}  # host -> the tasks left on it, one group per shrink
        self.left_of: dict[Task, _Left] = {}
        self.withheld: dict[Any, list[int]] = {}  # holder node -> [map, reduce] slots kept from it
        self.frozen_killed = 0
        self.left_killed = 0
        self.killed_by: dict[str, int] = {}  # killed tasks per cluster
        self._round_pending = False

    def stats_kill(self, t: Task, now: float) -> None:
        super().stats_kill(t, now)
        self.killed_by[t.job.spec.cluster] = self.killed_by.get(t.job.spec.cluster, 0) + 1

    # --- the shrink ---------------------------------------------------------------------------
    def _stop_fp(self, c: SimCluster, node, now: float) -> None:
        m = self.shrink_model
        if m.mode == "kill" or not node.tasks or c.name not in m.victims:
            super()._stop_fp(c, node, now)
            return
        tasks = list(node.tasks)
        node.tasks.clear()  # they stay alive, off the node: detaching it kills nothing
        c.stop_node(node, now, kill=False)
        self.push(now + self.cost.fp_stop_s, EV_RELEASE, node)
        left = _Left(node, c, tasks, now)
        self.left.setdefault(node.host, []).append(left)
        for t in tasks:
            self.left_of[t] = left
        if m.mode == "suspend":
            self._freeze(left, now)
        elif m.step == 0 and m.timeout_s != float("inf"):
            self.at(now + m.timeout_s, lambda sim, t, left=left: sim._kill_left(left, t))
        self._arm_round(now)

    def _freeze(self, left: _Left, now: float) -> None:
        """Suspend: stop the tasks now; their slots are the holder's once their memory is out."""
        self._set_speed(left, now, 0.0)
        left.frozen, left.frozen_at, left.busy = True, now, True
        swap = self.shrink_model.swap_s_per_gb * self.shrink_model.gb_per_slot * len(left.work)

        def swapped(sim, t, left=left):
            if sim._alive(left) and left.frozen:
                left.swapped, left.busy = True, False
                sim._sync(left.host, t)
        self.at(now + swap, swapped)

    def _resume(self, left: _Left, now: float) -> None:
        """Suspend: take the slots back, reload the memory, then run on."""
        left.swapped, left.busy = False, True
        left.maps_cap = left.maps()
        self._sync(left.host, now)
        reload = (self.shrink_model.reload_factor * self.shrink_model.swap_s_per_gb * self.shrink_model.gb_per_slot
                  * len(left.work))

        def resumed(sim, t, left=left):
            if sim._alive(left) and left.frozen and not left.swapped:
                left.frozen, left.busy = False, False
                sim._update(left, t)
        self.at(now + reload, resumed)

    def _alive(self, left: _Left) -> bool:
        return any(g is left for g in self.left.get(left.host, ()))

    def _holder(self, host: str) -> SimCluster | None:
        for c in self.clusters.values():
            if host in c.nodes:
                return c
        return None

    def _arm_round(self, now: float) -> None:
        m = self.shrink_model
        if self._round_pending or not self.left or (m.mode == "graceful" and m.step == 0):
            return
        self._round_pending = True
        self.at(now + m.round_s, lambda sim, t: sim._round(t))

    def _round(self, now: float) -> None:
        """The inner loop (every ``round_s``): frozen tasks resume when their host is free or back
        with their cluster; running ones on a host whose holder has pending maps are frozen
        (suspend) or give up one more step (GP)."""
        self._round_pending = False
        m = self.shrink_model
        for left in [g for groups in self.left.values() for g in groups]:
            if not self._alive(left):
                continue
            holder = self._holder(left.host)
            foreign = holder is not None and holder is not left.cluster
            if left.frozen:
                if left.busy:
                    continue
                if now - left.frozen_at >= m.suspend_max_s:
                    self.frozen_killed += len(left.work)
                    self._kill_left(left, now)
                elif not foreign or not holder.mq:  # the host is free, back, or its holder has no pending maps
                    left.votes += 1
                    if left.votes >= m.resume_rounds:
                        left.votes = 0
                        self._resume(left, now)
                else:
                    left.votes = 0
                continue
            if not (foreign and holder.mq):
                if left.maps_cap < left.maps():  # GP: the holder needs no more; slots it leaves free go back
                    left.votes += 1
                    if left.votes >= m.resume_rounds:
                        left.votes = 0
                        node = holder.nodes.get(left.host) if holder is not None else None
                        free = node.free_map if node is not None and node.ready and not node.draining else m.step
                        left.maps_cap = min(left.maps(), left.maps_cap + free)
                        self._update(left, now)
                continue
            left.votes = 0
            if m.mode == "suspend":
                self._freeze(left, now)
                self._sync(left.host, now)
            elif left.maps():
                left.maps_cap = max(0, left.maps_cap - m.step)
                if left.maps_cap == 0:  # BIG-C: a container that swaps is frozen, out of reclamation
                    self._set_speed(left, now, 0.0)
                    left.frozen, left.frozen_at, left.swapped = True, now, True
                    self._sync(left.host, now)
                else:
                    self._update(left, now)
        self._arm_round(now)

    # --- the tasks left: speeds, kills, the slots they keep ------------------------------------
    def _set_speed(self, left: _Left, now: float, speed_of) -> None:
        """Give every tracked task of ``left`` its new speed (a number or a function of the task):
        the work done so far is kept, the end event is moved (a new Task; the old one is dead)."""
        for t in list(left.work):
            w = left.work[t]
            if w[0] < 0:
                if t.end < 0:
                    continue  # a reduce still waiting for the maps
                w[0], w[1], w[2] = t.end - now, 1.0, now  # its end was set since
            w[0] = max(0.0, w[0] - (now - w[2]) * w[1])
            w[2] = now
            v = speed_of(t) if callable(speed_of) else speed_of
            if v == w[1] and t.end >= 0 and v > 0:
                continue
            w[1] = v
            nt = Task(t.job, t.is_map, t.idx, t.node, t.start, t.dur)
            t.alive = False
            del left.work[t]
            del self.left_of[t]
            left.work[nt] = w
            self.left_of[nt] = left
            if v > 0:
                nt.end = now + w[0] / v
                self.push(nt.end, EV_TASK, nt)
            else:
                nt.end = float("inf")

    def _update(self, left: _Left, now: float) -> None:
        """After a change: the maps left share the map slots they keep; the holder gets the rest."""
        if not left.work:
            groups = self.left.get(left.host, [])
            if left in groups:
                groups.remove(left)
            if not groups:
                self.left.pop(left.host, None)
            m = self.shrink_model
            if m.mode == "graceful" and m.step == 0 and m.timeout_s != float("inf"):
                self._executor_exits(left, now)
        elif not left.frozen:
            n = left.maps()
            left.maps_cap = min(left.maps_cap, n)
            cap = left.maps_cap
            self._set_speed(left, now, lambda t: 1.0 if not t.is_map else min(1.0, cap / n))
        self._sync(left.host, now)

    def _executor_exits(self, left: _Left, now: float) -> None:
        """Spark's decommissioning: the executor exits once its tasks are done (or killed at the
        timeout), and the shuffle outputs of Spark-like jobs on it go with it (no migration)."""
        node = left.node
        staged = [e for e in node.map_outputs if e[0].staged]
        if staged:
            node.map_outputs = [e for e in node.map_outputs if not e[0].staged]
            self.stats.lost_maps += stages.lose_outputs(left.cluster, staged, node, now)

    def _kill_task(self, left: _Left, t: Task, now: float) -> None:
        del left.work[t]
        self.left_of.pop(t, None)
        self.left_killed += 1
        c = t.node.cluster
        c._kill(t, now)
        c.dispatch(now)

    def _kill_left(self, left: _Left, now: float) -> None:
        """The timeout (graceful) or the bound (suspend): what is left is killed (FP)."""
        if not self._alive(left):
            return
        for t in list(left.work):
            self._kill_task(left, t, now)
        self._update(left, now)

    def _sync(self, host: str, now: float) -> None:
        """The holder's ready node on ``host`` keeps free only the slots the tasks left there do not
        hold: they are taken from its free slots (a task of the holder already running there runs
        on; the slot is taken at a later sync) and given back as the tasks left end or step down."""
        holder = self._holder(host)
        node = holder.nodes.get(host) if holder is not None else None
        if node is None or not node.ready or node.draining:
            return
        held = [g.held() for g in self.left.get(host, ())]
        want = (sum(h[0] for h in held), sum(h[1] for h in held))
        have = self.withheld.setdefault(node, [0, 0])
        back = False
        for i, is_map in ((0, True), (1, False)):
            d = want[i] - have[i]  # > 0: keep more from the holder, < 0: give back
            if d > 0:
                d = min(d, node.free_map if is_map else node.free_red)
            if d == 0:
                continue
            if is_map:
                node.free_map -= d
                holder.free_map -= d
                if d < 0:
                    holder._push_map(node)
            else:
                node.free_red -= d
                holder.free_red -= d
                if d < 0:
                    holder._push_red(node)
            have[i] += d
            back = back or d < 0
        if back:
            holder.dispatch(now)


def run(seed: int, burst: str = "high", shrink: ShrinkModel | None = None, l_maps: int = 24,
        l_every: float = 200.0, job_model: str = "mr", **extra: Any) -> dict[str, float]:
    """One run: S's queueing delay (first task start - submit: mean, p95), L's JCT (p50, p90, CoV),
    killed tasks, reconfigurations and utilisation; with a ``shrink`` model (:class:`ShrinkModel`)
    TR shrinks are carried out its way.  A run is a function of its arguments (seeded), so it is
    computed once per process: SIM-B1's kill and GP-step-2 arms are SIM-B3's kill and step 2."""
    return dict(_run(seed, burst, shrink, l_maps, l_every, job_model, tuple(sorted(extra.items()))))


@functools.lru_cache(maxsize=1024)
def _run(seed: int, burst: str, shrink: ShrinkModel | None, l_maps: int, l_every: float, job_model: str,
         extra: tuple[tuple[str, Any], ...]) -> dict[str, float]:
    wl, st = bursts(seed, burst, l_maps, l_every, job_model), settings(**dict(extra))
    sim = (Simulator(wl, st, check_invariants=True) if shrink is None
           else BigCSimulator(wl, st, shrink, check_invariants=True)).run()
    if sim.stats.invariant_errors:
        raise AssertionError(f"invariants: {sim.stats.invariant_errors[:3]}")
    s = [j for j in sim.done_jobs if j.spec.cluster == "S"]
    lj = [j.end - j.submit for j in sim.done_jobs if j.spec.cluster == "L"]
    q = [j.started - j.submit for j in s]
    end = max(j.end for j in sim.done_jobs)
    out = {"s_queue_mean_s": statistics.fmean(q), "s_queue_p95_s": float(np.percentile(q, 95)),
           "l_jct_p50_s": float(np.percentile(lj, 50)), "l_jct_p90_s": float(np.percentile(lj, 90)),
           "killed_tasks": float(sim.stats.killed_tasks), "reconfigurations": float(sim.stats.reconfigurations),
           "utilization": sim.stats.busy_slot_s / (sim.capacity * sim.node_slots * end)}
    if shrink is not None:
        out["l_killed_tasks"] = float(sim.killed_by.get("L", 0))
        out["l_jct_cov"] = statistics.pstdev(lj) / statistics.fmean(lj)
        out["wasted_slot_s"] = sim.stats.wasted_s
    return out


def _mean_runs(seeds: list[int], burst: str, shrink: ShrinkModel | None = None, l_mix: tuple[int, float] = (24, 200.0),
               job_model: str = "mr", **extra: Any) -> dict[str, float]:
    runs = [run(s, burst, shrink, *l_mix, job_model=job_model, **extra) for s in seeds]
    return {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}


def sim_b2(seeds: list[int], job_model: str = "mr") -> dict[str, Any]:
    """SIM-B2: sweep of the regrow delay D = 0..5 (``regrow_delay_ticks``) under the high burst."""
    got = {d: _mean_runs(seeds, "high", job_model=job_model, regrow_delay_ticks=d) for d in range(6)}
    rows = [{"D": d, **{k: round(v, 3 if k == "utilization" else 1) for k, v in r.items()}} for d, r in got.items()]
    q = {d: r["s_queue_mean_s"] for d, r in got.items()}
    expect = [
        ("S's mean queueing delay lower with D = 3 than with D = 0", q[3] < q[0]),
        ("S's mean queueing delay lower with D = 5 than with D = 0", q[5] < q[0]),
        ("fewer tasks killed with D = 3 than with D = 0 (less kill/regrow thrash)",
         got[3]["killed_tasks"] < got[0]["killed_tasks"]),
        ("L's p90 JCT does not fall as D grows (D = 5 >= D = 0: long jobs wait longer for their nodes)",
         got[5]["l_jct_p90_s"] >= got[0]["l_jct_p90_s"]),
    ]
    paper = {"D=0 short-job queueing delay": "as high as 80 s", "D chosen": 3,
             "shape": "sharp drop from D = 0, diminishing returns; long-job starvation rises slowly with D"}
    drop = 100 * (1 - q[3] / q[0]) if q[0] else 0.0
    note = (f"S mean queueing {q[0]:.1f} s at D = 0, {q[3]:.1f} s at D = 3 ({drop:.1f} % lower), {q[5]:.1f} s at D = 5; "
            "the direction holds, the magnitude is far from BIG-C's (see docs/reproduction.md)")
    return {"rows": rows, "paper": paper, "expect": expect, "note": note}


#: L's jobs in SIM-B1/B3 (maps, one every so many seconds): L alone keeps about 80 % of the map slots
#: busy (BIG-C's long jobs), 18 long jobs a run
L_MAPS_B1 = (16, 50.0)
_M = ShrinkModel
#: SIM-B1's arms: (shrink model, settings); FIFO is no preemption (a taken node's tasks all finish)
B1_ARMS: dict[str, tuple[ShrinkModel, dict[str, Any]]] = {
    "FIFO (no preemption)": (_M("graceful", timeout_s=float("inf")), {}),
    "kill (FP)": (_M("kill"), {}),
    "suspend (IP)": (_M("suspend"), {}),
    "GP (step 2)": (_M("graceful", step=2), {}),
    "graceful (decommission, 120 s)": (_M("graceful"), {}),
    "reserve 0.6": (_M("kill"), {"latency_clusters": ("S",), "reserve_fraction": 0.6}),
    "kill + latency class S": (_M("kill"), {"latency_clusters": ("S",)}),
}


def _round_row(r: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3 if k in ("utilization", "l_jct_cov") else 1) for k, v in r.items()}


def sim_b1(seeds: list[int], job_model: str = "mr") -> dict[str, Any]:
    """SIM-B1: kill vs suspend vs graceful (GP in steps, decommission), FIFO, reserve; 3 bursts.

    Kill, suspend (IP), BIG-C's GP (step 2) and Spark-like decommissioning (120 s, then FP) of L's
    nodes, with FIFO (no preemption) and the reserve baseline, under the low, high and multi bursts."""
    got = {(b, arm): _mean_runs(seeds, b, m, L_MAPS_B1, job_model, **extra) for b in BURSTS
           for arm, (m, extra) in B1_ARMS.items()}
    rows = [{"burst": b, "arm": arm, **_round_row(r)} for (b, arm), r in got.items()]
    fifo, kill, ip, gp, gr, res, _lat = B1_ARMS
    preempt = (kill, ip, gp)  # BIG-C's preemptive arms
    bigc_arms = (fifo, kill, ip, gp, res)

    def q(b, a):
        return got[(b, a)]["s_queue_mean_s"]

    def p90(b, a):
        return got[(b, a)]["l_jct_p90_s"]

    def near_best(b, a):
        best = min(q(b, x) for x in preempt)
        return q(b, a) <= max(1.1 * best, best + 1.0)

    expect = [
        ("FIFO worst for S: the highest S mean queueing delay of BIG-C's arms under every burst",
         all(q(b, fifo) >= max(q(b, a) for a in bigc_arms) for b in BURSTS)),
        ("FIFO best for L: the lowest L p90 JCT of BIG-C's arms under every burst",
         all(p90(b, fifo) <= min(p90(b, a) for a in bigc_arms) for b in BURSTS)),
        ("kill near-best for S: its S mean queueing within 10 % (or 1 s) of the best preemptive arm's, every burst",
         all(near_best(b, kill) for b in BURSTS)),
        ("kill costs L: its L p90 JCT above FIFO's under every burst", all(p90(b, kill) > p90(b, fifo) for b in BURSTS)),
        ("GP costs L less than kill: its L p90 JCT below kill's under every burst",
         all(p90(b, gp) < p90(b, kill) for b in BURSTS)),
        ("GP ahead of IP for S: its S mean queueing at most IP's under every burst",
         all(q(b, gp) <= q(b, ip) for b in BURSTS)),
        ("IP and GP kill no task of L (BIG-C: they caused no failures)",
         all(got[(b, a)]["l_killed_tasks"] == 0 for b in BURSTS for a in (ip, gp))),
        ("the reserve best for S under low load", q("low", res) <= min(q("low", a) for a in bigc_arms)),
        ("the reserve degrades for S under high load: its S mean queueing above kill's", q("high", res) > q("high", kill)),
        ("IP worst for L under low load: the highest L p90 JCT of BIG-C's arms",
         p90("low", ip) >= max(p90("low", a) for a in bigc_arms)),
        ("the reserve beats kill and IP for L: its L p90 JCT below theirs under every burst",
         all(p90(b, res) < min(p90(b, kill), p90(b, ip)) for b in BURSTS)),
        ("the reserve's utilisation below every preemptive arm's under every burst",
         all(got[(b, res)]["utilization"] < min(got[(b, a)]["utilization"] for a in preempt) for b in BURSTS)),
    ]
    pen = {(b, a): 100 * (p90(b, a) / p90(b, fifo) - 1) for b in BURSTS for a in B1_ARMS}
    paper = {"S (short)": "FIFO delays S substantially; kill among the best in all three; reserve best under low and "
                          "multi load, degraded under high; IP and GP close to the best, GP ahead of IP",
             "L (long) p90 vs FIFO": "kill +140 % on average; GP +13 / +61 / +17 % (low / high / multi); "
                                     "IP worst median and tail under low load (Spark); reserve still beat kill and IP",
             "failures": "kill failed 13 / 15 / 20 % of long jobs; IP and GP none"}
    note = ("L p90 vs FIFO, low / high / multi: " + "; ".join(
        f"{a} " + " / ".join(f"{pen[(b, a)]:+.1f} %" for b in BURSTS) for a in (kill, ip, gp, gr, res))
        + ". No job fails here (attempts are not limited); L is MR-like (independent maps): a suspended task "
          "stalls its job only at the job's end, not the whole job as a Spark executor would")
    return {"rows": rows, "paper": paper, "expect": expect, "note": note}


#: SIM-B3's GP steps, in basic units of one slot (⟨1 CPU, 2 GB⟩)
B3_STEPS = (1, 2, 4, 8)


def sim_b3(seeds: list[int], job_model: str = "mr") -> dict[str, Any]:
    """SIM-B3: a sweep of the GP step (1, 2, 4, 8 slots a round) under the low, high and multi bursts."""
    got = {(b, k): _mean_runs(seeds, b, _M("graceful", step=k), L_MAPS_B1, job_model) for b in BURSTS for k in B3_STEPS}
    kill = {b: _mean_runs(seeds, b, _M("kill"), L_MAPS_B1, job_model) for b in BURSTS}
    rows = [{"burst": b, "step": k, **_round_row(r)} for (b, k), r in got.items()]
    rows += [{"burst": b, "step": "kill", **_round_row(r)} for b, r in kill.items()]
    cov = {key: r["l_jct_cov"] for key, r in got.items()}
    mean_cov = {k: statistics.fmean(cov[(b, k)] for b in BURSTS) for k in B3_STEPS}
    expect = [
        ("the CoV of L's JCT increases with the step (1 < 2 < 4 < 8, mean over the bursts)",
         all(mean_cov[a] < mean_cov[b] for a, b in zip(B3_STEPS, B3_STEPS[1:]))),
        ("the CoV of L's JCT at step 8 above step 1 under every burst", all(cov[(b, 8)] > cov[(b, 1)] for b in BURSTS)),
        ("even the largest step varies less than kill (CoV at step 8 at most kill's, every burst)",
         all(cov[(b, 8)] <= kill[b]["l_jct_cov"] for b in BURSTS)),
    ]
    paper = {"GP granularity": "the CoV of JCT increases with the step; even aggressive GP varies less than kill or IP",
             "chosen step": "⟨2 CPU, 4 GB⟩ = 2 basic units ⟨1 CPU, 2 GB⟩"}
    note = ("L JCT CoV by step (mean of low / high / multi): " + ", ".join(f"{k}: {mean_cov[k]:.3f}" for k in B3_STEPS)
            + f"; kill: {statistics.fmean(kill[b]['l_jct_cov'] for b in BURSTS):.3f}")
    return {"rows": rows, "paper": paper, "expect": expect, "note": note}


# --- SIM-B4: a Google-trace-like replay ------------------------------------------------------------

TRACE_HORIZON = 13_680.0  # 3.8 h
TRACE_LONG, TRACE_SHORT = 182, 2020
#: S's offered load over the replay: 17 % of the map slots, a spike to 95 % for ten minutes near 8000 s
TRACE_SPIKE = (7_800.0, 8_400.0)


def trace_like(seed: int, job_model: str = "mr") -> Workload:
    """BIG-C's Google-trace replay (§5.5) shrunk to this simulator: 182 long jobs (12-36 maps of about
    560 s: 75 % of the map slots on average) at uniform random times over 3.8 h, and short jobs
    (1-11 maps of about 50 s and a 10 s reduce) as a Poisson stream at 17 % of the map slots, 95 % for
    ten minutes from 7800 s: about 2200 of them (BIG-C's 2020 were smaller at the same 17 %)."""
    cost = cost_model((), map_slots=6, reduce_slots=2)
    rng = np.random.default_rng([seed, 1004])
    slots = CAPACITY * cost.map_slots
    jobs = []
    for t in sorted(rng.uniform(0.0, TRACE_HORIZON, TRACE_LONG).tolist()):
        maps = int(rng.integers(12, 37))
        jobs.append(make_job(cost, rng, 0, "L", "wordcount", maps / 8 * GB, maps, 4, t, map_s=560.0, reduce_s=60.0,
                             size="long"))
    per_job = 6 * 50.0 + 10.0  # slot-seconds of a short job on average

    def load(t):
        return 0.95 if TRACE_SPIKE[0] <= t < TRACE_SPIKE[1] else 0.17
    t = 0.0
    while True:
        t += float(rng.exponential(per_job / (load(t) * slots)))
        if t >= TRACE_HORIZON:
            break
        maps = int(rng.integers(1, 12))
        jobs.append(make_job(cost, rng, 0, "S", "wordcount", maps / 8 * GB, maps, 1, t, map_s=50.0, reduce_s=10.0,
                             size="short"))
    jobs.sort(key=lambda j: j.submit_s)
    jobs = [replace(j, id=k) for k, j in enumerate(jobs)]
    clusters = (WorkloadCluster("L", 0.0, 4, 10 * GB, job_model=job_model),
                WorkloadCluster("S", 0.0, 4, 10 * GB, job_model=job_model))
    return Workload("BIG-C trace-like", clusters, tuple(jobs), CAPACITY, period_s=PERIOD, grow_type=Role.TR,
                    cost=cost, settings={"idle_timeout_s": 3600.0},
                    note="BIG-C's Google-trace replay: 182 long, about 2020 short jobs over 3.8 h, a spike near 8000 s")


def run_trace(seed: int, shrink: ShrinkModel, every_s: float = 60.0, job_model: str = "mr", **extra: Any) -> dict[str, float]:
    """One replay: S's JCT (p90, p95), L's JCT (p90), killed tasks, and the utilisation sampled every
    ``every_s`` from 600 s to the last arrival (busy slots, frozen tasks not counted, over all slots):
    its mean, the share of samples above 60 % and below 40 %."""
    sim = BigCSimulator(trace_like(seed, job_model), settings(**extra), shrink, check_invariants=True)
    util: list[float] = []
    total = CAPACITY * sim.node_slots

    def sample(s, t):
        frozen = sum(len(g.work) for groups in s.left.values() for g in groups if g.frozen)
        util.append((sum(c.running_tasks for c in s.clusters.values()) - frozen) / total)
        if not s.finished:
            s.at(t + every_s, sample)
    sim.at(every_s, sample)
    sim.run()
    if sim.stats.invariant_errors:
        raise AssertionError(f"invariants: {sim.stats.invariant_errors[:3]}")
    sj = [j.end - j.submit for j in sim.done_jobs if j.spec.cluster == "S"]
    lj = [j.end - j.submit for j in sim.done_jobs if j.spec.cluster == "L"]
    util = util[int(600 // every_s): int(TRACE_HORIZON // every_s)]  # the replay after a 10-minute warm-up
    return {"s_jct_p90_s": float(np.percentile(sj, 90)), "s_jct_p95_s": float(np.percentile(sj, 95)),
            "s_jct_p50_s": float(np.percentile(sj, 50)), "l_jct_p90_s": float(np.percentile(lj, 90)),
            "killed_tasks": float(sim.stats.killed_tasks), "l_killed_tasks": float(sim.killed_by.get("L", 0)),
            "util_mean": statistics.fmean(util),
            "util_above_60": sum(u > 0.6 for u in util) / len(util), "util_below_40": sum(u < 0.4 for u in util) / len(util),
            "jobs": float(len(sim.done_jobs))}


B4_ARMS: dict[str, tuple[ShrinkModel, dict[str, Any]]] = {
    "FIFO (no preemption)": B1_ARMS["FIFO (no preemption)"],
    "kill (FP)": B1_ARMS["kill (FP)"],
    "suspend (IP)": B1_ARMS["suspend (IP)"],
    "GP (step 2)": B1_ARMS["GP (step 2)"],
    "reserve 0.6": B1_ARMS["reserve 0.6"],
}


def sim_b4(seeds: list[int], job_model: str = "mr") -> dict[str, Any]:
    """SIM-B4: a Google-trace-like replay (182 long, ~2200 short jobs over 3.8 h, a spike near 8000 s)."""
    got = {}
    for arm, (m, extra) in B4_ARMS.items():
        runs = [run_trace(sd, m, job_model=job_model, **extra) for sd in seeds]
        got[arm] = {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
    rows = [{"arm": arm, **{k: round(v, 3 if k.startswith("util") else 1) for k, v in r.items()}} for arm, r in got.items()]
    fifo, kill, ip, gp, res = B4_ARMS
    p95 = {a: got[a]["s_jct_p95_s"] for a in got}
    lp90 = {a: got[a]["l_jct_p90_s"] for a in got}
    gain = {a: 100 * (1 - lp90[gp] / lp90[a]) for a in (kill, ip, res)}
    expect = [
        ("short p95: GP < IP < kill", p95[gp] < p95[ip] < p95[kill]),
        ("short p95: kill about the reserve's (within 25 %)", abs(p95[kill] / p95[res] - 1) <= 0.25),
        ("FIFO's short p90 the highest of every arm", all(got[fifo]["s_jct_p90_s"] >= got[a]["s_jct_p90_s"] for a in got)),
        ("GP's long p90 below kill's, IP's and the reserve's", all(lp90[gp] < lp90[a] for a in (kill, ip, res))),
        ("GP's long p90 within 10 % of FIFO's", lp90[gp] <= 1.10 * lp90[fifo]),
        ("the reserve's utilisation rarely above 60 % (under 10 % of the time)", got[res]["util_above_60"] < 0.10),
        ("kill and IP dip below 40 % utilisation (some of the time)",
         got[kill]["util_below_40"] > 0 and got[ip]["util_below_40"] > 0),
    ]
    paper = {"short p95": {"GP": 96, "IP": 118, "kill": 176, "reserve": 183}, "FIFO short p90": 335,
             "GP long p90 better than": {"kill": "67 %", "IP": "37 %", "reserve": "32 %"}, "GP vs FIFO long": "+4 %",
             "utilisation": "FIFO, kill, IP, GP above 80 % for more than 60 % of the time; reserve rarely above 60 %; "
                            "kill and IP dip below 40 %", "failures": "kill: 41 of 182 long jobs failed; IP, GP none"}
    note = ("GP's long p90 better than kill / IP / reserve by " + " / ".join(f"{gain[a]:.1f} %" for a in (kill, ip, res))
            + f"; vs FIFO {100 * (lp90[gp] / lp90[fifo] - 1):+.1f} %")
    return {"rows": rows, "paper": paper, "expect": expect, "note": note}


CHECKS = {"SIM-B1": sim_b1, "SIM-B2": sim_b2, "SIM-B3": sim_b3, "SIM-B4": sim_b4}
