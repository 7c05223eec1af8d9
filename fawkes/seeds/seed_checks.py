"""The supporting seeds' simulation checks as named experiments of ``fawkes simulate``:
SIM-P1..P3 (the YARN placement project, :mod:`fawkes.seeds.racks`), SIM-U1..U4 (UBIS,
:mod:`fawkes.seeds.slack`), SIM-U7 (UBIS U-7, ours: :mod:`fawkes.seeds.usage_signal`), SIM-B1..B4 (BIG-C, :mod:`fawkes.seeds.bigc`) and SIM-C1,
SIM-C2 (CERES, :mod:`fawkes.seeds.ceres`).  Each returns rows of figures beside the paper's, and ``expect``: the
direction the spec expects, as a list of (statement, holds) pairs (``tests/test_seed_checks.py``
asserts them).
"""

from __future__ import annotations

import inspect

from collections.abc import Callable
from statistics import mean
from typing import Any

from fawkes.seeds import bigc, ceres, racks, slack, usage_signal

Result = dict[str, Any]


def sim_p1(seeds: list[int]) -> Result:
    """GPU-/MPI-like gang jobs on 4 racks x 4 machines, load 0.6, 1.3x slower off the preferred rack."""
    res = {}
    for pol in ("NONE", "HETERGEN", "SJF"):
        res[pol] = mean(racks.simulate_racks(racks.mixed_jobs(s, 400, racks=4, per_rack=4, rho=0.6, penalty=1.3),
                                             4, 4, pol, seed=s).mean_completion() for s in seeds)
    none = res["NONE"]
    rows = [{"policy": p, "mean_completion_s": round(v, 2), "vs_NONE_pct": round(100 * (v / none - 1), 1)}
            for p, v in res.items()]
    paper = {"NONE": [122.319, 188.855, 659.6147], "HETERGEN": [97.874, 147.258, 431.45166],
             "SJF": [97.70, 146.33, 417.34616], "note": "vs NONE: HETERGEN -20.0/-22.0/-34.6 %, SJF -20.1/-22.5/-36.7 %"}
    expect = [("HETERGEN below NONE", res["HETERGEN"] < none), ("SJF below NONE", res["SJF"] < none),
              ("SJF <= HETERGEN", res["SJF"] <= res["HETERGEN"])]
    return {"rows": rows, "paper": paper, "expect": expect}


def sim_p2(seeds: list[int]) -> Result:
    """MPI-like gangs (all k on one rack), maxT 600 s: 6 racks at load 0.7 vs 4 racks at load 0.8."""
    rows = []
    got: dict[tuple[str, str], tuple[float, float]] = {}
    for label, n_racks, rho in (("low (6 racks, rho 0.7)", 6, 0.7), ("high (4 racks, rho 0.8)", 4, 0.8)):
        for pol in ("HARD", "SOFT", "NONE"):
            runs = [racks.simulate_racks(racks.mixed_jobs(s, 400, racks=n_racks, per_rack=4, rho=rho, penalty=1.3,
                                                          mpi_share=1.0, max_t=600.0), n_racks, 4, pol, seed=s)
                    for s in seeds]
            m, u = mean(r.mean_completion() for r in runs), mean(r.total_utility() for r in runs)
            got[(label, pol)] = (m, u)
            rows.append({"contention": label, "policy": pol, "mean_completion_s": round(m, 2), "total_utility": round(u)})
    lo, hi = "low (6 racks, rho 0.7)", "high (4 racks, rho 0.8)"
    paper = {"c2x6-rho0.70": {"HARD": [378.688, 28745.916], "SOFT": [379.80, 28706.95], "NONE": [519.20, 23827.83]},
             "c2x4-rho0.80": {"HARD": [529.429, 38893.116], "SOFT": [396.01, 46631.29], "NONE": [887.16, 18144.56]}}
    gap_lo = got[(lo, "HARD")][0] / got[(lo, "SOFT")][0] - 1
    gap_hi = got[(hi, "HARD")][0] / got[(hi, "SOFT")][0] - 1
    expect = [("NONE worst at both loads", all(got[(c, "NONE")][0] > max(got[(c, "HARD")][0], got[(c, "SOFT")][0])
                                                  for c in (lo, hi))),
              ("SOFT better than HARD at high contention", got[(hi, "SOFT")][0] < got[(hi, "HARD")][0]),
              ("SOFT's edge over HARD larger at high contention than at low", gap_hi > gap_lo),
              ("SOFT more utility than HARD at high contention", got[(hi, "SOFT")][1] > got[(hi, "HARD")][1])]
    return {"rows": rows, "paper": paper, "expect": expect,
            "note": f"HARD vs SOFT mean completion: low +{100 * gap_lo:.1f} %, high +{100 * gap_hi:.1f} % (paper: -0.3 %, +33.7 %)"}


def sim_p3(seeds: list[int]) -> Result:
    """The designed trace: 16 long jobs (k 4, 315/345 s) over [0, 75] s on 4 racks x 4 machines,
    a short jobK (67/78 s) at t = 1000 s, maxT 1200 s; HETERGEN with and without the purge."""
    rows = []
    got = {}
    for purge in (True, False):
        r = racks.simulate_racks(racks.designed_trace(), 4, 4, "HETERGEN", purge=purge)
        k = r.outcomes["jobK"]
        got[purge] = (k.completion(1200.0), r.mean_completion(), r.total_utility())
        rows.append({"purge": purge, "jobK_T_s": round(got[purge][0], 2), "E_T_s": round(got[purge][1], 3),
                     "total_utility": round(got[purge][2], 3), "finished": r.count("finished"),
                     "killed": r.count("killed"), "purged": r.count("purged")})
    paper = {"purge": {"jobK_T_s": 83.41, "E_T_s": 814.277, "total_utility": 6557.283},
             "no purge": {"jobK_T_s": 335.49, "E_T_s": 825.817, "total_utility": 6361.113}}
    expect = [("jobK sooner with the purge", got[True][0] < got[False][0] / 2),
              ("E[T] lower with the purge", got[True][1] < got[False][1]),
              ("total utility higher with the purge", got[True][2] > got[False][2])]
    return {"rows": rows, "paper": paper, "expect": expect}


def sim_u1(seeds: list[int]) -> Result:
    """UBIS Fig. 3 toy: 3 tasks of 2t, a regular slot freed every t; an opportunistic start at 1.5t."""
    return slack.sim_u1()


def sim_u2(seeds: list[int]) -> Result:
    """UBIS sensitivity: 1 node (64 cores / 130 GB), 315 x 1 min tasks; T_alloc and T_preempt sweeps."""
    return slack.sim_u2()


def sim_u3(seeds: list[int]) -> Result:
    """UBIS makespan: 19 nodes x 56 slots, three pipelines at about half their peak; T_alloc sweep."""
    return slack.sim_u3(seeds)


def sim_u4(seeds: list[int]) -> Result:
    """UBIS robustness: terasort at 16 % CPU, T_alloc 0.2 vs 0.8, with and without a small job."""
    return slack.sim_u4(seeds)


CHECKS: dict[str, Callable[[list[int]], Result]] = {
    "SIM-P1": sim_p1, "SIM-P2": sim_p2, "SIM-P3": sim_p3,
    "SIM-U1": sim_u1, "SIM-U2": sim_u2, "SIM-U3": sim_u3, "SIM-U4": sim_u4,
    **usage_signal.CHECKS,
    **bigc.CHECKS,
    **ceres.CHECKS,
}


def check_name(name: str) -> str | None:
    """The canonical name of a seed check (case-insensitive), None if ``name`` is none."""
    return next((k for k in CHECKS if k.lower() == name.lower()), None)


def takes_job_model(name: str) -> bool:
    """Whether the check runs on the simulator's job model (SIM-B1..B4, SIM-C1, SIM-C2)."""
    return "job_model" in inspect.signature(CHECKS[name]).parameters


def run_check(name: str, seeds: list[int], job_model: str | None = None) -> Result:
    out = CHECKS[name](seeds, job_model) if job_model is not None else CHECKS[name](seeds)
    if job_model is not None:
        out["job_model"] = job_model
    out["check"] = name
    out["expect"] = [{"expected": e, "holds": bool(ok)} for e, ok in out["expect"]]
    return out


def describe(name: str) -> str:
    """The first line of a check's docstring."""
    doc = (CHECKS[name].__doc__ or "").strip()
    return doc.splitlines()[0] if doc else f"the supporting seed check {name}"
