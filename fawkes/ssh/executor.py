"""Run commands on many SSH hosts in parallel (paramiko), one reused connection per host.

* Connections are kept per host and checked out by one thread at a time (never used by two
  threads at once); a fan-out uses one connection per host and reuses it on the next call.
* At most ``max_connects`` connection attempts run at the same time (default 32, pdsh's fan-out),
  and at most ``PER_HOST_CONNECTS`` to one host (sshd drops unauthenticated connections above its
  MaxStartups, default 10).
* Private keys and ``known_hosts`` are parsed once per executor, not once per connection (a
  64-host fan-out parsed 64 key files and 64 copies of a 64-entry known_hosts).
* Connection failures are retried with exponential backoff and jitter.  A command that was
  started is never run again, whatever happened to it.
* Host keys are checked strictly by default against ``known_hosts`` (default: the user's
  ``~/.ssh/known_hosts``); an unknown or changed key is refused and never retried.
* Results and errors come back together: ``{host: Result}``, never an exception per host.
* A command that times out is stopped on the host (its process group and session are killed over a
  second session of the same connection) before the timeout is reported; see :meth:`Executor._exec`.
"""

from __future__ import annotations

import errno
import logging
import random
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import paramiko

from fawkes.errors import FawkesError
from fawkes.ssh.shell import Command, Script, quote, render, with_env

log = logging.getLogger("fawkes.ssh")

__all__ = ["Target", "Result", "Executor", "Command", "Script"]


@dataclass(frozen=True)
class Target:
    """How to reach one host."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    key_file: Path | None = None


@dataclass(frozen=True)
class Result:
    """The outcome on one host.  ``ok`` = connected and exit code 0; ``error`` = one line when not ok."""

    host: str
    ok: bool
    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None
    duration_s: float


class _ConnectError(Exception):
    """Could not connect (``retry``: worth another attempt)."""

    def __init__(self, reason: str, retry: bool):
        super().__init__(reason)
        self.reason, self.retry = reason, retry


class _NotStarted(Exception):
    """The session could not be opened on a cached connection: the command never ran."""


class UnknownHostKey(paramiko.SSHException):
    pass


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path | None):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):  # noqa: D102
        where = str(self.known_hosts) if self.known_hosts else "~/.ssh/known_hosts"
        raise UnknownHostKey(f"unknown host key for {hostname} ({key.get_name()} "
                             f"{key.fingerprint}): not in {where}; refused (strict host-key checking)")


#: connection attempts to one host at a time (below sshd's MaxStartups, default 10)
PER_HOST_CONNECTS = 8


class Executor:
    """Thread-safe parallel SSH executor.  Use as a context manager or call :meth:`close`."""

    def __init__(self, targets: Iterable[Target], *, known_hosts: Path | None = None,
                 strict_host_keys: bool = True, max_connects: int = 32, connect_timeout: float = 10.0,
                 command_timeout: float | None = None, retries: int = 3, backoff: float = 0.5,
                 max_workers: int = 64):
        self.targets: dict[str, Target] = {}
        for t in targets:
            if t.name in self.targets:
                raise FawkesError(f"duplicate host name {t.name!r} in executor targets")
            self.targets[t.name] = t
        if max_connects < 1 or retries < 0 or max_workers < 1:
            raise FawkesError("max_connects and max_workers must be >= 1, retries >= 0")
        self.known_hosts = Path(known_hosts) if known_hosts else None
        self.strict_host_keys = strict_host_keys
        self.max_connects = max_connects
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.retries = retries
        self.backoff = backoff
        self.max_workers = max_workers
        self._connect_slots = threading.BoundedSemaphore(max_connects)
        self._host_slots: dict[str, threading.BoundedSemaphore] = {}
        self._keys: dict[str, paramiko.PKey | None] = {}  # private key file -> parsed key (None: let paramiko)
        self._known: tuple[int, paramiko.HostKeys] | None = None  # (mtime, known_hosts parsed)
        self._idle: dict[str, list[paramiko.SSHClient]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self.connects = 0  # connections made so far (for tests and stats)
        #: SSH operations that failed below the command (no connection, no session, timed out,
        #: upload failed): results with ``exit_code`` None; fawkes_ssh_failures_total on /metrics
        self.failures = 0

    # ------------------------------------------------------------------ public API
    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, hosts: Iterable[str] | str | None, command: Command, *, timeout: float | None = None,
            env: Mapping[str, object] | None = None,
            on_result: Callable[[Result], None] | None = None) -> dict[str, Result]:
        """Run the same command on ``hosts`` (names; None = all) in parallel."""
        text = render(with_env(command, env)) if env else render(command)
        return self.run_each({h: text for h in self._names(hosts)}, timeout=timeout, on_result=on_result)

    def run_each(self, commands: Mapping[str, Command], *, timeout: float | None = None,
                 on_result: Callable[[Result], None] | None = None) -> dict[str, Result]:
        """Run a different command per host, in parallel."""
        texts = {h: render(c) for h, c in commands.items()}
        self._names(texts)
        t = self.command_timeout if timeout is None else timeout
        return self._fan_out(texts, lambda h, text: self._run_one(h, text, t), on_result)

    def put(self, host: str, data: bytes | str, remote_path: str, mode: int = 0o644) -> Result:
        """Upload ``data`` to ``remote_path`` on ``host`` (atomic rename; parent dirs created)."""
        self._names([host])
        return self._put_one(host, [(remote_path, data)], mode)

    def put_each(self, files: Mapping[str, Sequence[tuple[str, bytes | str]]], mode: int = 0o644,
                 on_result: Callable[[Result], None] | None = None) -> dict[str, Result]:
        """Upload several ``(remote_path, data)`` files per host, hosts in parallel."""
        self._names(files)
        return self._fan_out(dict(files), lambda h, fs: self._put_one(h, fs, mode), on_result)

    def add_target(self, target: Target) -> None:
        """Make ``target`` reachable by name (a host that joined the pool, e.g. from a SLURM allocation)."""
        with self._lock:
            old = self.targets.get(target.name)
            if old is not None and old != target:
                raise FawkesError(f"host {target.name!r} is already a target with another address or login")
            self.targets[target.name] = target

    def remove_target(self, name: str) -> None:
        """Forget host ``name`` (it left the pool) and close its idle connections."""
        with self._lock:
            self.targets.pop(name, None)
            idle = self._idle.pop(name, [])
        for c in idle:
            c.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
            pool, self._pool = self._pool, None
        if pool:
            pool.shutdown(wait=True)
        for clients in idle.values():
            for c in clients:
                c.close()

    # ------------------------------------------------------------------ fan-out
    def _names(self, hosts: Iterable[str] | str | None) -> list[str]:
        if hosts is None:
            return list(self.targets)
        names = [hosts] if isinstance(hosts, str) else list(hosts)
        for n in names:
            if n not in self.targets:
                raise FawkesError(f"unknown host {n!r} (not a target of this executor)")
        return names

    def _fan_out(self, work: dict, fn: Callable, on_result) -> dict[str, Result]:
        if not work:
            return {}
        with self._lock:
            if self._closed:
                raise FawkesError("executor is closed")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="fawkes-ssh")
            pool = self._pool

        def task(host, item):
            try:
                res = fn(host, item)
            except Exception as exc:  # a bug must not lose the other hosts' results
                log.exception("internal error on %s", host)
                res = Result(host, False, None, "", "", f"internal error: {exc!r}", 0.0)
            if not res.ok and res.exit_code is None:
                with self._lock:
                    self.failures += 1
            if on_result:
                on_result(res)
            return res

        futures = {h: pool.submit(task, h, item) for h, item in work.items()}
        return {h: f.result() for h, f in futures.items()}

    # ------------------------------------------------------------------ one host
    def _run_one(self, host: str, text: str, timeout: float | None) -> Result:
        start = time.monotonic()

        def fail(msg, code=None, out="", err=""):
            return Result(host, False, code, out, err, msg, time.monotonic() - start)

        for attempt in range(2):
            try:
                client = self._checkout(host)
            except _ConnectError as exc:
                return fail(exc.reason)
            try:
                chan = self._open(client)
            except _NotStarted as exc:  # the cached connection was dead: reconnect, command not run
                client.close()
                if attempt == 0:
                    continue
                return fail(f"cannot open a session: {exc}")
            code, out, err, error = self._exec(chan, text, timeout)
            if error is None:
                self._checkin(host, client)
            else:
                client.close()
            if error is None and code == 0:
                return Result(host, True, 0, out, err, None, time.monotonic() - start)
            if error is None:
                last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
                error = f"exit code {code}" + (f": {last[:200]}" if last else "")
            return fail(error, code, out, err)
        raise AssertionError("unreachable")

    def _open(self, client: paramiko.SSHClient) -> paramiko.Channel:
        transport = client.get_transport()
        try:
            if transport is None or not transport.is_active():
                raise _NotStarted("connection closed")
            return transport.open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise _NotStarted(str(exc) or type(exc).__name__) from None

    def _exec(self, chan: paramiko.Channel, text: str, timeout: float | None, *, stoppable: bool = True):
        """Run ``text`` on ``chan``: (exit code, stdout, stderr, error or None).

        Stopping a timed-out command.  Closing the channel stops nothing on the host: without a
        pty sshd only closes the pipes and the command runs on.  Rejected alternatives:

        * a pty (``get_pty``): its close sends SIGHUP, but only to the foreground process group;
          nohup'd or background children and programs ignoring SIGHUP survive.  A pty would also
          merge stderr into stdout, turn "\\n" into "\\r\\n" and make programs act interactively,
          changing every normal result.
        * the SSH "signal" channel request: OpenSSH >= 7.9 only, refused for forced commands, no
          public paramiko API, and it reaches one process group only.

        Instead (``stoppable``) the command is prefixed with a shell-builtin ``printf`` that puts
        the shell's pid on the first line of stdout (removed again here: no extra process, no file,
        the command text itself is untouched).  sshd runs each session's command in a new session
        (setsid), so that pid is the process group and session id of everything the command starts,
        unless something detaches itself with setsid (a daemon on purpose).  On a timeout a second
        session on the same connection runs :data:`_KILL_SCRIPT`: TERM, then KILL, every process of
        that group or session (a /proc scan, which also finds children that moved to a group of
        their own, e.g. under ``timeout``), and returns once none is left.  Only then is the
        timeout reported (error text unchanged); if the host could not be cleaned, the error says so.
        """
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            chan.exec_command(_PID_PRINTF + text if stoppable else text)
            while True:
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.closed or (chan.eof_received and chan.exit_status_ready()):
                    break
                wait = 1.0
                if deadline is not None:
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        return self._timed_out(chan, out, err, timeout, stoppable)
                    wait = min(wait, 1.0)
                select.select([chan], [], [], wait)
            while chan.recv_ready():
                out += chan.recv(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if stoppable:
                out = _split_pid(out)[1]
            return None, _dec(out), _dec(err), f"connection lost while running: {exc or type(exc).__name__}"
        if stoppable:
            out = _split_pid(out)[1]
        code = chan.recv_exit_status() if chan.exit_status_ready() else -1
        transport = chan.get_transport()
        chan.close()
        if code == -1:  # no exit-status message: the connection died, or the command was killed by a signal
            if transport is None or not transport.is_active():
                return None, _dec(out), _dec(err), "connection lost while running (host down?)"
            return None, _dec(out), _dec(err), "terminated without an exit status (killed by a signal?)"
        return code, _dec(out), _dec(err), None

    def _timed_out(self, chan: paramiko.Channel, out: bytearray, err: bytearray, timeout: float,
                   stoppable: bool):
        """Stop the timed-out command on its host (see :meth:`_exec`), close ``chan``, report."""
        msg = f"timeout after {timeout:g}s"
        problem = None
        if stoppable:
            try:
                # a timeout shorter than the session start-up: the pid line may still be on its way
                until = time.monotonic() + self.connect_timeout
                while (_split_pid(out)[0] is None and not chan.closed and not chan.eof_received
                       and time.monotonic() < until):
                    select.select([chan], [], [], min(0.1, max(0.0, until - time.monotonic())))
                    while chan.recv_ready():
                        out += chan.recv(65536)
                    while chan.recv_stderr_ready():
                        err += chan.recv_stderr(65536)
                pid, out = _split_pid(out)
                problem = "its process id never arrived" if pid is None else self._stop_remote(chan, pid)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                problem = f"connection lost: {exc or type(exc).__name__}"
        chan.close()
        if problem:
            msg += f"; it may still be running on the host ({problem})"
        return None, _dec(out), _dec(err), msg

    def _stop_remote(self, chan: paramiko.Channel, pid: int) -> str | None:
        """Kill process group / session ``pid`` over a new session on ``chan``'s connection.

        Returns None once nothing of it is left, else why not."""
        if pid <= 1:
            return f"implausible process id {pid}"
        transport = chan.get_transport()
        if transport is None or not transport.is_active():
            return "connection closed"
        try:
            killer = transport.open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            return f"cannot open a session: {exc or type(exc).__name__}"
        code, _, kerr, error = self._exec(killer, render(Script("g={g}", g=pid)) + "\n" + _KILL_SCRIPT,
                                          self.connect_timeout + 5, stoppable=False)
        if error is None and code == 0:
            return None
        last = next((ln.strip() for ln in reversed(kerr.splitlines()) if ln.strip()), "")
        return error or f"kill script exit code {code}" + (f": {last[:200]}" if last else "")

    def _put_one(self, host: str, files: Sequence[tuple[str, bytes | str]], mode: int) -> Result:
        start = time.monotonic()
        for path, _ in files:
            if not path or "\0" in path:
                raise FawkesError(f"bad remote path {path!r}")
        parents = sorted({str(PurePosixPath(p).parent) for p, _ in files})
        mk = self._run_one(host, render(Script("mkdir -p -- {d}", d=parents)), self.command_timeout)
        if not mk.ok:
            return Result(host, False, mk.exit_code, "", mk.stderr, mk.error, time.monotonic() - start)
        try:
            client = self._checkout(host)
        except _ConnectError as exc:
            return Result(host, False, None, "", "", exc.reason, time.monotonic() - start)
        try:
            with client.open_sftp() as sftp:
                for path, data in files:
                    raw = data.encode() if isinstance(data, str) else bytes(data)
                    tmp = f"{path}.fawkes-{uuid.uuid4().hex[:8]}.tmp"
                    with sftp.open(tmp, "wb") as fh:
                        fh.write(raw)
                    sftp.chmod(tmp, mode)
                    sftp.posix_rename(tmp, path)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            return Result(host, False, None, "", "", f"upload failed: {exc or type(exc).__name__}",
                          time.monotonic() - start)
        self._checkin(host, client)
        return Result(host, True, 0, "", "", None, time.monotonic() - start)

    # ------------------------------------------------------------------ connections
    def _checkout(self, host: str) -> paramiko.SSHClient:
        with self._lock:
            idle = self._idle.setdefault(host, [])
            while idle:
                client = idle.pop()
                t = client.get_transport()
                if t is not None and t.is_active():
                    return client
                client.close()
        return self._connect(self.targets[host])

    def _checkin(self, host: str, client: paramiko.SSHClient) -> None:
        with self._lock:
            if not self._closed:
                self._idle.setdefault(host, []).append(client)
                return
        client.close()

    def _connect(self, t: Target) -> paramiko.SSHClient:
        attempt = 0
        with self._lock:
            per_host = self._host_slots.setdefault(t.address, threading.BoundedSemaphore(PER_HOST_CONNECTS))
        while True:
            try:
                with per_host, self._connect_slots:
                    return self._connect_once(t)
            except _ConnectError as exc:
                if not exc.retry or attempt >= self.retries:
                    raise
                delay = self.backoff * (2 ** attempt) * random.uniform(0.5, 1.5)
                log.debug("connect to %s failed (%s); retry in %.2fs", t.name, exc.reason, delay)
                time.sleep(delay)
                attempt += 1

    def _known_keys(self, entry: str) -> dict | None:
        """``entry``'s keys in the executor's ``known_hosts``, parsed once and again only when a host
        is missing and the file changed since (hosts added to a running pool).  None: no file given
        (the user's ``~/.ssh/known_hosts`` via paramiko)."""
        if self.known_hosts is None:
            return None
        with self._lock:
            try:
                mtime = self.known_hosts.stat().st_mtime_ns
            except OSError:
                if self.strict_host_keys:
                    raise _ConnectError(f"known_hosts file {self.known_hosts} not found", retry=False) from None
                return {}
            if self._known is None or (self._known[0] != mtime and self._known[1].lookup(entry) is None):
                self._known = (mtime, paramiko.HostKeys(str(self.known_hosts)))
            return dict(self._known[1].lookup(entry) or {})

    def _private_key(self, path: str) -> paramiko.PKey | None:
        """The key in ``path``, parsed once; None if paramiko should load it itself (say, encrypted)."""
        with self._lock:
            if path not in self._keys:
                try:
                    self._keys[path] = paramiko.PKey.from_path(path)
                except Exception:  # noqa: BLE001 - paramiko's own loading reports the problem per host
                    self._keys[path] = None
            return self._keys[path]

    def _connect_once(self, t: Target) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        sock = None
        try:
            entry = t.address if t.port == 22 else f"[{t.address}]:{t.port}"
            known = self._known_keys(entry)
            if known is None:
                client.load_system_host_keys()
            for ktype, hkey in (known or {}).items():  # only this host's: the policy refuses any other key
                client.get_host_keys().add(entry, ktype, hkey)
            client.set_missing_host_key_policy(
                _RejectUnknown(self.known_hosts) if self.strict_host_keys else paramiko.AutoAddPolicy())
            key = str(t.key_file) if t.key_file else None
            pkey = self._private_key(key) if key else None
            sock = socket.create_connection((t.address, t.port), timeout=self.connect_timeout)
            # Without TCP_NODELAY every small SSH message (channel open, exec request, key exchange
            # steps) waits for the peer's delayed ACK: 40 ms per channel open on Linux (measured on
            # the lab: 44 ms -> 0.2 ms).  paramiko leaves Nagle's algorithm on.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.connect(t.address, port=t.port, username=t.user, pkey=pkey, key_filename=None if pkey else key,
                           look_for_keys=key is None, allow_agent=key is None, sock=sock,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout)
            self.connects += 1
            return client
        except _ConnectError:
            client.close()
            raise
        except Exception as exc:
            client.close()
            if sock is not None:
                sock.close()
            raise _classify(t, exc) from None


def _classify(t: Target, exc: BaseException) -> _ConnectError:
    where = f"{t.address}:{t.port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return _ConnectError(f"host key mismatch for {where}: server sent {exc.key.get_name()} "
                             f"{exc.key.fingerprint}, known_hosts has another key; refused "
                             "(possible man-in-the-middle, or the host was reinstalled)", retry=False)
    if isinstance(exc, UnknownHostKey):
        return _ConnectError(str(exc), retry=False)
    if isinstance(exc, paramiko.AuthenticationException):
        return _ConnectError(f"authentication failed for {t.user}@{where}", retry=False)
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        codes = {getattr(e, "errno", None) for e in exc.errors.values()}
        if codes <= {errno.ECONNREFUSED}:
            return _ConnectError(f"connection refused by {where}", retry=True)
        return _ConnectError(f"cannot connect to {where}: {exc}", retry=True)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return _ConnectError(f"connect timeout to {where}", retry=True)
    if isinstance(exc, ConnectionRefusedError):
        return _ConnectError(f"connection refused by {where}", retry=True)
    if isinstance(exc, OSError):
        return _ConnectError(f"cannot connect to {where}: {exc.strerror or exc}", retry=True)
    if isinstance(exc, (paramiko.SSHException, EOFError)):
        return _ConnectError(f"ssh handshake with {where} failed: {exc or type(exc).__name__}", retry=True)
    return _ConnectError(f"cannot connect to {where}: {exc!r}", retry=False)


# Prefixed to every command (see Executor._exec): the shell's pid, on a first stdout line of its own.
_PID_MARK = b"\x1efawkes-pid "
_PID_PRINTF = "printf '\\036fawkes-pid %s\\n' \"$$\"; "

# Run with g=<pid> before it: TERM, then KILL, every process of process group or session g (not
# zombies) until none is left (exit 0), else exit 1 naming the survivors.  POSIX sh and /proc only.
_KILL_SCRIPT = r"""members() {
  for f in /proc/[0-9]*/stat; do
    { read -r s < "$f"; } 2>/dev/null || continue
    set -- ${s##*") "}
    if [ "$1" != Z ] && { [ "$3" = "$g" ] || [ "$4" = "$g" ]; }; then f=${f#/proc/}; echo "${f%/stat}"; fi
  done
}
for sig in TERM KILL; do
  p=$(members); [ -z "$p" ] && exit 0
  kill -s "$sig" $p 2>/dev/null
  i=0
  while [ "$i" -lt 40 ]; do
    p=$(members); [ -z "$p" ] && exit 0
    sleep 0.05; i=$((i + 1))
  done
done
echo "still running: $p" >&2
exit 1
"""


def _split_pid(out: bytearray) -> tuple[int | None, bytearray]:
    """(pid, stdout without the pid line) if stdout starts with the pid line, else (None, stdout)."""
    if not out.startswith(_PID_MARK):
        if _PID_MARK.startswith(bytes(out)):  # an incomplete pid line is no output of the command
            return None, bytearray()
        return None, out
    end = out.find(b"\n")
    if end < 0:
        return None, bytearray()
    digits = bytes(out[len(_PID_MARK):end])
    return (int(digits) if digits.isdigit() else None), out[end + 1:]


def _dec(b: bytes | bytearray) -> str:
    return bytes(b).decode("utf-8", errors="replace")


# keep ``quote`` importable from here for callers that build commands next to the executor
quote = quote
