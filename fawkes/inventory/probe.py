"""Probe the hosts of an inventory over SSH: cores, memory, free disk, Java version."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fawkes.inventory.model import InventoryHost, Inventory
from fawkes.ssh.executor import Result
from fawkes.ssh.shell import Script

_MARK = "@@fawkes-probe@@"


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


def probe_script(work_dir: str) -> Script:
    # df on the nearest existing ancestor of work_dir (it may not exist yet)
    return Script(
        "d={w}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; "
        "echo {m}; nproc; echo {m}; awk '/^MemTotal:/ {{print int($2/1024)}}' /proc/meminfo; echo {m}; "
        "df -Pk \"$d\" | awk 'NR==2 {{print int($4/1024)}}'; echo {m}; "
        "(java -version 2>&1 | head -n 1) || true; echo {m}; hostname",
        w=work_dir, m=_MARK)


def parse(host: str, res: Result) -> Probe:
    if not res.ok:
        return Probe(host, False, res.error, duration_s=res.duration_s)
    parts = [p.strip() for p in res.stdout.split(_MARK)[1:]]
    if len(parts) != 5:
        return Probe(host, False, "unexpected probe output", duration_s=res.duration_s)

    def num(s: str) -> int | None:
        return int(s) if s.isdigit() else None

    java = parts[3] if parts[3] and "not found" not in parts[3] else None
    return Probe(host, True, None, num(parts[0]), num(parts[1]), num(parts[2]), java, parts[4] or None,
                 res.duration_s)


def probe(inv: Inventory, hosts: list[InventoryHost] | None = None, *, on_result: Callable[[Probe], None] | None = None,
          **executor_kw) -> dict[str, Probe]:
    """Probe every host in parallel; ``on_result`` is called as each host answers."""
    hosts = inv.hosts if hosts is None else hosts
    executor_kw.setdefault("command_timeout", 30.0)
    executor_kw.setdefault("connect_timeout", 10.0)
    executor_kw.setdefault("retries", 1)
    with inv.executor([h.name for h in hosts], **executor_kw) as ex:
        cb = (lambda r: on_result(parse(r.host, r))) if on_result else None
        results = ex.run_each({h.name: probe_script(h.work_dir) for h in hosts}, on_result=cb)
    return {name: parse(name, r) for name, r in results.items()}
