"""Webhook notifications (``notify:`` in the coordinator config; ``docs/notifications.md``).

The coordinator already records every lifecycle move as an event in the state
(:mod:`fawkes.store.events`).  Every fast step, :meth:`Notifier.poll` reads the events recorded since
the last poll (one short query), names the ones a webhook can be sent for (:func:`classify`) and
hands each to the queue of every target that chose that name, without waiting: a full queue drops
the notification and counts it.  Each target has its own queue and its own delivery thread, which
POSTs the JSON body signed with HMAC-SHA256 over the body (``X-Fawkes-Signature: sha256=<hex>``),
and retries a failed delivery (no answer, 408, 425, 429, 5xx) after ``backoff_s``, 2 x, 4 x ...
at most ``backoff_max_s``, ``retries`` times.  A slow or dead receiver holds only its own thread:
never a tick, nor another target.

The secret is read from ``secret_file`` (never logged); a target is logged as ``notify[i]
(scheme://host:port)``, never with its path or query (a webhook URL's path is often its secret).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import queue
import re
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger("fawkes.notify")

#: the notification names a webhook can choose (``notify[].events``), and the events they come from
EVENTS = ("admitted", "grown", "shrunk", "drain_stuck", "host_failed", "job_failed", "hibernated", "woken")

MAX_SECRET_BYTES = 4096
MIN_SECRET_BYTES = 16
MAX_URL = 2048
_MOVE = re.compile(r"^(?P<host>\S+): (?P<old>[a-z_]+) -> (?P<to>[a-z_]+)\b")
_RETRY_STATUS = frozenset({408, 425, 429})
#: events read back behind the newest one seen: on PostgreSQL a transaction holding a lower event id
#: can commit after one holding a higher id; those are still found (SQLite commits in id order)
_WINDOW = 200


def check_url(v: str) -> str:
    """A webhook URL: http or https, a host, no credentials, no fragment, no whitespace or control
    character, at most :data:`MAX_URL` characters.  Raises ValueError (the message never repeats the
    URL's path or query)."""
    if len(v) > MAX_URL:
        raise ValueError(f"longer than {MAX_URL} characters")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in v):
        raise ValueError("a space, newline, NUL or other control character in the URL")
    try:
        u = urlsplit(v)
        port = u.port
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if u.scheme not in ("http", "https"):
        raise ValueError(f"scheme {u.scheme[:16]!r}: only http and https")
    if not u.hostname:
        raise ValueError("no host")
    if "@" in u.netloc:
        raise ValueError("no user or password in the URL (it is logged by host; sign with secret_file)")
    if u.fragment:
        raise ValueError("no #fragment")
    if port == 0:
        raise ValueError("port 0")
    return v


def where(url: str) -> str:
    """What a log line shows of a webhook URL: scheme, host and port only."""
    u = urlsplit(url)
    return f"{u.scheme}://{u.hostname}:{u.port or (443 if u.scheme == 'https' else 80)}"


def read_secret(path: Path) -> bytes:
    """The HMAC key in ``path``: a regular file (a FIFO or device is refused without blocking) of
    :data:`MIN_SECRET_BYTES` to :data:`MAX_SECRET_BYTES` bytes, one line (a trailing newline is
    dropped), no NUL.  Raises ValueError naming what is wrong, never the content."""
    from fawkes.errors import ConfigError
    from fawkes.yamlfile import read_regular

    try:
        data = read_regular(Path(path), MAX_SECRET_BYTES)
    except ConfigError as exc:
        raise ValueError(f"{path}: {exc.detail}") from None
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    data = data.removesuffix(b"\n").removesuffix(b"\r")
    if b"\0" in data or b"\n" in data or b"\r" in data:
        raise ValueError(f"{path}: the secret must be one line without NUL bytes")
    if len(data) < MIN_SECRET_BYTES:
        raise ValueError(f"{path}: the secret is shorter than {MIN_SECRET_BYTES} bytes "
                         "(make one with: openssl rand -hex 32)")
    return data


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Fawkes-Signature`` header value of ``body``: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def classify(kind: str, message: str, level: str = "info") -> str | None:
    """The notification name of a recorded event (one of :data:`EVENTS`), None for the others.

    * ``admitted``: the cluster moved ``requested -> deploying`` (the store's cluster transition);
    * ``grown``: one of its nodes moved ``-> running`` (daemons up: started, or resumed);
    * ``shrunk``: one of its nodes that ran left: ``-> released`` from draining, suspended or lent,
      or ``-> suspended`` (shrink_mode suspend); a node cancelled before it ran is not a shrink;
    * ``drain_stuck``: the reconciler's warning that a node has been draining longer than
      ``timeouts.draining``;
    * ``host_failed``: a host moved ``-> failed`` (unreachable, or taken out of service);
    * ``job_failed``: a job moved to failed (the dispatcher: non-zero exit, driver or directory lost);
    * ``hibernated``: a cluster moved ``saving -> hibernating`` (scale to zero);
    * ``woken``: a hibernating cluster left to be requested again (``hibernating -> released (woken``).
    """
    if kind == "cluster":
        if message.startswith("saving -> hibernating"):
            return "hibernated"
        if message.startswith("hibernating -> released (woken"):
            return "woken"
        return "admitted" if message.startswith("requested -> deploying") else None
    if kind == "node":
        m = _MOVE.match(message)
        if m is not None:
            old, to = m["old"], m["to"]
            if to == "running":
                return "grown"
            if to == "suspended" or (to == "released" and old in ("draining", "suspended", "lent")):
                return "shrunk"
            return None
        if level == "warning" and "draining for more than" in message:
            return "drain_stuck"
        return None
    if kind == "host":
        return "host_failed" if re.search(r"-> failed\b", message) else None
    if kind == "job":
        return "job_failed" if re.match(r"^job \d+ failed\b", message) else None
    return None


@dataclass(frozen=True)
class Delivery:
    name: str
    delivery_id: str
    body: bytes


class WebhookTarget:
    """One webhook: a bounded queue and a delivery thread.  ``counts`` are read by /metrics."""

    def __init__(self, index: int, cfg, secret: bytes):
        self.index, self.cfg = index, cfg
        self.events = frozenset(cfg.events)
        self._secret = secret
        self.label = f"notify[{index}] ({where(cfg.url)})"
        u = urlsplit(cfg.url)
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port
        self._path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self._ssl = ssl.create_default_context() if self._https else None
        self.q: queue.Queue[Delivery] = queue.Queue(maxsize=cfg.queue)
        self.counts = {"sent": 0, "retried": 0, "failed": 0, "dropped": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"notify-{index}", daemon=True)

    def __repr__(self) -> str:  # never the secret, nor the URL's path
        return f"<WebhookTarget {self.label}>"

    def start(self) -> None:
        self._thread.start()

    def offer(self, d: Delivery) -> bool:
        """Queue ``d`` without waiting; a full queue drops it (counted, logged)."""
        try:
            self.q.put_nowait(d)
            return True
        except queue.Full:
            self.counts["dropped"] += 1
            log.warning("%s: queue full (%d): %s notification %s dropped", self.label, self.cfg.queue, d.name,
                        d.delivery_id)
            return False

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread (a delivery waiting for its next attempt stops waiting); what is still
        queued is not sent (counted as dropped)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        while True:
            try:
                self.q.get_nowait()
            except queue.Empty:
                break
            self.counts["dropped"] += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                d = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                self.deliver(d)
            except Exception as exc:  # noqa: BLE001 -- never let the thread die: count it and go on
                self.counts["failed"] += 1
                log.warning("%s: %s notification %s: %s", self.label, d.name, d.delivery_id, type(exc).__name__)

    def backoff(self, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1`` (``attempt`` from 0): ``backoff_s * 2**attempt``,
        at most ``backoff_max_s``."""
        return min(self.cfg.backoff_max_s, self.cfg.backoff_s * 2.0 ** min(attempt, 60))

    def deliver(self, d: Delivery) -> bool:
        """POST ``d`` until a 2xx, a refusal not worth retrying, or ``retries`` retries; True if sent."""
        headers = {"Content-Type": "application/json", "User-Agent": "fawkes-notify",
                   "X-Fawkes-Event": d.name, "X-Fawkes-Delivery": d.delivery_id,
                   "X-Fawkes-Signature": sign(self._secret, d.body)}
        why = ""
        for attempt in range(self.cfg.retries + 1):
            status, why = self._post(d.body, headers)
            if status is not None and 200 <= status < 300:
                self.counts["sent"] += 1
                return True
            if status is not None and status < 500 and status not in _RETRY_STATUS:
                break  # the receiver refuses it (or redirects, which is not followed): retrying will not help
            if attempt == self.cfg.retries or self._stop.wait(self.backoff(attempt)):
                break
            self.counts["retried"] += 1
        self.counts["failed"] += 1
        log.warning("%s: %s notification %s not delivered: %s", self.label, d.name, d.delivery_id, why)
        return False

    def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.cfg.timeout_s,
                                               context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.cfg.timeout_s)
        try:
            conn.request("POST", self._path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read(65536)
            return resp.status, f"HTTP {resp.status}"
        except (OSError, http.client.HTTPException) as exc:
            return None, type(exc).__name__ + (f" ({exc.strerror})" if isinstance(exc, OSError) and exc.strerror
                                               else "")
        finally:
            conn.close()


class Notifier:
    """Every webhook of a config; :meth:`poll` is what the coordinator's fast step calls."""

    def __init__(self, targets: list[WebhookTarget]):
        self.targets = targets
        self._last: int | None = None  # the newest event id seen
        self._seen: set[int] = set()  # ids seen within the window behind it

    @classmethod
    def from_config(cls, cfg) -> Notifier | None:
        """The notifier of a loaded config (None when ``notify`` is empty); secrets read again."""
        if not cfg.notify:
            return None
        return cls([WebhookTarget(i, t, read_secret(t.secret_file)) for i, t in enumerate(cfg.notify)])

    def start(self, store) -> None:
        """Start the delivery threads; notify about events recorded from now on (none before)."""
        last = store.events(limit=1)
        self._last = last[-1].id if last else 0
        for t in self.targets:
            t.start()

    def poll(self, store, limit: int = 5000) -> int:
        """Queue a notification for each new event a target chose; return how many were queued.
        Never waits on a receiver."""
        if self._last is None:
            self.start(store)
            return 0
        queued = 0
        for ev in store.events(after=max(0, self._last - _WINDOW), limit=limit + _WINDOW):
            if ev.id in self._seen or ev.id <= self._last - _WINDOW:
                continue
            self._seen.add(ev.id)
            self._last = max(self._last, ev.id)
            name = classify(ev.kind, ev.message, ev.level)
            if name is None:
                continue
            body = json.dumps({"event": name, "id": ev.id, "time": ev.time, "level": ev.level, "kind": ev.kind,
                               "cluster": ev.cluster, "node": ev.node, "message": ev.message},
                              sort_keys=True).encode()
            for t in self.targets:
                if name in t.events:
                    queued += t.offer(Delivery(name, str(ev.id), body))
        self._seen = {i for i in self._seen if i > self._last - _WINDOW}
        return queued

    def counts(self) -> dict[str, float]:
        """Notifications sent, retried (attempts after the first), failed (given up), dropped (queue
        full, or still queued at shutdown), over every target."""
        out = {"sent": 0.0, "retried": 0.0, "failed": 0.0, "dropped": 0.0}
        for t in self.targets:
            for k, v in t.counts.items():
                out[k] += v
        return out

    def close(self, timeout: float = 2.0) -> None:
        for t in self.targets:
            t.close(timeout)
