"""Baselines: None (clusters stay at their minima) and EQ (equal split) (thesis Table 3.1; A-38, A-39 in docs/ambiguities.md)."""

from __future__ import annotations

from fawkes.mechanism.model import ClusterMetrics
from fawkes.mechanism.policies import Policy, register


@register
class NoPolicy(Policy):
    """None: no weights drive anything; clusters run on their minimum shares (not work-conserving)."""

    name = "None"
    kind = "baseline"
    resizes = False

    def sample(self, m: ClusterMetrics, s) -> float:
        return 0.0  # all zero: equal weights, reported only


@register
class EQ(Policy):
    """EQ: the capacity is always divided equally between the active clusters."""

    name = "EQ"
    kind = "baseline"
    ungated = True

    def sample(self, m: ClusterMetrics, s) -> float:
        return 1.0

    def raw(self, samples, s) -> dict[str, float]:
        """1 for every allocated cluster, sampled or not (A-39): a cluster admitted less than one
        sample period before the tick has its equal share too, and an interval without any
        sample is no idle pool for EQ."""
        return {name: 1.0 for name in samples}
