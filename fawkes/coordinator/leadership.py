"""Who acts on a state: one coordinator at a time (docs/operations.md, "One coordinator, HA pair").

* **SQLite** holds one coordinator.  It takes an exclusive ``flock`` on ``<state file>.lock`` (next
  to the database, the pid written in it) before it opens the state; a second coordinator on the
  same file is refused with one line (exit 2) and writes nothing.  The lock goes with the process,
  so a coordinator killed with SIGKILL leaves no stale lock.
* **PostgreSQL** holds a high-availability pair (or more): every coordinator waits as a standby
  until it can take the lease (``coordinator_lease``, :mod:`fawkes.store.lease`), which its holder
  renews every T/5 and which lasts ``1.25 T``; a standby polls every T/5, so it takes over at most
  ``1.45 T`` after the leader died, and decides at once (the last decision is then more than T old).  Each takeover raises the fencing token, and every write of the
  leader checks its token in the same transaction: a leader paused past its lease (SIGSTOP) has
  its first write refused when it wakes (its renewal fails too), logs it and steps down to standby.

SQLite coordinators take the lease too (always, under the file lock), so ``fawkes coordinator
status`` reads the same row on both backends.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from fawkes.errors import FawkesError
from fawkes.store import Store, normalize_url
from fawkes.store.api import check_sqlite_state
from fawkes.store.lease import holder_id, holder_process

log = logging.getLogger("fawkes.coordinator")

#: the lease lasts this many periods T; holders renew and standbys poll every T/5
LEASE_PERIODS = 1.25
POLL_PERIODS = 0.2


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite state URL (None for PostgreSQL or an in-memory database)."""
    u = make_url(normalize_url(url))
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database)


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


class Leadership:
    """This process's claim on the state at ``url`` (see the module docstring)."""

    def __init__(self, url: str, period_s: float):
        self.url = normalize_url(url)
        self.display_url = make_url(self.url).render_as_string(hide_password=True)
        self.ttl_s = LEASE_PERIODS * period_s
        self.poll_s = POLL_PERIODS * period_s
        self.holder = holder_id()
        self.started_at = time.time()
        self.db_file = sqlite_path(self.url)
        self.token: int | None = None
        self.lost = threading.Event()
        self.reason = ""
        self.store: Store | None = None
        self._fd: int | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._renewing = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    # ------------------------------------------------------------------ open / close
    def open(self) -> Leadership:
        """SQLite: check that the file is a state of ours (or absent), take the file lock (or refuse),
        then open the state (its own connections).  Nothing is created before the check."""
        if self.db_file is not None:
            check_sqlite_state(self.db_file, self.display_url)
            self._lock()
        try:
            # coordinator run migrates a database nobody holds (SQLite: the file lock is ours; PostgreSQL:
            # refused while another live coordinator holds the lease): docs/operations.md, upgrades
            self.store = Store(self.url, migrate=True, lease_check=self.db_file is None)
        except BaseException:
            self._unlock()
            raise
        return self

    def _lock(self) -> None:
        path = lock_path(self.db_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise FawkesError(f"state {self.display_url}: cannot open the coordinator lock {path}: "
                              f"{exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 64).decode("ascii", "replace").strip()
            os.close(fd)
            raise FawkesError(f"state {self.display_url}: another coordinator (pid {owner or '?'}) runs on this "
                              "SQLite state; SQLite takes one coordinator (stop that one first, or share a "
                              "PostgreSQL state for a high-availability pair)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def _unlock(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None

    def close(self) -> None:
        self.step_down()
        if self.store is not None:
            self.store.close()
        self._unlock()

    def __enter__(self) -> Leadership:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ lead
    def wait(self, until: float | None = None) -> bool:
        """Wait as a standby until this process holds the lease (True), or until SIGTERM/SIGINT
        or the time ``until`` (False).  SQLite: taken at once (the file lock is ours)."""
        assert self.store is not None, "open() first"
        stop = threading.Event()
        old = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)}
        shown = None
        try:
            while not stop.is_set() and (until is None or time.time() < until):
                try:
                    token = self.store.take_lease(self.holder, self.ttl_s, started_at=self.started_at,
                                                  force=self.db_file is not None)
                    info = None if token else self.store.lease()
                except FawkesError as exc:  # the database is away: keep waiting
                    log.warning("lease: %s", exc)
                    token, info = None, None
                if not token and info is not None and holder_process(info["holder"]) == "gone":
                    # the leader ran on this machine and its process is gone (kill -9, then a restart):
                    # it cannot write any more, so its lease need not run out
                    log.info("lease: %s is gone from this machine: taking over", info["holder"])
                    try:
                        token = self.store.take_lease(self.holder, self.ttl_s, started_at=self.started_at,
                                                      dead=info["holder"])
                    except FawkesError as exc:
                        log.warning("lease: %s", exc)
                if token:
                    self._lead(token)
                    return True
                if info is not None and info["holder"] != shown:
                    shown = info["holder"]
                    log.info("standby: %s leads (token %d, pid %d on %s); taking over when its lease expires",
                             shown, info["token"], info["pid"], info["hostname"])
                stop.wait(self.poll_s if until is None else max(0.0, min(self.poll_s, until - time.time())))
            return False
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _lead(self, token: int) -> None:
        self.token = token
        self.lost.clear()
        self.reason = ""
        self._renewing.clear()
        self._thread = threading.Thread(target=self._renew, name="fawkes-lease", daemon=True)
        self._thread.start()
        log.info("leading: %s holds the lease (token %d, %gs, renewed every %gs)", self.holder, token, self.ttl_s,
                 self.poll_s)

    def _renew(self) -> None:
        ok_at = time.monotonic()
        while not self._renewing.wait(self.poll_s):
            try:
                held = self.store.renew_lease(self.holder, self.token, self.ttl_s)
            except FawkesError as exc:
                # PostgreSQL: past its expiry the lease may be another's; SQLite: the file lock is ours
                if self.db_file is None and time.monotonic() - ok_at > self.ttl_s:
                    self.mark_lost(f"lease not renewed for {self.ttl_s:g}s ({exc})")
                    return
                log.warning("lease renewal: %s", exc)
                continue
            if not held:
                self.mark_lost(f"lease lost: {self._leader()} leads now")
                return
            ok_at = time.monotonic()

    def _leader(self) -> str:
        try:
            info = self.store.lease()
        except FawkesError:
            return "another coordinator"
        return "nobody" if info is None else f"{info['holder']} (token {info['token']})"

    def fence(self, store: Store) -> None:
        """Make every write of ``store`` (the coordinator's) check this process's lease."""
        store.set_fence(self.holder, self.token, ttl_s=self.ttl_s, on_lost=self.mark_lost)

    def on_lost(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def mark_lost(self, reason: str) -> None:
        """The lease is gone (renewal refused, a fenced write refused): stop acting, once."""
        with self._mutex:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
        log.error("%s: stepping down (token %s); its writes are refused", reason, self.token)
        for cb in self._callbacks:
            cb()

    def step_down(self) -> None:
        """Stop renewing; if the lease is still ours (a clean stop), let it expire now."""
        self._renewing.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._thread = None
        self._callbacks.clear()
        if self.token is not None and not self.lost.is_set() and self.store is not None:
            try:
                self.store.release_lease(self.holder, self.token)
            except FawkesError as exc:
                log.warning("lease release: %s", exc)
        self.token = None


def coordinator_status(url: str) -> dict[str, Any]:
    """What ``fawkes coordinator status`` shows, read from the lease and the last decision.
    Read-only: a missing SQLite file or a database without a fawkes state is refused (one line),
    and nothing is created."""
    from sqlalchemy import inspect

    from fawkes.store.db import make_engine

    url = normalize_url(url)
    display = make_url(url).render_as_string(hide_password=True)
    db = sqlite_path(url)
    if db is not None and not db.is_file():
        raise FawkesError(f"state {display}: no such state file" + (" (not a regular file)" if db.exists() else ""))
    engine = make_engine(url)
    try:
        with engine.connect() as c:
            found = inspect(c).has_table("schema_version")
    except Exception as exc:  # unreachable server, unreadable file
        raise FawkesError(f"state {display}: cannot open: {str(exc).strip().splitlines()[0][:300]}") from None
    finally:
        engine.dispose()
    if not found:
        raise FawkesError(f"state {display}: no fawkes state in this database")
    with Store(url) as store:
        lease = store.lease()
        last = store.latest_decision()
    out: dict[str, Any] = {"state": display, "running": False, "process": None, "lease": None, "last_tick": None}
    if lease is not None:
        now = lease.pop("now")
        process = holder_process(lease["holder"])
        out.update(lease=lease, process=process, running=lease["expires_at"] > now and process != "gone",
                   uptime_s=now - lease["started_at"], leading_s=now - lease["acquired_at"],
                   renewed_ago_s=now - lease["renewed_at"], expires_in_s=lease["expires_at"] - now)
    if last is not None:
        period = last.inputs.get("period_s") if isinstance(last.inputs, dict) else None
        out["last_tick"] = {"tick": last.id, "time": last.time, "age_s": time.time() - last.time,
                            "period_s": period if isinstance(period, (int, float)) else None}
    return out
