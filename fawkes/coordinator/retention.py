"""Retention: delete old samples, events and decisions so the state does not grow without bound.

The coordinator runs :func:`prune` every ``retention.every_s``; ``fawkes prune`` runs it once
(``--dry-run``: count only).  Samples are kept for ``retention.samples_s`` but never less than
the window the mechanism reads (:func:`fawkes.coordinator.view.sample_window`: T, or T_idle if
longer), so a prune can never change a decision.  Events are kept for ``retention.events_s``, and
audit rows as long, decisions by count (the newest ``retention.decisions_keep``).  ``None`` keeps
everything.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fawkes.coordinator.view import sample_window
from fawkes.mechanism import Settings
from fawkes.store import Store


@dataclasses.dataclass(frozen=True)
class PruneReport:
    """What one prune deleted (or, with ``dry_run``, would delete)."""

    dry_run: bool
    samples: int
    samples_before: float | None  # deleted samples were older than this (None: samples kept forever)
    samples_kept_s: float | None  # the retention applied: samples_s, raised to the mechanism's window
    events: int
    events_before: float | None
    decisions: int
    decisions_keep: int | None
    audit: int = 0  # audit rows, kept as long as events (schema v11)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"retention {verb} {self.samples} sample(s), {self.events} event(s), "
                f"{self.decisions} decision(s)" + (f", {self.audit} audit row(s)" if self.audit else ""))


def prune(store: Store, retention, settings: Settings, now: float, *, dry_run: bool = False) -> PruneReport:
    """Apply ``retention`` (a :class:`fawkes.config.RetentionConfig`) to ``store`` at time ``now``."""
    kept_s = None if retention.samples_s is None else max(retention.samples_s, sample_window(settings))
    samples_before = None if kept_s is None else now - kept_s
    events_before = None if retention.events_s is None else now - retention.events_s
    samples = 0 if samples_before is None else store.prune_samples(samples_before, dry_run=dry_run)
    events = 0 if events_before is None else store.prune_events(events_before, dry_run=dry_run)
    audit = 0 if events_before is None else store.prune_audit(events_before, dry_run=dry_run)
    keep = retention.decisions_keep
    if keep is None:
        decisions = 0
    elif dry_run:
        decisions = store.count_decisions_beyond(keep)
    else:
        decisions = store.prune_decisions(keep)
    return PruneReport(dry_run=dry_run, samples=samples, samples_before=samples_before, samples_kept_s=kept_s,
                       events=events, events_before=events_before, decisions=decisions, decisions_keep=keep,
                       audit=audit)
