"""Workloads: the chapter-2 job stream, the chapter-3 experiments A-E (Table 3.2, as section
B.4 proposes) and the micro-benchmark jobs.  Generation is deterministic per seed and cached.

A :class:`Workload` is a list of clusters (name, request time, minimum, dataset) and a list
of jobs whose base task durations are already drawn, so the same seed gives the same tasks
under every policy and in the reference run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from fawkes.mechanism.model import Role
from fawkes.sim.costs import BLOCK, GB, CostModel, CostOverrides, cost_model

MB64 = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class JobSpec:
    id: int
    cluster: str
    app: str
    input_bytes: float
    maps: int
    reduces: int
    submit_s: float
    map_d: tuple[float, ...] = ()
    red_d: tuple[float, ...] = ()
    ref_runtime_s: float | None = None  # given by a trace; else computed by running the job alone
    after: int | None = None  # submitted when job ``after`` ends (+ submit_s as the gap): BTWorld chain
    beta_in: float = 0.0
    beta_out: float = 0.0
    output_bytes: float = 0.0
    size: str = ""  # small / medium / large / type-k, for reports
    startup_s: float | None = None  # a live job's own dispatch -> first task (a live export); else the cost model's
    model: str = ""  # job model, "mr" or "spark" (fawkes/sim/stages.py); empty: its cluster's

    @property
    def tasks(self) -> int:
        return self.maps + self.reduces


@dataclass(frozen=True, slots=True)
class WorkloadCluster:
    name: str
    request_s: float = 0.0
    min_core: int = 10
    dataset_bytes: float = 200 * GB
    preloaded: bool = True  # deployed and loaded at t = 0 (no w^D, l^D)
    static: dict[Role, int] | None = None  # static composition (micro checks, ch. 2)
    # what the request tells admission (P-2, P-3): expected duration once admitted, deadline maxT
    expected_duration_s: float | None = None
    deadline_s: float | None = None
    #: tasks of a job of this cluster that the live sampler already knew when the trace begins: it counts a
    #: job whose tasks it has not seen yet as that many (``fawkes trace from-state``'s cluster file)
    tasks_known: int = 0
    #: how its jobs run unless a job says otherwise: "mr" (Hadoop-1 slots) or "spark" (stages with
    #: barriers, fawkes/sim/stages.py)
    job_model: str = "mr"


@dataclass(frozen=True)
class Workload:
    name: str
    clusters: tuple[WorkloadCluster, ...]
    jobs: tuple[JobSpec, ...]
    capacity: int
    period_s: float = 120.0
    grow_type: Role = Role.TC
    controller: str = "fawkes"  # fawkes | ch2 | static
    cost: CostModel = field(default_factory=CostModel)
    settings: dict = field(default_factory=dict)  # Settings overrides the experiment implies
    note: str = ""

    @property
    def tasks(self) -> int:
        return sum(j.tasks for j in self.jobs)


# --- job construction -----------------------------------------------------------------------

def make_job(cost: CostModel, rng: np.random.Generator, jid: int, cluster: str, app: str, input_bytes: float,
             maps: int, reduces: int, submit_s: float, *, map_s: float | None = None,
             reduce_s: float | None = None, **kw) -> JobSpec:
    prof = cost.profile(app)
    md, rd = cost.durations(prof, input_bytes, maps, reduces, rng, map_s=map_s, reduce_s=reduce_s)
    return JobSpec(jid, cluster, prof.name, float(input_bytes), int(maps), int(reduces), float(submit_s),
                   tuple(md), tuple(rd), beta_in=prof.beta_in, beta_out=prof.beta_out,
                   output_bytes=input_bytes * prof.selectivity, **kw)


_RESEEDED: dict[tuple[int, int], tuple[Workload, Workload]] = {}


def reseed(wl: Workload, seed: int) -> Workload:
    """The trace with task durations drawn for ``seed`` (cached).

    ``wl`` carries its rows (``_rows``: one per job, as :func:`fawkes.traces.trace.load_trace`
    reads them); the jobs are drawn from those rows with this seed."""
    key = (id(wl), seed)
    hit = _RESEEDED.get(key)
    if hit is not None and hit[0] is wl:
        return hit[1]
    rows = getattr(wl, "_rows")
    rng = np.random.default_rng([seed, 99])
    jobs: list[JobSpec] = []
    for k, r in enumerate(rows):
        jobs.append(make_job(wl.cost, rng, k, r.cluster, r.app, r.input_bytes, r.maps, r.reduces, r.submit_s,
                             ref_runtime_s=r.ref_runtime_s, map_s=r.map_s, reduce_s=r.reduce_s,
                             startup_s=r.startup_s, model=r.model))
    out = replace(wl, jobs=tuple(jobs))
    object.__setattr__(out, "_rows", rows)
    _RESEEDED[key] = (wl, out)
    return out


#: chapter-3 job sizes (MS sizes of §3.4.3): input, maps (128 MB blocks), reduces (10 % of maps, B.4)
SIZES = {"small": (1 * GB, 8, 1), "medium": (50 * GB, 400, 40), "large": (100 * GB, 800, 80)}
#: chapter-2 job types 3-8 (Table 2.2, 64 MB blocks)
CH2_TYPES = {3: 40 * GB, 4: 20 * GB, 5: 10 * GB, 6: 5 * GB, 7: 2.5 * GB, 8: 1 * GB}
WT_ST = ("wordcount", "sort")


def _poisson_times(rng: np.random.Generator, n: int, horizon_s: float) -> list[float]:
    """n arrivals of a Poisson process conditioned on n events in [0, horizon): sorted uniforms."""
    return sorted(rng.uniform(0.0, horizon_s, n).tolist())


# --- chapter 2 -------------------------------------------------------------------------------

def ch2(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    """S-2.4: 20 core nodes + a pool of 20; 50 jobs, WT/ST, types 3-8, Exp(30 s) arrivals."""
    cost = cost_model(cost_over, map_slots=8, reduce_slots=2)
    rng = np.random.default_rng([seed, 2])
    n_core, pool = 20 * scale, 20 * scale
    jobs, t = [], 0.0
    for i in range(50 * scale):
        t += float(rng.exponential(30.0 / scale))
        typ = int(rng.integers(3, 9))
        size = CH2_TYPES[typ]
        maps = int(size // MB64)
        if maps > 160:
            reduces = int(0.9 * cost.reduce_slots * n_core)
        else:
            reduces = max(1, round(maps * float(rng.uniform(0.05, 0.25))))
        app = WT_ST[int(rng.integers(0, 2))]
        jobs.append(make_job(cost, rng, i, "C1", app, size, maps, reduces, t, size=f"type-{typ}"))
    cl = WorkloadCluster("C1", 0.0, n_core, 0.0, True, static={Role.CORE: n_core})
    return Workload("ch2", (cl,), tuple(jobs), n_core + pool, period_s=30.0, grow_type=Role.TR,
                    controller="ch2", cost=cost, note="20 core nodes + pool of 20 transient; 50 jobs")


# --- chapter 3 macro experiments -------------------------------------------------------------

def exp_a(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    """S-3.5: clusters requested at 0/100/200 s, 50 GB each (loaded), 50 small WT jobs each at request."""
    cost = cost_model(cost_over)
    rng = np.random.default_rng([seed, 10])
    clusters, jobs = [], []
    for k, name in enumerate(("C1", "C2", "C3")):
        t = 100.0 * k
        clusters.append(WorkloadCluster(name, t, 10 * scale, 50 * GB, preloaded=False))
        for _ in range(50 * scale):
            b, m, r = SIZES["small"]
            jobs.append(make_job(cost, rng, len(jobs), name, "wordcount", b, m, r, t, size="small"))
    return Workload("A", tuple(clusters), tuple(jobs), 60 * scale, period_s=60.0, grow_type=Role.TR,
                    cost=cost, settings={"policy": "JD"}, note="Table 3.2 A: JD, TR, T = 60 s, C = 60")


def _bc(name: str, app: str, seed: int, scale: int, cost_over: CostOverrides) -> Workload:
    cost = cost_model(cost_over)
    rng = np.random.default_rng([seed, 11 if app == "wordcount" else 12])
    jobs = []
    for cname, n, size in (("C1", 90, "small"), ("C2", 5, "medium"), ("C3", 5, "large")):
        b, m, r = SIZES[size]
        for _ in range(n * scale):
            jobs.append(make_job(cost, rng, len(jobs), cname, app, b, m, r, 0.0, size=size))
    clusters = tuple(WorkloadCluster(c, 0.0, 10 * scale, 200 * GB) for c in ("C1", "C2", "C3"))
    return Workload(name, clusters, tuple(jobs), 60 * scale, period_s=60.0, grow_type=Role.TC, cost=cost,
                    note=f"Table 3.2 {name}: {app}, batch 90 small / 5 medium / 5 large, C = 60, T = 60 s")


def exp_b(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    return _bc("B", "wordcount", seed, scale, cost_over)


def exp_c(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    return _bc("C", "sort", seed, scale, cost_over)


HORIZON = 240 * 60.0
#: workloads D/E keep clusters alive between Poisson gaps (mechanism A-12 with T_idle = T would
#: deactivate C1 during a 2-minute gap and force a 10-minute reload of its 200 GB dataset)
DE_SETTINGS = {"period_s": 120.0, "idle_timeout_s": 1800.0}


def exp_d(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    """S-3.7: C1 165 small, C2 188 (bursty MM), C3 555 small; WT/ST 50/50; C = 48, T = 120 s, TC."""
    cost = cost_model(cost_over)
    rng = np.random.default_rng([seed, 13])
    arrivals: list[tuple[float, str, str]] = []
    for t in _poisson_times(rng, 165 * scale, HORIZON):
        arrivals.append((t, "C1", "small"))
    for t in _poisson_times(rng, 555 * scale, HORIZON):
        arrivals.append((t, "C3", "small"))
    for t in _poisson_times(rng, 152 * scale, HORIZON):
        arrivals.append((t, "C2", "small"))
    bigs = [("medium", "medium"), ("medium", "large"), ("medium", "large")]
    for burst, minute in enumerate((30, 110, 190)):
        start = minute * 60.0
        for _ in range(scale):
            for size in bigs[burst]:
                arrivals.append((start + float(rng.uniform(0, 120)), "C2", size))
            for _ in range(10):
                arrivals.append((start + float(rng.uniform(0, 120)), "C2", "small"))
    arrivals.sort()
    jobs = []
    for t, c, size in arrivals:
        b, m, r = SIZES[size]
        app = WT_ST[int(rng.integers(0, 2))]
        jobs.append(make_job(cost, rng, len(jobs), c, app, b, m, r, t, size=size))
    clusters = tuple(WorkloadCluster(c, 0.0, 10 * scale, 200 * GB) for c in ("C1", "C2", "C3"))
    return Workload("D", clusters, tuple(jobs), 48 * scale, period_s=120.0, grow_type=Role.TC, cost=cost,
                    settings=dict(DE_SETTINGS), note="Table 3.2 D: 240 min, C = 48, T = 120 s, TC growing")


def exp_e(seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    """S-3.8: C1 359 MM (heavy), C2 a sequential BTWorld chain of 26 jobs, C3 559 small."""
    cost = cost_model(cost_over)
    rng = np.random.default_rng([seed, 14])
    arrivals: list[tuple[float, str, str]] = []
    sizes = ["small"] * 326 + ["medium"] * 15 + ["large"] * 18
    for _ in range(scale):
        order = rng.permutation(len(sizes))
        for t, k in zip(_poisson_times(rng, len(sizes), HORIZON), order):
            arrivals.append((t, "C1", sizes[int(k)]))
    for t in _poisson_times(rng, 559 * scale, HORIZON):
        arrivals.append((t, "C3", "small"))
    arrivals.sort()
    jobs = []
    for t, c, size in arrivals:
        b, m, r = SIZES[size]
        app = WT_ST[int(rng.integers(0, 2))]
        jobs.append(make_job(cost, rng, len(jobs), c, app, b, m, r, t, size=size))
    # BTWorld: 13 input sizes log-uniform in [1, 100] GB, 2 jobs each, each after its predecessor
    for _ in range(scale):
        gbs = np.exp(rng.uniform(0, math.log(100), 13))
        chain = [float(g) for g in gbs for _ in range(2)]
        rng.shuffle(chain)
        prev = None
        for k, g in enumerate(chain):
            b = g * GB
            maps = max(1, math.ceil(b / BLOCK))
            app = "activehashes" if k % 2 == 0 else "trackerovertime"
            reduces = max(1, maps // 10)
            j = make_job(cost, rng, len(jobs), "C2", app, b, maps, reduces, 0.0 if prev is None else 5.0,
                         after=prev, size="btworld")
            jobs.append(j)
            prev = j.id
    clusters = tuple(WorkloadCluster(c, 0.0, 10 * scale, 200 * GB) for c in ("C1", "C2", "C3"))
    return Workload("E", clusters, tuple(jobs), 48 * scale, period_s=120.0, grow_type=Role.TC, cost=cost,
                    settings=dict(DE_SETTINGS), note="Table 3.2 E: 240 min, C = 48, T = 120 s, TC growing")


GENERATORS = {"ch2": ch2, "A": exp_a, "B": exp_b, "C": exp_c, "D": exp_d, "E": exp_e}
EXPERIMENTS = tuple(GENERATORS)


def experiment_name(name: str) -> str:
    for k in GENERATORS:
        if k.lower() == name.strip().lower():
            return k
    raise KeyError(name)


@lru_cache(maxsize=64)
def generate(name: str, seed: int, scale: int = 1, cost_over: CostOverrides = ()) -> Workload:
    """The workload of an experiment for one seed (cached: every policy replays the same jobs),
    with the experiment's cost model changed by ``cost_over`` (:func:`fawkes.sim.costs.cost_model`)."""
    return GENERATORS[experiment_name(name)](seed, scale, cost_over)


def static_job_workload(job: JobSpec, cost: CostModel, n_core: int, n_tr: int = 0, n_tc: int = 0,
                        name: str = "static") -> Workload:
    """One job alone on a static cluster (reference runtimes, micro checks)."""
    comp = {Role.CORE: n_core, Role.TR: n_tr, Role.TC: n_tc}
    cl = WorkloadCluster(job.cluster, 0.0, n_core, 0.0, True, static=comp)
    return Workload(name, (cl,), (replace(job, submit_s=0.0, after=None),), n_core + n_tr + n_tc,
                    controller="static", cost=cost)
