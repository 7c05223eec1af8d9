"""How long the coordinator's scheduled steps take: ``fawkes_step_duration_seconds`` in /metrics, and one
warning (at most every 10 minutes per step) when a step takes longer than its interval.

One coordinator runs its steps one at a time (docs/operations.md, "Scale"): a step that overruns its
interval delays the next run of every step, so this is the figure that says when a pool has outgrown
one coordinator.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time

log = logging.getLogger("fawkes.coordinator")

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
WARN_EVERY_S = 600.0


class StepTimes:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self.counts: dict[str, list[int]] = {}  # step -> count per bucket (the last: above every bound)
        self.sums: dict[str, float] = {}
        self.warned_at: dict[str, float] = {}

    def observe(self, step: str, seconds: float, interval_s: float | None = None) -> None:
        with self._lock:
            counts = self.counts.setdefault(step, [0] * (len(BUCKETS) + 1))
            counts[bisect.bisect_left(BUCKETS, seconds)] += 1
            self.sums[step] = self.sums.get(step, 0.0) + seconds
            now = self.clock()
            late = interval_s is not None and seconds > interval_s and \
                now - self.warned_at.get(step, -WARN_EVERY_S) >= WARN_EVERY_S
            if late:
                self.warned_at[step] = now
        if late:
            log.warning("the %s step took %.1fs, longer than its interval of %gs: every step runs later than "
                        "due (fawkes_step_duration_seconds; docs/operations.md, Scale)", step, seconds, interval_s)

    def families(self):
        """The Prometheus histogram (cumulative buckets, as the exposition format wants)."""
        from prometheus_client.core import HistogramMetricFamily

        h = HistogramMetricFamily("fawkes_step_duration_seconds", "time the coordinator's scheduled steps took "
                                  "(tick: a decision; fast: reconcile and dispatch; sample)", labels=["step"])
        with self._lock:
            for step, counts in sorted(self.counts.items()):
                cum, buckets = 0, []
                for bound, n in zip((*map(str, BUCKETS), "+Inf"), counts):
                    cum += n
                    buckets.append((bound, cum))
                h.add_metric([step], buckets, self.sums[step])
        yield h
