"""Placement-aware growth (issue 12; the YARN placement project's P-1): which free hosts a cluster
grows on, and whether it waits for better ones.

Hosts carry a rack (or site) label (``Snapshot.host_racks``, from the inventory).  A cluster's
*preferred* racks are those of its core nodes: transient nodes read their input from the core
nodes, so a same-rack transient node avoids cross-rack transfer.  Modes:

* ``none``: the free hosts in placement order, whatever their rack;
* ``hard``: preferred hosts only; wait for them otherwise;
* ``soft``: preferred hosts if enough are free; otherwise the wait-or-go rule: wait iff
  ``W + dur_fast < dur_slow``, where ``W`` is how long until enough preferred hosts are expected
  free (the free-time table, :mod:`fawkes.mechanism.forecast`), ``dur_fast`` the work's duration
  on preferred hosts and ``dur_slow = dur_fast × locality_penalty`` elsewhere; going, it takes the
  preferred hosts that are free and fills up with others.

:func:`place` is the gang form (all ``k`` hosts at once, the project's jobs: the SIM-P checks);
:func:`grow_hosts` the elastic form the loop's grow plan uses (:func:`fawkes.mechanism.plan.plan_towards`):
an MR-cluster may grow by some hosts now and the rest later, so the free preferred hosts are always
taken and the rule decides only the remainder.  ``locality_penalty`` is a setting; how it was
chosen is in docs/mechanism.md ("Placement").  Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Mode = Literal["none", "hard", "soft"]


@dataclass(frozen=True, slots=True)
class Placement:
    hosts: tuple[str, ...]  # chosen hosts (empty: wait)
    wait: bool
    preferred: bool  # every chosen host is on a preferred rack
    reason: str


def preferred_racks(core_hosts: Iterable[str], racks: Mapping[str, str]) -> frozenset[str]:
    """The racks of a cluster's core nodes (hosts without a label have none)."""
    return frozenset(racks[h] for h in core_hosts if h in racks)


def place(k: int, free: Iterable[str], racks: Mapping[str, str], preferred: frozenset[str], mode: Mode, *,
          dur_fast: float = 0.0, locality_penalty: float = 1.0, wait_s: float | None = None,
          same_rack: bool = False) -> Placement:
    """Choose ``k`` of the ``free`` hosts (placement order) for a cluster preferring ``preferred``.

    ``wait_s``: W, the expected time until enough preferred hosts are free (None: not foreseeable,
    which never justifies waiting in ``soft``).  ``same_rack``: preferred means all ``k`` on one of
    the preferred racks (an MPI-like gang); otherwise any preferred rack.
    """
    free = list(free)
    if k <= 0:
        return Placement((), False, True, "nothing to place")
    if mode == "none" or not preferred:
        hosts = tuple(free[:k])
        on = {racks.get(h) for h in hosts}
        pref = bool(preferred) and on <= preferred and (len(on) <= 1 or not same_rack)
        return Placement(hosts, len(hosts) < k, pref, "placement none" if mode == "none" else "no preferred rack")
    good = _preferred_hosts(k, free, racks, preferred, same_rack)
    if len(good) >= k:
        return Placement(tuple(good[:k]), False, True, f"{k} preferred hosts free")
    if mode == "hard":
        return Placement((), True, False, f"hard: {len(good)} of {k} preferred hosts free, waiting")
    dur_slow = dur_fast * locality_penalty
    if wait_s is not None and wait_s + dur_fast < dur_slow:
        return Placement((), True, False,
                         f"soft: wait {wait_s:g} s + {dur_fast:g} s < {dur_slow:g} s elsewhere, waiting")
    if len(free) < k:
        return Placement((), True, False, f"only {len(free)} of {k} hosts free")
    rest = [h for h in free if h not in set(good)]
    hosts = tuple(good + rest[:k - len(good)])
    why = "not foreseeable" if wait_s is None else f"{wait_s:g} s + {dur_fast:g} s >= {dur_slow:g} s"
    return Placement(hosts, False, False, f"soft: go now on {k - len(good)} other hosts (wait {why})")


def grow_hosts(need: int, free: Sequence[str], racks: Mapping[str, str], preferred: frozenset[str], mode: Mode,
               *, dur_fast: float = 0.0, locality_penalty: float = 1.0,
               wait_for: Callable[[int], float | None] | None = None) -> Placement:
    """Up to ``need`` of the ``free`` hosts (placement order) for a growing cluster.

    ``none`` (or no preferred rack, or no labels): the first ``need`` free hosts, as without racks.
    Otherwise the free hosts on preferred racks first.  For the ``r`` still missing: ``hard`` waits;
    ``soft`` asks ``wait_for(r)`` for W, the expected time until ``r`` more preferred hosts free up,
    and waits iff ``W + dur_fast < dur_fast × locality_penalty`` (unforeseeable W: go), else takes
    ``r`` hosts of other racks now.  ``wait`` says some of ``need`` is deliberately left for later.
    """
    if need <= 0:
        return Placement((), False, True, "nothing to place")
    if mode == "none" or not preferred:
        return Placement(tuple(free[:need]), False, False, "placement none" if mode == "none" else "no preferred rack")
    good = [h for h in free if racks.get(h) in preferred][:need]
    rest = need - len(good)
    if rest == 0:
        return Placement(tuple(good), False, True, f"{need} on preferred racks")
    if mode == "hard":
        return Placement(tuple(good), True, True, f"hard: {len(good)} on preferred racks, {rest} wait for them")
    others = [h for h in free if racks.get(h) not in preferred]
    if not others:
        return Placement(tuple(good), False, True, f"{len(good)} on preferred racks, no other host free")
    w = wait_for(rest) if wait_for is not None else None
    dur_slow = dur_fast * locality_penalty
    if w is not None and w + dur_fast < dur_slow:
        return Placement(tuple(good), True, True, f"soft: {len(good)} on preferred racks, {rest} wait "
                         f"({w:.0f} s + {dur_fast:.0f} s < {dur_slow:.0f} s elsewhere)")
    why = "not foreseeable" if w is None else f"{w:.0f} s + {dur_fast:.0f} s >= {dur_slow:.0f} s"
    took = others[:rest]
    return Placement(tuple(good + took), False, False,
                     f"soft: {len(good)} on preferred racks, {len(took)} on others now (wait {why})")


def _preferred_hosts(k: int, free: list[str], racks: Mapping[str, str], preferred: frozenset[str],
                     same_rack: bool) -> list[str]:
    if not same_rack:
        return [h for h in free if racks.get(h) in preferred]
    best: list[str] = []
    for rack in sorted(preferred):  # the fullest preferred rack (enough for the gang if any has)
        on = [h for h in free if racks.get(h) == rack]
        if len(on) >= k:
            return on
        if len(on) > len(best):
            best = on
    return best
