"""Ceilings (issue 27): a cluster's ``max_nodes`` (or ``max_share`` of the pool) and a team's quota over its
clusters.

Pure functions of the targets and the settings, used by every step that sets targets
(:mod:`fawkes.mechanism.decide`: the tick, admission between ticks, the refill):

* :func:`capped_targets` is the water-filling of :func:`~fawkes.mechanism.targets.weighted_targets`
  with the ceilings as caps, so what a capped cluster cannot take goes to the others (work-conserving);
  a team over its quota has its clusters' share of the quota water-filled by their weights, fixed as
  their caps, and the rest re-divided;
* :func:`clamp` holds any targets (kept, reclaimed, damped, CERES', BIG-C's) under the ceilings, as a
  last step before the plan: a team over its quota loses nodes in proportion to its clusters' targets;
* :func:`admissible` says whether a request's minimum fits its ceiling and its team's quota.

A minimum always holds: a ceiling below a cluster's minimum, or a quota below its team's minima,
keeps the minima (admission refuses to create that state; a config changed under running clusters
can).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fawkes.mechanism.settings import Settings
from fawkes.mechanism.targets import weighted_targets


def with_shares(settings: Settings, capacity: int) -> Settings:
    """``settings`` with each cluster's ``max_share`` of the pool's capacity now (rounded down, at least 1
    node) folded into its ``max_nodes`` ceiling (the lower of the two): the steps below read node ceilings
    only.  Every entry point of :mod:`fawkes.mechanism.decide` applies it to its snapshot's capacity, so a
    pool that grows or shrinks (SLURM) moves the ceiling with it, in both drivers."""
    if not settings.max_share_by_cluster:
        return settings
    ceil = dict(settings.max_nodes_by_cluster)
    for name, share in settings.max_share_by_cluster:
        n = max(1, math.floor(share * capacity + 1e-9))
        ceil[name] = min(ceil.get(name, n), n)
    return settings.model_copy(update={"max_nodes_by_cluster": tuple(sorted(ceil.items()))})


def active(settings: Settings) -> bool:
    return bool(settings.max_nodes_by_cluster or settings.team_quotas)


def capped_targets(capacity: int, names: Sequence[str], weights: Mapping[str, float], minima: Mapping[str, int],
                   caps: Mapping[str, int] | None, settings: Settings) -> dict[str, int]:
    """:func:`weighted_targets` under the ceilings (see the module); ``caps``: other caps (the demand cap)."""
    if not active(settings):
        return weighted_targets(capacity, names, weights, minima, caps)
    demand = dict(caps or {})
    ceil = {n: max(minima[n], m) for n in names if (m := settings.max_nodes_of(n)) is not None}
    targets = _fill(capacity, names, weights, minima, demand, ceil)
    for _ in range(len(settings.team_quotas)):  # each pass holds at least one more team to its quota
        over = [(ns, q) for ns, q in ((tuple(n for n in cs if n in targets), q) for _, cs, q in settings.team_quotas)
                if ns and sum(targets[n] for n in ns) > q]
        if not over:
            break
        for ns, q in over:
            share = weighted_targets(q, ns, weights, minima, _caps(ns, demand, ceil))
            ceil.update({n: max(minima[n], share[n]) for n in ns})
        targets = _fill(capacity, names, weights, minima, demand, ceil)
    return clamp(targets, minima, settings)


def _caps(names: Sequence[str], demand: Mapping[str, int], ceil: Mapping[str, int]) -> dict[str, int]:
    return {n: min(demand.get(n, ceil.get(n, 0)), ceil.get(n, demand.get(n, 0)))
            for n in names if n in demand or n in ceil}


def _fill(capacity: int, names: Sequence[str], weights: Mapping[str, float], minima: Mapping[str, int],
          demand: Mapping[str, int], ceil: Mapping[str, int]) -> dict[str, int]:
    """Water-filling with upper bounds: a cluster whose share reaches its ceiling is fixed there and
    the rest re-divided among the others by their weights (``weighted_targets`` alone fixes a cluster
    at its minimum before it sees another's cap, and would leave what the cap frees unshared)."""
    fixed: dict[str, int] = {}
    rest = list(names)
    while True:
        t = weighted_targets(capacity - sum(fixed.values()), rest, weights, minima, _caps(rest, demand, ceil))
        at = [n for n in rest if n in ceil and t[n] >= ceil[n]]
        if not at or len(at) == len(rest):
            fixed.update(t)
            return {n: fixed[n] for n in names}
        fixed.update({n: ceil[n] for n in at})
        rest = [n for n in rest if n not in fixed]


def clamp(targets: Mapping[str, int], minima: Mapping[str, int], settings: Settings) -> dict[str, int]:
    """``targets`` held under every ceiling, never below a minimum (see the module)."""
    out = dict(targets)
    if not active(settings):
        return out
    for n, t in out.items():
        m = settings.max_nodes_of(n)
        if m is not None and t > m:
            out[n] = max(minima.get(n, 0), m)
    for _team, clusters, q in settings.team_quotas:
        ns = [n for n in clusters if n in out]
        if sum(out[n] for n in ns) > q:
            floor = {n: minima.get(n, 0) for n in ns}
            # share the quota in proportion to the targets they had, none above what it had
            out.update(weighted_targets(q, ns, {n: float(out[n]) for n in ns}, floor, {n: out[n] for n in ns}))
    return out


def admissible(name: str, min_core: int, allocated_minima: Mapping[str, int], settings: Settings) -> str | None:
    """Why a request for ``name`` with ``min_core`` cannot be admitted now (None: it can), given the
    minima of the clusters already allocated.  A minimum above the cluster's own ceiling never fits."""
    m = settings.max_nodes_of(name)
    if m is not None and min_core > m:
        return f"minimum {min_core} > its max_nodes {m}"
    for team, clusters, q in settings.team_quotas:
        if name in clusters:
            held = sum(v for n, v in allocated_minima.items() if n in clusters and n != name)
            if held + min_core > q:
                return f"team {team}'s minima {held}+{min_core} > its quota {q}"
    return None


def binding(targets: Mapping[str, int], settings: Settings) -> str:
    """Which ceilings the targets are at (for ``fawkes explain``), "" if none."""
    if not active(settings):
        return ""
    parts = [f"{n} at its max_nodes {m}" for n, m in settings.max_nodes_by_cluster if targets.get(n) is not None
             and targets[n] >= m]
    parts += [f"team {t} at its quota {q}" for t, cs, q in settings.team_quotas
              if any(c in targets for c in cs) and sum(targets.get(c, 0) for c in cs) >= q]
    return "ceilings: " + ", ".join(parts) if parts else ""
