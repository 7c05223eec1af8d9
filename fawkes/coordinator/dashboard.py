"""The read-only web dashboard, served next to ``/metrics`` on the same server and bind address.

Routes (``GET`` or ``HEAD``; any other method gets 405, any other path 404):

* ``/`` (and ``/dashboard``): the page (``dashboard_assets/index.html.j2``), which loads
  ``/static/dashboard.js`` and ``.css`` and fetches ``/api/state`` every few seconds;
  everything is shipped in the package, nothing comes from the network;
* ``/api/state``: :func:`state` as JSON: clusters with their nodes by role and state, weights
  and discrimination of the recent ticks, each cluster's allocation over the window, the
  decisions with their reasons and plans, the latest jobs and events;
* ``/metrics``: Prometheus (:mod:`fawkes.coordinator.metrics_http`);
* ``/api/v1/...``: the teams' authenticated API (:mod:`fawkes.coordinator.api_http`), only when the
  config enables it (else those paths are as any other: 404, or 405 for a write).

Everything the dashboard shows is read through the store API; only the teams' API writes.
A connection that sends nothing for :data:`REQUEST_TIMEOUT_S` is closed (a slow client holds its own
thread that long at most); with a certificate (``api.tls_cert``) the server speaks TLS only, the
handshake done in the connection's thread, never in the one that accepts.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client.exposition import ThreadingWSGIServer

from fawkes.coordinator.view import allocation_history
from fawkes.errors import FawkesError
from fawkes.store import Store
from fawkes.store.base import gc_paused

log = logging.getLogger("fawkes.coordinator.http")

ASSETS = "dashboard_assets"
STATIC = {"dashboard.js": "text/javascript; charset=utf-8", "dashboard.css": "text/css; charset=utf-8"}
REFRESH_S = 3.0
#: seconds a connection may stay silent (headers, body, TLS handshake) before it is closed
REQUEST_TIMEOUT_S = 10.0


def _num(x: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits`` decimals, else None (NaN and inf are not JSON)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return round(v, digits) if math.isfinite(v) else None


def _nums(d: Any) -> dict[str, float | None]:
    return {str(k): _num(v) for k, v in d.items()} if isinstance(d, dict) else {}


def _t(t: float | None) -> float | None:
    """A time to the hundredth of a second (the JSON stays small at thousands of points)."""
    return None if t is None else round(t, 2)


class DecisionViews:
    """What the page shows of each recorded decision (its ``ticks`` entry, its ``decisions`` entry and
    the ``ticks`` entry as JSON), computed once per decision and kept while the decision is in the
    page's window.  A decision is never changed once recorded (only pruned), so a refresh reads the
    ids in the window and only the decisions recorded since the last one (one per tick): the page's
    120 decisions over 1,000 clusters were 240,000 numbers to decode, round and encode every 3 s.
    Shared by the server's threads."""

    def __init__(self) -> None:
        #: by (id, time): a state replaced under the server (a restore) reuses ids, not both
        self._views: dict[tuple[int, float], tuple[dict[str, Any], dict[str, Any], str | None]] = {}
        self._lock = threading.Lock()

    def recent(self, store: Store, limit: int, since: float) -> list[tuple[dict[str, Any], dict[str, Any], str | None]]:
        """The views of ``store.recent_decisions(limit, since=since)``, oldest first."""
        keys = store.recent_decision_ids(limit, since=since)
        with self._lock:
            missing = [i for i, t in keys if (i, t) not in self._views]
        fresh = {(d.id, d.time): _views(d, encode=True) for d in store.decisions_by_id(missing)}
        with self._lock:
            self._views.update(fresh)
            keep = set(keys)
            for k in [k for k in self._views if k not in keep]:
                del self._views[k]
            return [self._views[k] for k in keys if k in self._views]  # (one pruned meanwhile: gone)


def _views(d, *, encode: bool = False) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    tick = _tick(d)
    return tick, _decision(d), json.dumps(tick, allow_nan=False) if encode else None


def _tick(d) -> dict[str, Any]:
    return {"tick": d.id, "time": _t(d.time), "global_factor": _num(d.global_factor),
            "weights": _nums(d.weights), "discriminations": _nums(d.discriminations)}


def state(store: Store, *, now: float | None = None, window_s: float = 3600.0, decisions: int = 120,
          jobs: int = 30, events: int = 40, counters: dict[str, float] | None = None,
          web_ui: Mapping[str, str | None] | None = None, views: DecisionViews | None = None) -> dict[str, Any]:
    """What the page shows, as JSON-ready data (newest first for decisions, jobs and events); ``web_ui``:
    each cluster's link to its kind's own page (the sampler's, as last sampled); ``views``: the
    server's decisions computed already (None: every decision read and computed now)."""
    return _state(store, now=now, window_s=window_s, decisions=decisions, jobs=jobs, events=events,
                  counters=counters, web_ui=web_ui, views=views)[0]


def state_json(store: Store, views: DecisionViews, **kw: Any) -> bytes:
    """``json.dumps(state(store, **kw))``, the same bytes, with each decision's ``ticks`` entry as
    ``views`` encoded it once (what ``/api/state`` serves)."""
    doc, ds = _state(store, views=views, **kw)
    doc["ticks"] = _MARK
    head, mark, tail = json.dumps(doc, allow_nan=False).partition(json.dumps(_MARK))
    if not mark:  # cannot happen: the mark is in the document
        raise RuntimeError("state_json: the ticks' mark is missing")
    return (head + "[" + ", ".join(t if t is not None else json.dumps(tick, allow_nan=False) for tick, _, t in ds)
            + "]" + tail).encode()


#: stands for the ticks in the encoded document: no state holds a string of 32 random hex digits
_MARK = "fawkes-ticks-" + secrets.token_hex(16)


def _state(store: Store, *, now: float | None = None, window_s: float = 3600.0, decisions: int = 120,
           jobs: int = 30, events: int = 40, counters: dict[str, float] | None = None,
           web_ui: Mapping[str, str | None] | None = None,
           views: DecisionViews | None = None) -> tuple[dict[str, Any], list]:
    """:func:`state`'s document and the decisions' views it holds."""
    now = time.time() if now is None else now
    since = now - window_s
    st = store.status()
    nodes = store.nodes_of_live_clusters(released_after=since)
    ds = (views.recent(store, decisions, since) if views is not None
          else [_views(d) for d in store.recent_decisions(decisions, since=since)])
    names = {c.id: c.name for c in store.list_clusters()}
    job_rows, event_rows = store.list_jobs(limit=jobs), store.events(limit=events)
    with gc_paused():  # many small acyclic objects: see fawkes.store.base.gc_paused
        clusters = []
        for c in st["clusters"]:
            clusters.append({
                **{k: c[k] for k in ("name", "state", "framework", "kind", "min_core", "held", "draining",
                                     "suspended", "queued_jobs", "running_jobs", "queue_position",
                                     "release_requested")},
                "web_ui": (web_ui or {}).get(c["name"]),
                "state_since": _t(c["state_since"]), "target": c["target"], "weight": _num(c["weight"]),
                "discrimination": _num(c["discrimination"]), "by_role": c["nodes"],
                "nodes": [{"host": n.host, "role": n.role, "state": n.state}
                          for n in nodes.get(c["name"], ()) if n.holds_host is not None],
            })
        allocation = {}
        for name, rows in nodes.items():
            pts = allocation_history(rows, since)
            allocation[name] = [[_t(t), n] for t, n in pts] + ([[_t(now), pts[-1][1]]] if pts else [])
    return {
        "now": _t(now), "window_s": window_s, "refresh_s": REFRESH_S, "state": st["state"],
        "tick": st["tick"], "decided_at": _t(st["decided_at"]), "policy": st["policy"],
        "global_factor": _num(st["global_factor"]), "gate_open": st["gate_open"],
        "hosts": {str(k): v for k, v in st["hosts"].items()},
        "clusters": clusters,
        "allocation": allocation,
        "ticks": [tick for tick, _, _ in ds],
        "decisions": [decision for _, decision, _ in reversed(ds[-20:])],
        "jobs": [{"id": j.id, "cluster": names.get(j.cluster_id, "?"), "state": j.state,
                  "submitted_at": _t(j.submitted_at), "started_at": _t(j.started_at), "ended_at": _t(j.ended_at),
                  "app_id": j.app_id, "detail": j.detail} for j in reversed(job_rows)],
        "events": [{"id": e.id, "time": _t(e.time), "level": e.level, "kind": e.kind, "cluster": e.cluster,
                    "node": e.node, "message": e.message} for e in reversed(event_rows)],
        "counters": {k: _num(v() if callable(v) else v) for k, v in (counters or {}).items()},
    }, ds


def _decision(d) -> dict[str, Any]:
    plan = d.plan if isinstance(d.plan, dict) else {}
    return {"tick": d.id, "time": _t(d.time), "policy": d.policy, "reason": d.reason, "gate_open": d.gate_open,
            "global_factor": _num(d.global_factor), "targets": dict(d.targets),
            "grows": [{k: g.get(k) for k in ("cluster", "host", "role")} for g in plan.get("grows", [])],
            "shrinks": [{k: s.get(k) for k in ("cluster", "node", "role", "mode")} for s in plan.get("shrinks", [])]}


class QuietHandler(WSGIRequestHandler):
    """No access log on stderr (the coordinator's log is for the coordinator); a silent client is
    dropped after :data:`REQUEST_TIMEOUT_S`."""

    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass


def make_app(store: Store, counters: dict[str, float], metrics_app: Callable | None = None, *,
             dashboard: bool = True, web_ui: Mapping[str, str | None] | None = None,
             api: Callable | None = None) -> Callable:
    """The WSGI application: the dashboard's routes and ``/metrics``; ``api``: the teams' API app
    (:class:`fawkes.coordinator.api_http.ApiApp`) for ``/api/v1/`` (None: not served)."""
    env = Environment(loader=PackageLoader("fawkes.coordinator", ASSETS), autoescape=select_autoescape(["j2", "html"]))
    static = {name: (resources.files("fawkes.coordinator").joinpath(ASSETS, name).read_bytes(), ctype)
              for name, ctype in STATIC.items()}
    views = DecisionViews()

    def reply(start_response, status: str, ctype: str, body: bytes, method: str, extra: Iterable = ()) -> list[bytes]:
        start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body))),
                                ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"), *extra])
        return [b"" if method == "HEAD" else body]

    def app(environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        if api is not None and path.startswith("/api/v1/"):
            return api(environ, start_response)
        if method not in ("GET", "HEAD"):
            return reply(start_response, "405 Method Not Allowed", "text/plain; charset=utf-8",
                         f"{method} not allowed: this server is read-only (GET, HEAD)\n".encode(), method,
                         [("Allow", "GET, HEAD")])
        if path == "/metrics" and metrics_app is not None:
            body = metrics_app({**environ, "REQUEST_METHOD": "GET"}, start_response)  # it refuses HEAD
            return [b""] if method == "HEAD" else body
        if dashboard and path in ("/", "/dashboard"):
            html = env.get_template("index.html.j2").render(refresh_s=REFRESH_S, state_url=store.display_url)
            return reply(start_response, "200 OK", "text/html; charset=utf-8", html.encode(), method,
                         [("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")])
        if dashboard and path == "/api/state":
            try:
                body = state_json(store, views, counters=counters, web_ui=web_ui)
            except FawkesError as exc:  # the state is busy or gone: the page says so and tries again
                return reply(start_response, "503 Service Unavailable", "application/json",
                             json.dumps({"error": str(exc)}).encode(), method)
            return reply(start_response, "200 OK", "application/json", body, method)
        if dashboard and path.startswith("/static/") and path[len("/static/"):] in static:
            body, ctype = static[path[len("/static/"):]]
            return reply(start_response, "200 OK", ctype, body, method)
        return reply(start_response, "404 Not Found", "text/plain; charset=utf-8",
                     f"not found: {path}\n".encode(errors="replace"), method)

    return app


def reserve_server(bind: str, port: int, *, tls: tuple[str, str] | None = None):
    """The HTTP server bound to ``bind:port`` (port 0: any free one), not serving yet: the
    coordinator takes its port before it writes anything (a port in use is refused first).
    ``tls``: (certificate file, key file), PEM: the server speaks https only.
    Raises OSError when the address cannot be bound or the certificate not loaded."""
    context = None
    if tls is not None:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(*tls)

    class Server(ThreadingWSGIServer):
        address_family = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

        def get_request(self):
            conn, addr = super().get_request()
            if context is not None:  # the handshake happens in the connection's own thread (finish_request)
                conn = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            return conn, addr

        def finish_request(self, request, client_address):
            if context is not None:
                request.settimeout(REQUEST_TIMEOUT_S)
                try:
                    request.do_handshake()
                except (OSError, ValueError):  # not TLS, too slow, gone: drop it quietly
                    return
            super().finish_request(request, client_address)

    return make_server(bind, port, None, Server, handler_class=QuietHandler)


def start_server(store: Store, counters: dict, metrics_app: Callable | None, bind: str, port: int, *,
                 dashboard: bool = True, server=None, web_ui: Mapping[str, str | None] | None = None,
                 api: Callable | None = None):
    """Serve :func:`make_app` on ``bind:port`` (port 0: any free one), or on the ``server`` of
    :func:`reserve_server`, from a daemon thread; return (server, thread, port).  Threaded, as
    prometheus_client's own server."""
    if server is None:
        server = reserve_server(bind, port)
    server.set_app(make_app(store, counters, metrics_app, dashboard=dashboard, web_ui=web_ui, api=api))
    thread = threading.Thread(target=server.serve_forever, name="fawkes-http", daemon=True)
    thread.start()
    host = f"[{bind}]" if ":" in bind else bind
    log.info("serving http://%s:%d/metrics%s%s", host, server.server_port,
             f" and the dashboard at http://{host}:{server.server_port}/" if dashboard else "",
             " and the teams' API under /api/v1/" if api is not None else "")
    return server, thread, server.server_port
