"""CERES C-2 live (issue 11 item 4): the coordinator's sampler turns the per-stage task counts it
reads from each running job's driver (Spark's monitoring REST ``/api/v1/applications/<id>/stages``,
parsed by fawkes.frameworks.metrics; the documents here are the recorded fixture with its counts
advanced) into each job's last three progress samples, the coordinator's snapshot carries them as
``ClusterView.progress``, and the decision flags the straggler.  On real durable state (SQLite);
the framework driver answers with the parsed documents (the same parsing on real Spark:
tests/test_metrics*.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fawkes.coordinator.control import Control
from fawkes.coordinator.sampler import Sampler
from fawkes.coordinator.view import Signals
from fawkes.frameworks import metrics as M
from fawkes.mechanism import ClusterState, Role, Settings, ceres
from fawkes.store import Store
from fawkes.store.lifecycle import JobState, NodeState

STAGES = json.loads((Path(__file__).parent / "fixtures" / "metrics" / "driver_stages_running.json").read_text())


def stages(done0: int, done1: int = 0) -> list:
    """The recorded stages (48 + 48 + 4 tasks) with ``done0`` tasks of stage 0 and ``done1`` of stage 1 complete."""
    doc = copy.deepcopy(STAGES)
    by = {s["stageId"]: s for s in doc}
    by[0]["numCompleteTasks"] = done0
    if done0 >= 48:
        by[0]["status"], by[1]["status"] = "COMPLETE", "ACTIVE"
    by[1]["numCompleteTasks"] = done1
    return doc


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Driver:
    """What the cluster's daemons answer: per application, its driver's stages document."""

    def __init__(self):
        self.docs: dict[str, list] = {}

    def web_ui(self, spec):  # the kind's own page, kept by the sampler for the dashboard
        return "http://10.0.0.1:8080/"

    def metrics(self, spec, *, jobs=()):
        return M.FrameworkSample(time=0.0, tasks_by_job={app: M.parse_stages(doc) for app, doc in self.docs.items()})


class Fleet:
    def __init__(self, driver):
        self.driver = driver
        self.ex = SimpleNamespace(run=lambda hosts, cmd, timeout=None: {})

    def spec(self, name, states=None):
        return SimpleNamespace(nodes=()), self.driver


def world(tmp_path, clock):
    store = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=clock)
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.9.0.{i + 10}", "cores": 2, "memory_mb": 1024}
                      for i in range(1, 5)])
    store.request_cluster("a", framework="spark", min_core=1)
    store.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
    n = store.allocate_node("a", "h1", Role.CORE)
    store.transition_node(n.id, NodeState.PROVISIONING)
    store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster("a", ClusterState.ACTIVE, "no input")
    jobs = []
    for app in ("app-fast", "app-mid", "app-slow"):
        j = store.submit_job("a", ["/apps/q.py"])
        store.transition_job(j.id, JobState.DISPATCHED)
        jobs.append(store.transition_job(j.id, JobState.RUNNING, app_id=app).id)
    return store, jobs


def test_progress_from_the_drivers_stages_reaches_the_snapshot_and_flags_the_straggler(tmp_path):
    clock = Clock()
    store, jobs = world(tmp_path, clock)
    settings = Settings(policy="TD", period_s=60.0, sample_period_s=5.0, tau=1000.0, straggler_factor=2.0,
                        straggler_window_s=0)  # CERES' last pair (the window: tests/test_ceres.py)
    driver = Driver()
    sampler = Sampler(store, Fleet(driver), SimpleNamespace(driver_urls=lambda name: []), settings, clock=clock)
    control = Control(store, settings, clock)
    control.signals = sampler.signals
    # 100 tasks each; per 5 s sample: fast +12, mid +8, slow +1 finished tasks
    for k in range(4):
        driver.docs = {"app-fast": stages(min(48, 12 * k), max(0, 12 * k - 48)), "app-mid": stages(8 * k),
                       "app-slow": stages(k)}
        sampler.sample("a")
        clock.t += 5
    got = {p.job: p for p in control.snapshot().cluster("a").progress}
    assert set(got) == {str(j) for j in jobs}
    fast, mid, slow = (got[str(j)] for j in jobs)
    assert [t for t, _ in slow.samples] == [1005.0, 1010.0, 1015.0]  # the last three samples
    assert [round(p, 4) for _, p in fast.samples] == [0.12, 0.24, 0.36] and slow.samples[-1][1] == 0.03
    assert slow.started_at is not None and slow.expected_s is None
    est = {e.job: e for e in map(ceres.estimate, (fast, mid, slow))}
    print("\n" + "; ".join(f"job {j}: progress {e.progress:.2f}, ETA {e.eta_s:.0f} s" for j, e in est.items()))
    assert est[str(jobs[0])].eta_s == pytest.approx(0.64 / 0.024) and est[str(jobs[2])].eta_s == pytest.approx(0.97 / 0.002)
    snap = control.snapshot()
    slow_ones = ceres.stragglers(snap.clusters, settings)
    assert [e.job for e in slow_ones["a"]] == [str(jobs[2])]
    assert "C-2 stragglers: a (" + str(jobs[2]) + ")" in control.preview().reason

    # a job that finishes leaves the progress; with C-2 off nothing is kept
    store.transition_job(jobs[0], JobState.SUCCEEDED)
    sampler.sample("a")
    assert {p.job for p in control.snapshot().cluster("a").progress} == {str(jobs[1]), str(jobs[2])}
    off = Sampler(store, Fleet(driver), SimpleNamespace(driver_urls=lambda name: []),
                  Settings(policy="TD"), clock=clock)
    off.sample("a")
    assert off.signals() == Signals() and off.progress == {}
    store.close()
