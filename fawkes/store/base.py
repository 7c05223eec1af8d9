"""What every part of the store shares: the session, the compare-and-set, the lookups.

The :class:`~fawkes.store.Store` is one class assembled from one mixin per aggregate
(:mod:`~fawkes.store.hosts`, :mod:`~fawkes.store.clusters`, :mod:`~fawkes.store.jobs`,
:mod:`~fawkes.store.samples`, :mod:`~fawkes.store.events`); they all derive from
:class:`StoreBase` and keep one transaction discipline:

* every public method is one short transaction, opened with :meth:`StoreBase.session`
  (``write=True`` for writes: on SQLite it begins immediately, :func:`~fawkes.store.db.write_engine`);
  it either commits completely or changes nothing.  A method that writes many rows at once
  (:meth:`~fawkes.store.clusters.ClustersMixin.allocate_nodes`) says how it splits them;
* lifecycle moves are compare-and-set updates on the old state (:meth:`StoreBase._cas`),
  so a race between processes has one winner and the loser gets one line;
* helpers taking a session (``_cluster``, ``_event``, ...) work inside the caller's
  transaction and never open their own.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select

from fawkes.errors import FawkesError
from fawkes.store import validate
from fawkes.store.db import among, insert_many
from fawkes.store.schema import Event, MRCluster


class StoreBase:
    """The state the parts share (set by :class:`fawkes.store.Store`'s constructor) and its
    transaction primitives."""

    url: str
    display_url: str
    clock: Callable[[], float]
    engine: Engine
    _writer: Engine  # write_engine(engine)
    #: set by :meth:`~fawkes.store.lease.LeaseMixin.set_fence`: every write checks the lease first
    _fence: tuple | None = None

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: commit on success, roll back on any error.  ``write=True`` for writes."""
        try:
            with Session(self._writer if write else self.engine, expire_on_commit=False) as s:
                with s.begin():
                    if write and self._fence is not None:
                        self._check_fence(s)  # type: ignore[attr-defined]  # LeaseMixin
                    yield s
        except OperationalError as exc:  # locked past the busy timeout, server gone: one line
            raise FawkesError(f"state {self.display_url}: {first_line(exc.orig or exc)}") from None

    @staticmethod
    def _cas(s: Session, stmt: Any, what: str) -> None:
        """Run a compare-and-set ``UPDATE ... WHERE state = old``: it must hit exactly one row,
        else ``what`` changed under us (another process won the race)."""
        if s.execute(stmt).rowcount != 1:
            raise FawkesError(f"{what}: changed concurrently; retry")

    def _in(self, column: Any, values: Iterable[Any]) -> Any:
        """``column IN (values)`` as this backend runs it fastest (:func:`~fawkes.store.db.among`)."""
        return among(column, list(values), self.engine.dialect.name)

    def _rows_by_cluster(self, q: Any) -> dict[str, list[Any]]:
        """Run ``q``, a Core select whose first column is the cluster's name, and group its rows by it,
        in the select's order: read-only rows with the selected columns as attributes (no ORM objects,
        a tenth of the time for 10,000 rows)."""
        out: dict[str, list[Any]] = {}
        with self.session() as s:
            for r in s.connection().execute(q):
                out.setdefault(r[0], []).append(r)
        return out

    def _cluster(self, s: Session, name: str, *, live: bool = False) -> MRCluster:
        """The live cluster ``name``; unless ``live``, else the latest released one of that name."""
        c = s.exec(select(MRCluster).where(MRCluster.live_name == name)).first()
        if c is None and not live:
            c = s.exec(select(MRCluster).where(MRCluster.name == name).order_by(col(MRCluster.id).desc())).first()
        if c is None:
            known = s.exec(select(MRCluster.id).where(MRCluster.name == name)).first() is not None
            raise FawkesError(f"cluster {name}: " + ("already released" if known else "no such cluster"))
        return c

    def _event(self, s: Session, kind: str, message: str, *, level: str = "info", cluster: str | None = None,
               node: str | None = None, time: float | None = None) -> Event:
        """Add an operator event to the caller's transaction (every lifecycle move records one)."""
        e = Event(time=self.clock() if time is None else time, level=level, kind=kind, cluster=cluster,
                  node=node, message=message)
        s.add(e)
        return e

    @staticmethod
    def _events(s: Session, rows: Iterable[Mapping[str, Any]], when: float) -> None:
        """Add many events at ``when`` to the caller's transaction in one bulk insert (the rows
        give ``kind``, ``message`` and optionally ``level``, ``cluster``, ``node``)."""
        insert_many(s.connection(), Event.__table__,
                    [{"time": when, "level": "info", "cluster": None, "node": None, **r} for r in rows])

    def _prune(self, table, time_col, before: float, *, dry_run: bool, batch: int) -> int:
        """Delete rows of ``table`` with ``time_col < before`` in batches of ``batch`` rows, one
        short write transaction each (other writers never wait long); ``dry_run`` only counts."""
        validate.optional_number("before", before, minimum=float("-inf"))
        validate.positive_int("batch", batch)
        if dry_run:
            with self.session() as s:
                return s.exec(select(func.count()).select_from(table).where(time_col < before)).one()
        total = 0
        while True:
            with self.session(write=True) as s:
                ids = select(table.id).where(time_col < before).limit(batch)
                n = s.execute(delete(table).where(col(table.id).in_(ids))).rowcount
            total += n
            if n < batch:
                return total


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects (rows, node
    views, samples, a batch's row dicts).  At 50,000 nodes its repeated passes over them took a
    third of a snapshot's time and half of a plan's writes.  Reference counting still frees
    everything; the collector resumes afterwards (unless someone else had turned it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
