"""``shrink_mode: suspend``: BIG-C's immediate preemption (IP) for Spark, live.

A TR node the plan takes from cluster A is not stopped: its Spark worker and everything it started
(executors, Python workers) are suspended on the host through cgroups, over SSH
(:mod:`fawkes.ssh.cgroups`: CPU to 1 %, v2 ``memory.high`` to 64 MB where delegated, optionally frozen),
and the host is lent: the next grow of another cluster B lands on it and starts B's worker beside
A's suspended one.  When B gives the host back (B's node released), A's worker is resumed in the
reverse order and A's node runs again; so does it when A itself grows onto the host again.

Node lifecycle (:mod:`fawkes.store.lifecycle`)::

    RUNNING --plan: shrink--> DRAINING --worker suspended--> SUSPENDED --B's node holds the host--> LENT
    LENT --B's node released: A's node takes the host back, worker resumed--> RUNNING
    SUSPENDED --A grows onto the host again: its new node dropped, worker resumed--> RUNNING
    SUSPENDED / LENT --A torn down: worker thawed and stopped--> RELEASED

The plan and its intent are those of any shrink (the node DRAINING, still counted for A, A-19); the
reconciler's shrink operation suspends instead of stopping (:meth:`Suspender.suspend`), falling back
to FP for a node it cannot suspend.  Who holds the host (``nodes.holds_host``, UNIQUE: one owner at a
time): A's node until its worker is suspended; then nobody (the host is FREE: lendable, a free host
of the snapshot), then B's node (the host ALLOCATED to B); when B's node is released the host is FREE
again and A's node takes it back before resuming.  At most one suspended worker per host (checked
in the suspending transaction): a node on a lent host leaves by FP.

Accounting (the snapshot, :mod:`fawkes.coordinator.view`): a SUSPENDED or LENT node does not count
for A (neither in its node count nor, from its suspension to its resumption, in its allocation
history, so not in A's discrimination); B's node on a lent host is an ordinary node of B and counts
for B.  The mechanism itself is unchanged and pure: it sees a free host and nodes.

Three parts here: the store steps (each one short transaction, compare-and-set on the node's
state, a history row and an event), the SSH steps (the worker found and wiped by the commands its
framework kind gives, :meth:`~fawkes.frameworks.base.FrameworkDriver.suspend_hooks`; spark-hdfs:
the control script's pid file), and :class:`Suspender`, the reconciler's pass that carries the
intent out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import update
from sqlmodel import col, select

from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState, Role
from fawkes.ssh import cgroups
from fawkes.ssh.cgroups import Footprint, Suspended
from fawkes.ssh.shell import Script
from fawkes.store.lifecycle import NODE_SUSPENDED, NODE_TRANSITIONS, HostState, NodeState, check
from fawkes.store.schema import Host, MRCluster, Node, NodeTransition

if TYPE_CHECKING:
    from fawkes.frameworks.base import SuspendHooks

log = logging.getLogger("fawkes.suspend")

N = NodeState


# ====================================================================== SSH: one worker's process tree
def group(cluster: str, host: str) -> str:
    """The cgroup name of ``cluster``'s suspended worker on ``host`` (unique per cluster and host: lab
    hosts share one kernel)."""
    return cgroups.group_name(f"fawkes-suspend-{cluster}@{host}")


def suspend_worker(ex, host: str, pid: Script, cluster: str, footprint: Footprint = Footprint(),
                   timeout: float = 60.0) -> Suspended:
    """Suspend ``cluster``'s worker tree on ``host`` (idempotent); raise one line on failure.  ``pid``
    prints the pid at the tree's root (the kind's :attr:`SuspendHooks.pid`)."""
    r = ex.run([host], cgroups.suspend_script(pid, group(cluster, host), footprint),
               timeout=timeout)[host]
    if not r.ok:
        raise FawkesError(f"{host}: suspending {cluster}'s worker failed: "
                          f"{(r.stderr.strip() or r.error or '')[:300]}")
    return cgroups.parse(host, r.stdout)


def resume_worker(ex, host: str, cluster: str, timeout: float = 60.0) -> list[int]:
    """Resume ``cluster``'s suspended worker tree on ``host`` (nothing to do: []); the pids resumed."""
    r = ex.run([host], cgroups.resume_script(group(cluster, host)), timeout=timeout)[host]
    if not r.ok:
        raise FawkesError(f"{host}: resuming {cluster}'s worker failed: "
                          f"{(r.stderr.strip() or r.error or '')[:300]}")
    last = [ln for ln in r.stdout.splitlines() if ln.startswith("resumed")]
    return [int(p) for p in last[-1].split()[1:]] if last else []


def stop_worker(ex, host: str, wipe: Script, cluster: str, timeout: float = 120.0) -> None:
    """Thaw ``cluster``'s suspended worker on ``host``, stop it and wipe the cluster's directory there
    (the teardown of a cluster whose node was suspended; another cluster's worker there is untouched).
    ``wipe``: the kind's :attr:`SuspendHooks.wipe`."""
    script = Script("{resume}\n{wipe}\n",  # (resume exits on failure)
                    resume=cgroups.resume_script(group(cluster, host)), wipe=wipe)
    r = ex.run([host], script, timeout=timeout)[host]
    if not r.ok:
        raise FawkesError(f"{host}: stopping {cluster}'s suspended worker failed: "
                          f"{(r.stderr.strip() or r.error or '')[:300]}")


def describe(s: Suspended) -> str:
    """``cpu 1% (v1), frozen (v1)``: what a suspension set."""
    parts = []
    if s.cpu:
        v, q, p = s.cpu.split()[:3]
        parts.append(f"cpu {100 * int(q) / int(p):g}% ({v})")
    if s.memory:
        v, b = s.memory.split()[:2]
        parts.append(f"memory.high {int(b) >> 20} MB ({v})")
    if s.frozen:
        parts.append(f"frozen ({s.frozen.split()[0]})")
    return ", ".join(parts + list(s.notes))


# ====================================================================== store steps
def _move(store, s, n: Node, to: NodeState, detail: str, now: float, **values) -> None:
    old = NodeState(n.state)
    check(NODE_TRANSITIONS, "node", f"{n.id} ({n.host})", old, to)
    done = s.execute(update(Node).where(Node.id == n.id, Node.state == old)
                     .values(state=to, state_since=now, **values)).rowcount
    if done != 1:
        raise FawkesError(f"node {n.id}: changed concurrently; retry")
    s.add(NodeTransition(node_id=n.id, from_state=old, to_state=to, time=now, detail=detail))
    cname = s.get(MRCluster, n.cluster_id).name
    store._event(s, "node", f"{n.host}: {old} -> {to}" + (f" ({detail})" if detail else ""), cluster=cname,
                 node=n.host)


def may_suspend(store, node_id: int) -> str | None:
    """Why the node cannot be suspended (None: it can): it must be a DRAINING TR node holding its host,
    a host in service (``fawkes host drain`` fails it: FP then), without another suspended worker (a node on a lent host is removed by FP, never
    suspended in turn: one suspended worker per host)."""
    with store.session() as s:
        n = s.get(Node, node_id)
        if n is None:
            return "not found"
        if n.state != N.DRAINING or Role(n.role) is not Role.TR or n.holds_host is None:
            return f"a {n.role} node in state {n.state}"
        if s.exec(select(Node.id).where(Node.host == n.host, col(Node.state).in_(list(NODE_SUSPENDED)),
                                        Node.id != n.id)).first() is not None:
            return f"{n.host} already lends a suspended worker"
        h = s.get(Host, n.host)
        if h is not None and h.state == HostState.FAILED:
            return f"{n.host} is out of service (drained): no worker stays on it"
        return None


def suspend_node(store, node_id: int, detail: str) -> None:
    """DRAINING TR node whose worker is now suspended -> SUSPENDED, and it lets go of its host: the host
    is free (lendable).  One transaction; refused (one line, nothing changed) as :func:`may_suspend` says."""
    now = store.clock()
    with store.session(write=True) as s:
        n = s.get(Node, node_id)
        why = None if n is None else (
            f"a {n.role} node in state {n.state}" if n.state != N.DRAINING or Role(n.role) is not Role.TR
            or n.holds_host is None else
            f"{n.host} already lends a suspended worker" if s.exec(select(Node.id).where(
                Node.host == n.host, col(Node.state).in_(list(NODE_SUSPENDED)), Node.id != n.id)).first() is not None
            else None)
        if n is None or why:
            raise FawkesError(f"node {node_id}: not suspendable: {why or 'not found'}")
        _move(store, s, n, N.SUSPENDED, detail, now, holds_host=None)
        s.execute(update(Host).where(Host.name == n.host, Host.state == HostState.ALLOCATED)
                  .values(state=HostState.FREE))


def mark_lent(store, node_id: int, borrower: str) -> None:
    now = store.clock()
    with store.session(write=True) as s:
        n = s.get(Node, node_id)
        if n is None:
            raise FawkesError(f"node {node_id}: not found")
        _move(store, s, n, N.LENT, f"host lent to {borrower}", now)


def reclaim(store, node_id: int) -> bool:
    """Take the host back for a SUSPENDED/LENT node before resuming it: the host must be free, or held
    by a node of the same cluster that has not started (its own grow onto the host: that node is
    released instead, the suspended worker is the one that runs).  False: the host is held by
    another cluster (lent again meanwhile) or not usable; nothing changed."""
    now = store.clock()
    with store.session(write=True) as s:
        n = s.get(Node, node_id)
        if n is None or n.state not in NODE_SUSPENDED:
            return False
        if n.holds_host is not None:
            return True
        h = s.get(Host, n.host)
        holder = s.exec(select(Node).where(Node.holds_host == n.host)).first()
        if holder is not None:
            if holder.cluster_id != n.cluster_id or holder.state != N.REQUESTED:
                return False
            _move(store, s, holder, N.RELEASED, "its cluster's suspended worker on the host resumes instead", now,
                  holds_host=None, released_at=now)
        elif h is None or h.state != HostState.FREE:
            return False
        else:
            if s.execute(update(Host).where(Host.name == n.host, Host.state == HostState.FREE)
                         .values(state=HostState.ALLOCATED)).rowcount != 1:
                return False
        s.flush()
        s.execute(update(Node).where(Node.id == node_id).values(holds_host=n.host))
        return True


def resumed(store, node_id: int, detail: str) -> None:
    now = store.clock()
    with store.session(write=True) as s:
        n = s.get(Node, node_id)
        if n is None or n.holds_host is None:
            raise FawkesError(f"node {node_id}: resumed without holding its host")
        _move(store, s, n, N.RUNNING, detail, now, running_at=now)


def given_up(store, node_id: int, detail: str) -> None:
    """A SUSPENDED/LENT node's worker was stopped (teardown): RELEASED; its host is freed only if it held it."""
    now = store.clock()
    with store.session(write=True) as s:
        n = s.get(Node, node_id)
        if n is None:
            raise FawkesError(f"node {node_id}: not found")
        held = n.holds_host is not None
        _move(store, s, n, N.RELEASED, detail, now, holds_host=None, released_at=now)
        if held:
            s.execute(update(Host).where(Host.name == n.host, Host.state == HostState.ALLOCATED)
                      .values(state=HostState.FREE))


@dataclass(frozen=True)
class SuspendedNode:
    id: int
    cluster: str
    cluster_state: str
    leaving: bool  # release requested or SAVING: stop it
    host: str
    state: str
    holds: bool  # holds its host (not frozen yet, or taken back)
    host_state: str | None
    holder_cluster: str | None  # who holds the host now (another node), if anyone
    holder_state: str | None


def suspended_nodes(store, cluster: str | None = None) -> list[SuspendedNode]:
    """Every SUSPENDED/LENT node of a live cluster, with its host's state and holder; one read."""
    with store.session() as s:
        q = (select(Node, MRCluster).join(MRCluster, Node.cluster_id == MRCluster.id)
             .where(col(Node.state).in_(list(NODE_SUSPENDED)), col(MRCluster.live_name).is_not(None)))
        if cluster is not None:
            q = q.where(MRCluster.live_name == cluster)
        rows = s.exec(q.order_by(Node.id)).all()
        out = []
        for n, c in rows:
            h = s.get(Host, n.host)
            holder = s.exec(select(Node, MRCluster).join(MRCluster, Node.cluster_id == MRCluster.id)
                            .where(Node.holds_host == n.host, Node.id != n.id)).first()
            out.append(SuspendedNode(
                n.id, c.name, c.state, c.release_requested_at is not None or c.state == ClusterState.SAVING,
                n.host, n.state, n.holds_host is not None, None if h is None else h.state,
                None if holder is None else holder[1].name, None if holder is None else holder[0].state))
        return out


def suspension_gaps(store, node_ids: Iterable[int], since: float) -> dict[int, list[tuple[float, float | None]]]:
    """Per node, the stretches of (``since``, now] in which it was SUSPENDED or LENT (``None``: still),
    from its history: what its cluster's allocation history leaves out."""
    ids = list(node_ids)
    if not ids:
        return {}
    with store.session() as s:
        rows = s.execute(select(NodeTransition.node_id, NodeTransition.time, NodeTransition.from_state,
                                NodeTransition.to_state, Node.state)
                         .join(Node, Node.id == NodeTransition.node_id)
                         .where(store._in(NodeTransition.node_id, ids), NodeTransition.time > since)
                         .order_by(NodeTransition.node_id, NodeTransition.time, NodeTransition.id)).all()
        now_state = dict(s.execute(select(Node.id, Node.state).where(store._in(Node.id, ids))).all())
    by: dict[int, list] = {}
    for r in rows:
        by.setdefault(r[0], []).append(r)
    out: dict[int, list[tuple[float, float | None]]] = {}
    susp = {str(x) for x in NODE_SUSPENDED}
    for i in ids:
        ts = by.get(i, [])
        inside = (ts[0][2] in susp) if ts else (now_state.get(i) in susp)
        start = since if inside else None
        gaps = []
        for _, t, frm, to, _ in ts:
            if start is None and to in susp:
                start = t
            elif start is not None and to not in susp:
                gaps.append((start, t))
                start = None
        if start is not None:
            gaps.append((start, None))
        if gaps:
            out[i] = gaps
    return out


# ====================================================================== the reconciler's pass
class Suspender:
    """Carries SUSPENDED/LENT intent out; :meth:`step` runs first in every reconciler step.

    ``rec`` is the :class:`~fawkes.coordinator.reconcile.Reconciler` (its worker pool, one operation
    per key: ``(cluster, "suspend:HOST")``)."""

    def __init__(self, rec, footprint: Footprint = Footprint()):
        self.rec = rec
        self.footprint = footprint

    @property
    def store(self):
        return self.rec.store

    def _root(self, host: str) -> str:
        return self.rec.fleet.node_spec(host, Role.TR).root

    def _hooks(self, cluster: str, host: str) -> SuspendHooks:
        """The commands of ``cluster``'s framework kind for its worker on ``host``."""
        # the kinds (jinja2 & co.) only here: a reader of suspension_gaps (fawkes status) needs none
        from fawkes.frameworks.base import driver_class

        kind = self.store.get_framework(self.store.get_cluster(cluster).framework).kind
        return driver_class(kind).suspend_hooks(cluster, self._root(host))

    def pending(self, cluster: str) -> bool:
        """The cluster still has suspended workers (its teardown waits for them)."""
        return bool(suspended_nodes(self.store, cluster)) or any(
            self.rec.busy(c, k) for c, k in list(self.rec.inflight) if c == cluster and k.startswith("suspend:"))

    def step(self) -> None:
        for n in suspended_nodes(self.store):
            key = f"suspend:{n.host}"
            if self.rec.busy(n.cluster, key):
                continue
            if n.leaving:
                self.rec.start(n.cluster, key, self._stop, n)
            elif n.holds:
                self.rec.start(n.cluster, key, self._resume, n)  # taken back, not resumed yet (a restart)
            elif n.holder_cluster is not None and n.holder_cluster != n.cluster:
                if n.state == N.SUSPENDED:
                    self.rec._try(mark_lent, self.store, n.id, n.holder_cluster)
            elif (n.holder_cluster == n.cluster and n.holder_state == N.REQUESTED) or \
                    (n.holder_cluster is None and n.state == N.LENT and n.host_state == HostState.FREE):
                # its own grow onto the host (resume instead), or the borrower gave the host back: the host is
                # taken here, before the act phase could start that grow or a tick lend the host again
                if self.rec._try(reclaim, self.store, n.id):
                    self.rec.start(n.cluster, key, self._resume, n)
            elif n.holder_cluster == n.cluster:  # its own new node started there all the same (a race, a restart)
                self.rec.start(n.cluster, key, self._adopt, n)

    def suspend(self, cluster: str, nodes: list) -> list:
        """The shrink of DRAINING TR nodes under ``shrink_mode: suspend`` (called by the reconciler's
        shrink operation): suspend each one's worker, then record it SUSPENDED with its host lendable.
        Returns the nodes that could not be suspended (they go by FP)."""
        rest = []
        for n in nodes:
            why = may_suspend(self.store, n.id)
            if why is not None:
                log.info("%s: %s not suspended (%s): FP", cluster, n.host, why)
                rest.append(n)
                continue
            try:
                sus = suspend_worker(self.rec.fleet.ex, n.host, self._hooks(cluster, n.host).pid, cluster,
                                     self.footprint)
            except FawkesError as exc:
                self.store.record_event("shrink", f"suspend failed, FP instead: {exc}", level="warning",
                                        cluster=cluster, node=n.host)
                resume_worker(self.rec.fleet.ex, n.host, cluster)  # whatever was moved, back as it was
                rest.append(n)
                continue
            how = describe(sus)
            suspend_node(self.store, n.id, f"suspend: {len(sus.pids)} processes of the worker ({how}); host lendable")
            log.info("%s: worker on %s suspended (%d processes: %s)", cluster, n.host, len(sus.pids), how)
        return rest

    def _resume(self, n: SuspendedNode) -> None:
        if not reclaim(self.store, n.id):
            return  # lent again meanwhile, or the host is not usable: nothing to resume now
        pids = resume_worker(self.rec.fleet.ex, n.host, n.cluster)
        resumed(self.store, n.id, f"worker resumed ({len(pids)} processes)")
        log.info("%s: worker on %s resumed (%d processes)", n.cluster, n.host, len(pids))

    def _adopt(self, n: SuspendedNode) -> None:
        """Its cluster's new node on the host runs the worker now: thaw it, drop the suspended node."""
        resume_worker(self.rec.fleet.ex, n.host, n.cluster)
        given_up(self.store, n.id, "its cluster's new node on the host took the worker over")

    def _stop(self, n: SuspendedNode) -> None:
        if n.host_state in (HostState.FREE, HostState.ALLOCATED):
            stop_worker(self.rec.fleet.ex, n.host, self._hooks(n.cluster, n.host).wipe, n.cluster)
        given_up(self.store, n.id, "cluster teardown: suspended worker thawed and stopped")
