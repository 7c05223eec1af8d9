"""The control loop's decisions: the mechanism called on the store's snapshot (dask AdaptiveCore style).

Three entry points, all short and synchronous; the service schedules them:

* :meth:`Control.tick` every T: decide, record the decision, write its plan as intent;
* :meth:`Control.between` every few seconds: admit queued clusters (A-9) and refill clusters
  below their standing target from hosts that became free (A-19);
* :meth:`Control.preview`: what the next tick would decide, recording and changing nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fawkes import faults
from fawkes.coordinator.intent import apply, record_decision
from fawkes.coordinator.view import Signals, build_snapshot
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, Decision, Settings, Snapshot, controller
from fawkes.mechanism.controller import Between
from fawkes.mechanism.koala_mr import ResizeParams
from fawkes.mechanism.memory import Memory
from fawkes.store import Store
from fawkes.store.base import gc_paused


class Control:
    """``runner``: a chapter-2 (KOALA-MR) runner policy; each tick is then an offer round
    (``controller.offer``) instead of a FAWKES rebalance, and ``settings`` serve admission,
    refill and sampling."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time,
                 runner: ResizeParams | None = None):
        self.store = store
        self.settings = settings
        self.clock = clock
        self.runner = runner
        #: CERES' measured signals for each snapshot (the coordinator's sampler; none: not measured)
        self.signals: Callable[[], Signals] | None = None

    def snapshot(self, minima_at: float | None = None) -> Snapshot:
        """The snapshot of now, from the store and the sampler's in-memory signals; minima raised by
        the schedules active at ``minima_at`` (default: now)."""
        return build_snapshot(self.store, self.settings, self.clock(),
                              self.signals() if self.signals is not None else None, minima_at=minima_at)

    def memory(self) -> Memory:
        """The controller memory the last step stored (empty before the first)."""
        try:
            return Memory.from_json(self.store.load_memory())
        except ValueError as exc:
            raise FawkesError(f"state: {exc}") from None

    def preview(self, minima_at: float | None = None) -> Decision:
        """The decision the next tick would take now (nothing recorded, nothing changed); with
        ``minima_at``, on today's state with the minima the schedules give at that time."""
        snap = self.snapshot(minima_at)
        return self._decide(self.memory(), snap)[0]

    def tick(self) -> tuple[int, Decision, list[str]]:
        """One decision: (tick number, decision, problems applying its plan).  The decision and
        the memory it leaves are stored in one transaction, before its plan is written as intent."""
        snap = self.snapshot()
        with gc_paused():  # tens of thousands of small acyclic values: the collector's passes cost 40 ms
            d, memory = self._decide(self.memory(), snap)
        tick = record_decision(self.store, d, snap, self.settings, memory)
        faults.point("decision-recorded")
        problems = purge(self.store, d.admission.purged)
        problems += apply(self.store, d.plan, admitted=d.admission.admitted, deactivate=d.deactivate,
                          why=f"tick {tick}")
        return tick, d, problems

    def _decide(self, memory: Memory, snap: Snapshot) -> tuple[Decision, Memory]:
        if self.runner is None:
            return controller.tick(memory, snap, self.settings)
        return controller.offer(memory, snap, self.runner)

    def between(self) -> tuple[Between | None, list[str]]:
        """Admission on arrivals and releases, then growth into freed hosts, between ticks:
        (what was decided, None if there was nothing to decide; problems applying it).  Without a queued
        request or a free host there is nothing to decide: one small read, no snapshot."""
        if not self.store.waiting_or_free():
            return None, []
        snap = self.snapshot()
        if not snap.queue and not snap.free_hosts:
            return None, []
        b = controller.between(self.memory(), snap, self.settings)
        problems = purge(self.store, b.admission.purged)
        if b.admission.admitted:
            self.store.save_memory("admission", b.memory.to_json(), snap.now)
            problems += apply(self.store, b.admission_plan, admitted=b.admission.admitted, why="admission")
        if b.refill_plan.grows:
            problems += apply(self.store, b.refill_plan, why="refill")
        return b, problems


def purge(store: Store, names) -> list[str]:
    """Withdraw queued requests that can no longer meet their deadline (``deadline_purge``, P-3)."""
    problems = []
    for name in names:
        try:
            store.transition_cluster(name, ClusterState.RELEASED, "purged: it can no longer meet its deadline")
        except FawkesError as exc:
            problems.append(f"purge {name}: {exc}")
    return problems


