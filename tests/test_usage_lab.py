"""The CPU and memory collector (fawkes/coordinator/usage.py) over real SSH on lab hosts: two readings
two seconds apart, while one host runs a busy loop, become a window of maxima per host."""

from __future__ import annotations

import time

import pytest

from fawkes.coordinator.usage import Reading, UsageWindow, collect

pytestmark = pytest.mark.lab


def test_usage_over_ssh_on_lab_hosts(lab, ex):
    hosts = [h.name for h in lab.hosts[:2]]
    busy = ex.run([hosts[0]], "nohup sh -c 'end=$(($(date +%s) + 8)); while [ $(date +%s) -lt $end ]; do :; done' "
                  ">/dev/null 2>&1 &", timeout=10)
    assert busy[hosts[0]].ok, busy[hosts[0]].error
    windows = {h: UsageWindow(60.0) for h in hosts}
    t0 = time.monotonic()
    for _ in range(2):
        got = collect(ex, hosts)
        for h in hosts:
            r = got[h]
            assert isinstance(r, Reading), r
            assert r.cpus > 0 and 0 < r.mem_used <= r.mem_held and r.cpu_scope and r.mem_scope
            windows[h].add(r)
        time.sleep(2.0)
    for h in hosts:
        u = windows[h].usage()
        assert u is not None and 0 <= u.cpu_max <= 1 and 0 < u.mem_max < 1 and 1.5 < u.window_s < 30, (h, u)
    # the loop burns one core: on a host with the whole machine (2 cores) that is at least a quarter of it
    assert windows[hosts[0]].usage().cpu_max > 0.25
    assert time.monotonic() - t0 < 60
