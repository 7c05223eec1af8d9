"""The CERES straggler benchmark's pure parts (issue 28, item 3; the live runs are bench-only)."""

from __future__ import annotations

import json

import pytest

from bench.bench_ceres_straggler import main, order, paired, preset
from fawkes.presets import load_preset


def test_the_arms_alternate_abba():
    assert [order(r) for r in range(4)] == [["on", "off"], ["off", "on"]] * 2


def test_only_the_on_arm_has_c2_and_both_presets_load(tmp_path):
    on, off = preset("on", 1.5, 2), preset("off", 1.5, 2)
    assert {k: v for k, v in on.items() if not k.startswith("straggler")} == off
    (tmp_path / "on.yaml").write_text(json.dumps(on))
    (tmp_path / "off.yaml").write_text(json.dumps(off))
    s_on, s_off = load_preset(tmp_path / "on.yaml"), load_preset(tmp_path / "off.yaml")
    assert s_on.straggler_factor == 1.5 and s_on.straggler_expand_nodes == 2
    assert s_off.straggler_factor is None


def test_paired_ratios_with_their_interval():
    p = paired([60.0, 80.0, 90.0], [100.0, 100.0, 100.0])
    assert p["ratios"] == [0.6, 0.8, 0.9] and p["median"] == 0.8 and p["min"] == 0.6 and p["max"] == 0.9
    lo, hi = p["ci95"]
    assert lo < p["mean"] < hi and abs(p["mean"] - 2.3 / 3) < 1e-12
    assert "ci95" not in paired([1.0], [2.0])


@pytest.mark.parametrize("args", [["--reps", "0"], ["--work", "1"], ["--factor", "nan"], ["--factor", "1"],
                                  ["--expand", "11"], ["--core-s", "inf"], ["--hosts", "1"], ["--partitions", "-3"]])
def test_bad_arguments_one_line_exit_2_before_any_lab(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {args[0]}")
