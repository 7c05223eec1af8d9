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

from fawkes.coordinator.intent import apply, record_decision
from fawkes.coordinator.view import build_snapshot
from fawkes.mechanism import Decision, Settings, admit_now, decide, refill
from fawkes.store import Store


class Control:
    def __init__(self, store: Store, settings: Settings, clock: Callable[[], float] = time.time):
        self.store = store
        self.settings = settings
        self.clock = clock

    def preview(self) -> Decision:
        """The decision the next tick would take now (nothing recorded, nothing changed)."""
        return decide(build_snapshot(self.store, self.settings, self.clock()), self.settings)

    def tick(self) -> tuple[int, Decision, list[str]]:
        """One decision: (tick number, decision, problems applying its plan)."""
        snap = build_snapshot(self.store, self.settings, self.clock())
        d = decide(snap, self.settings)
        tick = record_decision(self.store, d, snap, self.settings)
        problems = apply(self.store, d.plan, admitted=d.admission.admitted, deactivate=d.deactivate,
                         why=f"tick {tick}")
        return tick, d, problems

    def between(self) -> list[str]:
        """Admission on arrivals and releases, and growth into freed hosts, between ticks."""
        problems: list[str] = []
        snap = build_snapshot(self.store, self.settings, self.clock())
        if snap.queue:
            adm, plan = admit_now(snap, self.settings)
            if adm.admitted:
                problems += apply(self.store, plan, admitted=adm.admitted, why="admission")
                snap = build_snapshot(self.store, self.settings, self.clock())
        if snap.free_hosts:
            plan = refill(snap, self.settings)
            if plan.grows:
                problems += apply(self.store, plan, why="refill")
        return problems


def mechanism_settings(cfg) -> Settings:
    """The mechanism settings of a coordinator config: its policy preset, with the config's
    ``period`` and ``sample_period`` overriding the preset's when the config sets them."""
    from fawkes.presets import settings_for

    overrides = {}
    if "period" in cfg.model_fields_set:
        overrides["period_s"] = cfg.period
    if "sample_period" in cfg.model_fields_set:
        overrides["sample_period_s"] = cfg.sample_period
    return settings_for(cfg.policy, **overrides)
