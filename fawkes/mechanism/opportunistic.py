"""Opportunistic capacity from measured slack (issue 12; UBIS, seed 004, U-1..U-4): the decisions,
pure (no I/O, no clock).  A driver measures; these functions say what to do with the measurement.

* :func:`room`: UBIS Algorithm 1's ``Avail_opp = T_alloc × Cap − Util − Alloc_new`` for one
  resource (new grants counted at their full request: the conservative headroom);
* :func:`fits`: whether a request fits the room in every resource;
* :func:`watchdog`: the node-local preemption rule: ``count`` consecutive checks above
  ``T_preempt`` in any resource (UBIS: every 1 s, 3 checks, 0.99 CPU / 0.95 memory);
* :func:`victims`: which opportunistic workers to stop to get back under the threshold (newest
  first), and :func:`accepts`: a cluster's opt-in (``accept``, ``refuse``, ``maps_only``).

Same-node promotion (U-3) is a book-keeping rule, not a computation: when the owner's regular
claim on a host ends, the opportunistic worker already there becomes a regular transient node
(:func:`promote` picks which, oldest first, never across nodes).

Live (whole hosts: an opportunistic *transient node* of cluster B on a host held by A), the
decision is :func:`decide`: from a :class:`~fawkes.mechanism.model.Snapshot` whose ``host_use``
carries the measured use of each held host and which cluster borrows it now, and each cluster's
opt-in (:class:`OpportunisticConfig`, the config's ``opportunistic:`` section), it returns a
:class:`LendPlan`: hosts to lend (with the worker's CPU cap ``T_alloc x Cap - Util``), workers to
promote to regular TR nodes (their host now free and their cluster's target above what it holds)
and workers to withdraw.  Fairness has two layers (U-5): the regular one is FAWKES's own (targets,
discrimination; opportunistic workers count in neither), the slack one shares the lent hosts equally
among the clusters that accept and show demand (an opted-out cluster's share goes to the others);
:func:`slack_discrimination` is that layer's d_i = c_i - w_i.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fawkes.mechanism.ceres import node_swollen
from fawkes.mechanism.discrimination import temporal_discrimination
from fawkes.mechanism.model import ClusterState, Snapshot
from fawkes.mechanism.talloc import TallocClimb

Accept = Literal["accept", "refuse", "maps_only"]
MODES = ("accept", "refuse", "maps_only")

#: UBIS' recommendations (§ 2 of the seed digest)
T_ALLOC = 0.9
T_PREEMPT = {"cpu": 0.99, "mem": 0.95}
PREEMPT_COUNT = 3


def room(capacity: float, utilization: float, t_alloc: float, granted: float = 0.0) -> float:
    """Opportunistic room of one resource on one node (never negative)."""
    return max(0.0, t_alloc * capacity - utilization - granted)


def fits(request: Mapping[str, float], capacity: Mapping[str, float], utilization: Mapping[str, float],
         t_alloc: float, granted: Mapping[str, float]) -> bool:
    return all(request[r] <= room(capacity[r], utilization.get(r, 0.0), t_alloc, granted.get(r, 0.0)) + 1e-12
               for r in request)


def over(utilization: Mapping[str, float], capacity: Mapping[str, float], t_preempt: Mapping[str, float]) -> bool:
    return any(utilization.get(r, 0.0) > t_preempt[r] * capacity[r] for r in t_preempt)


def watchdog(streak: int, utilization: Mapping[str, float], capacity: Mapping[str, float],
             t_preempt: Mapping[str, float] = T_PREEMPT, count: int = PREEMPT_COUNT) -> tuple[int, bool]:
    """One check: (the new streak of checks above the threshold, whether to preempt now)."""
    streak = streak + 1 if over(utilization, capacity, t_preempt) else 0
    return (0, True) if streak >= count else (streak, False)


def victims(opportunistic: Sequence[tuple[str, Mapping[str, float]]], utilization: Mapping[str, float],
            capacity: Mapping[str, float], t_preempt: Mapping[str, float] = T_PREEMPT) -> list[str]:
    """Opportunistic workers to stop, newest first (``opportunistic`` oldest first, with each one's
    current usage), until the node is back under ``t_preempt``; never a regular one."""
    use = dict(utilization)
    out = []
    for wid, u in reversed(opportunistic):
        if not over(use, capacity, t_preempt):
            break
        out.append(wid)
        for r, v in u.items():
            use[r] = use.get(r, 0.0) - v
    return out


def accepts(mode: Accept, task_kind: str) -> bool:
    """Whether a cluster with ``mode`` runs a task of ``task_kind`` (map, reduce, ...) opportunistically."""
    return mode == "accept" or (mode == "maps_only" and task_kind == "map")


def promote(opportunistic_oldest_first: Sequence[str], freed_regular: int) -> list[str]:
    """Same-node promotion: the oldest opportunistic workers on the node take the regular room freed."""
    return list(opportunistic_oldest_first[:max(0, freed_regular)])


# ====================================================================== live: whole opportunistic nodes
class OpportunisticConfig(BaseModel):
    """The coordinator config's ``opportunistic:`` section (UBIS live).  The default lends nothing:
    every cluster ``refuse``, and the coordinator then measures nothing and starts nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    default: Accept = Field("refuse", description="the opt-in of a cluster not named in clusters")
    clusters: dict[str, Accept] = Field(default_factory=dict, description="per MR-cluster: accept | refuse | maps_only "
                                        "(maps_only live only where the framework kind confines a worker to map tasks)")
    t_alloc: float = Field(T_ALLOC, gt=0, le=1, description="lend a host while its use is under t_alloc x capacity")
    t_alloc_tune: bool = Field(False, description="UBIS U-6: climb t_alloc online, one t_alloc_step a tune_window_s, "
                               "on the measured gain (opportunistic work less the work preemptions threw away)")
    t_alloc_min: float = Field(0.5, gt=0, le=1, description="with t_alloc_tune: the lowest t_alloc of the climb")
    t_alloc_max: float = Field(0.95, gt=0, le=1, description="with t_alloc_tune: the highest t_alloc of the climb "
                               "(below t_preempt_cpu)")
    t_alloc_step: float = Field(0.05, gt=0, le=0.5, description="with t_alloc_tune: how far one window moves t_alloc")
    tune_window_s: float = Field(60.0, ge=5, le=86400, description="with t_alloc_tune: seconds of lending measured "
                                 "before each step of the climb")
    t_preempt_cpu: float = Field(T_PREEMPT["cpu"], gt=0, le=1, description="the watchdog's CPU limit")
    t_preempt_mem: float = Field(T_PREEMPT["mem"], gt=0, le=1, description="the watchdog's memory limit")
    checks: int = Field(PREEMPT_COUNT, ge=1, le=1000, description="checks in a row over a limit before it stops the worker")
    check_period_s: float = Field(1.0, ge=0.05, le=60, description="seconds between the watchdog's checks")
    grace_s: float = Field(2.0, ge=0, le=600, description="SIGTERM to SIGKILL, seconds")
    min_room: float = Field(0.2, ge=0, le=1, description="lend only a host with at least this fraction of it free")
    nice: int = Field(19, ge=0, le=19, description="nice value of an opportunistic worker")
    cpu_shares: int = Field(2, ge=2, le=262144, description="cgroup cpu.shares of an opportunistic worker (v2: scaled weight)")
    measure_s: float = Field(1.0, ge=0.2, le=60, description="how long one measurement of a host's use lasts")
    silence_s: float = Field(30.0, ge=2, le=3600, description="the agent stops the worker when the coordinator's "
                             "heartbeat (a line a second) has been silent this long")
    python: str = Field("python3", min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_./+-]+$",
                        description="the Python on the hosts that runs the watchdog agent")

    @field_validator("clusters", mode="before")
    @classmethod
    def _names(cls, v):
        if isinstance(v, dict):
            for name in v:
                if not isinstance(name, str) or not name or len(name) > 128 or not name.isprintable() or name != name.strip():
                    raise ValueError(f"{name!r} is not a cluster name")
        return v

    @model_validator(mode="after")
    def _alloc_under_preempt(self) -> "OpportunisticConfig":
        if self.t_alloc >= self.t_preempt_cpu:
            raise ValueError(f"t_alloc ({self.t_alloc:g}) must be below t_preempt_cpu ({self.t_preempt_cpu:g}): "
                             "a host lent at t_alloc would be taken back at once")
        if self.t_alloc_tune:
            if not self.t_alloc_min <= self.t_alloc <= self.t_alloc_max:
                raise ValueError(f"t_alloc ({self.t_alloc:g}) must lie in [t_alloc_min, t_alloc_max] "
                                 f"([{self.t_alloc_min:g}, {self.t_alloc_max:g}]): the climb starts from it")
            if self.t_alloc_max >= self.t_preempt_cpu:
                raise ValueError(f"t_alloc_max ({self.t_alloc_max:g}) must be below t_preempt_cpu "
                                 f"({self.t_preempt_cpu:g})")
        return self

    def climb_start(self) -> TallocClimb | None:
        """The U-6 climb's first state (None without ``t_alloc_tune``)."""
        if not self.t_alloc_tune:
            return None
        return TallocClimb(t_alloc=self.t_alloc, step=self.t_alloc_step, lo=self.t_alloc_min, hi=self.t_alloc_max)

    def mode(self, cluster: str) -> Accept:
        return self.clusters.get(cluster, self.default)

    @property
    def enabled(self) -> bool:
        return self.default != "refuse" or any(m != "refuse" for m in self.clusters.values())


@dataclass(frozen=True, slots=True)
class Grant:
    host: str
    cluster: str  # the borrower
    owner: str
    cpus: float  # the worker's CPU cap, cores: T_alloc x Cap - Util
    swollen: bool = False  # CERES C-1's partial reclaim: a busy swollen node's slack, for a cluster left short


@dataclass(frozen=True, slots=True)
class Promote:
    host: str
    cluster: str
    allocated: bool = False  # the host is the borrower's already (a grow of the plan landed on it)


@dataclass(frozen=True, slots=True)
class Withdraw:
    host: str
    cluster: str
    reason: str


@dataclass(frozen=True)
class LendPlan:
    grants: tuple[Grant, ...] = ()
    promotions: tuple[Promote, ...] = ()
    withdrawals: tuple[Withdraw, ...] = ()
    slack: dict[str, float] = field(default_factory=dict)  # the slack layer's discrimination, after the plan
    wanted: bool = False  # some accepting cluster had demand and no host was free: it waited for slack (U-6)

    @property
    def empty(self) -> bool:
        return not (self.grants or self.promotions or self.withdrawals)


def demand_nodes(c) -> int:
    """Nodes a cluster's latest sample asks for beyond what it holds (pending tasks / slots per node)."""
    if not c.samples:
        return 0
    pending = c.samples[-1].pending_tasks
    return math.ceil(pending / max(1, c.slots_per_node)) if pending > 0 else 0


def slack_discrimination(lent: Mapping[str, int], eligible: Sequence[str]) -> dict[str, float]:
    """UBIS' second layer: d_i = c_i - w_i over the lent hosts, w_i = 1/n among the eligible
    borrowers (accepting, with demand), c_i = the share of lent hosts cluster i holds."""
    total = sum(lent.values())
    names = sorted(set(eligible) | {k for k, v in lent.items() if v})
    out = {}
    for n in names:
        w = 1.0 / len(eligible) if n in eligible else 0.0
        c = lent.get(n, 0) / total if total else 0.0
        out[n] = temporal_discrimination(c, w)
    return out


def decide(snap: Snapshot, cfg: OpportunisticConfig, targets: Mapping[str, int] | None = None,
           map_only_workers: bool = False, swollen_threshold: float | None = None,
           usage_window_s: float = 0.0) -> LendPlan:
    """What to lend, promote and withdraw now (UBIS Algorithm 1 per host, whole hosts).

    ``snap.host_use``: the measured hosts (each with its borrower, if any); ``targets``: the regular
    layer's current targets (the controller's memory); ``map_only_workers``: whether the framework can
    confine an opportunistic worker to map tasks (its kind's capability; a Spark standalone worker runs
    any task, so ``maps_only`` clusters then borrow nothing).  Regular capacity first: nothing is lent
    while the pool has free hosts.

    With CERES' C-1 on (``swollen_threshold``, the preset's; ``usage_window_s``), lending is its
    *partial reclaim*: C-1 takes only idle swollen nodes whole, and a busy one (its tasks running, its use
    over the whole window below the threshold of what it holds) keeps its node while its slack goes, capped
    and under the watchdog, to the clusters the regular layer left short of their targets.  Such hosts are
    lent first (their slack has lasted a window, not the last seconds), and the clusters short of their
    target borrow before the others."""
    targets = targets or {}
    task_kind = "map" if map_only_workers else "any"  # what an opportunistic worker may run
    owner = {n.id: c.name for c in snap.clusters for n in c.nodes}
    draining = {n.id for c in snap.clusters for n in c.nodes if n.draining}
    active = {c.name: c for c in snap.clusters if c.state is ClusterState.ACTIVE}
    lent = {u.host: u.borrower for u in snap.host_use if u.borrower}
    free = set(snap.free_hosts)

    withdrawals, promotions, keep = [], [], {}
    held = {n: c.held for n, c in active.items()}
    for host, b in sorted(lent.items()):
        if b not in active:
            withdrawals.append(Withdraw(host, b, "the borrower is no longer active"))
        elif not accepts(cfg.mode(b), task_kind):
            withdrawals.append(Withdraw(host, b, f"the borrower's opt-in is {cfg.mode(b)}"))
        elif owner.get(host) == b:  # the plan grew the borrower onto this very host: keep the worker
            promotions.append(Promote(host, b, allocated=True))
        elif host in free and targets.get(b, 0) > held[b]:
            promotions.append(Promote(host, b))  # same node, never across nodes (U-3)
            held[b] += 1
        else:
            keep[host] = b

    eligible = sorted(n for n, c in active.items() if accepts(cfg.mode(n), task_kind) and demand_nodes(c) > 0)
    count = {n: 0 for n in eligible}
    for b in keep.values():
        count[b] = count.get(b, 0) + 1
    grants = []
    swollen = set() if swollen_threshold is None else {
        n.id for c in active.values() for n in c.nodes
        if not n.draining and n.running_tasks > 0 and node_swollen(n, swollen_threshold, usage_window_s)}
    if not free and eligible:
        room = []
        for u in snap.host_use:
            a = owner.get(u.host)
            if u.borrower or a is None or a not in active or u.host in draining:
                continue
            free_frac = min(cfg.t_alloc - u.cpu, cfg.t_alloc - u.mem)  # Avail_opp, the scarcer resource
            if free_frac >= cfg.min_room:
                room.append((u.host not in swollen, -free_frac, u.host, a, (cfg.t_alloc - u.cpu) * u.cpus))
        want = {n: demand_nodes(active[n]) for n in eligible}
        short = {n for n in eligible if swollen_threshold is not None and targets.get(n, 0) > held[n]}
        for _, _, host, a, cpus in sorted(room):
            cand = [n for n in eligible if n != a and count[n] < want[n]]
            if not cand:
                continue
            # the slack layer's fair share: (with C-1, the clusters left short first,) the fewest lent hosts,
            # then the larger demand, then the name
            b = min(cand, key=lambda n: (n not in short, count[n], -want[n], n))
            grants.append(Grant(host, b, a, round(cpus, 4), swollen=host in swollen and b in short))
            count[b] += 1
    return LendPlan(tuple(grants), tuple(promotions), tuple(withdrawals),
                    slack_discrimination({k: v for k, v in count.items() if v}, eligible),
                    wanted=bool(eligible) and not free)
