"""The simulated hosts, their daemons and their jobs, in the coordinator's own process (SIMULATED).

Time is the wall clock; every latency is drawn from the cost file's mean (lognormal with the file's
``cv``) and divided by ``speedup``, so a coordinator whose periods are divided by the same factor sees
a compressed day.  What a latency stands for (cost-model fields, ``fawkes trace from-state --costs``):

* a cluster's deployment: ``deploy_s``; a node added to an active cluster: ``tr_ready_s`` (TR),
  ``tc_ready_s`` (TC), ``core_ready_s`` (core);  a start fails with probability ``start_failure``;
* a TR node's removal: ``fp_stop_s``; a TC node's decommission: ``dp_fixed_s``;
* a job: ``job_startup_s`` (or its own ``startup_s``) from launch to its first task, then ``tasks``
  tasks of ``task_s`` slot-seconds each (the job's mean drawn once around it), run on the slots its
  cluster's registered nodes hold (a host's ``cores``; jobs running at once share them equally), then
  ``job_overhead_s``; it exits 1 with probability ``job_failure``, else 0.  A TR node removed by FP
  loses half of the work of the tasks it ran.

Hosts fail (every daemon on them gone, every command unanswered) at ``host_failures_per_hour`` per
host in simulated time; a host running a cluster's master daemon is spared (a master lost is a
cluster lost, which the real service leaves to the admin).  A failed host stays down.  The fleet lives
as long as the process: a coordinator restart is a power cut of the whole fleet.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import random
import re
import shlex
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from fawkes.errors import FawkesError

#: the program of a simulated job (``FrameworkDriver.job_command`` of kind ``simulated``)
SIM_PROGRAM = "fawkes-simulated-job"
#: a simulated job's parameters (``KEY=VALUE`` words of its argv) and their bounds
JOB_PARAMS = {"tasks": (1, 100_000), "task_s": (0.001, 86400.0), "startup_s": (0.0, 86400.0),
              "output_bytes": (0, 2**50)}
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class Daemons:
    """One cluster's daemons on one host (the store's row of that node: :class:`fawkes.store.schema.Node`)."""

    cluster: str
    role: str  # core | transient-core | transient
    master: bool
    started: float
    ready_at: float
    ok: bool  # False: its start failed (the process exited)
    decom_at: float | None = None  # a decommission (DP) finishes then


@dataclass(slots=True)  # one per job launched, kept as long as its job directory (the soak: tens of thousands)
class LaunchedJob:
    """One job a simulated driver runs: launched by the dispatcher's argv, its tasks progressing with
    the host's cores (the store's row of the same job is :class:`fawkes.store.schema.Job`)."""

    cluster: str
    job_id: int
    pid: int
    launched: float
    tasks: int = 1
    task_s: float = 1.0
    startup_s: float = 0.0
    overhead_s: float = 0.0
    output_bytes: int = 0
    rc_when_done: int = 0
    completed: float = 0.0
    last: float = 0.0
    done_at: float | None = None  # every task finished
    rc_now: int | None = None  # exit code once known (bad argv: at once)
    cancelled: bool = False

    def rc(self, now: float) -> int | None:
        if self.rc_now is not None:
            return self.rc_now
        if self.done_at is not None and now >= self.done_at + self.overhead_s:
            return self.rc_when_done
        return None

    def started(self, now: float) -> bool:
        return now >= self.launched + self.startup_s

    def active(self) -> bool:
        return not self.cancelled and self.rc_now is None and self.done_at is None


@dataclass
class SimHost:
    """One simulated host: its cores, and whether it is up (the store's row: :class:`fawkes.store.schema.Host`)."""

    name: str
    cores: int
    up: bool = True
    failed_at: float | None = None


class World:
    """Every simulated host; thread-safe (one lock: the executor and the reconciler's workers share it)."""

    def __init__(self, names, *, costs=None, cores: int = 4, speedup: float = 1.0, seed: int = 0,
                 host_failures_per_hour: float = 0.0, start_failure: float = 0.0, job_failure: float = 0.0,
                 report: str | None = None, clock=time.time):
        from fawkes.sim.costs import CostModel

        self.costs = costs if costs is not None else CostModel()
        self.speedup = float(speedup)
        # one stream per kind of chance, so that the k-th daemon start and the k-th host failure come
        # out the same whatever the threads' interleaving and the machine's load (a seed's run of
        # failures is fixed: tests/test_simulated_fleet.py relies on it); latencies and job outcomes
        # draw from the third
        self.rng = random.Random(seed)
        self.start_rng = random.Random(f"{seed}/starts")
        self.fail_rng = random.Random(f"{seed}/host failures")
        self.clock = clock
        self.lock = threading.RLock()
        self.hosts = {n: SimHost(n, cores) for n in names}
        self.nodes: dict[str, dict[str, Daemons]] = defaultdict(dict)  # host -> cluster -> node
        self.members: dict[str, set[str]] = defaultdict(set)  # cluster -> hosts with its nodes
        self.files: dict[tuple[str, str], LaunchedJob] = {}  # (host, job dir) -> job
        self.jobs_of: dict[str, list[LaunchedJob]] = defaultdict(list)  # cluster -> its jobs not yet ended
        self.written: Counter = Counter()  # cluster -> output bytes of its finished jobs
        self.outputs: Counter = Counter()  # cluster -> finished jobs with output
        #: saved outputs (the simulated kind's save_output): path -> (files, bytes), on storage outside the
        #: clusters (a teardown leaves them; scale to zero restores them)
        self.saved: dict[str, tuple[int, int]] = {}
        self.start_failure = start_failure
        self.job_failure = job_failure
        self.report_path = report
        if report:  # also at the process' exit: a coordinator that stops with operations still running
            atexit.register(self._write_report_at_exit)  # leaves its executor open (they resume on the next start)
        self.pids = 1000
        self.rate = len(self.hosts) * host_failures_per_hour / 3600.0 * self.speedup  # failures per real second
        self.next_fail = self.clock() + self._exp()
        # what happened (the report; the CI test's invariants)
        self.removed: list[dict] = []
        self.failed_hosts: list[dict] = []
        self.launches: Counter = Counter()
        self.unsimulated: Counter = Counter()
        self.counts: Counter = Counter()

    @classmethod
    def of(cls, fleet, names) -> "World":
        """The world of an inventory's ``simulated:`` section (a checked SimulatedFleet)."""
        from fawkes.sim.costs import cost_model
        from fawkes.traces.costfile import load_cost_file

        costs = cost_model(load_cost_file(fleet.costs)) if fleet.costs else None
        return cls(names, costs=costs, cores=fleet.cores, speedup=fleet.speedup, seed=fleet.seed,
                   host_failures_per_hour=fleet.host_failures_per_hour, start_failure=fleet.start_failure,
                   job_failure=fleet.job_failure, report=fleet.report)

    # ------------------------------------------------------------------ time and chance
    def now(self) -> float:
        return self.clock()

    def _exp(self) -> float:
        return self.fail_rng.expovariate(self.rate) if self.rate > 0 else math.inf

    def draw(self, mean: float) -> float:
        """A latency around ``mean`` simulated seconds (lognormal, the cost model's cv), in real seconds."""
        if mean <= 0:
            return 0.0
        cv = self.costs.cv
        if cv > 0:
            s2 = math.log1p(cv * cv)
            mean = self.rng.lognormvariate(math.log(mean) - s2 / 2, math.sqrt(s2))
        return mean / self.speedup

    def _fail_hosts(self, now: float) -> None:
        """Host failures due by ``now`` (thinning: a drawn host that is down or runs a master is spared)."""
        names = None
        while now >= self.next_fail:
            at = self.next_fail
            self.next_fail = at + self._exp()
            names = names or sorted(self.hosts)
            h = self.hosts[self.fail_rng.choice(names)]
            if not h.up or any(n.master for n in self.nodes[h.name].values()):
                continue
            for c in list(self.nodes[h.name]):
                self.advance(c, at)
            h.up, h.failed_at = False, at
            self.failed_hosts.append({"time": at, "host": h.name, "clusters": sorted(self.nodes[h.name])})

    # ------------------------------------------------------------------ the cluster's slots and jobs
    def _registered(self, n: Daemons, host: str, t: float) -> bool:
        h = self.hosts[host]
        return n.ok and n.ready_at <= t and (h.up or (h.failed_at is not None and t < h.failed_at))

    def slots(self, cluster: str, t: float) -> int:
        return sum(self.hosts[h].cores for h in self.members.get(cluster, ())
                   if self._registered(self.nodes[h][cluster], h, t))

    def advance(self, cluster: str, now: float) -> None:
        """Run ``cluster``'s jobs up to ``now``: piecewise, the slots constant between nodes registering."""
        jobs = [j for j in self.jobs_of.get(cluster, ()) if j.active()]
        if not jobs:
            return
        last = min(j.last for j in jobs)
        if now <= last:
            return
        marks = {now}
        for h in self.members.get(cluster, ()):
            n = self.nodes[h][cluster]
            if last < n.ready_at < now:
                marks.add(n.ready_at)
        marks |= {j.launched + j.startup_s for j in jobs if last < j.launched + j.startup_s < now}
        t = last
        for end in sorted(marks):
            running = [j for j in jobs if j.active() and j.started(t) and j.last <= t]
            if running:
                share = self.slots(cluster, t) / len(running)
                for j in running:
                    left = j.tasks - j.completed
                    rate = min(share, max(left, 1.0)) / j.task_s  # tasks per second
                    if rate <= 0:
                        continue
                    if rate * (end - t) >= left:
                        j.done_at = t + left / rate
                        j.completed = float(j.tasks)
                    else:
                        j.completed += rate * (end - t)
            for j in jobs:
                j.last = max(j.last, end)
            t = end
        for j in jobs:
            if j.done_at is not None and j.rc_when_done == 0:
                self.written[cluster] += j.output_bytes
                self.outputs[cluster] += 1
        self.jobs_of[cluster] = [j for j in self.jobs_of[cluster] if j.active()]

    def job_counts(self, j: LaunchedJob, now: float) -> tuple[int, int, int]:
        """(pending, running, completed) tasks of a started job, its share of the slots now."""
        done = int(j.completed)
        if j.done_at is not None:
            return 0, 0, j.tasks
        active = [x for x in self.jobs_of.get(j.cluster, ()) if x.active() and x.started(now)]
        share = self.slots(j.cluster, now) / max(1, len(active))
        running = min(int(share), j.tasks - done)
        return j.tasks - done - running, running, done

    # ------------------------------------------------------------------ what the driver does
    def check_up(self, host: str) -> None:
        h = self.hosts.get(host)
        if h is None:
            raise FawkesError(f"{host}: not a simulated host")
        if not h.up:
            raise FawkesError(f"{host}: simulated host down (failed)")

    def start(self, cluster: str, host: str, role: str, master: bool, mean_s: float) -> Daemons:
        """Start ``cluster``'s daemons on ``host`` (idempotent: a running start is kept)."""
        with self.lock:
            now = self.now()
            self._fail_hosts(now)
            self.check_up(host)
            old = self.nodes[host].get(cluster)
            if old is not None and old.ok and old.role == role and old.master == master:
                return old
            self.advance(cluster, now)
            ok = self.start_rng.random() >= self.start_failure
            n = Daemons(cluster, role, master, now, now + self.draw(mean_s), ok)
            self.nodes[host][cluster] = n
            self.members[cluster].add(host)
            self.counts["starts"] += 1
            if not ok:
                self.counts["start_failures"] += 1
            return n

    def forget_failed_start(self, cluster: str, host: str) -> None:
        with self.lock:
            n = self.nodes[host].get(cluster)
            if n is not None and not n.ok:
                self._drop(cluster, host)

    def _drop(self, cluster: str, host: str) -> Daemons | None:
        n = self.nodes[host].pop(cluster, None)
        self.members[cluster].discard(host)
        if not self.members[cluster]:
            self.members.pop(cluster, None)
        return n

    def stop(self, cluster: str, host: str, how: str) -> bool:
        """Stop ``cluster``'s daemons on ``host``; False when the host is down (nothing can be done there)."""
        with self.lock:
            now = self.now()
            self._fail_hosts(now)
            h = self.hosts[host]
            if not h.up:
                return False
            self.advance(cluster, now)
            n = self._drop(cluster, host)
            if n is None:
                return True
            if how == "fp" and n.ok:  # its tasks' work lost: half a task's work per slot it ran
                active = [j for j in self.jobs_of.get(cluster, ()) if j.active() and j.started(now)]
                for j in active:
                    lost = 0.5 * min(h.cores / max(1, len(active)), j.tasks - j.completed)
                    j.completed = max(0.0, j.completed - lost)
            self.removed.append({"time": now, "host": host, "cluster": cluster, "role": n.role, "how": how,
                                 "master": n.master})
            return True

    def decommission(self, cluster: str, host: str, mean_s: float) -> float:
        """Start (or find started) the decommission of ``cluster``'s storage on ``host``; when it ends."""
        with self.lock:
            self.check_up(host)
            n = self.nodes[host].get(cluster)
            if n is None:
                return self.now()
            if n.decom_at is None:
                n.decom_at = self.now() + self.draw(mean_s)
            return n.decom_at

    def wipe(self, cluster: str, host: str) -> None:
        with self.lock:
            for key in [k for k, j in self.files.items() if k[0] == host and j.cluster == cluster]:
                del self.files[key]

    def drop_output(self, cluster: str) -> None:
        """``cluster``'s file system is gone (a teardown that wipes): its output with it."""
        with self.lock:
            self.written.pop(cluster, None)
            self.outputs.pop(cluster, None)

    def node(self, cluster: str, host: str) -> tuple[Daemons | None, bool | None]:
        """(the node, whether the host answers)."""
        with self.lock:
            self._fail_hosts(self.now())
            h = self.hosts.get(host)
            return self.nodes[host].get(cluster), (h is not None and h.up)

    def sample(self, cluster: str):
        """(time, slots, {app id: (pending, running, completed)}, unfinished jobs, written bytes, outputs)."""
        with self.lock:
            now = self.now()
            self._fail_hosts(now)
            self.advance(cluster, now)
            per = {}
            jobs = [j for j in self.jobs_of.get(cluster, ()) if j.active()]
            for j in jobs:
                if j.started(now):
                    per[f"sim-{j.job_id}"] = self.job_counts(j, now)
            return now, self.slots(cluster, now), per, len(jobs), self.written[cluster], self.outputs[cluster]

    # ------------------------------------------------------------------ what the dispatcher runs
    def launch(self, host: str, d: str, inner: str) -> str:
        """The dispatcher's launch in job directory ``d`` (nothing when it has a pid or was cancelled)."""
        now = self.now()
        key = (host, d)
        if key in self.files:
            return ""
        cluster, job_id = _job_of(d)
        self.pids += 1
        j = LaunchedJob(cluster, job_id, self.pids, now, last=now)
        self.launches[f"{cluster}/{job_id}"] += 1
        self.counts["launches"] += 1
        argv = _argv(inner)
        problem = _parse_job(argv, j)
        if problem:
            j.rc_now = 127 if problem == "not found" else 2
        else:
            j.startup_s = self.draw(j.startup_s if j.startup_s else self.costs.job_startup_s)
            j.task_s = self.draw(j.task_s) or j.task_s / self.speedup
            j.overhead_s = self.draw(self.costs.job_overhead_s)
            j.rc_when_done = 1 if self.rng.random() < self.job_failure else 0
            self.advance(cluster, now)
            self.jobs_of[cluster].append(j)
        self.files[key] = j
        return ""

    def poll(self, host: str, d: str) -> str:
        now = self.now()
        j = self.files.get((host, d))
        if j is None:
            return "missing\n"
        self.advance(j.cluster, now)
        rc = j.rc(now)
        app = f"\nsim-{j.job_id}" if j.started(now) or rc is not None else ""
        if rc is not None:
            return f"rc {rc}{app}\n"
        if j.cancelled:
            return f"cancelled{app}\n"
        return f"running{app}\n"

    def cancel(self, host: str, d: str) -> str:
        now = self.now()
        j = self.files.get((host, d))
        if j is None:
            return "missing\n"
        self.advance(j.cluster, now)
        rc = j.rc(now)
        if rc is not None:
            return f"rc {rc}\n"
        j.cancelled = True
        self.jobs_of[j.cluster] = [x for x in self.jobs_of[j.cluster] if x.active()]
        return "killed sigterm\n"

    # ------------------------------------------------------------------ the report
    def report(self) -> dict:
        """What runs where now, and what happened (JSON-able)."""
        with self.lock:
            now = self.now()
            self._fail_hosts(now)
            daemons = {h: sorted(c for c, n in cs.items() if n.ok) for h, cs in self.nodes.items()
                       if self.hosts[h].up and any(n.ok for n in cs.values())}
            return {"time": now, "hosts": len(self.hosts), "speedup": self.speedup,
                    "hosts_down": sorted(h.name for h in self.hosts.values() if not h.up),
                    "daemons": daemons, "removed": self.removed, "failed_hosts": self.failed_hosts,
                    "launches": dict(self.launches), "counts": dict(self.counts),
                    "unsimulated": dict(self.unsimulated.most_common(20))}

    def _write_report_at_exit(self) -> None:
        try:
            self.write_report()
        except OSError:  # its directory is gone (a test's temporary one)
            pass

    def write_report(self) -> None:
        if not self.report_path:
            return
        tmp = f"{self.report_path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.report(), f, indent=1, sort_keys=True)
        os.replace(tmp, self.report_path)


def _job_of(d: str) -> tuple[str, int]:
    """(cluster, job id) of a job directory ``<root>/clusters/<cluster>/jobs/<id>``."""
    parts = d.rstrip("/").split("/")
    try:
        return parts[-3], int(parts[-1])
    except (IndexError, ValueError):
        return "?", -1


def _argv(inner: str) -> list[str]:
    """The argv of the dispatcher's ``sh -c`` text: ``K=V ... ARGV...; echo $? > RC``."""
    cmd = inner.rsplit("; echo $? > ", 1)[0]
    try:
        words = shlex.split(cmd)
    except ValueError:
        return []
    while words and _ENV_WORD.match(words[0]):
        words.pop(0)
    return words


def _parse_job(argv: list[str], j: LaunchedJob) -> str:
    """Fill ``j`` from ``fawkes-simulated-job KEY=VALUE...``; a problem ('' when none)."""
    if not argv or argv[0] != SIM_PROGRAM:
        return "not found"
    for w in argv[1:]:
        key, _, val = w.partition("=")
        if key not in JOB_PARAMS:
            return f"unknown parameter {w[:40]!r}"
        lo, hi = JOB_PARAMS[key]
        try:
            v = float(val)
        except ValueError:
            return f"{key}: not a number"
        if not (lo <= v <= hi):  # NaN fails too
            return f"{key}: out of range"
        setattr(j, key, int(v) if key in ("tasks", "output_bytes") else v)
    return ""
