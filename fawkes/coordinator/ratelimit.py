"""A token-bucket rate limit per key (an API token, a client address), thread-safe.

Each key may make ``burst`` requests at once, then ``rate_per_min`` per minute; :meth:`RateLimit.take`
answers how many seconds to wait (0: go ahead).  Buckets of keys not seen for a while are dropped, so
a stream of new keys does not grow it without bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

_MAX_KEYS = 10_000


class RateLimit:
    def __init__(self, rate_per_min: float, burst: int, clock: Callable[[], float] = time.monotonic):
        if not rate_per_min > 0 or burst < 1:
            raise ValueError("rate_per_min must be > 0 and burst >= 1")
        self.rate = rate_per_min / 60.0
        self.burst = float(burst)
        self.clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> float:
        """Spend one request of ``key``'s bucket: 0.0 if it had one, else the seconds until it has."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._store(key, tokens - 1.0, now)
                return 0.0
            self._store(key, tokens, now)
            return (1.0 - tokens) / self.rate

    def _store(self, key: Hashable, tokens: float, now: float) -> None:
        if key not in self._buckets and len(self._buckets) >= _MAX_KEYS:
            full = self.burst / self.rate  # a bucket untouched this long is full again: forgetting it is exact
            self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full}
        self._buckets[key] = (tokens, now)
