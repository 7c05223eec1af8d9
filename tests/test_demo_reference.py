"""The demo keeps the reference runtime R it measured (``fawkes demo``: the calibration job is about 3 of a
first run's minutes) per machine and plan, and reuses it only for the same machine, quota and job."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from fawkes.demo import DemoPlan, cached_reference, reference_key, remember_reference

try:
    from test_cli_store import fawkes, refused
except ImportError:
    from tests.test_cli_store import fawkes, refused


def test_a_measured_r_is_found_again_for_the_same_plan_only(tmp_path):
    cache = tmp_path / "sub" / "demo-reference.json"
    plan = DemoPlan()
    assert cached_reference(plan, cache) is None
    remember_reference(plan, 193.5, cache)
    r, when = cached_reference(plan, cache)
    assert r == 193.5 and when.endswith("UTC")
    other = replace(plan, cpus=0.5)
    assert reference_key(other) != reference_key(plan)
    assert cached_reference(other, cache) is None  # another host quota: R is not reused
    assert cached_reference(replace(plan, core_s=3.0), cache) is None  # another job
    remember_reference(other, 120.0, cache)
    assert cached_reference(other, cache)[0] == 120.0 and cached_reference(plan, cache)[0] == 193.5
    assert sorted(p.name for p in cache.parent.iterdir()) == ["demo-reference.json"]  # no temp file left


@pytest.mark.parametrize("value", ['"nan"', '"inf"', "-5", "0", "1e30", '"abc"', "null"])
def test_a_bad_cached_value_is_not_used(tmp_path, value):
    cache = tmp_path / "demo-reference.json"
    cache.write_text('{"%s": {"reference_s": %s, "measured_at": "x"}}' % (reference_key(DemoPlan()), value))
    assert cached_reference(DemoPlan(), cache) is None


@pytest.mark.parametrize("content", ["", "{", "[1, 2]", '"x"', "\x00", '{"k": 1}'])
def test_a_damaged_cache_is_ignored_and_rewritten(tmp_path, content):
    cache = tmp_path / "demo-reference.json"
    cache.write_text(content)
    assert cached_reference(DemoPlan(), cache) is None
    remember_reference(DemoPlan(), 100.0, cache)
    assert cached_reference(DemoPlan(), cache)[0] == 100.0
    assert isinstance(json.loads(cache.read_text()), dict)


def test_a_fifo_in_place_of_the_cache_is_not_read(tmp_path):
    cache = tmp_path / "demo-reference.json"
    os.mkfifo(cache)
    assert cached_reference(DemoPlan(), cache) is None  # returns at once instead of blocking on the FIFO
    remember_reference(DemoPlan(), 90.0, cache)  # replaced by a regular file
    assert cache.is_file() and cached_reference(DemoPlan(), cache)[0] == 90.0


def test_reference_and_recalibrate_exclude_each_other(tmp_path):
    r = fawkes("demo", "--reference", "100", "--recalibrate", "--dir", str(tmp_path / "demo"),
               env={"FAWKES_CACHE": str(tmp_path / "cache")})
    refused(r, "--recalibrate")
    assert not (tmp_path / "demo").exists() and not (tmp_path / "cache").exists()
