"""A simulated sample as a Spark + HDFS MR-cluster's daemons would show it, taken by the live sampler's code.

The parity replay (tests/parity.py) hands each sample the simulator recorded here instead of writing it to
the store as it is.  :func:`documents` writes what the simulator measured (:class:`fawkes.sim.record.Observed`)
into the documents the live sampler reads, each built on a real one recorded on the lab
(``tests/fixtures/metrics``): the Spark master's ``/json/`` (the workers' cores and cores used, one active
application per started job), each started job's driver ``/api/v1/applications/<id>/stages`` (its completed
tasks in a COMPLETE stage, its running and pending ones in an ACTIVE stage) and the NameNode's
``FSNamesystemState`` bean (DFS used: the input plus what the jobs wrote; the capacity), plus the job
table's rows.  :func:`live_sample` parses them with the kind's own parsers
(:mod:`fawkes.frameworks.metrics`), builds the kind's neutral sample and turns it and the rows into a
sample with the sampler's own :func:`fawkes.coordinator.sampler.cluster_metrics`.

What the job table holds that the daemons do not: a job not started has no driver, so the sampler counts
it by the tasks an earlier run of it had (``tasks_seen``); the simulator knows them, and the row carries
them as if learned.  The finished jobs' rows carry the tasks they completed (the first one all of them).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from types import SimpleNamespace

from fawkes.coordinator.sampler import cluster_metrics
from fawkes.frameworks import metrics as M
from fawkes.mechanism import ClusterMetrics, Settings
from fawkes.sim.record import Observed

FIXTURES = Path(__file__).parent / "fixtures" / "metrics"
INPUT_BYTES = 3 * 2**20  # what the input load stored: the DU baseline under what the jobs write


class Unencodable(AssertionError):
    """A sample no daemon could show (the simulator's counts contradict each other)."""


@cache
def _fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


@cache
def _fixture(name: str):
    """The fixture, parsed once: read it, never change it (:func:`_fresh` for a copy to change)."""
    return json.loads(_fixture_text(name))


def _fresh(name: str):
    """A copy of the fixture to change (parsing the kept text is faster than a deep copy)."""
    return json.loads(_fixture_text(name))


def _whole(x: float, what: str) -> int:
    if x != int(x) or x < 0:
        raise Unencodable(f"{what} {x!r}: a daemon counts whole ones")
    return int(x)


def documents(o: Observed) -> dict:
    """The daemons' documents and the job table of ``o``: ``master``, ``stages`` (app id -> document),
    ``fsnamesystem`` (JSON text, as the daemons send them) and ``jobs`` / ``finished`` (rows)."""
    master = _fresh("master_running.json")
    cores, used = _whole(o.configured_slots, "configured slots"), _whole(o.busy_slots, "busy slots")
    worker, app = master["workers"][0], master["activeapps"][0]
    master["workers"] = [{**worker, "cores": cores, "coresused": used, "coresfree": cores - used}] if cores else []
    master.update(aliveworkers=len(master["workers"]), cores=cores, coresused=used, completedapps=[])
    stage = _fixture("driver_stages_running.json")[0]
    master["activeapps"], stages, jobs = [], {}, []
    for j in o.jobs:
        f = j.facts
        row = SimpleNamespace(id=j.id, argv=[f"job-{j.id}"], submitted_at=f.submit_time, input_bytes=f.input_bytes,
                              started_at=f.started_at, ref_runtime=f.ref_runtime, tasks_seen=None, app_id=None,
                              state="queued")
        if f.started_at is None:  # no driver yet: counted by the tasks learned from an earlier run
            row.tasks_seen = f.pending_tasks
        else:
            row.app_id, row.state = f"app-{j.id:07d}", "running"
            master["activeapps"].append({**app, "id": row.app_id, "name": f"fawkes-sim-{j.id}", "state": "RUNNING"})
            stages[row.app_id] = json.dumps([
                {**stage, "status": "COMPLETE", "stageId": 0, "numTasks": j.completed, "numActiveTasks": 0,
                 "numCompleteTasks": j.completed},
                {**stage, "status": "ACTIVE", "stageId": 1, "numTasks": f.pending_tasks + f.running_tasks,
                 "numActiveTasks": f.running_tasks, "numCompleteTasks": 0}])
        jobs.append(row)
    done_before = o.completed_tasks - sum(j.completed for j in o.jobs)
    if done_before < 0 or (done_before and not o.completed_jobs):
        raise Unencodable(f"{o.completed_tasks} tasks completed, {done_before} of them by finished jobs, of "
                          f"which there are {o.completed_jobs}")
    finished = [SimpleNamespace(id=-k - 1, argv=["finished"], tasks_seen=done_before if k == 0 else 0, state="succeeded")
                for k in range(o.completed_jobs)]
    nn = _fresh("nn_fsnamesystemstate.json")
    bean = next(b for b in nn["beans"] if b["name"].endswith("name=FSNamesystemState"))
    stored = INPUT_BYTES + round(o.output_bytes)
    bean.update(CapacityUsed=stored, CapacityTotal=round(o.storage_capacity),
                CapacityRemaining=max(0, round(o.storage_capacity) - stored))
    return {"master": json.dumps(master), "stages": stages, "fsnamesystem": json.dumps(nn), "jobs": jobs,
            "finished": finished}


def live_sample(docs: dict, now: float, settings: Settings, *, stored_baseline: float | None, loading: bool,
                node_cpu=()) -> ClusterMetrics:
    """The sample the live sampler takes from ``docs`` (:func:`documents`) at ``now``."""
    master = M.parse_master_json(docs["master"])
    hdfs = M.parse_fsnamesystem_state(docs["fsnamesystem"])
    by_app = {a.id: M.parse_stages(docs["stages"][a.id]) for a in master.active_apps}
    fs = M.spark_hdfs_sample(now, master, hdfs, None, by_app)
    running = [j for j in docs["jobs"] if j.state == "running"]
    m, _ = cluster_metrics(now, settings, fs, running, docs["jobs"], docs["finished"],
                           stored_baseline=stored_baseline, loading=loading, node_cpu=node_cpu)
    return m


class DaemonSampler:
    """Samples of the replayed clusters from their daemons' documents, with each cluster's DU baseline (the
    stored bytes after its input load: the live sampler notes them at its first sample after the load,
    seconds after it; the replay's samples are the simulator's, a period apart)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.baseline: dict[str, float] = {}
        self.sampled = 0

    def sample(self, cluster: str, o: Observed, now: float) -> ClusterMetrics:
        docs = documents(o)
        if cluster not in self.baseline and not o.loading:  # as if sampled right after its input load
            self.baseline[cluster] = float(INPUT_BYTES)
        self.sampled += 1
        return live_sample(docs, now, self.settings, stored_baseline=self.baseline.get(cluster), loading=o.loading,
                           node_cpu=o.node_cpu)
