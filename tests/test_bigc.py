"""BIG-C's simulation checks (fawkes/seeds/bigc.py): the shrink model's costs on a micro case, and the
directions the spec expects (SIM-B1..B4); a direction our model does not reproduce is a
strict xfail whose reason is what we measured (docs/reproduction.md)."""

from __future__ import annotations

from functools import cache

import pytest

from fawkes.mechanism.model import Plan, Role, Shrink, ShrinkMode
from fawkes.seeds import bigc
from fawkes.sim.costs import GB, cost_model
from fawkes.sim.workloads import WorkloadCluster, JobSpec, Workload

SEEDS = [1, 2, 3]  # the seeds of docs/reproduction.md (fawkes simulate SIM-B1 --seeds 3)
M = bigc.ShrinkModel


def test_sim_b2_regrow_delay_lowers_short_queueing_and_killing_and_delays_long_jobs():
    out = bigc.sim_b2([1, 2, 3])
    assert [r["D"] for r in out["rows"]] == [0, 1, 2, 3, 4, 5]
    failed = [e for e, ok in out["expect"] if not ok]
    assert not failed, (failed, out["rows"])


def test_the_workload_has_its_burst_and_D_zero_is_the_default():
    quiet, high = bigc.bursts(1, "low"), bigc.bursts(1, "high")
    short = [j for j in high.jobs if j.cluster == "S"]
    in_burst = sum(1 for j in short if 300 <= j.submit_s < 700)
    assert in_burst > 3 * sum(1 for j in short if j.submit_s < 300)  # 90 % vs 20 % over 400 vs 300 s
    assert len(quiet.jobs) < len(high.jobs)
    assert bigc.run(1, "low") == bigc.run(1, "low", regrow_delay_ticks=0)


# --- the shrink model on a micro case: L holds a core and a TR node, 12 maps of 100 s (6 on each);
# the TR node is taken at t = 50 s; with a holder, S gets the host at 56 s and submits 12 maps of
# 10 s at 60 s (6 fit on its own core node)

def _micro(model: bigc.ShrinkModel, holder: bool = False):
    cost = cost_model((), map_slots=6, reduce_slots=2)
    jobs = [JobSpec(0, "L", "wordcount", 1 * GB, 12, 0, 0.0, map_d=(100.0,) * 12, red_d=())]
    clusters = [WorkloadCluster("L", 0.0, 1, static={Role.CORE: 1, Role.TR: 1})]
    if holder:
        jobs.append(JobSpec(1, "S", "wordcount", 1 * GB, 12, 0, 60.0, map_d=(10.0,) * 12, red_d=()))
        clusters.append(WorkloadCluster("S", 0.0, 1, static={Role.CORE: 1}))
    wl = Workload("micro", tuple(clusters), tuple(jobs), len(clusters) + 1, controller="static", cost=cost)
    sim = bigc.BigCSimulator(wl, None, model)
    host = []

    def take(s, t):
        tr = next(n for n in s.clusters["L"].nodes.values() if n.role is Role.TR)
        host.append(tr.host)
        s.shrink(Plan(shrinks=(Shrink("L", tr.host, Role.TR, ShrinkMode.FP),)), t)
    sim.at(50.0, take)
    if holder:
        sim.at(56.0, lambda s, t: s._grow(s.clusters["S"], host[0], Role.TR, t, ready_now=True))
    sim.run()
    for c in sim.clusters.values():  # every slot kept from a holder was given back
        assert c.free_map == sum(n.free_map for n in c.nodes.values()) == cost.map_slots * len(c.nodes)
    assert not sim.left and not sim.withheld or all(v == [0, 0] for v in sim.withheld.values())
    return {j.spec.cluster: j.end for j in sim.done_jobs}, sim.stats.killed_tasks, sim.stats.wasted_s


def test_kill_loses_the_work_graceful_keeps_it_suspend_pays_swap_and_reload():
    overhead = 8.0  # the cost model's job overhead
    # kill: 6 maps killed at 50 s (300 slot-s lost), re-run on the core node after its own maps (100-200 s)
    assert _micro(M("kill")) == ({"L": 200.0 + overhead}, 6, 300.0)
    # graceful: the taken node's maps finish where they run
    assert _micro(M("graceful")) == ({"L": 100.0 + overhead}, 0, 0.0)
    # graceful whose timeout comes first: the rest is killed at 80 s (FP), re-run at 100 s
    assert _micro(M("graceful", timeout_s=30.0)) == ({"L": 200.0 + overhead}, 6, 480.0)
    # suspend: frozen at 50 s with 50 s left; 6 x 2 GB swapped out at 3 s/GB (86 s); the host is free, so
    # the third round in a row that finds it so (92 s: BIG-C's D = 3) resumes them after reloading at twice
    # that (72 s): 164 + 50 s
    assert _micro(M("suspend")) == ({"L": 214.0 + overhead}, 0, 0.0)
    # GP without a holder that wants the slots: nothing is reclaimed
    assert _micro(M("graceful", step=2)) == ({"L": 100.0 + overhead}, 0, 0.0)


def test_with_a_holder_graceful_in_steps_hands_slots_over_sooner_than_a_decommission():
    kill, _, _ = _micro(M("kill"), holder=True)
    drain, k_drain, _ = _micro(M("graceful"), holder=True)
    gp2, k2, _ = _micro(M("graceful", step=2), holder=True)
    gp8, k8, _ = _micro(M("graceful", step=8), holder=True)
    ip, k_ip, _ = _micro(M("suspend"), holder=True)
    assert k_drain == k2 == k8 == k_ip == 0
    # S: all 12 maps at once with kill (78 s); the decommission gives the host's slots only at 100 s, so
    # S's second wave runs on its core node (88 s); GP hands over 2 or 8 slots a round (86 s, 80 s)
    assert kill["S"] < gp8["S"] < gp2["S"] < drain["S"] == 88.0
    # L: the decommission costs it nothing here; the steps slow, then freeze its maps; kill re-runs them
    assert drain["L"] < gp8["L"] <= gp2["L"] < kill["L"]
    # suspend: S waits for the swap-out (36 s) and runs its second wave on its core node meanwhile
    assert ip["S"] == 88.0 and ip["L"] > gp2["L"]


def test_shrink_model_refuses_what_it_does_not_know():
    with pytest.raises(ValueError, match="shrink mode"):
        M("drain")
    with pytest.raises(ValueError, match="step"):
        M("graceful", step=-1)


def test_the_kill_model_is_the_engine_itself():
    plain = bigc.run(1, "high")
    killed = bigc.run(1, "high", M("kill"))
    assert {k: v for k, v in killed.items() if k in plain} == plain


# --- SIM-B1 and SIM-B3: the spec's directions, asserted one by one ---------------------------------

@cache
def _b1():
    return dict(bigc.sim_b1(SEEDS)["expect"])


@cache
def _b3():
    return dict(bigc.sim_b3(SEEDS)["expect"])


def _xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


B1 = [
    "FIFO worst for S: the highest S mean queueing delay of BIG-C's arms under every burst",
    "FIFO best for L: the lowest L p90 JCT of BIG-C's arms under every burst",
    "kill near-best for S: its S mean queueing within 10 % (or 1 s) of the best preemptive arm's, every burst",
    "kill costs L: its L p90 JCT above FIFO's under every burst",
    pytest.param("GP costs L less than kill: its L p90 JCT below kill's under every burst", marks=_xfail(
        "measured (seeds 1-3): below only under high (1565 vs 1583 s); under low 1304 vs 1274 s and multi 1572 vs "
        "1554 s: GP's frozen maps keep their work but wait for their own host, while kill re-runs them at once "
        "wherever L has a free slot; with maps of 600 s and bursts of 400 s the two costs are about even (holds on "
        "the Spark-like model, where a kill also loses the node's shuffle output: tests/test_seeds_spark_model.py)")),
    "GP ahead of IP for S: its S mean queueing at most IP's under every burst",
    "IP and GP kill no task of L (BIG-C: they caused no failures)",
    "the reserve best for S under low load",
    "the reserve degrades for S under high load: its S mean queueing above kill's",
    pytest.param("IP worst for L under low load: the highest L p90 JCT of BIG-C's arms", marks=_xfail(
        "measured (seeds 1-3): IP's L p90 under low load (1365 s) is the worst of the preemptive arms (kill 1274, "
        "GP 1304 s) but the reserve's is worse (1630 s); our L is MR-like (independent maps): a frozen map does "
        "not stall its siblings as a suspended Spark executor does")),
    pytest.param("the reserve beats kill and IP for L: its L p90 JCT below theirs under every burst", marks=_xfail(
        "measured (seeds 1-3): the reserve's L p90 is 1630 s under every burst (L never holds more than 40 % of "
        "the pool and offers about 80 %), above kill's (1274 / 1583 / 1554 s) and IP's (1365 / 1606 / 1599 s)")),
    "the reserve's utilisation below every preemptive arm's under every burst",
]


@pytest.mark.parametrize("statement", B1)
def test_sim_b1_direction(statement):
    got = _b1()
    assert set(got) == {p if isinstance(p, str) else p.values[0] for p in B1}
    assert got[statement], statement


B3 = [
    pytest.param("the CoV of L's JCT increases with the step (1 < 2 < 4 < 8, mean over the bursts)", marks=_xfail(
        "measured (seeds 1-3): the mean CoV is 0.154 / 0.159 / 0.158 / 0.160 at 1 / 2 / 4 / 8 slots a round: "
        "up from 1 to 2, flat after; a step only sets how fast a host's 6 map slots move (1 to 6 rounds of 3 s "
        "against maps of 600 s) and the model has no memory slack, so no step makes tasks swap earlier")),
    "the CoV of L's JCT at step 8 above step 1 under every burst",
    pytest.param("even the largest step varies less than kill (CoV at step 8 at most kill's, every burst)", marks=_xfail(
        "measured (seeds 1-3): kill's CoV is the lowest (0.149 / 0.136 / 0.144 vs 0.167 / 0.147 / 0.167 at step 8, "
        "low / high / multi): kill re-runs maps wherever L has slots, spreading the loss over L's jobs; GP's frozen "
        "maps wait for their own host, which delays some jobs much more than others")),
]


@pytest.mark.parametrize("statement", B3)
def test_sim_b3_direction(statement):
    got = _b3()
    assert set(got) == {p if isinstance(p, str) else p.values[0] for p in B3}
    assert got[statement], statement


@cache
def _b4():
    return dict(bigc.sim_b4([1])["expect"])  # one replay (2354 jobs over 3.8 h), as BIG-C ran one


B4 = [
    "short p95: GP < IP < kill",
    pytest.param("short p95: kill about the reserve's (within 25 %)", marks=_xfail(
        "measured (seed 1): kill 460 s, the reserve 261 s: S's 17 % fits in its reserved 60 % and never waits "
        "for a host, whereas under kill S waits for L's hosts at every rebalance")),
    "FIFO's short p90 the highest of every arm",
    pytest.param("GP's long p90 below kill's, IP's and the reserve's", marks=_xfail(
        "measured (seed 1): GP 3454 s, below IP (3911 s) and the reserve (12775 s) but above kill (3249 s): "
        "frozen maps of 560 s wait for their host to come back, killed ones re-run at once (holds on the Spark-like "
        "model: tests/test_seeds_spark_model.py)")),
    pytest.param("GP's long p90 within 10 % of FIFO's", marks=_xfail(
        "measured (seed 1): GP 3454 s vs FIFO 2124 s (+63 %): L offers 75 % of the slots and S 17 %, so every "
        "preemption delays an L job that has no idle capacity to catch up on")),
    pytest.param("the reserve's utilisation rarely above 60 % (under 10 % of the time)", marks=_xfail(
        "measured (seed 1): above 60 % in 11.5 % of the minutes (mean 53 %), a little more than the 10 % taken "
        "as 'rarely'; BIG-C: 'rarely used more than 60 %'")),
    pytest.param("kill and IP dip below 40 % utilisation (some of the time)", marks=_xfail(
        "measured (seed 1): never below 40 % after the first 10 minutes (kill mean 89 %, IP 92 %): our L is "
        "MR-like, no sibling task idles when one is killed or frozen, BIG-C's cause for the dips")),
]


@pytest.mark.parametrize("statement", B4)
def test_sim_b4_direction(statement):
    got = _b4()
    assert set(got) == {p if isinstance(p, str) else p.values[0] for p in B4}
    assert got[statement], statement


def test_the_trace_like_replay_has_the_papers_shape():
    wl = bigc.trace_like(1)
    long_ = [j for j in wl.jobs if j.cluster == "L"]
    short = [j for j in wl.jobs if j.cluster == "S"]
    assert len(long_) == 182 and 1900 <= len(short) <= 2400
    assert max(j.submit_s for j in wl.jobs) < bigc.TRACE_HORIZON
    spike = sum(1 for j in short if bigc.TRACE_SPIKE[0] <= j.submit_s < bigc.TRACE_SPIKE[1])
    before = sum(1 for j in short if bigc.TRACE_SPIKE[0] - 600 <= j.submit_s < bigc.TRACE_SPIKE[0])
    assert spike > 4 * before  # 95 % vs 17 % of the map slots over ten minutes each


def test_simulate_lists_the_checks_and_refuses_options_they_do_not_take():
    import subprocess
    import sys

    def fawkes(*args):
        return subprocess.run([sys.executable, "-m", "fawkes", "simulate", *args], capture_output=True, text=True,
                              timeout=600)

    r = fawkes("--list")
    assert r.returncode == 0 and "\nD " in r.stdout
    for name in ("SIM-B1", "SIM-B2", "SIM-B3", "SIM-B4"):
        assert name in r.stdout
    r = fawkes("SIM-B2", "--set", "tau=1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--set" in r.stderr
    r = fawkes("--list", "D")
    assert r.returncode == 2 and "--list" in r.stderr
