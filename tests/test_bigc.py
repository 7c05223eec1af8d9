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
