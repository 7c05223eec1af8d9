"""The coordinator config file and where the state lives.

Config file: YAML, every key optional, unknown keys refused.  The reference of every key (type,
default, bounds, description) is ``docs/config.md``, generated from the models below by
:mod:`fawkes.config_doc` (``fawkes config reference``); ``fawkes config example`` prints a commented
example and ``fawkes config check FILE`` validates one as ``fawkes coordinator run`` would.

Where things are found:

* config file: ``--config``/``FAWKES_CONFIG``, else ``$FAWKES_HOME/config.yaml`` or
  ``~/.config/fawkes/config.yaml`` when that file exists (else built-in defaults);
* state URL: ``--state URL`` / ``FAWKES_STATE``, else the config's ``state``, else the
  SQLite file ``$FAWKES_HOME/fawkes.db`` or ``~/.local/share/fawkes/fawkes.db``.

Errors are :class:`~fawkes.errors.ConfigError` naming the file, line and key.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import click
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator

from fawkes.errors import ConfigError
from fawkes.mechanism.opportunistic import OpportunisticConfig
from fawkes.mechanism.model import MAX_SECONDS
from fawkes.store.lifecycle import NODE_TIMEOUTS, NodeState
from fawkes.yamlfile import load_yaml, validate_data

if TYPE_CHECKING:
    from fawkes.mechanism.koala_mr import ResizeParams
    from fawkes.mechanism.settings import Settings

F = TypeVar("F", bound=Callable)



class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bind: str = Field(default="127.0.0.1", description="the address /metrics and the dashboard listen on "
                      "(an IP address or localhost; not loopback: reachable without authentication)")
    port: int = Field(default=9464, ge=0, le=65535, description="their TCP port (0: any free port)")
    dashboard: StrictBool = Field(default=True, description="serve the read-only web dashboard next to /metrics "
                                  "(docs/dashboard.md)")

    @field_validator("bind")
    @classmethod
    def _ip(cls, v: str) -> str:
        if v != "localhost":
            ipaddress.ip_address(v)  # ValueError -> pydantic error naming metrics.bind
        return v


class ApiConfig(BaseModel):
    """The teams' HTTP API (``docs/api.md``): served by the same server as /metrics and the dashboard, on
    ``metrics.bind`` and ``metrics.port``; every request needs a token (``fawkes token create``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool = Field(default=False, description="serve the authenticated API under /api/v1/ "
                                "(off: those paths answer 404)")
    rate_per_min: int = Field(default=60, ge=1, le=100_000, strict=True,
                              description="requests a token may make per minute (beyond: 429)")
    burst: int = Field(default=20, ge=1, le=100_000, strict=True,
                       description="requests a token may make at once before rate_per_min applies")
    max_body_bytes: int = Field(default=65536, ge=64, le=16 << 20, strict=True,
                                description="the largest request body, bytes (beyond: 413, unread)")
    tls_cert: Path | None = Field(default=None, description="a PEM certificate (chain): serve https, /metrics and "
                                  "the dashboard too (relative: to the config file; null: plain http, for "
                                  "localhost or behind a TLS reverse proxy)")
    tls_key: Path | None = Field(default=None, description="the certificate's PEM private key (with tls_cert)")

    @model_validator(mode="after")
    def _pair(self) -> ApiConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        return self


_MAX_KEEP_S = 100 * 365 * 86400.0  # fawkes.cli.params.MAX_KEEP_S


class RetentionConfig(BaseModel):
    """How long the state keeps samples, events and decisions (``None``: forever).

    Samples the mechanism still reads (the last ``max(T, T_idle)``) are never deleted,
    whatever ``samples_s`` says: see :func:`fawkes.coordinator.retention.prune`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    samples_s: float | None = Field(default=7 * 86400.0, gt=0, le=_MAX_KEEP_S, allow_inf_nan=False,
                                    description="delete samples older than this, seconds (never those the "
                                                "mechanism still reads; null: keep all)")
    events_s: float | None = Field(default=30 * 86400.0, gt=0, le=_MAX_KEEP_S, allow_inf_nan=False,
                                   description="delete events older than this, seconds (null: keep all)")
    decisions_keep: int | None = Field(default=10080, ge=1, le=2**63 - 1,
                                       description="keep the newest this many decisions (null: keep all)")
    every_s: float = Field(default=3600.0, ge=1, le=MAX_SECONDS, allow_inf_nan=False,
                           description="seconds between two prunes")


_MAX_TIMEOUT = 30 * 86400.0


def _timeout(default: float | None, what: str):
    return Field(default=default, gt=0, le=_MAX_TIMEOUT, allow_inf_nan=False, strict=True, description=what)


class TimeoutsConfig(BaseModel):
    """How long the reconciler lets a node stay in a state, and lets one operation wait (seconds).

    The node-state defaults are :data:`fawkes.store.lifecycle.NODE_TIMEOUTS`.  Every value is a
    finite number of seconds, greater than 0 and at most 30 days (a string, NaN or 1e30 is refused).
    See :class:`fawkes.coordinator.reconcile.Reconciler` for what happens when one runs out.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    requested: float = _timeout(NODE_TIMEOUTS[NodeState.REQUESTED],
                                "a REQUESTED node no operation picked up for this long is marked failed")
    provisioning: float = _timeout(NODE_TIMEOUTS[NodeState.PROVISIONING],
                                   "a PROVISIONING node that reality does not show up (daemons running and "
                                   "registered) after this long is marked failed; also bounds its add operation")
    draining: float = _timeout(NODE_TIMEOUTS[NodeState.DRAINING],
                               "a node DRAINING for this long is reported (warning event); a DataNode is never "
                               "stopped before HDFS reports it decommissioned")
    op: float = _timeout(600.0, "the longest one driver operation (deploy, load, add, save, teardown) waits")
    drain: float = _timeout(60.0, "how long one DP operation waits for HDFS before handing its worker back "
                                  "(the node stays DRAINING; every step asks HDFS again)")
    graceful: float = _timeout(120.0, "shrink_mode graceful: how long a TR node's decommissioned Spark worker "
                                      "may finish its running tasks before it is stopped (FP) anyway")


class SuspendConfig(BaseModel):
    """``shrink_mode: suspend``: what a suspended worker keeps (BIG-C's minimal footprint: 1 % CPU and
    64 MB), and whether it is frozen outright as well (:mod:`fawkes.coordinator.suspend`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cpu_percent: float = Field(default=1.0, ge=1.0, le=100.0, allow_inf_nan=False, strict=True,
                               description="CPU a suspended worker keeps, % of one CPU (the kernel's least is 1 %)")
    memory_mb: int = Field(default=64, ge=0, le=1 << 20, strict=True,
                           description="cgroup v2 memory.high of a suspended worker, MB (0: memory left alone)")
    freeze: StrictBool = Field(default=False, description="freeze it outright as well (v1 freezer, v2 cgroup.freeze)")

    def footprint(self):
        from fawkes.ssh.cgroups import Footprint

        return Footprint(cpu_percent=self.cpu_percent, memory_mb=self.memory_mb, freeze=self.freeze)


_SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class PoolConfig(BaseModel):
    """Where the coordinator gets more hosts when every cluster is short (:mod:`fawkes.coordinator.pool`).

    Hosts of an allocation are reached over SSH as ``user`` with ``key_file`` (the inventory's
    ``known_hosts`` checks their keys) at their SLURM NodeAddr, with ``cores``/``memory`` = the
    node's CPUs and RealMemory; fawkes works under ``work_dir`` there.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    provider: Literal["slurm"] = Field(description="where allocations come from (slurm only)")
    partition: str = Field(pattern=_SLURM_NAME, description="the SLURM partition to allocate in")
    max_nodes: int = Field(ge=1, le=10000, strict=True, description="at most this many nodes held from SLURM at once")
    idle_s: float = Field(default=300.0, gt=0, le=_MAX_TIMEOUT, allow_inf_nan=False,
                          description="give an allocation back after its hosts are free this long, seconds")
    nodes_per_request: int = Field(default=1, ge=1, le=10000, strict=True,
                                   description="nodes asked for by one allocation (at most max_nodes)")
    time_limit_min: int | None = Field(default=None, ge=1, le=366 * 24 * 60, strict=True,
                                       description="an allocation's time limit, minutes (null: the partition's)")
    job_name: str = Field(default="fawkes-pool", pattern=_SLURM_NAME, description="the SLURM job name of an allocation")
    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$",
                      description="the SSH user on an allocation's hosts")
    port: int = Field(default=22, ge=1, le=65535, strict=True, description="the SSH port on an allocation's hosts")
    key_file: Path | None = Field(default=None, description="the SSH key for them (relative: to the config file)")
    work_dir: str = Field(default="/var/lib/fawkes", pattern=r"^/[A-Za-z0-9_./+-]*$", max_length=1024,
                          description="where fawkes works on an allocation's hosts")
    slurm_conf: Path | None = Field(default=None, description="SLURM_CONF for sbatch/squeue/sinfo/scancel (null: "
                                    "theirs; relative: to the config file; must be a file)")

    @model_validator(mode="after")
    def _per_request(self) -> PoolConfig:
        if self.nodes_per_request > self.max_nodes:
            raise ValueError(f"nodes_per_request ({self.nodes_per_request}) must not exceed max_nodes "
                             f"({self.max_nodes})")
        return self


_SAVE_PATH = r"^/[A-Za-z0-9_./+-]*$"


def _save_path(v: str | None) -> str | None:
    """An absolute path with no ``..`` (and no shell character, space, newline or NUL: the pattern)."""
    if v is not None and ".." in v.split("/"):
        raise ValueError(f"{v[:80]!r}: no '..' in the path")
    return None if v is None else v.rstrip("/") or "/"


class ClusterConfig(BaseModel):
    """Settings of one MR-cluster by name (``clusters:`` in the config), over the config-wide ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    idle_timeout_s: float | Literal["never"] | None = Field(
        default=None, description="T_idle of this cluster: seconds or never (None: the config's, else the preset's)")
    save_to: str | None = Field(default=None, pattern=_SAVE_PATH, max_length=1024,
                                description="where this cluster's output is saved when it leaves")
    max_nodes: int | None = Field(default=None, ge=1, le=1_000_000, strict=True,
                                  description="its ceiling: it never holds more nodes (null: none; a minimum above it "
                                              "is never admitted)")
    max_share: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False, strict=True,
                                    description="its share ceiling: it never holds more than this fraction of the "
                                                "pool's capacity, rounded down, at least 1 node; with max_nodes, the "
                                                "lower (null: none)")
    on_idle: Literal["release", "hibernate"] | None = Field(
        default=None, description="what this cluster does after T_idle idle: release | hibernate (null: the "
                                  "config's on_idle; docs/scale-to-zero.md)")
    max_running_jobs: int | None = Field(default=None, ge=1, le=1000, strict=True,
                                         description="jobs this cluster runs at once (null: the config's)")

    @field_validator("idle_timeout_s", mode="before")
    @classmethod
    def _idle(cls, v):
        from fawkes.mechanism.settings import idle_seconds

        return None if v is None else idle_seconds(v)

    _save = field_validator("save_to")(lambda cls, v: _save_path(v))


class TeamConfig(BaseModel):
    """A team's quota over its MR-clusters (``teams:`` in the config; :mod:`fawkes.mechanism.ceilings`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    clusters: list[str] = Field(min_length=1, max_length=10_000, description="the team's MR-cluster names")
    max_nodes: int = Field(ge=1, le=1_000_000, strict=True, description="nodes its clusters may hold together "
                           "(their minima still hold; a request whose minimum would pass it waits)")

    @field_validator("clusters")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        from fawkes.store.validate import NAME_RE

        for k in v:
            if not isinstance(k, str) or not NAME_RE.fullmatch(k):
                raise ValueError(f"{str(k)[:40]!r} is not a cluster name")
        return v


class WebhookConfig(BaseModel):
    """One webhook (``notify:`` in the config; ``docs/notifications.md``): a signed JSON POST for each
    chosen event, from a background queue, retried with exponential back-off."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(max_length=2048, description="where to POST: http:// or https://, a host, no user or "
                     "password (logged as scheme://host:port only)")
    events: list[Literal["admitted", "grown", "shrunk", "drain_stuck", "host_failed", "job_failed", "hibernated",
                         "woken"]] = Field(
        min_length=1, max_length=8, description="the events to send: admitted, grown, shrunk, drain_stuck, "
                                                "host_failed, job_failed, hibernated, woken")
    secret_file: Path = Field(description="a file holding the HMAC-SHA256 key, one line of 16 to 4096 bytes "
                              "(relative: to the config file; never logged)")
    timeout_s: float = Field(default=5.0, gt=0, le=300, allow_inf_nan=False, strict=True,
                             description="seconds one attempt may wait to connect, and for each read")
    retries: int = Field(default=5, ge=0, le=100, strict=True,
                         description="attempts after the first (no answer, 408, 425, 429, 5xx)")
    backoff_s: float = Field(default=1.0, gt=0, le=3600, allow_inf_nan=False, strict=True,
                             description="seconds before the first retry; doubled for each next one")
    backoff_max_s: float = Field(default=300.0, gt=0, le=86400, allow_inf_nan=False, strict=True,
                                 description="the longest wait between two attempts, seconds")
    queue: int = Field(default=1000, ge=1, le=100_000, strict=True,
                       description="notifications waiting at most (beyond: dropped and counted)")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        from fawkes.coordinator.notify import check_url

        return check_url(v)

    @field_validator("events")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("an event is named twice")
        return v

    @model_validator(mode="after")
    def _backoff(self) -> WebhookConfig:
        if self.backoff_max_s < self.backoff_s:
            raise ValueError(f"backoff_max_s ({self.backoff_max_s:g}) must not be below backoff_s "
                             f"({self.backoff_s:g})")
        return self


class ScheduleConfig(BaseModel):
    """A scheduled minimum (``schedules:``; ``docs/mechanism.md``, scheduled minima): from each time
    ``cron`` fires, for ``for``, the cluster's minimum is at least ``min_core`` nodes (overlapping
    schedules: the largest); ``fawkes plan --at TIME`` shows it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    cluster: str = Field(description="the MR-cluster's name")
    cron: str = Field(max_length=200, description="when it starts: five crontab fields, minute hour day month "
                      "day-of-week (APScheduler's CronTrigger; day of week: * or names such as mon-fri)")
    min_core: int = Field(ge=1, le=1_000_000, strict=True, description="the cluster's minimum while it lasts, "
                          "nodes (above its own minimum: grown as the policy's grow type, never core nodes)")
    duration_s: float = Field(alias="for", description="how long it lasts: seconds, or 3h, 90m, 1d12h, 45s "
                              "(at most 366 days)")
    timezone: str = Field(default="UTC", description="the time zone cron is read in (an IANA name)")

    @field_validator("cluster")
    @classmethod
    def _name(cls, v: str) -> str:
        from fawkes.store.validate import NAME_RE

        if not NAME_RE.fullmatch(v):
            raise ValueError(f"{v[:40]!r} is not a cluster name")
        return v

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        from fawkes.mechanism.schedules import check_cron

        return check_cron(v)

    @field_validator("duration_s", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float:
        from fawkes.mechanism.schedules import duration_seconds

        return duration_seconds(v)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        from fawkes.mechanism.schedules import check_timezone

        return check_timezone(v)

    def as_setting(self) -> tuple[str, str, int, float, str]:
        """The ``Settings.schedules`` item of this schedule."""
        return (self.cluster, self.cron, self.min_core, self.duration_s, self.timezone)


class CoordinatorConfig(BaseModel):
    """The validated coordinator config; ``source`` is the file it came from (None: defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    state: str | None = Field(default=None, description="the state: a SQLite file (relative: to this file), "
                              "sqlite:///path or postgresql://user@host/db (null: $FAWKES_HOME/fawkes.db or "
                              "~/.local/share/fawkes/fawkes.db)")
    inventory: Path | None = Field(default=None, description="the inventory file (relative: to this file); "
                                   "required by coordinator run unless --inventory is given")
    policy: str = Field(default="td-damped", min_length=1, description="a policy preset name (policies/) or a "
                        "preset file (relative: to this file); td-damped: TD with TC growth, damped (td-tc: the "
                        "thesis' setting applied literally)")
    period: float = Field(default=60.0, ge=1, le=MAX_SECONDS, allow_inf_nan=False,
                          description="T, seconds between two control steps (set: over the preset's)")
    sample_period: float = Field(default=5.0, ge=0.1, le=MAX_SECONDS, allow_inf_nan=False,
                                 description="seconds between two samples, at most period (set: over the preset's)")
    metrics: MetricsConfig = Field(default=MetricsConfig(), description="Prometheus /metrics and the dashboard")
    api: ApiConfig = Field(default=ApiConfig(), description="the teams' authenticated HTTP API (docs/api.md; "
                           "default: off)")
    log_format: Literal["text", "json"] = Field(default="text", description="the coordinator's log lines")
    cluster_options: dict[str, str] = Field(default_factory=dict, description="framework tunables for every "
                                            "cluster (the templates' DEFAULT_OPTIONS): sizes left out follow the "
                                            "hosts' memory, ports are the cluster's block of port_range, "
                                            "job_python the jobs' Python (docs/frameworks.md, On real hosts)")
    max_running_jobs: int = Field(default=1, ge=1, le=1000, strict=True,
                                  description="jobs of one MR-cluster dispatched at once, the others queued FIFO (a "
                                              "cluster's own under clusters:); with more than 1, size "
                                              "executor_memory so that many executors fit a worker")
    host_grace: float = Field(default=30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                              description="seconds without an SSH answer before a host is failed; the hosts are "
                                          "checked (one SSH command each) every quarter of it, at most every 30 s, "
                                          "so a host that stops answering is failed within about 1.5 host_grace")
    parallel_operations: int = Field(default=4, ge=1, le=256, strict=True,
                                     description="operations on hosts (deploy, grow, shrink, cleanup, recovery, "
                                                 "config drift) run at once, each for one cluster; raise it for a "
                                                 "large pool: they mostly wait on SSH (docs/operations.md, Scale)")
    retention: RetentionConfig = Field(default=RetentionConfig(), description="what the coordinator prunes "
                                       "every every_s")
    timeouts: TimeoutsConfig = Field(default=TimeoutsConfig(), description="seconds a node may stay in a state, "
                                     "and one operation may wait")
    #: how TR nodes leave: "fp" stops the worker (its running tasks are re-run elsewhere); "graceful"
    #: decommissions it (Spark: no new tasks, running ones finish, shuffle/RDD blocks migrate), then
    #: stops it, after timeouts.graceful at most; "suspend" suspends its worker through cgroups and lends
    #: the host to the next cluster that grows (BIG-C's IP, ``suspend`` below).  TC nodes always leave by DP.
    shrink_mode: Literal["fp", "graceful", "suspend"] | None = Field(
        default=None, description="how a TR node leaves: fp | graceful | suspend (null: the framework kind's "
                                  "default; TC nodes always leave by DP)")  # B-6
    suspend: SuspendConfig = Field(default=SuspendConfig(), description="shrink_mode suspend: the footprint kept")
    pool: PoolConfig | None = Field(default=None, description="grow the pool with SLURM allocations "
                                    "(docs/slurm.md; null: the inventory's hosts only)")
    opportunistic: OpportunisticConfig = Field(default=OpportunisticConfig(), description="UBIS: lend measured "
                                               "slack (docs/mechanism.md); default: nothing lent")  # issue 12
    idle_timeout_s: float | Literal["never"] | None = Field(
        default=None, description="T_idle of every cluster: seconds, or never (a cluster stays until released); "
                                  "null: the preset's, else T")
    #: never inside a cluster's directory, which teardown wipes.
    save_to: str | None = Field(default=None, pattern=_SAVE_PATH, max_length=1024,
                                description="where a leaving cluster's output is saved on its master host: "
                                            "<save_to>/<cluster>/<release id> (null: <the host's work dir>/saved)")
    #: scale to zero (docs/scale-to-zero.md): after T_idle idle a cluster is released (its name freed), or
    #: hibernates (its output saved to save_to, every node released, the name kept: the next job wakes it)
    on_idle: Literal["release", "hibernate"] = Field(
        default="release", description="what a cluster does after T_idle idle: release, or hibernate (output "
                                       "saved to save_to, every node released; the next job submitted to it "
                                       "re-deploys it and restores the output); needs a save_to")
    clusters: dict[str, ClusterConfig] = Field(default_factory=dict, description="per MR-cluster by name, over "
                                               "idle_timeout_s, save_to and on_idle")
    teams: dict[str, TeamConfig] = Field(default_factory=dict, description="per team by name: a quota over its "
                                         "clusters (docs/api.md, ceilings)")
    schedules: list[ScheduleConfig] = Field(default_factory=list, max_length=1000, description="scheduled "
                                            "minima: a cluster's minimum raised on a cron schedule for a while "
                                            "(docs/mechanism.md; default: none)")
    notify: list[WebhookConfig] = Field(default_factory=list, max_length=32, description="webhooks on chosen "
                                        "events (docs/notifications.md; default: none)")
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("idle_timeout_s", mode="before")
    @classmethod
    def _idle(cls, v):
        from fawkes.mechanism.settings import idle_seconds

        return None if v is None else idle_seconds(v)

    _save = field_validator("save_to")(lambda cls, v: _save_path(v))

    @field_validator("teams", mode="before")
    @classmethod
    def _team_names(cls, v: object) -> object:
        from fawkes.store.validate import NAME_RE

        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str) or not NAME_RE.fullmatch(k):
                    raise ValueError(f"{str(k)[:40]!r} is not a team name")
        return v

    @field_validator("clusters", mode="before")
    @classmethod
    def _cluster_names(cls, v: object) -> object:
        from fawkes.store.validate import NAME_RE

        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str) or not NAME_RE.fullmatch(k):
                    raise ValueError(f"{str(k)[:40]!r} is not a cluster name")
        return v

    def max_running_jobs_of(self, cluster: str) -> int:
        """Jobs ``cluster`` runs at once: its own setting, else the config's."""
        c = self.clusters.get(cluster)
        return c.max_running_jobs if c is not None and c.max_running_jobs is not None else self.max_running_jobs

    def save_to_of(self, cluster: str) -> str | None:
        """Where ``cluster``'s output goes when it leaves (None: the master host's default)."""
        c = self.clusters.get(cluster)
        return c.save_to if c is not None and c.save_to is not None else self.save_to

    def hibernates(self, cluster: str) -> bool:
        """Whether ``cluster`` hibernates after T_idle idle instead of being released (``on_idle``)."""
        c = self.clusters.get(cluster)
        return (c.on_idle if c is not None and c.on_idle is not None else self.on_idle) == "hibernate"

    @model_validator(mode="after")
    def _hibernate_saves_somewhere_shared(self) -> CoordinatorConfig:
        """A hibernating cluster's output is restored on the master of its next incarnation, which may be
        another host: it must be saved to storage the admin names (``save_to``), not a host's own work dir."""
        if self.on_idle == "hibernate" and self.save_to is None:
            raise ValueError("on_idle: hibernate needs a save_to (storage every master reaches) to restore from")
        for n, c in self.clusters.items():
            if c.on_idle == "hibernate" and self.save_to_of(n) is None:
                raise ValueError(f"clusters.{n}.on_idle: hibernate needs a save_to (storage every master reaches) "
                                 "to restore from")
        return self

    @field_validator("cluster_options", mode="before")
    @classmethod
    def _known_options(cls, v: object) -> object:
        """Every option typed and checked when the config is read (fawkes.frameworks.render.check_option):
        a newline, a shell character or 'abc' for a number is refused here, not at render time."""
        from fawkes.frameworks.render import DEFAULT_OPTIONS, check_option

        if not isinstance(v, dict):
            return v
        unknown = sorted(str(k) for k in v if k not in DEFAULT_OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(DEFAULT_OPTIONS))}")
        return {k: check_option(k, x) for k, x in v.items()}

    @field_validator("sample_period")
    @classmethod
    def _sample_within_period(cls, v: float, info: ValidationInfo) -> float:  # named at sample_period's line
        period = info.data.get("period")
        if period is not None and v > period:
            raise ValueError(f"sample_period ({v:g}) must not exceed period ({period:g})")
        return v

    @field_validator("state")
    @classmethod
    def _state_given(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("empty: leave state out for the default, or name a file or URL")
        return v

    def state_url(self) -> str:
        """The state URL of this config (its ``state`` key or the default file)."""
        if self.state is None:
            return default_state_url()
        from fawkes.store.db import normalize_url  # SQLAlchemy's URL parser: only where a state is named

        return normalize_url(self.state, source=str(self.source) if self.source else None)


def fawkes_home() -> Path | None:
    home = os.environ.get("FAWKES_HOME")
    return Path(home).expanduser() if home else None


def default_state_url() -> str:
    """``sqlite:///$FAWKES_HOME/fawkes.db`` or ``sqlite:///~/.local/share/fawkes/fawkes.db``."""
    home = fawkes_home()
    base = home if home else Path.home() / ".local" / "share" / "fawkes"
    from fawkes.store.db import normalize_url

    return normalize_url(str(base / "fawkes.db"))


def default_config_path() -> Path:
    home = fawkes_home()
    return (home / "config.yaml") if home else Path.home() / ".config" / "fawkes" / "config.yaml"


def load_config(path: str | Path | None = None) -> CoordinatorConfig:
    """Load and validate the config at ``path``; ``None``: the default file if it exists.

    A named file must exist.  Relative ``inventory``/``state`` paths are taken relative
    to the file's directory.  Raises :class:`ConfigError` (file, line, key).
    """
    if path is None:
        path = chosen_config()  # the running command's --config
    explicit = path is not None or bool(os.environ.get("FAWKES_CONFIG"))
    p = Path(path if path is not None else os.environ.get("FAWKES_CONFIG") or default_config_path()).expanduser()
    if not explicit and not p.exists():
        return CoordinatorConfig()
    data, lines = load_yaml(p)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(p), f"expected a mapping of settings, got {type(data).__name__}", line=lines.get(()))
    if "source" in data:
        raise ConfigError(str(p), "unknown field", line=lines.get(("source",)), field="source")
    cfg = validate_data(p, data, lines, CoordinatorConfig)
    base = p.resolve().parent
    updates: dict = {"source": p}
    if cfg.inventory is not None and not cfg.inventory.is_absolute():
        updates["inventory"] = base / cfg.inventory.expanduser()
    if cfg.pool is not None:
        rel = {k: base / v.expanduser() for k in ("key_file", "slurm_conf")
               if (v := getattr(cfg.pool, k)) is not None and not v.is_absolute()}
        if rel:
            updates["pool"] = cfg.pool.model_copy(update=rel)
        conf = rel.get("slurm_conf", cfg.pool.slurm_conf)
        if conf is not None and not conf.is_file():
            raise ConfigError(str(p), f"{conf} is not a file", line=lines.get(("pool", "slurm_conf")),
                              field="pool.slurm_conf")
    _check_maps_only(p, cfg, lines)
    _check_schedules(p, cfg, lines)
    tls = {k: base / v.expanduser() for k in ("tls_cert", "tls_key")
           if (v := getattr(cfg.api, k)) is not None and not v.is_absolute()}
    if tls:
        updates["api"] = cfg.api.model_copy(update=tls)
    for k in ("tls_cert", "tls_key"):
        f = tls.get(k, getattr(cfg.api, k))
        if f is not None and not f.is_file():
            raise ConfigError(str(p), f"{f} is not a file", line=lines.get(("api", k)), field=f"api.{k}")
    if cfg.notify:
        updates["notify"] = _notify_secrets(p, cfg, lines, base)
    if cfg.policy.endswith((".yaml", ".yml")) or "/" in cfg.policy:  # a preset file: relative to this file too
        updates["policy"] = str(base / Path(cfg.policy).expanduser())
    if cfg.state is not None:
        from fawkes.store.db import normalize_url

        if "://" not in cfg.state and not cfg.state.startswith("sqlite:"):
            updates["state"] = str(base / Path(cfg.state).expanduser())
        normalize_url(updates.get("state", cfg.state), source=f"{p}:{lines.get(('state',))}")
    return cfg.model_copy(update=updates)


def _check_schedules(p: Path, cfg: CoordinatorConfig, lines: dict) -> None:
    """A scheduled minimum above the cluster's ``max_nodes`` or its team's quota could never hold:
    refused, naming ``schedules[i].min_core``."""
    for i, s in enumerate(cfg.schedules):
        c = cfg.clusters.get(s.cluster)
        why = None
        if c is not None and c.max_nodes is not None and s.min_core > c.max_nodes:
            why = f"{s.min_core} > clusters.{s.cluster}.max_nodes ({c.max_nodes})"
        for team, q in sorted(cfg.teams.items()):
            if why is None and s.cluster in q.clusters and s.min_core > q.max_nodes:
                why = f"{s.min_core} > team {team}'s quota teams.{team}.max_nodes ({q.max_nodes})"
        if why is not None:
            raise ConfigError(str(p), why, line=lines.get(("schedules", i, "min_core")),
                              field=f"schedules[{i}].min_core")


def _notify_secrets(p: Path, cfg: CoordinatorConfig, lines: dict, base: Path) -> list[WebhookConfig]:
    """Every webhook's ``secret_file`` made absolute and read (never shown), or one line naming it."""
    from fawkes.coordinator.notify import read_secret

    out = []
    for i, t in enumerate(cfg.notify):
        f = t.secret_file.expanduser()
        f = f if f.is_absolute() else base / f
        try:
            read_secret(f)
        except ValueError as exc:
            raise ConfigError(str(p), str(exc), line=lines.get(("notify", i, "secret_file")),
                              field=f"notify[{i}].secret_file") from None
        out.append(t.model_copy(update={"secret_file": f}))
    return out


def _check_maps_only(p: Path, cfg: CoordinatorConfig, lines: dict) -> None:
    """UBIS' ``maps_only`` live needs a framework that confines an opportunistic worker to map tasks
    (each kind declares it: ``FrameworkDriver.map_only_workers``); refused otherwise, naming the field."""
    opp = cfg.opportunistic
    keys = [("opportunistic", "clusters", n) for n, m in opp.clusters.items() if m == "maps_only"]
    keys += [("opportunistic", "default")] if opp.default == "maps_only" else []
    if not keys:
        return
    from fawkes.frameworks.base import map_only_refusal

    why = map_only_refusal()
    if why is not None:
        raise ConfigError(str(p), why, line=lines.get(keys[0]), field=".".join(keys[0]))


def resolve_state_url(explicit: str | None = None, config_path: str | Path | None = None) -> str:
    """The state URL a command uses: ``explicit`` (``--state``/``FAWKES_STATE``), else the config's
    (``config_path``, else the command's ``--config``, else ``FAWKES_CONFIG`` or the default file)."""
    explicit = explicit or os.environ.get("FAWKES_STATE")
    if explicit:
        from fawkes.store.db import normalize_url

        return normalize_url(explicit, source="--state/FAWKES_STATE")
    return load_config(config_path if config_path is not None else chosen_config()).state_url()


_CONFIG_KEY = "fawkes.config"


def _remember_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.meta[_CONFIG_KEY] = value  # meta is shared by the whole command chain
    return value


def chosen_config() -> str | None:
    """The ``--config FILE`` (or ``FAWKES_CONFIG``) of the running command, None without one (then
    :func:`load_config` takes the default file)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(_CONFIG_KEY)


def state_option(f: F) -> F:
    """Click decorator of every command that reads the state: ``--state URL`` (env ``FAWKES_STATE``),
    passed to the command as ``state``, and ``--config FILE`` (env ``FAWKES_CONFIG``), whose ``state``
    key names the state when ``--state`` does not; read back with :func:`chosen_config` (and by
    :func:`resolve_state_url`/:func:`open_store` by themselves)."""
    f = click.option("--config", "config_path", metavar="FILE", envvar="FAWKES_CONFIG", default=None,
                     expose_value=False, callback=_remember_config,
                     help="Coordinator config: its state (unless --state), inventory, policy (default: "
                          "$FAWKES_HOME/config.yaml or ~/.config/fawkes/config.yaml if it exists).")(f)
    return click.option("--state", "state", metavar="URL", envvar="FAWKES_STATE", default=None,
                        help="State database URL or SQLite file (default: from the config, else "
                             "$FAWKES_HOME/fawkes.db or ~/.local/share/fawkes/fawkes.db).")(f)


def open_store(state: str | None, config_path: str | Path | None = None, *, create: bool = False):
    """Open the :class:`fawkes.store.Store` a command should use (see :func:`resolve_state_url`).

    Only commands that may start a state (``framework add``) pass ``create=True``: every other
    command needs an existing state and, without one, fails in one line creating nothing."""
    from fawkes.lazy import import_frozen

    store = import_frozen("fawkes.store.api")  # SQLAlchemy and the tables, imported once with the GC paused
    return store.Store(resolve_state_url(state, config_path), create=create)


# ------------------------------------------------------------------ the control loop's policy of a config
def loop_policy(cfg: CoordinatorConfig) -> tuple[Settings, ResizeParams | None]:
    """The loop's settings (and chapter-2 runner, if any) of a coordinator config: its policy
    preset, with the config's ``period`` and ``sample_period`` overriding the preset's when set."""
    from fawkes.presets import loop_policy as of_policy

    overrides = {}
    if "period" in cfg.model_fields_set:
        overrides["period_s"] = cfg.period
    if "sample_period" in cfg.model_fields_set:
        overrides["sample_period_s"] = cfg.sample_period
    if cfg.idle_timeout_s is not None:
        overrides["idle_timeout_s"] = cfg.idle_timeout_s
    per = {name: c.idle_timeout_s for name, c in cfg.clusters.items() if c.idle_timeout_s is not None}
    if per:
        overrides["idle_timeout_by_cluster"] = tuple(sorted(per.items()))
    ceilings = {name: c.max_nodes for name, c in cfg.clusters.items() if c.max_nodes is not None}
    if ceilings:
        overrides["max_nodes_by_cluster"] = tuple(sorted(ceilings.items()))
    shares = {name: c.max_share for name, c in cfg.clusters.items() if c.max_share is not None}
    if shares:
        overrides["max_share_by_cluster"] = tuple(sorted(shares.items()))
    if cfg.schedules:
        overrides["schedules"] = tuple(s.as_setting() for s in cfg.schedules)
    if cfg.teams:
        overrides["team_quotas"] = tuple((t, tuple(q.clusters), q.max_nodes) for t, q in sorted(cfg.teams.items()))
    from fawkes.errors import FawkesError

    try:
        return of_policy(cfg.policy, **overrides)
    except ConfigError:
        raise  # names the preset file already
    except FawkesError as exc:  # an unknown preset name: one line naming the config and its key
        raise ConfigError(str(cfg.source or "config"), str(exc), field="policy") from None


def mechanism_settings(cfg: CoordinatorConfig) -> Settings:
    """The mechanism settings of a coordinator config (see :func:`loop_policy`)."""
    return loop_policy(cfg)[0]
