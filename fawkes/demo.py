"""The main job: three MR-clusters on a local lab, an imbalanced stream of real Spark jobs.

``fawkes demo`` (and ``bench/bench_lab_td_vs_none.py``) do, on this machine alone:

1. fetch the lab's distributions; bring up an SSH lab of network-namespace hosts;
2. state in SQLite under the work dir; register the lab framework; request 3 MR-clusters
   (2 core nodes each) with a generated input each;
3. start the real coordinator (``fawkes coordinator run``) with policy None and run one word
   count alone on the ``busy`` cluster at its minimum: its runtime is the reference R of
   every job's slowdown (response time / R);
4. restart the coordinator with the policy under test (TD by default) and submit the
   imbalanced stream (most jobs to ``busy``, one each to the others), showing live status;
5. report the mean slowdown per cluster and the reconfigurations; plot each cluster's
   allocation and queue length over time; release the clusters; take the lab down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fawkes.coordinator.view import allocation_history
from fawkes.errors import FawkesError
from fawkes.store import Store
from fawkes.store.lifecycle import JOB_FINISHED, JobState

REPO = Path(__file__).resolve().parent.parent
APP = Path(__file__).resolve().parent / "apps" / "wordcount.py"
CLUSTERS = ("busy", "calm", "quiet")
LAB_OPTIONS = {"heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1", "replication": "2",
               "executor_memory": "512m"}
#: word count with 8 partitions sleeping 3 s each: its run time shrinks as executors are added
JOB_ARGS = ("{input}", "{output}", "8", "3")
#: (seconds after the stream starts, cluster): imbalanced, the thesis' "bursty" cluster is busy
STREAM = ((0, "busy"), (5, "busy"), (10, "busy"), (15, "calm"), (20, "busy"), (30, "quiet"), (40, "busy"))


@dataclass
class Outcome:
    policy: str
    reference_s: float
    jobs: list[dict] = field(default_factory=list)
    reconfigurations: int = 0
    ticks: int = 0
    allocation: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    queue: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0

    def slowdowns(self) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for j in self.jobs:
            per.setdefault(j["cluster"], []).append(j["slowdown"])
        return {c: sum(v) / len(v) for c, v in per.items()}

    def mean_slowdown(self) -> float:
        return sum(j["slowdown"] for j in self.jobs) / len(self.jobs) if self.jobs else float("nan")


def words(n: int, seed: int) -> str:
    vocab = [f"w{i}" for i in range(50)]
    return "\n".join(" ".join(vocab[(seed * 7 + i * 13 + j * 3) % 50] for j in range(12)) for i in range(n)) + "\n"


class Session:
    """A lab, a state store and a coordinator process, for the demo and the lab benchmark."""

    def __init__(self, workdir: Path, hosts: int = 8, say=print, prefix: str = "fwdemo"):
        from fawkes.frameworks import dists
        from fawkes.lab import Lab

        self.workdir = workdir
        self.say = say
        workdir.mkdir(parents=True, exist_ok=True)
        self.dists = dists.ensure_lab_dists(install=True, progress=lambda m: None)
        subnet = next((s for s in (f"10.{n}.0" for n in range(220, 250)) if Lab.subnet_free(s)), None)
        if subnet is None:
            raise FawkesError("no free 10.x.0/24 subnet for the demo lab")
        Lab.cleanup(prefix, subnet)
        say(f"lab: {hosts} SSH hosts (network namespaces) on {subnet}.0/24")
        self.lab = Lab.up(hosts, workdir / "lab", prefix=prefix, subnet=subnet)
        self.url = f"sqlite:///{workdir / 'fawkes.db'}"
        self.store = Store(self.url)
        self.proc: subprocess.Popen | None = None

    def config(self, policy: str) -> Path:
        preset = self.workdir / f"{policy.lower()}-demo.yaml"
        preset.write_text(f"policy: {policy}\ngrow_type: transient-core\nperiod_s: 10\nsample_period_s: 2\n"
                          "tau: 0.5\nidle_timeout_s: 3600\n")
        cfg = self.workdir / f"config-{policy.lower()}.yaml"
        cfg.write_text(json.dumps({"state": self.url, "inventory": str(self.lab.inventory_path),
                                   "policy": str(preset), "period": 10, "sample_period": 2,
                                   "cluster_options": LAB_OPTIONS}))
        return cfg

    def start(self, policy: str) -> None:
        self.stop()
        log = (self.workdir / "coordinator.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                                      str(self.config(policy)), "--no-metrics"], stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def setup_clusters(self) -> None:
        self.store.register_framework("lab", "spark-hdfs", spark_home=str(self.dists.spark_home),
                                      hdfs_jars=str(self.dists.hdfs_home), replace=True)
        for i, name in enumerate(CLUSTERS):
            src = self.workdir / f"{name}.txt"
            src.write_text(words(400, i))
            self.store.request_cluster(name, framework="lab", min_core=2, input_path=str(src))

    def submit(self, cluster: str) -> int:
        return self.store.submit_job(cluster, [str(APP), *JOB_ARGS], input_path="/input").id

    def wait(self, what: str, cond, timeout: float, show=None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise FawkesError(f"the coordinator exited while waiting for {what}; see {self.workdir}/coordinator.log")
            if show:
                show()
            time.sleep(1.0)
        raise FawkesError(f"timed out after {timeout:.0f}s waiting for {what}; see {self.workdir}/coordinator.log")

    def active(self) -> bool:
        return all(self.store.get_cluster(n).state == "active" for n in CLUSTERS)

    def finished(self, ids) -> bool:
        return all(JobState(self.store.get_job(i).state) in JOB_FINISHED for i in ids)

    def close(self) -> None:
        self.stop()
        self.store.close()
        self.lab.down()


def calibrate(s: Session, show=None) -> float:
    """Run one job alone on ``busy`` at its minimum (policy None): the reference runtime R."""
    s.start("None")
    s.wait("3 active MR-clusters", s.active, 600, show)
    j = s.submit("busy")
    s.wait("the calibration job", lambda: s.finished([j]), 600, show)
    job = s.store.get_job(j)
    if job.state != JobState.SUCCEEDED:
        raise FawkesError(f"calibration job failed: {job.detail}")
    return job.ended_at - job.submitted_at


def run_stream(s: Session, policy: str, reference: float, show=None) -> Outcome:
    """Submit the imbalanced stream under ``policy``; collect jobs, allocations and queues."""
    s.start(policy)
    s.wait("3 active MR-clusters", s.active, 600, show)
    first_tick = (s.store.latest_decision().id if s.store.latest_decision() else 0)
    t0 = time.time()
    ids: list[tuple[int, str]] = []
    for at, cluster in STREAM:
        s.wait(f"submit time +{at}s", lambda: time.time() - t0 >= at, at + 5, show)
        ids.append((s.submit(cluster), cluster))
    s.wait("every job of the stream", lambda: s.finished([i for i, _ in ids]), 1800, show)
    # let the idle clusters settle back (one more tick) before reading the allocation history
    end = time.time()
    out = Outcome(policy=policy, reference_s=reference, start=t0, end=end)
    for i, cluster in ids:
        j = s.store.get_job(i)
        out.jobs.append({"id": i, "cluster": cluster, "state": str(j.state), "submitted": j.submitted_at,
                         "started": j.started_at, "ended": j.ended_at,
                         "response_s": j.ended_at - j.submitted_at,
                         "slowdown": (j.ended_at - j.submitted_at) / reference})
    with s.store.session() as sess:
        from sqlmodel import select

        from fawkes.store.schema import Decision

        rows = list(sess.exec(select(Decision).where(Decision.id > first_tick).where(Decision.time <= end)))
    out.ticks = len(rows)
    out.reconfigurations = sum(1 for d in rows if d.plan.get("grows") or d.plan.get("shrinks"))
    for name in CLUSTERS:
        out.allocation[name] = list(allocation_history(s.store.list_nodes(name, live=False), t0))
        jobs = s.store.list_jobs(name)
        times = sorted({t0, end, *[j.submitted_at for j in jobs if j.submitted_at >= t0],
                        *[j.started_at for j in jobs if j.started_at and j.started_at >= t0]})
        out.queue[name] = [(t, sum(1 for j in jobs if j.submitted_at <= t and (j.started_at or 1e18) > t))
                           for t in times]
    failed = [j for j in out.jobs if j["state"] != JobState.SUCCEEDED]
    if failed:
        raise FawkesError(f"{len(failed)} job(s) of the stream failed; see {s.workdir}/coordinator.log")
    return out


def report(out: Outcome) -> str:
    lines = [f"policy {out.policy}: {len(out.jobs)} jobs, reference runtime R = {out.reference_s:.1f} s "
             f"(one job alone on a 2-core-node cluster)",
             f"{'cluster':<8} {'jobs':>4} {'mean response s':>16} {'mean slowdown':>14}"]
    for c, sd in out.slowdowns().items():
        js = [j for j in out.jobs if j["cluster"] == c]
        lines.append(f"{c:<8} {len(js):>4} {sum(j['response_s'] for j in js) / len(js):>16.1f} {sd:>14.2f}")
    lines.append(f"overall mean slowdown {out.mean_slowdown():.2f}; reconfigurations {out.reconfigurations} "
                 f"in {out.ticks} ticks; makespan {out.end - out.start:.0f} s")
    return "\n".join(lines)


def plot(out: Outcome, path: Path) -> Path:
    from fawkes.sim.plot import plot_allocations

    def since_start(pts):
        return [(t - out.start, n) for t, n in pts]

    return plot_allocations(
        path, {c: since_start(out.allocation[c]) for c in CLUSTERS}, {c: since_start(out.queue[c]) for c in CLUSTERS},
        end=out.end - out.start, queue_label="queued jobs", unit="s since the stream started",
        title=f"fawkes demo: allocation and queue per MR-cluster ({out.policy})")
