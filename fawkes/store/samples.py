"""What the control loop reads and leaves: metric samples, one decision per tick, and the
controller memory carried from step to step (written with its tick's decision in one
transaction).  See :mod:`fawkes.store.base` for the transaction discipline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterMetrics
from fawkes.store import validate
from fawkes.store.base import StoreBase, gc_paused
from fawkes.store.db import fetch_tuples, insert_many
from fawkes.store.jobs import raise_tasks_seen
from fawkes.store.schema import ControllerMemory, DecisionRecord, Job, MRCluster, Node, Sample, SamplerMemory

_METRIC_FIELDS = tuple(f.name for f in dataclasses.fields(ClusterMetrics))
assert _METRIC_FIELDS[-1] == "loading"  # the only boolean: samples_of_live_clusters converts it


@dataclasses.dataclass(frozen=True)
class SampleWrite:
    """What the sampler writes for one cluster in one step (:meth:`SamplesMixin.record_samples`)."""

    cluster: str
    metrics: ClusterMetrics
    tasks_seen: Mapping[int, int] = dataclasses.field(default_factory=dict)  # job id -> tasks its driver listed
    stored_by_node: Mapping[int, int] = dataclasses.field(default_factory=dict)  # node id -> bytes it stores
    #: job id -> ``{"master": (tasks, seconds), "other": (tasks, seconds)}``: where its ended tasks ran
    task_time: Mapping[int, Mapping[str, tuple[int, float]]] = dataclasses.field(default_factory=dict)
    running_by_node: Mapping[int, int] = dataclasses.field(default_factory=dict)  # node id -> tasks running there

    def __post_init__(self) -> None:  # a bad count refuses this cluster's write, not the step's
        for n in self.tasks_seen.values():
            validate.positive_int("tasks_seen", n, minimum=0)
        for b in self.stored_by_node.values():
            validate.positive_int("stored_bytes", b, minimum=0)
        for n in self.running_by_node.values():
            validate.positive_int("running_tasks", n, minimum=0)
        for where in self.task_time.values():
            if set(where) - {"master", "other"}:
                raise FawkesError(f"task_time: expected master and other, got {sorted(where)}")
            for n, secs in where.values():
                validate.positive_int("task_time tasks", n, minimum=0)
                if secs is None:
                    raise FawkesError("task_time seconds: must be a number >= 0 and finite, got None")
                validate.optional_number("task_time seconds", secs, finite=True)


class SamplesMixin(StoreBase):
    """Samples, decisions and the controller memory."""

    # ------------------------------------------------------------------ samples
    def record_sample(self, cluster: str, metrics: ClusterMetrics) -> None:
        with self.session(write=True) as s:
            c = self._cluster(s, cluster, live=True)
            s.add(Sample(cluster_id=c.id, **dataclasses.asdict(metrics)))

    def record_samples(self, batch: Iterable[SampleWrite]) -> list[str]:
        """One sampler step's writes, in one transaction: each live cluster's sample, its running jobs'
        task counts (raised, never lowered: :meth:`note_job_tasks`), its nodes' stored bytes (node id ->
        bytes) and the tasks running on them (node id -> tasks).  A cluster no longer live (released
        meanwhile) is skipped: returned as a problem, one line each, the others written (as
        :meth:`record_sample` for each would have done)."""
        batch = list(batch)
        if not batch:
            return []
        names = {w.cluster for w in batch}
        problems = []
        with self.session(write=True) as s:
            ids = dict(s.execute(select(MRCluster.live_name, MRCluster.id)
                                 .where(col(MRCluster.live_name).in_(sorted(names)))).all())
            rows, seen, stored, task_time, running = [], {}, {}, {}, {}
            for w in batch:
                if w.cluster not in ids:
                    problems.append(f"cluster {w.cluster}: already released")
                    continue
                rows.append({"cluster_id": ids[w.cluster], **dataclasses.asdict(w.metrics)})
                seen.update(w.tasks_seen)
                stored.update(w.stored_by_node)
                task_time.update(w.task_time)
                running.update(w.running_by_node)
            insert_many(s.connection(), Sample.__table__, rows)
            raise_tasks_seen(s, seen)
            for job_id, where in task_time.items():  # the driver's running totals: the latest replaces
                s.execute(update(Job).where(Job.id == job_id).values(
                    task_time={k: [int(n), round(float(secs), 3)] for k, (n, secs) in sorted(where.items())}))
            for node_id, b in stored.items():
                s.execute(update(Node).where(Node.id == node_id).values(stored_bytes=b))
            for node_id, n in running.items():
                s.execute(update(Node).where(Node.id == node_id).values(running_tasks=n))
        return problems

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

    def latest_sample_time(self) -> float | None:
        """When the newest sample of any cluster was taken (None: no sample); ``ix_samples_time`` answers it."""
        with self.session() as s:
            return s.exec(select(func.max(Sample.time))).one()

    def samples_of_live_clusters(self, *, since: float, until: float,
                                 clusters: Iterable[str] | None = None) -> dict[str, list[ClusterMetrics]]:
        """Samples with ``since < time <= until`` of every live cluster (or only of the live
        ``clusters``), by cluster name, in time order: what :meth:`samples` gives one cluster,
        for all of them in one query.  Clusters without samples are left out."""
        names = None if clusters is None else set(clusters)
        if names is not None and not names:
            return {}
        cols = [Sample.__table__.c[f] for f in _METRIC_FIELDS]
        q = (select(MRCluster.live_name, *cols).join(MRCluster, Sample.cluster_id == MRCluster.id)
             .where(col(MRCluster.live_name).is_not(None), Sample.time > since, Sample.time <= until)
             .order_by(Sample.time, Sample.id))  # grouped below; ix_samples_time gives this order
        if names is not None:
            q = q.where(self._in(MRCluster.live_name, names))
        out: dict[str, list[ClusterMetrics]] = {}
        with self.session() as s, gc_paused():
            for row in fetch_tuples(s.connection(), q):  # the driver's values; `loading` made a bool
                out.setdefault(row[0], []).append(ClusterMetrics(*row[1:-1], bool(row[-1])))
        return out

    # ------------------------------------------------------------------ decisions
    def record_decision(self, *, policy: str, inputs: Mapping[str, Any], weights: Mapping[str, float],
                        discriminations: Mapping[str, float], global_factor: float, gate_open: bool,
                        targets: Mapping[str, int], plan: Mapping[str, Any], reason: str,
                        time: float | None = None, memory: Mapping[str, Any] | None = None) -> int:
        """Store one tick's decision (and the controller memory it leaves, in the same
        transaction); return its tick number (used by ``fawkes explain``)."""
        d = DecisionRecord(time=self.clock() if time is None else time, policy=policy, inputs=dict(inputs),
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

    def save_usage_windows(self, windows: Mapping[str, Any], time: float | None = None) -> None:
        """Store the sampler's usage windows (:meth:`fawkes.coordinator.usage.NodeWindows.to_doc`)."""
        when = self.clock() if time is None else time
        with self.session(write=True) as s:
            row = s.get(SamplerMemory, 1)
            if row is None:
                s.add(SamplerMemory(id=1, time=when, windows=dict(windows)))
            else:
                row.time, row.windows = when, dict(windows)
                s.add(row)

    def load_usage_windows(self) -> dict[str, Any] | None:
        """The usage windows last stored (``None`` before the first save)."""
        with self.session() as s:
            row = s.get(SamplerMemory, 1)
            return row.windows if row is not None else None

    def decision(self, tick: int | None = None) -> DecisionRecord:
        """DecisionRecord ``tick`` (the latest if None)."""
        with self.session() as s:
            d = s.get(DecisionRecord, tick) if tick is not None else \
                s.exec(select(DecisionRecord).order_by(col(DecisionRecord.id).desc()).limit(1)).first()
            if d is None:
                raise FawkesError(f"tick {tick}: no such decision" if tick is not None
                                  else "no decision recorded yet (is the coordinator running?)")
            return d

    def latest_decision(self) -> DecisionRecord | None:
        with self.session() as s:
            return s.exec(select(DecisionRecord).order_by(col(DecisionRecord.id).desc()).limit(1)).first()

    def recent_decisions(self, limit: int = 50, *, since: float | None = None) -> list[DecisionRecord]:
        """The newest ``limit`` decisions (with ``time > since`` if given), oldest first."""
        validate.positive_int("limit", limit)
        with self.session() as s:
            q = select(DecisionRecord)
            if since is not None:
                q = q.where(DecisionRecord.time > since)
            return list(reversed(s.exec(q.order_by(col(DecisionRecord.id).desc()).limit(limit)).all()))

    def recent_decision_ids(self, limit: int = 50, *, since: float | None = None) -> list[tuple[int, float]]:
        """The (id, time) of :meth:`recent_decisions` (same order), without reading the decisions."""
        validate.positive_int("limit", limit)
        with self.session() as s:
            q = select(DecisionRecord.id, DecisionRecord.time)
            if since is not None:
                q = q.where(DecisionRecord.time > since)
            return [tuple(r) for r in reversed(s.exec(q.order_by(col(DecisionRecord.id).desc()).limit(limit)).all())]

    def decisions_by_id(self, ids: Iterable[int]) -> list[DecisionRecord]:
        """The decisions with these ids (those still stored), oldest first."""
        ids = list(ids)
        if not ids:
            return []
        with self.session() as s:
            return list(s.exec(select(DecisionRecord).where(self._in(DecisionRecord.id, ids))
                               .order_by(col(DecisionRecord.id))).all())

    def prune_decisions(self, keep: int) -> int:
        """Delete all but the newest ``keep`` decisions; return how many went."""
        validate.positive_int("keep", keep)
        with self.session(write=True) as s:
            edge = s.exec(select(DecisionRecord.id).order_by(col(DecisionRecord.id).desc())
                          .offset(keep - 1).limit(1)).first()
            if edge is None:
                return 0
            return s.execute(delete(DecisionRecord).where(col(DecisionRecord.id) < edge)).rowcount

    def prune_samples(self, before: float, *, dry_run: bool = False, batch: int = 5000) -> int:
        """Delete samples with ``time < before``; return how many (``dry_run``: only count).

        Deletes in batches of ``batch`` rows, one short transaction each, so other writers
        never wait long for the lock.  Callers choose ``before`` so that the mechanism's
        window is kept (:func:`fawkes.coordinator.retention.prune`).
        """
        return self._prune(Sample, Sample.time, before, dry_run=dry_run, batch=batch)

    def count_decisions_beyond(self, keep: int) -> int:
        """How many decisions :meth:`prune_decisions` with ``keep`` would delete."""
        validate.positive_int("keep", keep)
        with self.session() as s:
            return max(0, s.exec(select(func.count()).select_from(DecisionRecord)).one() - keep)
