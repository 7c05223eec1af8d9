"""What the sampler needs of each live cluster's finished jobs, kept up to date incrementally.

A sample counts the cluster's succeeded and failed jobs (``completed_jobs``), their tasks (TT counts
tasks since the deployment), and, per program, the most tasks a run of it had (what a job of it not
started yet is counted for: :func:`~fawkes.store.jobs.tasks_learned`).  Reading every finished job of
every cluster at each sample grows with the state's history (jobs are never deleted); this reads, each
time, only the jobs above a high-water id: every job at or below it has finished (or belongs to a
released cluster), and a finished job never changes again.  The ids counted above the mark are kept
until the mark passes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fawkes.store.jobs import job_program


@dataclass
class Tally:
    jobs: int = 0
    tasks: int = 0
    learned: dict[str, int] = field(default_factory=dict)  # program -> most tasks a finished run had

    @classmethod
    def of(cls, jobs) -> "Tally":
        """The tally of these finished jobs."""
        t = cls()
        for j in jobs:
            t.add(j)
        return t

    def add(self, j) -> None:
        self.jobs += 1
        self.tasks += j.tasks_seen or 0
        if j.tasks_seen:
            prog = job_program(j)
            self.learned[prog] = max(self.learned.get(prog, 0), j.tasks_seen)


class FinishedJobs:
    def __init__(self) -> None:
        self.mark = 0  # every job with an id <= mark is finished (or no longer of a live cluster)
        self.counted: set[int] = set()  # finished jobs above the mark, already in a tally
        self.tallies: dict[int, Tally] = {}  # cluster id (one incarnation) -> its tally

    def refresh(self, store, live: Mapping[str, int]) -> dict[str, Tally]:
        """Fold in the jobs finished since the last call; the tally of each of the ``live`` clusters
        (name -> cluster id, as just read), by name.  Tallies of clusters no longer live are dropped."""
        jobs, low = store.finished_jobs_after(self.mark)
        for j in jobs:
            if j.id not in self.counted:
                self.counted.add(j.id)
                self.tallies.setdefault(j.cluster_id, Tally()).add(j)
        top = max((j.id for j in jobs), default=self.mark)
        self.mark = max(self.mark, min(top, low - 1) if low is not None else top)
        self.counted = {i for i in self.counted if i > self.mark}
        ids = set(live.values())
        for cid in [k for k in self.tallies if k not in ids]:
            del self.tallies[cid]
        return {name: self.tallies[cid] for name, cid in live.items() if cid in self.tallies}
