"""Kind ``simulated``: MR-clusters on a SIMULATED fleet (fawkes/simfleet; a test and capacity-planning
tool, never a real framework).  Its driver keeps the contract of every kind (base.py) and does its
"I/O" on the world behind the inventory's simulated executor: daemons that start and register after
a drawn latency, TC nodes that decommission, jobs ``fawkes-simulated-job KEY=VALUE...`` whose tasks
run on the slots the cluster holds.  On a real inventory every operation is refused.

    fawkes framework add sim --kind simulated --shared-dir /simulated -i simulated-inventory.yaml
    fawkes submit etl -- tasks=40 task_s=12 startup_s=5 output_bytes=1000000
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Sequence

from fawkes.errors import FawkesError
from fawkes.frameworks.base import (DecommissionInterrupted, DecommissionTimeout, FrameworkDriver, Health,
                                    JobLaunch, NodeFacts, OpResult, SavedOutput, SuspendHooks, TaskCounts,
                                    WorkerLaunch)
from fawkes.frameworks.sample import FrameworkSample, sum_tasks
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.simfleet.world import SIM_PROGRAM

_DATASET = re.compile(r"-(\d{1,16})B$")  # an input path ending in -<bytes>B: that many bytes to load


class SimulatedDriver(FrameworkDriver):
    kind = "simulated"
    metrics_wait = False  # the world is in this process: read cluster after cluster, no threads
    roles = (Role.CORE, Role.TC, Role.TR)
    removal_modes = frozenset({"fp", "dp", "graceful"})
    default_shrink_mode = "fp"
    signals = frozenset({"tasks", "slots", "written_bytes", "job_progress"})
    map_only_note = "a simulated worker has no task types to confine"
    storage_name = "the simulated storage"
    job_id_pattern = "sim-[0-9][0-9]*"
    path_options = ("shared_dir",)
    required_paths = ("shared_dir",)  # nominal: nothing is ever written there
    role_daemons = {Role.CORE: ("sim-worker", "sim-store"), Role.TC: ("sim-worker", "sim-store"),
                    Role.TR: ("sim-worker",)}
    master_daemons = ("sim-master",)

    def __init__(self, executor, *, progress=None, http_timeout: float = 5.0, poll_s: float = 0.05):
        super().__init__(executor, progress=progress, http_timeout=http_timeout)
        self.poll_s = poll_s

    @property
    def world(self):
        w = getattr(self.ex, "world", None)
        if w is None:
            raise FawkesError("kind simulated runs only on a simulated inventory (simulated: N, "
                              "inventory/README.md); these hosts are real")
        return w

    def render(self, cluster: ClusterSpec, hosts=None):
        return {}  # nothing is written on a simulated host

    # ------------------------------------------------------------------ helpers
    def _wait_until(self, t: float, cancel: threading.Event | None = None) -> bool:
        """Sleep until the world's time ``t``; False when ``cancel`` was set first."""
        while True:
            left = t - self.world.now()
            if left <= 0:
                return True
            if cancel is not None:
                if cancel.wait(min(left, 1.0)):
                    return False
            else:
                time.sleep(min(left, 1.0))

    def _start(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], mean_s, timeout: float, t0: float) -> None:
        w = self.world
        started = {}
        problems = []
        for n in nodes:
            master = n.name == cluster.master.name
            try:
                started[n.name] = w.start(cluster.name, n.name, n.role.value, master, mean_s(n, master))
            except FawkesError as exc:
                problems.append(str(exc))
        if started:
            ready = max(x.ready_at for x in started.values())
            if ready - w.now() > timeout:
                self._wait_until(w.now() + timeout)
                raise FawkesError(f"cluster {cluster.name}: timed out after {timeout:g}s waiting for "
                                  f"{len(started)} simulated node(s) to register")
            self._wait_until(ready)
        for h, x in started.items():
            if not x.ok:
                w.forget_failed_start(cluster.name, h)
                problems.append(f"{h}: simulated daemon start failed")
            else:
                _, up = w.node(cluster.name, h)
                if not up:
                    problems.append(f"{h}: simulated host down (failed)")
        if problems:
            raise FawkesError(f"cluster {cluster.name}: starting failed on {len(problems)} host(s): "
                              + "; ".join(problems)[:400])
        self.emit(cluster, "register", f"{len(started)} simulated node(s) registered", t0=t0)

    # ------------------------------------------------------------------ operations
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        if getattr(executor, "world", None) is None:
            return {h: ["kind simulated runs only on a simulated inventory (simulated: N)"] for h in hosts}
        return {h: [] for h in hosts}

    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        self.emit(cluster, "deploy", f"{len(cluster.nodes)} simulated node(s)", t0=t0)
        costs = self.world.costs
        self._start(cluster, cluster.nodes, lambda n, m: costs.deploy_s, timeout, t0)
        return OpResult(cluster, {"total": time.monotonic() - t0}, tuple(n.name for n in cluster.nodes))

    def load_input(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> None:
        m = _DATASET.search(src or "")
        if m:
            w = self.world
            w.check_up(cluster.master.name)
            self._wait_until(w.now() + min(timeout, int(m.group(1)) / w.costs.load_Bps / w.speedup))

    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        for n in nodes:
            if n.name == cluster.master.name:
                raise FawkesError(f"{n.name}: the master node joins only at deployment")
        new = cluster
        for n in nodes:
            new = new.with_node(n)
        c = self.world.costs
        mean = {Role.TR: c.tr_ready_s, Role.TC: c.tc_ready_s, Role.CORE: c.core_ready_s}
        self._start(new, nodes, lambda n, m: mean[n.role], timeout, t0)
        return OpResult(new, {"total": time.monotonic() - t0}, tuple(n.name for n in nodes))

    def remove_nodes(self, cluster: ClusterSpec, names: Sequence[str], mode: ShrinkMode | None = None, *,
                     timeout: float = 600.0, cancel: threading.Event | None = None,
                     drain_s: float = 2.0) -> OpResult:
        t0 = time.monotonic()
        w = self.world
        present = [cluster.node(n) for n in names if any(x.name == n for x in cluster.nodes)]
        if not present:
            return OpResult(cluster, {"total": 0.0}, ())
        for n in present:
            if n.role is Role.CORE:
                raise FawkesError(f"{n.name} is a core node of {cluster.name}: core nodes are never removed "
                                  "while the cluster is active (tear the cluster down instead)")
        gone = []
        for n in present:
            how = (mode or (ShrinkMode.FP if n.role is Role.TR else ShrinkMode.DP))
            if how is ShrinkMode.DP and n.role is Role.TC:
                node, up = w.node(cluster.name, n.name)
                if node is not None:
                    if not up:
                        raise FawkesError(f"{n.name}: simulated host down (failed)")
                    done = w.decommission(cluster.name, n.name, w.costs.dp_fixed_s)
                    if done - w.now() > timeout:
                        raise DecommissionTimeout(f"{n.name}: still decommissioning after {timeout:g}s")
                    if not self._wait_until(done, cancel):
                        raise DecommissionInterrupted(f"{n.name}: decommission wait cancelled")
                label = "dp"
            elif how is ShrinkMode.DP:  # graceful: running tasks may finish, at most drain_s
                self._wait_until(w.now() + min(drain_s, w.draw(w.costs.fp_stop_s)), cancel)
                label = "graceful"
            else:
                self._wait_until(w.now() + w.draw(w.costs.fp_stop_s), cancel)
                label = "fp"
            if not w.stop(cluster.name, n.name, label):
                raise FawkesError(f"{n.name}: simulated host down (failed)")
            gone.append(n.name)
        new = cluster
        for h in gone:
            new = new.without(h)
        self.emit(new, "shrink", f"removed {', '.join(gone)}", t0=t0)
        return OpResult(new, {"total": time.monotonic() - t0}, tuple(gone))

    def save_output(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> SavedOutput | None:
        w = self.world
        m = cluster.master.name
        w.check_up(m)
        with w.lock:
            files, size = int(w.outputs[cluster.name]), int(w.written[cluster.name])
        if not files:
            return None
        self._wait_until(w.now() + min(timeout, size / w.costs.save_Bps / w.speedup))
        with w.lock:
            w.saved[dest] = (files, size)
        return SavedOutput(m, dest, files, size, _digest(cluster.name, files, size))

    def restore_output(self, cluster: ClusterSpec, saved: SavedOutput, dest: str, *, timeout: float = 600.0) -> None:
        """The saved copy checked (this fleet's copy at ``saved.path`` holds the recorded files and bytes, and
        the recorded manifest digest is theirs; a fleet started after the save, as a restarted coordinator's
        is, checks the record alone), then loaded back at the load rate: the cluster's output again."""
        w = self.world
        w.check_up(cluster.master.name)
        with w.lock:
            kept = w.saved.get(saved.path)
        if kept is not None and kept != (saved.files, saved.bytes):
            raise FawkesError(f"{saved.path}: holds {kept[0]} file(s), {kept[1]} bytes; {saved.files} file(s), "
                              f"{saved.bytes} bytes recorded")
        if saved.manifest_sha256 != _digest(cluster.name, saved.files, saved.bytes):
            raise FawkesError(f"{saved.path}: the manifest is not the one recorded")
        self.emit(cluster, "restore", f"{saved.path} -> {dest}", cluster.master.name)
        self._wait_until(w.now() + min(timeout, saved.bytes / w.costs.load_Bps / w.speedup))
        with w.lock:
            w.outputs[cluster.name], w.written[cluster.name] = saved.files, saved.bytes

    def teardown(self, cluster: ClusterSpec, *, wipe: bool = True, timeout: float = 120.0) -> OpResult:
        t0 = time.monotonic()
        w = self.world
        self._wait_until(w.now() + w.draw(w.costs.fp_stop_s))
        down = [n.name for n in cluster.nodes if not w.stop(cluster.name, n.name, "teardown")]
        if down:
            raise FawkesError(f"teardown failed on {len(down)} host(s): " + "; ".join(
                f"{h}: simulated host down (failed)" for h in down)[:400])
        if wipe:
            for n in cluster.nodes:
                w.wipe(cluster.name, n.name)
            w.drop_output(cluster.name)
        return OpResult(cluster, {"total": time.monotonic() - t0}, tuple(n.name for n in cluster.nodes))

    def reconfigure(self, cluster: ClusterSpec) -> dict[str, list[str]]:
        return {}  # no configs: nothing ever drifts

    def health(self, cluster: ClusterSpec) -> Health:
        facts = self.observe(cluster)
        daemons = {h: {d: bool(v) for d, v in f.daemons.items()} for h, f in facts.items()}
        problems = tuple(p for f in facts.values() for p in f.problems)
        problems += tuple(f"{h}: {d} not running" for h, f in facts.items() for d, v in f.daemons.items() if v is False)
        return Health(not problems, daemons, problems)

    def observe(self, cluster: ClusterSpec, hosts: Sequence[str] | None = None) -> dict[str, NodeFacts]:
        w = self.world
        nodes = list(cluster.nodes) if hosts is None else [cluster.node(h) for h in hosts]
        out = {}
        now = w.now()
        for n in nodes:
            want = self.daemons_for(cluster, n)
            node, up = w.node(cluster.name, n.name)
            if not up:
                out[n.name] = NodeFacts(n.name, {d: None for d in want}, {d: None for d in want}, False, False,
                                        (f"{n.name}: no answer (simulated host down)",), None)
                continue
            running = node is not None and node.ok
            registered = running and node.ready_at <= now
            reg = {d: ("registered" if registered else "starting" if running else "absent") for d in want}
            stores = n.role is not Role.TR
            decom = node.decom_at if node is not None else None
            out[n.name] = NodeFacts(n.name, {d: running for d in want}, reg, registered,
                                    (not stores) or node is None or (decom is not None and decom <= now), (),
                                    stores and decom is not None and decom > now)
        return out

    def metrics(self, cluster: ClusterSpec, *, jobs: Sequence[int] = (), host_stats: bool = False) -> FrameworkSample:
        now, slots, per, unfinished, written, outputs = self.world.sample(cluster.name)
        by_job = {app: TaskCounts(total=p + r, running=r, pending=p, completed=c, active_stages=1)
                  for app, (p, r, c) in per.items()}
        tasks = sum_tasks(by_job.values())
        return FrameworkSample(time=now, tasks=tasks, tasks_by_job=by_job, slots=float(slots),
                               busy_slots=float(min(tasks.running, slots)), unfinished_jobs=unfinished,
                               completed_jobs=outputs, written_bytes=float(written))

    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str | None = None,
                    python: str | None = None) -> JobLaunch:
        """``fawkes-simulated-job`` with the job's ``KEY=VALUE`` words (``tasks``, ``task_s``, ``startup_s``,
        ``output_bytes``): the simulated fleet runs it; nothing runs on this machine."""
        return JobLaunch((SIM_PROGRAM, *(str(a).replace("{job}", str(job.id)) for a in job.argv)),
                         {"FAWKES_JOB": f"{cluster.name}/{job.id}"})

    @classmethod
    def suspend_hooks(cls, cluster: str, root: str) -> SuspendHooks:
        raise FawkesError("suspend is not offered by kind simulated (removal modes: dp, fp, graceful)")

    def opportunistic_worker(self, cluster: ClusterSpec, node: NodeSpec) -> WorkerLaunch:
        raise FawkesError("opportunistic workers are not offered by kind simulated")


def _digest(cluster: str, files: int, size: int) -> str:
    """A simulated save's "MANIFEST.sha256" digest: of what it holds."""
    return hashlib.sha256(f"simulated {cluster} {files} {size}\n".encode()).hexdigest()


DRIVER = SimulatedDriver
