"""Opportunistic capacity from measured slack (issue 12; UBIS, seed 004, U-1..U-4): the decisions,
pure (no I/O, no clock).  A driver measures; these functions say what to do with the measurement.

* :func:`room`: UBIS Algorithm 1's ``Avail_opp = T_alloc × Cap − Util − Alloc_new`` for one
  resource (new grants counted at their full request: the conservative headroom);
* :func:`fits`: whether a request fits the room in every resource;
* :func:`watchdog`: the node-local preemption rule: ``count`` consecutive checks above
  ``T_preempt`` in any resource (UBIS: every 1 s, 3 checks, 0.99 CPU / 0.95 memory);
* :func:`victims`: which opportunistic workers to stop to get back under the threshold (newest
  first), and :func:`accepts`: a cluster's opt-in (``accept``, ``refuse``, ``maps_only``).

Same-node promotion (U-3) is a book-keeping rule, not a computation: when the owner's regular
claim on a host ends, the opportunistic worker already there becomes a regular transient node
(:func:`promote` picks which, oldest first, never across nodes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

Accept = Literal["accept", "refuse", "maps_only"]

#: UBIS' recommendations (§ 2 of the seed digest)
T_ALLOC = 0.9
T_PREEMPT = {"cpu": 0.99, "mem": 0.95}
PREEMPT_COUNT = 3


def room(capacity: float, utilization: float, t_alloc: float, granted: float = 0.0) -> float:
    """Opportunistic room of one resource on one node (never negative)."""
    return max(0.0, t_alloc * capacity - utilization - granted)


def fits(request: Mapping[str, float], capacity: Mapping[str, float], utilization: Mapping[str, float],
         t_alloc: float, granted: Mapping[str, float]) -> bool:
    return all(request[r] <= room(capacity[r], utilization.get(r, 0.0), t_alloc, granted.get(r, 0.0)) + 1e-12
               for r in request)


def over(utilization: Mapping[str, float], capacity: Mapping[str, float], t_preempt: Mapping[str, float]) -> bool:
    return any(utilization.get(r, 0.0) > t_preempt[r] * capacity[r] for r in t_preempt)


def watchdog(streak: int, utilization: Mapping[str, float], capacity: Mapping[str, float],
             t_preempt: Mapping[str, float] = T_PREEMPT, count: int = PREEMPT_COUNT) -> tuple[int, bool]:
    """One check: (the new streak of checks above the threshold, whether to preempt now)."""
    streak = streak + 1 if over(utilization, capacity, t_preempt) else 0
    return (0, True) if streak >= count else (streak, False)


def victims(opportunistic: Sequence[tuple[str, Mapping[str, float]]], utilization: Mapping[str, float],
            capacity: Mapping[str, float], t_preempt: Mapping[str, float] = T_PREEMPT) -> list[str]:
    """Opportunistic workers to stop, newest first (``opportunistic`` oldest first, with each one's
    current usage), until the node is back under ``t_preempt``; never a regular one."""
    use = dict(utilization)
    out = []
    for wid, u in reversed(opportunistic):
        if not over(use, capacity, t_preempt):
            break
        out.append(wid)
        for r, v in u.items():
            use[r] = use.get(r, 0.0) - v
    return out


def accepts(mode: Accept, task_kind: str) -> bool:
    """Whether a cluster with ``mode`` runs a task of ``task_kind`` (map, reduce, ...) opportunistically."""
    return mode == "accept" or (mode == "maps_only" and task_kind == "map")


def promote(opportunistic_oldest_first: Sequence[str], freed_regular: int) -> list[str]:
    """Same-node promotion: the oldest opportunistic workers on the node take the regular room freed."""
    return list(opportunistic_oldest_first[:max(0, freed_regular)])
