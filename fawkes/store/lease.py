"""Which coordinator acts: a lease with a fencing token (table ``coordinator_lease``, one row, v5).

* :meth:`LeaseMixin.take_lease` takes the lease when nobody holds it or its holder let it expire
  (``force``: whatever its state; a SQLite coordinator does so under its file lock), and raises the
  token; :meth:`LeaseMixin.renew_lease` pushes the expiry on while the row still names the holder
  with its token; :meth:`LeaseMixin.release_lease` lets it expire at once (a clean stop).
* :meth:`LeaseMixin.set_fence` makes every later write transaction of this store check, first
  thing and in the same transaction, that the row still names this holder with this token; on
  PostgreSQL the check takes a share lock on the row, so a takeover waits for the writes already
  checked and every write after it is refused (:class:`LeaseLost`).  This is the fencing: a
  leader paused (SIGSTOP, a long GC, a frozen VM) until another took over cannot write when it wakes.

Lease times come from the database's clock on PostgreSQL (coordinators on several machines share
one clock), from this machine's on SQLite (one coordinator, one machine).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from fawkes.errors import FawkesError
from fawkes.store.base import StoreBase


class LeaseLost(FawkesError):
    """A write of a coordinator that no longer holds the lease: refused, nothing written."""


def _machine() -> str:
    """This machine's id (``/etc/machine-id``, 12 hex digits), or '-' when there is none."""
    try:
        text = open("/etc/machine-id", encoding="ascii", errors="replace").read(64).strip()
    except OSError:
        return "-"
    return text[:12] if len(text) >= 12 and text.isalnum() else "-"


def holder_id() -> str:
    """This process as a lease holder: ``hostname:pid:machine.random`` (machine: :func:`_machine`)."""
    return f"{socket.gethostname()[:200]}:{os.getpid()}:{_machine()}.{os.urandom(4).hex()}"


def holder_process(holder: str) -> str:
    """``alive`` or ``gone`` for a holder that ran on this machine (same machine id, not only the
    same host name), ``unknown`` for one on another machine."""
    parts = holder.split(":")
    if len(parts) != 3 or not parts[1].isdigit():
        return "unknown"
    machine = parts[2].split(".")[0]
    if machine == "-" or machine != _machine() or parts[0] != socket.gethostname()[:200]:
        return "unknown"
    try:
        cmdline = open(f"/proc/{int(parts[1])}/cmdline", "rb").read()
    except OSError:
        return "gone"
    return "alive" if b"fawkes" in cmdline else "gone"  # a reused pid is not ours


#: a PostgreSQL session of the leader left idle inside a transaction (its process paused) for
#: longer than this is ended by the server, so its row locks cannot stall a takeover (ms bounds)
_IDLE_TX_MS = (2_000, 60_000)


class LeaseMixin(StoreBase):
    """The coordinator lease and the fence on this store's writes."""

    def _db_now(self, s: Session) -> float:
        if self.engine.dialect.name == "postgresql":
            return float(s.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())
        return time.time()

    def lease(self) -> dict[str, Any] | None:
        """The lease row as a dict (plus ``now``: the lease clock), or None if never taken."""
        with self.session() as s:
            row = s.execute(text("SELECT token, holder, hostname, pid, started_at, acquired_at, renewed_at, "
                                 "expires_at FROM coordinator_lease WHERE id = 1")).mappings().first()
            now = self._db_now(s)
        return None if row is None else {**dict(row), "now": now}

    def take_lease(self, holder: str, ttl_s: float, *, started_at: float, force: bool = False,
                   dead: str | None = None) -> int | None:
        """Take the lease for ``ttl_s`` if it is free or expired (any state if ``force``; also while
        its holder is still ``dead``, a holder known to be gone); return the new fencing token, or
        None when another holder's lease still runs.  An event records the takeover in the same
        transaction."""
        pg = self.engine.dialect.name == "postgresql"
        host, pid = holder.split(":")[0], int(holder.split(":")[1])
        try:
            with self.session(write=True) as s:
                if pg:  # never wait long for a paused leader's row lock: try again on the next poll
                    s.execute(text("SET LOCAL lock_timeout = '2s'"))
                row = s.execute(text("SELECT token, holder, expires_at FROM coordinator_lease WHERE id = 1"
                                     + (" FOR UPDATE" if pg else ""))).first()
                now = self._db_now(s)
                values = {"h": holder, "host": host, "pid": pid, "st": started_at, "now": now, "exp": now + ttl_s}
                if row is None:
                    token = 1
                    s.execute(text("INSERT INTO coordinator_lease (id, token, holder, hostname, pid, started_at, "
                                   "acquired_at, renewed_at, expires_at) VALUES (1, 1, :h, :host, :pid, :st, :now, "
                                   ":now, :exp)"), values)
                    before = "nobody"
                else:
                    if not force and row.expires_at > now and row.holder not in (holder, dead):
                        return None
                    token = int(row.token) + 1
                    s.execute(text("UPDATE coordinator_lease SET token = :t, holder = :h, hostname = :host, pid = :pid, "
                                   "started_at = :st, acquired_at = :now, renewed_at = :now, expires_at = :exp "
                                   "WHERE id = 1"), {**values, "t": token})
                    how = "expired" if row.expires_at <= now else "its process gone" if row.holder == dead else "taken"
                    before = f"{row.holder} (token {row.token}, lease {how})"
                self._event(s, "coordinator", f"{holder} leads (token {token}); before: {before}", time=now)
                return token
        except IntegrityError:  # another process inserted the first row at the same time: it won
            return None

    def renew_lease(self, holder: str, token: int, ttl_s: float) -> bool:
        """Push the lease's expiry to now + ``ttl_s`` if ``holder`` still holds it with ``token``."""
        with self.session(write=True) as s:
            now = self._db_now(s)
            n = s.execute(text("UPDATE coordinator_lease SET renewed_at = :now, expires_at = :exp "
                               "WHERE id = 1 AND holder = :h AND token = :t"),
                          {"now": now, "exp": now + ttl_s, "h": holder, "t": token}).rowcount
        return n == 1

    def release_lease(self, holder: str, token: int) -> bool:
        """Let the lease expire now (a clean stop: a standby takes over at once)."""
        with self.session(write=True) as s:
            now = self._db_now(s)
            n = s.execute(text("UPDATE coordinator_lease SET expires_at = :now WHERE id = 1 AND holder = :h "
                               "AND token = :t"), {"now": now, "h": holder, "t": token}).rowcount
        return n == 1

    def set_fence(self, holder: str, token: int, *, ttl_s: float, on_lost: Callable[[str], None] | None = None) -> None:
        """From now on every write transaction of this store checks that ``holder`` still holds
        the lease with ``token`` (see the module docstring); ``on_lost`` is called (once per
        refusal) with the reason when one is refused."""
        idle_ms = int(min(max(ttl_s * 500, _IDLE_TX_MS[0]), _IDLE_TX_MS[1]))
        self._fence = (holder, int(token), idle_ms, on_lost)

    def _check_fence(self, s: Session) -> None:
        holder, token, idle_ms, on_lost = self._fence
        if self.engine.dialect.name == "postgresql":
            row = s.execute(text("SELECT holder, token, set_config('idle_in_transaction_session_timeout', :ms, true) "
                                 "FROM coordinator_lease WHERE id = 1 FOR SHARE"), {"ms": str(idle_ms)}).first()
        else:
            row = s.execute(text("SELECT holder, token FROM coordinator_lease WHERE id = 1")).first()
        if row is not None and row[0] == holder and int(row[1]) == token:
            return
        now = "nobody" if row is None else f"{row[0]} (token {row[1]})"
        reason = f"lease lost: {now} leads; this coordinator (token {token}) may no longer write"
        if on_lost is not None:
            on_lost(reason)
        raise LeaseLost(f"state {self.display_url}: {reason}")
