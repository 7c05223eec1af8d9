"""The opportunistic worker's node-local watchdog (fawkes/agent/watchdog.py; issue 12, UBIS U-2), with real
processes and real cgroups on this machine: load stops the worker within 5 s; only the worker's processes are
ever signalled (a same-named process and a reused process-group number survive); when the coordinator goes
away (stdin closed or silent, heartbeat file stale, the watchdog killed) nothing of the worker is left."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from fawkes.agent import watchdog as wd
from fawkes.mechanism import opportunistic as opp

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

AGENT = Path(wd.__file__)
SLEEPER = "import sys, time; time.sleep(float(sys.argv[1]))"


def run_wd(*args: str, stdin=subprocess.PIPE, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(AGENT), *args], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def events(proc: subprocess.Popen, until: str, timeout: float = 30.0) -> list[dict]:
    """Read the watchdog's JSON lines until the event ``until`` (or its exit)."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out.append(json.loads(line))
        if out[-1]["event"] == until:
            break
    return out


def alive(pid: int) -> bool:
    s = wd.proc_stat(pid)
    return s is not None and s[0] not in "ZX"


def group_members(pgid: int) -> list[int]:
    return [p for p in wd.pids() if (s := wd.proc_stat(p)) and s[1] == pgid and s[0] not in "ZX"]


def wait_gone(pids, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def worker_pids(started: dict) -> list[int]:
    """The worker's processes once its command has started its children (a shell and two sleepers)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = group_members(started["pgid"])
        if len(m) >= 4:  # keeper, sh, two sleeps
            return m
        time.sleep(0.05)
    return group_members(started["pgid"])


WORKER = ["--", "sh", "-c", "sleep 120 & sleep 120 & wait"]  # bounded: a failing test does not hang


@pytest.fixture
def host(tmp_path):
    """A 'host' of this machine: a cgroup with a small CPU quota (0.05 cores) and a 64 MiB memory limit,
    removed (its processes killed) at the end."""
    from fawkes.lab import cgroup

    if os.geteuid() != 0:
        unavailable("cgroups need root")
    prefix = "wdt" + uuid.uuid4().hex[:6]
    try:
        procs = cgroup.create(prefix, "h", cpus=0.05, memory_mb=64)
    except Exception as exc:  # noqa: BLE001 - no controller here
        unavailable(f"no cgroups: {exc}")
    dirs = {c: cgroup.group_dir(prefix, "h", c) for c in (cgroup.CPU, cgroup.MEMORY)}
    started: list[subprocess.Popen] = []

    def spawn(argv: list[str], only: str | None = None) -> subprocess.Popen:
        into = [f for f in procs if only is None or str(f).startswith(str(cgroup.hierarchy(only).mount))]
        p = subprocess.Popen(cgroup.enter(into) + argv, start_new_session=True)
        started.append(p)
        return p

    yield dirs, spawn
    for p in started:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    cgroup.remove(prefix)


def idle(host) -> list[str]:
    """Scope the watchdog to the idle test host (this machine itself may be loaded by anything)."""
    dirs, _ = host
    return ["--cpu-cgroup", str(dirs["cpu"]), "--mem-cgroup", str(dirs["memory"])]


# ---------------------------------------------------------------------------------------------- the rule
def test_rule_is_the_mechanisms_watchdog_rule():
    rnd = random.Random(4)
    streak_a = streak_b = 0
    for _ in range(2000):
        use = {"cpu": rnd.choice([0.5, 0.98, 0.995, 1.0]), "mem": rnd.choice([0.3, 0.94, 0.96])}
        streak_a, fire_a = wd.rule(streak_a, use, {"cpu": 0.99, "mem": 0.95}, 3)
        streak_b, fire_b = opp.watchdog(streak_b, use, {"cpu": 1.0, "mem": 1.0})
        assert (streak_a, fire_a) == (streak_b, fire_b)


# ---------------------------------------------------------------------------------------------- load
def test_cpu_load_on_the_host_stops_the_worker_within_5_s(host, tmp_path):
    dirs, spawn = host
    status = tmp_path / "status.json"
    p = run_wd("--cpu-cgroup", str(dirs["cpu"]), "--mem-cgroup", str(dirs["memory"]), "--status", str(status),
               "--grace", "1", *WORKER)
    started = events(p, "started")[0]
    assert started["cpu_capacity"] == pytest.approx(0.05)
    members = worker_pids(started)
    time.sleep(2.5)  # idle host: no stop
    assert all(alive(m) for m in members) and p.poll() is None
    t_load = time.monotonic()
    spawn(["sh", "-c", "while :; do :; done"])  # the owner's load returns: more than the quota
    ev = events(p, "exit")
    took = time.monotonic() - t_load
    assert p.wait(10) == wd.EXIT_LOAD
    stopped = next(e for e in ev if e["event"] == "stopped")
    assert stopped["reason"] == "load" and len(stopped["checks"]) == 3
    assert all(c["cpu"] > 0.99 for c in stopped["checks"])
    # FP-style (--load-grace 0): SIGKILL at once, no SIGTERM a worker starved by the load could not act on
    assert stopped["terminated"] == 0 and stopped["killed"] >= 4
    print(f"\nwatchdog: load started -> worker stopped in {took:.2f} s (stop itself {stopped['stop_s']:.2f} s)")
    assert took < 5.0, f"stopped {took:.1f} s after the load started"
    assert wait_gone(members, 1.0)
    assert json.loads(status.read_text())["event"] == "exit"


def test_memory_use_on_the_host_stops_the_worker(host):
    dirs, spawn = host
    # the limit 0.6 of 64 MiB (a process of 40 MiB and an interpreter fit under the group's limit: an
    # interval between 0.95 and the limit itself is too narrow to hit without the OOM killer)
    p = run_wd("--cpu-cgroup", str(dirs["cpu"]), "--mem", "0.6", "--mem-cgroup", str(dirs["memory"]),
               "--grace", "1", *WORKER)
    started = events(p, "started")[0]
    assert started["mem_capacity"] == 64 << 20
    members = worker_pids(started)
    time.sleep(2)
    assert p.poll() is None
    t_load = time.monotonic()
    spawn([sys.executable, "-c", "import time; b = bytearray(40 << 20); b[::4096] = b'x' * len(b[::4096]); "
           "time.sleep(60)"], only="memory")
    ev = events(p, "exit")
    assert p.wait(10) == wd.EXIT_LOAD
    assert time.monotonic() - t_load < 8.0  # python's start at the lowest priority + 3 checks
    stopped = next(e for e in ev if e["event"] == "stopped")
    assert all(c["mem"] > 0.6 for c in stopped["checks"]), stopped
    assert wait_gone(members, 1.0)


def test_no_stop_while_the_host_stays_under_the_limits(host):
    dirs, _ = host
    p = run_wd("--cpu-cgroup", str(dirs["cpu"]), "--mem-cgroup", str(dirs["memory"]), "--period", "0.5",
               "--verbose", "--stdin-eof", *WORKER)
    started = events(p, "started")[0]
    checks = [e for e in (json.loads(p.stdout.readline()) for _ in range(6)) if e["event"] == "check"]
    assert len(checks) == 6 and all(c["streak"] == 0 for c in checks)
    assert all(alive(m) for m in worker_pids(started))
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE


def test_worker_cgroup_caps_it_and_lowers_its_priority(host):
    from fawkes.lab import cgroup

    dirs, _ = host
    p = run_wd("--cpu-cgroup", str(dirs["cpu"]), "--worker-cpus", "0.02", "--worker-shares", "2",
               "--worker-memory-mb", "32", "--nice", "15", "--stdin-eof", *WORKER)
    started = events(p, "started")[0]
    members = worker_pids(started)
    groups = started["groups"]
    assert len(groups) == 2
    cpu_group = next(g for g in groups if g.startswith(str(cgroup.hierarchy(cgroup.CPU).mount)))
    assert cgroup._cpu_limit(Path(cpu_group)) == pytest.approx(0.02)
    in_group = {int(x) for x in Path(cpu_group, "cgroup.procs").read_text().split()}
    assert set(members) <= in_group
    assert all(os.getpriority(os.PRIO_PROCESS, m) >= 15 for m in members)
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE
    assert wait_gone(members, 1.0)
    assert not any(Path(g).exists() for g in groups)  # its groups removed


def test_checks_and_the_stop_report_the_workers_own_cpu_seconds(host):
    """UBIS U-6 live reads an opportunistic worker's work from ``worker_cpu_s``: its cpu group's CPU seconds,
    rising while it computes, never faster than its cap, and read once more at its stop."""
    burn = ["--", sys.executable, "-c", "import time\nt = time.time() + 60\nwhile time.time() < t: pass"]
    p = run_wd(*idle(host), "--worker-cpus", "0.03", "--period", "0.5", "--verbose", "--stdin-eof", *burn)
    events(p, "started")
    checks = [e for e in (json.loads(p.stdout.readline()) for _ in range(8)) if e["event"] == "check"]
    used = [c["worker_cpu_s"] for c in checks]
    assert len(used) == 8 and used == sorted(used) and used[-1] > used[0], used
    span = checks[-1]["time"] - checks[0]["time"]
    assert used[-1] - used[0] <= 0.03 * span * 1.5 + 0.02, (used, span)  # capped at 0.03 cores (CFS: per period)
    p.stdin.close()
    stop = next(e for e in events(p, "stopped") if e["event"] == "stopped")
    assert stop["worker_cpu_s"] >= used[-1], (stop, used)
    assert p.wait(10) == wd.EXIT_GONE


def test_a_cap_line_moves_the_workers_cpu_cap_and_junk_changes_nothing(host):
    """UBIS U-6: ``cap X`` on stdin sets the worker's cpu group to X cores (a ``cap`` event); a value that is
    not a number of cores within the host's capacity is refused in one event and the cap stays."""
    from fawkes.lab import cgroup

    p = run_wd(*idle(host), "--worker-cpus", "0.02", "--period", "0.2", "--stdin-eof", *WORKER)
    started = events(p, "started")[0]
    group = Path(next(g for g in started["groups"] if g.startswith(str(cgroup.hierarchy(cgroup.CPU).mount))))
    assert cgroup._cpu_limit(group) == pytest.approx(0.02)
    try:
        p.stdin.write("\ncap 0.04\n")
        p.stdin.flush()
        ev = events(p, "cap")[-1]
        assert ev == {**ev, "event": "cap", "cpus": 0.04} and cgroup._cpu_limit(group) == pytest.approx(0.04)
        # the host is 0.05 cores: more than that, under 0.01, NaN, inf, words and a NUL byte are refused
        for junk in ("0.5", "0.001", "-1", "nan", "inf", str(10**30), "abc", "0.03\x00", ""):
            p.stdin.write(f"cap {junk}\n")
            p.stdin.flush()
            ev = events(p, "cap-refused", timeout=10)[-1]
            assert ev["event"] == "cap-refused" and "[0.01, 0.05]" in ev["reason"], (junk, ev)
        assert cgroup._cpu_limit(group) == pytest.approx(0.04)
        p.stdin.write("cap 0.015\n")  # and down
        p.stdin.flush()
        assert events(p, "cap")[-1]["cpus"] == 0.015 and cgroup._cpu_limit(group) == pytest.approx(0.015)
        # the line's wake-up is spent: the watchdog waits again (a loop left awake spun a core on its host,
        # which its own checks read as the host's load: every loan re-capped on the lab was stopped)
        before = wd.proc_stat(p.pid)[3]
        time.sleep(2.0)
        spent = (wd.proc_stat(p.pid)[3] - before) / wd.CLK
        assert spent < 0.5, f"the watchdog used {spent:.2f} CPU s in 2 s after the cap lines"
    finally:
        p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE


def test_a_cap_line_for_a_worker_without_a_cpu_group_is_refused(host):
    p = run_wd(*idle(host), "--period", "0.2", "--stdin-eof", *WORKER)
    events(p, "started")
    p.stdin.write("cap 0.02\n")
    p.stdin.flush()
    ev = events(p, "cap-refused", timeout=10)[-1]
    assert ev["event"] == "cap-refused" and "no cpu group" in ev["reason"], ev
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE


def test_a_worker_without_a_group_of_its_own_reports_no_cpu_seconds(host):
    p = run_wd(*idle(host), "--period", "0.3", "--verbose", "--stdin-eof", *WORKER)
    events(p, "started")
    check = json.loads(p.stdout.readline())
    assert check["event"] == "check" and "worker_cpu_s" not in check
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE


# ---------------------------------------------------------------------------------------------- membership
def test_an_unrelated_process_with_the_same_name_survives(host, tmp_path):
    decoy = subprocess.Popen([sys.executable, "-c", SLEEPER, "120"], start_new_session=True)
    decoy_child = subprocess.Popen([sys.executable, "-c", SLEEPER, "120"])  # in the test's own group
    try:
        p = run_wd(*idle(host), "--stdin-eof", "--grace", "1", "--", sys.executable, "-c", SLEEPER, "120")
        started = events(p, "started")[0]
        deadline = time.monotonic() + 10
        while len(group_members(started["pgid"])) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        members = group_members(started["pgid"])
        assert decoy.pid not in members and len(members) == 2
        p.stdin.close()
        ev = events(p, "exit")
        assert p.wait(10) == wd.EXIT_GONE
        stopped = next(e for e in ev if e["event"] == "stopped")
        assert stopped["terminated"] == 2  # the keeper and the worker, nothing else
        assert wait_gone(members, 1.0)
        assert decoy.poll() is None and decoy_child.poll() is None
        assert Path(f"/proc/{decoy.pid}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-c", SLEEPER.encode()]
    finally:
        for d in (decoy, decoy_child):
            d.kill()
            d.wait()


def test_attach_guards_an_existing_group_and_only_it(host):
    worker = subprocess.Popen(["sh", "-c", "sleep 120 & sleep 120 & wait"], start_new_session=True)
    decoy = subprocess.Popen(["sh", "-c", "sleep 120 & sleep 120 & wait"], start_new_session=True)
    try:
        time.sleep(0.3)
        members = group_members(worker.pid)
        assert len(members) == 3
        p = run_wd(*idle(host), "--stdin-eof", "--grace", "1", "--pid", str(worker.pid),
                   "--start-time", str(wd.proc_stat(worker.pid)[2]))
        assert events(p, "started")[0]["pgid"] == worker.pid
        p.stdin.close()
        ev = events(p, "exit")
        assert p.wait(10) == wd.EXIT_GONE
        assert next(e for e in ev if e["event"] == "stopped")["terminated"] == 3
        worker.wait(5)
        assert wait_gone(members, 2.0)
        assert len(group_members(decoy.pid)) == 3
    finally:
        for x in (worker, decoy):
            try:
                os.killpg(x.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            x.wait()


def test_a_reused_group_number_is_never_signalled():
    """pid reuse, simulated: a live group whose leader's start time is not the recorded one is
    another process's group (the recorded worker ended and its number went to someone else)."""
    other = subprocess.Popen(["sh", "-c", "sleep 120 & wait"], start_new_session=True)
    try:
        time.sleep(0.2)
        start = wd.proc_stat(other.pid)[2]
        stale = wd.Guard(other.pid, start - 1)  # the worker recorded earlier under the same number
        assert stale.members() == [] and stale.signal(signal.SIGKILL) == 0
        assert stale.ended and len(group_members(other.pid)) == 2
        # and on the command line: a start time that is not the leader's is refused, nothing signalled
        r = subprocess.run([sys.executable, str(AGENT), "--pgid", str(other.pid), "--start-time", str(start - 1)],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not the recorded worker" in r.stderr
        assert len(group_members(other.pid)) == 2
        # a group that was seen empty is never signalled again, even if its number comes back
        gone = wd.Guard(other.pid, start)
        gone.ended = True
        assert gone.signal(signal.SIGKILL) == 0 and len(group_members(other.pid)) == 2
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()


# ---------------------------------------------------------------------------------------------- coordinator away
def test_stdin_closed_leaves_nothing_running(host):
    p = run_wd(*idle(host), "--stdin-eof", "--grace", "1", *WORKER)
    started = events(p, "started")[0]
    members = worker_pids(started)
    assert len(members) == 4
    p.stdin.close()  # the SSH session that started it closes
    assert p.wait(10) == wd.EXIT_GONE
    assert wait_gone(members + [started["watchdog"]], 1.0)


def test_a_silent_stdin_means_the_coordinator_is_gone(host):
    p = run_wd(*idle(host), "--stdin-timeout", "2", "--grace", "1", *WORKER)
    started = events(p, "started")[0]
    members = worker_pids(started)
    for _ in range(3):  # the coordinator's heartbeat lines keep it going
        p.stdin.write("\n")
        p.stdin.flush()
        time.sleep(1)
    assert p.poll() is None
    t = time.monotonic()  # then a partition: the channel stays open, nothing comes
    ev = events(p, "exit")
    assert p.wait(10) == wd.EXIT_GONE and time.monotonic() - t < 6
    assert "no line on stdin" in ev[-1]["reason"]
    assert wait_gone(members, 1.0)


def test_a_stale_heartbeat_file_means_the_coordinator_is_gone(host, tmp_path):
    hb = tmp_path / "hb"
    hb.touch()
    p = run_wd(*idle(host), "--heartbeat", str(hb), "--heartbeat-timeout", "2", "--grace", "1", *WORKER, stdin=subprocess.DEVNULL)
    started = events(p, "started")[0]
    members = worker_pids(started)
    for _ in range(3):
        hb.touch()
        time.sleep(1)
    assert p.poll() is None
    ev = events(p, "exit")
    assert p.wait(10) == wd.EXIT_GONE and "heartbeat file" in ev[-1]["reason"]
    assert wait_gone(members, 1.0)


def test_the_watchdog_killed_takes_its_worker_with_it(host):
    """SIGKILL of the watchdog (the OOM killer, a crashed session): the keeper's parent-death
    signal kills the whole group, grandchildren included."""
    p = run_wd(*idle(host), *WORKER)
    started = events(p, "started")[0]
    members = worker_pids(started)
    assert len(members) == 4
    p.kill()
    p.wait()
    assert wait_gone(members, 3.0)


def test_sigterm_to_the_watchdog_stops_the_worker(host):
    p = run_wd(*idle(host), "--grace", "1", *WORKER)
    members = worker_pids(events(p, "started")[0])
    p.terminate()
    assert p.wait(10) == wd.EXIT_SIGNAL
    assert wait_gone(members, 1.0)


def test_a_worker_that_ends_by_itself_ends_the_watchdog(host):
    p = run_wd(*idle(host), "--", "sh", "-c", "sleep 0.5; exit 7")
    ev = events(p, "exit")
    assert p.wait(10) == wd.EXIT_DONE
    assert ev[-1]["reason"] == "worker exited" and ev[-1]["worker_rc"] == 7


# ---------------------------------------------------------------------------------------------- input, shipping
@pytest.mark.parametrize("args", [
    ["--cpu", "1.5"], ["--cpu", "0"], ["--mem", "nan"], ["--period", "0"], ["--period", "inf"],
    ["--count", "0"], ["--count", "2.5"], ["--grace", "-1"], ["--nice", "20"], ["--worker-cpus", "0"],
    ["--worker-shares", "1"], ["--heartbeat-timeout", "0"], ["--stdin-timeout", "-3"],
    ["--cpu-cgroup", "/nonexistent/group"], ["--heartbeat", "/nonexistent/hb"],
    ["--pgid", "1"], ["--start-time", "5"],
])
def test_bad_arguments_are_one_line_exit_2_and_start_nothing(args, tmp_path, capsys):
    marker = tmp_path / "started"
    try:
        code = wd.main([*args, "--", "touch", str(marker)])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("watchdog: ") and err.count("\n") == 1 and out == ""
    assert not marker.exists()


def test_a_bad_argument_on_the_command_line(tmp_path):
    r = subprocess.run([sys.executable, str(AGENT), "--mem", "1.01", "--", "touch", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "watchdog: argument --mem: '1.01' is not in (0, 1]\n")
    assert not (tmp_path / "x").exists()


def test_bad_modes_are_refused(tmp_path):
    for args in ([], ["--pgid", str(os.getpgrp())], ["--pid", "4000000"], ["--pgid", "99", "--", "true"]):
        r = subprocess.run([sys.executable, str(AGENT), *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r)


def test_it_ships_as_one_stdlib_file(tmp_path):
    """Copied alone and run in isolated mode (no fawkes, no site packages), as it runs on a host."""
    shipped = tmp_path / "fawkes-watchdog.py"
    shutil.copy(AGENT, shipped)
    p = subprocess.Popen(["/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable, "-I", "-S",
                          str(shipped), "--stdin-eof", "--", "sleep", "120"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    started = json.loads(p.stdout.readline())
    assert started["event"] == "started"
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE
    r = subprocess.run([sys.executable, "-m", "fawkes.agent.watchdog", "--cpu", "7"], capture_output=True, text=True)
    assert r.returncode == 2 and "--cpu" in r.stderr


def test_promote_hands_the_worker_over_uncapped_and_still_running(host, tmp_path):
    """U-3: 'promote' on stdin: the worker leaves its capped group, gets nice 0, outlives the watchdog."""
    dirs, _ = host
    pidfile = tmp_path / "worker.pid"
    p = run_wd(*idle(host), "--worker-cpus", "0.02", "--worker-shares", "2", "--worker-pidfile", str(pidfile),
               "--stdin-eof", *WORKER)
    started = events(p, "started")[0]
    members = worker_pids(started)
    (group,) = started["groups"]
    assert int(pidfile.read_text()) in members  # the command's pid (the shell), for the daemon's pid file
    try:
        p.stdin.write("promote\n")
        p.stdin.flush()
        ev = events(p, "promoted")
        assert ev[-1]["event"] == "promoted" and p.wait(10) == wd.EXIT_PROMOTED
        time.sleep(1.5)  # the keeper would have killed the group by now, were it still armed
        assert all(alive(m) for m in members)
        assert not Path(group).exists()
        # back in the group the worker's group was made in (the watchdog's own: the host's, on a host)
        assert all(m in {int(x) for x in (Path(group).parent / "cgroup.procs").read_text().split()} for m in members)
        assert all(os.getpriority(os.PRIO_PROCESS, m) == 0 for m in members)
    finally:
        for m in members:
            try:
                os.kill(m, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_sample_measures_once(host):
    dirs, spawn = host
    r = subprocess.run([sys.executable, str(AGENT), "--sample", "--period", "0.5", *idle(host)],
                       capture_output=True, text=True, timeout=30)
    s = json.loads(r.stdout)
    assert r.returncode == 0 and s["event"] == "sample" and s["cpus"] == pytest.approx(0.05)
    assert 0 <= s["cpu"] < 0.5 and 0 <= s["mem"] < 0.5
    spawn(["sh", "-c", "while :; do :; done"])
    r = subprocess.run([sys.executable, str(AGENT), "--sample", "--period", "1", *idle(host)],
                       capture_output=True, text=True, timeout=30)
    assert json.loads(r.stdout)["cpu"] > 0.9


def test_sample_follow_reports_every_period_until_stdin_closes(host):
    """--sample --follow: the coordinator's monitor of a host, one process a host (not an interpreter per
    measurement); a line per period, the load seen, and it exits when its stdin closes."""
    dirs, spawn = host
    p = run_wd("--sample", "--follow", "--period", "0.3", "--stdin-eof", *idle(host))
    first = events(p, "sample")
    assert first[-1]["cpus"] == pytest.approx(0.05) and first[-1]["cpu"] < 0.5 and "cpu_scope" in first[-1]
    spawn(["sh", "-c", "while :; do :; done"])
    deadline = time.monotonic() + 15
    busy = None
    while time.monotonic() < deadline:
        ev = events(p, "sample")[-1]
        assert "cpu_scope" not in ev and ev["cpus"] == pytest.approx(0.05)  # the scopes once, at the start
        if ev["cpu"] > 0.9:
            busy = ev
            break
    assert busy is not None, "the monitor never saw the load"
    p.stdin.close()
    assert p.wait(10) == wd.EXIT_GONE
    assert json.loads(p.stdout.read().strip().splitlines()[-1])["reason"] == "coordinator gone: stdin closed"


def test_follow_without_sample_is_refused():
    r = subprocess.run([sys.executable, str(AGENT), "--follow", "--", "true"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == wd.EXIT_BAD and r.stderr.strip() == "watchdog: --follow goes with --sample"
