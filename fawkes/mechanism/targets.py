"""Targets (A-7): weighted shares of the capacity, clamped at the minima, in whole nodes."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: remainders closer than this are a tie (float noise of the shares' arithmetic is far below it)
TIE_DIGITS = 9


def remainder_order(remainders: Mapping[str, float], order: Sequence[str]) -> list[str]:
    """Largest remainder first; equal remainders (to 1e-9) in ``order`` (admission order).

    The one tie rule of the mechanism: targets and admission's reclaim both use it."""
    pos = {n: i for i, n in enumerate(order)}
    return sorted(remainders, key=lambda n: (-round(remainders[n], TIE_DIGITS), pos.get(n, len(pos)), n))


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
    integers by largest remainder, so Σ targets = capacity whenever the minima fit and no cap
    binds (work-conserving).  Remainders are compared rounded (:func:`remainder_order`), so
    float noise never decides a tie: ties go to the earlier cluster in ``names`` (admission order).
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
        order = remainder_order({n: shares[n] - floors[n] for n in free}, names)
        for n in order[: max(0, left)]:
            targets[n] += 1
    return {n: targets[n] for n in names}
