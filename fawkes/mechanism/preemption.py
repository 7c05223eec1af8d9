"""How much to take back, from whom, and when a victim may grow again (BIG-C, B-3..B-5).

Three refinements of a rebalancing tick's targets, each a setting whose default changes nothing
(``docs/mechanism.md``, "Preemption settings"):

* :func:`wait_to_regrow` (``regrow_delay_ticks``, BIG-C's delayed resumption D): a *victim*, a
  cluster from which a tick's plan took a node running tasks, regrows only after it has been eligible to grow for D
  consecutive rebalancing ticks; until then it keeps what it holds.
* :func:`demand_capped` (``shrink_amount: demand_capped``, BIG-C's Algorithm 1): the over-share
  clusters together give at most what the under-share ones need beyond the hosts that are free
  or on their way back; the under-share clusters' targets are capped at their demand.
* :func:`take_order` (``victim_order``): which over-share clusters give first when less than
  the whole surplus is taken.

Pure functions of the views, this tick's targets and the controller's memory.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from fawkes.mechanism.memory import ClusterMemory
from fawkes.mechanism.model import ClusterView
from fawkes.mechanism.settings import Settings


def victims(views: Sequence[ClusterView], mem: Mapping[str, ClusterMemory], settings: Settings) -> dict[str, int]:
    """The clusters waiting to regrow and their votes reset to 0 (a tick that does not want them
    bigger breaks the run of consecutive ticks)."""
    if settings.regrow_delay_ticks <= 0:
        return {}
    return {c.name: 0 for c in views if mem[c.name].victim_since is not None}


def wait_to_regrow(targets: Mapping[str, int], views: Sequence[ClusterView], mem: Mapping[str, ClusterMemory],
                   settings: Settings) -> tuple[dict[str, int], dict[str, int]]:
    """Victims the targets want bigger: each one's vote is its count of consecutive eligible
    ticks; while the vote is at most ``regrow_delay_ticks`` it is capped at what it holds (never
    below its minimum).  Returns (caps, votes of every victim still waiting); a victim whose
    vote passes D is in neither: it grows now and is a victim no more."""
    caps: dict[str, int] = {}
    votes = victims(views, mem, settings)
    for c in views:
        if c.name not in votes or targets[c.name] <= c.settled:
            continue
        v = mem[c.name].regrow_votes + 1
        if v <= settings.regrow_delay_ticks:
            caps[c.name] = max(c.settled, c.min_core)
            votes[c.name] = v
        else:
            del votes[c.name]
    return caps, votes


def demand(view: ClusterView) -> int | None:
    """Nodes the cluster's tasks can use, from its latest sample: ⌈(pending + running) / slots
    per node⌉, at least its minimum; None without a sample (no cap)."""
    if not view.samples:
        return None
    m = view.samples[-1]
    return max(view.min_core, math.ceil((m.pending_tasks + m.running_tasks) / max(1, view.slots_per_node)))


def demand_capped(targets: Mapping[str, int], views: Sequence[ClusterView], pool: int,
                  discrimination: Mapping[str, float], settings: Settings) -> dict[str, int]:
    """B-4: take from the over-share clusters at most what the under-share ones need.

    Need: each cluster the targets want bigger wants ``min(target, max(settled, demand))``;
    a cluster not yet in ``views`` (just admitted) wants its whole target.  What the pool has
    beyond the settled nodes (free hosts, nodes draining) serves first; the rest, at most the
    whole surplus, is taken in :func:`take_order`.  Returns the new targets: under-share clusters
    at what they want, over-share ones at what they keep."""
    by_name = {c.name: c for c in views}
    settled = {c.name: c.settled for c in views}
    want: dict[str, int] = {}
    for n, t in targets.items():
        s = settled.get(n, 0)
        if t > s:
            cap = demand(by_name[n]) if n in by_name else None
            want[n] = (t if cap is None else min(t, max(s, cap))) - s
    surplus = {c.name: c.settled - targets[c.name] for c in views if targets[c.name] < c.settled}
    if not surplus and not want:
        return dict(targets)
    spare = max(0, pool - sum(settled.values()))
    take = min(sum(surplus.values()), max(0, sum(want.values()) - spare))
    taken = take_order(surplus, take, views, discrimination, settings)
    out = dict(targets)
    for n, k in surplus.items():
        out[n] = settled[n] - taken.get(n, 0)
    for n, k in want.items():
        out[n] = settled.get(n, 0) + k
    return out


def take_order(surplus: Mapping[str, int], take: int, views: Sequence[ClusterView],
               discrimination: Mapping[str, float], settings: Settings) -> dict[str, int]:
    """How many nodes each over-share cluster gives when ``take`` of the ``surplus`` are taken
    (``victim_order``).  Ties go by admission order (the order of ``views``)."""
    pos = {c.name: i for i, c in enumerate(views)}
    out: dict[str, int] = {}
    if take <= 0:
        return out
    if settings.victim_order == "largest_surplus":  # one node at a time: spread the loss
        # largest remaining surplus first; equal ones: the cluster that gave fewer, then admission order
        heap = [(-k, 0, pos[n], n) for n, k in surplus.items()]
        heapq.heapify(heap)
        for _ in range(take):
            k, given, p, n = heapq.heappop(heap)
            out[n] = given + 1
            if k + 1 < 0:
                heapq.heappush(heap, (k + 1, given + 1, p, n))
        return out
    if settings.victim_order == "most_discriminated":
        key = {n: -discrimination.get(n, 0.0) for n in surplus}
    else:  # longest_remaining: most tasks left per node first
        key = {}
        for c in views:
            if c.name in surplus:
                m = c.samples[-1] if c.samples else None
                left = (m.pending_tasks + m.running_tasks) if m is not None else 0
                key[c.name] = -left / max(1, c.settled)
    for n in sorted(surplus, key=lambda n: (round(key[n], 9), pos[n])):
        k = min(surplus[n], take)
        if k <= 0:
            break
        out[n] = k
        take -= k
    return out
