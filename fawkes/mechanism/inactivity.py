"""Inactivity (A-12): when an MR-cluster is done and should save its output and leave."""

from __future__ import annotations

from fawkes.mechanism.model import ClusterMetrics, ClusterState, ClusterView
from fawkes.mechanism.settings import Settings


def is_busy(m: ClusterMetrics) -> bool:
    """Busy iff it has queued or running work or is still loading its input."""
    return m.loading or m.unfinished_jobs > 0 or m.running_tasks > 0 or m.pending_tasks > 0


def next_idle_since(prev: float | None, m: ClusterMetrics) -> float | None:
    """Update the start of the current idle period with a new sample (None while busy)."""
    if is_busy(m):
        return None
    return m.time if prev is None else prev


def is_inactive(view: ClusterView, idle_since: float | None, now: float, settings: Settings) -> bool:
    """Inactive iff ACTIVE and idle for at least its T_idle (``settings.idle_timeout_of``; never: not).

    "decoupled" (default): no queued jobs, no running tasks, not loading since ``idle_since``
    (the controller's memory folds it from the samples, :func:`next_idle_since`).
    "weight_zero": the literal reading, every sample of the last T_idle weighs zero.
    """
    if view.state is not ClusterState.ACTIVE:
        return False
    idle_timeout = settings.idle_timeout_of(view.name)  # inf: never
    if idle_timeout == float("inf"):
        return False
    if settings.inactivity == "weight_zero":
        from fawkes.mechanism.policies import get_policy

        policy = get_policy(settings.policy)
        window = [m for m in view.samples if m.time > now - idle_timeout]
        if not window or window[0].time - (now - idle_timeout) > settings.sample_period_s:
            return False
        return all(policy.sample(m, settings) == 0 for m in window)
    return idle_since is not None and now - idle_since >= idle_timeout
