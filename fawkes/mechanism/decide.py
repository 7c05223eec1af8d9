"""One FAWKES decision: snapshot in, decision out.  No I/O, no clock.

Every period T (docs/mechanism.md, "The steps"):

1. weights: average each cluster's policy samples over the interval, normalise (eq. 3.4);
2. discrimination: D_i = ∫ (c_i − w_i) dt over the interval, G = E[D²] (eqs. 3.2, 3.3);
3. inactivity: ACTIVE clusters idle for T_idle leave (save output, release nodes) (A-12);
4. admission: the head of the global FIFO queue enters if the minima fit (A-8..A-10);
5. targets: if G > τ (EQ: always; None: never), weighted water-filling clamped at the
   minima (A-7); otherwise the standing targets, less what admission reclaims;
6. plan: shrink the surplus (TR by FP, then TC by DP), grow the deficits from free hosts,
   most discriminated first.

:func:`decide` runs all of it at a tick; :func:`admit_now` runs 4-6 between ticks (on a
request or a release), reclaiming by the last tick's weights; :func:`refill` re-plans
towards the standing targets when hosts become free.  What a step remembers from earlier
ones (weights, targets, votes, clocks) comes in as a :class:`Memory`; the loop around these
functions, which also carries that memory forward, is :mod:`fawkes.mechanism.controller`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fawkes.mechanism import ceres, classes, preemption
from fawkes.mechanism.admission import Admission, admit
from fawkes.mechanism.discrimination import global_factor, interval_discrimination
from fawkes.mechanism.inactivity import is_inactive
from fawkes.mechanism.memory import Memory
from fawkes.mechanism.model import ClusterState, ClusterView, Plan, Role, Snapshot
from fawkes.mechanism.plan import plan_towards
from fawkes.mechanism.policies import get_policy
from fawkes.mechanism.settings import Settings
from fawkes.mechanism.ceilings import binding, capped_targets, clamp, with_shares


@dataclass(frozen=True)
class Decision:
    """What one tick decided and why: the record that ``fawkes explain`` shows."""

    time: float
    policy: str
    mean_samples: dict[str, float]
    weights: dict[str, float]
    discrimination: dict[str, float]
    global_discrimination: float
    gate_open: bool
    targets: dict[str, int]
    plan: Plan
    admission: Admission = field(default_factory=Admission)
    deactivate: tuple[str, ...] = ()
    reason: str = ""
    shrink_votes: dict[str, int] = field(default_factory=dict)  # carried to the next tick in the memory
    regrow_votes: dict[str, int] = field(default_factory=dict)  # victims still waiting to regrow (preemption.py)

    @property
    def resized(self) -> bool:
        """True if any allocated cluster's allocation changes (one reconfiguration, A-20)."""
        admitted = set(self.admission.admitted)
        return any(g.cluster not in admitted for g in self.plan.grows) or bool(self.plan.shrinks)

    def to_dict(self) -> dict[str, Any]:
        # field by field: asdict() would deep-copy the plan's steps only for them to be replaced
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("plan", "admission")}
        d = {k: dict(v) if isinstance(v, dict) else v for k, v in d.items()}
        d["admission"] = asdict(self.admission)
        d["plan"] = {
            "grows": [{"cluster": g.cluster, "host": g.host, "role": g.role.value} for g in self.plan.grows],
            "shrinks": [
                {"cluster": s.cluster, "node": s.node, "role": s.role.value, "mode": s.mode.value}
                for s in self.plan.shrinks
            ],
            "targets": self.plan.targets,
        }
        if math.isinf(self.global_discrimination):
            d["global_discrimination"] = None
        return d


def decide(snap: Snapshot, settings: Settings, memory: Memory = Memory()) -> Decision:
    """The decision of the tick at ``snap.now`` (the interval is (now − T, now]).

    ``memory`` is the controller's memory with this interval's samples already folded in
    (:func:`fawkes.mechanism.controller.tick` does both).  The steps, in order: measure the
    interval (weights, discrimination), open or keep shut the tau gate, settle who shares the
    pool (inactivity, admission), choose the targets (rebalance or keep), apply admission's
    reclaim and CERES, plan towards the targets, and say why.
    """
    settings = with_shares(settings, snap.capacity)  # max_share: a node ceiling at this capacity
    policy = get_policy(settings.policy)
    mem = {c.name: memory.of(c.name, c.since) for c in snap.allocated}
    m = _measure(snap, settings, policy, mem)
    gate = _gate(policy, m, settings)
    sharing = _who_shares(snap, settings, m.weights, mem)
    urgent: list[str] = []  # B-7: latency clusters that want nodes open the gate whatever tau says
    if settings.latency_clusters and policy.resizes and not gate and not m.idle_pool:
        urgent = classes.latency_wants(sharing.staying, capped_targets(sharing.pool, sharing.names, m.weights,
                                                                       sharing.minima, None, settings),
                                       m.weights, settings)
        gate = bool(urgent)
    if not policy.resizes:
        chosen = _Targets(dict(sharing.minima), f"policy {policy.name}: clusters stay at their minima",
                          regrow=preemption.victims(sharing.staying, mem, settings))
    elif gate:
        chosen = _rebalance(policy, urgent, m, sharing, mem, snap.now, settings)
    else:
        chosen = _keep(m, sharing, mem, settings)
    targets = chosen.targets if gate else _reclaim(chosen.targets, sharing)
    c3 = None
    if policy.resizes and ceres.active(settings):  # CERES (ceres.py): reclaim swollen first, expand stragglers
        c3 = ceres.pipeline(targets, sharing.staying, sharing.pool, m.discrimination, settings,
                            chosen.shares if gate else None)
        targets = c3.targets
    targets = clamp(targets, sharing.minima, settings)  # ceilings hold whatever chose the targets

    order = sorted(sharing.names, key=lambda n: m.discrimination.get(n, -math.inf))
    plan = plan_towards(snap, targets, settings, order, memory)
    return Decision(
        time=snap.now,
        policy=policy.name,
        mean_samples=m.mean_samples,
        weights=m.weights,
        discrimination=m.discrimination,
        global_discrimination=m.global_discrimination,
        gate_open=gate,
        targets=targets,
        plan=plan,
        admission=sharing.admission,
        deactivate=tuple(sorted(sharing.leaving)),
        reason=_explain(chosen, c3, sharing, plan, targets, gate and policy.resizes, settings),
        shrink_votes=chosen.votes,
        regrow_votes=chosen.regrow,
    )


def admit_now(snap: Snapshot, settings: Settings, memory: Memory = Memory()) -> tuple[Admission, Plan]:
    """Admission between ticks (A-9): on a request or a release, reclaiming by the last weights.

    The plan's ``targets`` are the new standing targets of every allocated cluster: donors less
    what they give, the admitted at their minima."""
    settings = with_shares(settings, snap.capacity)  # max_share: a node ceiling at this capacity
    mem = {c.name: memory.of(c.name, c.since) for c in snap.allocated}
    adm = admit(snap, {n: m.weight for n, m in mem.items()}, settings)
    if not adm.admitted:
        return adm, Plan()
    targets = {c.name: _standing(c, mem[c.name].target) for c in snap.allocated}
    for donor, k in adm.reclaim.items():
        targets[donor] = max(snap.cluster(donor).min_core, targets[donor] - k)
    targets |= adm.minima
    targets = clamp(targets, {c.name: c.min_core for c in snap.allocated} | adm.minima, settings)
    return adm, plan_towards(snap, targets, settings, memory=memory)


def refill(snap: Snapshot, settings: Settings, memory: Memory = Memory()) -> Plan:
    """Grow clusters still below their standing target from hosts that became free (A-19)."""
    settings = with_shares(settings, snap.capacity)  # max_share: a node ceiling at this capacity
    targets = {}
    for c in snap.allocated:
        t = memory.of(c.name, c.since).target
        targets[c.name] = t if t is not None else max(c.min_core, c.settled)
    targets = clamp(targets, {c.name: c.min_core for c in snap.allocated}, settings)
    deficits = {n: t for n, t in targets.items() if snap.cluster(n).settled < t}
    if not deficits or not snap.free_hosts:
        return Plan(targets=targets)
    plan = plan_towards(snap, deficits, settings, memory=memory)
    return Plan(grows=plan.grows, targets=targets)


# --- the steps of one tick (pure functions of the snapshot, the settings and the memory) ---------

@dataclass(frozen=True)
class _Measured:
    """Step 1-2: the interval's policy samples, weights and discrimination."""

    mean_samples: dict[str, float]
    weights: dict[str, float]
    discrimination: dict[str, float]
    global_discrimination: float
    idle_pool: bool  # all_zero=hold and no cluster shows demand: allocations are kept


def _measure(snap: Snapshot, settings: Settings, policy, mem) -> _Measured:
    """Weights (eq. 3.4; B-7's class shares) and discrimination over (now − T, now] (eqs. 3.2, 3.3)."""
    allocated = snap.allocated
    start = snap.now - settings.period_s
    y, w = policy.weights({c.name: c.samples for c in allocated}, settings)
    if settings.latency_clusters:  # B-7: the latency and best-effort classes' shares of the pool (classes.py)
        w = classes.class_weights(w, settings)
    d = {
        c.name: interval_discrimination(
            c.allocation, w[c.name], start, snap.now, snap.capacity, settings, mem[c.name].discrimination
        )
        for c in allocated
    }
    g = global_factor(d.values(), settings)
    idle_pool = settings.all_zero == "hold" and bool(y) and not any(v > 0.0 for v in y.values())
    return _Measured(y, w, d, g, idle_pool)


def _gate(policy, m: _Measured, settings: Settings) -> bool:
    """Whether this tick rebalances: never for a policy that does not resize or an idle pool,
    always for an ungated one (EQ unless ``eq_gated``), else when G > tau."""
    if not policy.resizes or m.idle_pool:
        return False
    if policy.ungated and not settings.eq_gated:
        return True
    return m.global_discrimination > settings.tau


@dataclass(frozen=True)
class _Sharing:
    """Step 3-4: who shares the pool this tick, and how big the pool is."""

    leaving: frozenset[str]  # inactive: saving and releasing
    admission: Admission
    staying: list[ClusterView]  # allocated and not leaving
    names: list[str]  # the staying, then the admitted
    minima: dict[str, int]
    pool: int  # the capacity less what clusters on their way out hold


def _who_shares(snap: Snapshot, settings: Settings, w: dict[str, float], mem) -> _Sharing:
    """Inactive clusters leave (A-12), the queue's head enters if the minima fit (A-8..A-10)."""
    allocated = snap.allocated
    leaving = frozenset(c.name for c in allocated if is_inactive(c, mem[c.name].idle_since, snap.now, settings))
    adm = admit(snap, w, settings, leaving)
    staying = [c for c in allocated if c.name not in leaving]
    names = [c.name for c in staying] + list(adm.admitted)
    minima = {c.name: c.min_core for c in staying} | adm.minima
    # nodes held by clusters on their way out are not part of what can be shared now
    pool = snap.capacity - sum(c.held for c in snap.clusters if c.state is ClusterState.SAVING or c.name in leaving)
    return _Sharing(leaving, adm, staying, names, minima, pool)


@dataclass(frozen=True)
class _Targets:
    """Step 5: the targets chosen and why, with the votes carried to the next tick."""

    targets: dict[str, int]
    why: str
    votes: dict[str, int] = field(default_factory=dict)  # shrink votes
    regrow: dict[str, int] = field(default_factory=dict)  # regrow votes (preemption.py)
    shares: dict[str, int] | None = None  # a rebalance's targets before the demand cap (CERES' floor)


def _rebalance(policy, urgent: list[str], m: _Measured, sharing: _Sharing, mem, now: float,
               settings: Settings) -> _Targets:
    """Weighted water-filling (A-7), shrinks deferred by their votes, BIG-C's regrow hysteresis and
    demand-capped shrink, anti-flap damping, or B-7's static reserve."""
    staying, names, minima, pool, w = sharing.staying, sharing.names, sharing.minima, sharing.pool, m.weights
    caps = _demand_caps(staying) if settings.cap_to_demand else None
    targets, held, votes = _defer_shrinks(sharing, w, caps, mem, settings)
    # --- BIG-C (preemption.py): regrow hysteresis, then a demand-capped shrink
    waiting, regrow = preemption.wait_to_regrow(targets, staying, mem, settings)
    if waiting:  # victims keep what they hold; the others share the rest
        rest = [n for n in names if n not in waiting]
        targets = capped_targets(pool - sum(waiting.values()), rest, w, minima | held, caps, settings) | waiting
        targets = {n: targets[n] for n in names}
    targets = _damp(targets, staying, mem, now, settings)
    shares = targets  # before the demand cap: CERES' reclaim never goes below them
    if settings.shrink_amount == "demand_capped":
        targets = preemption.demand_capped(targets, staying, pool, m.discrimination, settings)
    if settings.reserve_fraction > 0:  # B-7's static partition replaces the rebalance (a baseline)
        targets, votes = classes.reserve(pool, names, w, minima, settings), {}
        regrow = preemption.victims(staying, mem, settings)
    why = (
        f"policy {policy.name} applied every tick"
        if policy.ungated and not settings.eq_gated
        else f"latency cluster(s) {', '.join(urgent)} want nodes: rebalance by {policy.name} weights, tau bypassed"
        if urgent else f"G={m.global_discrimination:.4g} > tau={settings.tau:g}: rebalance by {policy.name} weights"
    )
    return _Targets(targets, why, votes, regrow, shares)


def _defer_shrinks(sharing: _Sharing, w: dict[str, float], caps, mem,
                   settings: Settings) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """The weighted targets with every shrink that has not had its ``shrink_after_ticks`` votes held
    back: (targets, the clusters held at what they hold, the shrink votes)."""
    staying, names, minima, pool = sharing.staying, sharing.names, sharing.minima, sharing.pool
    targets = capped_targets(pool, names, w, minima, caps, settings)
    held, votes = _wait_to_shrink(targets, staying, mem, settings)
    while held:  # they keep what they hold this tick; the others share the rest
        if sum((minima | held)[n] for n in names) > pool:
            held, votes = {}, {}  # an admitted cluster's minimum comes first: no waiting this tick
            targets = capped_targets(pool, names, w, minima, caps, settings)
            break
        targets = capped_targets(pool, names, w, minima | held, caps, settings)
        # sharing the rest may leave a cluster that did not want to shrink below what it holds:
        # it starts voting too (no cluster shrinks on another one's votes); each pass holds one more
        more, more_votes = _wait_to_shrink(targets, [c for c in staying if c.name not in held], mem, settings)
        if not more:
            break
        held, votes = held | more, votes | more_votes
    return targets, held, votes


def _keep(m: _Measured, sharing: _Sharing, mem, settings: Settings) -> _Targets:
    """The gate is shut: the standing targets, the admitted at their minima."""
    targets = {c.name: _standing(c, mem[c.name].target) for c in sharing.staying}
    targets |= sharing.admission.minima
    why = ("no cluster shows demand (all_zero=hold): allocations kept" if m.idle_pool
           else f"G={m.global_discrimination:.4g} <= tau={settings.tau:g}: allocations kept")
    return _Targets(targets, why, regrow=preemption.victims(sharing.staying, mem, settings))


def _reclaim(targets: dict[str, int], sharing: _Sharing) -> dict[str, int]:
    """Without a rebalance, admission's donors give what it reclaims (never below their minima)."""
    out = dict(targets)
    for donor, k in sharing.admission.reclaim.items():
        out[donor] = max(sharing.minima[donor], out[donor] - k)
    return out


def _explain(chosen: _Targets, c3, sharing: _Sharing, plan: Plan, targets: dict[str, int], rebalanced: bool,
             settings: Settings) -> str:
    """Step 6's reason: why these targets, then what else happened, in the order ``fawkes explain`` shows."""
    reasons = [chosen.why]
    if c3 is not None and c3.reason():
        reasons.append(c3.reason())
    if sharing.leaving:
        reasons.append("inactive, saving and releasing: " + ", ".join(sorted(sharing.leaving)))
    if sharing.admission.reason:
        reasons.append(sharing.admission.reason)
    changes = _describe(plan)
    if changes:
        reasons.append(changes)
    reasons += plan.placed  # placement: grows that wait for, or went off, a cluster's racks
    reasons += plan.kept  # protected nodes that stayed
    if binding(targets, settings):
        reasons.append(binding(targets, settings))
    if chosen.votes:
        reasons.append(f"shrink deferred (shrink_after_ticks={settings.shrink_after_ticks}): " + ", ".join(
            f"{n} {v}/{settings.shrink_after_ticks}" for n, v in sorted(chosen.votes.items())))
    elif rebalanced:
        reasons.append("targets already held (minima bound the shares)" if any(
            targets[n] == sharing.minima[n] for n in targets) else "targets already held")
    if any(chosen.regrow.values()):
        reasons.append(f"regrow delayed (regrow_delay_ticks={settings.regrow_delay_ticks}): " + ", ".join(
            f"{n} {v}/{settings.regrow_delay_ticks}" for n, v in sorted(chosen.regrow.items()) if v))
    return "; ".join(reasons)


def _standing(c: ClusterView, target: int | None) -> int:
    """A cluster's standing target: the last one planned, else what it holds; never below its minimum."""
    return max(c.min_core, target if target is not None else c.settled)


def _demand_caps(views) -> dict[str, int]:
    """Optional cap (B.5): no more nodes than the cluster's tasks can use."""
    caps = {}
    for c in views:
        if c.samples:
            m = c.samples[-1]
            caps[c.name] = max(c.min_core, math.ceil((m.pending_tasks + m.running_tasks) / max(1, c.slots_per_node)))
    return caps


def _wait_to_shrink(targets: dict[str, int], views, mem, settings: Settings) -> tuple[dict[str, int], dict[str, int]]:
    """Fast up, slow down: a cluster the weights want smaller keeps its nodes until that has been so
    for ``shrink_after_ticks`` consecutive rebalancing ticks.  Returns the clusters held at their
    settled allocation, and every cluster's new vote count (0 = not wanting to shrink)."""
    need = settings.shrink_after_ticks
    held: dict[str, int] = {}
    votes: dict[str, int] = {}
    for c in views:
        if targets[c.name] >= c.settled:
            continue
        v = mem[c.name].shrink_votes + 1
        if v < need:
            held[c.name] = c.settled
            votes[c.name] = v
    return held, votes


def _damp(targets: dict[str, int], views, mem, now: float, settings: Settings) -> dict[str, int]:
    """Anti-flap (B.5): skip small changes and changes against a recent resize.

    The cooldown clock starts when a *tick's* plan grows or shrinks the cluster (memory's
    ``last_grow_at``/``last_shrink_at``): growth into freed hosts (refill) and admission's
    reclaim carry out earlier decisions and start no clock.  A cluster below its minimum is
    never held there (A.13): damping keeps at least the minimum."""
    if settings.min_change_nodes <= 0 and settings.cooldown_s <= 0:
        return targets
    out = dict(targets)
    for c in views:
        delta = targets[c.name] - c.settled
        if delta == 0:
            continue
        if abs(delta) < settings.min_change_nodes and c.settled >= c.min_core:
            out[c.name] = c.settled
        elif settings.cooldown_s > 0:
            m = mem[c.name]
            recent = m.last_grow_at if delta < 0 else m.last_shrink_at
            if recent is not None and now - recent < settings.cooldown_s:
                out[c.name] = max(c.settled, c.min_core)
    return out


def _describe(plan: Plan) -> str:
    per: dict[str, list[int]] = {}
    for g in plan.grows:
        per.setdefault(g.cluster, [0, 0])[0] += 1
    for s in plan.shrinks:
        per.setdefault(s.cluster, [0, 0])[1] += 1
    parts = []
    for name, (up, down) in per.items():
        if up:
            parts.append(f"{name} +{up}")
        if down:
            parts.append(f"{name} -{down}")
    return ", ".join(parts)


__all__ = ["Decision", "decide", "admit_now", "refill", "Role"]
