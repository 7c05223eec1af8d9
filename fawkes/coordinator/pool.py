"""A SLURM pool provider: grow the coordinator's pool with allocations, give them back when idle.

Configured by the coordinator config's ``pool`` block (:class:`fawkes.config.PoolConfig`)::

    pool: {provider: slurm, partition: batch, max_nodes: 8, idle_s: 300}

Two halves, kept apart:

* :func:`decide` is pure: from :class:`PoolFacts` (free hosts, queued cluster requests, which
  clusters have work waiting, the allocations held and which of their hosts a node holds), the
  configuration, the time and when each allocation became idle, it returns a
  :class:`PoolAction`: how many nodes to ask for, which allocations to give back.
* :class:`SlurmPool` does the I/O: ``squeue`` (our allocations, by job name and user),
  ``sinfo`` (a node's NodeAddr, CPUs and RealMemory), ``sbatch`` (an allocation of N whole nodes
  whose batch step sleeps while fawkes uses them) and ``scancel``; every call an argument list,
  never a shell string.  Hosts of a running allocation join the inventory, the SSH executor and
  the store's pool (``sync_hosts``); they leave it (retired in the store, then ``scancel``) only
  when no node holds them: ``sync_hosts`` refuses atomically otherwise.

When is the pool short?  When there is no free host and either the head of the cluster queue
cannot be admitted (it needs ``min_core`` free hosts), or every allocated cluster has work
waiting (pending tasks in its latest sample).  Then, if no request is already pending, it asks
for ``max(what the queue head lacks, nodes_per_request)`` nodes, never holding more than
``max_nodes``.  A pending request is withdrawn once the pool has not been short for ``idle_s``.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fawkes.errors import FawkesError

log = logging.getLogger("fawkes.coordinator.pool")

PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING"})
_JOB_ID = re.compile(r"^[0-9]{1,12}$")
LABEL = "fawkes-pool"  # the label of inventory hosts that came from an allocation


# ---------------------------------------------------------------------------------- pure decision
@dataclass(frozen=True)
class Allocation:
    """One allocation of ours as ``squeue`` shows it."""

    job_id: str
    state: str  # PENDING, RUNNING, ...
    nodes: int  # nodes asked for (pending) or held (running)
    hosts: tuple[str, ...] = ()  # node names once running

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


@dataclass(frozen=True)
class PoolFacts:
    free_hosts: int  # hosts of the pool held by nobody
    queue_head_min_core: int | None  # min_core of the first queued cluster request, None without one
    clusters: int  # allocated clusters
    short_clusters: int  # of those, how many have work waiting
    allocations: tuple[Allocation, ...] = ()
    held_hosts: frozenset[str] = frozenset()  # hosts some node holds


@dataclass(frozen=True)
class PoolAction:
    request: int = 0  # nodes to ask for (0: none)
    release: tuple[str, ...] = ()  # job ids to give back
    idle_since: dict[str, float] = field(default_factory=dict)  # job id -> since when it is idle
    reason: str = ""


def shortfall(f: PoolFacts) -> int:
    """How many more hosts the pool needs now (0: it is not short)."""
    if f.queue_head_min_core is not None and f.queue_head_min_core > f.free_hosts:
        return f.queue_head_min_core - f.free_hosts
    if f.free_hosts == 0 and f.clusters > 0 and f.short_clusters == f.clusters:
        return 1
    return 0


def decide(f: PoolFacts, *, max_nodes: int, nodes_per_request: int, idle_s: float, now: float,
           idle_since: dict[str, float]) -> PoolAction:
    """What to do with the pool's allocations now (pure: no I/O, no clock)."""
    need = shortfall(f)
    held = sum(a.nodes for a in f.allocations if a.pending or a.running)
    pending = [a for a in f.allocations if a.pending]
    since: dict[str, float] = {}
    release: list[str] = []
    reasons: list[str] = []
    for a in f.allocations:
        if a.running:
            idle = not (set(a.hosts) & f.held_hosts) and need == 0
        elif a.pending:
            idle = need == 0  # asked for, no longer needed
        else:
            continue
        if not idle:
            continue
        since[a.job_id] = idle_since.get(a.job_id, now)
        if now - since[a.job_id] >= idle_s:
            release.append(a.job_id)
            reasons.append(f"allocation {a.job_id} idle for {now - since[a.job_id]:.0f}s")
    request = 0
    if need and not pending and held < max_nodes:
        request = min(max(need, nodes_per_request), max_nodes - held)
        reasons.append(f"short of {need} host(s): asking for {request} node(s) ({held} of {max_nodes} held)")
    elif need and not pending:
        reasons.append(f"short of {need} host(s) but already holding {held} of max_nodes {max_nodes}")
    return PoolAction(request=request, release=tuple(release), idle_since={k: v for k, v in since.items()
                                                                          if k not in release},
                      reason="; ".join(reasons))


def facts_from_snapshot(snap, allocations, held_hosts) -> PoolFacts:
    """:class:`PoolFacts` of a mechanism :class:`~fawkes.mechanism.Snapshot` (pure)."""
    allocated = snap.allocated
    short = sum(1 for c in allocated if c.samples and c.samples[-1].pending_tasks > 0)
    return PoolFacts(free_hosts=len(snap.free_hosts),
                     queue_head_min_core=snap.queue[0].min_core if snap.queue else None,
                     clusters=len(allocated), short_clusters=short, allocations=tuple(allocations),
                     held_hosts=frozenset(held_hosts))


# ---------------------------------------------------------------------------------- SLURM I/O
Runner = Callable[..., subprocess.CompletedProcess]


class SlurmPool:
    """The pool's SLURM side: one instance per coordinator; :meth:`step` runs at every sample."""

    def __init__(self, cfg, inventory, *, env: dict[str, str] | None = None, run: Runner = subprocess.run,
                 clock: Callable[[], float] = time.time, timeout: float = 30.0):
        self.cfg = cfg
        self.inventory = inventory
        # the inventory's own hosts (never ours to drop); hosts we added carry the label LABEL
        self.base = {h.name for h in inventory.hosts if LABEL not in h.labels}
        self.env = dict(env if env is not None else os.environ)
        if cfg.slurm_conf is not None:
            if not cfg.slurm_conf.is_file():
                raise FawkesError(f"pool.slurm_conf: {cfg.slurm_conf} is not a file")
            self.env["SLURM_CONF"] = str(cfg.slurm_conf)
        self._failing: str | None = None  # the last SLURM error logged (logged once, not every sample)
        self._run = run
        self.clock = clock
        self.timeout = timeout
        self.user = getpass.getuser()
        self.owner: dict[str, str] = {}  # pool host -> job id of its allocation
        self.idle_since: dict[str, float] = {}
        self.last: PoolAction | None = None

    # -- commands
    def _slurm(self, argv: list[str]) -> str:
        try:
            proc = self._run(argv, capture_output=True, text=True, env=self.env, timeout=self.timeout,
                             stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FawkesError(f"pool: `{argv[0]}` failed: {exc}") from None
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout or "").strip().splitlines()
            raise FawkesError(f"pool: `{argv[0]}` failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
        return proc.stdout

    def allocations(self) -> list[Allocation]:
        """Our allocations (job name and user), pending or running."""
        from fawkes.inventory.hostlist import expand
        out = self._slurm(["squeue", "--noheader", f"--name={self.cfg.job_name}", f"--user={self.user}",
                           f"--partition={self.cfg.partition}", "--format=%i|%T|%D|%N"])
        allocs = []
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 4 or not _JOB_ID.match(parts[0]) or not parts[2].isdigit():
                continue
            hosts = tuple(expand(parts[3])) if parts[3] and parts[1] in RUNNING_STATES else ()
            allocs.append(Allocation(parts[0], parts[1], int(parts[2]), hosts))
        return allocs

    def node_hosts(self, names: list[str]):
        """Inventory hosts for SLURM nodes: address = NodeAddr, cores = CPUs, memory = RealMemory."""
        from fawkes.inventory.model import InventoryHost
        from fawkes.inventory.schema import SAFE_NAME, check_address
        out = self._slurm(["sinfo", "--noheader", "--Node", f"--nodes={','.join(names)}", "--format=%N|%o|%c|%m"])
        hosts = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 4 or parts[0] not in names or parts[0] in hosts:
                continue
            name, addr, cpus, mem = parts
            try:
                if not SAFE_NAME.match(name):
                    raise ValueError(f"node name {name!r} is not a safe identifier")
                check_address(addr)
                cores, memory = int(cpus), int(mem.rstrip("+"))
            except ValueError as exc:
                log.warning("pool: node %s skipped: %s", name, exc)
                continue
            hosts[name] = InventoryHost(name=name, address=addr, port=self.cfg.port, user=self.cfg.user,
                               key_file=self.cfg.key_file, cores=max(1, cores), memory_mb=memory or None,
                               work_dir=self.cfg.work_dir, labels=(LABEL,))
        return [hosts[n] for n in names if n in hosts]

    def submit(self, nodes: int) -> str:
        """sbatch an allocation of ``nodes`` whole nodes whose batch step sleeps; returns the job id."""
        argv = ["sbatch", "--parsable", f"--job-name={self.cfg.job_name}", f"--partition={self.cfg.partition}",
                f"--nodes={nodes}", "--exclusive", "--export=NONE", "--chdir=/tmp", "--output=/dev/null",
                "--comment=fawkes pool: hosts of this allocation run fawkes' MR-clusters"]
        if self.cfg.time_limit_min:
            argv.append(f"--time={self.cfg.time_limit_min}")
        argv += ["--wrap", "exec sleep infinity"]
        job = self._slurm(argv).strip().split(";")[0]
        if not _JOB_ID.match(job):
            raise FawkesError(f"pool: sbatch printed {job[:80]!r}, not a job id")
        return job

    def cancel(self, job_id: str) -> None:
        if not _JOB_ID.match(job_id):
            raise FawkesError(f"pool: {job_id!r} is not a job id")
        self._slurm(["scancel", job_id])

    # -- the pool
    def adopt(self) -> list[str]:
        """At start-up: add the hosts of our running allocations to the inventory (before the
        coordinator syncs the store, so that hosts still held by clusters stay in the pool)."""
        try:
            allocs = self.allocations()
        except FawkesError as exc:
            log.warning("%s; starting without the pool's allocations", exc)
            return []
        return self._add(allocs)

    def _add(self, allocs: list[Allocation]) -> list[str]:
        new = {h: a.job_id for a in allocs if a.running for h in a.hosts if h not in self.owner}
        clash = sorted(h for h in new if h in self.base)
        if clash:
            log.warning("pool: node(s) %s of SLURM are also inventory hosts: not added twice", ", ".join(clash))
        present = {h.name for h in self.inventory.hosts}
        for h in new:
            if h in present and h not in self.base:  # adopted by an earlier instance on this inventory
                self.owner[h] = new[h]
        names = [h for h in new if h not in present]
        if not names:
            return []
        added = []
        for h in self.node_hosts(names):
            self.inventory.hosts.append(h)
            self.owner[h.name] = new[h.name]
            added.append(h.name)
        return added

    def _drop(self, names: list[str]) -> None:
        gone = set(names)
        self.inventory.hosts[:] = [h for h in self.inventory.hosts if h.name not in gone]
        for n in names:
            self.owner.pop(n, None)

    def step(self, coord) -> PoolAction | None:
        """One round: sync hosts with our allocations, decide, ask or give back.  ``coord``: the
        :class:`~fawkes.coordinator.service.Coordinator` (store, settings, fleet, clock)."""
        from fawkes.coordinator.view import build_snapshot
        from fawkes.store.hosts import HostState

        try:
            allocs = self.allocations()
        except FawkesError as exc:
            if str(exc) != self._failing:
                log.warning("%s (logged once until it changes)", exc)
                coord.store.record_event("pool", str(exc), level="warning")
                self._failing = str(exc)
            return None
        if self._failing is not None:
            log.info("pool: SLURM answers again")
            self._failing = None
        store, ex = coord.store, coord.fleet.ex
        added = self._add(allocs)
        held = {h.name for h in store.list_hosts(HostState.ALLOCATED)}
        live = {h for a in allocs if a.running for h in a.hosts}
        ended = [h for h in self.owner if h not in live and h not in held]  # allocation over (time limit, ...)
        if ended:
            self._drop(ended)
        if added or ended:
            for h in self.inventory.hosts:
                if h.name in self.owner:
                    ex.add_target(h.target())
            coord.sync_inventory()
            for n in ended:
                ex.remove_target(n)
            if added:
                log.info("pool: %d host(s) joined from SLURM: %s", len(added), ", ".join(added))
                store.record_event("pool", f"joined from SLURM: {', '.join(added)}")
            if ended:
                log.warning("pool: %s left: their allocation ended in SLURM", ", ".join(ended))
                store.record_event("pool", f"left with their allocation (ended in SLURM): {', '.join(ended)}",
                                   level="warning")
        now = self.clock()
        snap = build_snapshot(store, coord.settings, now)
        action = decide(facts_from_snapshot(snap, allocs, held), max_nodes=self.cfg.max_nodes,
                        nodes_per_request=self.cfg.nodes_per_request, idle_s=self.cfg.idle_s, now=now,
                        idle_since=self.idle_since)
        self.idle_since = dict(action.idle_since)
        for job in action.release:
            self._release(coord, job)
        if action.request:
            job = self.submit(action.request)
            log.info("pool: %s: sbatch job %s", action.reason, job)
            store.record_event("pool", f"asked SLURM for {action.request} node(s): job {job} ({action.reason})")
        self.last = action
        return action

    def _release(self, coord, job: str) -> None:
        hosts = [h for h, j in self.owner.items() if j == job]
        if hosts:
            kept = list(self.inventory.hosts)
            self._drop(hosts)
            try:
                coord.sync_inventory()  # retires them; refused (nothing changed) if a node holds one
            except FawkesError as exc:
                self.inventory.hosts[:] = kept
                self.owner.update({h: job for h in hosts})
                log.warning("pool: allocation %s kept: %s", job, exc)
                return
            for h in hosts:
                coord.fleet.ex.remove_target(h)
        self.cancel(job)
        log.info("pool: gave back allocation %s (%s)", job, ", ".join(hosts) or "pending")
        coord.store.record_event("pool", f"gave back SLURM job {job} ({', '.join(hosts) or 'pending'})")
