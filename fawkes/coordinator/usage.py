"""A host's CPU and memory use over SSH, from cgroups (v1 or v2) and procfs: CERES' per-node
maximum-utilisation window (``docs/mechanism.md``, "CERES").

One trusted shell script (:data:`SCRIPT`, no value of the caller in it) prints the raw text of the
files that say what the host holds and uses; the rest is pure parsing here:

* **the scope of each resource**: the group of the SSH session's shell in that controller's
  hierarchy (``/proc/$$/cgroup``: a lab host's sshd and daemons run in its own group) when that
  group, or a group above it, limits the resource (v2 ``cpu.max`` / ``memory.max``, v1
  ``cpu.cfs_quota_us`` / ``memory.limit_in_bytes``); otherwise the whole machine;
* **what it holds**: the CPU quota in cores (else the online CPUs), the memory limit (else
  ``MemTotal``);
* **what it uses**: CPU seconds, cumulative (v2 ``cpu.stat`` ``usage_usec``; v1 ``cpuacct.usage``
  when the session's cpuacct group is the quota's group, else the sum of ``utime + stime`` of
  the group's processes from ``/proc/PID/stat``; the machine: the busy jiffies of ``/proc/stat``),
  and memory in use (the group's ``memory.current`` / ``memory.usage_in_bytes`` less its inactive
  file cache; the machine: ``MemTotal - MemAvailable``);
* the host's ``/proc/uptime`` as the clock of its readings.

A :class:`UsageWindow` per host turns successive readings into fractions (CPU: used seconds over
elapsed seconds x cores, between two readings; memory: in use / held) and keeps their maxima over
the window: :meth:`UsageWindow.usage` is the snapshot's :class:`~fawkes.mechanism.model.NodeUsage`.
A v1 group measured by its processes loses the CPU time of processes that exited between two
readings (the sum can fall): such an interval counts what is left, at least 0.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field

from fawkes.errors import FawkesError
from fawkes.mechanism.model import NodeUsage
from fawkes.ssh.shell import Script, trusted

#: v1 reports "no memory limit" as a huge number (9223372036854771712)
UNLIMITED_BYTES = 1 << 60

SCRIPT = trusted(r"""
set -u
sec() { echo "@$1"; }
v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
v1mount() { awk -v c="$1" '$3 == "cgroup" {n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) {print $2; exit}}' /proc/mounts; }
v1path() { awk -v c="$1" '{i = index($0, ":"); r = substr($0, i + 1); j = index(r, ":"); n = split(substr(r, 1, j - 1), o, ",");
  for (k = 1; k <= n; k++) if (o[k] == c) {print substr(r, j + 1); exit}}' /proc/$$/cgroup; }
v2path() { awk -F: '$1 == "0" {print $3; exit}' /proc/$$/cgroup; }
dump() {  # dump TAG DIR FILE...: each file of DIR and of every group above it up to the mount
  tag=$1; dir=$2; top=$3; shift 3
  while :; do
    for f in "$@"; do [ -r "$dir/$f" ] && { echo "@$tag $dir $f"; cat "$dir/$f"; }; done
    [ "$dir" = "$top" ] && break
    dir=$(dirname "$dir")
    case "$dir" in "$top"*) ;; *) break;; esac
  done
}
sec uptime; cat /proc/uptime
sec nproc; getconf _NPROCESSORS_ONLN
sec clk_tck; getconf CLK_TCK
sec stat; head -n 1 /proc/stat
sec meminfo; grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
sec cgroup; cat /proc/$$/cgroup
if [ -n "$v2" ] && [ -f "$v2/cgroup.controllers" ] && [ -n "$(v2path)" ]; then
  g="$v2$(v2path)"; g=${g%/}
  dump v2 "$g" "$v2" cgroup.controllers cpu.max memory.max cpu.stat memory.current memory.stat
fi
m=$(v1mount cpu); p=$(v1path cpu)
if [ -n "$m" ] && [ -n "$p" ]; then
  g="$m$p"; g=${g%/}
  dump v1cpu "$g" "$m" cpu.cfs_quota_us cpu.cfs_period_us
  if [ "$p" != "/" ] && [ -r "$g/cgroup.procs" ]; then
    sec "v1procs $g"
    for pid in $(cat "$g/cgroup.procs"); do cat "/proc/$pid/stat" 2>/dev/null; done
  fi
fi
m=$(v1mount cpuacct); p=$(v1path cpuacct)
if [ -n "$m" ] && [ -n "$p" ]; then g="$m$p"; g=${g%/}; sec "v1cpuacct $p"; cat "$g/cpuacct.usage" 2>/dev/null; fi
m=$(v1mount memory); p=$(v1path memory)
if [ -n "$m" ] && [ -n "$p" ]; then
  g="$m$p"; g=${g%/}
  dump v1mem "$g" "$m" memory.limit_in_bytes memory.usage_in_bytes memory.stat
fi
sec v1cpupath; v1path cpu
sec end
""")


def _visible_command() -> Script:
    from fawkes.ssh.cgroups import _visible

    return _visible(SCRIPT)


#: what runs on a host: :data:`SCRIPT`, in a private mount namespace with the cgroup hierarchies
#: mounted where none is visible (``ip netns exec`` mounts a fresh /sys over the machine's cgroup
#: mounts: every lab host; without them the script would read the whole machine, not the host's
#: quota), as the suspension scripts run (:mod:`fawkes.ssh.cgroups`)
COMMAND = _visible_command()


# --- pure parsers of the files' text -------------------------------------------------------------

def proc_stat_busy_s(text: str, clk_tck: int) -> float:
    """Busy CPU seconds of the machine from the first line of ``/proc/stat`` (all but idle and iowait)."""
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "cpu":
            v = [int(x) for x in f[1:]]
            if len(v) < 4:
                break
            busy = sum(v[:8]) - v[3] - (v[4] if len(v) > 4 else 0)  # guest time is already in user/nice
            return busy / clk_tck
    raise ValueError("no 'cpu' line in /proc/stat")


def meminfo(text: str) -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes from ``/proc/meminfo``."""
    got = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            got[m.group(1)] = int(m.group(2)) * 1024
    if "MemTotal" not in got or "MemAvailable" not in got:
        raise ValueError("MemTotal or MemAvailable missing in /proc/meminfo")
    return got["MemTotal"], got["MemAvailable"]


def cgroup_paths(text: str) -> dict[str, str]:
    """``/proc/PID/cgroup``: controller -> path (v1; a named hierarchy as ``name=...``), ``""`` -> the v2 path."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctl, path = parts
        if ctl == "":
            out[""] = path
        for c in ctl.split(","):
            if c:
                out[c] = path
    return out


def cpu_max(text: str) -> float | None:
    """Cores of a v2 ``cpu.max`` (``quota period``; ``max`` = no limit -> None)."""
    f = text.split()
    if len(f) < 1 or f[0] == "max":
        return None
    period = int(f[1]) if len(f) > 1 else 100_000
    return int(f[0]) / period


def cfs_quota(quota_text: str, period_text: str) -> float | None:
    """Cores of a v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (-1 = no limit -> None)."""
    q = int(quota_text.strip())
    return None if q < 0 else q / int(period_text.strip())


def memory_limit(text: str) -> int | None:
    """Bytes of a v2 ``memory.max`` or v1 ``memory.limit_in_bytes`` (``max`` or huge = no limit -> None)."""
    t = text.strip()
    if t == "max":
        return None
    v = int(t)
    return None if v >= UNLIMITED_BYTES else v


def keyed(text: str) -> dict[str, int]:
    """A ``key value`` file (``cpu.stat``, ``memory.stat``)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].lstrip("-").isdigit():
            out[f[0]] = int(f[1])
    return out


def pid_cpu_ticks(text: str) -> int:
    """utime + stime (clock ticks) of one ``/proc/PID/stat`` line (the command may hold spaces and parentheses)."""
    rest = text.rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])


# --- one reading ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reading:
    """What one run of :data:`SCRIPT` saw on a host.  ``cpu_used_s`` is cumulative; ``cpu_scope`` and
    ``mem_scope`` name what was measured (``host`` or ``cgroup v1 /path`` / ``cgroup v2 /path``)."""

    at: float  # the host's uptime, seconds
    cpus: float  # cores held
    cpu_used_s: float
    mem_held: int
    mem_used: int
    cpu_scope: str
    mem_scope: str


def _sections(out: str) -> dict[str, list[str]]:
    """``@tag ...`` sections of the script's output, in order; a tag that repeats (one per group
    level) keeps every occurrence as ``tag DIR FILE``."""
    secs: dict[str, list[str]] = {}
    cur = None
    for line in out.splitlines():
        if line.startswith("@"):
            cur = line[1:]
            secs.setdefault(cur, [])
            continue
        if cur is not None:
            secs[cur].append(line)
    return secs


def _files(secs: dict[str, list[str]], tag: str) -> list[tuple[str, str, str]]:
    """(group dir, file name, text) of a ``dump`` tag, innermost group first."""
    out = []
    for k, lines in secs.items():
        f = k.split(" ")
        if f[0] == tag and len(f) == 3:
            out.append((f[1], f[2], "\n".join(lines)))
    return out


def parse_reading(host: str, out: str) -> Reading:
    """The :class:`Reading` in the script's output; :class:`FawkesError` naming the host when it is not one."""
    try:
        return _parse(out)
    except (ValueError, IndexError, KeyError, ZeroDivisionError) as exc:
        raise FawkesError(f"{host}: cannot read CPU and memory use: {exc}") from None


def _parse(out: str) -> Reading:
    secs = _sections(out)
    if "end" not in secs:
        raise ValueError("the usage script did not finish")
    at = float(secs["uptime"][0].split()[0])
    nproc = int(secs["nproc"][0])
    clk = int(secs["clk_tck"][0])
    total, avail = meminfo("\n".join(secs["meminfo"]))
    host_cpu = proc_stat_busy_s("\n".join(secs["stat"]), clk)
    cpus, cpu_used, cpu_scope = float(nproc), host_cpu, "host"
    mem_held, mem_used, mem_scope = total, total - avail, "host"

    v2 = _files(secs, "v2")
    v2dirs = list(dict.fromkeys(d for d, _, _ in v2))
    if v2dirs:
        inner = v2dirs[0]
        files = {(d, n): t for d, n, t in v2}
        quota = [q for d in v2dirs if (q := cpu_max(files.get((d, "cpu.max"), "max"))) is not None]
        if quota and (inner, "cpu.stat") in files:
            cpus = min(min(quota), float(nproc))
            cpu_used = keyed(files[(inner, "cpu.stat")])["usage_usec"] / 1e6
            cpu_scope = f"cgroup v2 {inner}"
        limits = [v for d in v2dirs if (v := memory_limit(files.get((d, "memory.max"), "max"))) is not None]
        if limits and (inner, "memory.current") in files:
            stat = keyed(files.get((inner, "memory.stat"), ""))
            mem_held = min(min(limits), total)
            mem_used = int(files[(inner, "memory.current")].strip()) - stat.get("inactive_file", 0)
            mem_scope = f"cgroup v2 {inner}"
    if cpu_scope == "host":
        v1 = _files(secs, "v1cpu")
        files = {(d, n): t for d, n, t in v1}
        dirs = list(dict.fromkeys(d for d, _, _ in v1))
        quota = [q for d in dirs if (d, "cpu.cfs_quota_us") in files and (q := cfs_quota(
            files[(d, "cpu.cfs_quota_us")], files.get((d, "cpu.cfs_period_us"), "100000"))) is not None]
        if quota and dirs:
            inner = dirs[0]
            acct = next((k for k in secs if k.startswith("v1cpuacct ")), None)
            cpu_path = (secs.get("v1cpupath") or [""])[0]
            procs = next((k for k in secs if k.startswith("v1procs ")), None)
            if acct is not None and acct.split(" ", 1)[1] == cpu_path and cpu_path != "/" and secs[acct]:
                cpu_used = int(secs[acct][0]) / 1e9
            elif procs is not None:
                cpu_used = sum(pid_cpu_ticks(line) for line in secs[procs] if line.strip()) / clk
            else:
                raise ValueError(f"no way to read the CPU use of {inner}")
            cpus = min(min(quota), float(nproc))
            cpu_scope = f"cgroup v1 {inner}"
    if mem_scope == "host":
        v1 = _files(secs, "v1mem")
        files = {(d, n): t for d, n, t in v1}
        dirs = list(dict.fromkeys(d for d, _, _ in v1))
        limits = [v for d in dirs if (d, "memory.limit_in_bytes") in files
                  and (v := memory_limit(files[(d, "memory.limit_in_bytes")])) is not None]
        if limits and dirs and (dirs[0], "memory.usage_in_bytes") in files:
            inner = dirs[0]
            stat = keyed(files.get((inner, "memory.stat"), ""))
            mem_held = min(min(limits), total)
            mem_used = int(files[(inner, "memory.usage_in_bytes")].strip()) - stat.get("total_inactive_file",
                                                                                       stat.get("inactive_file", 0))
            mem_scope = f"cgroup v1 {inner}"
    return Reading(at, cpus, cpu_used, mem_held, max(0, mem_used), cpu_scope, mem_scope)


# --- the window ----------------------------------------------------------------------------------

@dataclass
class UsageWindow:
    """One host's readings turned into utilisation samples, kept over ``window_s`` (host clock).

    Each sample is ``(at, cpu, mem, observed_from)``: the CPU fraction between the previous reading and
    this one (None for the first reading of a run, or the first after a restart: the gap is not
    observed), the memory fraction at ``at``, and where the interval its CPU covers began.  The window
    covers the observed intervals inside it (:meth:`usage`)."""

    window_s: float
    last: Reading | None = None
    samples: deque = field(default_factory=deque)
    resumed: bool = False  # restored from the state: the next reading gives no CPU over the gap

    def add(self, r: Reading) -> None:
        """Fold in a reading.  CPU needs two: the first of a run gives memory only.  A reading from
        before the last one (the host rebooted: its uptime restarted) or with another scope starts over."""
        prev = self.last
        if prev is not None and (r.at <= prev.at or (r.cpu_scope, r.mem_scope) != (prev.cpu_scope, prev.mem_scope)):
            self.samples.clear()
            prev = None
        cpu = None
        if prev is not None and not self.resumed:
            cpu = max(0.0, r.cpu_used_s - prev.cpu_used_s) / ((r.at - prev.at) * max(r.cpus, 1e-9))
        self.resumed = False
        mem = r.mem_used / r.mem_held if r.mem_held > 0 else 0.0
        self.samples.append((r.at, cpu, mem, prev.at if cpu is not None else r.at))
        self.last = r
        keep = r.at - self.window_s
        while self.samples and self.samples[0][0] < keep:
            self.samples.popleft()

    def cpu_now(self) -> float | None:
        """The CPU fraction between the last two readings (UBIS U-7's PU signal), None before two."""
        if not self.samples or self.samples[-1][1] is None:
            return None
        return min(1.0, self.samples[-1][1])

    def usage(self) -> NodeUsage | None:
        """Maxima over the window and how much of it was observed; None before two readings."""
        cpu = [c for _, c, _, _ in self.samples if c is not None]
        if not cpu or self.last is None:
            return None
        mem = [m for _, _, m, _ in self.samples]
        keep = self.last.at - self.window_s
        covered = sum(at - max(frm, keep) for at, c, _, frm in self.samples if c is not None)
        return NodeUsage(min(1.0, max(cpu)), min(1.0, max(mem)), min(self.window_s, covered))

    # --- kept in the state (a restarted coordinator resumes the window) ---------------------------
    def to_doc(self) -> dict | None:
        """The window as JSON values (None before its first reading)."""
        if self.last is None:
            return None
        r = self.last
        return {"last": [r.at, r.cpus, r.cpu_used_s, r.mem_held, r.mem_used, r.cpu_scope, r.mem_scope],
                "samples": [list(x) for x in self.samples]}

    @classmethod
    def from_doc(cls, doc, window_s: float) -> UsageWindow:
        """The window :meth:`to_doc` wrote, resumed: its next reading gives memory only (the time between
        the last saved reading and it was not observed).  ``ValueError`` naming the field for a document
        this code did not write (it comes from the state: checked like any input)."""
        if not isinstance(doc, dict) or set(doc) != {"last", "samples"}:
            raise ValueError("expected an object with 'last' and 'samples'")
        last, samples = doc["last"], doc["samples"]
        if not isinstance(last, list) or len(last) != 7:
            raise ValueError("last: expected 7 values")
        at, cpus, used, held, mem_used, cs, ms = last
        for name, v in (("at", at), ("cpus", cpus), ("cpu_used_s", used)):
            _finite(f"last.{name}", v)
        for name, v in (("mem_held", held), ("mem_used", mem_used)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 63:
                raise ValueError(f"last.{name}: expected a whole number of bytes, got {str(v)[:40]!r}")
        for name, v in (("cpu_scope", cs), ("mem_scope", ms)):
            if not isinstance(v, str) or not _SCOPE.fullmatch(v):
                raise ValueError(f"last.{name}: expected host or cgroup v1/v2 PATH, got {str(v)[:40]!r}")
        if cpus <= 0:
            raise ValueError(f"last.cpus: expected more than 0, got {cpus!r}")
        if not isinstance(samples, list) or len(samples) > MAX_SAMPLES:
            raise ValueError(f"samples: expected a list of at most {MAX_SAMPLES}")
        w = cls(window_s, Reading(float(at), float(cpus), float(used), held, mem_used, cs, ms), resumed=True)
        before = None
        for i, x in enumerate(samples):
            if not isinstance(x, list) or len(x) != 4:
                raise ValueError(f"samples[{i}]: expected [at, cpu, mem, observed_from]")
            s_at, cpu, mem, frm = x
            _finite(f"samples[{i}].at", s_at)
            _finite(f"samples[{i}].mem", mem)
            _finite(f"samples[{i}].observed_from", frm)
            if cpu is not None:
                _finite(f"samples[{i}].cpu", cpu)
            if (before is not None and s_at <= before) or s_at > at or frm > s_at:
                raise ValueError(f"samples[{i}]: out of order")
            before = s_at
            w.samples.append((float(s_at), None if cpu is None else float(cpu), float(mem), float(frm)))
        keep = at - window_s
        while w.samples and w.samples[0][0] < keep:
            w.samples.popleft()
        return w


#: at most this many samples of one window are taken back from the state (a window of a day at 1 s)
MAX_SAMPLES = 86400
_SCOPE = re.compile(r"host|cgroup v[12] /[\x21-\x7e]{0,250}")


def _finite(name: str, v) -> None:
    """``v`` a finite number, at least 0 (else ``ValueError`` naming ``name``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or v > 1e15:
        raise ValueError(f"{name}: expected a finite number from 0 to 1e15, got {str(v)[:40]!r}")


#: how often the sampler saves the windows in the state (a restart loses at most this much of them)
SAVE_EVERY_S = 30.0

#: the longest one reading may take over SSH, as the sampler's liveness check (``true``) is bounded
READ_TIMEOUT_S = 10.0


class NodeWindows:
    """The live side of CERES' C-1 signal: one :class:`UsageWindow` per held node, fed once per
    sample by one run of :data:`SCRIPT` per host (:func:`collect`, all hosts at once, each bounded
    by ``timeout``).

    Keyed by the store's node id, so a host that passes to another cluster starts a new window
    (the simulator keys its windows by cluster, host and the node's start: the same).  A host that
    cannot be read (SSH error, timeout, unparsable output) loses its window: its usage is unknown
    (None) until two readings in a row succeed again, because the CPU between the readings around
    a gap would be the gap's mean, which can hide a busy stretch and make a busy node look swollen.

    Kept in the state as well (:meth:`to_doc`, saved by the sampler every :data:`SAVE_EVERY_S`): a
    restarted or newly leading coordinator takes back the windows of the nodes still running on the same
    hosts (:meth:`restore`) and goes on from there.  The time between the last saved reading and the next
    one is not observed: no CPU is counted over it, and it does not count as covered, so a node is
    judged (:func:`fawkes.mechanism.ceres.node_swollen`: only once observed for the whole
    ``usage_window_s``) on what was seen, before and after the restart."""

    def __init__(self, window_s: float, *, timeout: float = READ_TIMEOUT_S):
        self.window_s = window_s
        self.timeout = timeout
        self.windows: dict[int, tuple[str, UsageWindow]] = {}  # node id -> (host, window)
        self.errors: dict[str, str] = {}  # host -> why its last reading failed
        self.reads = 0  # SSH commands run (one per host per step)

    def step(self, executor, nodes: dict[int, str]) -> dict[str, str]:
        """Read the hosts of ``nodes`` (node id -> host) once and fold each reading into its node's
        window; windows of nodes not given are dropped.  Returns host -> error of the hosts that
        could not be read (never raises for a host: an executor that fails as a whole makes every
        host unknown)."""
        for nid in [k for k, (h, _) in self.windows.items() if nodes.get(k) != h]:
            del self.windows[nid]
        hosts = sorted(set(nodes.values()))
        if not hosts:
            self.errors = {}
            return {}
        try:
            got: dict[str, Reading | FawkesError] = collect(executor, hosts, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - the sampling step must go on: every host is unknown
            got = {h: FawkesError(f"{h}: cannot read CPU and memory use: {exc}") for h in hosts}
        self.reads += len(hosts)
        errors = {}
        for h in hosts:
            r = got.get(h)
            if not isinstance(r, Reading):
                errors[h] = str(r) if r is not None else f"{h}: no answer"
        for nid, host in nodes.items():
            if host in errors:
                self.windows.pop(nid, None)
                continue
            w = self.windows.get(nid)
            if w is None:
                w = self.windows[nid] = (host, UsageWindow(self.window_s))
            w[1].add(got[host])
        self.errors = errors
        return errors

    def to_doc(self) -> dict:
        """Every window as JSON values: ``{"NODE ID": {"host": HOST, "window": ...}}``."""
        return {str(nid): {"host": h, "window": d} for nid, (h, w) in sorted(self.windows.items())
                if (d := w.to_doc()) is not None}

    def restore(self, doc, nodes: dict[int, str]) -> tuple[int, list[str]]:
        """Take back the windows of :meth:`to_doc` of the nodes in ``nodes`` (node id -> host) that still
        run on the same host, each resumed (:meth:`UsageWindow.from_doc`); a window already held is kept.
        Returns how many were taken back and one line per window refused (the state is read as input:
        an unreadable window is dropped and its node starts afresh, as before any reading)."""
        if not isinstance(doc, dict):
            return 0, [f"usage windows: expected an object, got {type(doc).__name__}"]
        taken, refused = 0, []
        for key, item in doc.items():
            try:
                nid = int(key) if isinstance(key, str) and key.isdigit() and len(key) < 19 else None
                if nid is None:
                    raise ValueError("expected a node id")
                if not isinstance(item, dict) or set(item) != {"host", "window"}:
                    raise ValueError("expected an object with 'host' and 'window'")
                if nid not in nodes or nodes[nid] != item["host"] or nid in self.windows:
                    continue
                self.windows[nid] = (nodes[nid], UsageWindow.from_doc(item["window"], self.window_s))
                taken += 1
            except ValueError as exc:
                refused.append(f"usage window of node {str(key)[:20]!r}: {exc}")
        return taken, refused

    def usage(self) -> dict[int, NodeUsage]:
        """Node id -> its :class:`NodeUsage` (nodes with fewer than two readings left out: unknown)."""
        return {nid: u for nid, (_, w) in self.windows.items() if (u := w.usage()) is not None}

    def cpu_now(self) -> dict[int, float]:
        """Node id -> its CPU fraction between its last two readings (UBIS U-7: PU from telemetry);
        nodes with fewer than two readings left out (unknown)."""
        return {nid: c for nid, (_, w) in self.windows.items() if (c := w.cpu_now()) is not None}


def collect(executor, hosts, *, timeout: float = 20.0) -> dict[str, Reading | FawkesError]:
    """Run :data:`COMMAND` on ``hosts`` through a :class:`fawkes.ssh.Executor`: each host's reading,
    or the error (one line naming the host) when it cannot be read."""
    out: dict[str, Reading | FawkesError] = {}
    for host, res in executor.run(list(hosts), COMMAND, timeout=timeout).items():
        if not res.ok:
            out[host] = FawkesError(f"{host}: cannot read CPU and memory use: {res.error}")
            continue
        try:
            out[host] = parse_reading(host, res.stdout)
        except FawkesError as exc:
            out[host] = exc
    return out


__all__ = ["COMMAND", "NodeWindows", "READ_TIMEOUT_S", "Reading", "SCRIPT", "UsageWindow", "collect", "parse_reading"]
