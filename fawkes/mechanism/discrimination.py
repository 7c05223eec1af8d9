"""Discrimination (eqs. 3.1-3.3): held share minus entitled share, integrated over time.

c_i(t) is piecewise constant (it changes only when nodes are assigned or handed back), so
its integral is exact.  Units follow the settings (A-5): fraction of C times seconds by
default, so tau = 10 is an RMS mismatch of sqrt(10)/T.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fawkes.mechanism.settings import Settings


def temporal_discrimination(held: float, entitled: float) -> float:
    """Implements eq. (3.1): d_i(t) = c_i(t) − w_i(t), the share of the resources a cluster holds now less
    the share its weight entitles it to (positive: it holds more than its share)."""
    return held - entitled


def held_integral(allocation: Sequence[tuple[float, int]], start: float, end: float) -> tuple[float, float]:
    """(∫ nodes dt over [start, end], seconds covered).

    ``allocation`` holds change points ``(time, nodes)`` in time order; before the first one
    the cluster did not exist, so the covered span starts at max(start, first time).
    """
    if end <= start or not allocation:
        return 0.0, 0.0
    total = 0.0
    origin = max(start, allocation[0][0])
    for i, (t, n) in enumerate(allocation):
        t_next = allocation[i + 1][0] if i + 1 < len(allocation) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            total += n * (hi - lo)
    return total, max(0.0, end - origin)


def interval_discrimination(
    allocation: Sequence[tuple[float, int]],
    weight: float,
    start: float,
    end: float,
    capacity: int,
    settings: Settings,
    cumulative: float = 0.0,
) -> float:
    """Implements eq. (3.2): a cluster's discrimination over the interval, its temporal discrimination
    (eq. 3.1) integrated: D_i(start, end) = ∫ (c_i − w_i) dt, with w_i constant over the interval and c_i
    integrated exactly (A-5: c_i a fraction of C, so D is in fraction-seconds, or in node-seconds;
    ``cumulative`` carries the earlier intervals')."""
    integral, span = held_integral(allocation, start, end)
    if settings.discrimination_units == "node_seconds":
        d = integral - span * weight * capacity
    else:
        d = (integral / capacity if capacity else 0.0) - span * weight
    if settings.discrimination_window == "cumulative":
        d += cumulative
    return d


def global_factor(ds: Iterable[float], settings: Settings) -> float:
    """Implements eq. (3.3): the global discrimination factor Var(D) = E[D²] − E[D]² read as E[D²], the
    mean of the squared discriminations of the active clusters (A-4), or the true variance if configured."""
    values = list(ds)
    if not values:
        return 0.0
    ms = sum(d * d for d in values) / len(values)
    if settings.global_factor == "variance":
        mean = sum(values) / len(values)
        return ms - mean * mean
    return ms
