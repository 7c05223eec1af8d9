"""The store API: every read and write the CLI and the coordinator make on the state.

Contract for every method:

* each call is one short transaction (writes begin immediately on SQLite); it either
  commits completely or changes nothing;
* bad input and refused operations raise :class:`~fawkes.errors.FawkesError` with one
  line naming the field or the record; races between processes end the same way (a
  unique constraint or a compare-and-set on the old state decides the winner);
* returned records are detached copies (safe to keep after the call);
* times come from ``clock`` (default :func:`time.time`), so simulations can drive it.

Clusters are addressed by name: the live cluster of that name, or (for reads) the most
recent released one.  Nodes and jobs are addressed by their integer ids.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, func, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.mechanism.model import HOLDING_STATES, ClusterMetrics, ClusterState, Role
from fawkes.store import validate
from fawkes.store.db import make_engine, normalize_url, write_engine
from fawkes.store.lifecycle import (
    CLUSTER_ACCEPTING_JOBS,
    CLUSTER_TRANSITIONS,
    JOB_FINISHED,
    JOB_TRANSITIONS,
    NODE_TIMEOUTS,
    NODE_TRANSITIONS,
    HostState,
    JobState,
    NodeState,
    check,
)
from fawkes.store.migrations import ensure_schema
from fawkes.store.schema import (
    ClusterTransition,
    ControllerMemory,
    Decision,
    Event,
    Framework,
    Host,
    Job,
    MRCluster,
    Node,
    NodeTransition,
    Sample,
)

_METRIC_FIELDS = tuple(f.name for f in dataclasses.fields(ClusterMetrics))
_CLUSTER_STAMP = {ClusterState.DEPLOYING: "admitted_at", ClusterState.ACTIVE: "active_at",
                  ClusterState.SAVING: "saving_at", ClusterState.RELEASED: "released_at"}
_NODE_STAMP = {NodeState.RUNNING: "running_at", NodeState.DRAINING: "draining_at",
               NodeState.RELEASED: "released_at"}
_JOB_STAMP = {JobState.DISPATCHED: "dispatched_at", JobState.RUNNING: "started_at",
              JobState.SUCCEEDED: "ended_at", JobState.FAILED: "ended_at", JobState.CANCELLED: "ended_at"}


class Store:
    """The coordinator state at ``url`` (SQLite file or PostgreSQL), schema ensured on open."""

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time):
        self.url = normalize_url(url)
        self.display_url = make_url(self.url).render_as_string(hide_password=True)
        self.clock = clock
        try:
            self.engine = make_engine(self.url)
        except OSError as exc:
            raise FawkesError(f"state {self.display_url}: cannot open: {exc}") from None
        self._writer = write_engine(self.engine)
        try:
            self.schema_version = ensure_schema(self.engine, where=self.display_url)
        except FawkesError:
            self.engine.dispose()
            raise
        except Exception as exc:  # unreachable server, unreadable file: one line, no traceback
            self.engine.dispose()
            raise FawkesError(f"state {self.display_url}: cannot open: {_first_line(exc)}") from None

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: commit on success, roll back on any error.  ``write=True`` for writes."""
        try:
            with Session(self._writer if write else self.engine, expire_on_commit=False) as s:
                with s.begin():
                    yield s
        except OperationalError as exc:  # locked past the busy timeout, server gone: one line
            raise FawkesError(f"state {self.display_url}: {_first_line(exc.orig or exc)}") from None

    # ------------------------------------------------------------------ frameworks
    def register_framework(self, name: str, kind: str, *, spark_home: str | None = None,
                           hadoop_home: str | None = None, hdfs_jars: str | None = None,
                           java_home: str | None = None, replace: bool = False) -> Framework:
        """Register framework ``name`` (``replace=True`` updates an existing one)."""
        validate.name("framework", name)
        validate.name("kind", kind)
        paths = {k: validate.text(k, v) for k, v in
                 dict(spark_home=spark_home, hadoop_home=hadoop_home, hdfs_jars=hdfs_jars,
                      java_home=java_home).items()}
        with self.session(write=True) as s:
            fw = s.get(Framework, name)
            if fw is not None and not replace:
                raise FawkesError(f"framework {name}: already registered")
            if fw is None:
                fw = Framework(name=name, kind=kind, created=self.clock(), **paths)
            else:
                fw.kind = kind
                for k, v in paths.items():
                    setattr(fw, k, v)
            s.add(fw)
            try:
                s.flush()
            except IntegrityError:
                raise FawkesError(f"framework {name}: already registered") from None
            return fw

    def list_frameworks(self) -> list[Framework]:
        with self.session() as s:
            return list(s.exec(select(Framework).order_by(Framework.name)))

    def get_framework(self, name: str) -> Framework:
        with self.session() as s:
            fw = s.get(Framework, name)
            if fw is None:
                raise FawkesError(f"framework {name}: not registered")
            return fw

    def remove_framework(self, name: str) -> None:
        """Remove framework ``name``; refused while a live cluster uses it."""
        with self.session(write=True) as s:
            fw = s.exec(select(Framework).where(Framework.name == name).with_for_update()).first()
            if fw is None:
                raise FawkesError(f"framework {name}: not registered")
            users = s.exec(select(MRCluster.name).where(MRCluster.framework == name,
                                                        col(MRCluster.live_name).is_not(None))).all()
            if users:
                raise FawkesError(f"framework {name}: in use by cluster(s) {', '.join(sorted(users))}")
            s.delete(fw)

    # ------------------------------------------------------------------ hosts
    def sync_hosts(self, inventory: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
        """Make the hosts table match ``inventory`` (dicts: name, address, cores, memory_mb).

        New hosts are added free; known ones updated (a retired host comes back free);
        hosts missing from the inventory are marked retired (never deleted: history).
        A held host cannot be dropped: refused, nothing changed.  Returns the names per
        outcome: ``added``, ``updated``, ``retired``, ``unchanged``.
        """
        specs = _host_specs(inventory)
        out: dict[str, list[str]] = {"added": [], "updated": [], "retired": [], "unchanged": []}
        now = self.clock()
        with self.session(write=True) as s:
            known = {h.name: h for h in s.exec(select(Host))}
            gone = [n for n, h in known.items() if n not in specs and h.state != HostState.RETIRED]
            held = s.exec(select(Node.host, MRCluster.name).join(MRCluster, Node.cluster_id == MRCluster.id)
                          .where(col(Node.holds_host).in_(gone))).all() if gone else []
            if held:
                desc = ", ".join(f"{h} (cluster {c})" for h, c in held)
                raise FawkesError(f"inventory: cannot drop host(s) still held: {desc}")
            for pos, (hname, spec) in enumerate(specs.items()):
                h = known.get(hname)
                if h is None:
                    s.add(Host(name=hname, position=pos, added_at=now, state=HostState.FREE, **spec))
                    out["added"].append(hname)
                    continue
                changed = any(getattr(h, k) != v for k, v in spec.items()) or h.position != pos
                if h.state == HostState.RETIRED:
                    h.state, changed = HostState.FREE, True
                if changed:
                    for k, v in spec.items():
                        setattr(h, k, v)
                    h.position = pos
                    s.add(h)
                    out["updated"].append(hname)
                else:
                    out["unchanged"].append(hname)
            for hname in gone:
                known[hname].state = HostState.RETIRED
                s.add(known[hname])
                out["retired"].append(hname)
        return out

    def list_hosts(self, state: HostState | str | None = None) -> list[Host]:
        """Hosts in placement order, optionally only those in ``state``."""
        with self.session() as s:
            q = select(Host).order_by(Host.position, Host.name)
            if state is not None:
                q = q.where(Host.state == HostState(state))
            return list(s.exec(q))

    def free_hosts(self) -> list[str]:
        """Names of hosts held by nobody and not failed, in placement order."""
        return [h.name for h in self.list_hosts(HostState.FREE)]

    def capacity(self) -> int:
        """C: hosts that are not failed or retired."""
        with self.session() as s:
            return s.exec(select(func.count()).select_from(Host)
                          .where(col(Host.state).in_([HostState.FREE, HostState.ALLOCATED]))).one()

    def set_host_state(self, name: str, state: HostState | str, *, detail: str = "") -> Host:
        """Mark a host failed (or back from failed).  Allocation state follows the nodes."""
        state = HostState(state)
        with self.session(write=True) as s:
            h = s.get(Host, name)
            if h is None:
                raise FawkesError(f"host {name}: not in the inventory")
            held = s.exec(select(Node.id).where(Node.holds_host == name)).first() is not None
            if state == HostState.FAILED:
                h.state = state
            elif state in (HostState.FREE, HostState.ALLOCATED):
                h.state = HostState.ALLOCATED if held else HostState.FREE
            else:
                raise FawkesError(f"host {name}: cannot set state {state} directly (use sync_hosts)")
            s.add(h)
            self._event(s, "host", f"host {name} -> {h.state}" + (f": {detail}" if detail else ""),
                        level="warning" if state == HostState.FAILED else "info", node=name)
            return h

    def fail_host(self, name: str, reason: str) -> Host:
        """Take free host ``name`` out of service (FREE -> FAILED), for maintenance or repair.

        Refused (one line, nothing changed) for a host a live node holds, an unknown,
        retired or already failed host.  The compare-and-set on ``state = free`` decides a
        race with an allocation: the loser is refused.  Records a warning event.
        """
        reason = validate.text("reason", reason, optional=False)
        with self.session(write=True) as s:
            h = self._host(s, name)
            held = self._holder(s, name)
            if held is not None:
                raise FawkesError(f"host {name}: held by {held}; only a free host can be taken out of service")
            if h.state != HostState.FREE:
                raise FawkesError(f"host {name}: already failed" if h.state == HostState.FAILED
                                  else f"host {name}: {h.state}, not free")
            if s.execute(update(Host).where(Host.name == name, Host.state == HostState.FREE)
                         .values(state=HostState.FAILED)).rowcount != 1:
                raise FawkesError(f"host {name}: changed concurrently; retry")
            self._event(s, "host", f"host {name}: free -> failed (taken out of service: {reason})",
                        level="warning", node=name)
            s.refresh(h)
            return h

    def restore_host(self, name: str, detail: str = "") -> Host:
        """Return failed host ``name`` to the pool (FAILED -> FREE) after a repair.

        Refused while a live node still holds the host (a failed node is released by the
        coordinator's cleanup, a failed core node at its cluster's teardown), and for a
        host that is not failed.  Records an event.
        """
        with self.session(write=True) as s:
            h = self._host(s, name)
            if h.state != HostState.FAILED:
                raise FawkesError(f"host {name}: not failed ({h.state}); nothing to restore")
            held = self._holder(s, name)
            if held is not None:
                raise FawkesError(f"host {name}: still held by {held}; restore it once that node is released")
            if s.execute(update(Host).where(Host.name == name, Host.state == HostState.FAILED)
                         .values(state=HostState.FREE)).rowcount != 1:
                raise FawkesError(f"host {name}: changed concurrently; retry")
            self._event(s, "host", f"host {name}: failed -> free (restored" + (f" {detail})" if detail else ")"),
                        node=name)
            s.refresh(h)
            return h

    def mark_host_seen(self, name: str, when: float | None = None) -> None:
        with self.session(write=True) as s:
            s.execute(update(Host).where(Host.name == name).values(last_seen=when or self.clock()))

    # ------------------------------------------------------------------ clusters
    def request_cluster(self, name: str, *, framework: str, min_core: int,
                        input_path: str | None = None) -> MRCluster:
        """Put a new MR-cluster request at the tail of the global FIFO queue (state REQUESTED)."""
        validate.name("name", name)
        validate.name("framework", framework)
        validate.positive_int("min_core", min_core)
        validate.text("input", input_path)
        now = self.clock()
        with self.session(write=True) as s:
            fw = s.exec(select(Framework).where(Framework.name == framework).with_for_update(read=True)).first()
            if fw is None:
                raise FawkesError(f"framework: {framework!r} is not registered")
            if s.exec(select(MRCluster.id).where(MRCluster.live_name == name)).first() is not None:
                raise FawkesError(f"cluster {name}: already exists")
            cap = s.exec(select(func.count()).select_from(Host).where(Host.state != HostState.RETIRED)).one()
            if cap and min_core > cap:
                raise FawkesError(f"min_core: {min_core} exceeds the pool capacity {cap}; it could never be admitted")
            c = MRCluster(name=name, live_name=name, framework=framework, min_core=min_core,
                          state=ClusterState.REQUESTED, input_path=input_path, requested_at=now, state_since=now)
            s.add(c)
            try:
                s.flush()
                c.queue_seq = c.id  # FIFO by arrival: ids only grow
                s.add(ClusterTransition(cluster_id=c.id, from_state=None, to_state=c.state, time=now,
                                        detail=f"requested min_core={min_core}"))
                self._event(s, "cluster", f"requested (framework {framework}, min_core {min_core})", cluster=name)
                s.flush()
            except IntegrityError:
                raise FawkesError(f"cluster {name}: already exists") from None
            return c

    def get_cluster(self, name: str) -> MRCluster:
        """The live cluster called ``name``, else the latest released one."""
        with self.session() as s:
            return self._cluster(s, name)

    def list_clusters(self, *, include_released: bool = True) -> list[MRCluster]:
        """Clusters in global FIFO (= admission) order."""
        with self.session() as s:
            q = select(MRCluster).order_by(MRCluster.queue_seq)
            if not include_released:
                q = q.where(col(MRCluster.live_name).is_not(None))
            return list(s.exec(q))

    def queue(self) -> list[MRCluster]:
        """The global FIFO queue: clusters still REQUESTED, head first."""
        with self.session() as s:
            return list(s.exec(select(MRCluster).where(MRCluster.state == ClusterState.REQUESTED)
                               .order_by(MRCluster.queue_seq)))

    def request_release(self, name: str) -> MRCluster:
        """Ask for cluster ``name`` to be released.

        A cluster still queued holds nothing: it is withdrawn at once (RELEASED, its
        queued jobs cancelled).  Otherwise the request is recorded and the coordinator
        carries it out (SAVING, then RELEASED).  Asking twice is harmless.
        """
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            if c.state == ClusterState.REQUESTED:
                self._cluster_cas(s, c, ClusterState.RELEASED, "withdrawn before admission", now)
                self._cancel_queued_jobs(s, c, "cluster withdrawn", now)
            elif c.release_requested_at is None:
                s.execute(update(MRCluster).where(MRCluster.id == c.id).values(release_requested_at=now))
                s.refresh(c)
                self._event(s, "cluster", "release requested", cluster=name)
            return c

    def transition_cluster(self, name: str, to: ClusterState | str, detail: str = "") -> MRCluster:
        """Move live cluster ``name`` along an edge of :data:`CLUSTER_TRANSITIONS`.

        Entering RELEASED is refused while any node still holds a host; it also frees
        the name and cancels jobs that never started.
        """
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            to = ClusterState(to)
            check(CLUSTER_TRANSITIONS, "cluster", name, c.state, to)
            if to == ClusterState.RELEASED:
                held = s.exec(select(func.count()).select_from(Node).where(
                    Node.cluster_id == c.id, col(Node.holds_host).is_not(None))).one()
                if held:
                    raise FawkesError(f"cluster {name}: still holds {held} node(s); release them first")
                self._cancel_queued_jobs(s, c, "cluster released", now)
            self._cluster_cas(s, c, to, detail, now)
            return c

    def cluster_history(self, name: str) -> list[ClusterTransition]:
        with self.session() as s:
            c = self._cluster(s, name)
            return list(s.exec(select(ClusterTransition).where(ClusterTransition.cluster_id == c.id)
                               .order_by(ClusterTransition.id)))

    # ------------------------------------------------------------------ nodes
    def allocate_node(self, cluster: str, host: str, role: Role | str, *,
                      config_hash: str | None = None, detail: str = "") -> Node:
        """Give free ``host`` to ``cluster`` as a node in ``role`` (state REQUESTED).

        Refused if the cluster does not hold nodes in its state, or the host is not
        free; the UNIQUE ``holds_host`` column makes two owners impossible even when
        two processes race.
        """
        role = _role(role)
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, cluster, live=True)
            if ClusterState(c.state) not in HOLDING_STATES - {ClusterState.SAVING}:
                raise FawkesError(f"cluster {cluster}: cannot take nodes while {c.state}")
            h = s.get(Host, host)
            if h is None:
                raise FawkesError(f"host {host}: not in the inventory")
            owner = self._owner(s, host)
            if owner is not None:
                raise FawkesError(f"host {host}: already held by cluster {owner}")
            if h.state != HostState.FREE:
                raise FawkesError(f"host {host}: not free ({h.state})")
            taken = s.execute(update(Host).where(Host.name == host, Host.state == HostState.FREE)
                              .values(state=HostState.ALLOCATED)).rowcount
            if taken != 1:
                raise FawkesError(f"host {host}: taken concurrently")
            n = Node(cluster_id=c.id, host=host, holds_host=host, role=role,
                     state=NodeState.REQUESTED, requested_at=now, state_since=now, config_hash=config_hash)
            s.add(n)
            try:
                s.flush()
            except IntegrityError:
                raise FawkesError(f"host {host}: already held by another cluster") from None
            s.add(NodeTransition(node_id=n.id, from_state=None, to_state=n.state, time=now,
                                 detail=detail or f"allocated to {cluster} as {role}"))
            self._event(s, "node", f"{host} allocated as {role}", cluster=cluster, node=host)
            return n

    def transition_node(self, node_id: int, to: NodeState | str, detail: str = "", *,
                        stored_bytes: int | None = None, config_hash: str | None = None) -> Node:
        """Move node ``node_id`` along an edge of :data:`NODE_TRANSITIONS` and record it.

        RELEASED drops the hold on the host (which becomes free unless it is marked failed).
        """
        to = NodeState(to)
        now = self.clock()
        with self.session(write=True) as s:
            n = s.get(Node, node_id)
            if n is None:
                raise FawkesError(f"node {node_id}: not found")
            old = NodeState(n.state)
            check(NODE_TRANSITIONS, "node", f"{node_id} ({n.host})", old, to)
            values: dict[str, Any] = {"state": to, "state_since": now}
            if to in _NODE_STAMP:
                values[_NODE_STAMP[to]] = now
            if to == NodeState.RELEASED:
                values["holds_host"] = None
            if stored_bytes is not None:
                values["stored_bytes"] = stored_bytes
            if config_hash is not None:
                values["config_hash"] = config_hash
            done = s.execute(update(Node).where(Node.id == node_id, Node.state == old).values(**values)).rowcount
            if done != 1:
                raise FawkesError(f"node {node_id}: changed concurrently; retry")
            if to == NodeState.RELEASED:
                s.execute(update(Host).where(Host.name == n.host, Host.state == HostState.ALLOCATED)
                          .values(state=HostState.FREE))
            s.add(NodeTransition(node_id=node_id, from_state=old, to_state=to, time=now, detail=detail))
            cname = s.get(MRCluster, n.cluster_id).name
            self._event(s, "node", f"{n.host}: {old} -> {to}" + (f" ({detail})" if detail else ""),
                        level="warning" if to == NodeState.FAILED else "info", cluster=cname, node=n.host)
            s.refresh(n)
            return n

    def update_node(self, node_id: int, *, stored_bytes: int | None = None, config_hash: str | None = None,
                    running_tasks: int | None = None) -> None:
        """Record facts about a node that are not state changes."""
        values = {k: v for k, v in dict(stored_bytes=stored_bytes, config_hash=config_hash,
                                         running_tasks=running_tasks).items() if v is not None}
        if values:
            with self.session(write=True) as s:
                if s.execute(update(Node).where(Node.id == node_id).values(**values)).rowcount != 1:
                    raise FawkesError(f"node {node_id}: not found")

    def get_node(self, node_id: int) -> Node:
        with self.session() as s:
            n = s.get(Node, node_id)
            if n is None:
                raise FawkesError(f"node {node_id}: not found")
            return n

    def list_nodes(self, cluster: str | None = None, *, live: bool = True) -> list[Node]:
        """Nodes (of ``cluster``), oldest first; ``live`` ones only hold a host."""
        with self.session() as s:
            q = select(Node).order_by(Node.id)
            if cluster is not None:
                q = q.where(Node.cluster_id == self._cluster(s, cluster).id)
            if live:
                q = q.where(col(Node.holds_host).is_not(None))
            return list(s.exec(q))

    def node_history(self, node_id: int) -> list[NodeTransition]:
        with self.session() as s:
            return list(s.exec(select(NodeTransition).where(NodeTransition.node_id == node_id)
                               .order_by(NodeTransition.id)))

    def stuck_nodes(self, now: float | None = None,
                    timeouts: Mapping[NodeState, float | None] = NODE_TIMEOUTS) -> list[Node]:
        """Live nodes that have been in their state longer than its timeout."""
        now = self.clock() if now is None else now
        return [n for n in self.list_nodes() if timeouts.get(NodeState(n.state)) is not None
                and now - n.state_since > timeouts[NodeState(n.state)]]

    # ------------------------------------------------------------------ jobs
    def submit_job(self, cluster: str, argv: Sequence[str], *, input_path: str | None = None,
                   input_bytes: int | None = None, ref_runtime: float | None = None) -> Job:
        """Append a job to ``cluster``'s FIFO queue (state QUEUED); return it (with its id)."""
        argv = validate.argv("app", argv)
        validate.text("input", input_path)
        if input_bytes is not None:
            validate.positive_int("input_bytes", input_bytes, minimum=0)
        validate.optional_number("ref_runtime", ref_runtime)
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, cluster, live=True)
            if ClusterState(c.state) not in CLUSTER_ACCEPTING_JOBS or c.release_requested_at is not None:
                why = "release requested" if c.release_requested_at is not None else c.state
                raise FawkesError(f"cluster {cluster}: not accepting jobs ({why})")
            j = Job(cluster_id=c.id, argv=argv, input_path=input_path, input_bytes=input_bytes,
                    state=JobState.QUEUED, submitted_at=now, ref_runtime=ref_runtime)
            s.add(j)
            s.flush()
            return j

    def get_job(self, job_id: int) -> Job:
        with self.session() as s:
            j = s.get(Job, job_id)
            if j is None:
                raise FawkesError(f"job {job_id}: not found")
            return j

    def list_jobs(self, cluster: str | None = None, *, states: Iterable[JobState | str] | None = None,
                  limit: int | None = None) -> list[Job]:
        """Jobs in submission order (the last ``limit`` if given)."""
        with self.session() as s:
            q = select(Job)
            if cluster is not None:
                q = q.where(Job.cluster_id == self._cluster(s, cluster).id)
            if states is not None:
                q = q.where(col(Job.state).in_([JobState(x) for x in states]))
            if limit is not None:
                return list(reversed(s.exec(q.order_by(col(Job.id).desc()).limit(limit)).all()))
            return list(s.exec(q.order_by(Job.id)))

    def next_job(self, cluster: str) -> Job | None:
        """The head of ``cluster``'s FIFO queue (oldest QUEUED job), or None."""
        with self.session() as s:
            c = self._cluster(s, cluster)
            return s.exec(select(Job).where(Job.cluster_id == c.id, Job.state == JobState.QUEUED)
                          .order_by(Job.id).limit(1)).first()

    def transition_job(self, job_id: int, to: JobState | str, detail: str = "", *, app_id: str | None = None,
                       exit_code: int | None = None, output_path: str | None = None) -> Job:
        """Move job ``job_id`` along an edge of :data:`JOB_TRANSITIONS` (compare-and-set)."""
        to = JobState(to)
        now = self.clock()
        with self.session(write=True) as s:
            j = s.get(Job, job_id)
            if j is None:
                raise FawkesError(f"job {job_id}: not found")
            old = JobState(j.state)
            if to is JobState.QUEUED and old is JobState.DISPATCHED and j.cancel_requested_at is not None:
                to, detail = JobState.CANCELLED, f"cancelled on request instead ({detail})" if detail else \
                    "cancelled on request"
            check(JOB_TRANSITIONS, "job", str(job_id), old, to)
            values: dict[str, Any] = {"state": to}
            if to in _JOB_STAMP:
                values[_JOB_STAMP[to]] = now
            for k, v in dict(app_id=app_id, exit_code=exit_code, output_path=output_path).items():
                if v is not None:
                    values[k] = v
            if detail:
                values["detail"] = detail
            if s.execute(update(Job).where(Job.id == job_id, Job.state == old).values(**values)).rowcount != 1:
                raise FawkesError(f"job {job_id}: changed concurrently; retry")
            s.refresh(j)
            return j

    def cancel_jobs(self, job_ids: Iterable[int]) -> list[tuple[Job, str]]:
        """Cancel jobs, all or none (one transaction): returns ``(job, outcome)`` per id.

        * QUEUED: CANCELLED at once (outcome ``cancelled``);
        * DISPATCHED or RUNNING: the request is recorded in ``cancel_requested_at``
          (outcome ``requested``); the coordinator's dispatcher kills the driver on the
          master and then marks the job CANCELLED.  Asking again is harmless (``pending``).

        A finished or unknown job refuses the whole call with one line
        (``job 7: already succeeded``) and nothing changes.  Each change is a compare-and-set
        on the job's state, so a race with the dispatcher is decided by the database.
        """
        ids = list(dict.fromkeys(job_ids))
        for i in ids:
            validate.positive_int("job id", i)
        now = self.clock()
        out: list[tuple[Job, str]] = []
        with self.session(write=True) as s:
            for job_id in ids:
                for _ in range(3):  # the state may move under us (PostgreSQL): decide again on what is there
                    j = s.get(Job, job_id, populate_existing=True)
                    if j is None:
                        raise FawkesError(f"job {job_id}: not found")
                    state = JobState(j.state)
                    if state in JOB_FINISHED:
                        raise FawkesError(f"job {job_id}: already {state}")
                    if state is JobState.QUEUED:
                        if s.execute(update(Job).where(Job.id == job_id, Job.state == JobState.QUEUED).values(
                                state=JobState.CANCELLED, ended_at=now, detail="cancelled by the user")).rowcount:
                            outcome = "cancelled"
                            break
                    elif j.cancel_requested_at is not None:
                        outcome = "pending"
                        break
                    elif s.execute(update(Job).where(Job.id == job_id, Job.state == state)
                                   .values(cancel_requested_at=now)).rowcount:
                        outcome = "requested"
                        break
                else:
                    raise FawkesError(f"job {job_id}: changed concurrently; retry")
                s.refresh(j)
                cname = s.get(MRCluster, j.cluster_id).name
                if outcome != "pending":
                    self._event(s, "job", f"job {job_id} cancelled (was queued)" if outcome == "cancelled"
                                else f"job {job_id}: cancel requested ({state}); the coordinator stops its driver",
                                cluster=cname)
                out.append((j, outcome))
        return out

    def queue_lengths(self) -> dict[str, int]:
        """Queued jobs per live cluster name (zeros included)."""
        with self.session() as s:
            rows = s.exec(select(MRCluster.name, func.count(col(Job.id)))
                          .join(Job, (Job.cluster_id == MRCluster.id) & (Job.state == JobState.QUEUED), isouter=True)
                          .where(col(MRCluster.live_name).is_not(None)).group_by(MRCluster.name)).all()
            return {name: n for name, n in rows}

    # ------------------------------------------------------------------ samples
    def record_sample(self, cluster: str, metrics: ClusterMetrics) -> None:
        with self.session(write=True) as s:
            c = self._cluster(s, cluster, live=True)
            s.add(Sample(cluster_id=c.id, **dataclasses.asdict(metrics)))

    def samples(self, cluster: str, *, since: float | None = None, until: float | None = None) -> list[ClusterMetrics]:
        """Samples of ``cluster`` with ``since < time <= until``, in time order."""
        with self.session() as s:
            c = self._cluster(s, cluster)
            q = select(Sample).where(Sample.cluster_id == c.id)
            if since is not None:
                q = q.where(Sample.time > since)
            if until is not None:
                q = q.where(Sample.time <= until)
            return [ClusterMetrics(**{f: getattr(r, f) for f in _METRIC_FIELDS})
                    for r in s.exec(q.order_by(Sample.time, Sample.id))]

    # ------------------------------------------------------------------ decisions
    def record_decision(self, *, policy: str, inputs: Mapping[str, Any], weights: Mapping[str, float],
                        discriminations: Mapping[str, float], global_factor: float, gate_open: bool,
                        targets: Mapping[str, int], plan: Mapping[str, Any], reason: str,
                        time: float | None = None, memory: Mapping[str, Any] | None = None) -> int:
        """Store one tick's decision (and the controller memory it leaves, in the same
        transaction); return its tick number (used by ``fawkes explain``)."""
        d = Decision(time=self.clock() if time is None else time, policy=policy, inputs=dict(inputs),
                     weights=dict(weights), discriminations=dict(discriminations),
                     global_factor=float(global_factor), gate_open=bool(gate_open), targets=dict(targets),
                     plan=dict(plan), reason=reason)
        with self.session(write=True) as s:
            s.add(d)
            s.flush()
            if memory is not None:
                self._put_memory(s, "tick", memory, d.time)
            return d.id

    def save_memory(self, step: str, memory: Mapping[str, Any], time: float | None = None) -> None:
        """Store the controller memory a step outside a tick left (an admission)."""
        with self.session(write=True) as s:
            self._put_memory(s, step, memory, self.clock() if time is None else time)

    def load_memory(self) -> dict[str, Any] | None:
        """The controller memory last stored (``None`` before the first step)."""
        with self.session() as s:
            row = s.get(ControllerMemory, 1)
            return dict(row.memory) if row is not None else None

    @staticmethod
    def _put_memory(s: Session, step: str, memory: Mapping[str, Any], when: float) -> None:
        row = s.get(ControllerMemory, 1)
        if row is None:
            s.add(ControllerMemory(id=1, time=when, step=step, memory=dict(memory)))
        else:
            row.time, row.step, row.memory = when, step, dict(memory)
            s.add(row)

    def decision(self, tick: int | None = None) -> Decision:
        """Decision ``tick`` (the latest if None)."""
        with self.session() as s:
            d = s.get(Decision, tick) if tick is not None else \
                s.exec(select(Decision).order_by(col(Decision.id).desc()).limit(1)).first()
            if d is None:
                raise FawkesError(f"tick {tick}: no such decision" if tick is not None
                                  else "no decision recorded yet (is the coordinator running?)")
            return d

    def latest_decision(self) -> Decision | None:
        with self.session() as s:
            return s.exec(select(Decision).order_by(col(Decision.id).desc()).limit(1)).first()

    def prune_decisions(self, keep: int) -> int:
        """Delete all but the newest ``keep`` decisions; return how many went."""
        validate.positive_int("keep", keep)
        with self.session(write=True) as s:
            edge = s.exec(select(Decision.id).order_by(col(Decision.id).desc()).offset(keep - 1).limit(1)).first()
            if edge is None:
                return 0
            return s.execute(delete(Decision).where(col(Decision.id) < edge)).rowcount

    def prune_samples(self, before: float, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Delete samples with ``time < before``; return how many (``dry_run``: only count).

        Deletes in batches of ``batch`` rows, one short transaction each, so other writers
        never wait long for the lock.  Callers choose ``before`` so that the mechanism's
        window is kept (:func:`fawkes.coordinator.retention.prune`).
        """
        return self._prune(Sample, Sample.time, before, dry_run=dry_run, batch=batch)

    def prune_events(self, before: float, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Delete events with ``time < before``; return how many (``dry_run``: only count)."""
        return self._prune(Event, Event.time, before, dry_run=dry_run, batch=batch)

    def count_decisions_beyond(self, keep: int) -> int:
        """How many decisions :meth:`prune_decisions` with ``keep`` would delete."""
        validate.positive_int("keep", keep)
        with self.session() as s:
            return max(0, s.exec(select(func.count()).select_from(Decision)).one() - keep)

    def _prune(self, table, time_col, before: float, *, dry_run: bool, batch: int) -> int:
        validate.optional_number("before", before, minimum=float("-inf"))
        validate.positive_int("batch", batch)
        if dry_run:
            with self.session() as s:
                return s.exec(select(func.count()).select_from(table).where(time_col < before)).one()
        total = 0
        while True:
            with self.session(write=True) as s:
                ids = select(table.id).where(time_col < before).limit(batch)
                n = s.execute(delete(table).where(col(table.id).in_(ids))).rowcount
            total += n
            if n < batch:
                return total

    # ------------------------------------------------------------------ events
    def record_event(self, kind: str, message: str, *, level: str = "info", cluster: str | None = None,
                     node: str | None = None, time: float | None = None) -> Event:
        with self.session(write=True) as s:
            return self._event(s, kind, message, level=level, cluster=cluster, node=node, time=time)

    def events(self, *, cluster: str | None = None, limit: int = 50) -> list[Event]:
        """The last ``limit`` events (of ``cluster``), oldest first."""
        validate.positive_int("limit", limit)
        with self.session() as s:
            q = select(Event)
            if cluster is not None:
                q = q.where(Event.cluster == cluster)
            return list(reversed(s.exec(q.order_by(col(Event.id).desc()).limit(limit)).all()))

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """What ``fawkes status`` shows: hosts, live clusters with nodes by role, queue
        lengths, and the weight/discrimination/target of the latest decision."""
        d = self.latest_decision()
        with self.session() as s:
            clusters = list(s.exec(select(MRCluster).where(col(MRCluster.live_name).is_not(None))
                                   .order_by(MRCluster.queue_seq)))
            roles = s.exec(select(Node.cluster_id, Node.role, Node.state, func.count())
                           .where(col(Node.holds_host).is_not(None))
                           .group_by(Node.cluster_id, Node.role, Node.state)).all()
            jobs = s.exec(select(Job.cluster_id, Job.state, func.count())
                          .where(col(Job.state).not_in(list(JOB_FINISHED))).group_by(Job.cluster_id, Job.state)).all()
            hosts = s.exec(select(Host.state, func.count()).group_by(Host.state)).all()
        queue_pos = {c.id: i + 1 for i, c in enumerate(c for c in clusters if c.state == ClusterState.REQUESTED)}
        rows = []
        for c in clusters:
            by_role = {r.value: 0 for r in Role}
            draining = 0
            for cid, role, state, n in roles:
                if cid == c.id:
                    by_role[role] = by_role.get(role, 0) + n
                    draining += n if state == NodeState.DRAINING else 0
            jstate = {st: n for cid, st, n in jobs if cid == c.id}
            rows.append({
                "name": c.name, "state": c.state, "framework": c.framework, "min_core": c.min_core,
                "nodes": by_role, "held": sum(by_role.values()), "draining": draining,
                "weight": d.weights.get(c.name) if d else None,
                "discrimination": d.discriminations.get(c.name) if d else None,
                "target": d.targets.get(c.name) if d else None,
                "queued_jobs": jstate.get(JobState.QUEUED, 0),
                "running_jobs": jstate.get(JobState.RUNNING, 0) + jstate.get(JobState.DISPATCHED, 0),
                "queue_position": queue_pos.get(c.id),
                "release_requested": c.release_requested_at is not None,
                "state_since": c.state_since,
            })
        return {
            "state": self.display_url,
            "hosts": {st: n for st, n in hosts},
            "tick": d.id if d else None, "decided_at": d.time if d else None, "policy": d.policy if d else None,
            "global_factor": d.global_factor if d else None, "gate_open": d.gate_open if d else None,
            "clusters": rows,
        }

    # ------------------------------------------------------------------ internals
    def _cluster(self, s: Session, name: str, *, live: bool = False) -> MRCluster:
        c = s.exec(select(MRCluster).where(MRCluster.live_name == name)).first()
        if c is None and not live:
            c = s.exec(select(MRCluster).where(MRCluster.name == name).order_by(col(MRCluster.id).desc())).first()
        if c is None:
            known = s.exec(select(MRCluster.id).where(MRCluster.name == name)).first() is not None
            raise FawkesError(f"cluster {name}: " + ("already released" if known else "no such cluster"))
        return c

    def _host(self, s: Session, name: str) -> Host:
        h = s.get(Host, name, populate_existing=True)
        if h is None:
            raise FawkesError(f"host {name}: not in the inventory")
        return h

    def _holder(self, s: Session, host: str) -> str | None:
        """``cluster C (node N, STATE)`` for the live node holding ``host``, else None."""
        row = s.exec(select(MRCluster.name, Node.id, Node.state).join(Node, Node.cluster_id == MRCluster.id)
                     .where(Node.holds_host == host)).first()
        return None if row is None else f"cluster {row[0]} (node {row[1]}, {row[2]})"

    def _owner(self, s: Session, host: str) -> str | None:
        row = s.exec(select(MRCluster.name).join(Node, Node.cluster_id == MRCluster.id)
                     .where(Node.holds_host == host)).first()
        return row

    def _cluster_cas(self, s: Session, c: MRCluster, to: ClusterState, detail: str, now: float) -> None:
        old = ClusterState(c.state)
        check(CLUSTER_TRANSITIONS, "cluster", c.name, old, to)
        values: dict[str, Any] = {"state": to, "state_since": now}
        if to in _CLUSTER_STAMP:
            values[_CLUSTER_STAMP[to]] = now
        if to == ClusterState.RELEASED:
            values["live_name"] = None
        if s.execute(update(MRCluster).where(MRCluster.id == c.id, MRCluster.state == old)
                     .values(**values)).rowcount != 1:
            raise FawkesError(f"cluster {c.name}: changed concurrently; retry")
        s.add(ClusterTransition(cluster_id=c.id, from_state=old, to_state=to, time=now, detail=detail))
        self._event(s, "cluster", f"{old} -> {to}" + (f" ({detail})" if detail else ""), cluster=c.name)
        s.refresh(c)

    def _cancel_queued_jobs(self, s: Session, c: MRCluster, why: str, now: float) -> None:
        s.execute(update(Job).where(Job.cluster_id == c.id, col(Job.state).in_([JobState.QUEUED, JobState.DISPATCHED]))
                  .values(state=JobState.CANCELLED, ended_at=now, detail=why))
        # running jobs whose cancel was requested: the teardown stopped their drivers
        s.execute(update(Job).where(Job.cluster_id == c.id, Job.state == JobState.RUNNING,
                                    col(Job.cancel_requested_at).is_not(None))
                  .values(state=JobState.CANCELLED, ended_at=now, detail=f"cancel requested; {why}"))

    def _event(self, s: Session, kind: str, message: str, *, level: str = "info", cluster: str | None = None,
               node: str | None = None, time: float | None = None) -> Event:
        e = Event(time=self.clock() if time is None else time, level=level, kind=kind, cluster=cluster,
                  node=node, message=message)
        s.add(e)
        return e


def _role(value: Role | str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise FawkesError(f"role: {value!r} is not one of {', '.join(Role)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _host_specs(inventory: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(inventory):
        where = f"inventory[{i}]"
        if not isinstance(item, Mapping):
            raise FawkesError(f"{where}: expected a mapping, got {type(item).__name__}")
        extra = set(item) - {"name", "address", "cores", "memory_mb", "memory"}
        if extra:
            raise FawkesError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}")
        name = validate.host(f"{where}.name", item.get("name"))
        if name in specs:
            raise FawkesError(f"{where}.name: duplicate host {name}")
        address = validate.text(f"{where}.address", item.get("address", name), optional=False)
        cores = validate.positive_int(f"{where}.cores", item.get("cores"))
        memory = validate.positive_int(f"{where}.memory_mb", item.get("memory_mb", item.get("memory", 0)), minimum=0)
        specs[name] = {"address": address, "cores": cores, "memory_mb": memory}
    return specs
