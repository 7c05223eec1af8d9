"""The supporting seeds' simulation checks (SIM-P1..P3, SIM-U1..U4, issue 12): the directions the spec
expects, and SIM-U1 exactly; the pure placement and opportunistic decisions they run on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fawkes.mechanism import opportunistic as opp
from fawkes.mechanism.placement import place, preferred_racks
from fawkes.seeds import seed_checks, slack

RACKS = {"a1": "r0", "a2": "r0", "b1": "r1", "b2": "r1", "b3": "r1", "c1": "r2"}


# --- placement (P-1) ---------------------------------------------------------------------------------

def test_preferred_racks_are_those_of_the_core_nodes():
    assert preferred_racks(["a1", "b2", "zz"], RACKS) == {"r0", "r1"}


def test_modes_none_hard_soft_and_the_wait_or_go_rule():
    free = ["c1", "b1", "a1"]  # placement order
    pref = frozenset({"r0"})
    assert place(1, free, RACKS, pref, "none").hosts == ("c1",)
    assert place(1, free, RACKS, pref, "soft").hosts == ("a1",)  # preferred first when enough are free
    hard = place(2, free, RACKS, pref, "hard")
    assert hard.wait and hard.hosts == ()
    # soft: W + fast < slow -> wait; otherwise go now, preferred hosts first
    wait = place(2, free, RACKS, pref, "soft", dur_fast=100.0, locality_penalty=1.5, wait_s=30.0)
    assert wait.wait and "wait 30 s + 100 s < 150 s" in wait.reason
    go = place(2, free, RACKS, pref, "soft", dur_fast=100.0, locality_penalty=1.5, wait_s=60.0)
    assert not go.wait and go.hosts == ("a1", "c1") and not go.preferred
    unknown = place(2, free, RACKS, pref, "soft", dur_fast=100.0, locality_penalty=1.5, wait_s=None)
    assert not unknown.wait  # an unforeseeable wait never justifies waiting


def test_same_rack_gangs():
    free = ["a1", "b1", "b2", "b3", "c1"]
    every = frozenset({"r0", "r1", "r2"})
    p = place(3, free, RACKS, every, "soft", same_rack=True)
    assert p.hosts == ("b1", "b2", "b3") and p.preferred
    spread = place(3, ["a1", "b1", "c1"], RACKS, every, "none", same_rack=True)
    assert not spread.preferred  # three racks: not a same-rack gang


# --- opportunistic decisions (U-1..U-4) -------------------------------------------------------------

def test_room_watchdog_victims_accept():
    cap = {"cpu": 10.0, "mem": 100.0}
    assert opp.room(10.0, 4.0, 0.9) == 5.0 and opp.room(10.0, 9.5, 0.9) == 0.0
    assert opp.fits({"cpu": 1.0, "mem": 2.0}, cap, {"cpu": 4.0, "mem": 80.0}, 0.9, {"mem": 8.0})
    assert not opp.fits({"cpu": 1.0, "mem": 2.0}, cap, {"cpu": 4.0, "mem": 80.0}, 0.9, {"mem": 8.5})
    streak, fire = 0, False
    for _ in range(2):
        streak, fire = opp.watchdog(streak, {"cpu": 9.95}, cap)
    assert (streak, fire) == (2, False)
    assert opp.watchdog(streak, {"cpu": 9.95}, cap) == (0, True)  # the third check in a row
    assert opp.watchdog(2, {"cpu": 5.0}, cap) == (0, False)  # back under: the streak restarts
    assert opp.victims([("old", {"mem": 10.0}), ("new", {"mem": 10.0})], {"mem": 99.0}, cap) == ["new"]
    assert opp.accepts("maps_only", "map") and not opp.accepts("maps_only", "reduce")
    assert not opp.accepts("refuse", "map") and opp.accepts("accept", "reduce")
    assert opp.promote(["o1", "o2", "o3"], 2) == ["o1", "o2"]


# --- the checks ----------------------------------------------------------------------------------------

def test_sim_u1_is_exact_3_5t_instead_of_4t():
    t = 10.0
    assert slack.toy(False).makespan == 4 * t
    run = slack.toy(True)
    assert run.makespan == 3.5 * t
    assert run.opportunistic_tasks == 1 and run.promotions == 1 and run.preemptions == 0
    assert slack.toy(True, contention=True).makespan == pytest.approx(3.525 * t)


def _holds(result, statement):
    return next(e for e in result["expect"] if e["expected"] == statement)["holds"]


def test_sim_p1_preference_aware_policies_beat_none():
    r = seed_checks.run_check("SIM-P1", [1, 2])
    for e in r["expect"]:
        assert e["holds"], e
    pct = {row["policy"]: row["vs_NONE_pct"] for row in r["rows"]}
    assert pct["HETERGEN"] < -15 and pct["SJF"] < -15


def test_sim_p2_soft_beats_hard_under_contention_none_worst():
    r = seed_checks.run_check("SIM-P2", [1, 2])
    for e in r["expect"]:
        assert e["holds"], e


def test_sim_p3_the_purge_lets_the_short_job_run_at_once():
    r = seed_checks.run_check("SIM-P3", [1])
    for e in r["expect"]:
        assert e["holds"], e
    by = {row["purge"]: row for row in r["rows"]}
    assert by[True]["purged"] > 0 and by[False]["purged"] == 0 and by[False]["killed"] > 0


@pytest.fixture(scope="module")
def u2():
    return seed_checks.run_check("SIM-U2", [1])


@pytest.mark.parametrize("statement", ["no preemption for the flat Sleep job", "G-Sleep (99 %) preempted most at T_alloc 0.9",
                                       "preemptions do not rise with T_preempt at T_alloc 0.8"])
def test_sim_u2_preemption_trends(u2, statement):
    assert _holds(u2, statement)


@pytest.mark.xfail(strict=True, reason="the opportunistic share of the growing-memory jobs falls at high T_alloc: "
                   "their opportunistic tasks are preempted before they finish (docs/reproduction.md)")
def test_sim_u2_share_rises_with_t_alloc(u2):
    assert _holds(u2, "opportunistic share does not fall as T_alloc rises (every profile)")


@pytest.fixture(scope="module")
def u3():
    return slack.sim_u3([1], scale=0.2)


def test_sim_u3_makespan_gain_rises_with_t_alloc(u3):
    got = dict(u3["expect"])
    assert got["opportunistic capacity shortens the makespan at T_alloc 0.9"]
    assert got["the gain peaks at T_alloc 0.8-0.95, not at 0.5"] and got["the gain at 0.9 above the gain at 0.5"]
    det = [r["task_duration_deterioration_pct"] for r in u3["rows"] if isinstance(r["t_alloc"], float)]  # the sweep
    assert det == sorted(det) and det[-1] > det[0]  # task durations deteriorate as T_alloc rises


@pytest.mark.xfail(strict=True, reason="no dip at 0.95 in this model: preemptions rise but the gain still grows")
def test_sim_u3_gain_dips_at_0_95(u3):
    assert dict(u3["expect"])["the gain dips from 0.9 to 0.95"]


@pytest.fixture(scope="module")
def u4():
    return seed_checks.run_check("SIM-U4", [1])


@pytest.mark.parametrize("statement", ["T_alloc at mean use: (almost) no opportunistic tasks",
                                       "T_alloc at mean use: (almost) no speedup", "T_alloc 0.8: a real speedup"])
def test_sim_u4_robustness(u4, statement):
    assert _holds(u4, statement)


@pytest.mark.xfail(strict=True, reason="the small co-running job does not lower terasort's gain in this model")
def test_sim_u4_small_job_lowers_the_gain(u4):
    assert _holds(u4, "a co-running small job lowers TS's speedup")


def test_named_experiments_on_the_cli():
    def fawkes(*args):
        return subprocess.run([sys.executable, "-m", "fawkes", "simulate", *args], capture_output=True, text=True,
                              timeout=300)
    r = fawkes("sim-u1", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["check"] == "SIM-U1" and [row["job_end_t"] for row in out["rows"]][:2] == [4.0, 3.5]
    table = fawkes("SIM-P3")
    assert table.returncode == 0 and "[holds] jobK sooner with the purge" in table.stdout
    for bad, msg in ((["SIM-P3", "--policy", "TD"], "--policy does not apply to SIM-P3"),
                     (["SIM-U1", "--set", "tau=1"], "--set does not apply to SIM-U1"),
                     (["SIM-X9"], "unknown experiment 'SIM-X9'")):
        r = fawkes(*bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and msg in r.stderr, r.stderr


def test_u6_the_tuner_ends_within_0_05_of_the_best_fixed_t_alloc(u3):
    """SIM-U3's sweep (0.5 .. 0.95) and T_alloc climbed online from 0.5 on the same jobs."""
    assert dict(u3["expect"])["U-6: T_alloc climbed online from 0.5 ends within 0.05 of the best fixed T_alloc"]
    fixed = {r["t_alloc"]: r["makespan_gain_pct"] for r in u3["rows"] if isinstance(r["t_alloc"], float)}
    tuned = next(r for r in u3["rows"] if str(r["t_alloc"]).startswith("U-6"))
    end = float(tuned["t_alloc"].rsplit(" ", 1)[1])
    assert abs(end - max(fixed, key=fixed.get)) <= 0.05 + 1e-9 and end > 0.5  # it climbed
    assert tuned["makespan_gain_pct"] > fixed[0.7]  # and gained more than a middling fixed value


def test_u6_the_climb_finds_an_inner_peak_and_learns_nothing_from_a_window_without_waiting_tasks():
    from fawkes.mechanism.talloc import TallocClimb, climb, window_gain

    def gain(t):  # concave, highest at 0.7
        return 10.0 - 100.0 * (t - 0.7) ** 2

    for start in (0.5, 0.95):
        s = TallocClimb(t_alloc=start)
        seen = []
        for _ in range(30):
            s = climb(s, gain(s.t_alloc))
            seen.append(s.t_alloc)
        assert all(abs(t - 0.7) <= 0.05 + 1e-9 for t in seen[-10:]), seen
        assert s.lo <= min(seen) and max(seen) <= s.hi
    s = TallocClimb(t_alloc=0.8, last_gain=5.0)
    assert climb(s, 1.0, waited=False) == s
    assert window_gain(120.0, 20.0, 10.0) == 10.0
    with pytest.raises(ValueError):
        TallocClimb(t_alloc=0.4)
