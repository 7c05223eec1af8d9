"""Hosts and frameworks: the pool (synced from the inventory, taken out of service and
restored by the admin) and the framework installations clusters run on.

A host's ``state`` follows its nodes (free <-> allocated, :mod:`~fawkes.store.clusters`);
failing and restoring are compare-and-set updates on it, so a race with an allocation has
one winner.  See :mod:`fawkes.store.base` for the transaction discipline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.inventory.schema import SAFE_NAME
from fawkes.store import validate
from fawkes.store.base import StoreBase
from fawkes.store.lifecycle import ClusterState, HostState
from fawkes.store.schema import Framework, Host, MRCluster, Node


class _RolledBack(Exception):
    """Ends a dry run's transaction (rolled back by the session)."""


class HostsMixin(StoreBase):
    """Frameworks and pool hosts."""

    # ------------------------------------------------------------------ frameworks
    def register_framework(self, name: str, kind: str, *, java_home: str | None = None, replace: bool = False,
                           **paths: str | None) -> Framework:
        """Register framework ``name`` of ``kind`` (``replace=True`` updates an existing one); ``paths``:
        its installation paths on every host, under the names its kind reads (``None``: not given)."""
        validate.name("framework", name)
        validate.name("kind", kind)
        java_home = validate.text("java_home", java_home)
        paths = {validate.name("framework path", k): validate.text(k, v) for k, v in paths.items()}
        paths = {k: v for k, v in paths.items() if v is not None}
        with self.session(write=True) as s:
            fw = s.get(Framework, name)
            if fw is not None and not replace:
                raise FawkesError(f"framework {name}: already registered")
            if fw is None:
                fw = Framework(name=name, kind=kind, created=self.clock(), paths=paths, java_home=java_home)
            else:
                fw.kind = kind
                fw.paths = paths
                fw.java_home = java_home
            s.add(fw)
            try:
                s.flush()
            except IntegrityError:
                raise FawkesError(f"framework {name}: already registered") from None
            return fw

    def list_frameworks(self) -> list[Framework]:
        with self.session() as s:
            return list(s.exec(select(Framework).order_by(Framework.name)))

    def get_framework(self, name: str) -> Framework:
        with self.session() as s:
            fw = s.get(Framework, name)
            if fw is None:
                raise FawkesError(f"framework {name}: not registered")
            return fw

    def remove_framework(self, name: str) -> None:
        """Remove framework ``name``; refused while a live cluster uses it."""
        with self.session(write=True) as s:
            fw = s.exec(select(Framework).where(Framework.name == name).with_for_update()).first()
            if fw is None:
                raise FawkesError(f"framework {name}: not registered")
            users = s.exec(select(MRCluster.name).where(MRCluster.framework == name,
                                                        col(MRCluster.live_name).is_not(None))).all()
            if users:
                raise FawkesError(f"framework {name}: in use by cluster(s) {', '.join(sorted(users))}")
            s.delete(fw)

    # ------------------------------------------------------------------ hosts
    def sync_hosts(self, inventory: Iterable[Mapping[str, Any]], *, dry_run: bool = False) -> dict[str, list[str]]:
        """Make the hosts table match ``inventory`` (dicts: name, address, cores, memory_mb, rack).

        New hosts are added free; known ones updated (a retired host comes back free);
        hosts missing from the inventory are marked retired (never deleted: history).
        A held host cannot be dropped: refused, nothing changed.  Returns the names per
        outcome: ``added``, ``updated``, ``retired``, ``unchanged``.  ``dry_run``: the same answer and
        refusal, nothing written.
        """
        specs = _host_specs(inventory)
        out: dict[str, list[str]] = {"added": [], "updated": [], "retired": [], "unchanged": []}
        now = self.clock()
        fields = ("address", "cores", "memory_mb", "rack")
        try:
            with self.session(write=True) as s:
                # plain rows, no ORM objects, and only the rows that change written (bulk, by primary key):
                # a coordinator's start over 10,000 unchanged hosts reads them and writes nothing
                known = {r.name: r for r in s.connection().execute(
                    select(Host.name, Host.state, Host.position, *(getattr(Host, k) for k in fields)))}
                gone = [n for n, r in known.items() if n not in specs and r.state != HostState.RETIRED]
                held = s.exec(select(Node.host, MRCluster.name).join(MRCluster, Node.cluster_id == MRCluster.id)
                              .where(col(Node.holds_host).in_(gone))).all() if gone else []
                if held:
                    desc = ", ".join(f"{h} (cluster {c})" for h, c in held)
                    raise FawkesError(f"inventory: cannot drop host(s) still held: {desc}; drain them first "
                                      "(fawkes host drain HOST) and wait until their nodes are released")
                added, changed = [], []
                for pos, (hname, spec) in enumerate(specs.items()):
                    r = known.get(hname)
                    if r is None:
                        added.append({"name": hname, "position": pos, "added_at": now, "state": HostState.FREE,
                                      **spec})
                        out["added"].append(hname)
                    elif r.state == HostState.RETIRED or r.position != pos or \
                            any(getattr(r, k) != spec[k] for k in fields):
                        row = {"name": hname, "position": pos, **spec}
                        if r.state == HostState.RETIRED:  # a retired host comes back free; no other state is written
                            row["state"] = HostState.FREE  # (an allocation meanwhile keeps its own)
                        changed.append(row)
                        out["updated"].append(hname)
                    else:
                        out["unchanged"].append(hname)
                changed += [{"name": hname, "state": HostState.RETIRED} for hname in gone]
                out["retired"] = list(gone)
                if added:
                    s.execute(insert(Host), added)
                if changed:
                    s.execute(update(Host), changed)
                if dry_run:
                    raise _RolledBack
        except _RolledBack:  # dry run: the same checks, nothing kept
            pass
        return out

    def list_hosts(self, state: HostState | str | None = None) -> list[Host]:
        """Hosts in placement order, optionally only those in ``state``."""
        with self.session() as s:
            q = select(Host).order_by(Host.position, Host.name)
            if state is not None:
                q = q.where(Host.state == HostState(state))
            return list(s.exec(q))

    def host_names(self, state: HostState | str) -> list[str]:
        """The names of the hosts in ``state``, in placement order (no ORM objects)."""
        with self.session() as s:
            return list(s.exec(select(Host.name).where(Host.state == HostState(state))
                               .order_by(Host.position, Host.name)).all())

    def pool_summary(self) -> dict[str, Any]:
        """The pool as a snapshot sees it, in one read transaction: ``free`` (names of the free
        hosts in placement order, like :meth:`free_hosts`), ``usable`` (hosts neither failed nor
        retired, like :meth:`capacity`) and ``min_cores`` (the fewest cores among those, None
        without any); no ORM objects, no row per allocated host."""
        usable = [HostState.FREE, HostState.ALLOCATED]
        with self.session() as s:
            free = list(s.execute(select(Host.name).where(Host.state == HostState.FREE)
                                  .order_by(Host.position, Host.name)).scalars())
            n, least = s.execute(select(func.count(), func.min(Host.cores)).where(col(Host.state).in_(usable))).one()
        return {"free": free, "usable": n, "min_cores": least}

    def waiting_or_free(self) -> bool:
        """Whether any cluster request is queued or any host is free, in one read: between ticks there is
        nothing to admit or refill otherwise (:meth:`Control.between` reads no snapshot then)."""
        with self.session() as s:
            free = s.execute(select(Host.name).where(Host.state == HostState.FREE).limit(1)).first()
            if free is not None:
                return True
            return s.execute(select(MRCluster.id).where(MRCluster.state == ClusterState.REQUESTED)
                             .limit(1)).first() is not None

    def host_racks(self) -> dict[str, str]:
        """``{host: rack}`` of the hosts in the pool (not retired) that have a rack label (placement,
        issue 12)."""
        with self.session() as s:
            rows = s.execute(select(Host.name, Host.rack).where(
                col(Host.rack).is_not(None), Host.state != HostState.RETIRED)).all()
        return {name: rack for name, rack in rows}

    def free_hosts(self) -> list[str]:
        """Names of hosts held by nobody and not failed, in placement order."""
        return [h.name for h in self.list_hosts(HostState.FREE)]

    def capacity(self) -> int:
        """C: hosts that are not failed or retired."""
        with self.session() as s:
            return s.exec(select(func.count()).select_from(Host)
                          .where(col(Host.state).in_([HostState.FREE, HostState.ALLOCATED]))).one()

    def set_host_state(self, name: str, state: HostState | str, *, detail: str = "") -> Host:
        """Mark a host failed (or back from failed).  Allocation state follows the nodes."""
        state = HostState(state)
        with self.session(write=True) as s:
            h = s.get(Host, name)
            if h is None:
                raise FawkesError(f"host {name}: not in the inventory")
            held = s.exec(select(Node.id).where(Node.holds_host == name)).first() is not None
            if state == HostState.FAILED:
                h.state = state
            elif state in (HostState.FREE, HostState.ALLOCATED):
                h.state = HostState.ALLOCATED if held else HostState.FREE
            else:
                raise FawkesError(f"host {name}: cannot set state {state} directly (use sync_hosts)")
            s.add(h)
            self._event(s, "host", f"host {name} -> {h.state}" + (f": {detail}" if detail else ""),
                        level="warning" if state == HostState.FAILED else "info", node=name)
            return h

    def fail_host(self, name: str, reason: str) -> Host:
        """Take free host ``name`` out of service (FREE -> FAILED), for maintenance or repair.

        Refused (one line, nothing changed) for a host a live node holds, an unknown,
        retired or already failed host.  The compare-and-set on ``state = free`` decides a
        race with an allocation: the loser is refused.  Records a warning event.
        """
        reason = validate.text("reason", reason, optional=False)
        with self.session(write=True) as s:
            h = self._host(s, name)
            held = self._holder(s, name)
            if held is not None:
                raise FawkesError(f"host {name}: held by {held}; only a free host can be taken out of service")
            if h.state != HostState.FREE:
                raise FawkesError(f"host {name}: already failed" if h.state == HostState.FAILED
                                  else f"host {name}: {h.state}, not free")
            self._cas(s, update(Host).where(Host.name == name, Host.state == HostState.FREE)
                      .values(state=HostState.FAILED), f"host {name}")
            self._event(s, "host", f"host {name}: free -> failed (taken out of service: {reason})",
                        level="warning", node=name)
            s.refresh(h)
            return h

    def restore_host(self, name: str, detail: str = "") -> Host:
        """Return failed host ``name`` to the pool (FAILED -> FREE) after a repair.

        Refused while a live node still holds the host (a failed node is released by the
        coordinator's cleanup, a failed core node at its cluster's teardown), and for a
        host that is not failed.  Records an event.
        """
        with self.session(write=True) as s:
            h = self._host(s, name)
            if h.state != HostState.FAILED:
                raise FawkesError(f"host {name}: not failed ({h.state}); nothing to restore")
            held = self._holder(s, name)
            if held is not None:
                raise FawkesError(f"host {name}: still held by {held}; restore it once that node is released")
            self._cas(s, update(Host).where(Host.name == name, Host.state == HostState.FAILED)
                      .values(state=HostState.FREE), f"host {name}")
            self._event(s, "host", f"host {name}: failed -> free (restored" + (f" {detail})" if detail else ")"),
                        node=name)
            s.refresh(h)
            return h

    def drain_host(self, name: str, reason: str) -> tuple[Host, Node | None, str | None]:
        """Take host ``name`` out of service even while a cluster holds it; returns it, the node that held
        it and that node's cluster (None, None for a free host).

        A free host is failed (as :meth:`fail_host`).  A held one is marked failed at once, so it is
        never allocated again until :meth:`restore_host` and its node no longer counts for its cluster
        (the next plan replaces it), and the node leaves as a shrink would: RUNNING or PROVISIONING ->
        DRAINING (the reconciler removes a transient-core node by DP, a transient one by FP or graceful,
        never suspended), REQUESTED -> RELEASED (nothing ran there); a DRAINING or FAILED node is
        already leaving, and so is every node of a cluster being saved and torn down.  Refused, one line
        and nothing changed: a core node of a cluster not being torn down (only the teardown removes it), a suspended or lent worker on the host, an unknown, retired or failed
        host.  One transaction; compare-and-set on the host's and the node's states."""
        from fawkes.store.clusters import _node_move, _node_moved
        from fawkes.store.lifecycle import (
            NODE_SUSPENDED,
            NODE_TRANSITIONS,
            NodeState,
            check,
            leaving,
        )
        from fawkes.store.schema import NodeTransition

        reason = validate.text("reason", reason, optional=False)
        now = self.clock()
        with self.session(write=True) as s:
            h = self._host(s, name)
            if h.state in (HostState.FAILED, HostState.RETIRED):
                raise FawkesError(f"host {name}: already out of service ({h.state})" if h.state == HostState.FAILED
                                  else f"host {name}: retired (no longer in the inventory)")
            parked = s.exec(select(MRCluster.name, Node.id).join(Node, Node.cluster_id == MRCluster.id)
                            .where(Node.host == name, col(Node.state).in_(list(NODE_SUSPENDED)))).first()
            if parked is not None:
                raise FawkesError(f"host {name}: cluster {parked[0]}'s suspended worker (node {parked[1]}) is on it; "
                                  "drain it once that cluster resumes or releases it")
            n = s.exec(select(Node).where(Node.holds_host == name)).first()
            if n is None:
                self._cas(s, update(Host).where(Host.name == name, Host.state == HostState.FREE)
                          .values(state=HostState.FAILED), f"host {name}")
                self._event(s, "host", f"host {name}: free -> failed (drained: {reason})", level="warning",
                            node=name)
                s.refresh(h)
                return h, None, None
            c = s.get(MRCluster, n.cluster_id)
            saving = c.state == "saving"  # its teardown releases every node: the host only stays failed after
            if n.role == "core" and not saving:
                raise FawkesError(f"host {name}: holds core node {n.id} of cluster {c.name} ({c.state}); a core node "
                                  "is never drained (release the cluster to free it)")
            old = NodeState(n.state)
            to = leaving(old) if old in (NodeState.RUNNING, NodeState.PROVISIONING, NodeState.REQUESTED) \
                and not saving else None
            # the host first: failed while held, so a release below (or the reconciler's later) leaves it failed
            self._cas(s, update(Host).where(Host.name == name, Host.state == HostState.ALLOCATED)
                      .values(state=HostState.FAILED), f"host {name}")
            detail = f"host drained: {reason}"
            if to is not None:
                check(NODE_TRANSITIONS, "node", f"{n.id} ({name})", old, to)
                self._cas(s, update(Node).where(Node.id == n.id, Node.state == old).values(**_node_move(to, now)),
                          f"node {n.id}")
                s.add(NodeTransition(node_id=n.id, from_state=old, to_state=to, time=now, detail=detail))
                self._event(s, "node", _node_moved(name, old, to, detail), cluster=c.name, node=name)
            self._event(s, "host", f"host {name}: allocated -> failed (drained: {reason}; node {n.id} of cluster "
                        f"{c.name} {'leaves' if to is not None else 'already ' + str(old)})", level="warning",
                        cluster=c.name, node=name)
            s.refresh(h)
            s.refresh(n)
            return h, n, c.name

    def mark_host_seen(self, name: str, when: float | None = None) -> None:
        with self.session(write=True) as s:
            s.execute(update(Host).where(Host.name == name).values(last_seen=when or self.clock()))

    # ------------------------------------------------------------------ internals
    def _host(self, s: Session, name: str) -> Host:
        h = s.get(Host, name, populate_existing=True)
        if h is None:
            raise FawkesError(f"host {name}: not in the inventory")
        return h

    def _holder(self, s: Session, host: str) -> str | None:
        """``cluster C (node N, STATE)`` for the live node holding ``host``, else None."""
        row = s.exec(select(MRCluster.name, Node.id, Node.state).join(Node, Node.cluster_id == MRCluster.id)
                     .where(Node.holds_host == host)).first()
        return None if row is None else f"cluster {row[0]} (node {row[1]}, {row[2]})"


def _host_specs(inventory: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(inventory):
        where = f"inventory[{i}]"
        if not isinstance(item, Mapping):
            raise FawkesError(f"{where}: expected a mapping, got {type(item).__name__}")
        extra = set(item) - {"name", "address", "cores", "memory_mb", "memory", "rack"}
        if extra:
            raise FawkesError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}")
        name = validate.host(f"{where}.name", item.get("name"))
        if name in specs:
            raise FawkesError(f"{where}.name: duplicate host {name}")
        address = validate.text(f"{where}.address", item.get("address", name), optional=False)
        cores = validate.positive_int(f"{where}.cores", item.get("cores"))
        memory = validate.positive_int(f"{where}.memory_mb", item.get("memory_mb", item.get("memory", 0)), minimum=0)
        rack = item.get("rack")  # placement's rack (or site) label; None = unlabelled
        specs[name] = {"address": address, "cores": cores, "memory_mb": memory,
                       "rack": None if rack is None else _rack(f"{where}.rack", rack)}
    return specs


def _rack(field: str, value: object) -> str:
    """A rack label as the inventory allows it (``fawkes.inventory.schema.SAFE_NAME``)."""
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise FawkesError(f"{field}: invalid rack {value!r} (letters, digits, '.', '_', '-'; starting with a "
                          "letter or digit; at most 63 characters)")
    return value
