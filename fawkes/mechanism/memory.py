"""What one decision hands to the next: the controller's memory, an immutable value.

The snapshot says what is *observed* (nodes, samples, states); the memory says what the loop
*planned* and *counted* so far, per incarnation of each MR-cluster:

============================  =================================================================
field                         set by
============================  =================================================================
``weight``                    a tick (admission between ticks reclaims by it, A-8)
``target``                    a tick, or an admission that reclaims from the cluster (A-9)
``shrink_votes``              a tick (``shrink_after_ticks``)
``discrimination``            a tick: D since admission (the A-5 cumulative window reads it)
``idle_since``, ``seen``      a tick, folding the samples newer than ``seen`` (A-12)
``last_grow_at/shrink_at``    a tick whose plan grows/shrinks the cluster (the cooldown clock, B.5)
``victim_since``              a tick whose plan takes a busy node from it, with ``regrow_delay_ticks``;
                              cleared when the delay is over (BIG-C's D, B-3)
``regrow_votes``              a tick: a victim's consecutive ticks eligible to grow
============================  =================================================================

Fields added later default to the value that changes nothing, so a stored value without them
(an older coordinator's) reads back as before.

An entry belongs to one incarnation (``since`` = the request time of the cluster as it is now):
a cluster released and requested again starts from a fresh entry.  The simulator keeps the
value in memory; the coordinator stores it with every step (:meth:`Memory.to_json`), so a
restart resumes it and reconstructs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

FORMAT = 1
_NOT_NONE = ("since", "weight", "shrink_votes", "discrimination", "regrow_votes")
#: fields added after the first stored format, written only when not at their default
_LATER = {"victim_since": None, "regrow_votes": 0}


@dataclass(frozen=True, slots=True)
class ClusterMemory:
    since: float  # request time of the incarnation this entry belongs to
    weight: float = 0.0
    target: int | None = None
    shrink_votes: int = 0
    discrimination: float = 0.0
    idle_since: float | None = None
    seen: float | None = None  # time of the newest sample folded into idle_since
    last_grow_at: float | None = None
    last_shrink_at: float | None = None
    victim_since: float | None = None  # shrunk by a tick, waiting to regrow (regrow_delay_ticks)
    regrow_votes: int = 0  # consecutive ticks the victim was eligible to grow


@dataclass(frozen=True, slots=True)
class Memory:
    """Per-cluster memory (in no particular order) and the number of ticks taken."""

    clusters: tuple[tuple[str, ClusterMemory], ...] = ()
    ticks: int = 0
    _index: dict[str, ClusterMemory] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", dict(self.clusters))  # lookups in O(1); never mutated

    def of(self, name: str, since: float) -> ClusterMemory:
        """The entry of ``name``'s incarnation requested at ``since`` (a fresh one if none)."""
        m = self._index.get(name)
        return m if m is not None and m.since == since else ClusterMemory(since)

    def as_dict(self) -> dict[str, ClusterMemory]:
        return dict(self._index)

    def with_entries(self, entries: Mapping[str, ClusterMemory], *, keep: Iterable[str] | None = None,
                     ticks: int | None = None) -> Memory:
        """A new value: ``entries`` replace same-named ones; with ``keep``, only those names stay."""
        merged = self.as_dict() | dict(entries)
        if keep is not None:
            names = set(keep)
            merged = {n: m for n, m in merged.items() if n in names}
        return Memory(tuple(sorted(merged.items())), self.ticks if ticks is None else ticks)

    # ------------------------------------------------------------------ storage
    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "ticks": self.ticks,
                "clusters": {n: _entry_json(m) for n, m in self.clusters}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> Memory:
        """Read a stored value back; anything malformed raises ``ValueError`` naming the field."""
        if not doc:
            return cls()
        if doc.get("format") != FORMAT:
            raise ValueError(f"controller memory: format {doc.get('format')!r} is not {FORMAT}")
        ticks = doc.get("ticks", 0)
        if not isinstance(ticks, int) or ticks < 0:
            raise ValueError(f"controller memory: ticks: {ticks!r} is not a count")
        known = {f.name: f for f in fields(ClusterMemory)}
        out = []
        for name, entry in (doc.get("clusters") or {}).items():
            if not isinstance(entry, Mapping) or set(entry) - set(known) or "since" not in entry:
                raise ValueError(f"controller memory: clusters.{name}: malformed entry")
            for key, value in entry.items():
                ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                       and math.isfinite(value))
                if not ok or (value is None and key in _NOT_NONE):
                    raise ValueError(f"controller memory: clusters.{name}.{key}: {value!r} is not a number")
            m = ClusterMemory(**entry)
            if m.target is not None:
                m = replace(m, target=int(m.target))
            out.append((str(name), replace(m, shrink_votes=int(m.shrink_votes), regrow_votes=int(m.regrow_votes))))
        return cls(tuple(sorted(out)), ticks)


def _entry_json(m: ClusterMemory) -> dict[str, Any]:
    """One entry as stored: a field added later is left out at its default (missing = default)."""
    return {k: v for k, v in asdict(m).items() if k not in _LATER or v != _LATER[k]}
