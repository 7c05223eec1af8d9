"""Dask distributed on shared storage: the ``dask`` framework kind.

An MR-cluster of this kind (docs/frameworks.md, "Kind dask"):

* the first core node runs the Dask scheduler (``distributed.cli.dask_scheduler``, port 8786, its HTTP
  server with ``/json/identity.json``, ``/json/counts.json`` and the Prometheus ``/metrics`` on 8787,
  both on the master's own address), every node one Dask worker (``--nthreads`` = the node's cores,
  ``--nworkers 1``, no nanny, bound to the host's address, ``--local-directory <cluster dir>/work``);
  started and stopped over SSH through the rendered control script (pid files), never SSHCluster;
* input and output live under ``<shared_dir>/<cluster>/`` as for kind ``spark``: ``input/`` and
  ``output/<job>``; ``{input}`` / ``{output}`` of a job expand to those paths;
* nothing is stored on the nodes, so the roles are core and transient only; a transient node leaves by
  ``fp`` (its worker is killed: the scheduler recomputes the keys it held) or ``graceful``
  (``Client.retire_workers(..., close_workers=True)``, run on the master, bounded by ``drain_s``, then
  the worker is stopped whatever is left); no suspend, no opportunistic worker;
* a task is a Dask task (a key of a graph); a slot is a worker thread; samples feed ``tasks`` (queued +
  waiting as pending, processing as running, in memory as done) and ``slots`` (the sum of the workers'
  ``nthreads``), from the scheduler's HTTP server.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from fawkes import faults
from fawkes.errors import FawkesError
from fawkes.frameworks import metrics as M
from fawkes.frameworks.base import Health, JobLaunch, NodeFacts, OpResult, SuspendHooks, WorkerLaunch
from fawkes.frameworks.control import ControlScriptDriver, ServerError, SharedStorage, check_problems
from fawkes.frameworks.render import cluster_ports
from fawkes.frameworks.sample import FrameworkSample, TaskCounts
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.ssh.shell import Script

_PROM = re.compile(r'^(dask_scheduler_[a-z_]+)(?:\{state="([a-z_-]+)"\})? ([0-9.eE+-]+)$')


def parse_prometheus(text: str) -> dict[str, float]:
    """The scheduler's ``/metrics`` gauges we read: ``dask_scheduler_clients``,
    ``dask_scheduler_tasks{state=...}`` as ``tasks:STATE``, ``dask_scheduler_workers{state=...}`` as
    ``workers:STATE`` (other lines are skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _PROM.match(line.strip())
        if not m:
            continue
        name, state, value = m.groups()
        key = name[len("dask_scheduler_"):] + (f":{state}" if state else "")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def dask_sample(t: float, identity: dict | None, gauges: dict[str, float] | None,
                errors: Sequence[str] = ()) -> FrameworkSample:
    """The neutral sample of one Dask scheduler: queued + waiting + no-worker tasks are pending,
    processing ones running, those in memory done; slots are the workers' threads, busy slots the
    processing tasks (at most the slots); clients connected are the unfinished jobs."""
    g = gauges or {}
    pending = int(g.get("tasks:queued", 0) + g.get("tasks:waiting", 0) + g.get("tasks:no-worker", 0))
    running = int(g.get("tasks:processing", 0))
    done = int(g.get("tasks:memory", 0))
    tasks = TaskCounts(total=pending + running, running=running, pending=pending, completed=done,
                       failed=int(g.get("tasks:erred", 0)))
    identity = identity or {}
    slots = float(identity["total_threads"] if "total_threads" in identity
                  else sum(int(w.get("nthreads", 0)) for w in identity.get("workers", {}).values()))
    return FrameworkSample(time=t, tasks=tasks, slots=slots, busy_slots=float(min(running, slots)),
                           unfinished_jobs=int(g.get("clients", 0)), errors=tuple(errors))


class DaskDriver(SharedStorage, ControlScriptDriver):
    kind = "dask"
    roles = (Role.CORE, Role.TR)
    removal_modes = frozenset({"fp", "graceful"})
    default_shrink_mode = "fp"
    signals = frozenset({"tasks", "slots"})
    storage_name = "shared storage"
    map_only_note = "a Dask worker runs any task of any graph, it cannot be confined to map tasks"
    role_daemons = {Role.CORE: ("worker",), Role.TR: ("worker",)}
    master_daemons = ("scheduler",)
    daemon_ports = {"scheduler": ("scheduler", "dashboard")}  # a worker's ports are ephemeral
    path_options = ("shared_dir", "python")
    required_paths = ("shared_dir",)

    # ================================================================== paths and addresses
    @staticmethod
    def python(framework: FrameworkPaths) -> str:
        import sys

        return framework.python or sys.executable

    @staticmethod
    def urls(cluster: ClusterSpec) -> dict[str, str]:
        m = cluster.master.address
        p = cluster_ports(cluster)
        return {"scheduler": f"tcp://{m}:{p['scheduler']}", "http": f"http://{m}:{p['dashboard']}"}

    def _http_text(self, url: str) -> str:
        try:
            with urllib.request.urlopen(url, timeout=self.http_timeout) as resp:  # noqa: S310 (pool hosts only)
                return resp.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as exc:
            raise FawkesError(f"GET {url}: {getattr(exc, 'reason', exc)}") from None

    def identity(self, cluster: ClusterSpec) -> dict:
        """The scheduler's ``/json/identity.json``: its workers (by address, with their names, threads and
        status) and ``total_threads``.  distributed answers it with a server error (500) whenever a worker's
        last heartbeat carried metrics keyed by tuples (its per-task timings: while tasks run, every few
        seconds; the JSON encoder refuses them, distributed 2026.8), so then the same facts come from its
        ``/api/v1/get_workers`` (names and addresses; the scheduler's ``api`` route, which the control script
        turns on) and ``/json/counts.json`` (threads), without each worker's status."""
        base = self.urls(cluster)["http"]
        try:
            return self._http_json(base + "/json/identity.json")
        except ServerError:
            got = self._http_json(base + "/api/v1/get_workers", server_error_retry_s=0.5)
            counts = self._http_json(base + "/json/counts.json", server_error_retry_s=0.5)
            return {"type": "Scheduler", "total_threads": int(counts.get("cores", 0)),
                    "workers": {w["address"]: {"name": w.get("name")} for w in got.get("workers", [])
                                if isinstance(w, dict) and "address" in w}}

    def workers_by_name(self, cluster: ClusterSpec) -> dict[str, dict]:
        """Registered workers by their ``--name`` (the node's name)."""
        return {str(w.get("name")): w for w in self.identity(cluster).get("workers", {}).values()}

    def workers_alive(self, cluster: ClusterSpec) -> set[str]:
        """The addresses of the cluster's nodes whose worker the scheduler counts as running."""
        ws = self.workers_by_name(cluster)
        return {n.address for n in cluster.nodes if n.name in ws and ws[n.name].get("status", "running") == "running"}

    # ================================================================== framework check
    @classmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        """The hosts' Python (a file, executable, ``distributed`` importable) and the shared directory
        (a writable directory) on every host."""
        py, d = cls.python(framework), framework.shared_dir
        if not d:
            return {h: ["kind dask needs --shared-dir (a directory every host sees)"] for h in hosts}
        script = Script("if test -f {py} && test -x {py}; then "
                        "{py} -c 'import distributed' >/dev/null 2>&1 || echo {m2}; else echo {m1}; fi; "
                        "test -d {d} && test -w {d} || echo {m3}",
                        py=py, d=d, m1=f"python {py}: not an executable file",
                        m2=f"python {py}: cannot import distributed (pip install distributed)",
                        m3=f"shared dir {d}: not a writable directory")
        return check_problems(executor, hosts, script)

    # ================================================================== deploy, grow
    def master_ready(self, cluster: ClusterSpec) -> bool:
        return self.identity(cluster).get("type") == "Scheduler"

    def _wait_workers(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], timeout: float, t0: float) -> None:
        want = {n.name for n in nodes}

        def registered():
            ws = self.workers_by_name(cluster)
            return all(h in ws and ws[h].get("status", "running") == "running" for h in want)

        self._wait(cluster, f"{len(want)} worker(s) registered with the scheduler", registered, timeout, t0)
        self.emit(cluster, "register", f"{len(want)} worker(s) registered", t0=t0)

    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        t0 = time.monotonic()
        bad = [n.name for n in nodes if n.role is Role.TC]
        if bad:
            raise FawkesError(f"cluster {cluster.name}: kind dask stores nothing on its nodes, so it has no "
                              f"transient-core nodes ({', '.join(bad)}): grow it by transient nodes")
        new, names = self._joining(cluster, nodes, t0)
        self._refuse_busy_ports(new, nodes)
        rendered = self.render(new, names)
        self._run({n.name: Script("{w} && {s}", w=self._write_script(self._config_files(rendered[n.name])),
                                  s=self._ctl(new, n, "start", "worker")) for n in nodes},
                  "writing configs and starting workers", 120)
        faults.point("daemons-started")
        phases = {"start": time.monotonic() - t0}
        t = time.monotonic()
        self._wait_workers(new, nodes, timeout, t0)
        phases["register"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        return OpResult(new, phases, tuple(names))

    # ================================================================== shrink
    def remove_nodes(self, cluster: ClusterSpec, names: Sequence[str], mode: ShrinkMode | None = None, *,
                     timeout: float = 600.0, cancel: threading.Event | None = None,
                     drain_s: float = 2.0) -> OpResult:
        """FP kills the worker (the scheduler recomputes its keys elsewhere); DP of a transient node is
        the graceful removal: the scheduler retires the worker (its keys move to the others, then it
        closes), waited for at most ``drain_s`` seconds, then the process is stopped whatever is left."""
        t0 = time.monotonic()
        present = self._leaving(cluster, names)
        if not present:  # idempotent: already gone
            return OpResult(cluster, {"total": 0.0}, ())
        phases: dict[str, float] = {}
        gone = [n.name for n in present]
        if mode is ShrinkMode.DP:  # graceful
            self.emit(cluster, "graceful", f"retiring {', '.join(gone)} (at most {drain_s:g}s)", t0=t0)
            m = cluster.master
            out = self._run({m.name: self._ctl(cluster, m, "retire", f"{max(drain_s, 0.0):g}", *gone)},
                            "retiring workers", max(drain_s, 0.0) + 60)[m.name]
            self.emit(cluster, "graceful", out.strip().splitlines()[-1] if out.strip() else "retired", t0=t0)
            self._ctl_each(cluster, {h: [("stop", "worker", "10")] for h in gone}, "stopping retired workers",
                           if_present=True)
            phases["graceful"] = time.monotonic() - t0
        else:
            self.emit(cluster, "fp", f"killing the workers on {', '.join(gone)}", t0=t0)
            self._ctl_each(cluster, {h: [("kill", "worker")] for h in gone}, "killing workers (FP)", if_present=True)
            phases["fp_stop"] = time.monotonic() - t0
        return self._gone(cluster, gone, lambda: set(gone) & set(self.workers_by_name(cluster)),
                          "removed workers to leave the scheduler", t0, phases)

    # ================================================================== input / output
    # ================================================================== reconfigure
    def reconfigure(self, cluster: ClusterSpec) -> dict[str, list[str]]:
        """Re-render; restart the scheduler first, then the workers, on hosts whose settings changed."""
        t0 = time.monotonic()
        changed = self.push_configs(cluster)
        plan = {h: list(self.daemons_for(cluster, cluster.node(h))) for h, comps in changed.items() if comps}
        for d in ("scheduler", "worker"):
            per = {h: [("stop", d), ("start", d)] for h, ds in plan.items() if d in ds}
            if per:
                self._ctl_each(cluster, per, f"restarting {d}")
                self.emit(cluster, "reconfigure", f"restarted {d} on {', '.join(sorted(per))}", t0=t0)
        if plan:
            self._wait_workers(cluster, cluster.nodes if cluster.master.name in plan
                               else [cluster.node(h) for h in plan], 120, t0)
        return plan

    # ================================================================== observation, health, metrics
    def observe(self, cluster: ClusterSpec, hosts: Sequence[str] | None = None) -> dict[str, NodeFacts]:
        nodes = list(cluster.nodes) if hosts is None else [cluster.node(h) for h in hosts]
        status = self._status(cluster, nodes, timeout=15)
        problems: list[str] = []
        workers = None
        try:
            workers = self.workers_by_name(cluster)
        except FawkesError as exc:
            problems.append(f"scheduler: {exc}")
        out = {}
        for n in nodes:
            want = self.daemons_for(cluster, n)
            st = status.get(n.name)
            daemons = {d: (None if st is None else st.get(d, False)) for d in want}
            reg: dict[str, str | None] = {}
            for d in want:
                if workers is None:
                    reg[d] = None
                elif d == "scheduler":
                    reg[d] = "running"
                else:
                    reg[d] = str(workers[n.name].get("status", "running")) if n.name in workers else "absent"
            up = all(daemons[d] is True and reg[d] == "running" for d in want)
            host_problems = tuple(problems) + ((f"{n.name}: no answer over SSH",) if st is None else ())
            out[n.name] = NodeFacts(n.name, daemons, reg, up, True, host_problems, False)
        return out

    def health(self, cluster: ClusterSpec) -> Health:
        facts = self.observe(cluster)
        daemons = {h: {d: bool(v) for d, v in f.daemons.items()} for h, f in facts.items()}
        problems = sorted({p for f in facts.values() for p in f.problems})
        for h, f in facts.items():
            problems += [f"{h}: {d} not running" for d, v in f.daemons.items() if v is False]
            problems += [f"{h}: worker {r} in the scheduler" for d, r in f.registration.items()
                         if d == "worker" and r not in (None, "running")]
        return Health(not problems, daemons, tuple(problems))

    def metrics(self, cluster: ClusterSpec, *, jobs: Sequence[int] = (), host_stats: bool = False) -> FrameworkSample:
        """Task counts from the scheduler's ``/metrics`` (Prometheus text), slots from its identity."""
        errors: list[str] = []
        identity = gauges = None
        base = self.urls(cluster)["http"]
        try:
            identity = self.identity(cluster)
        except FawkesError as exc:
            errors.append(str(exc))
        try:
            gauges = parse_prometheus(self._http_text(base + "/metrics"))
        except FawkesError as exc:
            errors.append(str(exc))
        sample = dask_sample(time.time(), identity, gauges, errors)
        if host_stats:
            hosts = {}
            res = self.ex.run_each({n.name: Script(M.HOST_STATS_SCRIPT.replace("{interval}", "0.5"),
                                                   path=cluster.cluster_dir(n)) for n in cluster.nodes}, timeout=30)
            for h, r in res.items():
                try:
                    if r.ok:
                        hosts[h] = M.parse_host_stats(r.stdout)
                    else:
                        errors.append(f"{h}: {r.error}")
                except FawkesError as exc:
                    errors.append(f"{h}: {exc}")
            sample = dataclasses.replace(sample, hosts=hosts, errors=tuple(errors))
        return sample

    # ================================================================== jobs
    def expand(self, cluster: ClusterSpec, arg: str, job, output: str) -> str:
        """``{input}``: the job's input under the cluster's shared directory (an absolute path already
        there is taken as it is), ``{output}``: ``output`` there, ``{job}``: the job id."""
        inp = job.input_path or ""
        if inp and not inp.startswith(self.data_dir(cluster) + "/"):
            inp = self._shared(cluster, inp)
        return (arg.replace("{input}", inp).replace("{output}", self._shared(cluster, output))
                .replace("{job}", str(job.id)))

    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str | None = None,
                    python: str | None = None) -> JobLaunch:
        """``PYTHON SCRIPT ARGS...`` on the master, with ``DASK_SCHEDULER_ADDRESS`` naming the cluster's
        scheduler (``distributed.Client()`` connects there); ``PYTHON``: the cluster's option ``job_python``,
        else the framework's ``--python``, else ``python``, else the interpreter fawkes runs under (the lab's
        hosts see it).  ``driver_memory`` has no meaning for a Dask client."""
        from fawkes.frameworks.render import _options

        py = _options(cluster)["job_python"] or cluster.framework.python or python or sys.executable
        argv = (py, *(self.expand(cluster, a, job, output) for a in job.argv))
        return JobLaunch(argv, {"DASK_SCHEDULER_ADDRESS": self.urls(cluster)["scheduler"],
                                "FAWKES_JOB": f"{cluster.name}/{job.id}"})

    # ================================================================== suspend / opportunistic: not offered
    @classmethod
    def suspend_hooks(cls, cluster: str, root: str) -> SuspendHooks:
        raise FawkesError("suspend is not offered by kind dask (removal modes: fp, graceful)")

    def opportunistic_worker(self, cluster: ClusterSpec, node: NodeSpec) -> WorkerLaunch:
        raise FawkesError("opportunistic workers are not offered by kind dask (it does not declare suspend)")


DRIVER = DaskDriver
