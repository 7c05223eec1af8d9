"""Admission (A-8, A-9, A-10 in docs/ambiguities.md): a global FIFO queue of MR-cluster requests.

The head is admitted iff the minimum shares fit: Σ m_j (allocated clusters) + m_head ≤ C, and its
minimum fits its ceiling and its team's quota (:mod:`fawkes.mechanism.ceilings`; a request that does
not waits without holding the others).
What it needs beyond the free hosts is reclaimed from clusters above their minimum, in
proportion to their current weights and capped at their surplus; the residue is shared
again among the donors that still have surplus.

Which request is the head is :func:`queue_order` (issue 12, the YARN placement project's P-2/P-3):
FIFO by default; shortest expected duration or highest utility first; requests that can no longer
meet their deadline purged; starving requests first.  The snapshot's queue stays in request order:
this is the one place where the admission order of the queue is decided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from fawkes.mechanism import ceilings
from fawkes.mechanism.model import ClusterRequest, Snapshot
from fawkes.mechanism.settings import Settings
from fawkes.mechanism.targets import remainder_order


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: tuple[str, ...] = ()  # in FIFO order
    minima: dict[str, int] = field(default_factory=dict)  # min core nodes of the admitted
    reclaim: dict[str, int] = field(default_factory=dict)  # nodes to take from each donor
    waiting: tuple[str, ...] = ()
    reason: str = ""
    purged: tuple[str, ...] = ()  # requests dropped: they can no longer meet their deadline (P-3)


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """The queue as admission reads it: requests in the order they are considered, which of them are
    starving (never skipped), and which are purged (not considered at all)."""

    requests: tuple[ClusterRequest, ...]
    starving: frozenset[str] = frozenset()
    purged: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


def queue_order(snap: Snapshot, settings: Settings) -> QueueOrder:
    """The order in which admission considers the queue (``snap.queue`` is in request order).

    * ``deadline_purge``: a request with maxT that has waited longer than maxT − expected duration
      (0 if unknown) is purged ("to avoid wasting resources to run jobs that will be killed anyways");
    * ``starvation_guard_s``: a request whose slack U = maxT − duration − waited is below it (without
      maxT: that has waited at least that long) is *starving*: it comes first, in request order;
    * then ``admission_order``: ``fifo`` keeps request order; ``sjf`` sorts by expected duration
      (unknown last); ``utility`` by U, highest first (no maxT last).  Ties keep request order.
    """
    now = snap.now
    purged: list[str] = []
    reasons: list[str] = []
    live: list[ClusterRequest] = []
    for r in snap.queue:
        u = r.slack(now)
        if settings.deadline_purge and u is not None and u < 0:
            purged.append(r.name)
            reasons.append(f"{r.name} purged: waited {r.waited(now):g} s > maxT {r.deadline_s:g} - "
                           f"expected {r.expected_duration_s or 0.0:g} s")
        else:
            live.append(r)
    guard = settings.starvation_guard_s
    starving = frozenset() if guard is None else frozenset(
        r.name for r in live if (r.slack(now) < guard if r.deadline_s is not None else r.waited(now) >= guard))
    index = {r.name: i for i, r in enumerate(live)}
    if settings.admission_order == "sjf":
        def key(r):
            d = r.expected_duration_s
            return (d is None, d or 0.0, index[r.name])
    elif settings.admission_order == "utility":
        def key(r):
            u = r.slack(now)
            return (u is None, -(u or 0.0), index[r.name])
    else:
        def key(r):
            return index[r.name]
    first = [r for r in live if r.name in starving]
    rest = sorted((r for r in live if r.name not in starving), key=key)
    if starving:
        reasons.append("starving, first: " + ", ".join(r.name for r in first))
    return QueueOrder(tuple(first + rest), starving, tuple(purged), tuple(reasons))


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
    blocked = False  # a request that waits holds the ones behind it (strict FIFO, no backfill)
    q = queue_order(snap, settings)
    reasons: list[str] = list(q.reasons)
    for req in q.requests:
        over = ceilings.admissible(req.name, req.min_core, {c.name: c.min_core for c in allocated} | minima, settings)
        if over is not None:  # its ceiling or its team's quota: it waits without holding other teams' requests
            waiting.append(req.name)
            reasons.append(f"{req.name} waits: {over}")
            continue
        fits = committed + req.min_core <= snap.capacity
        if settings.skip_unfittable and req.name not in q.starving:
            if blocked:  # behind a starving request that waits
                waiting.append(req.name)
                reasons.append(f"{req.name} waits behind {waiting[0]} (starving)")
                continue
            if not fits or req.min_core > free:
                waiting.append(req.name)
                reasons.append(f"{req.name} skipped: minimum {req.min_core} does not fit now ({free} free)")
                continue
        elif not fits or (blocked and not settings.backfill):
            waiting.append(req.name)
            blocked = True
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
    # clusters admitted in one step take their places in request order (admission_key), whatever
    # order the discipline considered them in
    position = {r.name: i for i, r in enumerate(snap.queue)}
    admitted.sort(key=position.__getitem__)
    return Admission(tuple(admitted), minima, reclaim, tuple(waiting), "; ".join(reasons), q.purged)


def next_queue_change(snap: Snapshot, settings: Settings) -> float | None:
    """The earliest time after ``snap.now`` at which the clock alone changes :func:`queue_order` for
    this queue (a request becomes purgeable or starving), None if never.  A driver that does not
    look at the queue every few seconds (the simulator) calls admission again then."""
    now, guard, times = snap.now, settings.starvation_guard_s, []
    for r in snap.queue:
        if r.deadline_s is not None:
            edge = r.requested_at + r.deadline_s - (r.expected_duration_s or 0.0)  # slack 0 here
            if settings.deadline_purge:
                times.append(math.nextafter(edge, math.inf))  # purged once the slack is below 0
            if guard is not None:
                times.append(math.nextafter(edge - guard, math.inf))  # starving once below the guard
        elif guard is not None:
            times.append(r.requested_at + guard)
    later = [t for t in times if t > now]
    return min(later) if later else None


def admission_key(admitted_at: float, request_seq: int) -> tuple[float, int]:
    """The admission order of allocated clusters (the mechanism's tie and grow order): by admission
    time, clusters admitted in the same step by request order.  The simulator appends admitted
    clusters in this order; the coordinator's view sorts by it."""
    return (admitted_at, request_seq)


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
