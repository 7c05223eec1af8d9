"""A rack-aware gang scheduler, after the YARN placement project (seed 002): the SIM-P checks.

Each job needs ``k`` machines at once for ``dur`` seconds on preferred machines, ``slow`` elsewhere
(GPU-like jobs prefer the first rack; MPI-like jobs want all ``k`` on one rack).  In fawkes terms a
job is an MR-cluster request of minimum ``k`` held for its workload's duration.  Every decision is
the mechanism's: the order of the queue, the deadline purge and the starvation guard are
:func:`fawkes.mechanism.admission.queue_order`; which machines, and whether to wait, is
:func:`fawkes.mechanism.placement.place`, with ``W`` from the expected-free-time table
(:func:`fawkes.mechanism.forecast.free_by`).  This module only keeps the clock and the machines.

The project's policies are settings here:

=========  ===================  =========  =================
policy     admission_order      placement  skip_unfittable
=========  ===================  =========  =================
NONE       fifo                 none       no
HETERGEN   fifo                 soft       no
SJF        sjf                  soft       no
HARD       utility              hard       yes
SOFT       utility              soft       yes
=========  ===================  =========  =================

A job still unfinished at ``arrival + maxT`` is killed (its machines freed); its completion time
counts as ``maxT`` and its utility ``maxT − T`` as 0, as in the project's tables.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from fawkes.mechanism import ClusterRequest, Settings, Snapshot
from fawkes.mechanism.admission import queue_order
from fawkes.mechanism.forecast import FreeAt, free_by
from fawkes.mechanism.placement import place

POLICIES: dict[str, dict] = {
    "NONE": {"admission_order": "fifo", "placement": "none", "skip_unfittable": False},
    "HETERGEN": {"admission_order": "fifo", "placement": "soft", "skip_unfittable": False},
    "SJF": {"admission_order": "sjf", "placement": "soft", "skip_unfittable": False},
    "HARD": {"admission_order": "utility", "placement": "hard", "skip_unfittable": True},
    "SOFT": {"admission_order": "utility", "placement": "soft", "skip_unfittable": True},
}


@dataclass(frozen=True)
class RackJob:
    name: str
    arrival: float
    k: int
    dur: float  # on preferred machines
    slow: float  # elsewhere
    kind: str = "gpu"  # gpu: prefers rack 0; mpi: all k on one rack
    max_t: float = 1e9


@dataclass
class JobOutcome:
    name: str
    arrival: float
    start: float | None = None
    end: float | None = None
    preferred: bool = False
    fate: str = "queued"  # finished | killed | purged

    def completion(self, max_t: float) -> float:
        return max_t if self.fate != "finished" else self.end - self.arrival


@dataclass
class RackRun:
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    jobs: dict[str, RackJob] = field(default_factory=dict)

    def mean_completion(self) -> float:
        return sum(o.completion(self.jobs[n].max_t) for n, o in self.outcomes.items()) / len(self.outcomes)

    def total_utility(self) -> float:
        return sum(self.jobs[n].max_t - o.completion(self.jobs[n].max_t) for n, o in self.outcomes.items())

    def count(self, fate: str) -> int:
        return sum(1 for o in self.outcomes.values() if o.fate == fate)


def simulate_racks(jobs: list[RackJob], racks: int, per_rack: int, policy: str, *, purge: bool = False,
                   starvation_guard_s: float | None = None, seed: int = 0) -> RackRun:
    p = POLICIES[policy]
    settings = Settings(admission_order=p["admission_order"], skip_unfittable=p["skip_unfittable"],
                        deadline_purge=purge, starvation_guard_s=starvation_guard_s)
    rng = random.Random(seed)
    rack_of = {f"r{r}m{m}": f"r{r}" for r in range(racks) for m in range(per_rack)}
    hosts = list(rack_of)
    free: set[str] = set(hosts)
    busy_until: dict[str, float] = {}
    run = RackRun({j.name: JobOutcome(j.name, j.arrival) for j in jobs}, {j.name: j for j in jobs})
    queue: list[RackJob] = []
    events: list = [(j.arrival, 1, j.name, "arrive") for j in jobs]
    heapq.heapify(events)
    running: dict[str, tuple[float, list[str]]] = {}

    def free_hosts_in_order() -> list[str]:
        order = [h for h in hosts if h in free]
        if p["placement"] == "none":
            rng.shuffle(order)  # the project's NONE picks machines at random
        return order

    def wait_for(j: RackJob, now: float, preferred: frozenset[str]) -> float | None:
        rows = tuple(sorted((FreeAt(h, "", now if h in free else busy_until[h], "")
                             for h in hosts if rack_of[h] in preferred), key=lambda r: r.at))
        if j.kind == "mpi":  # the soonest any single rack has k machines
            ws = [free_by(tuple(r for r in rows if rack_of[r.host] == rk), j.k, now) for rk in preferred]
            ws = [w for w in ws if w is not None]
            at = min(ws) if ws else None
        else:
            at = free_by(rows, j.k, now)
        return None if at is None else at - now

    def try_allocate(now: float) -> None:
        while queue:
            snap = Snapshot(now, len(hosts), tuple(sorted(free)), (), tuple(
                ClusterRequest(j.name, j.k, j.arrival, j.dur, j.max_t) for j in queue))
            order = queue_order(snap, settings)
            for name in order.purged:
                run.outcomes[name].fate = "purged"
                queue[:] = [j for j in queue if j.name != name]
            started = False
            for r in order.requests:
                j = run.jobs[r.name]
                if len(free) < j.k:
                    if settings.skip_unfittable and r.name not in order.starving:
                        continue
                    break
                preferred = frozenset({"r0"}) if j.kind == "gpu" else frozenset(set(rack_of.values()))
                mode = p["placement"]
                w = wait_for(j, now, preferred) if mode == "soft" else None
                choice = place(j.k, free_hosts_in_order(), rack_of, preferred, mode, dur_fast=j.dur,
                               locality_penalty=j.slow / j.dur, wait_s=w, same_rack=j.kind == "mpi")
                if choice.wait:
                    if settings.skip_unfittable and r.name not in order.starving:
                        continue
                    break
                dur = j.dur if choice.preferred else j.slow
                end = now + dur
                kill = j.arrival + j.max_t
                for h in choice.hosts:
                    free.discard(h)
                    busy_until[h] = min(end, kill)
                o = run.outcomes[j.name]
                o.start, o.preferred = now, choice.preferred
                running[j.name] = (end, list(choice.hosts))
                heapq.heappush(events, (min(end, kill), 0, j.name, "end" if end <= kill else "kill"))
                queue.remove(j)
                started = True
                break  # one job at a time, then look at the queue again
            if not started:
                return

    while events:
        now, _, name, what = heapq.heappop(events)
        if what == "arrive":
            queue.append(run.jobs[name])
        else:
            _, held = running.pop(name)
            free.update(held)
            o = run.outcomes[name]
            o.end, o.fate = now, ("finished" if what == "end" else "killed")
        # a queued job past its deadline is killed where it waits (it can no longer finish)
        for j in list(queue):
            if now >= j.arrival + j.max_t:
                run.outcomes[j.name].fate = "killed"
                queue.remove(j)
        try_allocate(now)
    for j in queue:
        run.outcomes[j.name].fate = "killed"
    return run


# --- the checks' workloads ---------------------------------------------------------------------

def mixed_jobs(seed: int, n: int, *, racks: int, per_rack: int, rho: float, mpi_share: float = 0.5,
               max_t: float = 1e9, penalty: float = 1.5) -> list[RackJob]:
    """Poisson arrivals at load ``rho`` of GPU-like and MPI-like jobs (k 2..per_rack, exponential
    durations of mean 60 s, ``slow = dur × penalty``)."""
    rng = random.Random(seed)
    mean_k = (2 + per_rack) / 2
    rate = rho * racks * per_rack / (mean_k * 60.0)  # jobs per second giving utilisation rho
    t = 0.0
    out = []
    for i in range(n):
        t += rng.expovariate(rate)
        k = rng.randint(2, per_rack)
        dur = max(1.0, rng.expovariate(1 / 60.0))
        kind = "mpi" if rng.random() < mpi_share else "gpu"
        out.append(RackJob(f"j{i}", round(t, 3), k, round(dur, 3), round(dur * penalty, 3), kind, max_t))
    return out


def designed_trace(*, n_long: int = 16, spread: float = 75.0, t2: float = 1000.0, max_t: float = 1200.0) -> list[RackJob]:
    """SIM-P3: ``n_long`` long jobs (k = 4, 315 s preferred, 345 s elsewhere) arriving over
    [0, spread], then nothing, then a short jobK (67 s / 78 s) at ``t2``, every job with maxT."""
    jobs = [RackJob(f"long{i:02d}", round(i * spread / max(1, n_long - 1), 3), 4, 315.0, 345.0, "gpu", max_t)
            for i in range(n_long)]
    return jobs + [RackJob("jobK", t2, 4, 67.0, 78.0, "gpu", max_t)]
