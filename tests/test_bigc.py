"""BIG-C's simulation checks (fawkes/sim/bigc.py): the directions the spec expects (SIM-B2)."""

from __future__ import annotations

from fawkes.sim import bigc


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


def test_sim_b1_partial_kill_and_reserve_go_the_way_bigc_saw():
    out = bigc.sim_b1([1, 2])
    assert len(out["rows"]) == 9
    failed = [e for e, ok in out["expect"] if not ok]
    assert not failed, (failed, out["rows"])


def test_simulate_lists_the_checks_and_refuses_options_they_do_not_take():
    import subprocess
    import sys

    def fawkes(*args):
        return subprocess.run([sys.executable, "-m", "fawkes", "simulate", *args], capture_output=True, text=True,
                              timeout=120)

    r = fawkes("--list")
    assert r.returncode == 0 and "SIM-B1" in r.stdout and "SIM-B2" in r.stdout and "\nD " in r.stdout
    r = fawkes("SIM-B2", "--set", "tau=1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--set" in r.stderr
    r = fawkes("--list", "D")
    assert r.returncode == 2 and "--list" in r.stderr
