"""A lab host's share of the machine: cgroups with a CPU quota and a memory limit holding every process of the host.

Without them every lab host can use every core and all the memory of the machine, so adding a
node to a cluster adds nothing: the lab cannot show what growing buys.  With a quota per host
(say 2 cores / 8 hosts = 0.25 CPU and 2 GiB) a node is a fixed slice of the machine, as a real
node is a fixed machine (``docs/lab.md``, "What a lab host models").

Each controller is used where the machine mounts it: cgroup v2 (``cpu.max``, ``memory.max`` and
``memory.swap.max``, the controller enabled for the root's children) or a v1 hierarchy
(``cpu.cfs_quota_us``; ``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes``).  Groups
are ``fawkes-lab-<prefix>/<host>`` at the top of each hierarchy, so that any process (another
shell, the next test session) finds them by prefix; :func:`remove` deletes them once their
processes are gone.  This module also reads the limits this process itself runs under.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from fawkes.errors import FawkesError

CPU, MEMORY = "cpu", "memory"
PERIOD_US = 100_000
MIB = 1 << 20
UNLIMITED_BYTES = 1 << 60  # v1 reports "no limit" as a huge number (9223372036854771712)
OPTION = {CPU: "--cpus", MEMORY: "--memory"}
FILES = {CPU: "v2 cpu.max or v1 cpu.cfs_quota_us", MEMORY: "v2 memory.max or v1 memory.limit_in_bytes"}


@dataclass(frozen=True)
class Hierarchy:
    mount: Path     # where it is mounted
    version: int    # 1 or 2
    root: str = "/"  # the part of the hierarchy mounted there (not "/" inside some containers)


def _mounts() -> list[tuple[str, Path, str, list[str]]]:
    """``(root, mount point, fs type, super options)`` of every cgroup mount of this process."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        pre, _, post = line.partition(" - ")
        f, p = pre.split(), post.split()
        if len(f) >= 5 and len(p) >= 3 and p[0] in ("cgroup", "cgroup2"):
            out.append((f[3], Path(f[4].replace("\\040", " ")), p[0], p[2].split(",")))
    return out


def hierarchy(controller: str) -> Hierarchy | None:
    """Where ``controller`` can be used: a v2 mount that offers it, else the v1 mount of it."""
    mounts = _mounts()
    for root, mount, fstype, _ in mounts:
        if fstype == "cgroup2":
            try:
                if controller in (mount / "cgroup.controllers").read_text().split():
                    return Hierarchy(mount, 2, root)
            except OSError:
                pass
    for root, mount, fstype, opts in mounts:
        if fstype == "cgroup" and controller in opts:
            return Hierarchy(mount, 1, root)
    return None


def require(controllers: list[str]) -> None:
    """Refuse (before anything is created) when a needed controller is not mounted."""
    for c in controllers:
        if hierarchy(c) is None:
            raise FawkesError(f"lab: {OPTION[c]} needs the cgroup {c} controller ({FILES[c]} under "
                              "/sys/fs/cgroup); none is mounted here")


def group_dir(prefix: str, host: str, controller: str = CPU) -> Path | None:
    """The host's group in ``controller``'s hierarchy (which may not exist), None without the controller."""
    h = hierarchy(controller)
    return None if h is None else h.mount / f"fawkes-lab-{prefix}" / host


def create(prefix: str, host: str, *, cpus: float | None = None, memory_mb: int | None = None) -> list[Path]:
    """Create (or update) ``host``'s groups; return the ``cgroup.procs`` files its first process must join."""
    wanted = {c: v for c, v in ((CPU, cpus), (MEMORY, memory_mb)) if v is not None}
    require(list(wanted))
    procs: list[Path] = []
    for controller, value in wanted.items():
        h = hierarchy(controller)
        parent = h.mount / f"fawkes-lab-{prefix}"
        d = parent / host
        try:
            if h.version == 2:
                _enable(h.mount, controller)
                parent.mkdir(exist_ok=True)
                _enable(parent, controller)
            else:
                parent.mkdir(exist_ok=True)
            d.mkdir(exist_ok=True)
            (_set_cpu if controller == CPU else _set_memory)(d, h.version, value)
        except OSError as exc:
            raise FawkesError(f"lab: cannot set up the {controller} cgroup of {host} under {parent}: "
                              f"{exc.strerror or exc}") from None
        if d / "cgroup.procs" not in procs:
            procs.append(d / "cgroup.procs")
    return procs


def enter(procs: list[Path]) -> list[str]:
    """An argv prefix that moves itself into the groups of ``procs`` and then execs the rest of the argv
    (``sh -c SCRIPT N PROCS... COMMAND...``; it exits 1 without running COMMAND if it cannot)."""
    return ["sh", "-c", 'n=$0; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 1; shift; n=$((n - 1)); done; '
            'exec "$@"', str(len(procs)), *map(str, procs)]


def _enable(d: Path, controller: str) -> None:
    sub = d / "cgroup.subtree_control"
    if controller not in sub.read_text().split():
        sub.write_text(f"+{controller}\n")


def _set_cpu(d: Path, version: int, cpus: float) -> None:
    quota = max(1000, round(cpus * PERIOD_US))
    if version == 2:
        (d / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
    else:
        (d / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (d / "cpu.cfs_quota_us").write_text(f"{quota}\n")


def _set_memory(d: Path, version: int, memory_mb: int) -> None:
    limit = memory_mb * MIB
    if version == 2:
        (d / "memory.max").write_text(f"{limit}\n")
        if (d / "memory.swap.max").is_file():  # no swap beyond the limit: a node has its RAM
            (d / "memory.swap.max").write_text("0\n")
        return
    memsw = d / "memory.memsw.limit_in_bytes"  # memory + swap; must stay >= the memory limit
    if memsw.is_file():
        memsw.write_text("-1\n")
    (d / "memory.limit_in_bytes").write_text(f"{limit}\n")
    if memsw.is_file():
        memsw.write_text(f"{limit}\n")


def quota(prefix: str, host: str) -> float | None:
    """The host's CPU quota in cores, or None without a group or a limit."""
    d = group_dir(prefix, host, CPU)
    return None if d is None else _cpu_limit(d)


def memory_limit_mb(prefix: str, host: str) -> int | None:
    """The host's memory limit in MiB, or None without a group or a limit."""
    d = group_dir(prefix, host, MEMORY)
    b = None if d is None else _memory_limit(d)
    return None if b is None else b // MIB


def _cpu_limit(d: Path) -> float | None:
    try:
        if (d / "cpu.max").is_file():
            q, p = (d / "cpu.max").read_text().split()[:2]
            return None if q == "max" else int(q) / int(p)
        q = int((d / "cpu.cfs_quota_us").read_text())
        return None if q < 0 else q / int((d / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def _memory_limit(d: Path) -> int | None:
    for name in ("memory.max", "memory.limit_in_bytes"):
        try:
            v = (d / name).read_text().strip()
        except OSError:
            continue
        if v == "max" or not v.isdigit() or int(v) >= UNLIMITED_BYTES:
            return None
        return int(v)
    return None


def own_limit(controller: str) -> tuple[float, str] | None:
    """The tightest limit on this process in ``controller`` (cores, or bytes) and the group that sets it."""
    h = hierarchy(controller)
    d = None if h is None else _own_dir(h, controller)
    best = None
    while d is not None and h is not None and d.is_relative_to(h.mount):
        v = _cpu_limit(d) if controller == CPU else _memory_limit(d)
        if v is not None and (best is None or v < best[0]):
            best = (v, "/" + str(d.relative_to(h.mount)).lstrip("."))
        d = d.parent if d != h.mount else None
    return best


def _own_dir(h: Hierarchy, controller: str) -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, ctls, path = (line.split(":", 2) + ["", ""])[:3]
        if (h.version == 2 and hid == "0") or (h.version == 1 and controller in ctls.split(",")):
            if not path.startswith(h.root):
                return None
            d = h.mount / path[len(h.root):].lstrip("/")
            return d if d.is_dir() else None
    return None


def remove(prefix: str, timeout: float = 5.0) -> int:
    """Delete the prefix's groups in every hierarchy (their processes must be gone or going); return how many went."""
    parents = {h.mount / f"fawkes-lab-{prefix}" for h in map(hierarchy, (CPU, MEMORY)) if h is not None}
    gone = 0
    deadline = time.monotonic() + timeout
    for parent in sorted(p for p in parents if p.is_dir()):
        for d in sorted(p for p in parent.iterdir() if p.is_dir()):
            while True:
                try:
                    os.rmdir(d)
                    gone += 1
                    break
                except OSError:  # EBUSY while the last processes exit
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        try:
            os.rmdir(parent)
        except OSError:
            pass
    return gone
