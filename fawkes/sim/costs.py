"""The simulator's cost model (docs/simulation.md, "The model"): task durations, node types,
shrink costs and the MR-cluster lifecycle.  Every number is a field with the spec's default.

Task durations (B.3, calibrated per B.5 item 6, see docs/simulation.md):

* a map's mean duration is affine in its split: ``map_fixed_s + (map_s_per_block -
  map_fixed_s) * split / 128 MB`` (at least ``map_min_s``), lognormal with CV ``cv``;
* a reduce's mean is ``red_fixed_s + red_s_per_block * (128 MB blocks of input per reduce)``
  capped at ``red_max_s``.  A reduce copies while maps run (the first ``shuffle_frac`` of its
  work) and cannot pass the end of the map phase; the rest runs after the last map.

Per-cluster costs (a pool of several framework kinds, ``fawkes trace from-state`` of a mixed run):
``clusters.NAME.FIELD`` sets one of :data:`PER_CLUSTER` for the MR-cluster NAME only
(:class:`ClusterCosts`, :meth:`CostModel.for_cluster`); every other cluster, and every field a
cluster does not set, keeps the pool's value.

Node-type penalty (B.3 bottleneck-sum model, load-aware per B.5 item 1): a task that starts
on an MR-cluster with ``N_in`` core nodes is slowed by
``m = 1 + beta_in (N/N_in - 1) + beta_out (N/N_out - 1)`` where ``N`` counts the core nodes
plus the transient nodes currently running tasks of the cluster and ``N_out`` the core plus
the busy transient-core nodes (``penalty="literal"``: every node held counts).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

MB = 1024 * 1024
GB = 1024 * MB
BLOCK = 128 * MB


class AppProfile(BaseModel):
    """One application of Table 3.1 (durations for the DAS-4 node of ch. 3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    map_s_per_block: float = Field(40.0, gt=0, description="mean map duration on a 128 MB split [s]")
    map_fixed_s: float = Field(4.0, ge=0, description="start-up part of a map, independent of its split")
    red_fixed_s: float = Field(20.0, ge=0)
    red_s_per_block: float = Field(2.0, ge=0, description="reduce seconds per 128 MB of job input per reduce")
    red_max_s: float = Field(math.inf, gt=0)
    beta_in: float = Field(0.0, ge=0, description="I/O share that depends on input-holding (core) nodes")
    beta_out: float = Field(0.0, ge=0, description="I/O share that depends on DataNodes (core + TC)")
    selectivity: float = Field(1e-4, ge=0, description="output bytes / input bytes")
    # UBIS U-7's telemetry: what a running task uses of its slot's CPU, as a node agent would measure it
    # (docs/simulation.md, "Measured use"); 1.0 = a task uses its whole slot (measured PU = slot PU)
    map_cpu: float = Field(1.0, ge=0, le=1, description="CPU a running map uses, a fraction of its slot")
    red_cpu: float = Field(1.0, ge=0, le=1, description="CPU a running reduce uses (copy included), a fraction of its slot")


#: Table 3.1 applications (+ grep for Table 5.2); aliases resolve in :func:`app_profile`
APPS: dict[str, AppProfile] = {
    "wordcount": AppProfile(name="wordcount", map_s_per_block=40, red_fixed_s=20, red_s_per_block=2,
                            red_max_s=60, selectivity=5.5 / (200 * 1024), map_cpu=0.9, red_cpu=0.3),
    "sort": AppProfile(name="sort", map_s_per_block=20, red_fixed_s=10, red_s_per_block=5,
                       beta_in=0.23, beta_out=0.17, selectivity=1.0, map_cpu=0.5, red_cpu=0.15),
    "pagerank": AppProfile(name="pagerank", map_s_per_block=45, red_fixed_s=20, red_s_per_block=2,
                           red_max_s=60, selectivity=1.5 / (50 * 1024), map_cpu=0.5, red_cpu=0.3),
    "kmeans": AppProfile(name="kmeans", map_s_per_block=35, red_fixed_s=10, red_s_per_block=4,
                         beta_in=0.1, beta_out=0.1, selectivity=72 / 70, map_cpu=0.5, red_cpu=0.3),
    "trackerovertime": AppProfile(name="trackerovertime", map_s_per_block=35, red_fixed_s=20,
                                  red_s_per_block=1, red_max_s=40, selectivity=3.9 / (100 * 1024), map_cpu=0.5, red_cpu=0.3),
    "activehashes": AppProfile(name="activehashes", map_s_per_block=30, red_fixed_s=15, red_s_per_block=3,
                               red_max_s=60, beta_in=0.1, beta_out=0.1, selectivity=1e-6, map_cpu=0.5, red_cpu=0.3),
    "grep": AppProfile(name="grep", map_s_per_block=20, red_fixed_s=10, red_s_per_block=1, red_max_s=40,
                       selectivity=1e-3, map_cpu=0.4, red_cpu=0.2),
}
ALIASES = {"wt": "wordcount", "wc": "wordcount", "st": "sort", "pr": "pagerank", "km": "kmeans",
           "tt": "trackerovertime", "ah": "activehashes", "gr": "grep"}


def app_profile(name: str, apps: dict[str, AppProfile] | None = None) -> AppProfile:
    apps = apps or APPS
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    try:
        return apps[key]
    except KeyError:
        raise KeyError(f"unknown app {name!r}; known: {', '.join(sorted(apps))} (aliases {', '.join(sorted(ALIASES))})") from None


#: a cluster's or a kind's name, as the store takes them (fawkes.store.validate.NAME_RE)
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,62}$"


def _seconds():
    return Field(None, ge=0, le=1e9, allow_inf_nan=False)


class ClusterCosts(BaseModel):
    """One MR-cluster's own costs (None: the pool's), and the framework kind they were measured on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str | None = Field(None, pattern=NAME_PATTERN, description="the framework kind (informative)")
    job_startup_s: float | None = _seconds()
    job_overhead_s: float | None = _seconds()
    core_ready_s: float | None = _seconds()
    tr_ready_s: float | None = _seconds()
    tc_ready_s: float | None = _seconds()
    fp_stop_s: float | None = _seconds()
    dp_fixed_s: float | None = _seconds()
    master_task_factor: float | None = Field(None, gt=0, le=100, allow_inf_nan=False)


#: the fields a cluster may set for itself: what a framework kind's daemons and jobs take to start and stop
PER_CLUSTER = tuple(f for f in ClusterCosts.model_fields if f != "kind")


class CostModel(BaseModel):
    """Every simulator parameter (docs/simulation.md) with its default; override with ``model_copy(update=...)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def gated(self) -> bool:
        """Jobs are dispatched as the live coordinator does (``max_running_jobs``, ``job_startup_s``)."""
        return bool(self.max_running_jobs) or self.job_startup_s > 0

    map_slots: int = Field(6, ge=1, description="map slots per node (ch. 3: 6; ch. 2: 8)")
    reduce_slots: int = Field(2, ge=1)
    cv: float = Field(0.3, ge=0, description="coefficient of variation of task durations (lognormal)")
    map_min_s: float = Field(5.0, gt=0)
    slowstart: float = Field(0.05, ge=0, le=1, description="fraction of maps done before reduces start")
    shuffle_frac: float = Field(0.6, ge=0, le=1, description="part of a reduce that overlaps the map phase")
    job_overhead_s: float = Field(8.0, ge=0, description="job set-up + clean-up (L3114-3117)")
    penalty: Literal["load_aware", "literal", "off"] = Field("load_aware", description="B.5 item 1")
    lose_map_outputs: bool = Field(True, description="maps done on a removed node are re-run if reduces still need them")
    dp_kill_tasks: bool = Field(True, description="DP kills the node's running tasks (False: let them finish first)")
    fp_stop_s: float = Field(5.0, ge=0, description="FP: daemon stop before the host is free again")
    tr_ready_s: float = Field(10.0, ge=0, description="a new TR node is usable after this")
    tc_ready_s: float = Field(15.0, ge=0, description="a new TC node is usable after this (DataNode registration)")
    core_ready_s: float = Field(15.0, ge=0, description="a core node added to an active cluster (refill) is usable after this")
    w_dst_Bps: float = Field(100 * MB, gt=0, description="DP: re-replication write rate per receiving DataNode")
    dp_fixed_s: float = Field(0.0, ge=0, description="DP: seconds every decommission takes beyond re-replication "
                              "(refresh, heartbeats, daemon stop; measured live by `fawkes trace from-state`)")
    master_task_factor: float = Field(1.0, gt=0, le=100, allow_inf_nan=False, description=(
        "a task on a cluster's master node (its first core node, which also runs the masters and the jobs' "
        "drivers) takes this times as long as on another node (below 1 where grown nodes' cold executors "
        "are the slower; 1 in the thesis' model; measured live by `fawkes trace from-state`)"))
    max_running_jobs: int = Field(0, ge=0, description="jobs of one MR-cluster between dispatch and end at once "
                                  "(0: no limit, Hadoop-1 FIFO; the live dispatcher: 1); see SimCluster.submit")
    job_startup_s: float = Field(0.0, ge=0, description="dispatch to first task (driver and executors start); "
                                 "0 in the thesis' model; see SimCluster.submit")
    refill_delay_s: float = Field(1.0, ge=0, description="the controller reacts to freed hosts this much later "
                                  "(batches admit_now/refill over releases; 0 = on every release)")
    deploy_s: float = Field(30.0, ge=0, description="w^D beyond queueing: daemon start")
    load_Bps: float = Field(350 * MB, gt=0, description="l^D = dataset bytes / this")
    save_Bps: float = Field(350 * MB, gt=0, description="b^D = output bytes / this")
    replication: int = Field(3, ge=1)
    hdfs_capacity_bytes: float = Field(2 * 1024 * GB, gt=0, description="configured HDFS capacity per DataNode (DU)")
    apps: dict[str, AppProfile] = Field(default_factory=lambda: dict(APPS))
    clusters: dict[str, ClusterCosts] = Field(default_factory=dict, description="per-cluster costs (PER_CLUSTER)")

    def for_cluster(self, name: str) -> CostModel:
        """The model one MR-cluster runs under: the pool's, with the cluster's own fields on top."""
        own = self.clusters.get(name)
        if own is None:
            return self
        return self.model_copy(update={**own.model_dump(exclude_none=True, exclude={"kind"}), "clusters": {}})

    def any_gated(self) -> bool:
        """Some cluster dispatches as the live coordinator does (:meth:`gated`, its own fields included)."""
        return self.gated() or any(self.for_cluster(n).gated() for n in self.clusters)

    @property
    def slots_per_node(self) -> int:
        return self.map_slots + self.reduce_slots

    def profile(self, app: str) -> AppProfile:
        return app_profile(app, self.apps)

    def map_mean(self, app: AppProfile, split_bytes: float) -> float:
        s = app.map_fixed_s + (app.map_s_per_block - app.map_fixed_s) * split_bytes / BLOCK
        return max(self.map_min_s, s)

    def reduce_mean(self, app: AppProfile, input_bytes: float, reduces: int) -> float:
        if reduces <= 0:
            return 0.0
        blocks = input_bytes / reduces / BLOCK
        return min(app.red_max_s, app.red_fixed_s + app.red_s_per_block * blocks)

    def durations(self, app: AppProfile, input_bytes: float, maps: int, reduces: int,
                  rng: np.random.Generator, *, map_s: float | None = None,
                  reduce_s: float | None = None) -> tuple[list[float], list[float]]:
        """Base task durations (on a core-only cluster) of one job: lognormal around the means.

        The means come from the model, or from ``map_s`` / ``reduce_s`` when a trace measured them.
        """
        mm = map_s if map_s is not None else self.map_mean(app, input_bytes / maps if maps else 0.0)
        rm = reduce_s if reduce_s is not None else self.reduce_mean(app, input_bytes, reduces)
        map_floor = self.map_min_s * 0.5 if map_s is None else 0.1 * map_s  # measured tasks may be sub-second
        red_floor = 1.0 if reduce_s is None else 0.1 * reduce_s
        return _lognormal(rng, mm, self.cv, maps, map_floor), _lognormal(rng, rm, self.cv, reduces, red_floor)

    def removal_time(self, stored: float, k: int, n_datanodes: int) -> float:
        """DP (B.3): re-replicate ``stored`` bytes of ``k`` nodes leaving a cluster of ``n_datanodes``."""
        if stored <= 0:
            return self.dp_fixed_s
        receivers = max(1, n_datanodes - k)
        r_nn = max(1.0, n_datanodes / 2) * self.w_dst_Bps
        return self.dp_fixed_s + stored / min(r_nn, receivers * self.w_dst_Bps)


#: KEY=VALUE overrides of a CostModel, hashable (workload caches key on them)
CostOverrides = tuple[tuple[str, object], ...]


def cost_model(overrides: CostOverrides = (), **base) -> CostModel:
    """``CostModel(**base)`` with ``overrides`` applied and validated: a field name (``map_slots``,
    ``w_dst_Bps``, ...), ``apps.NAME.FIELD`` for one application profile (``apps.sort.beta_in``) or
    ``clusters.NAME.FIELD`` for one MR-cluster (a field of :data:`PER_CLUSTER`, or ``kind``)."""
    import re

    from pydantic import ValidationError

    fields = dict(base)
    apps = dict(APPS)
    clusters: dict[str, ClusterCosts] = {}
    for key, value in overrides:
        parts = key.split(".")
        if parts[0] == "clusters" and len(parts) == 3:
            name, attr = parts[1], parts[2]
            if not re.fullmatch(NAME_PATTERN, name):
                raise ValueError(f"clusters: invalid cluster name {name[:64]!r} (a letter, then up to 62 "
                                 "letters, digits, '_' or '-')")
            if attr not in ClusterCosts.model_fields:
                raise ValueError(f"{key}: not a per-cluster field; known: kind, {', '.join(PER_CLUSTER)}")
            old = clusters.get(name, ClusterCosts()).model_dump(exclude_none=True)
            try:
                clusters[name] = ClusterCosts.model_validate({**old, attr: value})
            except ValidationError as exc:
                raise ValueError(f"{key}: {exc.errors()[0]['msg']}, got {value!r}") from None
        elif parts[0] == "apps" and len(parts) == 3:
            try:
                name, attr = app_profile(parts[1], apps).name, parts[2]
            except KeyError as exc:
                raise ValueError(f"{key}: {exc.args[0]}") from None
            if attr not in AppProfile.model_fields or attr == "name":
                raise ValueError(f"{key}: unknown application field {attr!r}; known: "
                                 + ", ".join(f for f in AppProfile.model_fields if f != "name"))
            try:
                apps[name] = AppProfile.model_validate({**apps[name].model_dump(), attr: value})
            except ValidationError as exc:
                raise ValueError(f"{key}: {exc.errors()[0]['msg']}, got {value!r}") from None
        elif len(parts) == 1 and key in CostModel.model_fields and key not in ("apps", "clusters"):
            fields[key] = value
        else:
            raise ValueError(f"unknown cost parameter {key!r}; known: "
                             + ", ".join(f for f in CostModel.model_fields if f not in ("apps", "clusters"))
                             + ", apps.NAME.FIELD, clusters.NAME.FIELD")
    try:
        return CostModel(**fields, apps=apps, clusters=clusters)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise ValueError(f"{e['loc'][0]}: {e['msg']}, got {e.get('input')!r}") from None


def _lognormal(rng: np.random.Generator, mean: float, cv: float, n: int, floor: float) -> list[float]:
    if n <= 0:
        return []
    if cv <= 0:
        return [mean] * n
    s2 = math.log1p(cv * cv)
    mu = math.log(mean) - s2 / 2
    x = rng.lognormal(mu, math.sqrt(s2), n)
    return np.maximum(x, floor).tolist()


def penalty(beta_in: float, beta_out: float, n: int, n_in: int, n_out: int) -> float:
    """Node-type multiplier m = 1 + beta_in (N/N_in - 1) + beta_out (N/N_out - 1) (B.3)."""
    if (beta_in == 0.0 and beta_out == 0.0) or n_in <= 0:
        return 1.0
    return 1.0 + beta_in * (n / n_in - 1.0) + beta_out * (n / max(1, n_out) - 1.0)
