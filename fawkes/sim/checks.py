"""The simulation checks S-2.x and S-3.x (docs/reproduction.md) as functions returning measured numbers.

Used by tests/test_sim_reproduction.py and docs/reproduction.md.  Every function is
deterministic for its seeds; the macro checks live in :mod:`fawkes.sim.runner`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from fawkes.mechanism.contention import transient_write_contention
from fawkes.mechanism.model import Plan, Role, Shrink, ShrinkMode
from fawkes.sim.costs import BLOCK, GB, CostModel
from fawkes.sim.engine import Simulator
from fawkes.sim.workloads import JobSpec, make_job, static_job_workload

CH2_COST = CostModel(map_slots=8, reduce_slots=2)
CH3_COST = CostModel()
SEEDS = (1, 2, 3, 4, 5)


def run_static(job: JobSpec, cost: CostModel, n_core: int, n_tr: int = 0, n_tc: int = 0, setup=None) -> float:
    """Runtime of ``job`` alone on a static cluster (nodes present before it starts)."""
    sim = Simulator(static_job_workload(job, cost, n_core, n_tr, n_tc))
    if setup is not None:
        setup(sim)
    sim.run()
    j = sim.done_jobs[0]
    return j.end - j.submit


def _job(cost: CostModel, seed: int, app: str, input_bytes: float, maps: int, reduces: int, salt: int = 0) -> JobSpec:
    rng = np.random.default_rng([seed, 500 + salt])
    return make_job(cost, rng, 0, "C1", app, input_bytes, maps, reduces, 0.0)


def s2_0() -> dict[str, float]:
    """S-2.0: the ch. 2 contention model (exact)."""
    c = transient_write_contention(10, 30, 50.0)
    return {"D_t_Gb": c.output_on_transient_gb, "T_t_s": c.transfer_s, "T_w_s": c.write_s}


def s2_1(seeds: Sequence[int] = SEEDS) -> dict[str, dict[int, float]]:
    """S-2.1: speedup of type-0 WC (1 reduce) and ST (144 reduces) on N = 10..40 core nodes vs 10."""
    out = {}
    for app, reduces in (("wordcount", 1), ("sort", 144)):
        sp = {n: [] for n in (10, 20, 30, 40)}
        for seed in seeds:
            job = _job(CH2_COST, seed, app, 100 * GB, 800, reduces, 1)
            base = run_static(job, CH2_COST, 10)
            for n in sp:
                sp[n].append(base / run_static(job, CH2_COST, n))
        out[app] = {n: statistics.fmean(v) for n, v in sp.items()}
    return out


def _transient_ratios(app: str, size: float, maps: int, reduces: int, seeds: Sequence[int]) -> dict[int, float]:
    ratios = {nt: [] for nt in (0, 10, 20, 30)}
    for seed in seeds:
        job = _job(CH2_COST, seed, app, size, maps, reduces, 2)
        base = run_static(job, CH2_COST, 40)
        for nt in ratios:
            ratios[nt].append(run_static(job, CH2_COST, 40 - nt, n_tr=nt) / base)
    return {nt: statistics.fmean(v) for nt, v in ratios.items()}


def s2_2(seeds: Sequence[int] = SEEDS) -> dict[int, float]:
    """S-2.2: WC type 2 (40 GB, 320 maps, 1 reduce) on 40 nodes with n_t TR nodes: runtime / runtime(0)."""
    return _transient_ratios("wordcount", 40 * GB, 320, 1, seeds)


def s2_3(seeds: Sequence[int] = SEEDS) -> dict[int, float]:
    """S-2.3: ST type 1 (50 GB, 400 maps, 144 reduces), same configurations."""
    return _transient_ratios("sort", 50 * GB, 400, 144, seeds)


#: Table 3.1 applications at their input sizes
TABLE_3_1 = {"wordcount": 200, "sort": 200, "pagerank": 50, "kmeans": 70, "trackerovertime": 100, "activehashes": 100}


def _ch3_job(app: str, gb: float, seed: int, salt: int) -> JobSpec:
    maps = int(gb * GB // BLOCK)
    return _job(CH3_COST, seed, app, gb * GB, maps, max(1, maps // 10), salt)


def s3_1(seeds: Sequence[int] = SEEDS) -> dict[str, dict[str, float]]:
    """S-3.1: overhead of 10C+10TR and 10C+10TC against 20 core nodes, per Table 3.1 app."""
    out = {}
    for app, gb in TABLE_3_1.items():
        tr, tc = [], []
        for seed in seeds:
            job = _ch3_job(app, gb, seed, 3)
            base = run_static(job, CH3_COST, 20)
            tr.append(run_static(job, CH3_COST, 10, n_tr=10) / base - 1)
            tc.append(run_static(job, CH3_COST, 10, n_tc=10) / base - 1)
        out[app] = {"TR": statistics.fmean(tr), "TC": statistics.fmean(tc)}
    return out


def s3_3(seeds: Sequence[int] = SEEDS, apps: Sequence[str] = ("wordcount", "sort", "pagerank", "kmeans"),
         xs: Sequence[int] = (0, 5, 10, 15, 20)) -> dict[str, dict[str, dict[int, float]]]:
    """S-3.3: speedup of 20 core nodes grown by x TR or TC nodes (added before the job starts)."""
    out = {}
    for app in apps:
        res = {"TR": {x: [] for x in xs}, "TC": {x: [] for x in xs}}
        for seed in seeds:
            job = _ch3_job(app, TABLE_3_1[app], seed, 4)
            base = run_static(job, CH3_COST, 20)
            for x in xs:
                res["TR"][x].append(base / run_static(job, CH3_COST, 20, n_tr=x))
                res["TC"][x].append(base / run_static(job, CH3_COST, 20, n_tc=x))
        out[app] = {k: {x: statistics.fmean(v) for x, v in d.items()} for k, d in res.items()}
    return out


def s3_4a(ns: Sequence[int] = (10, 20, 40), per_node_bytes: float = 10 * GB,
          cost: CostModel = CH3_COST) -> dict[int, dict[int, float]]:
    """S-3.4(a): per-node DP removal time [s] of k TC nodes (10 GB each) from N nodes (20 % core), no jobs."""
    out = {}
    for n in ns:
        core = max(1, n // 5)
        out[n] = {k: cost.removal_time(k * per_node_bytes, k, n) / k for k in range(1, n - core + 1)}
    return out


def s3_4b(seeds: Sequence[int] = SEEDS, ks: Sequence[int] = (0, 2, 5, 8, 10),
          apps: Sequence[str] = ("wordcount", "sort", "trackerovertime", "pagerank")) -> dict[str, dict[int, float]]:
    """S-3.4(b): slowdown of a job on 10 core + 10 TC when k TC nodes are removed (DP) as it starts.

    Worst case of the thesis: the TC nodes hold as much data as the core nodes
    (dataset x 3 replicas / 20 nodes each).
    """
    out = {}
    for app in apps:
        gb = TABLE_3_1[app]
        res = {k: [] for k in ks}
        for seed in seeds:
            job = _ch3_job(app, gb, seed, 5)
            base = run_static(job, CH3_COST, 10, n_tc=10)
            for k in ks:
                res[k].append(run_static(job, CH3_COST, 10, n_tc=10, setup=_dp_remover(k, gb * GB * 3 / 20)) / base)
        out[app] = {k: statistics.fmean(v) for k, v in res.items()}
    return out


def _dp_remover(k: int, stored: float):
    def setup(sim: Simulator) -> None:
        def remove(sim: Simulator, now: float) -> None:
            c = next(iter(sim.clusters.values()))
            tcs = [n for n in c.nodes.values() if n.role is Role.TC][:k]
            for n in tcs:
                n.stored = stored
            sim.shrink(Plan(shrinks=tuple(Shrink(c.name, n.host, Role.TC, ShrinkMode.DP) for n in tcs)), now)
        if k:
            sim.at(1.0, remove)
    return setup


def linear_r2(xs: Sequence[float], ys: Sequence[float]) -> float:
    a, b = np.polyfit(xs, ys, 1)
    pred = np.polyval([a, b], xs)
    ss_res = float(np.sum((np.asarray(ys) - pred) ** 2))
    ss_tot = float(np.sum((np.asarray(ys) - np.mean(ys)) ** 2))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


#: Table 5.2 (10 nodes x (6 map + 2 reduce)): app, maps, reduces, job size [s], SIM [s]
TABLE_5_2 = (("grep", 2, 1, 63.14, 36.10), ("sort", 4, 1, 60.20, 32.70), ("wordcount", 4, 1, 126.14, 42.04),
             ("grep", 50, 5, 155.32, 42.83), ("wordcount", 100, 10, 3790.46, 86.80),
             ("sort", 200, 20, 5194.64, 149.92), ("grep", 400, 40, 15697.18, 233.63),
             ("wordcount", 600, 60, 26662.53, 579.73))


def calibration(seed: int = 1) -> list[dict[str, float]]:
    """B.3 / B.5 item 6: replay each Table 5.2 job on 10 nodes with its measured job size.

    The job size (sum of task runtimes) is split over the tasks as the cost model splits a
    job of that shape (maps and reduces keep their model ratio), then the simulator's slot
    scheduling (slow-start, shuffle tail, 8 s overhead) gives the runtime to compare with
    the SIM column.  The model's own durations for a job of the same shape (128 MB splits
    for jobs with >= 50 maps; 32 MB splits for the tiny ones) are reported beside it.
    """
    rows = []
    rng = np.random.default_rng([seed, 52])
    for app, maps, reduces, size, sim_s in TABLE_5_2:
        split = BLOCK if maps >= 50 else 32 * 1024 * 1024
        prof = CH3_COST.profile(app)
        mm = CH3_COST.map_mean(prof, split)
        rm = CH3_COST.reduce_mean(prof, split * maps, reduces)
        scale = size / (maps * mm + reduces * rm)
        md, rd = CH3_COST.durations(prof, split * maps, maps, reduces, rng)
        job = JobSpec(0, "C1", prof.name, split * maps, maps, reduces, 0.0, tuple(x * scale for x in md),
                      tuple(x * scale for x in rd))
        replay = run_static(job, CH3_COST, 10)
        model = run_static(JobSpec(0, "C1", prof.name, split * maps, maps, reduces, 0.0, tuple(md), tuple(rd)),
                           CH3_COST, 10)
        rows.append({"app": app, "maps": maps, "reduces": reduces, "sim_s": sim_s, "replay_s": replay,
                     "replay_err": replay / sim_s - 1, "model_s": model, "model_err": model / sim_s - 1})
    return rows
