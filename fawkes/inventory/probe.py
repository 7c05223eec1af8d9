"""Probe the hosts of an inventory over SSH: what they have (cores, memory, free disk) and what a kind
needs on each (issue 30, item 3): Java and its major version, Python, a writable work dir, the listening
ports (so a port range's clashes show), the clock's skew from this machine's, and whether the login's
cgroup is delegated (``shrink_mode: suspend`` and the opportunistic lender move processes into child
groups).  One read-only shell script per host; nothing is written on the host."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fawkes.inventory.model import Inventory, InventoryHost
from fawkes.ssh.executor import Result
from fawkes.ssh.shell import Script

_MARK = "@@fawkes-probe@@"
_FIELDS = 10
#: what a probe calls a problem (the CLI's defaults; docs/operations.md "Probing hosts")
JAVA_MIN = 17  # Spark 4 and Flink 2 need Java 17
SKEW_MAX_S = 2.0  # HDFS and Spark tolerate small skews; tokens and logs across hosts do not like large ones


@dataclass(frozen=True)
class Probe:
    host: str
    ok: bool
    error: str | None = None
    cores: int | None = None
    memory_mb: int | None = None
    disk_free_mb: int | None = None   # free space of the filesystem holding work_dir (or its parent)
    java: str | None = None           # first line of `java -version`, or None when absent
    hostname: str | None = None
    duration_s: float = 0.0
    java_major: int | None = None     # 17 for "openjdk version \"17.0.9\"", 8 for "1.8.0_392"
    python: str | None = None         # `PYTHON --version`, or None when it does not run
    work_dir_writable: bool | None = None  # the work dir (or, while it does not exist, its nearest ancestor)
    listening: frozenset[int] = field(default_factory=frozenset)  # TCP ports in LISTEN (IPv4 and IPv6)
    clock_skew_s: float | None = None  # the host's clock minus this machine's (within the answer's way back)
    cgroup: str | None = None         # "v2 delegated", "v2 not delegated", "v1", or None (none found)


def probe_script(work_dir: str, python: str = "python3") -> Script:
    """The read-only script (every value quoted); its fields are separated by a marker line."""
    return Script(
        # df on the nearest existing ancestor of work_dir (it may not exist yet)
        "d={w}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; "
        "echo {m}; nproc; echo {m}; awk '/^MemTotal:/ {{print int($2/1024)}}' /proc/meminfo; echo {m}; "
        "df -Pk \"$d\" | awk 'NR==2 {{print int($4/1024)}}'; echo {m}; "
        "(java -version 2>&1 | head -n 1) || true; echo {m}; hostname; echo {m}; "
        "({py} --version 2>&1 | head -n 1) || true; echo {m}; "
        "if [ -d \"$d\" ] && [ -w \"$d\" ] && [ -x \"$d\" ]; then echo writable; else echo readonly; fi; echo {m}; "
        "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == \"0A\" {{n = split($2, a, \":\"); print a[n]}}' "
        "| sort -u | tr '\\n' ' '; echo; echo {m}; "
        "v2=$(awk '$3 == \"cgroup2\" {{print $2; exit}}' /proc/mounts); "
        "g=$(awk -F: '$1 == \"0\" {{print $3; exit}}' /proc/self/cgroup); "
        "if [ -n \"$v2\" ] && [ -f \"$v2/cgroup.controllers\" ]; then "
        "if [ -w \"$v2$g\" ] && [ -w \"$v2$g/cgroup.procs\" ]; then echo 'v2 delegated'; "
        "else echo 'v2 not delegated'; fi; "
        "elif grep -q ' cgroup ' /proc/mounts; then echo v1; else echo none; fi; echo {m}; "
        "date +%s.%N",
        w=work_dir, m=_MARK, py=python)


def java_major(line: str | None) -> int | None:
    """The major version in a ``java -version`` first line (``1.8.0`` -> 8, ``17.0.9`` -> 17)."""
    m = re.search(r'version "([0-9]+)(?:\.([0-9]+))?', line or "")
    if not m:
        return None
    major = int(m[1])
    return int(m[2]) if major == 1 and m[2] else major


def parse(host: str, res: Result, arrived: float | None = None) -> Probe:
    """A host's answer as a :class:`Probe`; ``arrived``: this machine's time when it came (clock skew)."""
    if not res.ok:
        return Probe(host, False, res.error, duration_s=res.duration_s)
    parts = [p.strip() for p in res.stdout.split(_MARK)[1:]]
    if len(parts) != _FIELDS:
        return Probe(host, False, "unexpected probe output", duration_s=res.duration_s)

    def num(s: str) -> int | None:
        return int(s) if s.isdigit() else None

    java = parts[3] if parts[3] and "not found" not in parts[3] else None
    python = parts[5] if re.fullmatch(r"Python [0-9][0-9A-Za-z.+-]*", parts[5]) else None
    ports = frozenset(int(x, 16) for x in parts[7].split() if re.fullmatch(r"[0-9A-Fa-f]{4}", x))
    try:
        host_time = float(parts[9])
    except ValueError:
        host_time = float("nan")
    skew = None
    if arrived is not None and math.isfinite(host_time) and host_time > 0:
        skew = round(host_time - arrived, 3)  # the host read its clock just before it answered
    cgroup = parts[8] if parts[8] in ("v2 delegated", "v2 not delegated", "v1") else None
    return Probe(host, True, None, num(parts[0]), num(parts[1]), num(parts[2]), java, parts[4] or None,
                 res.duration_s, java_major=java_major(java), python=python,
                 work_dir_writable=parts[6] == "writable", listening=ports, clock_skew_s=skew, cgroup=cgroup)


def problems(p: Probe, *, java_min: int = JAVA_MIN, ports: Iterable[int] = (), skew_max_s: float = SKEW_MAX_S,
             python: str = "python3") -> list[str]:
    """What ``p`` lacks for a kind, one short phrase each (empty: nothing).  ``ports``: the ports a cluster
    may listen on there (a port range, or the frameworks' standard ports): those already in use are named."""
    if not p.ok:
        return []
    out = []
    if p.java_major is None:
        out.append("no java on PATH")
    elif p.java_major < java_min:
        out.append(f"java {p.java_major} < {java_min}")
    if p.python is None:
        out.append(f"{python} does not run")
    if p.work_dir_writable is False:
        out.append("work dir not writable")
    busy = sorted(p.listening.intersection(ports))
    if busy:
        shown = ", ".join(str(x) for x in busy[:5]) + (f" (+{len(busy) - 5})" if len(busy) > 5 else "")
        out.append(f"ports in use: {shown}")
    if p.clock_skew_s is not None and abs(p.clock_skew_s) > skew_max_s:
        out.append(f"clock {p.clock_skew_s:+.1f} s")
    if p.cgroup != "v2 delegated":
        out.append("cgroup not delegated (no suspend)" if p.cgroup else "no cgroup (no suspend)")
    return out


def probe(inv: Inventory, hosts: list[InventoryHost] | None = None, *, on_result: Callable[[Probe], None] | None = None,
          python: str = "python3", **executor_kw) -> dict[str, Probe]:
    """Probe every host in parallel; ``on_result`` is called as each host answers."""
    hosts = inv.hosts if hosts is None else hosts
    executor_kw.setdefault("command_timeout", 30.0)
    executor_kw.setdefault("connect_timeout", 10.0)
    executor_kw.setdefault("retries", 1)
    arrived: dict[str, float] = {}

    def seen(r: Result) -> None:
        arrived[r.host] = time.time()
        if on_result:
            on_result(parse(r.host, r, arrived[r.host]))

    with inv.executor([h.name for h in hosts], **executor_kw) as ex:
        results = ex.run_each({h.name: probe_script(h.work_dir, python) for h in hosts}, on_result=seen)
    return {name: parse(name, r, arrived.get(name)) for name, r in results.items()}
