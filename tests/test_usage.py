"""The CPU and memory collector (fawkes/coordinator/usage.py): its parsers on this machine's real
/proc and /sys/fs/cgroup text, its script run through ``sh`` as the executor runs it over SSH (on
the machine, and inside a real cgroup with a CPU quota and a memory limit, with a busy loop), and
the window of maxima that becomes the snapshot's NodeUsage."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fawkes.coordinator import usage
from fawkes.coordinator.usage import Reading, UsageWindow, parse_reading
from fawkes.errors import FawkesError
from fawkes.ssh.shell import render

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable


def run_script(prefix: list[str] | None = None) -> str:
    r = subprocess.run([*(prefix or []), "sh", "-c", render(usage.SCRIPT)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


# --- parsers on this machine's text ---------------------------------------------------------------

def test_proc_stat_and_meminfo_of_this_machine():
    clk = os.sysconf("SC_CLK_TCK")
    busy = usage.proc_stat_busy_s(Path("/proc/stat").read_text(), clk)
    up = float(Path("/proc/uptime").read_text().split()[0])
    assert 0 < busy <= up * os.cpu_count() * 1.01
    total, avail = usage.meminfo(Path("/proc/meminfo").read_text())
    assert total == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") or abs(
        total - os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) < 64 << 20
    assert 0 < avail <= total
    with pytest.raises(ValueError):
        usage.proc_stat_busy_s("intr 1 2 3\n", clk)
    with pytest.raises(ValueError):
        usage.meminfo("MemFree: 10 kB\n")


def test_cgroup_files_of_this_machine():
    paths = usage.cgroup_paths(Path("/proc/self/cgroup").read_text())
    assert "" in paths or any(k in paths for k in ("cpu", "memory"))
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        for c in filter(None, ctl.split(",")):
            assert paths[c] == path
    own = Path("/proc/self/stat").read_text()
    t = os.times()
    ticks = usage.pid_cpu_ticks(own)
    assert abs(ticks / os.sysconf("SC_CLK_TCK") - (t.user + t.system)) < 0.5
    assert usage.pid_cpu_ticks("42 (a) b (c)) S 1 1 1 0 -1 0 0 0 0 0 7 5 0 0 20 0 1 0 1 1 1") == 12
    for f in Path("/sys/fs/cgroup").rglob("cpu.stat"):  # v2 (a hybrid machine has one under unified/)
        if "usage_usec" in f.read_text():
            assert usage.keyed(f.read_text())["usage_usec"] > 0
            break
    for f in (Path("/sys/fs/cgroup/memory/memory.stat"), Path("/sys/fs/cgroup/memory.stat")):
        if f.is_file():
            assert "inactive_file" in usage.keyed(f.read_text()) or "total_inactive_file" in usage.keyed(f.read_text())
    assert usage.cpu_max("max 100000\n") is None and usage.cpu_max("50000 100000\n") == 0.5
    assert usage.cfs_quota("-1\n", "100000\n") is None and usage.cfs_quota("25000\n", "100000\n") == 0.25
    assert usage.memory_limit("max\n") is None and usage.memory_limit("9223372036854771712\n") is None
    assert usage.memory_limit("268435456\n") == 256 << 20


def test_the_script_on_this_machine_reads_the_machine():
    out = run_script()
    r = parse_reading("local", out)
    assert r.cpu_scope in ("host",) or r.cpu_scope.startswith("cgroup")
    if r.cpu_scope == "host":
        assert r.cpus == os.cpu_count()
    total, _ = usage.meminfo(Path("/proc/meminfo").read_text())
    assert 0 < r.mem_used <= r.mem_held <= total
    r2 = parse_reading("local", run_script())
    assert r2.at >= r.at and r2.cpu_used_s >= r.cpu_used_s


def test_a_v2_group_with_limits_is_measured_as_the_group():
    # the files a cgroup v2 host with a 0.5-core, 256 MiB group shows (formats as this machine's unified/ files)
    out = "\n".join([
        "@uptime", "1000.50 1800.00", "@nproc", "4", "@clk_tck", "100",
        "@stat", "cpu  100 0 50 1000 10 0 5 0 0 0",
        "@meminfo", "MemTotal:       8000000 kB", "MemAvailable:   6000000 kB",
        "@cgroup", "0::/fawkes-lab-x/h1",
        "@v2 /sys/fs/cgroup/fawkes-lab-x/h1 cpu.max", "50000 100000",
        "@v2 /sys/fs/cgroup/fawkes-lab-x/h1 memory.max", "268435456",
        "@v2 /sys/fs/cgroup/fawkes-lab-x/h1 cpu.stat", "usage_usec 2500000", "user_usec 2000000",
        "@v2 /sys/fs/cgroup/fawkes-lab-x/h1 memory.current", "104857600",  # less inactive_file: 100,000,000
        "@v2 /sys/fs/cgroup/fawkes-lab-x/h1 memory.stat", "anon 50000000", "inactive_file 4857600",
        "@v2 /sys/fs/cgroup/fawkes-lab-x cpu.max", "max 100000",
        "@v2 /sys/fs/cgroup cpu.stat", "usage_usec 99999999",
        "@v1cpupath", "", "@end", ""])
    r = parse_reading("h1", out)
    assert r == Reading(1000.5, 0.5, 2.5, 256 << 20, 100_000_000, "cgroup v2 /sys/fs/cgroup/fawkes-lab-x/h1",
                        "cgroup v2 /sys/fs/cgroup/fawkes-lab-x/h1")
    with pytest.raises(FawkesError, match="^h1: cannot read CPU and memory use"):
        parse_reading("h1", out.replace("@end", "@nothing"))
    with pytest.raises(FawkesError, match="h1"):
        parse_reading("h1", out.replace("4\n@clk_tck", "four\n@clk_tck"))


@pytest.fixture
def limited_group():
    """A real cgroup (v2 or v1, as fawkes.lab.cgroup finds them) with 0.5 cores and 256 MiB, a busy loop in it."""
    if os.geteuid() != 0:
        unavailable("needs root to create cgroups")
    from fawkes.lab import cgroup

    prefix = f"usagetest{os.getpid()}"
    try:
        procs = cgroup.create(prefix, "h1", cpus=0.5, memory_mb=256)
    except FawkesError as exc:
        unavailable(f"no cgroup with limits here: {exc}")
    busy = subprocess.Popen(cgroup.enter(procs) + ["sh", "-c", "while :; do :; done"])
    try:
        yield procs, cgroup.enter(procs)
    finally:
        busy.kill()
        busy.wait()
        time.sleep(0.2)
        cgroup.remove(prefix)


def test_the_script_inside_a_limited_group_measures_the_group(limited_group):
    procs, enter = limited_group
    w = UsageWindow(60.0)
    first = parse_reading("h1", run_script(enter))
    assert first.cpus == 0.5 and first.cpu_scope.startswith("cgroup") and first.cpu_scope.endswith("/h1")
    assert first.mem_held == 256 << 20 and first.mem_scope.endswith("/h1") and 0 < first.mem_used < 256 << 20
    w.add(first)
    assert w.usage() is None  # CPU needs two readings
    time.sleep(2.0)
    w.add(parse_reading("h1", run_script(enter)))
    u = w.usage()
    # the loop may use the whole quota (0.5 cores), less when the machine is busy (low priority)
    assert u is not None and 0.2 < u.cpu_max <= 1.0 and 0 < u.mem_max < 1 and 1.5 < u.window_s < 10


# --- the window -----------------------------------------------------------------------------------

def _r(at, cpu_s, mem, scope="host", cpus=2.0, held=1000):
    return Reading(at, cpus, cpu_s, held, mem, scope, scope)


def test_the_window_keeps_the_maxima_and_forgets_what_is_older():
    w = UsageWindow(100.0)
    w.add(_r(0, 0.0, 100))
    w.add(_r(10, 10.0, 200))  # 10 CPU s in 10 s on 2 cores: 0.5
    w.add(_r(20, 12.0, 900))  # 0.1, memory 0.9
    u = w.usage()
    assert (u.cpu_max, u.mem_max, u.window_s) == (0.5, 0.9, 20)
    w.add(_r(121, 12.0, 100))  # idle since: the 0.5 and the 0.9 fall out after 100 s
    u = w.usage()
    assert u.cpu_max == 0.0 and u.mem_max == 0.1 and u.window_s == 100.0
    w.add(_r(122, 11.0, 100))  # a v1 group lost an exited process's CPU time: counts as 0, not negative
    assert w.usage().cpu_max == 0.0


def test_a_reboot_or_another_scope_starts_the_window_over():
    w = UsageWindow(100.0)
    w.add(_r(50, 0.0, 100))
    w.add(_r(60, 20.0, 100))
    assert w.usage().cpu_max == 1.0
    w.add(_r(5, 1.0, 100))  # uptime went back: rebooted
    assert w.usage() is None
    w.add(_r(15, 2.0, 100))
    assert w.usage().cpu_max == pytest.approx(0.05) and w.usage().window_s == 10
    w.add(_r(25, 3.0, 100, scope="cgroup v1 /x"))
    assert w.usage() is None


# --- the window kept in the state (issue 28: usage windows survive a restart) --------------------------

def test_a_saved_window_resumes_without_counting_the_gap():
    """A window written to the state and taken back (a restarted coordinator): its maxima and coverage are
    kept; the time the coordinator was away gives no CPU (its mean could hide a busy stretch) and does
    not count as covered."""
    import json

    w = UsageWindow(100.0)
    w.add(_r(0, 0.0, 100))
    w.add(_r(10, 16.0, 200))  # 0.8
    w.add(_r(20, 18.0, 300))  # 0.1
    doc = json.loads(json.dumps(w.to_doc()))  # through JSON, as the state holds it
    back = UsageWindow.from_doc(doc, 100.0)
    assert back.usage() == w.usage() and (back.usage().cpu_max, back.usage().window_s) == (0.8, 20)
    back.add(_r(60, 98.0, 100))  # 80 CPU s over the 40-s gap on 2 cores would read 1.0: not counted
    u = back.usage()
    assert u.cpu_max == 0.8 and u.window_s == 20 and back.cpu_now() is None
    back.add(_r(70, 99.0, 100))  # 0.05: observed again, 10 s more covered
    assert (back.usage().cpu_max, back.usage().window_s) == (0.8, 30) and back.cpu_now() == pytest.approx(0.05)
    back.add(_r(121, 100.0, 100))  # the 0.8 (at 10) is older than 100 s: gone; covered 60..121, not the gap
    assert back.usage().cpu_max == pytest.approx(0.05) and back.usage().window_s == 61
    # a reboot (uptime went back) after the restart still starts over
    again = UsageWindow.from_doc(w.to_doc(), 100.0)
    again.add(_r(5, 1.0, 100))
    assert again.usage() is None


def test_a_window_the_state_holds_in_another_shape_is_refused_in_one_line():
    good = UsageWindow(100.0)
    good.add(_r(0, 0.0, 100))
    good.add(_r(10, 10.0, 100))
    doc = good.to_doc()
    bad = [
        None, [], {"last": doc["last"]}, {**doc, "extra": 1},
        {**doc, "last": doc["last"][:6]},
        {**doc, "last": [float("nan"), *doc["last"][1:]]},
        {**doc, "last": [float("inf"), *doc["last"][1:]]},
        {**doc, "last": [-1.0, *doc["last"][1:]]},
        {**doc, "last": [10**30, *doc["last"][1:]]},
        {**doc, "last": [10.0, 0.0, *doc["last"][2:]]},  # no cores
        {**doc, "last": [*doc["last"][:3], -5, *doc["last"][4:]]},
        {**doc, "last": [*doc["last"][:3], True, *doc["last"][4:]]},
        {**doc, "last": [*doc["last"][:5], "host\nx", "host"]},
        {**doc, "last": [*doc["last"][:5], "host", "cgroup v1 /a\x00b"]},
        {**doc, "samples": "x"}, {**doc, "samples": [[1, 2, 3]]},
        {**doc, "samples": [[0.0, None, 0.1, 0.0], [0.0, 0.5, 0.1, 0.0]]},  # not in time order
        {**doc, "samples": [[20.0, None, 0.1, 20.0]]},  # after the last reading
        {**doc, "samples": [[5.0, float("nan"), 0.1, 0.0]]},
        {**doc, "samples": [[5.0, 0.5, 0.1, 6.0]]},  # observed from after its own time
        {**doc, "samples": [[0.0, None, 0.0, 0.0]] * 90000},
    ]
    for d in bad:
        with pytest.raises(ValueError) as e:
            UsageWindow.from_doc(d, 100.0)
        assert "\n" not in str(e.value) and len(str(e.value)) < 200, str(e.value)


def test_node_windows_take_back_only_nodes_still_on_the_same_host():
    from fawkes.coordinator.usage import NodeWindows

    saved = NodeWindows(100.0)
    for nid, h in ((1, "h1"), (2, "h2"), (3, "h3")):
        w = UsageWindow(100.0)
        w.add(_r(0, 0.0, 100))
        w.add(_r(10, 10.0, 100))
        saved.windows[nid] = (h, w)
    doc = saved.to_doc()
    doc["4"] = {"host": "h4", "window": {"last": "broken"}}
    doc["x\n"] = {"host": "h5", "window": doc["1"]["window"]}
    fresh = NodeWindows(100.0)
    taken, refused = fresh.restore(doc, {1: "h1", 2: "h9", 4: "h4", 5: "h5"})  # 2 moved, 3 gone
    assert taken == 1 and set(fresh.windows) == {1} and fresh.usage()[1].cpu_max == 0.5
    assert len(refused) == 2 and all("\n" not in r for r in refused), refused
    assert fresh.restore("not a dict", {1: "h1"})[0] == 0
