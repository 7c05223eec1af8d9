"""Sizing lab hosts: the ``--cpus`` and ``--memory`` values, ``auto``, and the check that all fit the machine.

A lab host models a node only under its own CPU quota and memory limit, and the quotas of all
hosts together must fit this machine (or the cgroup this process is confined to): otherwise the
hosts compete for the same cores and RAM and the lab is back to "every node is the whole
machine".  ``auto`` divides the machine evenly: ``--cpus auto`` = usable cores / hosts (rounded
down to 0.01), ``--memory auto`` = usable memory / hosts (rounded down to a MiB).

Values are strictly parsed (no NaN, infinity, sign, exponent, whitespace or control characters);
a size is a number with an optional binary unit (``M``/``MiB``, ``G``/``GiB``, ``T``/``TiB``,
case-insensitive; a bare number is MiB, as in inventories).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.lab import cgroup

AUTO = "auto"
MIN_CPUS = Fraction(1, 100)
MIN_MEMORY_MB = 64  # sshd and a shell; a Spark worker or DataNode needs ~170 MiB more each
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(?:([mgt])(?:i?b)?)?", re.IGNORECASE)
_UNIT_MB = {None: 1, "m": 1, "g": 1024, "t": 1 << 20}


@dataclass(frozen=True)
class Machine:
    """What this process may use: cores and MiB, and where each figure comes from."""

    cpus: Fraction
    cpus_from: str
    memory_mb: int
    memory_from: str


def machine() -> Machine:
    cpus = Fraction(len(os.sched_getaffinity(0)))
    cpus_from = "this machine's cores" if cpus == (os.cpu_count() or cpus) else "this process's CPU affinity"
    lim = cgroup.own_limit(cgroup.CPU)
    if lim and lim[0] < cpus:
        cpus, cpus_from = Fraction(lim[0]).limit_denominator(cgroup.PERIOD_US), f"the CPU quota of cgroup {lim[1]}"
    mem_mb, mem_from = _mem_total_mb(), "this machine's MemTotal"
    lim = cgroup.own_limit(cgroup.MEMORY)
    if lim and lim[0] // cgroup.MIB < mem_mb:
        mem_mb, mem_from = int(lim[0] // cgroup.MIB), f"the memory limit of cgroup {lim[1]}"
    return Machine(cpus, cpus_from, mem_mb, mem_from)


def _mem_total_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise FawkesError("lab: cannot read MemTotal from /proc/meminfo")


def fmt_mb(mb: int) -> str:
    return f"{mb // 1024} GiB" if mb % 1024 == 0 else f"{mb} MiB" if mb < 10240 else f"{mb / 1024:.1f} GiB"


def fmt_cpus(cpus: float | Fraction) -> str:
    return f"{float(cpus):g}"


def _show(value: object) -> str:
    s = repr(value)
    return s if len(s) <= 40 else s[:37] + "..."


def parse_cpus(value: object) -> Fraction | str | None:
    """``None``, ``"auto"``, or a positive number of cores (number or decimal string) as a Fraction."""
    if value is None or value == AUTO:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return Fraction(value).limit_denominator(cgroup.PERIOD_US)
    m = _NUMBER.fullmatch(value) if isinstance(value, str) and len(value) <= 64 else None
    if not m:
        raise FawkesError(f"lab: --cpus must be a number of cores such as 0.25, or auto; not {_show(value)}")
    return Fraction(value)


def parse_memory_mb(value: object) -> int | str | None:
    """``None``, ``"auto"``, or a size in MiB (an int is MiB; a string may carry a unit)."""
    if value is None or value == AUTO:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.fullmatch(value) if isinstance(value, str) and len(value) <= 64 else None
    if not m:
        raise FawkesError(f"lab: --memory must be a size such as 512M or 2G (MiB without a unit), or auto; "
                          f"not {_show(value)}")
    unit = m.group(2).lower() if m.group(2) else None
    return math.floor(Fraction(m.group(1)) * _UNIT_MB[unit])


def size(hosts: int, cpus: object, memory: object, have: Machine | None = None) -> tuple[float | None, int | None]:
    """Each host's quota ``(cores or None, MiB or None)``, refusing values that do not fit ``hosts`` hosts here."""
    c, m = parse_cpus(cpus), parse_memory_mb(memory)
    if c is None and m is None:
        return None, None
    have = have or machine()
    return _size_cpus(hosts, c, cpus, have), _size_memory(hosts, m, memory, have)


def _size_cpus(hosts: int, c: Fraction | str | None, raw: object, have: Machine) -> float | None:
    if c is None:
        return None
    auto = Fraction(math.floor(have.cpus * 100 / hosts), 100)  # rounded down to 0.01
    if c == AUTO:
        c = auto
        if c < MIN_CPUS:
            raise FawkesError(f"lab: --cpus auto: {fmt_cpus(have.cpus)} cores ({have.cpus_from}) / {hosts} hosts "
                              f"is less than {fmt_cpus(MIN_CPUS)} CPU per host")
        return float(c)
    if c < MIN_CPUS or c > have.cpus:
        raise FawkesError(f"lab: --cpus must be between {fmt_cpus(MIN_CPUS)} and {fmt_cpus(have.cpus)} "
                          f"({have.cpus_from}), not {_show(raw)}")
    if c * hosts > have.cpus:
        hint = f"--cpus auto ({fmt_cpus(auto)} each) or fewer hosts" if auto >= MIN_CPUS else "fewer hosts"
        raise FawkesError(f"lab: --cpus {fmt_cpus(c)} x {hosts} hosts = {fmt_cpus(c * hosts)} CPUs, more than "
                          f"{have.cpus_from} ({fmt_cpus(have.cpus)}); use {hint}")
    return float(c)


def _size_memory(hosts: int, m: int | str | None, raw: object, have: Machine) -> int | None:
    if m is None:
        return None
    auto = have.memory_mb // hosts
    if m == AUTO:
        m = auto
        if m < MIN_MEMORY_MB:
            raise FawkesError(f"lab: --memory auto: {fmt_mb(have.memory_mb)} ({have.memory_from}) / {hosts} hosts "
                              f"is less than {MIN_MEMORY_MB} MiB per host")
        return m
    if m < MIN_MEMORY_MB or m > have.memory_mb:
        raise FawkesError(f"lab: --memory must be between {MIN_MEMORY_MB} MiB and {fmt_mb(have.memory_mb)} "
                          f"({have.memory_from}), not {_show(raw)}")
    if m * hosts > have.memory_mb:
        hint = f"--memory auto ({fmt_mb(auto)} each) or fewer hosts" if auto >= MIN_MEMORY_MB else "fewer hosts"
        raise FawkesError(f"lab: --memory {fmt_mb(m)} x {hosts} hosts = {fmt_mb(m * hosts)}, more than "
                          f"{have.memory_from} ({fmt_mb(have.memory_mb)}); use {hint}")
    return m
