"""The coordinator config file and where the state lives.

Config file (YAML, every key optional, unknown keys refused)::

    state: sqlite:////var/lib/fawkes/fawkes.db   # or postgresql://user@host/db, or a file path
    inventory: inventory.yaml                     # relative paths: relative to this file
    policy: td-tc                                 # preset name (policies/) or path
    period: 60                                    # T, seconds
    sample_period: 5                              # seconds, <= period
    metrics: {bind: 127.0.0.1, port: 9464}
    log_format: text                              # text | json
    cluster_options: {heartbeat_s: "1"}           # framework tunables (templates' DEFAULT_OPTIONS)
    host_grace: 30                                # seconds without an SSH answer before a host is failed
    retention:                                    # what the coordinator prunes every every_s (null: keep all)
      samples_s: 604800                           # samples older than 7 days (never the mechanism's window)
      events_s: 2592000                           # events older than 30 days
      decisions_keep: 10080                       # the newest 10080 decisions (7 days at T = 60 s)
      every_s: 3600
    timeouts:                                     # seconds (finite, > 0, at most 30 days)
      requested: 120                              # a node not picked up for this long is failed
      provisioning: 600                           # a node not up (daemons running and registered) is failed
      draining: 3600                              # a DP still unfinished is reported (nothing is ever stopped)
      op: 600                                     # the longest one driver operation waits (deploy, add, ...)
      drain: 60                                   # one DP operation's wait before it hands its worker back
    shrink_mode: fp                               # fp | graceful | suspend (how a TR node leaves; default: the framework kind's, spark-hdfs fp)
    suspend: {cpu_percent: 1, memory_mb: 64, freeze: false}   # shrink_mode suspend: the footprint kept
    pool:                                         # grow the pool with SLURM allocations (docs/slurm.md)
      provider: slurm
      partition: batch                            # where to allocate
      max_nodes: 8                                # at most this many nodes held from SLURM at once
      idle_s: 300                                 # give an allocation back after its hosts are free this long
      slurm_conf: /etc/slurm/slurm.conf           # optional: SLURM_CONF for the SLURM commands
    idle_timeout_s: 600                           # T_idle: seconds, or never (default: the preset's, else T)
    save_to: /srv/fawkes/saved                    # a leaving cluster's output: <save_to>/<cluster>/<id> on its master
    clusters:                                     # per MR-cluster, over the two above
      etl: {idle_timeout_s: never, save_to: /shared/etl}
    opportunistic:                                # UBIS: lend measured slack (docs/mechanism.md); default: nothing lent
      clusters: {etl: accept, bi: refuse}         # per MR-cluster: accept | refuse (maps_only: where every framework kind confines a worker to map tasks)
      default: refuse                             # the others
      t_alloc: 0.9                                # lend a host while its use is under t_alloc x capacity

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
from typing import Literal, TypeVar

import click
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator

from fawkes.errors import ConfigError
from fawkes.mechanism.opportunistic import OpportunisticConfig
from fawkes.mechanism.settings import MAX_SECONDS
from fawkes.store.db import normalize_url
from fawkes.store.lifecycle import NODE_TIMEOUTS, NodeState
from fawkes.yamlfile import load_yaml, validate_data

F = TypeVar("F", bound=Callable)



class MetricsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bind: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)
    dashboard: StrictBool = True  # serve the read-only web dashboard next to /metrics (docs/dashboard.md)

    @field_validator("bind")
    @classmethod
    def _ip(cls, v: str) -> str:
        if v != "localhost":
            ipaddress.ip_address(v)  # ValueError -> pydantic error naming metrics.bind
        return v


_MAX_KEEP_S = 100 * 365 * 86400.0  # fawkes.cli.params.MAX_KEEP_S


class RetentionConfig(BaseModel):
    """How long the state keeps samples, events and decisions (``None``: forever).

    Samples the mechanism still reads (the last ``max(T, T_idle)``) are never deleted,
    whatever ``samples_s`` says: see :func:`fawkes.coordinator.retention.prune`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    samples_s: float | None = Field(default=7 * 86400.0, gt=0, le=_MAX_KEEP_S, allow_inf_nan=False)
    events_s: float | None = Field(default=30 * 86400.0, gt=0, le=_MAX_KEEP_S, allow_inf_nan=False)
    decisions_keep: int | None = Field(default=10080, ge=1, le=2**63 - 1)
    every_s: float = Field(default=3600.0, ge=1, le=MAX_SECONDS, allow_inf_nan=False)


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
    provider: Literal["slurm"]
    partition: str = Field(pattern=_SLURM_NAME)
    max_nodes: int = Field(ge=1, le=10000, strict=True)
    idle_s: float = Field(default=300.0, gt=0, le=_MAX_TIMEOUT, allow_inf_nan=False)
    nodes_per_request: int = Field(default=1, ge=1, le=10000, strict=True)
    time_limit_min: int | None = Field(default=None, ge=1, le=366 * 24 * 60, strict=True)
    job_name: str = Field(default="fawkes-pool", pattern=_SLURM_NAME)
    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
    port: int = Field(default=22, ge=1, le=65535, strict=True)
    key_file: Path | None = None
    work_dir: str = Field(default="/var/lib/fawkes", pattern=r"^/[A-Za-z0-9_./+-]*$", max_length=1024)
    slurm_conf: Path | None = None  # SLURM_CONF for sbatch/squeue/sinfo/scancel (default: theirs)

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

    @field_validator("idle_timeout_s", mode="before")
    @classmethod
    def _idle(cls, v):
        from fawkes.mechanism.settings import idle_seconds

        return None if v is None else idle_seconds(v)

    _save = field_validator("save_to")(lambda cls, v: _save_path(v))


class CoordinatorConfig(BaseModel):
    """The validated coordinator config; ``source`` is the file it came from (None: defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    state: str | None = None
    inventory: Path | None = None
    policy: str = Field(default="td-tc", min_length=1)
    period: float = Field(default=60.0, ge=1, le=MAX_SECONDS, allow_inf_nan=False)  # the mechanism's bounds
    sample_period: float = Field(default=5.0, ge=0.1, le=MAX_SECONDS, allow_inf_nan=False)
    metrics: MetricsConfig = MetricsConfig()
    log_format: Literal["text", "json"] = "text"
    cluster_options: dict[str, str] = Field(default_factory=dict)  # framework tunables for every cluster
    host_grace: float = Field(default=30.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)  # seconds without SSH answer before a host is failed
    retention: RetentionConfig = RetentionConfig()
    timeouts: TimeoutsConfig = TimeoutsConfig()
    #: how TR nodes leave: "fp" stops the worker (its running tasks are re-run elsewhere); "graceful"
    #: decommissions it (Spark: no new tasks, running ones finish, shuffle/RDD blocks migrate), then
    #: stops it, after timeouts.graceful at most; "suspend" suspends its worker through cgroups and lends
    #: the host to the next cluster that grows (BIG-C's IP, ``suspend`` below).  TC nodes always leave by DP.
    shrink_mode: Literal["fp", "graceful", "suspend"] | None = None  # None: the framework kind's default (B-6)
    suspend: SuspendConfig = SuspendConfig()
    pool: PoolConfig | None = None
    opportunistic: OpportunisticConfig = OpportunisticConfig()  # UBIS (issue 12): who borrows measured slack
    #: T_idle for every cluster (seconds, or never: a cluster stays until released); None: the preset's
    idle_timeout_s: float | Literal["never"] | None = None
    #: where a leaving cluster's output is saved, on its master host (or a shared file system mounted
    #: there): <save_to>/<cluster>/<release id>; never inside a cluster's directory, which teardown wipes.
    #: None: <the host's work dir>/saved
    save_to: str | None = Field(default=None, pattern=_SAVE_PATH, max_length=1024)
    clusters: dict[str, ClusterConfig] = Field(default_factory=dict)  # per MR-cluster, by name
    source: Path | None = Field(default=None, exclude=True)

    @field_validator("idle_timeout_s", mode="before")
    @classmethod
    def _idle(cls, v):
        from fawkes.mechanism.settings import idle_seconds

        return None if v is None else idle_seconds(v)

    _save = field_validator("save_to")(lambda cls, v: _save_path(v))

    @field_validator("clusters", mode="before")
    @classmethod
    def _cluster_names(cls, v: object) -> object:
        from fawkes.store.validate import NAME_RE

        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str) or not NAME_RE.fullmatch(k):
                    raise ValueError(f"{str(k)[:40]!r} is not a cluster name")
        return v

    def save_to_of(self, cluster: str) -> str | None:
        """Where ``cluster``'s output goes when it leaves (None: the master host's default)."""
        c = self.clusters.get(cluster)
        return c.save_to if c is not None and c.save_to is not None else self.save_to

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
        return normalize_url(self.state, source=str(self.source) if self.source else None)


def fawkes_home() -> Path | None:
    home = os.environ.get("FAWKES_HOME")
    return Path(home).expanduser() if home else None


def default_state_url() -> str:
    """``sqlite:///$FAWKES_HOME/fawkes.db`` or ``sqlite:///~/.local/share/fawkes/fawkes.db``."""
    home = fawkes_home()
    base = home if home else Path.home() / ".local" / "share" / "fawkes"
    return normalize_url(str(base / "fawkes.db"))


def default_config_path() -> Path:
    home = fawkes_home()
    return (home / "config.yaml") if home else Path.home() / ".config" / "fawkes" / "config.yaml"


def load_config(path: str | Path | None = None) -> CoordinatorConfig:
    """Load and validate the config at ``path``; ``None``: the default file if it exists.

    A named file must exist.  Relative ``inventory``/``state`` paths are taken relative
    to the file's directory.  Raises :class:`ConfigError` (file, line, key).
    """
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
    if cfg.policy.endswith((".yaml", ".yml")) or "/" in cfg.policy:  # a preset file: relative to this file too
        updates["policy"] = str(base / Path(cfg.policy).expanduser())
    if cfg.state is not None:
        if "://" not in cfg.state and not cfg.state.startswith("sqlite:"):
            updates["state"] = str(base / Path(cfg.state).expanduser())
        normalize_url(updates.get("state", cfg.state), source=f"{p}:{lines.get(('state',))}")
    return cfg.model_copy(update=updates)


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
    """The state URL a command uses: ``explicit`` (``--state``/``FAWKES_STATE``), else the config's."""
    explicit = explicit or os.environ.get("FAWKES_STATE")
    if explicit:
        return normalize_url(explicit, source="--state/FAWKES_STATE")
    return load_config(config_path).state_url()


def state_option(f: F) -> F:
    """Click decorator: ``--state URL`` (env ``FAWKES_STATE``) passed to the command as ``state``."""
    return click.option("--state", "state", metavar="URL", envvar="FAWKES_STATE", default=None,
                        help="State database URL or SQLite file (default: from the config, else "
                             "$FAWKES_HOME/fawkes.db or ~/.local/share/fawkes/fawkes.db).")(f)


def open_store(state: str | None, config_path: str | Path | None = None, *, create: bool = False):
    """Open the :class:`fawkes.store.Store` a command should use (see :func:`resolve_state_url`).

    Only commands that may start a state (``framework add``) pass ``create=True``: every other
    command needs an existing state and, without one, fails in one line creating nothing."""
    from fawkes.store import Store

    return Store(resolve_state_url(state, config_path), create=create)
