"""Chapter 2 (KOALA-MR) runner-side resizing policies GS, GG, GGD (spec A.3; A-24..A-26, A-33).

Each MR-cluster's runner receives an offer every ``offer_period_s`` and answers with a
node delta.  Pure functions of what the runner observes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fawkes.mechanism.model import Role


class ResizeParams(BaseModel):
    """Parameters of a chapter-2 policy, with the thesis' values as defaults (L1099-1111)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: Literal["GS", "GG", "GGD", "static"] = "GS"
    offer_period_s: float = Field(30.0, gt=0)  # GS 30 s; GG/GGD 120 s
    k_grow: float = Field(1.5, gt=0)  # GS: grow when K_r > k_grow
    k_shrink: float = Field(0.25, ge=0)  # GS: shrink when K_r < k_shrink
    delta_plus: int = Field(5, ge=1)  # GS offer size
    delta_minus: int = Field(2, ge=1)
    offer_size: int = Field(2, ge=1)  # GG/GGD offer size
    kr_definition: Literal["demand_over_capacity", "running_over_free"] = "demand_over_capacity"

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
