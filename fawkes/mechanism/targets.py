"""Targets (A-7): weighted shares of the capacity, clamped at the minima, in whole nodes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def weighted_targets(
    capacity: int,
    names: Sequence[str],
    weights: Mapping[str, float],
    minima: Mapping[str, int],
    caps: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Water-filling: each cluster gets capacity·w_i/W, but never less than its minimum.

    Clusters whose share falls below their minimum are fixed at it and the rest is
    re-divided; optional ``caps`` fix clusters at a maximum the same way.  Shares become
    integers by largest remainder (ties: the earlier name), so Σ targets = capacity
    whenever the minima fit and no cap binds (work-conserving).
    """
    if not names:
        return {}
    if sum(minima[n] for n in names) >= capacity:
        return {n: minima[n] for n in names}
    caps = caps or {}
    fixed: dict[str, int] = {}
    free = list(names)
    shares: dict[str, float] = {}
    while free:
        rest = capacity - sum(fixed.values())
        w_total = sum(max(0.0, weights.get(n, 0.0)) for n in free)
        if w_total > 0:
            shares = {n: rest * max(0.0, weights.get(n, 0.0)) / w_total for n in free}
        else:
            shares = {n: rest / len(free) for n in free}
        low = [n for n in free if shares[n] < minima[n]]
        if low:
            for n in low:
                fixed[n] = minima[n]
            free = [n for n in free if n not in fixed]
            continue
        high = [n for n in free if n in caps and shares[n] > max(caps[n], minima[n])]
        if high:
            for n in high:
                fixed[n] = max(caps[n], minima[n])
            free = [n for n in free if n not in fixed]
            continue
        break
    targets = dict(fixed)
    if free:
        floors = {n: math.floor(shares[n] + 1e-9) for n in free}
        targets.update(floors)
        left = capacity - sum(targets.values())
        pos = {n: i for i, n in enumerate(names)}
        order = sorted(free, key=lambda n: (-(shares[n] - floors[n]), pos[n]))
        for n in order[: max(0, left)]:
            targets[n] += 1
    return {n: targets[n] for n in names}
