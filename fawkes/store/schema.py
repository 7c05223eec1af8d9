"""The tables of the coordinator state (schema version :data:`fawkes.store.migrations.CURRENT`).

Times are POSIX seconds (floats), like the mechanism's.  States are stored as the
string values of their enums (:class:`~fawkes.mechanism.model.ClusterState`,
:class:`~fawkes.mechanism.model.Role`, :class:`~fawkes.store.lifecycle.NodeState`,
:class:`~fawkes.store.lifecycle.JobState`, :class:`~fawkes.store.lifecycle.HostState`),
never as database enum types, so adding a state needs no DDL.

Invariants enforced by the database, not only by code:

* a host is held by at most one live node (``nodes.holds_host`` is the host name while
  the node holds it and NULL once released; it is UNIQUE) -- so never by two clusters;
* at most one live MR-cluster per name (``mr_clusters.live_name``, same trick), while
  released clusters keep their history and the name can be requested again;
* the global FIFO position ``mr_clusters.queue_seq`` is unique.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Text, false, text
from sqlmodel import Field, SQLModel


class SchemaVersion(SQLModel, table=True):
    __tablename__ = "schema_version"
    id: int = Field(default=1, primary_key=True)
    version: int
    migrated_at: float


class Host(SQLModel, table=True):
    __tablename__ = "hosts"
    name: str = Field(primary_key=True, max_length=253)
    address: str = Field(max_length=253)
    cores: int
    memory_mb: int = 0
    state: str = Field(default="free", max_length=16, index=True)
    position: int = 0  # placement order (the inventory's order)
    last_seen: float | None = None
    added_at: float = 0.0
    rack: str | None = Field(default=None, max_length=63)  # rack or site label from the inventory (placement; v7)


class Framework(SQLModel, table=True):
    """A registered framework installation: its kind and its paths on every host (``paths``: the
    kind's own keys, e.g. its home directories; v8, one column per path before)."""

    __tablename__ = "frameworks"
    name: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=32)
    paths: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    java_home: str | None = None
    created: float


class MRCluster(SQLModel, table=True):
    __tablename__ = "mr_clusters"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=64, index=True)
    live_name: str | None = Field(default=None, max_length=64, unique=True)  # NULL once released
    framework: str = Field(max_length=64)  # no FK: a framework may go once no live cluster uses it
    min_core: int
    state: str = Field(max_length=16, index=True)
    input_path: str | None = None
    queue_seq: int | None = Field(default=None, unique=True)  # global FIFO position
    requested_at: float
    admitted_at: float | None = None
    active_at: float | None = None
    saving_at: float | None = None
    released_at: float | None = None
    release_requested_at: float | None = None
    state_since: float
    expected_duration_s: float | None = None  # the requester's estimate of its workload once admitted (v6)
    deadline_s: float | None = None  # maxT, relative to the request (v6)
    stored_baseline: float | None = None  # bytes its file system held at its first active sample: DU's baseline (v9)
    #: where its output went when it left (JSON: host, path, files, bytes, manifest_sha256; or kept: the
    #: data left in place because it could not be saved); NULL until then (v10)
    saved_output: str | None = None
    #: a cluster woken from hibernation: the saved_output record of the incarnation it wakes from, whose data
    #: its deployment restores before its first job runs (scale to zero; v12); NULL for a new request
    restore_from: str | None = None
    #: its block of ports (``fawkes.frameworks.spec.PORT_BLOCK`` of them from the kind's port range), the
    #: lowest block no other live cluster holds, taken when it is first deployed and NULL once released;
    #: UNIQUE, so no two live clusters share one (v14)
    port_slot: int | None = Field(default=None, unique=True, index=True)


class ClusterTransition(SQLModel, table=True):
    __tablename__ = "cluster_transitions"
    id: int | None = Field(default=None, primary_key=True)
    cluster_id: int = Field(foreign_key="mr_clusters.id", index=True)
    from_state: str | None = Field(default=None, max_length=16)
    to_state: str = Field(max_length=16)
    time: float
    detail: str = ""


class Node(SQLModel, table=True):
    __tablename__ = "nodes"
    #: the live nodes (v13): what status, /metrics and the dashboard count, without reading the history
    #: (released nodes are never deleted); the WHERE is a literal so that SQLite matches it to the queries'
    __table_args__ = (Index("ix_nodes_held", "cluster_id", "role", "state", sqlite_where=text("holds_host IS NOT NULL"),
                            postgresql_where=text("holds_host IS NOT NULL")),)
    id: int | None = Field(default=None, primary_key=True)
    cluster_id: int = Field(foreign_key="mr_clusters.id", index=True)
    host: str = Field(foreign_key="hosts.name", max_length=253)
    holds_host: str | None = Field(default=None, max_length=253, unique=True)  # NULL once released
    role: str = Field(max_length=16)
    state: str = Field(max_length=16, index=True)
    requested_at: float
    running_at: float | None = None
    draining_at: float | None = None
    released_at: float | None = Field(default=None, index=True)  # v13: the nodes released in a window
    state_since: float
    config_hash: str | None = Field(default=None, max_length=128)
    stored_bytes: int = Field(default=0, sa_type=BigInteger)
    running_tasks: int = 0  # tasks running on the node at the last sample (FP victim order; v3)
    protected: bool = Field(default=False, sa_column_kwargs={"server_default": false()})  # an admin keeps it from
    # being removed by a resize (v11); a server default, as the batch inserts (insert_many) name only some columns


class NodeTransition(SQLModel, table=True):
    __tablename__ = "node_transitions"
    id: int | None = Field(default=None, primary_key=True)
    node_id: int = Field(foreign_key="nodes.id", index=True)
    from_state: str | None = Field(default=None, max_length=16)
    to_state: str = Field(max_length=16)
    time: float
    detail: str = ""


class Job(SQLModel, table=True):
    __tablename__ = "jobs"
    # ix_jobs_state_cluster (v13): the unfinished jobs counted by state, without reading the finished ones
    __table_args__ = (Index("ix_jobs_cluster_state_id", "cluster_id", "state", "id"),
                      Index("ix_jobs_state_cluster", "state", "cluster_id"))
    id: int | None = Field(default=None, primary_key=True)
    cluster_id: int = Field(foreign_key="mr_clusters.id")
    argv: list[str] = Field(sa_column=Column(JSON, nullable=False))
    input_path: str | None = None
    input_bytes: int | None = Field(default=None, sa_type=BigInteger)
    state: str = Field(default="queued", max_length=16)
    submitted_at: float
    dispatched_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    app_id: str | None = Field(default=None, max_length=128)
    exit_code: int | None = None
    output_path: str | None = None
    ref_runtime: float | None = None
    detail: str = ""
    cancel_requested_at: float | None = None  # user cancel of a started job, carried out by the coordinator (v2)
    tasks_seen: int | None = None  # most tasks its driver reported (pending + running + completed) (v4)
    #: (v16) the tasks that ended on the cluster's master node and on the others, and their seconds:
    #: ``{"master": [n, s], "other": [n, s]}`` as its driver last reported them (the twin's master factor)
    task_time: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class Sample(SQLModel, table=True):
    """One :class:`~fawkes.mechanism.model.ClusterMetrics` of one cluster (same field names)."""

    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_cluster_time", "cluster_id", "time"),)
    id: int | None = Field(default=None, primary_key=True)
    cluster_id: int = Field(foreign_key="mr_clusters.id")
    time: float = Field(index=True)  # ix_samples_time (v2): retention deletes by time
    unfinished_jobs: int = 0
    unfinished_input_bytes: float = 0.0
    pending_tasks: int = 0
    running_tasks: int = 0
    busy_slots: float = 0.0
    configured_slots: float = 0.0
    output_bytes: float = 0.0
    storage_capacity: float = 0.0
    mean_job_slowdown: float = 0.0
    completed_jobs: int = 0
    completed_tasks: int = 0
    loading: bool = False


class DecisionRecord(SQLModel, table=True):
    """One tick of the control loop; ``id`` is the tick number shown by ``fawkes explain``.

    ``weights`` and ``discriminations`` map cluster name -> value; ``targets`` maps
    cluster name -> node count; ``plan`` is ``{"grows": [...], "shrinks": [...]}``.
    """

    __tablename__ = "decisions"
    id: int | None = Field(default=None, primary_key=True)
    time: float = Field(index=True)
    policy: str = Field(max_length=128)
    inputs: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    weights: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    discriminations: dict[str, float] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    global_factor: float = 0.0
    gate_open: bool = False
    targets: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    plan: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    reason: str = Field(default="", sa_column=Column(Text, nullable=False))


class ControllerMemory(SQLModel, table=True):
    """The control loop's memory (:class:`fawkes.mechanism.memory.Memory` as JSON), one row.

    Written with every tick's decision (same transaction) and every admission, so a restart
    resumes the loop where it was (v3)."""

    __tablename__ = "controller_memory"
    id: int = Field(default=1, primary_key=True)
    time: float
    step: str = Field(max_length=16)  # tick | admission
    memory: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class SamplerMemory(SQLModel, table=True):
    """The sampler's memory (v15), one row: CERES' usage windows per node
    (:meth:`fawkes.coordinator.usage.NodeWindows.to_doc`), saved every 30 s so that a restarted or newly
    leading coordinator resumes them."""

    __tablename__ = "sampler_memory"
    id: int = Field(default=1, primary_key=True)
    time: float
    windows: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class CoordinatorLease(SQLModel, table=True):
    """Which coordinator acts (v5), one row: a lease with a fencing token.

    The coordinator that holds it renews ``expires_at`` while it runs; another takes it over only
    once it has expired, and every takeover raises ``token``.  Every write of the leader checks,
    in its own transaction, that the row still names it with its token (``fawkes.store.lease``),
    so a leader that was paused past its lease has its writes refused."""

    __tablename__ = "coordinator_lease"
    id: int = Field(default=1, primary_key=True)
    token: int  # the fencing token: +1 at every takeover
    holder: str = Field(max_length=300)  # hostname:pid:random of the leading process
    hostname: str = Field(max_length=253)
    pid: int
    started_at: float  # when that process started
    acquired_at: float  # when it took the lease
    renewed_at: float
    expires_at: float


class Event(SQLModel, table=True):
    __tablename__ = "events"
    id: int | None = Field(default=None, primary_key=True)
    time: float = Field(index=True)
    level: str = Field(default="info", max_length=16)
    kind: str = Field(max_length=64)
    cluster: str | None = Field(default=None, max_length=64, index=True)
    node: str | None = Field(default=None, max_length=300)
    message: str = Field(sa_column=Column(Text, nullable=False))


class ApiToken(SQLModel, table=True):
    """A team's token for the HTTP API (v11): only the SHA-256 of its secret is kept (the secret is shown
    once, by ``fawkes token create``).  ``scopes``: what it may do (submit, cancel, status, request,
    release, admin); ``clusters``: the MR-cluster names it may act on (admin: every one)."""

    __tablename__ = "api_tokens"
    id: int | None = Field(default=None, primary_key=True)
    team: str = Field(max_length=64, index=True)
    secret_sha256: str = Field(max_length=64, unique=True)
    scopes: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    clusters: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: float
    expires_at: float | None = None  # None: never
    revoked_at: float | None = None
    last_used_at: float | None = None


class AuditRecord(SQLModel, table=True):
    """One mutating request or command (v11): who (a token's team, or an OS user), what, when, result."""

    __tablename__ = "audit"
    id: int | None = Field(default=None, primary_key=True)
    time: float = Field(index=True)
    actor: str = Field(max_length=300)  # "team etl (token 3)" or "user alice"
    via: str = Field(max_length=16)  # api | cli
    action: str = Field(max_length=64)  # cluster.request, job.submit, job.cancel, token.create, ...
    target: str | None = Field(default=None, max_length=300)
    result: str = Field(max_length=16)  # ok | refused | invalid | error
    status: int | None = None  # the HTTP status of an API request
    detail: str = Field(default="", sa_column=Column(Text, nullable=False))


TABLES = [SchemaVersion, Host, Framework, MRCluster, ClusterTransition, Node, NodeTransition,
          Job, Sample, DecisionRecord, ControllerMemory, SamplerMemory, CoordinatorLease, Event, ApiToken, AuditRecord]
