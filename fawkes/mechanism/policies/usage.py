"""Usage-based policies: PU, DU and RU = λ·PU + (1 − λ)·DU (thesis Table 3.1; A-2, A-15, A-16 in docs/ambiguities.md)."""

from __future__ import annotations

from fawkes.mechanism.model import ClusterMetrics
from fawkes.mechanism.policies import Policy, Samples, get_policy, normalise, register


@register
class PU(Policy):
    """Processor usage: occupied slots over configured slots."""

    name = "PU"
    needs = (("slots",),)
    kind = "usage"

    def sample(self, m: ClusterMetrics, s) -> float:
        if m.loading or m.configured_slots <= 0:
            return 0.0
        return min(1.0, m.busy_slots / m.configured_slots)


@register
class DU(Policy):
    """Disk usage: output bytes written since deployment over the current storage capacity."""

    name = "DU"
    needs = (("stored_bytes", "written_bytes"),)
    kind = "usage"

    def sample(self, m: ClusterMetrics, s) -> float:
        if m.loading or m.storage_capacity <= 0:
            return 0.0
        return m.output_bytes / m.storage_capacity


@register
class RU(Policy):
    """Resource usage, eq. 3.5: a convex mix of the PU and DU weights (λ = settings.lam)."""

    name = "RU"
    needs = (("slots",), ("stored_bytes", "written_bytes"))
    kind = "usage"

    def sample(self, m: ClusterMetrics, s) -> float:  # only used with ru_mix = "raw"
        pu, du = get_policy("PU").sample(m, s), get_policy("DU").sample(m, s)
        return s.lam * pu + (1.0 - s.lam) * du

    def weights(self, samples: Samples, s):
        """Implements eq. (3.5): w_i = λ·u_i^P + (1 − λ)·u_i^D, the convex mix of the normalised PU and DU
        weights (A-2; ``ru_mix: raw`` mixes the raw usages and normalises them instead)."""
        if s.ru_mix == "raw":
            return super().weights(samples, s)
        yp, wp = get_policy("PU").weights(samples, s)
        yd, wd = get_policy("DU").weights(samples, s)
        y = {k: s.lam * yp[k] + (1.0 - s.lam) * yd[k] for k in yp}
        return y, {k: s.lam * wp[k] + (1.0 - s.lam) * wd[k] for k in wp}


__all__ = ["PU", "DU", "RU", "normalise"]
