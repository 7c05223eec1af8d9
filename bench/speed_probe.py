"""The machine's speed through a live run: SHA-256 steps per CPU-second, measured every few seconds.

The lab's hosts are CPU quotas of one machine whose own speed moves by 10-20 % within minutes
(``bench/results/lab_interference_2026-11-28.json``).  A benchmark that compares two live runs minutes apart
needs that speed *through* each run, not once before it.  :class:`SpeedProbe` is a thread that every
``every_s`` seconds hashes ``steps`` times (the burn job's work, ``fawkes/apps/burn.py``) and divides by the
CPU time the thread itself used (``time.thread_time``): the work a core does per second it gives, whatever
share of the cores the probe gets, so the probe does not measure the lab's load on itself.  Its own cost:
``steps`` hashes per ``every_s`` (100,000 per 2 s: about 4 % of one core here).
"""

from __future__ import annotations

import hashlib
import statistics
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
