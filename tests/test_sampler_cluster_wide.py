"""A kind that counts tasks per cluster only (a Dask scheduler: no application id per job, so no
``tasks_by_job``): its one running job's tasks are the cluster's, so the weights and the stored samples
see what the scheduler processes and has queued.  Before, such a job was counted as a job that had not
started (1 pending task, none running) for as long as it ran, and `fawkes trace from-state` found no task
of it to export (the mixed benchmark of 2026-11-27: the dask cluster's samples never held a running task).
Real store (SQLite and PostgreSQL); the driver answers with the Dask kind's own parsing of its
scheduler's Prometheus text."""

from __future__ import annotations

from types import SimpleNamespace

from store_fixtures import *  # noqa: F401,F403

from fawkes.coordinator.sampler import Sampler
from fawkes.frameworks.dask import dask_sample, parse_prometheus
from fawkes.mechanism import ClusterState, Settings
from fawkes.store.lifecycle import JobState

METRICS = """# HELP dask_scheduler_tasks Number of tasks known by scheduler
dask_scheduler_tasks{state="processing"} 2.0
dask_scheduler_tasks{state="queued"} 9.0
dask_scheduler_tasks{state="waiting"} 1.0
dask_scheduler_tasks{state="memory"} 4.0
dask_scheduler_clients 1.0
"""
IDENTITY = {"workers": {"tcp://10.0.0.1:1": {"nthreads": 1}, "tcp://10.0.0.2:1": {"nthreads": 1}}}


class Driver:
    def __init__(self, text: str):
        self.text = text

    def web_ui(self, spec):
        return None

    def metrics(self, spec, *, jobs=()):
        return dask_sample(0.0, IDENTITY, parse_prometheus(self.text))


class Fleet:
    def __init__(self, driver):
        self.driver = driver

    def spec(self, name, states=None):
        return SimpleNamespace(nodes=()), self.driver


def _cluster_with_jobs(store, running: int, queued: int) -> list[int]:
    store.register_framework("d", "dask")
    store.request_cluster("dk", framework="d", min_core=1)
    store.transition_cluster("dk", ClusterState.DEPLOYING)
    store.transition_cluster("dk", ClusterState.ACTIVE)
    ids = [store.submit_job("dk", ["job.py", "{input}", "{output}"]).id for _ in range(running + queued)]
    for i in ids[:running]:
        store.transition_job(i, JobState.DISPATCHED)
        store.transition_job(i, JobState.RUNNING)  # no app_id: the kind has no id per job
    return ids


def _sample(store, text: str):
    Sampler(store, Fleet(Driver(text)), None, Settings(policy="TD"), clock=lambda: 1000.0).sample("dk")
    return store.samples("dk")[-1]


def test_the_one_running_jobs_tasks_are_the_clusters(store):
    ids = _cluster_with_jobs(store, running=1, queued=1)
    s = _sample(store, METRICS)
    # the running job: 9 queued + 1 waiting pending, 2 processing, 4 done; the queued job, the same program
    # not started: as many pending tasks as the running one has seen (16)
    assert (s.running_tasks, s.pending_tasks, s.completed_tasks) == (2, 10 + 16, 4)
    assert s.busy_slots == 2 and s.configured_slots == 2
    assert store.get_job(ids[0]).tasks_seen == 2 + 10 + 4  # learned for the next run of the same program


def test_several_running_jobs_share_unknown_counts_as_before(store):
    _cluster_with_jobs(store, running=2, queued=0)
    s = _sample(store, METRICS)
    assert (s.running_tasks, s.pending_tasks) == (0, 2)  # each counted as a job not started yet


def test_a_scheduler_with_no_tasks_leaves_the_job_counted_as_not_started(store):
    _cluster_with_jobs(store, running=1, queued=0)
    s = _sample(store, "dask_scheduler_clients 1.0\n")
    assert (s.running_tasks, s.pending_tasks) == (0, 1)
