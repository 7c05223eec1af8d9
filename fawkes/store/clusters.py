"""MR-clusters and their nodes: the global FIFO of requests, the cluster lifecycle, and the
nodes (one host lent to one cluster in one role) with theirs.

Every lifecycle move is an edge of :mod:`fawkes.store.lifecycle`'s tables, applied with a
compare-and-set on the old state and recorded as a history row and an event.  See
:mod:`fawkes.store.base` for the transaction discipline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from sqlalchemy import and_, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.mechanism.model import HOLDING_STATES, ClusterState, Role
from fawkes.store import validate
from fawkes.store.base import StoreBase, gc_paused
from fawkes.store.db import fetch_tuples, insert_many
from fawkes.store.lifecycle import (
    CLUSTER_TRANSITIONS,
    NODE_TIMEOUTS,
    NODE_TRANSITIONS,
    HostState,
    JobState,
    NodeState,
    check,
)
from fawkes.store.schema import ClusterTransition, Framework, Host, Job, MRCluster, Node, NodeTransition

class NodeRow(NamedTuple):
    """A node as a snapshot reads it (:meth:`ClustersMixin.nodes_of_live_clusters`)."""

    id: int
    host: str
    holds_host: str | None
    role: str
    state: str
    requested_at: float
    released_at: float | None
    running_tasks: int
    stored_bytes: int
    host_state: str  # the host's HostState
    host_cores: int
    running_at: float | None = None  # when it last became RUNNING (started, or resumed: shrink_mode suspend)
    protected: bool | int = False  # an admin keeps it (v11; 0/1 on SQLite)


_CLUSTER_STAMP = {ClusterState.DEPLOYING: "admitted_at", ClusterState.ACTIVE: "active_at",
                  ClusterState.SAVING: "saving_at", ClusterState.RELEASED: "released_at"}
_NODE_STAMP = {NodeState.RUNNING: "running_at", NodeState.DRAINING: "draining_at",
               NodeState.RELEASED: "released_at"}


class ClustersMixin(StoreBase):
    """MR-clusters and nodes."""

    # ------------------------------------------------------------------ clusters
    def request_cluster(self, name: str, *, framework: str, min_core: int, input_path: str | None = None,
                        expected_duration_s: float | None = None, deadline_s: float | None = None) -> MRCluster:
        """Put a new MR-cluster request at the tail of the global FIFO queue (state REQUESTED).

        ``expected_duration_s`` and ``deadline_s`` (maxT, relative to now) feed the admission
        disciplines (``admission_order``, ``deadline_purge``); neither is needed."""
        validate.name("name", name)
        validate.name("framework", framework)
        validate.positive_int("min_core", min_core)
        validate.text("input", input_path)
        validate.seconds("expected_duration", expected_duration_s)
        validate.seconds("deadline", deadline_s)
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
            return self._enqueue(s, MRCluster(
                name=name, live_name=name, framework=framework, min_core=min_core, state=ClusterState.REQUESTED,
                input_path=input_path, requested_at=now, state_since=now, expected_duration_s=expected_duration_s,
                deadline_s=deadline_s), now, f"requested min_core={min_core}",
                f"requested (framework {framework}, min_core {min_core})")

    def _enqueue(self, s: Session, c: MRCluster, now: float, detail: str, message: str) -> MRCluster:
        """Add request ``c`` (REQUESTED) at the tail of the global FIFO queue, in the caller's transaction."""
        s.add(c)
        try:
            s.flush()
            c.queue_seq = c.id  # FIFO by arrival: ids only grow
            s.add(ClusterTransition(cluster_id=c.id, from_state=None, to_state=c.state, time=now, detail=detail))
            self._event(s, "cluster", message, cluster=c.name)
            s.flush()
        except IntegrityError:
            raise FawkesError(f"cluster {c.name}: already exists") from None
        return c

    def _wake(self, s: Session, c: MRCluster, why: str, now: float) -> MRCluster:
        """Hibernating ``c`` woken (scale to zero): it leaves (RELEASED) and a new incarnation of it is
        requested in the same transaction, at the tail of the global queue with the same framework,
        minimum and input, to restore ``c``'s saved output (``restore_from``) when deployed."""
        self._cluster_cas(s, c, ClusterState.RELEASED, f"woken ({why}): requested again", now)
        return self._enqueue(s, MRCluster(
            name=c.name, live_name=c.name, framework=c.framework, min_core=c.min_core, state=ClusterState.REQUESTED,
            input_path=c.input_path, requested_at=now, state_since=now, expected_duration_s=c.expected_duration_s,
            deadline_s=c.deadline_s, restore_from=c.saved_output), now,
            f"woken from hibernation (min_core={c.min_core})",
            f"requested: woken from hibernation ({why}; min_core {c.min_core}, restores its saved output)")

    def wake_cluster(self, name: str) -> MRCluster:
        """``fawkes cluster wake``: hibernating ``name`` woken without a job (:meth:`_wake`: a new incarnation
        requested at the tail of the queue, which restores its saved output); returns it.  Refused, nothing
        written, unless it hibernates."""
        validate.name("name", name)
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            if c.state != ClusterState.HIBERNATING:
                raise FawkesError(f"cluster {name}: {c.state}, not hibernating")
            return self._wake(s, c, "fawkes cluster wake", now)

    def get_cluster(self, name: str) -> MRCluster:
        """The live cluster called ``name``, else the latest released one."""
        with self.session() as s:
            return self._cluster(s, name)

    def note_stored_baseline(self, name: str, stored: float) -> float | None:
        """Record the live cluster ``name``'s DU baseline, the bytes its file system held at its first
        sample once active, unless it has one already (set once per incarnation, so a restarted
        coordinator keeps it); returns the baseline it has now (None: no live cluster of that name)."""
        stored = validate.optional_number("stored_baseline", stored, finite=True)
        with self.session(write=True) as s:
            s.execute(update(MRCluster).where(MRCluster.live_name == name, col(MRCluster.stored_baseline).is_(None))
                      .values(stored_baseline=float(stored)))
            return s.exec(select(MRCluster.stored_baseline).where(MRCluster.live_name == name)).first()

    def port_slot(self, name: str) -> int:
        """The live cluster ``name``'s block of ports: the one it holds, else the lowest block no live
        cluster holds, recorded now (kept until it is released; the column is UNIQUE, so two writers
        racing for one block cannot both get it: the loser's retry takes the next)."""
        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            if c.port_slot is not None:
                return c.port_slot
            held = set(s.exec(select(MRCluster.port_slot).where(col(MRCluster.port_slot).is_not(None))).all())
            slot = next(i for i in range(len(held) + 1) if i not in held)
            self._cas(s, update(MRCluster).where(MRCluster.id == c.id, col(MRCluster.port_slot).is_(None))
                      .values(port_slot=slot), f"cluster {name}")
            return slot

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
            elif c.state == ClusterState.HIBERNATING:  # holds nothing: released at once (its saved output stays)
                self._cluster_cas(s, c, ClusterState.RELEASED, "released while hibernating", now)
            elif c.release_requested_at is None:
                s.execute(update(MRCluster).where(MRCluster.id == c.id).values(release_requested_at=now))
                s.refresh(c)
                self._event(s, "cluster", "release requested", cluster=name)
            return c

    def record_saved_output(self, name: str, record: dict, message: str, *, level: str = "info") -> MRCluster:
        """Record where SAVING cluster ``name``'s output went (``record``, kept as JSON; before its
        teardown), with an event ``message``."""
        import json

        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            if c.state != ClusterState.SAVING:
                raise FawkesError(f"cluster {name}: {c.state}, not saving")
            s.execute(update(MRCluster).where(MRCluster.id == c.id).values(saved_output=json.dumps(record,
                                                                                                  sort_keys=True)))
            s.refresh(c)
            self._event(s, "cluster", message, cluster=name, level=level)
            return c

    def transition_cluster(self, name: str, to: ClusterState | str, detail: str = "") -> MRCluster:
        """Move live cluster ``name`` along an edge of :data:`CLUSTER_TRANSITIONS`.

        Entering RELEASED is refused while any node still holds a host; it also frees
        the name and cancels jobs that never started.  Entering HIBERNATING is refused the same way;
        jobs still queued then wake it at once (a new incarnation, :meth:`_wake`, which is returned).
        """
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, name, live=True)
            to = ClusterState(to)
            check(CLUSTER_TRANSITIONS, "cluster", name, c.state, to)
            if to in (ClusterState.RELEASED, ClusterState.HIBERNATING):
                held = s.exec(select(func.count()).select_from(Node).where(
                    Node.cluster_id == c.id, col(Node.holds_host).is_not(None))).one()
                if held:
                    raise FawkesError(f"cluster {name}: still holds {held} node(s); release them first")
            if to == ClusterState.RELEASED:
                self._cancel_queued_jobs(s, c, "cluster released", now)
            self._cluster_cas(s, c, to, detail, now)
            if to == ClusterState.HIBERNATING:
                queued = list(s.exec(select(Job.id).where(Job.cluster_id == c.id, Job.state == JobState.QUEUED)))
                new = None
                if queued:  # queued before it went idle and not yet dispatched: they wake it at once
                    new = self._wake(s, c, f"{len(queued)} job(s) queued while it was saving", now)
                    s.execute(update(Job).where(col(Job.id).in_(queued)).values(cluster_id=new.id))
                self._cancel_queued_jobs(s, c, "cluster hibernated", now)  # dispatched ones: as a release
                c = new or c
            return c

    def cluster_history(self, name: str | None = None, *, cluster_id: int | None = None) -> list[ClusterTransition]:
        """The transitions of the cluster ``name`` (the live one, else the latest released), or of the
        cluster row ``cluster_id`` (one incarnation of a name that was requested again)."""
        with self.session() as s:
            if cluster_id is None:
                cluster_id = self._cluster(s, name).id
            return list(s.exec(select(ClusterTransition).where(ClusterTransition.cluster_id == cluster_id)
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
            h = s.get(Host, host)
            owner = self._owner(s, host) if h is not None else None
            _may_allocate(cluster, c.state, host, None if h is None else h.state, owner)
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

    def allocate_nodes(self, grows: Iterable[tuple[str, str, Role | str, str]], *,
                       batch: int = 1000) -> list[int | FawkesError]:
        """Many :meth:`allocate_node` calls at once: ``grows`` are ``(cluster, host, role, detail)``
        steps, taken in order.  Returns, per step, the new node's id or the :class:`FawkesError`
        that refused it; a refused step does not stop the others.

        The same checks and the same rows as one call per step, in one write transaction per
        ``batch`` steps: the clusters are read (on PostgreSQL share-locked) once, the hosts taken
        with one compare-and-set (``UPDATE ... WHERE state = 'free' RETURNING``), the nodes,
        their history rows and events inserted in bulk.  Should the database refuse the bulk
        insert (a race no check foresaw), that batch is redone one step per transaction.
        """
        validate.positive_int("batch", batch)
        steps = list(grows)
        out: list[int | FawkesError] = []
        for i in range(0, len(steps), batch):
            chunk = steps[i:i + batch]
            try:
                with gc_paused():
                    out += self._allocate_batch(chunk)
            except IntegrityError:
                for cluster, host, role, detail in chunk:
                    try:
                        out.append(self.allocate_node(cluster, host, role, detail=detail).id)
                    except FawkesError as exc:
                        out.append(exc)
            except FawkesError as exc:  # the database itself (locked past the busy timeout, gone)
                out += [exc] * len(chunk)
        return out

    def _allocate_batch(self, chunk: list[tuple[str, str, Role | str, str]]) -> list[int | FawkesError]:
        out: list[int | FawkesError | None] = [None] * len(chunk)
        roles: list[Role | None] = []
        for k, (_, _, role, _) in enumerate(chunk):
            try:
                roles.append(_role(role))
            except FawkesError as exc:
                roles.append(None)
                out[k] = exc
        now = self.clock()
        names = {c for c, *_ in chunk}
        hostnames = {h for _, h, *_ in chunk}
        with self.session(write=True) as s:
            live = {c.live_name: c for c in s.exec(select(MRCluster).where(self._in(MRCluster.live_name, names))
                                                   .with_for_update(read=True))}
            missing = names - set(live)
            known = set(s.exec(select(MRCluster.name).where(self._in(MRCluster.name, missing)))) if missing else set()
            hosts = {h: st for h, st in s.execute(select(Host.name, Host.state).where(self._in(Host.name, hostnames)))}
            owners = {h: c for h, c in s.execute(
                select(Node.holds_host, MRCluster.name).join(MRCluster, Node.cluster_id == MRCluster.id)
                .where(self._in(Node.holds_host, hostnames)))}
            take: list[int] = []
            for k, (cluster, host, _, _) in enumerate(chunk):
                if out[k] is not None:
                    continue
                try:
                    c = live.get(cluster)
                    if c is None:
                        raise FawkesError(f"cluster {cluster}: " + ("already released" if cluster in known
                                                                     else "no such cluster"))
                    _may_allocate(cluster, c.state, host, hosts.get(host), owners.get(host))
                except FawkesError as exc:
                    out[k] = exc
                    continue
                hosts[host], owners[host] = HostState.ALLOCATED, cluster  # the next steps see it taken
                take.append(k)
            if take:
                hosts_t = Host.__table__
                won = set(s.execute(update(hosts_t).where(self._in(hosts_t.c.name, [chunk[k][1] for k in take]),
                                                          hosts_t.c.state == HostState.FREE)
                                    .values(state=HostState.ALLOCATED).returning(hosts_t.c.name)).scalars())
                lost = [k for k in take if chunk[k][1] not in won]
                for k in lost:
                    out[k] = FawkesError(f"host {chunk[k][1]}: taken concurrently")
                take = [k for k in take if chunk[k][1] in won]
            if take:
                # one multi-row INSERT; RETURNING order is not guaranteed, the held host names each row
                held = dict(insert_many(s.connection(), Node.__table__, [
                    {"cluster_id": live[chunk[k][0]].id, "host": chunk[k][1], "holds_host": chunk[k][1],
                     "role": roles[k], "state": NodeState.REQUESTED, "requested_at": now, "state_since": now,
                     "config_hash": None, "stored_bytes": 0, "running_tasks": 0, "protected": False} for k in take],
                    returning=("holds_host", "id")))
                ids = [held[chunk[k][1]] for k in take]
                insert_many(s.connection(), NodeTransition.__table__, [
                    {"node_id": nid, "from_state": None, "to_state": NodeState.REQUESTED, "time": now,
                     "detail": chunk[k][3] or f"allocated to {chunk[k][0]} as {roles[k]}"}
                    for k, nid in zip(take, ids)])
                self._events(s, [{"kind": "node", "message": f"{chunk[k][1]} allocated as {roles[k]}",
                                  "cluster": chunk[k][0], "node": chunk[k][1]} for k in take], now)
                for k, nid in zip(take, ids):
                    out[k] = nid
        return out  # type: ignore[return-value]  # every step is decided: a node id or an error

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
            held = n.holds_host is not None  # (the update below synchronizes n)
            check(NODE_TRANSITIONS, "node", f"{node_id} ({n.host})", old, to)
            values = _node_move(to, now)
            if stored_bytes is not None:
                values["stored_bytes"] = stored_bytes
            if config_hash is not None:
                values["config_hash"] = config_hash
            self._cas(s, update(Node).where(Node.id == node_id, Node.state == old).values(**values), f"node {node_id}")
            if to == NodeState.RELEASED and held:  # a suspended node let go of its host earlier
                s.execute(update(Host).where(Host.name == n.host, Host.state == HostState.ALLOCATED)
                          .values(state=HostState.FREE))
            s.add(NodeTransition(node_id=node_id, from_state=old, to_state=to, time=now, detail=detail))
            cname = s.get(MRCluster, n.cluster_id).name
            self._event(s, "node", _node_moved(n.host, old, to, detail),
                        level="warning" if to == NodeState.FAILED else "info", cluster=cname, node=n.host)
            s.refresh(n)
            return n

    def transition_nodes(self, moves: Iterable[tuple[int, NodeState | str, str]], *,
                         batch: int = 1000) -> list[FawkesError | None]:
        """Many :meth:`transition_node` calls at once: ``moves`` are ``(node_id, to, detail)``
        steps, taken in order.  Returns, per step, None when done or the :class:`FawkesError`
        that refused it; a refused step does not stop the others.

        The same checks and rows as one call per step, in one write transaction per ``batch``
        steps: the nodes are read once, moved with one compare-and-set per (old, new) state pair
        (``UPDATE ... WHERE state = old RETURNING``: a node another process moved meanwhile is
        refused alone), their history rows and events inserted in bulk.  A batch naming one node
        twice is done one step per transaction.
        """
        validate.positive_int("batch", batch)
        steps = [(node_id, NodeState(to), detail) for node_id, to, detail in moves]
        out: list[FawkesError | None] = []
        for i in range(0, len(steps), batch):
            chunk = steps[i:i + batch]
            if len({m[0] for m in chunk}) < len(chunk):
                for node_id, to, detail in chunk:
                    try:
                        self.transition_node(node_id, to, detail)
                        out.append(None)
                    except FawkesError as exc:
                        out.append(exc)
                continue
            try:
                with gc_paused():
                    out += self._transition_batch(chunk)
            except FawkesError as exc:  # the database itself (locked past the busy timeout, gone)
                out += [exc] * len(chunk)
        return out

    def _transition_batch(self, chunk: list[tuple[int, NodeState, str]]) -> list[FawkesError | None]:
        out: list[FawkesError | None] = [None] * len(chunk)
        now = self.clock()
        nodes_t = Node.__table__
        with self.session(write=True) as s:
            rows = {r.id: r for r in s.execute(
                select(Node.id, Node.host, Node.state, MRCluster.name, Node.holds_host)
                .join(MRCluster, Node.cluster_id == MRCluster.id)
                .where(self._in(Node.id, [m[0] for m in chunk])))}
            groups: dict[tuple[NodeState, NodeState], list[int]] = {}
            for k, (node_id, to, _) in enumerate(chunk):
                r = rows.get(node_id)
                try:
                    if r is None:
                        raise FawkesError(f"node {node_id}: not found")
                    check(NODE_TRANSITIONS, "node", f"{node_id} ({r.host})", NodeState(r.state), to)
                except FawkesError as exc:
                    out[k] = exc
                    continue
                groups.setdefault((NodeState(r.state), to), []).append(k)
            done: list[int] = []
            for (old, to), ks in groups.items():
                moved = set(s.execute(update(nodes_t).where(self._in(nodes_t.c.id, [chunk[k][0] for k in ks]),
                                                            nodes_t.c.state == old)
                                      .values(**_node_move(to, now)).returning(nodes_t.c.id)).scalars())
                for k in ks:
                    if chunk[k][0] in moved:
                        done.append(k)
                    else:
                        out[k] = FawkesError(f"node {chunk[k][0]}: changed concurrently; retry")
                held = [rows[i].host for i in moved if rows[i].holds_host is not None]
                if to == NodeState.RELEASED and held:  # a suspended node let go of its host earlier
                    hosts_t = Host.__table__
                    s.execute(update(hosts_t).where(self._in(hosts_t.c.name, held),
                                                    hosts_t.c.state == HostState.ALLOCATED).values(state=HostState.FREE))
            moves = [(rows[chunk[k][0]], *chunk[k]) for k in sorted(done)]  # history and events in step order
            insert_many(s.connection(), NodeTransition.__table__, [
                {"node_id": node_id, "from_state": r.state, "to_state": to, "time": now, "detail": detail}
                for r, node_id, to, detail in moves])
            self._events(s, [{"kind": "node", "message": _node_moved(r.host, NodeState(r.state), to, detail),
                              "level": "warning" if to == NodeState.FAILED else "info", "cluster": r.name,
                              "node": r.host} for r, node_id, to, detail in moves], now)
        return out

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

    def live_nodes_by_cluster(self) -> dict[str, list[Node]]:
        """Every live cluster's nodes that hold a host, by cluster name, oldest first: what
        ``list_nodes(name)`` returns for each, in one query (the coordinator's fast step and sampler
        visit every cluster every few seconds: one query per cluster does not scale)."""
        return self._rows_by_cluster(
            select(MRCluster.live_name.label("_cluster"), *Node.__table__.columns)
            .join(MRCluster, Node.cluster_id == MRCluster.id)
            .where(col(MRCluster.live_name).is_not(None), col(Node.holds_host).is_not(None))
            .order_by(Node.id))

    def live_clusters(self) -> list[MRCluster]:
        """``list_clusters(include_released=False)`` as read-only rows (the cluster's columns as
        attributes; no ORM objects): what the coordinator's steps read every few seconds."""
        with self.session() as s:
            return list(s.connection().execute(select(*MRCluster.__table__.columns)
                                               .where(col(MRCluster.live_name).is_not(None))
                                               .order_by(MRCluster.queue_seq)))

    def nodes_of_live_clusters(self, *, released_after: float | None = None) -> dict[str, list[NodeRow]]:
        """The nodes of every live cluster, by cluster name, oldest first: one query, light
        :class:`NodeRow` tuples (the node columns a snapshot reads, and its host's state and
        cores), not ORM objects.  All the nodes each ever
        had (like ``list_nodes(name, live=False)``), or with ``released_after`` only those that
        hold a host or were released after that time (an interval's allocation history needs no
        older ones)."""
        q = (select(MRCluster.live_name.label("cluster"), Node.id, Node.host, Node.holds_host, Node.role, Node.state,
                    Node.requested_at, Node.released_at, Node.running_tasks, Node.stored_bytes,
                    Host.state.label("host_state"), Host.cores.label("host_cores"), Node.running_at,
                    Node.protected)
             .join(MRCluster, Node.cluster_id == MRCluster.id).join(Host, Node.host == Host.name)
             .where(col(MRCluster.live_name).is_not(None))
             .order_by(Node.id))  # grouped below: each cluster's nodes oldest first, no sort on SQLite
        if released_after is not None:
            # the ids first, each term by its index (holds_host, ix_nodes_released_at: v13), not a read of
            # every node the live clusters ever had (released nodes are never deleted); the same rows as
            # ``holds_host IS NOT NULL OR released_at IS NULL OR released_at > released_after``
            ids = (select(Node.id).where(col(Node.holds_host).is_not(None))
                   .union_all(select(Node.id).where(or_(col(Node.released_at).is_(None),
                                                        col(Node.released_at) > released_after))))
            q = q.where(col(Node.id).in_(ids))
        out: dict[str, list[NodeRow]] = {}
        make = NodeRow._make
        with self.session() as s, gc_paused():
            for r in fetch_tuples(s.connection(), q):  # numbers and strings: nothing to convert
                out.setdefault(r[0], []).append(make(r[1:]))
        return out

    def protect_node(self, node_id: int | None = None, *, host: str | None = None, protected: bool = True) -> Node:
        """Keep a node from being removed by a resize (``protected``), or let it go again: the node
        ``node_id``, or the live node holding ``host``.  It still counts for its cluster; releasing the
        whole cluster still releases it (issue 27)."""
        if (node_id is None) == (host is None):
            raise ValueError("protect_node: a node id or a host")
        if node_id is not None:
            validate.positive_int("node", node_id)
        else:
            validate.host("host", host)
        with self.session(write=True) as s:
            n = s.get(Node, node_id) if node_id is not None else s.exec(
                select(Node).where(Node.holds_host == host)).first()
            if n is None or n.holds_host is None:
                what = f"node {node_id}" if node_id is not None else f"host {host}"
                raise FawkesError(f"{what}: " + ("no such node" if n is None and node_id is not None else
                                                 "holds no live node" if n is None else "already released"))
            if n.protected != protected:
                n.protected = protected
                s.add(n)
                c = s.get(MRCluster, n.cluster_id)
                self._event(s, "node", f"node {n.id} on {n.host} " + ("protected: no resize removes it" if protected
                                                                      else "no longer protected"),
                            cluster=c.name if c else None, node=n.host)
            s.flush()
            return n

    def live_node_ids(self, clusters: Iterable[str]) -> dict[tuple[str, str], tuple[int, str]]:
        """``(cluster, host) -> (node id, state)`` of the nodes holding a host in the live ``clusters``
        (one query; what a plan's shrinks name)."""
        names = set(clusters)
        if not names:
            return {}
        with self.session() as s:
            return {(c, h): (i, st) for c, h, i, st in s.execute(
                select(MRCluster.live_name, Node.host, Node.id, Node.state)
                .join(MRCluster, Node.cluster_id == MRCluster.id)
                .where(self._in(MRCluster.live_name, names), col(Node.holds_host).is_not(None)))}

    def node_history(self, node_id: int) -> list[NodeTransition]:
        with self.session() as s:
            return list(s.exec(select(NodeTransition).where(NodeTransition.node_id == node_id)
                               .order_by(NodeTransition.id)))

    def stuck_nodes(self, now: float | None = None,
                    timeouts: Mapping[NodeState, float | None] = NODE_TIMEOUTS) -> list[Node]:
        """Live nodes that have been in their state longer than its timeout."""
        now = self.clock() if now is None else now
        late = [and_(Node.state == st, Node.state_since < now - t) for st, t in timeouts.items() if t is not None]
        if not late:
            return []
        with self.session() as s:  # only the nodes past their state's timeout, not every live node
            nodes = s.exec(select(Node).where(col(Node.holds_host).is_not(None), or_(*late)).order_by(Node.id)).all()
        return [n for n in nodes if now - n.state_since > timeouts[NodeState(n.state)]]

    # ------------------------------------------------------------------ internals
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
            values["port_slot"] = None  # its ports are free for the next cluster
        self._cas(s, update(MRCluster).where(MRCluster.id == c.id, MRCluster.state == old).values(**values),
                  f"cluster {c.name}")
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


def _role(value: Role | str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise FawkesError(f"role: {value!r} is not one of {', '.join(Role)}") from None




_TAKING = HOLDING_STATES - {ClusterState.SAVING}


def _may_allocate(cluster: str, cluster_state: str, host: str, host_state: str | None, owner: str | None) -> None:
    """Refuse giving ``host`` (state ``host_state``, None if unknown; held by cluster ``owner``)
    to ``cluster`` in ``cluster_state``: the checks of an allocation, in their order."""
    if ClusterState(cluster_state) not in _TAKING:
        raise FawkesError(f"cluster {cluster}: cannot take nodes while {cluster_state}")
    if host_state is None:
        raise FawkesError(f"host {host}: not in the inventory")
    if owner is not None:
        raise FawkesError(f"host {host}: already held by cluster {owner}")
    if host_state != HostState.FREE:
        raise FawkesError(f"host {host}: not free ({host_state})")


def _node_move(to: NodeState, now: float) -> dict[str, Any]:
    """The columns a node's move to ``to`` at ``now`` sets (RELEASED drops the hold)."""
    values: dict[str, Any] = {"state": to, "state_since": now}
    if to in _NODE_STAMP:
        values[_NODE_STAMP[to]] = now
    if to == NodeState.RELEASED:
        values["holds_host"] = None
    return values


def _node_moved(host: str, old: NodeState, to: NodeState, detail: str) -> str:
    return f"{host}: {old} -> {to}" + (f" ({detail})" if detail else "")
