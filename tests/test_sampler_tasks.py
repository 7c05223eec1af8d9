"""The sampler's task estimate of an unfinished job (TD's input), on a real store and real Spark REST JSON.

A started job whose driver lists no stage yet (between registering and its first stage, or between
two actions) used to count 0 tasks: its cluster's TD weight dipped to 0 for a sample or two and
literal TD moved nodes away and back (bench/results/HISTORY.md).  It now counts what runs of the same
application reported, less what it completed; the counts live in the store (``tasks_seen``), so a
restarted coordinator keeps them.
"""

from __future__ import annotations

import json

from store_fixtures import *  # noqa: F401,F403

from fawkes.coordinator.sampler import SPLIT_BYTES, job_tasks
from fawkes.store.jobs import tasks_learned
from fawkes.frameworks.metrics import parse_stages
from fawkes.mechanism.model import ClusterState
from fawkes.store import Store
from fawkes.store.lifecycle import JobState


def _stage(sid: int, status: str, num: int, active: int = 0, complete: int = 0) -> dict:
    return {"stageId": sid, "attemptId": 0, "status": status, "numTasks": num, "numActiveTasks": active,
            "numCompleteTasks": complete, "numFailedTasks": 0, "name": f"stage {sid}"}


def _cluster(store: Store) -> None:
    store.register_framework("spark", "spark")
    store.sync_hosts([{"name": "h1", "cores": 2}])
    store.request_cluster("etl", framework="spark", min_core=1)
    store.transition_cluster("etl", ClusterState.DEPLOYING)
    store.transition_cluster("etl", ClusterState.ACTIVE)


def _run(store: Store, argv: list[str], app_id: str) -> int:
    j = store.submit_job("etl", argv, input_bytes=3 * SPLIT_BYTES).id
    store.transition_job(j, JobState.DISPATCHED)
    store.transition_job(j, JobState.RUNNING, app_id=app_id)
    return j


def test_started_job_without_stages_counts_what_earlier_runs_had(store):
    _cluster(store)
    first = _run(store, ["burn.py", "12"], "app-1")
    # nothing learned yet: a job counts one task per 128 MB input split
    assert job_tasks(store.get_job(first), parse_stages("[]"), tasks_learned(store.list_jobs("etl"))) == (3, 0, 0)
    # its driver lists its stages: the driver's figures, and the job's total is stored
    stages = parse_stages(json.dumps([_stage(0, "COMPLETE", 1, complete=1), _stage(1, "ACTIVE", 12, 2, 4),
                                      _stage(2, "PENDING", 2)]))
    pending, running, seen = job_tasks(store.get_job(first), stages, {})
    assert (pending, running, seen) == (8, 2, 15)
    store.note_job_tasks({first: seen})
    store.transition_job(first, JobState.SUCCEEDED, exit_code=0)

    # a restarted coordinator reads what was learned from the store
    second = _run(store, ["burn.py", "12"], "app-2")
    learned = tasks_learned(store.list_jobs("etl"))
    assert learned == {"burn.py": 15}
    # driver registered, no stage listed yet: 15, not 0
    assert job_tasks(store.get_job(second), parse_stages("[]"), learned) == (15, 0, 0)
    # between two actions: the first action's 5 tasks are done, none listed as active or pending
    between = parse_stages(json.dumps([_stage(0, "COMPLETE", 5, complete=5)]))
    assert job_tasks(store.get_job(second), between, learned) == (10, 0, 5)
    # every listed task done but the driver still up (writing its output): still 1, never 0
    done = parse_stages(json.dumps([_stage(0, "COMPLETE", 5, complete=5), _stage(1, "COMPLETE", 10, complete=10)]))
    assert job_tasks(store.get_job(second), done, learned) == (1, 0, 15)
    # a queued job of another application knows nothing of burn.py's count
    other = store.submit_job("etl", ["wordcount.py"], input_bytes=0)
    assert job_tasks(other, None, learned) == (1, 0, 0)


def test_tasks_seen_is_only_raised(store):
    _cluster(store)
    j = _run(store, ["burn.py"], "app-1")
    store.note_job_tasks({j: 7})
    store.note_job_tasks({j: 4})
    store.note_job_tasks({})
    assert store.get_job(j).tasks_seen == 7
    store.note_job_tasks({j: 9})
    assert store.get_job(j).tasks_seen == 9


def test_completed_tasks_count_since_the_deployment(store):
    """TT's completed tasks count every task the cluster completed since it was deployed, as the model
    and the simulator count them: the finished jobs' tasks (the most each reported) and what the running
    jobs' drivers list completed.  The drivers alone forget a job's tasks once it ends (the parity replay
    through the daemons' documents found that)."""
    from fawkes.coordinator.sampler import cluster_metrics
    from fawkes.frameworks.sample import FrameworkSample
    from fawkes.mechanism import Settings

    _cluster(store)
    first = _run(store, ["burn.py", "12"], "app-1")
    store.note_job_tasks({first: 15})
    store.transition_job(first, JobState.SUCCEEDED, exit_code=0)
    second = _run(store, ["burn.py", "12"], "app-2")
    counts = parse_stages(json.dumps([_stage(0, "COMPLETE", 1, complete=1), _stage(1, "ACTIVE", 12, 2, 4)]))
    fs = FrameworkSample(time=5.0, tasks=counts, tasks_by_job={"app-2": counts}, slots=2.0, busy_slots=2.0)
    running = store.list_jobs("etl", states=[JobState.RUNNING])
    finished = store.list_jobs("etl", states=[JobState.SUCCEEDED, JobState.FAILED])
    m, seen = cluster_metrics(5.0, Settings(), fs, running, running, finished, stored_baseline=None)
    assert (m.completed_tasks, m.completed_jobs, m.pending_tasks, m.running_tasks) == (15 + 5, 1, 6, 2)
    assert seen == {second: 13}


def test_a_re_run_attempt_is_not_a_task_of_the_job(store):
    """What the store learns of a job (tasks_seen: the estimate for its next run, and the twin's task count)
    takes each task once: a stage re-run after a shrink lost its output adds attempts, not tasks."""
    _cluster(store)
    j = _run(store, ["burn.py", "12"], "app-1")
    stages = parse_stages(json.dumps([_stage(0, "COMPLETE", 1, complete=1), _stage(1, "FAILED", 12, complete=12),
                                      {**_stage(1, "ACTIVE", 3, 2, 1), "attemptId": 1}]))
    assert job_tasks(store.get_job(j), stages, {}) == (0, 2, 13)  # 16 attempts, 13 tasks


def test_where_a_jobs_tasks_ended_is_stored_by_master_and_other_nodes(store):
    """The kind's per-node task times of a running job (Spark's /allexecutors) become the job's
    ``task_time``: the master node's and the others' summed, the driver's latest totals replacing the
    stored ones; a bad figure refuses that cluster's write in one line and writes nothing."""
    import pytest

    from fawkes.coordinator.sampler import task_time_by_role
    from fawkes.errors import FawkesError
    from fawkes.mechanism.model import ClusterMetrics
    from fawkes.store.samples import SampleWrite

    _cluster(store)
    j = _run(store, ["burn.py"], "app-1")
    queued = store.submit_job("etl", ["burn.py"])
    running = [store.get_job(j)]
    by_job = {"app-1": {"h1": (3, 15.0), "h2": (4, 12.0), "h3": (2, 6.5)}, "app-9": {"h1": (1, 1.0)}}
    where = task_time_by_role("h1", running, by_job)
    assert where == {j: {"master": (3, 15.0), "other": (6, 18.5)}}
    assert task_time_by_role("h1", running, {}) == {} and task_time_by_role("h1", [queued], by_job) == {}
    m = ClusterMetrics(time=1.0)
    assert store.record_samples([SampleWrite("etl", m, task_time=where)]) == []
    assert store.get_job(j).task_time == {"master": [3, 15.0], "other": [6, 18.5]}
    later = task_time_by_role("h1", running, {"app-1": {"h1": (5, 26.0), "h2": (4, 12.0)}})
    store.record_samples([SampleWrite("etl", ClusterMetrics(time=2.0), task_time=later)])
    assert store.get_job(j).task_time == {"master": [5, 26.0], "other": [4, 12.0]}
    for bad in ({j: {"master": (1, float("nan")), "other": (0, 0.0)}}, {j: {"master": (-1, 1.0)}},
                {j: {"master": (1, float("inf"))}}, {j: {"core": (1, 1.0)}}, {j: {"master": (1, None)}}):
        with pytest.raises(FawkesError, match="task_time"):
            SampleWrite("etl", m, task_time=bad)
    assert store.get_job(j).task_time == {"master": [5, 26.0], "other": [4, 12.0]}


def test_the_tasks_running_on_each_node_are_stored_where_the_kind_says(store):
    """A kind's ``running_by_node`` (Spark: the driver's live executors' ``activeTasks``) becomes each node's
    ``running_tasks`` (FP's victim order, CERES C-1's idle-or-busy): a node the kind does not list runs none; a
    kind that does not say (None) leaves them as they are; a bad count refuses the cluster's write."""
    from types import SimpleNamespace

    import pytest

    from fawkes.coordinator.sampler import Sampler
    from fawkes.errors import FawkesError
    from fawkes.frameworks.sample import FrameworkSample
    from fawkes.mechanism import Role, Settings
    from fawkes.mechanism.model import ClusterMetrics
    from fawkes.store.lifecycle import NodeState
    from fawkes.store.samples import SampleWrite

    store.register_framework("spark", "spark")
    store.sync_hosts([{"name": h, "cores": 2} for h in ("h1", "h2", "h3")])
    store.request_cluster("etl", framework="spark", min_core=1)
    store.transition_cluster("etl", ClusterState.DEPLOYING)
    for h, role in (("h1", Role.CORE), ("h2", Role.TR), ("h3", Role.TC)):
        n = store.allocate_node("etl", h, role)
        store.transition_node(n.id, NodeState.PROVISIONING)
        store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster("etl", ClusterState.ACTIVE)
    said: dict = {"by_node": {"h1": 1, "h2": 2}}

    class Driver:
        def web_ui(self, spec):
            return ""

        def metrics(self, spec, *, jobs=()):
            return FrameworkSample(time=0.0, running_by_node=said["by_node"])

    fleet = SimpleNamespace(spec=lambda name, states=None: (SimpleNamespace(nodes=(), master=SimpleNamespace(
        name="h1")), Driver()))
    sampler = Sampler(store, fleet, None, Settings(policy="TD"), clock=lambda: 1000.0)

    def running() -> dict[str, int]:
        return {n.host: n.running_tasks for n in store.list_nodes("etl")}

    sampler.sample("etl")
    assert running() == {"h1": 1, "h2": 2, "h3": 0}
    said["by_node"] = {"h3": 4}
    sampler.sample("etl")
    assert running() == {"h1": 0, "h2": 0, "h3": 4}
    said["by_node"] = None  # the kind did not say this time: nothing changes
    sampler.sample("etl")
    assert running() == {"h1": 0, "h2": 0, "h3": 4}
    with pytest.raises(FawkesError, match="running_tasks"):
        SampleWrite("etl", ClusterMetrics(time=1.0), running_by_node={1: -1})
