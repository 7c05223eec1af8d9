"""Demand-based policies: JD, DD, TD (thesis Table 3.1; readings A-13, A-14 in docs/ambiguities.md)."""

from __future__ import annotations

from fawkes.mechanism.model import ClusterMetrics
from fawkes.mechanism.policies import Policy, register


@register
class JD(Policy):
    """Job demand: the number of jobs waiting in the cluster's queue."""

    name = "JD"

    def sample(self, m: ClusterMetrics, s) -> float:
        return 0.0 if m.loading else float(m.unfinished_jobs)


@register
class DD(Policy):
    """Data demand: the input bytes of the jobs waiting in the queue."""

    name = "DD"

    def sample(self, m: ClusterMetrics, s) -> float:
        return 0.0 if m.loading else float(m.unfinished_input_bytes)


@register
class TD(Policy):
    """Task demand: the tasks waiting in the queue (pending, plus running by default)."""

    name = "TD"
    needs = (("tasks",),)

    def sample(self, m: ClusterMetrics, s) -> float:
        if m.loading:
            return 0.0
        return float(m.pending_tasks + (m.running_tasks if s.count_running_in_demand else 0))
