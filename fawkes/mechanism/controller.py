"""The control loop, pure: (memory, observation) in, (plan, next memory) out.

Like dask's ``AdaptiveCore``, three things are kept apart: what is *observed* (the
:class:`Snapshot`), what was *planned* (targets, in the :class:`Memory`) and what is *done*
(the driver carrying out a plan).  Two drivers run this loop unchanged: the simulator
(:mod:`fawkes.sim.engine`) keeps the memory in a variable, the coordinator
(:mod:`fawkes.coordinator.control`) stores it with every step.  Given the same snapshots they
take the same decisions; ``tests/test_parity.py`` replays simulator runs through the
coordinator on a real store to keep it so.

The steps:

* :func:`tick` every T: fold the interval's samples into the memory, :func:`decide`, remember
  the decision (weights, targets, votes, discrimination, the cooldown clocks);
* :func:`between` on a request or a release (the coordinator: every few seconds): admission of
  the queue's head (A-9), then refill of clusters below their standing target from free hosts
  (A-19), the second on the snapshot as the first leaves it (:func:`project`);
* :func:`offer` every offer period instead of :func:`tick`, for KOALA-MR's chapter-2 runner
  policies (GS, GG, GGD): each cluster's runner answers an offer of nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fawkes.mechanism.admission import Admission
from fawkes.mechanism.decide import Decision, admit_now, decide, refill
from fawkes.mechanism.inactivity import next_idle_since
from fawkes.mechanism.koala_mr import ResizeParams, offer_plan
from fawkes.mechanism.memory import ClusterMemory, Memory
from fawkes.mechanism.model import ClusterState, ClusterView, NodeView, Plan, Snapshot
from fawkes.mechanism.settings import Settings


@dataclass(frozen=True)
class Between:
    """What one between-ticks step decided: an admission (maybe none) and a refill."""

    admission: Admission
    admission_plan: Plan
    refill_plan: Plan
    memory: Memory

    @property
    def empty(self) -> bool:
        return not self.admission.admitted and not self.admission.purged and self.refill_plan.empty


def fold_samples(memory: Memory, snap: Snapshot) -> Memory:
    """Fold each allocated cluster's samples newer than its last folded one into ``idle_since``."""
    entries = {}
    for c in snap.allocated:
        m = memory.of(c.name, c.since)
        idle, seen = m.idle_since, m.seen
        for s in c.samples:
            if seen is None or s.time > seen:
                idle, seen = next_idle_since(idle, s), s.time
        if (idle, seen) != (m.idle_since, m.seen):
            entries[c.name] = replace(m, idle_since=idle, seen=seen)
        else:
            entries[c.name] = m
    return memory.with_entries(entries, keep=_live(snap))


def tick(memory: Memory, snap: Snapshot, settings: Settings) -> tuple[Decision, Memory]:
    """One tick: the decision, and the memory the next step starts from."""
    memory = fold_samples(memory, snap)
    d = decide(snap, settings, memory)
    grown = {g.cluster for g in d.plan.grows}
    shrunk = {s.cluster for s in d.plan.shrinks}
    preempted = _preempted(snap, d) if settings.regrow_delay_ticks > 0 else set()
    since = _incarnations(snap)
    entries: dict[str, ClusterMemory] = {}
    for name in list(d.weights) + list(d.admission.admitted):
        m = memory.of(name, since[name])
        disc = d.discrimination.get(name)
        if disc is not None:  # the cumulative window already carries the past (interval_discrimination)
            disc = disc if settings.discrimination_window == "cumulative" else m.discrimination + disc
        entries[name] = replace(
            m,
            weight=d.weights.get(name, 0.0),
            target=d.targets.get(name),
            shrink_votes=d.shrink_votes.get(name, 0),
            discrimination=m.discrimination if disc is None else disc,
            last_grow_at=snap.now if name in grown else m.last_grow_at,
            last_shrink_at=snap.now if name in shrunk else m.last_shrink_at,
            **_victim(m, name, d, preempted, snap.now, settings),
        )
    keep = (_live(snap) | set(d.admission.admitted)) - set(d.deactivate)
    return d, memory.with_entries(entries, keep=keep, ticks=memory.ticks + 1)


def _preempted(snap: Snapshot, d: Decision) -> set[str]:
    """Clusters this tick's plan takes a node from that runs tasks: their work is preempted."""
    busy = {(c.name, n.id) for c in snap.clusters for n in c.nodes if n.running_tasks > 0}
    return {s.cluster for s in d.plan.shrinks if (s.cluster, s.node) in busy}


def _victim(m: ClusterMemory, name: str, d: Decision, preempted: set[str], now: float,
            settings: Settings) -> dict:
    """BIG-C's delayed regrowth (``regrow_delay_ticks``, mechanism/preemption.py): a cluster this
    tick's plan preempts (takes a node running tasks from) becomes a victim; one still waiting
    keeps its run of eligible ticks; one the decision no longer lists has waited its D ticks (or
    was never one)."""
    if settings.regrow_delay_ticks <= 0:
        return {"victim_since": None, "regrow_votes": 0} if m.victim_since is not None else {}
    if name in preempted:
        return {"victim_since": now, "regrow_votes": 0}
    if name in d.regrow_votes:
        return {"regrow_votes": d.regrow_votes[name]}
    return {"victim_since": None, "regrow_votes": 0}


def offer(memory: Memory, snap: Snapshot, params: ResizeParams) -> tuple[Decision, Memory]:
    """One chapter-2 offer round (KOALA-MR), recorded as a decision: no weights, no gate; the
    targets are what each runner's answer leaves it."""
    plan, reasons = offer_plan(snap, params)
    d = Decision(time=snap.now, policy=params.policy, mean_samples={}, weights={}, discrimination={},
                 global_discrimination=0.0, gate_open=True, targets=plan.targets, plan=plan,
                 reason="; ".join(reasons))
    return d, memory.with_entries({}, keep=_live(snap), ticks=memory.ticks + 1)


def clock_deadlines(memory: Memory, now: float, settings: Settings) -> list:
    """When the clock alone could change what an unchanged snapshot decides: per remembered
    cluster, ``(at, reached)`` where ``reached(t)`` says whether a tick at ``t`` is past it (an
    idle cluster's inactivity deadline, the end of a cooldown)."""
    out = []
    for name, m in memory.clusters:
        idle = settings.idle_timeout_of(name)
        if settings.inactivity == "decoupled" and m.idle_since is not None and idle != float("inf"):
            i0 = m.idle_since
            out.append((i0 + idle, lambda t, i0=i0, idle=idle: t - i0 >= idle))
        if settings.cooldown_s > 0:
            for r in (m.last_grow_at, m.last_shrink_at):
                if r is not None and now - r < settings.cooldown_s:
                    out.append((r + settings.cooldown_s, lambda t, r=r: t - r >= settings.cooldown_s))
    return out


def repeat(memory: Memory, d: Decision, k: int, seen: float) -> Memory:
    """The memory after ``k`` more ticks that see the same snapshot (shifted in time) and take the
    same decision ``d``, which planned nothing: what :func:`tick` would leave, added one tick at a
    time (same floats), with the samples folded up to ``seen``.  A driver may skip such ticks."""
    entries = {}
    for name, m in memory.clusters:
        acc = m.discrimination
        disc = d.discrimination.get(name)
        if disc is not None:
            for _ in range(k):
                acc = acc + disc
        entries[name] = replace(m, discrimination=acc, seen=seen)
    return memory.with_entries(entries, ticks=memory.ticks + k)


def between(memory: Memory, snap: Snapshot, settings: Settings) -> Between:
    """Admission on arrivals and releases, then growth into free hosts, between ticks.

    An admission that reclaims nodes lowers the donors' standing targets in the memory, so a
    later refill does not hand the freed hosts back to them (they go to the admitted cluster)."""
    adm, adm_plan = admit_now(snap, settings, memory) if snap.queue else (Admission(), Plan())
    if adm.admitted:
        since = _incarnations(snap)
        memory = memory.with_entries(
            {n: replace(memory.of(n, since[n]), target=t) for n, t in adm_plan.targets.items()},
            keep=_live(snap) | set(adm.admitted))
        snap = project(snap, adm_plan, adm.admitted)
    if adm.purged:
        snap = replace(snap, queue=tuple(r for r in snap.queue if r.name not in set(adm.purged)))
    plan = refill(snap, settings, memory) if snap.free_hosts else Plan()
    return Between(adm, adm_plan, Plan(grows=plan.grows, targets=plan.targets), memory)


def project(snap: Snapshot, plan: Plan, admitted: tuple[str, ...] = ()) -> Snapshot:
    """The snapshot as a plan leaves it once written as intent: admitted clusters DEPLOYING,
    grown hosts taken (their nodes just requested), shrunk nodes draining."""
    queued = {r.name: r for r in snap.queue}
    clusters = list(snap.clusters)
    for name in admitted:
        r = queued[name]
        clusters.append(ClusterView(r.name, ClusterState.DEPLOYING, r.min_core, since=r.requested_at))
    going = {(s.cluster, s.node) for s in plan.shrinks}
    grows: dict[str, list[NodeView]] = {}
    for g in plan.grows:
        grows.setdefault(g.cluster, []).append(NodeView(g.host, g.role, added_at=snap.now))
    out = []
    for c in clusters:
        nodes = tuple(replace(n, draining=True) if (c.name, n.id) in going else n for n in c.nodes)
        nodes += tuple(grows.get(c.name, ()))
        out.append(replace(c, nodes=nodes) if nodes != c.nodes else c)
    taken = {g.host for g in plan.grows}
    return replace(snap, clusters=tuple(out), free_hosts=tuple(h for h in snap.free_hosts if h not in taken),
                   queue=tuple(r for r in snap.queue if r.name not in set(admitted)))


def _incarnations(snap: Snapshot) -> dict[str, float]:
    """Each allocated or queued cluster's request time: the key of its memory entry."""
    return {c.name: c.since for c in snap.allocated} | {r.name: r.requested_at for r in snap.queue}


def _live(snap: Snapshot) -> set[str]:
    return {c.name for c in snap.allocated}


__all__ = ["Between", "between", "clock_deadlines", "fold_samples", "offer", "project", "repeat", "tick"]
