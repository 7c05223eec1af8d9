"""Mechanism settings: every reading of the thesis' ambiguity register is a field here.

Defaults are the proposed readings of the thesis' ambiguities; ``docs/ambiguities.md`` lists
each A-nn with the field that controls it, and the anti-flap additions (off by default).
"""

from __future__ import annotations

import math

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fawkes.mechanism.model import MAX_SECONDS, Role


def idle_seconds(v) -> float | str:
    """A T_idle value: a finite number of seconds, > 0 and at most a year, or the word ``never``."""
    if isinstance(v, str):
        if v == "never":
            return v
        raise ValueError(f"{v[:40]!r}: seconds (> 0, at most {MAX_SECONDS:g}) or 'never'")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"seconds (> 0, at most {MAX_SECONDS:g}) or 'never', not {type(v).__name__}")
    if not (0 < v <= MAX_SECONDS):  # NaN fails both comparisons
        raise ValueError(f"{v!r}: seconds (> 0, at most {MAX_SECONDS:g}) or 'never'")
    return float(v)


def _check_name(what: str, v: object) -> None:
    if not isinstance(v, str) or not v or len(v) > 64 or not v.isprintable() or v != v.strip():
        raise ValueError(f"{str(v)[:40]!r} is not a {what} name")


def _check_nodes(owner: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1_000_000:
        raise ValueError(f"{owner}: max_nodes must be an integer in 1..1000000, got {str(v)[:40]!r}")
    return v


def _check_share(owner: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1:
        raise ValueError(f"{owner}: max_share must be a number in (0, 1], got {str(v)[:40]!r}")
    return float(v)


def _per_cluster(v: object, what: str, check) -> tuple:
    """A per-cluster setting given as a mapping (or pairs) of cluster name to a value: sorted pairs, each
    name checked and each value through ``check(name, value)``, no cluster twice."""
    if isinstance(v, dict):
        v = tuple(sorted(v.items(), key=lambda kv: str(kv[0])))
    if not isinstance(v, (tuple, list)):
        raise ValueError(f"a mapping of cluster name to {what}")
    out = []
    for item in v:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValueError(f"a mapping of cluster name to {what}")
        name, x = item
        _check_name("cluster", name)
        out.append((name, check(name, x)))
    if len({n for n, _ in out}) != len(out):
        raise ValueError("a cluster is listed twice")
    return tuple(out)


def _as_seconds(v: float | str) -> float:
    return float("inf") if v == "never" else float(v)


class Settings(BaseModel):
    """How one FAWKES instance decides.  Immutable; validated on construction."""

    # numbers are numbers (a YAML ``true`` is no tau), finite unless said otherwise, and bounded so that
    # no value can make a run hang (a period of 1e-9) or overflow (1e300): the limits are stated here
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)

    # --- the control loop: sampling, weights, the tau gate (A-1, A-40, A-14 table)
    policy: str = Field("TD", description="weighting policy: JD DD TD PU DU RU JS JT TT EQ None")
    period_s: float = Field(60.0, ge=1, le=MAX_SECONDS, description="T: weights and discrimination period, seconds")
    sample_period_s: float = Field(
        5.0, ge=0.1, le=MAX_SECONDS, description="seconds between two samples of a cluster; the weights average the "
        "samples of the last T (A-1); at most T")
    tau: float = Field(10.0, ge=0, allow_inf_nan=True, description="discrimination threshold; .inf disables resizing")
    sample_mean: Literal["arithmetic", "ewma"] = Field(
        "arithmetic", description="how the samples of the last T are averaged into a cluster's mean sample: the plain "
        "mean, or an exponentially weighted one that favours the newest (A-1)")
    ewma_alpha: float = Field(0.5, gt=0, le=1, description="weight of the newest sample with sample_mean=ewma")
    all_zero: Literal["hold", "equal"] = Field(
        "hold", description="A-1: when no allocated cluster shows demand (every mean sample zero), hold every "
        "allocation (the thesis' workload-A timeline, S-3.5) or rebalance by the equal weights 1/n")

    # --- policy parameters
    lam: float = Field(
        0.5, ge=0, le=1, description="RU's lambda: the weight of the PU part, 1 - lambda that of the DU part; 0 and 1 "
        "allowed, the thesis runs lambda 0 as DU (A-2, A-32)")
    a: float = Field(2.0, gt=1, le=1e6, description="JT/TT base a > 1 (eq. 3.6)")
    ru_mix: Literal["weights", "raw"] = Field(
        "weights", description="how RU mixes: the normalised PU and DU weights (weights), or the raw usages, then "
        "normalise the mix (raw) (A-2)")
    pu_signal: Literal["slots", "measured"] = Field(
        "slots", description="A-15 / UBIS U-7: what PU (and RU's PU part) reads as a cluster's busy share: the slots "
        "its framework reports occupied (slots), or the CPU its nodes are measured to use, the per-node "
        "utilisation telemetry (measured: configured slots x the mean measured CPU fraction of its nodes; a "
        "cluster none of whose nodes is measured keeps its occupied slots)")
    count_running_in_demand: bool = Field(
        True, description="whether TD's demand counts the running tasks of unfinished jobs besides their pending ones "
        "(A-13)")
    demand_jobs: Literal["unfinished", "queued"] = Field(
        "unfinished", description="which jobs JD, DD and JS count as waiting in the queue: every unfinished job, or "
        "only those not started yet (A-13)")
    dd_remaining_fraction: bool = Field(
        False, description="whether DD counts only the part of a job's input its tasks have not yet taken, by the "
        "fraction of its tasks left (A-14)")
    js_elapsed_from: Literal["submit", "start"] = Field(
        "submit", description="from when JS counts a waiting job's elapsed time: its submission or its first task's "
        "start (A-17)")
    throughput_window: Literal["cumulative", "interval"] = Field(
        "cumulative", description="JT/TT's throughput phi: completed over completed plus unfinished since deployment "
        "(cumulative), or completed in the interval over waiting now (interval) (A-3)")

    # --- discrimination: how far each cluster is from its entitled share
    discrimination_units: Literal["fraction_seconds", "node_seconds"] = Field(
        "fraction_seconds", description="the unit of discrimination D: held share of the pool less entitled share, "
        "times seconds (fraction_seconds), or held nodes less entitled nodes, times seconds (A-5)")
    discrimination_window: Literal["interval", "cumulative"] = Field(
        "interval", description="the span of D each tick weighs: the last T only (interval), or since the cluster's "
        "deployment (cumulative) (A-5)")
    global_factor: Literal["mean_square", "variance"] = Field(
        "mean_square", description="the global discrimination factor G compared with tau: the mean of the squared "
        "discriminations E[D^2] (mean_square), or their variance Var(D) (A-4, A-6)")
    eq_gated: bool = Field(
        False, description="whether EQ rebalances every tick (False) or only when G exceeds tau, as the other policies "
        "(A-39)")

    # --- growing and shrinking: node types and which nodes go first
    grow_type: Role = Field(Role.TC, description="node type used to grow (L1466): transient or transient-core")
    fp_victim_order: Literal["fewest_tasks", "newest"] = Field(
        "fewest_tasks", description="which transient nodes an FP shrink removes first: those running the fewest tasks, "
        "then the newest (fewest_tasks), or the newest (A-18)")

    # --- admission of new clusters into the pool: reclaim, order, deadline
    admission_reclaim: Literal["weights", "surplus"] = Field(
        "weights", description="when admission takes nodes for a new cluster's minimum, how the others give them: in "
        "proportion to their weights or to their surplus over their minima (A-8)")
    backfill: bool = Field(
        False, description="whether a request that does not fit yet holds back the ones behind it: strict FIFO "
        "(False), or later requests that fit are admitted first (A-10)")
    admission_deadline_s: float | None = Field(
        None, ge=0, le=MAX_SECONDS, description="how long after its arrival a request that fits must be admitted: "
        "admission runs at once on arrival, this is its deadline (None = T) (A-9)")

    # --- admission disciplines (issue 12, the YARN placement project's P-2/P-3); defaults = FIFO as above
    admission_order: Literal["fifo", "sjf", "utility"] = Field(
        "fifo", description="order of the queue: fifo (request order), sjf (shortest expected duration first; "
        "unknown last), utility (highest U = maxT - expected duration - waited first; no maxT last)")
    skip_unfittable: bool = Field(
        False, description="a request whose minimum does not fit the free hosts now (or the minima) is "
        "skipped, not waited for: later ones may go first (the free_machines check)")
    deadline_purge: bool = Field(
        False, description="drop queued requests that can no longer meet maxT: waited > maxT - expected duration")
    starvation_guard_s: float | None = Field(
        None, ge=0, le=MAX_SECONDS, description="a request whose slack U falls below this (without maxT: that has "
        "waited this long) goes first and is never skipped (None = off)")

    # --- placement (issue 12, the YARN placement project's P-1); none = hosts in placement order as above
    placement: Literal["none", "hard", "soft"] = Field(
        "none", description="which free hosts a cluster grows on, by the racks of the inventory: none (placement "
        "order, any rack); hard (only hosts on its preferred racks, those of its core nodes; wait for them "
        "otherwise); soft (preferred hosts first; for the rest go to other racks now unless the wait for "
        "preferred ones, from the expected-free-time table, is shorter than the work left x (locality_penalty - 1))")
    locality_penalty: float = Field(
        1.14, ge=1, le=100, description="placement soft: how many times longer a cluster's work runs on hosts off "
        "its preferred racks (1.14: the YARN placement project's jobs had 1.095-1.16; the lab, racks joined at 100 "
        "Mbit/s, showed none for its CPU-bound job, bench/bench_locality.py; docs/mechanism.md)")

    # --- inactivity: when a cluster with nothing to do leaves
    inactivity: Literal["decoupled", "weight_zero"] = Field(
        "decoupled", description="when a cluster is inactive and leaves: after T_idle with no queued job, no running "
        "task and not loading, whatever its weight (decoupled), or when every sample of the last T_idle weighs zero "
        "under the policy (weight_zero) (A-12)")
    idle_timeout_s: float | Literal["never"] | None = Field(
        None, description="T_idle: an ACTIVE cluster idle this long saves its output and leaves; seconds "
        "(> 0, at most a year), 'never' (it stays until released), or None (= T)")
    idle_timeout_by_cluster: tuple[tuple[str, float | Literal["never"]], ...] = Field(
        (), description="T_idle per MR-cluster ({name: seconds or 'never'}), over idle_timeout_s for those clusters")

    # --- ceilings (issue 27: a service several teams share); none by default
    max_nodes_by_cluster: tuple[tuple[str, int], ...] = Field(
        (), description="per MR-cluster ({name: nodes}): it never holds more (its minimum still holds if larger)")
    max_share_by_cluster: tuple[tuple[str, float], ...] = Field(
        (), description="per MR-cluster ({name: fraction}): it never holds more than this fraction of the pool's "
        "capacity C, rounded down (at least 1 node; its minimum still holds if larger; with max_nodes, the lower)")
    team_quotas: tuple[tuple[str, tuple[str, ...], int], ...] = Field(
        (), description="per team ({team: {clusters: [names], max_nodes: n}}): its clusters together never hold "
        "more than n (their minima still hold); ceilings.py")
    # --- scheduled minima (issue 27: schedules.py); none by default
    schedules: tuple[tuple[str, str, int, float, str], ...] = Field(
        (), description="per schedule (cluster, cron, min_core, seconds, timezone) or a list of {cluster, cron, "
        "min_core, for, timezone}: from each firing of cron, for seconds, the cluster's minimum is at least "
        "min_core (overlaps: the largest); schedules.py")

    # --- anti-flap (B.5 item 3); all off by default = the thesis' literal behaviour
    min_change_nodes: int = Field(
        0, ge=0, le=1_000_000, description="ignore target changes smaller than this many nodes")
    cooldown_s: float = Field(
        0.0, ge=0, le=MAX_SECONDS, description="per cluster and direction, no resize again within this time")
    cap_to_demand: bool = Field(
        False, description="cap a target at ceil(demand tasks / slots per node), at least the minimum")
    # fast up, slow down as dask's Adaptive (its wait_count) and the Kubernetes autoscaler (unneeded time)
    shrink_after_ticks: int = Field(
        1, ge=1, le=10_000, description="shrink a cluster only when this many consecutive rebalancing ticks want it smaller "
        "(1 = at once; fast up, slow down: an adaptive scaler's wait count, the Kubernetes autoscaler's unneeded time)")

    # --- BIG-C (issue 11; spec seeds §000 B-3..B-5, docs/mechanism.md "Preemption settings"):
    # every default leaves the decision exactly as above
    regrow_delay_ticks: int = Field(
        0, ge=0, le=10_000, description="B-3, BIG-C's D: a victim (a cluster from which a tick's plan took a node running tasks) regrows only after "
        "it has been eligible to grow (a rebalancing tick wants it bigger) for this many consecutive ticks; meanwhile "
        "it keeps what it holds and the others share the rest (0 = at once)")
    shrink_amount: Literal["full", "demand_capped"] = Field(
        "full", description="B-4: an over-share cluster gives its whole surplus (full), or the over-share clusters "
        "together give at most what the under-share ones need beyond the free hosts: their demand, "
        "ceil((pending + running tasks) / slots per node), capped at their target (demand_capped)")
    victim_order: Literal["largest_surplus", "most_discriminated", "longest_remaining"] = Field(
        "largest_surplus", description="B-5, with shrink_amount=demand_capped: which over-share clusters give first: "
        "one node at a time from the largest remaining surplus (spreads the loss), or whole surpluses from the most "
        "discriminated, or from the one with the most tasks left per node (the Capacity Scheduler's "
        "longest-remaining-time heuristic)")
    latency_clusters: tuple[str, ...] = Field(
        (), max_length=10_000, description="B-7: names of the MR-clusters of class latency; every other is best_effort. "
        "With any: the latency class is entitled to latency_share of the pool, and a latency cluster the targets "
        "want bigger opens the gate whatever tau says")
    latency_share: float = Field(0.95, gt=0, le=1, description="B-7: the latency class's share when both classes "
                                 "show demand (BIG-C: 95 %); the best-effort class has the rest")
    reserve_fraction: float = Field(
        0.0, ge=0, lt=1, description="B-7's reserve baseline: best-effort clusters together hold at most "
        "floor((1 - this) * pool) nodes, the latency clusters the rest, demand or not (BIG-C: 0.6); 0 = off")

    # --- CERES (issue 11; spec seeds §001 C-1..C-3, docs/mechanism.md "CERES"): off by default
    swollen_threshold: float | None = Field(
        None, gt=0, le=1, description="C-1: a node whose maximum CPU and memory use over the usage window are both "
        "below this fraction of what it holds is swollen; when under-share clusters need nodes, idle swollen nodes "
        "of clusters that do not grow are taken first, weight-driven preemption only for the rest (None = off)")
    usage_window_s: float = Field(
        300.0, ge=1, le=MAX_SECONDS, description="C-1: the sliding window over which the collector keeps each "
        "node's maximum use (used only with swollen_threshold)")
    straggler_factor: float | None = Field(
        None, gt=1, le=1e6, description="C-2: a running job is a straggler when its estimated time to finish, from "
        "its speed over the last straggler_window_s, is more than this many times its peers' median (or, with a reference "
        "runtime, when elapsed + ETA exceeds this many times it); its cluster grows from idle capacity (None = off)")
    straggler_window_s: float = Field(
        30.0, ge=0, le=MAX_SECONDS, description="C-2: a running job's speed is its progress over the last this "
        "many seconds (since its first sample while younger); 0 = over the last pair of samples, as CERES. "
        "Progress moves in whole tasks: a span shorter than a few tasks' length reads no progress most of the time "
        "and a burst the rest")
    straggler_expand_nodes: int = Field(
        1, ge=1, le=1_000_000, description="C-2: nodes added per tick to a cluster with a straggler, from idle "
        "capacity only (pool nodes no target wants)")

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, v: str) -> str:
        from fawkes.mechanism.policies import get_policy  # the registry names the valid values

        return get_policy(v).name

    @model_validator(mode="after")
    def _sample_within_period(self) -> "Settings":
        if self.sample_period_s > self.period_s:
            raise ValueError(f"sample_period_s ({self.sample_period_s:g}) must not exceed period_s ({self.period_s:g})")
        return self

    @model_validator(mode="after")
    def _victim_order_needs_a_capped_shrink(self) -> "Settings":
        if self.victim_order != "largest_surplus" and self.shrink_amount != "demand_capped":
            raise ValueError("victim_order applies only with shrink_amount: demand_capped (a full shrink takes every surplus)")
        if self.reserve_fraction > 0 and not self.latency_clusters:
            raise ValueError("reserve_fraction needs latency_clusters (the clusters the reserve is for)")
        return self

    @field_validator("latency_clusters", mode="before")
    @classmethod
    def _names_list(cls, v):
        return tuple(v) if isinstance(v, list) else v

    @field_validator("latency_clusters")
    @classmethod
    def _names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not name or len(name) > 128 or not name.isprintable() or name != name.strip():
                raise ValueError(f"latency_clusters: {name!r} is not a cluster name")
        if len(set(v)) != len(v):
            raise ValueError("latency_clusters: a name is listed twice")
        return v

    @field_validator("idle_timeout_s", mode="before")
    @classmethod
    def _idle_timeout(cls, v):
        return None if v is None else idle_seconds(v)

    @field_validator("idle_timeout_by_cluster", mode="before")
    @classmethod
    def _idle_timeouts(cls, v):
        if isinstance(v, dict):
            v = tuple(sorted(v.items(), key=lambda kv: str(kv[0])))
        if not isinstance(v, (tuple, list)):
            raise ValueError("a mapping of cluster name to seconds or 'never'")
        out = []
        for item in v:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ValueError("a mapping of cluster name to seconds or 'never'")
            name, t = item
            if not isinstance(name, str) or not name or len(name) > 64 or not name.isprintable() \
                    or name != name.strip():
                raise ValueError(f"{str(name)[:40]!r} is not a cluster name")
            try:
                out.append((name, idle_seconds(t)))
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return tuple(out)

    @field_validator("max_share_by_cluster", mode="before")
    @classmethod
    def _shares(cls, v):
        return _per_cluster(v, "a fraction of the pool", _check_share)

    @field_validator("max_nodes_by_cluster", mode="before")
    @classmethod
    def _ceilings(cls, v):
        return _per_cluster(v, "a number of nodes", _check_nodes)

    @field_validator("schedules", mode="before")
    @classmethod
    def _schedules(cls, v):
        from fawkes.mechanism import schedules as sch

        if not isinstance(v, (tuple, list)) or len(v) > 1000:
            raise ValueError("a list of schedules {cluster, cron, min_core, for, timezone} (at most 1000)")
        out = []
        for i, item in enumerate(v):
            if isinstance(item, dict):
                unknown = set(item) - {"cluster", "cron", "min_core", "for", "timezone"}
                if unknown:
                    raise ValueError(f"schedules[{i}]: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
                item = (item.get("cluster"), item.get("cron"), item.get("min_core"), item.get("for"),
                        item.get("timezone", "UTC"))
            if not isinstance(item, (tuple, list)) or len(item) != 5:
                raise ValueError(f"schedules[{i}]: (cluster, cron, min_core, seconds, timezone)")
            name, cron, n, dur, tz = item
            try:
                _check_name("cluster", name)
                tz = sch.check_timezone(tz)
                cron = sch.check_cron(cron, tz)
                if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
                    raise ValueError(f"min_core must be an integer in 1..1000000, got {str(n)[:40]!r}")
                dur = sch.duration_seconds(dur)
            except ValueError as exc:
                raise ValueError(f"schedules[{i}]: {exc}") from None
            out.append((name, cron, n, dur, tz))
        return tuple(out)

    @field_validator("team_quotas", mode="before")
    @classmethod
    def _quotas(cls, v):
        if isinstance(v, dict):
            v = tuple((k, x.get("clusters"), x.get("max_nodes")) if isinstance(x, dict) else (k, None, None)
                      for k, x in sorted(v.items(), key=lambda kv: str(kv[0])))
        if not isinstance(v, (tuple, list)):
            raise ValueError("a mapping of team name to {clusters: [...], max_nodes: n}")
        out, seen = [], set()
        for item in v:
            if not isinstance(item, (tuple, list)) or len(item) != 3:
                raise ValueError("a mapping of team name to {clusters: [...], max_nodes: n}")
            team, clusters, n = item
            _check_name("team", team)
            if not isinstance(clusters, (tuple, list)) or not clusters:
                raise ValueError(f"{team}: clusters must be a non-empty list of cluster names")
            for c in clusters:
                _check_name("cluster", c)
            if team in seen:
                raise ValueError(f"{team}: listed twice")
            seen.add(team)
            out.append((team, tuple(dict.fromkeys(clusters)), _check_nodes(team, n)))
        return tuple(out)

    @field_validator("grow_type", mode="before")
    @classmethod
    def _role(cls, v):
        return Role(v) if isinstance(v, str) else v

    @field_validator("grow_type")
    @classmethod
    def _grow_type(cls, v: Role) -> Role:
        if v is Role.CORE:
            raise ValueError("grow_type must be transient or transient-core")
        return v

    @property
    def idle_timeout(self) -> float:
        """T_idle in seconds (``inf``: never)."""
        return self.period_s if self.idle_timeout_s is None else _as_seconds(self.idle_timeout_s)

    def idle_timeout_of(self, cluster: str) -> float:
        """T_idle of MR-cluster ``cluster`` in seconds (``inf``: never): its own, else ``idle_timeout``."""
        for name, t in self.idle_timeout_by_cluster:
            if name == cluster:
                return _as_seconds(t)
        return self.idle_timeout

    @property
    def longest_finite_idle_timeout(self) -> float:
        """The longest T_idle that can run out (the samples a snapshot must keep); T when none can."""
        ts = [self.idle_timeout, *(_as_seconds(t) for _, t in self.idle_timeout_by_cluster)]
        return max([t for t in ts if t != float("inf")] or [self.period_s])

    def max_nodes_of(self, cluster: str) -> int | None:
        """The ceiling of MR-cluster ``cluster`` (None: none)."""
        for name, n in self.max_nodes_by_cluster:
            if name == cluster:
                return n
        return None

    @property
    def admission_deadline(self) -> float:
        return self.period_s if self.admission_deadline_s is None else self.admission_deadline_s
