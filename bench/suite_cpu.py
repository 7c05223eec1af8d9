#!/usr/bin/env python3
"""Where a command's CPU goes, every process counted: Linux process accounting around it.

    sudo python3 bench/suite_cpu.py [--acct FILE] [--top N] -- COMMAND [ARG...]
    python3 bench/suite_cpu.py --read FILE [--top N]
    python3 bench/suite_cpu.py --tests FILE [--top N]

With a command: turns the kernel's process accounting (``acct(2)``, BSD v3 records) on into FILE (default: a
new file under /tmp), runs COMMAND, turns it off, and prints the wall time, the machine's busy CPU time over
the run (``/proc/stat``: user + nice + system + irq + softirq + steal) and the CPU of every process that
exited meanwhile, by command name: total, count, and how it splits by the processes' own CPU (so that 500
JVM starts of 1 s show apart from one daemon of 500 s).  With ``--read``: the same table from a FILE kept
earlier.  Every process on the machine is counted, not only COMMAND's: run it with nothing else beside.
With ``--tests``: the CPU per test module and the costliest tests from a file the test suite wrote with
``FAWKES_TEST_CPU=FILE`` (tests/conftest.py: each test's pytest process and the children it waited for).

Why: a sampler of ``/proc`` misses processes shorter than its period (tool JVMs, ssh, shells), and the
suite's time on a 2-core machine follows its CPU (docs/testing.md).  Needs root (``acct(2)``); the
kernel records a process when it exits, with its command name (16 bytes: every JVM is ``java``), its
user and system time in 1/100 s (sampled at the clock tick: short processes count statistically) and
its exit code.  Accounting is machine-wide and goes to one file at a time: a second run beside this one
(or any other ``accton``) takes it over and, when it ends, turns it off for both.  Exit codes: COMMAND's,
or 2 on bad arguments (one line, nothing started).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import stat
import struct
import subprocess
import sys
import tempfile
import time

RECORD = struct.Struct("<BBHIIIIIIf8H16s")  # struct acct_v3 (linux/acct.h): 64 bytes
ACCT_V3 = 3
AHZ = 100  # the unit of ac_utime and ac_stime
BUCKETS = (0.3, 1.0, 3.0, 10.0, 60.0)  # a process' own CPU seconds: <0.3, 0.3-1, 1-3, 3-10, 10-60, >60


class BadInput(Exception):
    pass


def comp_t(c: int) -> int:
    """A ``comp_t``: 13-bit mantissa, 3-bit base-8 exponent."""
    return (c & 0x1FFF) << (3 * (c >> 13))


def read(path: str) -> list[tuple[str, float]]:
    """(command, CPU seconds) of every v3 record of an accounting file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BadInput(f"--read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"--read {path}: not a regular file")
    if st.st_size % RECORD.size:
        raise BadInput(f"--read {path}: {st.st_size} bytes is not a whole number of {RECORD.size}-byte records")
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for rec in RECORD.iter_unpack(data):
        if rec[1] != ACCT_V3:
            raise BadInput(f"--read {path}: not a v3 process-accounting file (version {rec[1]})")
        name = rec[18].split(b"\0", 1)[0].decode(errors="replace") or "?"
        out.append((name, (comp_t(rec[10]) + comp_t(rec[11])) / AHZ))
    return out


def table(records: list[tuple[str, float]], top: int) -> list[str]:
    cpu: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    split: dict[str, list[list[float]]] = collections.defaultdict(lambda: [[0, 0.0] for _ in range(len(BUCKETS) + 1)])
    for name, c in records:
        cpu[name] += c
        count[name] += 1
        b = split[name][next((i for i, e in enumerate(BUCKETS) if c < e), len(BUCKETS))]
        b[0] += 1
        b[1] += c
    heads = ["<0.3", "0.3-1", "1-3", "3-10", "10-60", ">60"]
    lines = [f"processes {len(records)}, CPU {sum(cpu.values()):.1f} s (user + system, exited processes)",
             f"{'command':<16} {'cpu_s':>9} {'n':>7} {'mean':>7}   by own CPU (n / cpu_s): " + "  ".join(heads)]
    for name, c in cpu.most_common(top):
        parts = "  ".join(f"{int(n)}/{s:.0f}" for n, s in split[name])
        lines.append(f"{name:<16} {c:9.1f} {count[name]:7d} {c / count[name]:7.2f}   {parts}")
    return lines


def busy() -> float:
    """The machine's busy CPU seconds since boot (/proc/stat; USER_HZ ticks)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")


def read_tests(path: str) -> list[dict]:
    """The lines of a ``FAWKES_TEST_CPU`` file: ``{"test", "self_s", "children_s", "wall_s"}`` each."""
    import json

    if not os.path.isfile(path):
        raise BadInput(f"--tests {path}: not a regular file")
    out = []
    with open(path, errors="replace") as f:
        for i, line in enumerate(f, 1):
            try:
                d = json.loads(line)
                row = {"test": str(d["test"]), **{k: float(d[k]) for k in ("self_s", "children_s", "wall_s")}}
            except (ValueError, KeyError, TypeError):
                raise BadInput(f"--tests {path}: line {i}: not a test's CPU record") from None
            if not all(0 <= row[k] < 1e7 for k in ("self_s", "children_s", "wall_s")):
                raise BadInput(f"--tests {path}: line {i}: a time out of range")
            out.append(row)
    return out


def tests_table(rows: list[dict], top: int) -> list[str]:
    """CPU seconds per test module (pytest's own + its waited children) and the ``top`` costliest tests."""
    mods: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in rows:
        m = mods[r["test"].split("::")[0]]
        m[0] += r["self_s"]
        m[1] += r["children_s"]
        m[2] += r["wall_s"]
        m[3] += 1
    total = sum(m[0] + m[1] for m in mods.values())
    lines = [f"{len(rows)} tests, {total:.0f} CPU s (pytest {sum(m[0] for m in mods.values()):.0f}, "
             f"children {sum(m[1] for m in mods.values()):.0f}), wall {sum(m[2] for m in mods.values()):.0f} s",
             f"{'CPU s':>8} {'pytest':>8} {'children':>8} {'wall s':>8} {'tests':>6}  module"]
    for name, m in sorted(mods.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:top]:
        lines.append(f"{m[0] + m[1]:8.1f} {m[0]:8.1f} {m[1]:8.1f} {m[2]:8.1f} {m[3]:6d}  {name}")
    lines.append(f"\n{'CPU s':>8} {'wall s':>8}  test")
    for r in sorted(rows, key=lambda r: -(r["self_s"] + r["children_s"]))[:top]:
        lines.append(f"{r['self_s'] + r['children_s']:8.1f} {r['wall_s']:8.1f}  {r['test']}")
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="suite_cpu.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--acct", help="the accounting file to write (default: a new file under /tmp)")
    ap.add_argument("--read", metavar="FILE", help="summarise an accounting file kept earlier")
    ap.add_argument("--tests", metavar="FILE", help="summarise a FAWKES_TEST_CPU file (CPU per test)")
    ap.add_argument("--top", type=int, default=25, help="commands listed (default 25)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.command[:1] == ["--"]:
        a.command = a.command[1:]
    if not 1 <= a.top <= 10_000:
        raise BadInput(f"--top: expected 1..10000, got {a.top}")
    if (a.read is not None) + (a.tests is not None) + bool(a.command) != 1:
        raise BadInput("give one of --read FILE, --tests FILE or -- COMMAND")
    if a.command and os.geteuid() != 0:
        raise BadInput("process accounting needs root (acct(2)); --read works without")
    if a.acct is not None:
        if "\0" in a.acct or "\n" in a.acct:
            raise BadInput("--acct: a path without NUL or newline")
        if os.path.lexists(a.acct):
            raise BadInput(f"--acct {a.acct}: exists (the file is created new)")
        if not os.path.isdir(os.path.dirname(os.path.abspath(a.acct))):
            raise BadInput(f"--acct {a.acct}: no such directory")
    return a


def main(argv: list[str] | None = None) -> int:
    try:
        a = parse(sys.argv[1:] if argv is None else argv)
        if a.read:
            print("\n".join(table(read(a.read), a.top)))
            return 0
        if a.tests:
            print("\n".join(tests_table(read_tests(a.tests), a.top)))
            return 0
    except BadInput as exc:
        print(f"suite_cpu.py: {exc}", file=sys.stderr)
        return 2
    path = a.acct or tempfile.mkstemp(prefix="suite-cpu-", suffix=".acct")[1]
    if a.acct:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode()) != 0:
        print(f"suite_cpu.py: acct({path}): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    t0, b0 = time.monotonic(), busy()
    try:
        rc = subprocess.call(a.command)
    finally:
        b1, t1 = busy(), time.monotonic()
        libc.acct(None)
    print(f"\n== suite_cpu: {' '.join(a.command)}\nwall {t1 - t0:.0f} s, machine busy {b1 - b0:.0f} CPU s "
          f"({(b1 - b0) / (t1 - t0):.2f} cores of {os.cpu_count()}); accounting file {path}")
    print("\n".join(table(read(path), a.top)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
