"""The lab interference benchmark's pure parts (issue 25; the live runs are bench-only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.bench_lab_interference import BURN, main, order, ratio


def test_the_arms_alternate_abba_and_the_ratio_is_of_means():
    assert [order(r) for r in range(4)] == [["alone", "three"], ["three", "alone"]] * 2
    assert ratio([12.0, 14.0, 16.0], [10.0, 10.0]) == 1.4 and ratio([], [1.0]) is None


def test_the_floor_script_hashes_and_prints_its_seconds():
    out = subprocess.run([sys.executable, "-c", BURN.format(n=1000)], capture_output=True, text=True, check=True)
    assert 0 < float(out.stdout) < 5


@pytest.mark.parametrize("args", [["--reps", "0"], ["--partitions", "65"], ["--core-s", "nan"], ["--core-s", "-1"]])
def test_bad_arguments_one_line_exit_2_before_any_lab(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {args[0]}")
