#!/usr/bin/env python3
"""The node-local preemption watchdog of an opportunistic worker (issue 12; UBIS seed 004, U-2).

One watchdog guards ONE opportunistic worker on one host.  Every ``--period`` seconds (1) it reads
the host's use, CPU and memory, from procfs and cgroups; after ``--count`` (3) checks in a row above
``--cpu`` (0.99) or ``--mem`` (0.95) of the host's capacity it stops the worker at once (SIGTERM to
the worker's process group, SIGKILL after ``--grace`` seconds), without asking the coordinator, and
reports it: one JSON line on stdout per event, and the last event in ``--status FILE``.

Stdlib only, one file: fawkes ships it to a host as it is and runs it with the host's ``python3``
(``python3 watchdog.py ...``), or ``python3 -m fawkes.agent.watchdog ...`` where fawkes is installed.

    watchdog.py [options] -- COMMAND [ARG...]   start COMMAND as the worker and guard it
    watchdog.py [options] --pgid N [--start-time T]   guard the existing process group N
    watchdog.py [options] --pid N               guard the process group that process N leads

**Which processes are the worker's.**  Started by the watchdog, the worker runs in a new session
whose leader is a small keeper process (a fork of the watchdog) that starts COMMAND; the keeper
stays the watchdog's unreaped child until every process of the group is gone, so the group's number
cannot be reused while the watchdog guards it.  A process is signalled only if its process group is
the worker's, it started no earlier than the group's leader, the group's leader (when it exists) is
the one recorded (same start time), and the group has never been seen empty; each signal goes
through a pidfd opened *before* the process was checked, so a pid reused between the check and the
signal is never hit.  A process that left the group (``setsid``) is not the watchdog's to kill.

**Nothing is left running** when the coordinator goes away: ``--stdin-eof`` (the SSH session that
started the watchdog closed), ``--stdin-timeout S`` (no line on stdin for S seconds: the coordinator
writes one every second; a partition stops it), ``--heartbeat FILE`` older than
``--heartbeat-timeout``, or SIGTERM/SIGINT/SIGHUP: each stops the worker and the watchdog exits.
If the watchdog itself is killed (SIGKILL, OOM), the keeper gets a parent-death signal and kills
its own group.  If the host goes away, so does everything on it.

**Host use.**  CPU: of the cgroup that limits this process (the tightest ``cpu.max`` /
``cpu.cfs_quota_us`` among its groups: a lab host's quota) or of ``--cpu-cgroup DIR``; its usage from
``cpu.stat`` (v2) or ``cpuacct.usage`` or the summed ``/proc/PID/stat`` times of its processes, over
its quota; a group throttled in at least half of the interval's periods counts as full (its demand
exceeds its quota).  Without a limiting group: ``/proc/stat`` over the machine.  Memory: the limiting
memory group's usage less its inactive file cache over its limit, else ``/proc/meminfo``
(MemTotal − MemAvailable).  The worker's own use counts (UBIS: aggregate use); its cgroup
(``--worker-cpus``, ``--worker-shares``, ``--worker-memory-mb``) caps it below the threshold.

**A new cap** (U-6): the line ``cap X`` on stdin sets the worker's cpu group to X cores (reported as a
``cap`` event, or ``cap-refused`` with why); the coordinator sends it when its T_alloc moves.

**Promotion** (U-3): the line ``promote`` on stdin hands the worker over as a regular one: the keeper no
longer kills its group when the watchdog ends, the worker's processes leave its capped cgroups for
the host's own and get nice 0 again, and the watchdog exits (code 6) leaving the worker running.

``--sample``: no worker; one measurement of the host's use over ``--period`` seconds, printed as one
JSON line (the coordinator's slack measurement uses the same code as the watchdog).

Exit codes: 0 the worker ended by itself, 2 bad arguments (one line, nothing started), 3 stopped for
load, 4 stopped because the coordinator went away, 5 stopped by a signal to the watchdog, 6 promoted.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque

EXIT_DONE, EXIT_BAD, EXIT_LOAD, EXIT_GONE, EXIT_SIGNAL, EXIT_PROMOTED = 0, 2, 3, 4, 5, 6
CLK = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1
HUGE = 1 << 60


class BadInput(Exception):
    pass


# ------------------------------------------------------------------------------------------ the rule
def rule(streak: int, use: dict, limit: dict, count: int) -> tuple[int, bool]:
    """One check (the same rule as ``fawkes.mechanism.opportunistic.watchdog`` with use as fractions):
    (the new streak of checks above a limit, whether to stop the worker now)."""
    streak = streak + 1 if any(use.get(r, 0.0) > limit[r] for r in limit) else 0
    return (0, True) if streak >= count else (streak, False)


# ------------------------------------------------------------------------------------------ procfs
def proc_stat(pid: int):
    """(state, pgid, start time in ticks, utime + stime in ticks) of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()
    try:
        return rest[0].decode(), int(rest[2]), int(rest[19]), int(rest[11]) + int(rest[12])
    except (IndexError, ValueError):
        return None


def pids():
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


# ------------------------------------------------------------------------------------------ cgroups
def _mounts():
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        pre, _, post = line.partition(" - ")
        f, p = pre.split(), post.split()
        if len(f) >= 5 and len(p) >= 3 and p[0] in ("cgroup", "cgroup2"):
            out.append((f[3], f[4].replace("\\040", " "), p[0], p[2].split(",")))
    return out


def hierarchy(controller: str):
    """(mount point, version, root) where ``controller`` is usable, or None."""
    mounts = _mounts()
    for root, mount, fstype, _ in mounts:
        if fstype == "cgroup2":
            try:
                with open(os.path.join(mount, "cgroup.controllers")) as f:
                    if controller in f.read().split():
                        return mount, 2, root
            except OSError:
                pass
    for root, mount, fstype, opts in mounts:
        if fstype == "cgroup" and controller in opts:
            return mount, 1, root
    return None


def own_dir(controller: str):
    """(directory of this process's group in ``controller``'s hierarchy, version), or None."""
    h = hierarchy(controller)
    if h is None:
        return None
    mount, version, root = h
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, ctls, path = (line.split(":", 2) + ["", ""])[:3]
        if (version == 2 and hid == "0") or (version == 1 and controller in ctls.split(",")):
            if not path.startswith(root):
                return None
            d = os.path.join(mount, path[len(root):].lstrip("/"))
            return (d, version) if os.path.isdir(d) else None
    return None


def ensure_cgroups() -> str | None:
    """Make the cgroup hierarchies visible to this process where none is mounted (a lab host: ``ip netns
    exec`` gave it a fresh /sys): in a mount namespace of its own (nothing changes for anyone else), a
    tmpfs over /sys/fs/cgroup and each v1 hierarchy of /proc/cgroups (co-mounted controllers together),
    or the v2 one.  Returns what was done (None: nothing was needed or possible)."""
    if hierarchy("cpu") is not None or hierarchy("memory") is not None or os.geteuid() != 0:
        return None
    libc = _libc()
    if libc is None or not os.path.isdir("/sys/fs/cgroup"):
        return None
    clone_newns, ms_rec, ms_private = 0x20000, 16384, 1 << 18
    if libc.unshare(clone_newns) != 0:
        return None
    libc.mount(b"none", b"/", None, ms_rec | ms_private, None)
    if libc.mount(b"cgroup_root", b"/sys/fs/cgroup", b"tmpfs", 0, b"mode=755") != 0:
        return None
    groups: dict[int, list[str]] = {}
    for line in (_read("/proc/cgroups") or "").splitlines()[1:]:
        f = line.split()
        if len(f) >= 4 and f[3] == "1" and f[1] != "0":
            groups.setdefault(int(f[1]), []).append(f[0])
    done = []
    for ctrls in groups.values():
        opts = ",".join(ctrls)
        d = os.path.join("/sys/fs/cgroup", opts)
        os.makedirs(d, exist_ok=True)
        if libc.mount(b"cgroup", d.encode(), b"cgroup", 0, opts.encode()) == 0:
            done.append(opts)
    if not groups:  # v2 only
        d = "/sys/fs/cgroup"
        if libc.mount(b"cgroup2", d.encode(), b"cgroup2", 0, None) == 0:
            done.append("cgroup2")
    return "mounted " + " ".join(done) if done else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _kv(path: str) -> dict:
    out = {}
    for line in (_read(path) or "").splitlines():
        k, _, v = line.partition(" ")
        if v.strip().lstrip("-").isdigit():
            out[k] = int(v)
    return out


def cpu_limit(d: str) -> float | None:
    """The CPU quota of group ``d`` in cores, None without one."""
    v = _read(os.path.join(d, "cpu.max"))
    if v is not None:
        q, p = (v.split() + ["100000"])[:2]
        return None if q == "max" else int(q) / int(p)
    q, p = _read(os.path.join(d, "cpu.cfs_quota_us")), _read(os.path.join(d, "cpu.cfs_period_us"))
    if q is None or p is None or int(q) < 0:
        return None
    return int(q) / int(p)


def mem_limit(d: str) -> int | None:
    for name in ("memory.max", "memory.limit_in_bytes"):
        v = _read(os.path.join(d, name))
        if v is None:
            continue
        v = v.strip()
        return None if v == "max" or not v.isdigit() or int(v) >= HUGE else int(v)
    return None


def limiting(controller: str):
    """The group with the tightest limit among this process's own group and its ancestors:
    (directory, version), or None when none is limited (then the machine is the host)."""
    h = hierarchy(controller)
    start = own_dir(controller)
    if h is None or start is None:
        return None
    mount = os.path.normpath(h[0])
    d, version = os.path.normpath(start[0]), start[1]
    best = None
    while True:
        v = cpu_limit(d) if controller == "cpu" else mem_limit(d)
        if v is not None and (best is None or v < best[0]):
            best = (v, d)
        if d == mount or len(d) <= len(mount):
            break
        d = os.path.dirname(d)
    return None if best is None else (best[1], version)


def group_pids(d: str):
    """Processes of group ``d`` and of its descendants (as this pid namespace numbers them)."""
    out = set()
    for root, _dirs, files in os.walk(d):
        if "cgroup.procs" in files:
            for line in (_read(os.path.join(root, "cgroup.procs")) or "").split():
                if line.isdigit() and int(line) > 0:
                    out.add(int(line))
    return out


class CpuMeter:
    """Host CPU use as a fraction of the host's capacity over the last interval."""

    def __init__(self, scope):
        self.scope = scope  # (dir, version) or None (the machine)
        self.prev = None
        if scope is None:
            self.capacity = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
        else:
            self.capacity = cpu_limit(scope[0]) or float(os.cpu_count() or 1)
            mount_v1 = hierarchy("cpuacct")
            self.acct = None
            if os.path.isfile(os.path.join(scope[0], "cpuacct.usage")):
                self.acct = os.path.join(scope[0], "cpuacct.usage")
            elif scope[1] == 1 and mount_v1 is not None:  # cpuacct mounted apart: the same path there
                cpu = hierarchy("cpu")
                rel = os.path.relpath(scope[0], cpu[0]) if cpu else None
                p = os.path.join(mount_v1[0], rel, "cpuacct.usage") if rel else None
                if p and os.path.isfile(p):
                    self.acct = p
        self.proc_prev: dict = {}

    @property
    def where(self) -> str:
        return "machine" if self.scope is None else self.scope[0]

    def used_s(self) -> float:
        """CPU seconds the scope has used so far (UBIS U-6: an opportunistic worker's work)."""
        return self._usage()

    def _usage(self) -> float:
        """CPU seconds used so far (machine: busy seconds over all CPUs)."""
        if self.scope is None:
            f = (_read("/proc/stat") or "cpu 0 0 0 0").splitlines()[0].split()[1:]
            v = [int(x) for x in f[:8]] + [0] * (8 - len(f[:8]))
            return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / CLK
        d = self.scope[0]
        st = _kv(os.path.join(d, "cpu.stat"))
        if "usage_usec" in st:
            return st["usage_usec"] / 1e6
        if self.acct:
            v = _read(self.acct)
            if v and v.strip().isdigit():
                return int(v) / 1e9
        # no accounting file for this group: the summed times of its processes (a process that exited
        # during the interval loses its last part: the estimate errs low)
        cur = {}
        total = 0.0
        for pid in group_pids(d):
            s = proc_stat(pid)
            if s is not None:
                key = (pid, s[2])
                cur[key] = s[3]
                total += s[3] - self.proc_prev.get(key, 0)
        self.proc_prev = cur
        self._acc = getattr(self, "_acc", 0.0) + total / CLK
        return self._acc

    def _throttle(self):
        if self.scope is None:
            return 0, 0
        st = _kv(os.path.join(self.scope[0], "cpu.stat"))
        return st.get("nr_periods", 0), st.get("nr_throttled", 0)

    def sample(self) -> float | None:
        """The use since the last call (None on the first call, which sets the baseline)."""
        now = time.monotonic()
        u = self._usage()
        p, t = self._throttle()
        prev, self.prev = self.prev, (now, u, p, t)
        if prev is None:
            return None
        dt = now - prev[0]
        if dt <= 0:
            return 0.0
        use = (u - prev[1]) / (dt * self.capacity)
        dp, dtr = p - prev[2], t - prev[3]
        if dp > 0 and dtr * 2 >= dp:  # throttled in at least half of the periods: demand beyond the quota
            use = max(use, 1.0)
        return max(0.0, use)


class MemMeter:
    def __init__(self, scope):
        self.scope = scope
        limit = None if scope is None else mem_limit(scope[0])
        self.capacity = limit or self._meminfo().get("MemTotal", 1)  # a group without a limit: the machine's

    @property
    def where(self) -> str:
        return "machine" if self.scope is None else self.scope[0]

    @staticmethod
    def _meminfo() -> dict:
        out = {}
        for line in (_read("/proc/meminfo") or "").splitlines():
            k, _, v = line.partition(":")
            f = v.split()
            if f and f[0].isdigit():
                out[k] = int(f[0]) * 1024
        return out

    def sample(self) -> float:
        if self.scope is None:
            m = self._meminfo()
            return (m.get("MemTotal", 0) - m.get("MemAvailable", 0)) / max(1, self.capacity)
        d, version = self.scope
        st = _kv(os.path.join(d, "memory.stat"))
        if version == 2:
            cur = int((_read(os.path.join(d, "memory.current")) or "0").strip() or 0)
            inactive = st.get("inactive_file", 0)
        else:
            cur = int((_read(os.path.join(d, "memory.usage_in_bytes")) or "0").strip() or 0)
            inactive = st.get("total_inactive_file", st.get("inactive_file", 0))
        return max(0, cur - inactive) / self.capacity


def _scope(arg: str, controller: str):
    if arg == "auto":
        return limiting(controller)
    if arg == "machine":
        return None
    h = hierarchy(controller)
    if h is None:
        raise BadInput(f"--{'cpu' if controller == 'cpu' else 'mem'}-cgroup: no cgroup {controller} controller is mounted")
    d = arg if os.path.isabs(arg) else os.path.join(h[0], arg)
    if not os.path.isdir(d) or not os.path.isfile(os.path.join(d, "cgroup.procs")):
        raise BadInput(f"--{'cpu' if controller == 'cpu' else 'mem'}-cgroup: {arg!r} is not a cgroup directory")
    return os.path.normpath(d), h[1]


# ------------------------------------------------------------------------------------------ the worker
class Guard:
    """The guarded worker: process group ``pgid`` whose leader started at ``start`` (ticks since boot)."""

    def __init__(self, pgid: int, start: int, child: int | None = None, ack: int | None = None):
        self.pgid, self.start, self.child, self.ack = pgid, start, child, ack
        self.ended = False  # the group was seen empty: never signal it again
        self.me = {os.getpid(), os.getppid(), 1}

    @classmethod
    def attach(cls, pid: int, start: int | None = None) -> "Guard":
        s = proc_stat(pid)
        if s is None or s[0] in "ZX":
            raise BadInput(f"--pgid/--pid: no live process {pid}")
        if s[1] != pid:
            raise BadInput(f"--pgid/--pid: process {pid} does not lead a process group (its group is {s[1]})")
        if start is not None and s[2] != start:
            raise BadInput(f"--start-time: process {pid} started at {s[2]}, not {start}: not the recorded worker")
        if pid == os.getpgrp() or pid in (os.getpid(), 1):
            raise BadInput(f"--pgid/--pid: {pid} is the watchdog's own process group")
        return cls(pid, s[2])

    def _foreign(self) -> bool:
        """The group's number now names another group: its leader's pid carries another process."""
        s = proc_stat(self.pgid)
        return s is not None and s[0] not in "ZX" and (s[2] != self.start or s[1] != self.pgid)

    def _member(self, s) -> bool:
        return s is not None and s[0] not in "ZX" and s[1] == self.pgid and s[2] >= self.start

    def members(self) -> list[int]:
        if self.ended:
            return []
        if self._foreign():
            self.ended = True
            return []
        out = [p for p in pids() if p not in self.me and self._member(proc_stat(p))]
        if not out:
            self.ended = True
        return out

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every verified member; how many got it."""
        n = 0
        for pid in self.members():
            try:
                fd = os.pidfd_open(pid)
            except (OSError, AttributeError):
                if hasattr(os, "pidfd_open"):
                    continue
                fd = None  # Python < 3.9 or an old kernel: checked just before the kill (a tiny race)
            try:
                if not self._member(proc_stat(pid)) or self._foreign():
                    continue
                if fd is None:
                    os.kill(pid, sig)
                else:
                    signal.pidfd_send_signal(fd, sig)
                n += 1
            except (ProcessLookupError, PermissionError):
                pass
            finally:
                if fd is not None:
                    os.close(fd)
        return n

    def child_exit(self):
        """The keeper's exit status if it has exited (not reaped: its pid stays pinned), else None."""
        if self.child is None:
            return None
        try:
            r = os.waitid(os.P_PID, self.child, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return -1
        if r is None:
            return None
        return r.si_status if r.si_code == os.CLD_EXITED else 128 + r.si_status

    def disarm(self, timeout: float = 3.0) -> bool:
        """Ask the keeper to stop guarding its group (no kill when the watchdog ends); True once it said so."""
        if self.child is None or self.ack is None or self.child_exit() is not None:
            return False
        try:
            fd = os.pidfd_open(self.child)
        except OSError:
            return False
        try:
            signal.pidfd_send_signal(fd, signal.SIGUSR2)
        except OSError:
            return False
        finally:
            os.close(fd)
        import select

        ready, _, _ = select.select([self.ack], [], [], timeout)
        return bool(ready) and os.read(self.ack, 1) == b"r"

    def reap(self) -> None:
        if self.child is not None:
            try:
                os.waitpid(self.child, 0)
            except ChildProcessError:
                pass
            self.child = None


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def make_worker_groups(args) -> list[str]:
    """Create the worker's cgroups (a child of this process's own group in each hierarchy);
    return their directories.  Nothing when no cap or weight is asked for."""
    dirs = []
    name = f"fawkes-opp-{os.getpid()}"
    if args.worker_cpus is not None or args.worker_shares is not None:
        own = own_dir("cpu")
        if own is None:
            raise BadInput("--worker-cpus/--worker-shares: no cgroup cpu controller for this process")
        d, v = os.path.join(own[0], name), own[1]
        try:
            os.makedirs(d, exist_ok=True)
            if args.worker_cpus is not None:
                set_cpu_cap(d, args.worker_cpus)
            if args.worker_shares is not None:
                if v == 2:  # v1 shares 2..262144 -> v2 weight 1..10000
                    _write(os.path.join(d, "cpu.weight"), str(max(1, min(10000, 1 + (args.worker_shares - 2) * 9999 // 262142))))
                else:
                    _write(os.path.join(d, "cpu.shares"), str(args.worker_shares))
        except OSError as exc:
            _rmdir(d)
            raise BadInput(f"--worker-cpus/--worker-shares: cannot set up cgroup {d}: {exc.strerror or exc}") from None
        dirs.append(d)
    if args.worker_memory_mb is not None:
        own = own_dir("memory")
        if own is None:
            raise BadInput("--worker-memory-mb: no cgroup memory controller for this process")
        d, v = os.path.join(own[0], name), own[1]
        try:
            os.makedirs(d, exist_ok=True)
            _write(os.path.join(d, "memory.max" if v == 2 else "memory.limit_in_bytes"), str(args.worker_memory_mb << 20))
        except OSError as exc:
            _rmdir(d)
            for x in dirs:
                _rmdir(x)
            raise BadInput(f"--worker-memory-mb: cannot set up cgroup {d}: {exc.strerror or exc}") from None
        dirs.append(d)
    return dirs


def set_cpu_cap(d: str, cpus: float) -> None:
    """Cap the cpu group ``d`` at ``cpus`` cores (a 100-ms period; at least 1 ms of it)."""
    quota = str(max(1000, round(cpus * 100000)))
    if os.path.isfile(os.path.join(d, "cpu.max")):
        _write(os.path.join(d, "cpu.max"), f"{quota} 100000")
    else:
        _write(os.path.join(d, "cpu.cfs_period_us"), "100000")
        _write(os.path.join(d, "cpu.cfs_quota_us"), quota)


def cpu_group(groups: list[str]) -> str | None:
    """The worker's own cpu group among ``groups`` (None without one)."""
    h = hierarchy("cpu")
    return next((g for g in groups if h is not None and g.startswith(h[0].rstrip("/") + "/")), None)


def recap(groups: list[str], text: str, capacity: float) -> dict:
    """The coordinator's ``cap X`` line (UBIS U-6: T_alloc moved, so does a lent worker's cap): set the
    worker's cpu group to X cores.  The event to report: ``cap`` with the new cap, or ``cap-refused``
    with why (a worker without a cpu group, X not a number in [0.01, the host's capacity], a failed write)."""
    d = cpu_group(groups)
    try:
        cpus = float(text)
    except ValueError:
        cpus = math.nan
    if not 0.01 <= cpus <= capacity:  # NaN and inf fail here too
        return {"event": "cap-refused", "reason": f"cap {text[:40]!r}: not a number of cores in [0.01, {capacity:g}]"}
    if d is None:
        return {"event": "cap-refused", "reason": "the worker has no cpu group of its own (no --worker-cpus)"}
    try:
        set_cpu_cap(d, cpus)
    except OSError as exc:
        return {"event": "cap-refused", "reason": f"cannot write {d}: {exc.strerror or exc}"}
    return {"event": "cap", "cpus": round(cpus, 4)}


def worker_meter(groups: list[str]) -> "CpuMeter | None":
    """The CPU meter of the worker's own cpu group (None without one): the ``worker_cpu_s`` of the check and
    stop events, the CPU seconds the worker has used since it started."""
    d = cpu_group(groups)
    return CpuMeter((d, hierarchy("cpu")[1])) if d else None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text + "\n")


def _rmdir(d: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.isdir(d):
        try:
            os.rmdir(d)
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def launch(argv: list[str], nice: int, groups: list[str], log: str, pidfile: str | None = None) -> Guard:
    """Fork the keeper: it leads a new session (the worker's group), joins ``groups``, lowers its
    priority, dies with the watchdog (killing its group), and runs ``argv`` as its child."""
    parent = os.getpid()
    r, w = os.pipe()
    ack_r, ack_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # ---- the keeper
        try:
            os.close(r)
            os.close(ack_r)
            os.setsid()

            def kill_group(*_):
                os.killpg(0, signal.SIGKILL)

            libc = _libc()

            def disarm(*_):  # promoted: the group outlives the watchdog
                if libc is not None:
                    libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
                signal.signal(signal.SIGUSR1, signal.SIG_IGN)
                os.write(ack_w, b"r")

            signal.signal(signal.SIGUSR1, kill_group)
            signal.signal(signal.SIGUSR2, disarm)
            if libc is not None:
                libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
            if os.getppid() != parent:  # the watchdog died before the line above
                kill_group()
            for d in groups:
                _write(os.path.join(d, "cgroup.procs"), str(os.getpid()))
            cur = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, max(cur, nice))
            for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
                signal.signal(s, signal.SIG_DFL)
            # the keeper and the worker keep nothing of the watchdog's stdin/stdout (the SSH channel)
            null = os.open(os.devnull, os.O_RDWR)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log != os.devnull else null
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            try:
                child = subprocess.Popen(argv, close_fds=True, pass_fds=())
            except OSError as exc:
                os.write(w, f"cannot start {argv[0]!r}: {exc.strerror or exc}".encode())
                os._exit(127)
            if pidfile:
                tmp = f"{pidfile}.tmp{os.getpid()}"
                with open(tmp, "w") as f:
                    f.write(f"{child.pid}\n")
                os.replace(tmp, pidfile)
            os.write(w, b"ok")
            os.close(w)
            rc = child.wait()
            os._exit(rc if rc >= 0 else 128 - rc)
        except BaseException:  # noqa: BLE001 - never return into the watchdog's code
            os._exit(126)
    os.close(w)
    os.close(ack_w)
    msg = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        msg += chunk
    os.close(r)
    if msg != b"ok":
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        raise BadInput(msg.decode(errors="replace") or "the worker could not be started")
    s = proc_stat(pid)
    return Guard(pid, s[2] if s else 0, child=pid, ack=ack_r)


# ------------------------------------------------------------------------------------------ coordinator
class CoordinatorLink:
    """Whether the coordinator is still there: stdin open and talking, heartbeat file fresh."""

    def __init__(self, args):
        self.gone_reason: str | None = None
        self.promote = False
        self.caps: deque[str] = deque(maxlen=8)  # "cap X" lines not yet carried out (UBIS U-6), oldest first
        self.last_line = time.monotonic()
        self.stdin_eof, self.stdin_timeout = args.stdin_eof, args.stdin_timeout
        self.heartbeat, self.hb_timeout = args.heartbeat, args.heartbeat_timeout
        self.wake = threading.Event()
        if self.heartbeat is not None and not os.path.exists(self.heartbeat):
            raise BadInput(f"--heartbeat: {self.heartbeat!r} does not exist")

    def start(self) -> None:
        """Watch stdin (after the worker is forked: the keeper must not inherit a reading thread)."""
        self.last_line = time.monotonic()
        if self.stdin_eof or self.stdin_timeout is not None:
            threading.Thread(target=self._read_stdin, daemon=True).start()

    def _read_stdin(self) -> None:
        # the raw descriptor, not sys.stdin: a daemon thread blocked inside a buffered reader's lock
        # aborts the interpreter at exit.  Lines: empty (a heartbeat), "promote", "cap X"; others ignored.
        buf = b""
        while True:
            try:
                data = os.read(0, 4096)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                self.gone_reason = "stdin closed"
                self.wake.set()
                return
            buf += data
            if b"\n" not in buf:
                buf = buf[-4096:]  # a line that never ends is not a command
                continue
            self.last_line = time.monotonic()
            *lines, buf = buf.split(b"\n")
            for line in lines:
                word, _, arg = line.strip().partition(b" ")
                if word == b"promote":
                    self.promote = True
                    self.wake.set()
                elif word == b"cap":
                    self.caps.append(arg.strip()[:64].decode("ascii", "replace"))
                    self.wake.set()

    def gone(self) -> str | None:
        if self.gone_reason:
            return self.gone_reason
        if self.stdin_timeout is not None and time.monotonic() - self.last_line > self.stdin_timeout:
            return f"no line on stdin for {self.stdin_timeout:g} s"
        if self.heartbeat is not None:
            try:
                age = time.time() - os.stat(self.heartbeat).st_mtime
            except OSError:
                return "heartbeat file gone"
            if age > self.hb_timeout:
                return f"heartbeat file {age:.1f} s old"
        return None


# ------------------------------------------------------------------------------------------ main
class Reporter:
    def __init__(self, status: str | None):
        self.status = status

    def __call__(self, event: str, **fields) -> None:
        rec = {"event": event, "time": round(time.time(), 3), **fields}
        line = json.dumps(rec, sort_keys=True)
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # stdout gone with the coordinator: the status file still says it
        if self.status:
            tmp = f"{self.status}.tmp{os.getpid()}"
            try:
                with open(tmp, "w") as f:
                    f.write(line + "\n")
                os.replace(tmp, self.status)
            except OSError:
                pass


def _number(lo: float, hi: float, *, lo_open: bool = False, integer: bool = False):
    def parse(text: str):
        try:
            v = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if integer else 'a number'}") from None
        if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
            fmt = (lambda x: str(int(x))) if integer else (lambda x: f"{x:g}")
            raise argparse.ArgumentTypeError(f"{text!r} is not in {'(' if lo_open else '['}{fmt(lo)}, {fmt(hi)}]")
        return v
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        sys.stderr.write(f"watchdog: {message}\n")
        sys.exit(EXIT_BAD)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="watchdog", description="guard one opportunistic worker (fawkes.agent.watchdog)")
    p.add_argument("--period", type=_number(0.05, 60, lo_open=True), default=1.0, help="seconds between checks (1)")
    p.add_argument("--count", type=_number(1, 1000, integer=True), default=3, help="checks in a row over a limit (3)")
    p.add_argument("--cpu", type=_number(0, 1, lo_open=True), default=0.99, help="CPU limit, fraction of capacity (0.99)")
    p.add_argument("--mem", type=_number(0, 1, lo_open=True), default=0.95, help="memory limit, fraction (0.95)")
    p.add_argument("--grace", type=_number(0, 600), default=2.0, help="seconds between SIGTERM and SIGKILL (2)")
    p.add_argument("--cpu-cgroup", default="auto", help="host CPU scope: auto (the limiting group), machine, or a group")
    p.add_argument("--mem-cgroup", default="auto", help="host memory scope: auto, machine, or a group")
    p.add_argument("--status", help="file holding the last event (JSON)")
    p.add_argument("--stdin-eof", action="store_true", help="stdin closed = the coordinator is gone")
    p.add_argument("--stdin-timeout", type=_number(0, 86400, lo_open=True), help="no line on stdin for S s = gone")
    p.add_argument("--heartbeat", help="a file the coordinator touches")
    p.add_argument("--heartbeat-timeout", type=_number(0, 86400, lo_open=True), default=10.0)
    p.add_argument("--nice", type=_number(0, 19, integer=True), default=19, help="the worker's nice value (19)")
    p.add_argument("--worker-cpus", type=_number(0, 4096, lo_open=True), help="CPU quota of the worker's cgroup, cores")
    p.add_argument("--worker-shares", type=_number(2, 262144, integer=True), help="cpu.shares of the worker's cgroup")
    p.add_argument("--worker-memory-mb", type=_number(1, 1 << 30, integer=True), help="memory limit of the worker's cgroup")
    p.add_argument("--worker-log", default=os.devnull, help="the worker's stdout and stderr (default: discarded)")
    p.add_argument("--pgid", type=_number(2, 1 << 22, integer=True), help="guard this existing process group")
    p.add_argument("--pid", type=_number(2, 1 << 22, integer=True), help="guard the group this process leads")
    p.add_argument("--start-time", type=_number(0, 1 << 62, integer=True), help="the leader's recorded start time (ticks)")
    p.add_argument("--verbose", action="store_true", help="a line per check")
    p.add_argument("--worker-pidfile", help="file the started worker's pid is written to")
    p.add_argument("--sample", action="store_true", help="measure the host's use once (over --period s) and exit")
    p.add_argument("--follow", action="store_true", help="with --sample: a sample every --period s until stdin "
                   "closes or stays silent (--stdin-eof, --stdin-timeout) or a signal")
    p.add_argument("--load-grace", type=_number(0, 600), default=0.0,
                   help="seconds between SIGTERM and SIGKILL when the load stops the worker (0: SIGKILL at once, "
                   "FP-style: a worker starved of CPU by the owner's load cannot shut down in time anyway)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARG...: the worker to start")
    return p


def _stop_on_signals(coord) -> list[str]:
    """SIGTERM, SIGINT and SIGHUP end the loop (their names are appended to the list returned, and the
    coordinator link's wait is woken); SIGPIPE is ignored (a vanished reader is seen on write)."""
    stop_sig: list[str] = []

    def on_signal(sig, _frame):
        stop_sig.append(signal.Signals(sig).name)
        coord.wake.set()

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    return stop_sig


def follow(args, cpu, mem, report, mounted) -> int:
    """``--sample --follow``: a sample line every ``--period`` s until the coordinator is gone (stdin
    closed or silent) or a signal: the coordinator's view of a host's use, one process per host kept
    running instead of an interpreter started per measurement (that costs a small lab host more than
    a tenth of its CPU quota at one a second)."""
    try:
        coord = CoordinatorLink(args)
    except BadInput as exc:
        sys.stderr.write(f"watchdog: {exc}\n")
        return EXIT_BAD
    stop_sig = _stop_on_signals(coord)
    coord.start()
    cpu.sample()
    first = True
    next_at = time.monotonic() + args.period
    while not stop_sig:
        coord.wake.wait(max(0.0, min(next_at - time.monotonic(), 0.5)))
        coord.wake.clear()
        gone = coord.gone()
        if gone:
            report("exit", reason=f"coordinator gone: {gone}", code=EXIT_GONE)
            return EXIT_GONE
        if stop_sig or time.monotonic() < next_at:
            continue
        next_at += args.period
        if next_at < time.monotonic():  # a stall: no burst of catching up
            next_at = time.monotonic() + args.period
        fields = {"mem_bytes": mem.capacity, "cpu_scope": cpu.where, "mem_scope": mem.where,
                  "cgroups": mounted} if first else {}
        first = False
        report("sample", cpu=round(cpu.sample() or 0.0, 4), mem=round(mem.sample(), 4), cpus=round(cpu.capacity, 4),
               **fields)
    report("exit", reason=f"signal {stop_sig[0]}", code=EXIT_SIGNAL)
    return EXIT_SIGNAL


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    report = Reporter(args.status)
    groups: list[str] = []
    if args.follow and not args.sample:
        sys.stderr.write("watchdog: --follow goes with --sample\n")
        return EXIT_BAD
    mounted = ensure_cgroups()
    if args.sample:
        try:
            if cmd or args.pgid or args.pid:
                raise BadInput("--sample measures only: no worker")
            cpu = CpuMeter(_scope(args.cpu_cgroup, "cpu"))
            mem = MemMeter(_scope(args.mem_cgroup, "memory"))
        except BadInput as exc:
            sys.stderr.write(f"watchdog: {exc}\n")
            return EXIT_BAD
        if not args.follow:
            cpu.sample()
            time.sleep(args.period)
            report("sample", cpu=round(cpu.sample() or 0.0, 4), mem=round(mem.sample(), 4),
                   cpus=round(cpu.capacity, 4), mem_bytes=mem.capacity, cpu_scope=cpu.where, mem_scope=mem.where,
                   cgroups=mounted)
            return EXIT_DONE
        return follow(args, cpu, mem, report, mounted)
    worker_cpu = None  # the worker's own CPU meter (its cpu group), when the watchdog made one
    try:
        modes = sum(x is not None for x in (args.pgid, args.pid)) + bool(cmd)
        if modes != 1:
            raise BadInput("give exactly one of --pgid N, --pid N or -- COMMAND")
        if cmd and args.start_time is not None:
            raise BadInput("--start-time goes with --pgid or --pid")
        if not cmd and (args.worker_cpus or args.worker_shares or args.worker_memory_mb):
            raise BadInput("--worker-cpus/--worker-shares/--worker-memory-mb apply to a worker the watchdog starts")
        cpu = CpuMeter(_scope(args.cpu_cgroup, "cpu"))
        mem = MemMeter(_scope(args.mem_cgroup, "memory"))
        coord = CoordinatorLink(args)
        if cmd:
            groups = make_worker_groups(args)
            guard = launch(cmd, args.nice, groups, args.worker_log, args.worker_pidfile)
            worker_cpu = worker_meter(groups)
        else:
            guard = Guard.attach(args.pgid or args.pid, args.start_time)
    except BadInput as exc:
        for d in groups:
            _rmdir(d)
        sys.stderr.write(f"watchdog: {exc}\n")
        return EXIT_BAD

    stop_sig = _stop_on_signals(coord)

    coord.start()
    limit = {"cpu": args.cpu, "mem": args.mem}
    report("started", pid=guard.child or guard.pgid, pgid=guard.pgid, start_time=guard.start, watchdog=os.getpid(),
           cpu_scope=cpu.where, cpu_capacity=round(cpu.capacity, 4), mem_scope=mem.where, mem_capacity=mem.capacity,
           limits=limit, count=args.count, period=args.period, groups=groups, cgroups=mounted)
    cpu.sample()
    streak, recent = 0, []
    t0 = time.monotonic()
    next_check = t0 + args.period
    reason, code, why = None, EXIT_DONE, {}
    while True:
        coord.wake.wait(max(0.0, min(next_check - time.monotonic(), 0.2)))
        coord.wake.clear()  # what woke it is kept in flags (signal, promote, caps, gone): a set event would spin
        if stop_sig:
            reason, code = f"signal {stop_sig[0]}", EXIT_SIGNAL
            break
        if coord.promote:
            coord.promote = False
            if guard.disarm():
                for d in groups:  # the host's own groups again: the worker is a regular one now
                    parent = os.path.dirname(d)
                    for pid in group_pids(d):
                        try:
                            _write(os.path.join(parent, "cgroup.procs"), str(pid))
                        except OSError:
                            pass
                    _rmdir(d)
                try:
                    os.setpriority(os.PRIO_PGRP, guard.pgid, 0)  # every thread of every process of the group
                except OSError:
                    pass
                report("promoted", pgid=guard.pgid, after_s=round(time.monotonic() - t0, 3))
                return EXIT_PROMOTED
            report("promote-failed", reason="the keeper did not answer")
        while coord.caps:
            ev = recap(groups, coord.caps.popleft(), cpu.capacity)
            report(ev.pop("event"), **ev)
        gone = coord.gone()
        if gone:
            reason, code = f"coordinator gone: {gone}", EXIT_GONE
            break
        rc = guard.child_exit()
        tick = time.monotonic() >= next_check
        # the group is scanned when the keeper has exited and once a period (a /proc scan is not free)
        if (rc is not None or tick) and not guard.members():
            reason, code, why = "worker exited", EXIT_DONE, {"worker_rc": rc}
            break
        if not tick:
            continue
        next_check += args.period
        if next_check < time.monotonic():  # a stall (suspended, overloaded): do not catch up in a burst
            next_check = time.monotonic() + args.period
        use = {"cpu": cpu.sample() or 0.0, "mem": mem.sample()}
        recent = (recent + [{k: round(v, 4) for k, v in use.items()}])[-args.count:]
        streak, fire = rule(streak, use, limit, args.count)
        if args.verbose:
            report("check", cpu=round(use["cpu"], 4), mem=round(use["mem"], 4), streak=streak,
                   **({"worker_cpu_s": round(worker_cpu.used_s(), 3)} if worker_cpu else {}))
        if fire:
            reason, code, why = "load", EXIT_LOAD, {"checks": recent}
            break

    if worker_cpu is not None and code != EXIT_DONE:  # the worker's work up to its stop (read before the signals)
        why = {**why, "worker_cpu_s": round(worker_cpu.used_s(), 3)}

    stopped = {}
    if code != EXIT_DONE:
        t = time.monotonic()
        grace = args.load_grace if code == EXIT_LOAD else args.grace
        term = guard.signal(signal.SIGTERM) if grace > 0 else 0
        deadline = t + grace
        while guard.members() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed = guard.signal(signal.SIGKILL) if guard.members() else 0
        while guard.members() and time.monotonic() < t + grace + 5:
            time.sleep(0.1)
        stopped = {"terminated": term, "killed": killed, "stop_s": round(time.monotonic() - t, 3),
                   "left": len(guard.members())}
        report("stopped", reason=reason, after_s=round(time.monotonic() - t0, 3), **why, **stopped)
    rc = guard.child_exit()
    guard.reap()
    for d in groups:
        _rmdir(d)
    report("exit", reason=reason, code=code, **({"worker_rc": rc} if rc is not None else {}))
    return code


if __name__ == "__main__":
    sys.exit(main())
