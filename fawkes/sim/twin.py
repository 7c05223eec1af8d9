"""The simulator as a twin of the live service: how the coordinator runs jobs, on top of the slot model.

The live dispatcher (fawkes/coordinator/dispatch.py) runs **one job at a time** per MR-cluster
(``max_running_jobs`` 1) and a job's tasks start only after its driver and executors are up (on a
CPU-limited lab host, tens of seconds: ``job_startup_s``); the next job is launched once the
previous one has ended.  The thesis' Hadoop-1 model (fawkes/sim/cluster.py) instead starts every
submitted job's tasks at once, FIFO over the free slots, and adds ``job_overhead_s`` after the
last task.  With a queue of k jobs the difference is (k - 1) start-ups per job.

:class:`TwinCluster` keeps the model's scheduling and adds the gate: a submitted job is counted
in the cluster's demand at once (as the sampler counts a queued job), but its tasks become
schedulable ``job_startup_s`` after the previous job ended (or after its submission when none
runs), and with ``max_running_jobs`` n at most n jobs are between dispatch and end.  The sampler
counts a job that is not running yet as the live one does: the tasks an earlier job of the cluster
had, at least one per input split (:meth:`TwinSimulator._measure`).  Both are
:class:`~fawkes.sim.costs.CostModel` fields; at their defaults (0) the twin is the plain model.

Used by :func:`run_twin` (``fawkes simulate --cost-file`` when the file sets either field, and the
demo's replay).  The gate belongs in fawkes/sim/cluster.py; it lives here until that file's owner
takes it (docs/live.md).
"""

from __future__ import annotations

import time
from bisect import insort
from collections import deque

from fawkes.mechanism.model import ClusterState
from fawkes.sim.cluster import Job, SimCluster, _fifo
from fawkes.sim.engine import EV_CALL, Simulator

SPLIT = 128 * 1024 * 1024  # the live sampler's input split (fawkes/coordinator/sampler.py)


def twin_fields_set(cost) -> bool:
    return bool(cost.max_running_jobs) or cost.job_startup_s > 0


class TwinCluster(SimCluster):
    """A SimCluster whose jobs are dispatched like the live coordinator's (see the module doc)."""

    def __init__(self, sim, spec):
        super().__init__(sim, spec)
        self.waiting: deque[Job] = deque()  # submitted, not dispatched
        self.dispatched: set[int] = set()  # job ids between dispatch and end (incl. start-up)
        self.up: set[int] = set()  # dispatched job ids whose tasks are schedulable
        self.learned = 0  # tasks of a job seen running in this cluster (the sampler's estimate)

    def submit(self, job: Job, now: float) -> None:
        self.jobs[job.id] = job  # demand: a queued job counts its tasks (the sampler does the same)
        self.version += 1
        self.waiting.append(job)
        self._launch(now)

    def _launch(self, now: float) -> None:
        limit = self.sim.cost.max_running_jobs or 10**9
        while self.waiting and len(self.dispatched) < limit:
            job = self.waiting.popleft()
            self.dispatched.add(job.id)
            self.sim.push(now + self.sim.cost.job_startup_s, EV_CALL, lambda sim, t, job=job: self._up(job, t))

    def _up(self, job: Job, now: float) -> None:
        """The job's driver and executors are up: its tasks join the FIFO slot scheduling."""
        if job.id not in self.jobs:
            return
        self.up.add(job.id)
        if job.pend_maps:
            insort(self.mq, job, key=_fifo)
        self._eligible(job)
        self.version += 1
        self.dispatch(now)

    def finish(self, t, now: float) -> None:
        job = t.job
        super().finish(t, now)
        if job.end is not None and job.id in self.dispatched:
            self.dispatched.discard(job.id)
            # the dispatcher sees the end (after the job's overhead) and launches the next one
            self.sim.push(job.end, EV_CALL, lambda sim, at: self._launch(at))


class TwinSimulator(Simulator):
    """The simulator with :class:`TwinCluster` MR-clusters, sampled like the live sampler."""

    def __init__(self, wl, *args, **kw):
        super().__init__(wl, *args, **kw)
        self.clusters = {c.name: TwinCluster(self, c) for c in wl.clusters}

    def _measure(self, c, now: float, s):
        """As the live sampler (fawkes/coordinator/sampler.py): a job whose tasks are not running
        yet counts the tasks an earlier job of the cluster had (learned while it ran; the live
        sampler learns per application, and a trace from the state has one application per
        cluster), at least one per 128 MB input split."""
        from math import ceil

        from fawkes.mechanism import JobFacts, sample_cluster

        facts = []
        for j in c.jobs.values():
            if j.id in c.up:
                c.learned = max(c.learned, j.n_maps + j.n_reds)
                pending = len(j.pend_maps) + len(j.pend_reds)
            else:
                pending = max(1, ceil(j.spec.input_bytes / SPLIT), c.learned)
            facts.append(JobFacts(j.submit, j.spec.input_bytes, pending, j.running, j.started, j.ref))
        return sample_cluster(now, facts, s, busy_slots=float(c.running_tasks),
                              configured_slots=float(c.configured_slots()), output_bytes=c.output_bytes,
                              storage_capacity=c.storage_capacity(), completed_jobs=c.completed_jobs,
                              completed_tasks=c.completed_tasks, loading=c.state is not ClusterState.ACTIVE)


def run_twin(workload, specs, seeds, *, grow: str | None = None, check: bool = False, timeline: bool = False,
             progress=None) -> dict[str, list]:
    """What ``runner.run_matrix`` does for a trace, with :class:`TwinSimulator` (in this process)."""
    from fawkes.sim.metrics import collect
    from fawkes.sim.runner import reference_runtimes, settings_for
    from fawkes.sim.trace import reseed

    out: dict[str, list] = {s.label: [] for s in specs}
    total, done = len(specs) * len(seeds), 0
    for seed in seeds:
        wl = reseed(workload, seed)
        refs = list(reference_runtimes(wl))
        for s in specs:
            t0 = time.perf_counter()
            sim = TwinSimulator(wl, settings_for(wl, s, grow), refs=refs, timeline=timeline,
                                check_invariants=check, seed=seed).run()
            out[s.label].append(collect(sim, workload.name, s.label, seed, time.perf_counter() - t0, timeline))
            done += 1
            if progress:
                progress(done, total, f"{s.label} seed {seed}")
    return out
