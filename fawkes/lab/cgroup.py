"""A lab host's CPU share: a cgroup with a CFS quota that holds every process of the host.

Without it every lab host can use every core of the machine, so adding a node to a cluster adds
no compute: the lab cannot show what growing buys.  With ``cpus`` per host (say 2 cores / 8
hosts = 0.25) a node is a fixed slice of the machine, as a real node is a fixed machine.

Works with cgroup v2 (``cpu.max``, the ``cpu`` controller enabled for the root's children) and
with the v1 ``cpu`` hierarchy (``cpu.cfs_quota_us``).  Groups are named
``fawkes-lab-<prefix>/<host>``; :func:`remove` deletes them once their processes are gone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from fawkes.errors import FawkesError

PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/cpu")


def _root() -> tuple[Path, int]:
    """The cgroup directory to create groups under, and the cgroup version."""
    ctl = V2_ROOT / "cgroup.controllers"
    if ctl.is_file() and "cpu" in ctl.read_text().split():
        return V2_ROOT, 2
    if (V1_ROOT / "cpu.cfs_quota_us").is_file():
        return V1_ROOT, 1
    raise FawkesError("lab: --cpus needs the cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us under "
                      "/sys/fs/cgroup); none is mounted here")


def group_dir(prefix: str, host: str) -> Path:
    root, _ = _root()
    return root / f"fawkes-lab-{prefix}" / host


def create(prefix: str, host: str, cpus: float) -> Path:
    """Create (or update) ``host``'s group with a quota of ``cpus`` cores; return its ``cgroup.procs``."""
    root, version = _root()
    parent = root / f"fawkes-lab-{prefix}"
    quota = max(1000, int(cpus * PERIOD_US))
    try:
        if version == 2:
            _enable_cpu(root)
            parent.mkdir(exist_ok=True)
            _enable_cpu(parent)
            d = parent / host
            d.mkdir(exist_ok=True)
            (d / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            parent.mkdir(exist_ok=True)
            d = parent / host
            d.mkdir(exist_ok=True)
            (d / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (d / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    except OSError as exc:
        raise FawkesError(f"lab: cannot set up the CPU cgroup of {host} under {parent}: {exc.strerror}") from None
    return d / "cgroup.procs"


def _enable_cpu(d: Path) -> None:
    sub = d / "cgroup.subtree_control"
    if "cpu" not in sub.read_text().split():
        sub.write_text("+cpu\n")


def quota(prefix: str, host: str) -> float | None:
    """The host's quota in cores, or None without a group or a limit."""
    try:
        d = group_dir(prefix, host)
    except FawkesError:
        return None
    try:
        if (d / "cpu.max").is_file():
            q = (d / "cpu.max").read_text().split()[0]
            return None if q == "max" else int(q) / PERIOD_US
        q = int((d / "cpu.cfs_quota_us").read_text())
        return None if q < 0 else q / int((d / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def remove(prefix: str, timeout: float = 5.0) -> int:
    """Delete the prefix's groups (their processes must be gone or going); return how many went."""
    try:
        root, _ = _root()
    except FawkesError:
        return 0
    parent = root / f"fawkes-lab-{prefix}"
    if not parent.is_dir():
        return 0
    gone = 0
    deadline = time.monotonic() + timeout
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
