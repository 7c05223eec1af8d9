"""The live benchmark's counterbalanced order and paired ratios (issue 25, item 2)."""

from __future__ import annotations

import math

from bench.bench_lab_policies import latin_order, paired_ratios


def test_each_policy_runs_once_in_each_position_over_n_repetitions():
    ps = ["None", "td-tc", "td-damped", "EQ"]
    orders = [latin_order(ps, r) for r in range(len(ps))]
    assert orders[0] == ps and orders[1][0] == "td-tc" and orders[3][0] == "EQ"
    for pos in range(len(ps)):
        assert sorted(o[pos] for o in orders) == sorted(ps)  # a Latin square: each policy once per position
    assert all(sorted(o) == sorted(ps) for o in orders)
    assert latin_order(ps, 4) == ps  # then it repeats
    assert [o.index("None") for o in (latin_order(["None", "td-damped"], r) for r in range(3))] == [0, 1, 0]


def test_paired_ratios_pair_inside_each_repetition():
    r = paired_ratios([0.9, 1.2, 0.6], [1.0, 1.5, 1.2])
    assert [round(x, 12) for x in r["ratios"]] == [0.9, 0.8, 0.5] and math.isclose(r["mean"], 2.2 / 3)
    assert (r["min"], r["max"]) == (0.5, 0.9)
    lo, hi = r["ci95"]
    sd = math.sqrt(((0.9 - 2.2 / 3) ** 2 + (0.8 - 2.2 / 3) ** 2 + (0.5 - 2.2 / 3) ** 2) / 2)
    assert math.isclose(hi - lo, 2 * 4.303 * sd / math.sqrt(3), rel_tol=1e-9)
    assert "ci95" not in paired_ratios([1.0, 1.0], [2.0, 2.0])
