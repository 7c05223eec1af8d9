"""MR-jobs: one FIFO queue per cluster, the job lifecycle, and user cancels.

A job's moves are compare-and-set updates on its state (:data:`~fawkes.store.lifecycle.JOB_TRANSITIONS`);
a cancel of a started job is a request the coordinator carries out.  See
:mod:`fawkes.store.base` for the transaction discipline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.mechanism.model import ClusterState
from fawkes.store import validate
from fawkes.store.base import StoreBase
from fawkes.store.lifecycle import (CLUSTER_ACCEPTING_JOBS, JOB_FINISHED, JOB_TRANSITIONS, JOB_UNFINISHED, JobState,
                                    check)
from fawkes.store.schema import Job, MRCluster


def job_program(job) -> str:
    """A job's application: its program (argv[0])."""
    return job.argv[0] if job.argv else ""


def tasks_learned(jobs) -> dict[str, int]:
    """Per program, the most tasks a run of it reported (``tasks_seen``, stored with the job: survives
    restarts): what the sampler counts for a job of it whose tasks it has not seen yet."""
    out: dict[str, int] = {}
    for j in jobs:
        if j.tasks_seen:
            out[job_program(j)] = max(out.get(job_program(j), 0), j.tasks_seen)
    return out

_JOB_STAMP = {JobState.DISPATCHED: "dispatched_at", JobState.RUNNING: "started_at",
              JobState.SUCCEEDED: "ended_at", JobState.FAILED: "ended_at", JobState.CANCELLED: "ended_at"}


class JobsMixin(StoreBase):
    """MR-jobs."""

    # ------------------------------------------------------------------ jobs
    def submit_job(self, cluster: str, argv: Sequence[str], *, input_path: str | None = None,
                   input_bytes: int | None = None, ref_runtime: float | None = None) -> Job:
        """Append a job to ``cluster``'s FIFO queue (state QUEUED); return it (with its id)."""
        argv = validate.argv("app", argv)
        validate.text("input", input_path)
        if input_bytes is not None:
            validate.positive_int("input_bytes", input_bytes, minimum=0)
        validate.optional_number("ref_runtime", ref_runtime, finite=True)
        now = self.clock()
        with self.session(write=True) as s:
            c = self._cluster(s, cluster, live=True)
            if ClusterState(c.state) not in CLUSTER_ACCEPTING_JOBS or c.release_requested_at is not None:
                why = "release requested" if c.release_requested_at is not None else c.state
                raise FawkesError(f"cluster {cluster}: not accepting jobs ({why})")
            if c.state == ClusterState.HIBERNATING:  # scale to zero: the job wakes it (a new incarnation)
                c = self._wake(s, c, "a job was submitted", now)
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

    def unfinished_jobs_by_cluster(self) -> dict[str, list[Job]]:
        """Every live cluster's unfinished jobs (queued, dispatched, running), by cluster name, in
        submission order: one query (by the jobs' state index) for what ``list_jobs(name, states=...)``
        gives per cluster."""
        return self._rows_by_cluster(
            select(MRCluster.live_name.label("_cluster"), *Job.__table__.columns)
            .join(MRCluster, Job.cluster_id == MRCluster.id)
            .where(col(Job.state).in_(JOB_UNFINISHED), col(MRCluster.live_name).is_not(None))
            .order_by(Job.id))

    def finished_jobs_after(self, job_id: int) -> tuple[list[Job], int | None]:
        """The succeeded and failed jobs of the live clusters with an id above ``job_id``, in id order;
        and the lowest id of a job not finished yet (any cluster; None: none).
        What a reader that counts finished jobs reads each time, and where it may start next."""
        with self.session() as s:
            # the lowest unfinished id first: a job finishing between the two reads (each its own snapshot
            # on PostgreSQL) is then either read below or left above the mark the caller takes
            low = s.exec(select(func.min(Job.id)).where(col(Job.state).in_(JOB_UNFINISHED))).first()
            jobs = s.exec(select(Job).join(MRCluster, Job.cluster_id == MRCluster.id)
                          .where(Job.id > job_id, col(Job.state).in_([JobState.SUCCEEDED, JobState.FAILED]),
                                 col(MRCluster.live_name).is_not(None))
                          .order_by(Job.id)).all()
        return list(jobs), low

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
            self._cas(s, update(Job).where(Job.id == job_id, Job.state == old).values(**values), f"job {job_id}")
            if to is JobState.FAILED:  # the operator's log (and notify: job_failed)
                self._event(s, "job", f"job {job_id} failed" + (f": {detail}" if detail else ""), level="warning",
                            cluster=s.get(MRCluster, j.cluster_id).name)
            s.refresh(j)
            return j

    def note_job_tasks(self, seen: dict[int, int]) -> None:
        """Raise jobs' ``tasks_seen`` to the counts their drivers reported (never lowers it)."""
        if not seen:
            return
        for n in seen.values():
            validate.positive_int("tasks_seen", n, minimum=0)
        with self.session(write=True) as s:
            raise_tasks_seen(s, seen)

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


def raise_tasks_seen(s: Session, seen: Mapping[int, int]) -> None:
    """In the caller's transaction: each job's ``tasks_seen`` raised to its (validated) count, never lowered
    (:meth:`JobsMixin.note_job_tasks`, :meth:`~fawkes.store.samples.SamplesMixin.record_samples`)."""
    for job_id, n in seen.items():
        s.execute(update(Job).where(Job.id == job_id, func.coalesce(Job.tasks_seen, -1) < n).values(tasks_seen=n))
