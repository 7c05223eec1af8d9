"""The machine's speed through a live run: SHA-256 steps per CPU-second, measured every few seconds.

The lab's hosts are CPU quotas of one machine whose own speed moves by 10-20 % within minutes
(``bench/results/lab_interference_2026-11-28.json``).  A benchmark that compares two live runs minutes apart
needs that speed *through* each run, not once before it.  :class:`SpeedProbe` is a thread that every
``every_s`` seconds hashes ``steps`` times (the burn job's work, ``fawkes/apps/burn.py``) and divides by the
CPU time the thread itself used (``time.thread_time``): the work a core does per second it gives, whatever
share of the cores the probe gets, so the probe does not measure the lab's load on itself.  Its own cost:
``steps`` hashes per ``every_s`` (100,000 per 2 s: about 4 % of one core here).

:class:`HostProbe` measures what :class:`SpeedProbe` leaves out: the share of the machine a lab host actually
gets.  It is a process in a cgroup of its own with a lab host's CPU quota that hashes for ``busy_s`` of every
``every_s`` seconds and reports its steps per *wall* second: the quota, times the machine's speed, times
whatever the other hosts' load leaves it; so a lab host's job runs as fast as this probe does, to first order.
Its own cost: the quota for a ``busy_s / every_s`` part of the time (0.33 CPU x 0.5 / 2 s: about 8 % of a core).
"""

from __future__ import annotations

import hashlib
import statistics
import subprocess
import sys
import threading
import time


class SpeedProbe:
    def __init__(self, every_s: float = 2.0, steps: int = 100_000):
        self.every_s, self.steps = every_s, steps
        self.samples: list[tuple[float, float]] = []  # (wall time, steps per CPU-second)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="speed-probe", daemon=True)

    def _run(self) -> None:
        h = b"fawkes" * 10
        while not self._stop.is_set():
            c0 = time.thread_time()
            for _ in range(self.steps):
                h = hashlib.sha256(h).digest()
            used = time.thread_time() - c0
            if used > 0:
                self.samples.append((time.time(), self.steps / used))
            self._stop.wait(self.every_s)

    def __enter__(self) -> "SpeedProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def speed(self, start: float, end: float) -> float | None:
        """The median steps per CPU-second of the samples taken in ``[start, end]`` (None: none there)."""
        got = [v for t, v in self.samples if start <= t <= end]
        return statistics.median(got) if got else None


#: the probe host's loop: hash for BUSY wall seconds, print (mid wall time, steps per wall second), sleep the rest
_HOST_LOOP = """
import hashlib, sys, time
busy, every = float(sys.argv[1]), float(sys.argv[2])
h = b"fawkes" * 10
while True:
    t0 = time.time(); n = 0
    while time.time() - t0 < busy:
        for _ in range(2000):
            h = hashlib.sha256(h).digest()
        n += 2000
    t1 = time.time()
    print(f"{(t0 + t1) / 2:.3f} {n / (t1 - t0):.1f}", flush=True)
    time.sleep(max(0.0, every - (t1 - t0)))
"""


class HostProbe:
    """A process with a lab host's CPU quota (``cpus``), in the cgroup ``fawkes-lab-<prefix>/probe``, hashing
    for ``busy_s`` of every ``every_s`` seconds: its steps per wall second (:meth:`speed`) through a run.
    Needs root and the cgroup cpu controller (as the lab does)."""

    def __init__(self, prefix: str, cpus: float, every_s: float = 2.0, busy_s: float = 0.5):
        if not 0 < busy_s <= every_s:
            raise ValueError("busy_s must be in (0, every_s]")
        self.prefix, self.cpus, self.every_s, self.busy_s = prefix, cpus, every_s, busy_s
        self.samples: list[tuple[float, float]] = []  # (wall time, steps per wall second)
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._read, name="host-probe", daemon=True)

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                t, v = map(float, line.split())
            except ValueError:
                continue
            self.samples.append((t, v))

    def __enter__(self) -> "HostProbe":
        from fawkes.lab import cgroup

        procs = cgroup.create(self.prefix, "probe", cpus=self.cpus)
        self._proc = subprocess.Popen([*cgroup.enter(procs), sys.executable, "-c", _HOST_LOOP, str(self.busy_s),
                                       str(self.every_s)], stdout=subprocess.PIPE, text=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        from fawkes.lab import cgroup

        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._thread.join(timeout=10)
        cgroup.remove(self.prefix)

    def speed(self, start: float, end: float) -> float | None:
        """The median steps per wall second of the samples taken in ``[start, end]`` (None: none there)."""
        got = [v for t, v in self.samples if start <= t <= end]
        return statistics.median(got) if got else None
