"""Chapter 2 (KOALA-MR) runner-side resizing policies GS, GG, GGD (thesis ch. 2; A-24..A-26, A-33 in docs/ambiguities.md).

Each MR-cluster's runner receives an offer every ``offer_period_s`` and answers with a
node delta.  Pure functions of what the runner observes: :func:`on_offer` for one runner,
:func:`offer_plan` for every cluster of a snapshot (the step both the simulator and the
coordinator run, ``controller.offer``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from fawkes.mechanism.model import SHRINK_MODE, ClusterState, Grow, Plan, Role, Shrink, Snapshot
from fawkes.mechanism.settings import MAX_SECONDS

RunnerPolicy = Literal["static", "GG", "GS", "GGD"]
#: the chapter-2 runner policies (the one list: presets, the simulator and the CLI read it)
RUNNER_POLICIES: tuple[str, ...] = get_args(RunnerPolicy)


class ResizeParams(BaseModel):
    """Parameters of a chapter-2 policy, with the thesis' values as defaults (L1099-1111)."""

    # as Settings: numbers are numbers (a YAML ``true`` is no period, a string "30" no number), finite,
    # and the offer period is bounded like every other period (1 s .. 1 year: 1e-9 s would hang a run)
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)

    policy: RunnerPolicy = "GS"
    offer_period_s: float = Field(30.0, ge=1, le=MAX_SECONDS)  # how often the pool offers nodes; GS 30 s, GG/GGD 120 s
    k_grow: float = Field(1.5, gt=0)  # GS: grow when K_r > k_grow
    k_shrink: float = Field(0.25, ge=0)  # GS: shrink when K_r < k_shrink
    delta_plus: int = Field(5, ge=1, le=1_000_000)  # GS: how many nodes the pool offers a cluster that should grow
    delta_minus: int = Field(2, ge=1, le=1_000_000)
    offer_size: int = Field(2, ge=1, le=1_000_000)  # GG/GGD offer size
    kr_definition: Literal["demand_over_capacity", "running_over_free"] = "demand_over_capacity"  # K_r: (running + pending tasks) / slots, or running over free

    @classmethod
    def for_policy(cls, policy: str, **kw) -> "ResizeParams":
        if policy in ("GG", "GGD"):
            kw.setdefault("offer_period_s", 120.0)
        return cls(policy=policy, **kw)


def resizing_ratio(pending: int, running: int, slots: int, params: ResizeParams) -> float:
    """K_r: demand over capacity by default (A-24), or running over free slots."""
    if params.kr_definition == "running_over_free":
        free = slots - running
        return math.inf if free <= 0 else running / free
    return (pending + running) / slots if slots > 0 else math.inf


@dataclass(frozen=True, slots=True)
class Resize:
    delta: int  # + add, − remove, 0 nothing
    role: Role  # role of the nodes added (TR; GGD: TC-like, A-26)
    reason: str


def on_offer(
    params: ResizeParams, *, pending: int, running: int, slots: int, pool_free: int, n_transient: int, workload_done: bool = False
) -> Resize:
    """The runner's answer to one offer.  Never shrinks below the core nodes."""
    p = params.policy
    if p == "static":
        return Resize(0, Role.TR, "static")
    if p in ("GG", "GGD"):
        role = Role.TC if p == "GGD" else Role.TR
        if p == "GG" and workload_done and n_transient > 0:
            return Resize(-n_transient, role, "GG: workload finished, release transient nodes")
        if workload_done or pool_free <= 0:
            return Resize(0, role, f"{p}: nothing to take")
        k = min(params.offer_size, pool_free)
        return Resize(k, role, f"{p}: accept offer of {k}")
    kr = resizing_ratio(pending, running, slots, params)
    if kr > params.k_grow and pool_free > 0:
        k = min(params.delta_plus, pool_free)
        return Resize(k, Role.TR, f"GS: K_r={kr:.2f} > {params.k_grow}: grow {k}")
    if kr < params.k_shrink and n_transient > 0:
        k = min(params.delta_minus, n_transient)
        return Resize(-k, Role.TR, f"GS: K_r={kr:.2f} < {params.k_shrink}: shrink {k}")
    return Resize(0, Role.TR, f"GS: K_r={kr:.2f} within [{params.k_shrink}, {params.k_grow}]")


def offer_plan(snap: Snapshot, params: ResizeParams) -> tuple[Plan, tuple[str, ...]]:
    """One offer round: every ACTIVE cluster's runner answers (in snapshot order), from its latest
    sample (pending and running tasks; no unfinished job = its workload is done, and GG releases
    its transient nodes), its settled nodes times their slots, the free hosts not yet taken this
    round and its transient nodes.  Returns the plan and one reason per cluster."""
    from fawkes.mechanism.plan import shrink_victims
    from fawkes.mechanism.settings import Settings

    fewest = Settings(policy="None", fp_victim_order="fewest_tasks")
    free = snap.free_hosts
    taken = 0
    grows: list[Grow] = []
    shrinks: list[Shrink] = []
    targets: dict[str, int] = {}
    reasons: list[str] = []
    for c in snap.clusters:
        if c.state is not ClusterState.ACTIVE:
            continue
        if not c.samples:
            reasons.append(f"{c.name}: no sample yet")
            continue
        m = c.samples[-1]
        n_tr = sum(1 for n in c.nodes if n.role is not Role.CORE and not n.draining)
        r = on_offer(params, pending=m.pending_tasks, running=m.running_tasks, slots=c.settled * c.slots_per_node,
                     pool_free=len(free) - taken, n_transient=n_tr, workload_done=m.unfinished_jobs == 0)
        reasons.append(f"{c.name}: {r.reason}")
        if r.delta > 0:
            grows += [Grow(c.name, h, r.role) for h in free[taken:taken + r.delta]]
            taken += r.delta
        elif r.delta < 0:
            shrinks += [Shrink(c.name, n.id, n.role, SHRINK_MODE[n.role]) for n in shrink_victims(c, -r.delta, fewest)]
        targets[c.name] = c.settled + r.delta
    return Plan(grows=tuple(grows), shrinks=tuple(shrinks), targets=targets), tuple(reasons)
