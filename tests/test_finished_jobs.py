"""The sampler's incremental count of each live cluster's finished jobs (fawkes/coordinator/finished.py)
against reading them all, on real SQLite and PostgreSQL states: jobs finishing out of submission order,
one staying queued, a cluster released and its name taken again."""

from __future__ import annotations

import random

import pytest

from fawkes.coordinator.finished import FinishedJobs, Tally
from fawkes.mechanism import ClusterState, Role
from fawkes.store import JobState, NodeState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401


def _active(store: Store, name: str, host: str) -> None:
    store.request_cluster(name, framework="spark", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING, "admitted")
    n = store.allocate_node(name, host, Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE, "no input")


def _all_read(store: Store) -> dict[str, tuple[int, int, dict]]:
    out = {}
    for c in store.list_clusters(include_released=False):
        t = Tally.of(store.list_jobs(c.name, states=[JobState.SUCCEEDED, JobState.FAILED]))
        if t.jobs:
            out[c.name] = (t.jobs, t.tasks, t.learned)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_incremental_count_equals_reading_every_finished_job(store: Store, seed):
    rng = random.Random(seed)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark")
    store.sync_hosts([{"name": f"h{i}", "cores": 2} for i in range(4)])
    for i, c in enumerate(("a", "b", "c")):
        _active(store, c, f"h{i}")
    tally = FinishedJobs()
    live: list[int] = []
    stuck = store.submit_job("c", ["never-runs"]).id  # queued all along: holds the mark back
    released = False
    for step in range(40):
        for _ in range(rng.randint(0, 3)):
            live.append(store.submit_job(rng.choice("ab"), [rng.choice(["wc", "grep", "sort"]), "/in"]).id)
        for j in rng.sample(live, k=min(len(live), rng.randint(0, 3))):  # finish in any order
            store.transition_job(j, JobState.DISPATCHED)
            store.transition_job(j, JobState.RUNNING)
            store.note_job_tasks({j: rng.randint(1, 50)})
            store.transition_job(j, rng.choice([JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]))
            live.remove(j)
        if step == 20 and not released:  # b released, then its name taken again: a new count
            store.request_release("b")
            store.transition_cluster("b", ClusterState.SAVING, "release")
            for n in store.list_nodes("b"):
                store.transition_node(n.id, NodeState.DRAINING)
                store.transition_node(n.id, NodeState.RELEASED)
            store.transition_cluster("b", ClusterState.RELEASED, "released")
            live = [j for j in live if store.get_job(j).state == JobState.QUEUED and
                    store.get_job(j).cluster_id != store.get_cluster("b").id]
            _active(store, "b", "h1")
            released = True
        got = tally.refresh(store, {c.name: c.id for c in store.list_clusters(include_released=False)})
        assert {n: (t.jobs, t.tasks, t.learned) for n, t in got.items() if t.jobs} == _all_read(store), step
    assert tally.mark < stuck  # the queued job holds the mark: it is read again once it finishes
    store.transition_job(stuck, JobState.DISPATCHED)
    store.transition_job(stuck, JobState.RUNNING)
    store.transition_job(stuck, JobState.SUCCEEDED)
    got = tally.refresh(store, {c.name: c.id for c in store.list_clusters(include_released=False)})
    assert got["c"].jobs == 1 and {n: (t.jobs, t.tasks, t.learned) for n, t in got.items() if t.jobs} == \
        _all_read(store)
    assert not tally.counted or min(tally.counted) > tally.mark  # only ids above the mark are remembered
