"""Performance-based policies: JS, JT, TT (thesis Table 3.1, eq. 3.6; readings A-3, A-17 in docs/ambiguities.md)."""

from __future__ import annotations

from fawkes.mechanism.model import ClusterMetrics
from fawkes.mechanism.policies import Policy, Samples, mean_of, normalise, register


@register
class JS(Policy):
    """Job slowdown: the mean slowdown so far of the jobs waiting in the queue."""

    name = "JS"
    clock_dependent = True
    kind = "performance"

    def sample(self, m: ClusterMetrics, s) -> float:
        return 0.0 if m.loading else m.mean_job_slowdown


def throughput_weight(phi: float, a: float) -> float:
    """Implements eq. (3.6): p_i = a^(−φ_i), a cluster's throughput weight before normalisation, from 1/a
    at φ_i = 1 (as many done as there were to do) to 1 at φ_i = 0 (nothing done): the less throughput,
    the larger the share; a > 1 (``settings.a``, 2 in the thesis)."""
    return a ** (-phi)


class _Throughput(Policy):
    """y = a^(−φ), φ = completed / (completed + unfinished) ∈ [0, 1]; y = 0 with nothing unfinished."""

    kind = "performance"

    def counts(self, m: ClusterMetrics) -> tuple[float, float]:  # (completed, unfinished)
        raise NotImplementedError

    def y(self, completed: float, unfinished: float, s) -> float:
        if unfinished <= 0:
            return 0.0
        return throughput_weight(completed / (completed + unfinished), s.a)

    def sample(self, m: ClusterMetrics, s) -> float:
        if m.loading:
            return 0.0
        return self.y(*self.counts(m), s)

    def weights(self, samples: Samples, s):
        if s.throughput_window == "cumulative":
            return super().weights(samples, s)
        # A-3 alternative: φ = completed in the interval / waiting now, capped at 1
        y = {}
        for name, seq in samples.items():
            if not seq:
                y[name] = 0.0
                continue
            base = self.counts(seq[0])[0]
            vals = []
            for m in seq:
                done, waiting = self.counts(m)
                if m.loading or waiting <= 0:
                    vals.append(0.0)
                else:
                    vals.append(throughput_weight(min(1.0, (done - base) / waiting), s.a))
            y[name] = mean_of(vals, s)
        return y, normalise(y)


@register
class JT(_Throughput):
    """Job throughput."""

    name = "JT"

    def counts(self, m: ClusterMetrics) -> tuple[float, float]:
        return float(m.completed_jobs), float(m.unfinished_jobs)


@register
class TT(_Throughput):
    """Task throughput."""

    name = "TT"
    needs = (("tasks",),)

    def counts(self, m: ClusterMetrics) -> tuple[float, float]:
        return float(m.completed_tasks), float(m.pending_tasks + m.running_tasks)
