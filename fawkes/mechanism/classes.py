"""Priority classes and the static reservation baseline (BIG-C, B-7).

A cluster named in ``latency_clusters`` is of class *latency*; every other is *best effort*.
With classes (``docs/mechanism.md``, "Preemption settings"):

* :func:`class_weights`: the latency class is entitled to ``latency_share`` of the pool and the
  best-effort class to the rest, each share divided by the policy's weights inside the class; a
  class with no weight (no demand) leaves its share to the other (BIG-C's 95 % / 5 % queues);
* :func:`latency_wants`: a latency cluster that the targets want bigger opens the gate at any
  tick, whatever τ says (it may preempt best-effort clusters at once);
* :func:`reserve`: with ``reserve_fraction`` X, a static partition, BIG-C's Hawk-style
  baseline: the best-effort clusters share at most ⌊(1 − X)·pool⌋ nodes, the latency clusters
  the rest, demand or not; no cluster ever needs to preempt the other class.

Pure functions; with no latency cluster named and X = 0 they change nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fawkes.mechanism.model import ClusterView
from fawkes.mechanism.settings import Settings
from fawkes.mechanism.targets import weighted_targets


def class_weights(w: Mapping[str, float], settings: Settings) -> dict[str, float]:
    """The policy's weights ``w`` regrouped into the two classes' shares (sum 1 when ``w`` does)."""
    if not settings.latency_clusters:
        return dict(w)
    lat = set(settings.latency_clusters)
    w_lat = sum(v for n, v in w.items() if n in lat)
    w_be = sum(v for n, v in w.items() if n not in lat)
    if w_lat <= 0 or w_be <= 0:  # one class shows no demand: the other has the whole pool
        return dict(w)
    share = settings.latency_share
    return {n: (share * v / w_lat if n in lat else (1 - share) * v / w_be) for n, v in w.items()}


def latency_wants(views: Sequence[ClusterView], targets: Mapping[str, int], weights: Mapping[str, float],
                  settings: Settings) -> list[str]:
    """Latency clusters with weight (demand) that the targets want bigger than they hold."""
    lat = set(settings.latency_clusters)
    return [c.name for c in views
            if c.name in lat and weights.get(c.name, 0.0) > 0 and targets.get(c.name, 0) > c.settled]


def reserve(pool: int, names: Sequence[str], weights: Mapping[str, float], minima: Mapping[str, int],
            settings: Settings) -> dict[str, int]:
    """The static partition: best-effort clusters water-fill ⌊(1 − X)·pool⌋ (at least their minima),
    latency clusters the rest; nodes of the reserve that no latency cluster holds stay free."""
    lat = set(settings.latency_clusters)
    best = [n for n in names if n not in lat]
    latency = [n for n in names if n in lat]
    limit = max(sum(minima[n] for n in best), math.floor((1 - settings.reserve_fraction) * pool + 1e-9))
    out = weighted_targets(limit, best, weights, minima) if best else {}
    out |= weighted_targets(max(0, pool - sum(out.values())), latency, weights, minima) if latency else {}
    return {n: out[n] for n in names}
