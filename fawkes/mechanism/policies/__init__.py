"""Weighting policies (thesis Table 3.1) and their registry.

A policy turns the metric samples of the last interval into normalised weights
(eq. 3.4).  Most policies only define :meth:`Policy.sample` (the raw y_i of one sample);
the default :meth:`Policy.weights` averages y_i over the interval and normalises over the
clusters given.  Adding a policy is one small module that calls :func:`register`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from fawkes.mechanism.model import ClusterMetrics

if TYPE_CHECKING:
    from fawkes.mechanism.settings import Settings

Samples = Mapping[str, Sequence[ClusterMetrics]]


class Policy:
    """Base class.  Subclasses set ``name`` and override :meth:`sample` (or :meth:`weights`)."""

    name: ClassVar[str]
    kind: ClassVar[str] = "demand"  # demand | usage | performance | baseline
    resizes: ClassVar[bool] = True  # False: clusters stay at their minima (None)
    ungated: ClassVar[bool] = False  # True: applied every tick, no tau gate (EQ, A-39)
    #: True: a sample changes with time alone, not only when jobs or nodes change (JS's slowdown
    #: grows while a job waits), so a sampler may not reuse an unchanged cluster's last sample
    clock_dependent: ClassVar[bool] = False
    #: what a cluster's samples must measure for this policy to weigh it: each entry is a set of
    #: alternatives, one of which the cluster's kind must feed (``fawkes.frameworks.base.SIGNALS``:
    #: tasks, slots, stored_bytes, written_bytes, ...); jobs, their input sizes and their times are
    #: fawkes' own and need nothing
    needs: ClassVar[tuple[tuple[str, ...], ...]] = ()

    def sample(self, m: ClusterMetrics, s: "Settings") -> float:
        raise NotImplementedError

    def raw(self, samples: Samples, s: "Settings") -> dict[str, float]:
        """ȳ_i: the mean of the raw samples of each cluster over the interval (A-1)."""
        return {name: mean_of([self.sample(m, s) for m in seq], s) for name, seq in samples.items()}

    def weights(self, samples: Samples, s: "Settings") -> tuple[dict[str, float], dict[str, float]]:
        """(ȳ, w): raw means and weights normalised by eq. 3.4."""
        y = self.raw(samples, s)
        return y, normalise(y)


def mean_of(values: Sequence[float], s: "Settings") -> float:
    """Mean of the samples of one interval, oldest first (A-1)."""
    if not values:
        return 0.0
    if s.sample_mean == "ewma":
        acc = values[0]
        for v in values[1:]:
            acc = s.ewma_alpha * v + (1.0 - s.ewma_alpha) * acc
        return acc
    return sum(values) / len(values)


def normalise(y: Mapping[str, float]) -> dict[str, float]:
    """Implements eq. (3.4): w_i = ȳ_i / Σ ȳ_j, each cluster's mean sample over the sum of them, over the
    given clusters; all zero gives equal weights 1/n (A-1)."""
    if not y:
        return {}
    total = sum(y.values())
    if total <= 0.0:
        eq = 1.0 / len(y)
        return {k: eq for k in y}
    return {k: v / total for k, v in y.items()}


_REGISTRY: dict[str, Policy] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its name (case-insensitive)."""
    _REGISTRY[cls.name.lower()] = cls()
    return cls


def get_policy(name: str) -> Policy:
    try:
        return _REGISTRY[name.lower()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(policy_names())}") from None


def policy_names() -> list[str]:
    return [p.name for p in _REGISTRY.values()]


# the built-in policies register themselves on import
# in the thesis' order (Table 3.1): baselines, demand, usage, performance; policy_names() keeps it
from fawkes.mechanism.policies import baseline, demand, usage, performance  # noqa: E402,F401,I001
