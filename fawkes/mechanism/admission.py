"""Admission (A-8, A-9, A-10 in docs/ambiguities.md): a global FIFO queue of MR-cluster requests.

The head is admitted iff the minimum shares fit: Σ m_j (allocated clusters) + m_head ≤ C.
What it needs beyond the free hosts is reclaimed from clusters above their minimum, in
proportion to their current weights and capped at their surplus; the residue is shared
again among the donors that still have surplus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from fawkes.mechanism.model import Snapshot
from fawkes.mechanism.settings import Settings
from fawkes.mechanism.targets import remainder_order


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: tuple[str, ...] = ()  # in FIFO order
    minima: dict[str, int] = field(default_factory=dict)  # min core nodes of the admitted
    reclaim: dict[str, int] = field(default_factory=dict)  # nodes to take from each donor
    waiting: tuple[str, ...] = ()
    reason: str = ""


def admit(snap: Snapshot, weights: Mapping[str, float], settings: Settings, leaving: frozenset[str] = frozenset()) -> Admission:
    """Admit from the head of ``snap.queue`` while the minimum shares fit.

    ``weights`` are the donors' current weights; ``leaving`` names allocated clusters that
    are being deactivated (their minima no longer count, their nodes are not yet free).
    """
    allocated = [c for c in snap.allocated if c.name not in leaving]
    committed = sum(c.min_core for c in allocated)
    free = len(snap.free_hosts)
    surplus = {c.name: c.settled - c.min_core for c in allocated if c.settled > c.min_core}
    admitted: list[str] = []
    minima: dict[str, int] = {}
    reclaim: dict[str, int] = {}
    waiting: list[str] = []
    reasons: list[str] = []
    for req in snap.queue:
        fits = committed + req.min_core <= snap.capacity
        if not fits or (waiting and not settings.backfill):
            waiting.append(req.name)
            if not fits:
                reasons.append(f"{req.name} waits: minima {committed}+{req.min_core} > capacity {snap.capacity}")
            else:
                reasons.append(f"{req.name} waits behind {waiting[0]} (strict FIFO)")
            continue
        committed += req.min_core
        admitted.append(req.name)
        minima[req.name] = req.min_core
        need = req.min_core - free
        free = max(0, free - req.min_core)
        if need > 0:
            taken = reclaim_from(need, surplus, weights, settings)
            for k, v in taken.items():
                reclaim[k] = reclaim.get(k, 0) + v
                surplus[k] -= v
        reasons.append(f"{req.name} admitted ({req.min_core} core nodes" + (f", {need} reclaimed)" if need > 0 else ")"))
    return Admission(tuple(admitted), minima, reclaim, tuple(waiting), "; ".join(reasons))


def reclaim_from(need: int, surplus: Mapping[str, int], weights: Mapping[str, float], settings: Settings) -> dict[str, int]:
    """Split ``need`` nodes over donors ∝ weight (or surplus), each capped at its surplus (A-8)."""
    donors = {k: v for k, v in surplus.items() if v > 0}
    order = list(surplus)  # admission order (ties, :func:`remainder_order`)
    taken: dict[str, int] = {}
    while need > 0 and donors:
        if settings.admission_reclaim == "weights":
            basis = {k: max(0.0, weights.get(k, 0.0)) for k in donors}
        else:
            basis = {k: float(v) for k, v in donors.items()}
        total = sum(basis.values())
        if total <= 0:
            basis = {k: float(v) for k, v in donors.items()}
            total = sum(basis.values())
        exact = {k: need * b / total for k, b in basis.items()}
        quota = {k: math.floor(x) for k, x in exact.items()}
        left = need - sum(quota.values())
        for k in remainder_order({k: exact[k] - quota[k] for k in donors}, order)[:left]:
            quota[k] += 1
        progressed = 0
        for k, q in quota.items():
            q = min(q, donors[k])
            if q > 0:
                taken[k] = taken.get(k, 0) + q
                donors[k] -= q
                need -= q
                progressed += q
        donors = {k: v for k, v in donors.items() if v > 0}
        if progressed == 0:
            break
    return taken
