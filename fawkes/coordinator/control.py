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
        (what was decided, None if there was nothing to decide; problems applying it)."""
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


def loop_policy(cfg) -> tuple[Settings, ResizeParams | None]:
    """The loop's settings (and chapter-2 runner, if any) of a coordinator config: its policy
    preset, with the config's ``period`` and ``sample_period`` overriding the preset's when set."""
    from fawkes.presets import loop_policy as of_policy

    overrides = {}
    if "period" in cfg.model_fields_set:
        overrides["period_s"] = cfg.period
    if "sample_period" in cfg.model_fields_set:
        overrides["sample_period_s"] = cfg.sample_period
    if cfg.idle_timeout_s is not None:
        overrides["idle_timeout_s"] = cfg.idle_timeout_s
    per = {name: c.idle_timeout_s for name, c in cfg.clusters.items() if c.idle_timeout_s is not None}
    if per:
        overrides["idle_timeout_by_cluster"] = tuple(sorted(per.items()))
    ceilings = {name: c.max_nodes for name, c in cfg.clusters.items() if c.max_nodes is not None}
    if ceilings:
        overrides["max_nodes_by_cluster"] = tuple(sorted(ceilings.items()))
    shares = {name: c.max_share for name, c in cfg.clusters.items() if c.max_share is not None}
    if shares:
        overrides["max_share_by_cluster"] = tuple(sorted(shares.items()))
    if cfg.schedules:
        overrides["schedules"] = tuple(s.as_setting() for s in cfg.schedules)
    if cfg.teams:
        overrides["team_quotas"] = tuple((t, tuple(q.clusters), q.max_nodes) for t, q in sorted(cfg.teams.items()))
    from fawkes.errors import ConfigError, FawkesError

    try:
        return of_policy(cfg.policy, **overrides)
    except ConfigError:
        raise  # names the preset file already
    except FawkesError as exc:  # an unknown preset name: one line naming the config and its key
        raise ConfigError(str(cfg.source or "config"), str(exc), field="policy") from None


def mechanism_settings(cfg) -> Settings:
    """The mechanism settings of a coordinator config (see :func:`loop_policy`)."""
    return loop_policy(cfg)[0]
