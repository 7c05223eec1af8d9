"""BIG-C's and CERES' checks on the Spark-like job model (fawkes/sim/stages.py): every direction of
SIM-B1, SIM-B4, SIM-C1 and SIM-C2 asserted, or a strict xfail whose reason is what the model measured
(bench/results/seed_checks_spark_2026-11-27.json; docs/reproduction.md, the Spark-like column).
SIM-B2 and SIM-B3 on this model are in that file, not asserted here (their runs take minutes)."""

from __future__ import annotations

from functools import cache

import pytest

from fawkes.seeds import bigc, ceres

SEEDS = [1, 2, 3]


@cache
def _expect(check: str) -> dict[str, bool]:
    fn = {"B1": bigc.sim_b1, "B4": bigc.sim_b4, "C1": ceres.sim_c1, "C2": ceres.sim_c2}[check]
    return dict(fn([1] if check == "B4" else SEEDS, job_model="spark")["expect"])


def _xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


def _names(params) -> set[str]:
    return {p if isinstance(p, str) else p.values[0] for p in params}


B1 = [
    pytest.param("FIFO worst for S: the highest S mean queueing delay of BIG-C's arms under every burst", marks=_xfail(
        "measured (seeds 1-3): under high the reserve's S mean queueing (227.3 s) is above FIFO's (213.0 s): S's "
        "90 % burst does not fit in its 40 %, and its own jobs' executors are held at their stage tails")),
    "FIFO best for L: the lowest L p90 JCT of BIG-C's arms under every burst",
    "kill near-best for S: its S mean queueing within 10 % (or 1 s) of the best preemptive arm's, every burst",
    "kill costs L: its L p90 JCT above FIFO's under every burst",
    # an xfail on the MR model: a killed Spark task loses its node's shuffle output too (L re-runs maps)
    "GP costs L less than kill: its L p90 JCT below kill's under every burst",
    "GP ahead of IP for S: its S mean queueing at most IP's under every burst",
    "IP and GP kill no task of L (BIG-C: they caused no failures)",
    "the reserve best for S under low load",
    "the reserve degrades for S under high load: its S mean queueing above kill's",
    pytest.param("IP worst for L under low load: the highest L p90 JCT of BIG-C's arms", marks=_xfail(
        "measured (seeds 1-3): under low IP's L p90 (1504 s) is below kill's (1703 s, shuffle output lost with "
        "the killed nodes) and the reserve's (1815 s): a suspended task stalls its stage, but kill costs more")),
    pytest.param("the reserve beats kill and IP for L: its L p90 JCT below theirs under every burst", marks=_xfail(
        "measured (seeds 1-3): only under high (1815 vs kill 1867, IP 1823 s); under low and multi kill (1703, "
        "1726 s) and IP (1504, 1714 s) are below the reserve's 1815 s: L holds at most 40 % of the pool")),
    "the reserve's utilisation below every preemptive arm's under every burst",
]


@pytest.mark.parametrize("statement", B1)
def test_sim_b1_on_the_spark_model(statement):
    got = _expect("B1")
    assert set(got) == _names(B1)
    assert got[statement], statement


B4 = [
    pytest.param("short p95: GP < IP < kill", marks=_xfail(
        "measured (seed 1): GP 957 s, IP 953 s, kill 1178 s: GP and IP about even, both below kill")),
    pytest.param("short p95: kill about the reserve's (within 25 %)", marks=_xfail(
        "measured (seed 1): kill 1178 s, the reserve 608 s")),
    pytest.param("FIFO's short p90 the highest of every arm", marks=_xfail(
        "measured (seed 1): FIFO 811 s, below kill 1031, IP 834 and GP 828 s")),
    # an xfail on the MR model: GP's frozen tasks keep their work and their shuffle output
    "GP's long p90 below kill's, IP's and the reserve's",
    pytest.param("GP's long p90 within 10 % of FIFO's", marks=_xfail(
        "measured (seed 1): GP 5745 s vs FIFO 4392 s (+31 %)")),
    pytest.param("the reserve's utilisation rarely above 60 % (under 10 % of the time)", marks=_xfail(
        "measured (seed 1): above 60 % in 28.9 % of the minutes (mean 57 %)")),
    pytest.param("kill and IP dip below 40 % utilisation (some of the time)", marks=_xfail(
        "measured (seed 1): never below 40 % after the first 10 minutes (kill and IP mean 84 % and 83 %): held "
        "executors idle only until their stage ends or for 60 s, and L's backlog fills every core again")),
]


@pytest.mark.parametrize("statement", B4)
def test_sim_b4_on_the_spark_model(statement):
    got = _expect("B4")
    assert set(got) == _names(B4)
    assert got[statement], statement


C1 = [
    "BIG-C-like kills fewer tasks than TD's full kill",
    pytest.param("fewer preemptions (tasks killed) with CERES than BIG-C-like (D=3)", marks=_xfail(
        "measured (seeds 1-3): 222.0 vs 220.7 tasks killed (+0.6 %): C-1 reclaims idle nodes only, which the "
        "plan takes first anyway (whole nodes)")),
    "fewer preemptions (tasks killed) with CERES than BIG-C-like (D=0)",
    pytest.param("the latency cluster's p95 running time lower with CERES than BIG-C-like (D=3)", marks=_xfail(
        "measured (seeds 1-3): 36.6 s in both arms (+0.1 %)")),
    # an xfail on the MR model; here by 0.1 s (108.9 vs 109.0 s, -0.1 %): a tie, not CERES' -16.9 %
    "the latency cluster's mean scheduling latency lower with CERES than BIG-C-like (D=3)",
]


@pytest.mark.parametrize("statement", C1)
def test_sim_c1_on_the_spark_model(statement):
    got = _expect("C1")
    assert set(got) == _names(C1)
    assert got[statement], statement


C2 = [
    "S's p95 running time lower with C-2 when idle capacity waits (tau 1000)",
    "S's p99 running time lower with C-2 when idle capacity waits (tau 1000)",
    pytest.param("S's p95 running time lower with C-2 at tau 100", marks=_xfail(
        "measured (seeds 1-3): 81.6 s with and without C-2: TD hands every free host out at the next tick, no "
        "idle capacity is left for C-2 (as on the MR model)")),
    "C-2 never makes S's p95 worse",
]


@pytest.mark.parametrize("statement", C2)
def test_sim_c2_on_the_spark_model(statement):
    got = _expect("C2")
    assert set(got) == _names(C2)
    assert got[statement], statement
