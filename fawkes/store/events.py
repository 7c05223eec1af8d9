"""The operator's log (events, written by every lifecycle move in its own transaction) and
the operator's view (``fawkes status``).  See :mod:`fawkes.store.base` for the transaction
discipline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from fawkes.mechanism.model import ClusterState, Role
from fawkes.store import validate
from fawkes.store.base import StoreBase
from fawkes.store.lifecycle import JOB_UNFINISHED, JobState, NodeState
from fawkes.store.schema import DecisionRecord, Event, Framework, Host, Job, MRCluster, Node


class EventsMixin(StoreBase):
    """Events and status."""

    # ------------------------------------------------------------------ events
    def record_event(self, kind: str, message: str, *, level: str = "info", cluster: str | None = None,
                     node: str | None = None, time: float | None = None) -> Event:
        with self.session(write=True) as s:
            return self._event(s, kind, message, level=level, cluster=cluster, node=node, time=time)

    def events(self, *, cluster: str | None = None, limit: int = 50, after: int | None = None) -> list[Event]:
        """The last ``limit`` events (of ``cluster``), oldest first.  With ``after`` (an event id):
        the first ``limit`` events since that one, oldest first (``fawkes events --follow``)."""
        validate.positive_int("limit", limit)
        with self.session() as s:
            q = select(Event)
            if cluster is not None:
                q = q.where(Event.cluster == cluster)
            if after is not None:
                return list(s.exec(q.where(col(Event.id) > after).order_by(col(Event.id)).limit(limit)).all())
            return list(reversed(s.exec(q.order_by(col(Event.id).desc()).limit(limit)).all()))

    def record_events(self, kind: str, messages: Iterable[str], *, level: str = "info",
                      time: float | None = None) -> int:
        """Record several events of one kind in one transaction (a plan's problems, say); return
        how many."""
        rows = [{"kind": kind, "message": m, "level": level} for m in messages]
        if rows:
            with self.session(write=True) as s:
                self._events(s, rows, self.clock() if time is None else time)
        return len(rows)

    def prune_events(self, before: float, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Delete events with ``time < before``; return how many (``dry_run``: only count)."""
        return self._prune(Event, Event.time, before, dry_run=dry_run, batch=batch)

    # ------------------------------------------------------------------ status
    def status(self) -> dict[str, Any]:
        """What ``fawkes status`` shows: hosts, live clusters with nodes by role, queue
        lengths, and the weight/discrimination/target of the latest decision."""
        with self.session() as s:
            d = s.exec(select(DecisionRecord).order_by(col(DecisionRecord.id).desc()).limit(1)).first()
            clusters = list(s.exec(select(MRCluster).where(col(MRCluster.live_name).is_not(None))
                                   .order_by(MRCluster.queue_seq)))
            roles = s.exec(select(Node.cluster_id, Node.role, Node.state, func.count())
                           .where(col(Node.holds_host).is_not(None))
                           .group_by(Node.cluster_id, Node.role, Node.state)).all()
            # a suspended worker's node lets go of its host (holds_host NULL): counted apart
            parked = dict(s.exec(select(Node.cluster_id, func.count())
                                 .where(col(Node.state).in_([NodeState.SUSPENDED, NodeState.LENT]))
                                 .group_by(Node.cluster_id)).all())
            # IN the unfinished states, not NOT IN the finished ones: an index range (ix_jobs_state_cluster),
            # not a read of every job ever submitted
            jobs = s.exec(select(Job.cluster_id, Job.state, func.count())
                          .where(col(Job.state).in_(JOB_UNFINISHED)).group_by(Job.cluster_id, Job.state)).all()
            hosts = s.exec(select(Host.state, func.count()).group_by(Host.state)).all()
            kinds = dict(s.exec(select(Framework.name, Framework.kind)).all())
        queue_pos = {c.id: i + 1 for i, c in enumerate(c for c in clusters if c.state == ClusterState.REQUESTED)}
        roles_of: dict[int, list[tuple[str, str, int]]] = {}
        for cid, role, state, n in roles:
            roles_of.setdefault(cid, []).append((role, state, n))
        jobs_of: dict[int, dict[str, int]] = {}
        for cid, st, n in jobs:
            jobs_of.setdefault(cid, {})[st] = n
        rows = []
        for c in clusters:
            by_role = {r.value: 0 for r in Role}
            draining = 0
            for role, state, n in roles_of.get(c.id, ()):
                by_role[role] = by_role.get(role, 0) + n
                draining += n if state == NodeState.DRAINING else 0
            jstate = jobs_of.get(c.id, {})
            rows.append({
                "name": c.name, "state": c.state, "framework": c.framework, "kind": kinds.get(c.framework),
                "min_core": c.min_core,
                "nodes": by_role, "held": sum(by_role.values()), "draining": draining,
                "suspended": parked.get(c.id, 0),
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
