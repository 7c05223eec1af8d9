"""The teams' HTTP API under ``/api/v1/``, served next to ``/metrics`` and the dashboard when the config
says ``api: {enabled: true}`` (``docs/api.md``).

Every request carries ``Authorization: Bearer SECRET`` (a token from ``fawkes token create``); the token
names a team, its scopes and its clusters.  In order, a request is: authenticated (401: unknown,
revoked, expired; failed attempts are rate-limited per client address), rate-limited per token (429
with ``Retry-After``), routed (404, 405), its body read within ``api.max_body_bytes`` (413) and checked
field by field by the same ``fawkes`` command options and store checks as the command line (400
naming the field), its cluster checked against the token (403), and only then carried out through the
store.  A refused request writes nothing but its audit row: every mutating request made with a valid
token is audited (who, what, when, result).

Routes (JSON in, JSON out):

========  ==============================  =========  ===========================================
method    path                            scope      what
========  ==============================  =========  ===========================================
GET       /api/v1/whoami                  (any)      the token's team, scopes, clusters, expiry
GET       /api/v1/status                  status     ``fawkes status`` of the token's clusters
GET       /api/v1/jobs[?cluster=&limit=]  status     ``fawkes jobs`` of the token's clusters
POST      /api/v1/clusters                request    ``fawkes cluster request``
POST      /api/v1/clusters/NAME/release   release    ``fawkes cluster release NAME``
POST      /api/v1/clusters/NAME/wake      request    ``fawkes cluster wake NAME`` (scale to zero)
POST      /api/v1/jobs                    submit     ``fawkes submit``
POST      /api/v1/jobs/cancel             cancel     ``fawkes jobs cancel``
========  ==============================  =========  ===========================================
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from fawkes.coordinator.api_body import ApiError, only, option, options, read_json
from fawkes.coordinator.ratelimit import RateLimit
from fawkes.errors import FawkesError
from fawkes.store import Store
from fawkes.store import validate
from fawkes.store.schema import ApiToken

log = logging.getLogger("fawkes.coordinator.api")

PREFIX = "/api/v1/"
#: how often a token's last use is written (seconds): not at every request
TOUCH_EVERY_S = 60.0
_RELEASE = re.compile(r"^/api/v1/clusters/([^/]+)/release$")
_WAKE = re.compile(r"^/api/v1/clusters/([^/]+)/wake$")
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
            411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


def allowed(token: ApiToken, scope: str, cluster: str | None) -> bool:
    """May ``token`` do ``scope`` on ``cluster`` (None: on no cluster in particular)?"""
    if "admin" in token.scopes:
        return True
    return scope in token.scopes and (cluster is None or cluster in token.clusters)


def _store_status(exc: FawkesError) -> int:
    from fawkes.store.lease import LeaseLost

    if isinstance(exc, LeaseLost) or str(exc).startswith("state "):  # no longer the leader; the state busy or gone
        return 503
    msg = str(exc)
    if "no such" in msg or "not found" in msg:
        return 404
    if "already" in msg or "changed concurrently" in msg or "not accepting" in msg or "not hibernating" in msg:
        return 409
    return 400


class ApiApp:
    """The WSGI application of ``/api/v1/`` (``api``: a :class:`fawkes.config.ApiConfig`)."""

    def __init__(self, store: Store, api, *, clock: Callable[[], float] = time.monotonic):
        from fawkes.cli.cluster import release, request
        from fawkes.cli.jobs import cancel, submit

        self.store = store
        self.max_body = api.max_body_bytes
        self.per_token = RateLimit(api.rate_per_min, api.burst, clock)
        self.per_address = RateLimit(api.rate_per_min, api.burst, clock)  # failed authentications
        self.commands = {"request": request, "release": release, "submit": submit, "cancel": cancel}
        self._touched: dict[int, float] = {}

    # ------------------------------------------------------------------ WSGI
    def __call__(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/")
        try:
            status, body = self.handle(environ, method, path)
            headers: tuple[tuple[str, str], ...] = ()
        except ApiError as exc:
            status, body, headers = exc.status, {"error": exc.message}, exc.headers
        except Exception:  # never a traceback to the client; the log has it
            log.exception("API %s %s failed", method, path)
            status, body, headers = 500, {"error": "internal error (see the coordinator's log)"}, ()
        data = json.dumps(body, allow_nan=False, default=str).encode()
        start_response(f"{status} {_REASONS.get(status, '')}", [
            ("Content-Type", "application/json"), ("Content-Length", str(len(data))),
            ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"), *headers])
        return [b"" if method == "HEAD" else data]

    def handle(self, environ, method: str, path: str) -> tuple[int, Any]:
        token = self._authenticate(environ)
        wait = self.per_token.take(("token", token.id))
        if wait > 0:
            raise ApiError(429, f"token {token.id}: rate limit exceeded, retry in {math.ceil(wait)}s",
                           (("Retry-After", str(math.ceil(wait))),))
        self._touch(token)
        if method in ("GET", "HEAD"):
            return self._read(token, environ, path)
        if method != "POST":
            raise ApiError(405, f"{method} not allowed (GET, POST)", (("Allow", "GET, HEAD, POST"),))
        action, handler = self._route(path)
        audit = {"actor": f"team {token.team} (token {token.id})", "via": "api", "action": action}
        target: list[str | None] = [None]
        try:
            status, body = handler(token, environ, path, target)
        except ApiError as exc:
            result = "refused" if exc.status in (403, 409) else "invalid"
            self._audit(audit, target[0], result, exc.status, exc.message)
            raise
        except FawkesError as exc:
            code = _store_status(exc)
            self._audit(audit, target[0], {409: "refused", 503: "error"}.get(code, "invalid"), code, str(exc))
            raise ApiError(code, str(exc)) from None
        except Exception as exc:
            self._audit(audit, target[0], "error", 500, type(exc).__name__)
            raise
        self._audit(audit, target[0], "ok", status, body.get("message", ""))
        return status, body

    # ------------------------------------------------------------------ authentication
    def _authenticate(self, environ) -> ApiToken:
        address = environ.get("REMOTE_ADDR", "?")
        header = str(environ.get("HTTP_AUTHORIZATION") or "")
        scheme, _, secret = header.partition(" ")
        try:
            if scheme.lower() != "bearer" or not secret.strip():
                raise FawkesError("token: missing (Authorization: Bearer TOKEN)")
            return self.store.authenticate(secret.strip())
        except FawkesError as exc:
            wait = self.per_address.take(("address", address))
            log.warning("API: refused a request from %s: %s", address, exc)  # never the secret
            if wait > 0:
                raise ApiError(429, f"too many failed authentications from {address}, retry in "
                                    f"{math.ceil(wait)}s", (("Retry-After", str(math.ceil(wait))),)) from None
            raise ApiError(401, str(exc), (("WWW-Authenticate", 'Bearer realm="fawkes"'),)) from None

    def _touch(self, token: ApiToken) -> None:
        now = time.monotonic()
        if now - self._touched.get(token.id, -math.inf) >= TOUCH_EVERY_S:
            self._touched[token.id] = now
            try:
                self.store.touch_token(token.id)
            except FawkesError as exc:  # a busy state must not refuse the request
                log.warning("API: token %d: last use not recorded: %s", token.id, exc)

    def _audit(self, row: dict, target: str | None, result: str, status: int, detail: str) -> None:
        try:
            self.store.record_audit(**row, target=target, result=result, status=status, detail=detail)
        except FawkesError as exc:
            log.error("API: audit of %s %s not recorded: %s", row["action"], target, exc)

    # ------------------------------------------------------------------ reads
    def _read(self, token: ApiToken, environ, path: str) -> tuple[int, Any]:
        if path == "/api/v1/whoami":
            return 200, {"id": token.id, "team": token.team, "scopes": token.scopes,
                         "clusters": token.clusters if "admin" not in token.scopes else "all",
                         "expires_at": token.expires_at}
        if path == "/api/v1/status":
            self._need(token, "status", None)
            st = self.store.status()
            st["clusters"] = [c for c in st["clusters"] if allowed(token, "status", c["name"])]
            return 200, _finite(st)
        if path == "/api/v1/jobs":
            self._need(token, "status", None)
            try:
                q = parse_qs(environ.get("QUERY_STRING", ""), max_num_fields=4)
            except ValueError:
                raise ApiError(400, "query: too many parameters (known: cluster, limit)") from None
            cluster = _one(q, "cluster")
            limit = _one(q, "limit")
            if cluster is not None:
                validate.name("cluster", cluster)
                self._need(token, "status", cluster)
            if limit is not None and not (limit.isdigit() and 1 <= int(limit) <= 10_000):
                raise ApiError(400, f"limit: must be an integer in 1..10000, got {limit[:40]!r}")
            names = {c.id: c.name for c in self.store.list_clusters()}
            rows = self.store.list_jobs(cluster, limit=int(limit) if limit else None)
            return 200, {"jobs": [_finite(j.model_dump(mode="json")) | {"cluster": names.get(j.cluster_id)}
                                  for j in rows if allowed(token, "status", names.get(j.cluster_id))]}
        if path.startswith(PREFIX):
            raise ApiError(404, f"not found: {path[:80]}")
        raise ApiError(404, "not found")

    # ------------------------------------------------------------------ writes
    def _route(self, path: str):
        if path == "/api/v1/clusters":
            return "cluster.request", self._request
        if _RELEASE.match(path):
            return "cluster.release", self._release
        if _WAKE.match(path):
            return "cluster.wake", self._wake
        if path == "/api/v1/jobs":
            return "job.submit", self._submit
        if path == "/api/v1/jobs/cancel":
            return "job.cancel", self._cancel
        raise ApiError(404, f"not found: {path[:80]}")

    def _need(self, token: ApiToken, scope: str, cluster: str | None) -> None:
        if not allowed(token, scope, cluster):
            what = f"cluster {cluster}" if cluster is not None else "this"
            raise ApiError(403, f"team {token.team} (token {token.id}): no {scope} scope on {what}")

    def _cluster_field(self, token: ApiToken, scope: str, field: str, value: Any, target: list) -> str:
        if value is None:
            raise ApiError(400, f"{field}: required")
        if not isinstance(value, str):
            raise ApiError(400, f"{field}: must be a string")
        try:
            validate.name(field, value)
        except FawkesError as exc:
            raise ApiError(400, str(exc)) from None
        target[0] = value
        self._need(token, scope, value)
        return value

    def _request(self, token, environ, path, target) -> tuple[int, Any]:
        body = read_json(environ, self.max_body)
        only(body, ("name", "framework", "min_core", "input", "expected_duration", "deadline"),
             ("name", "framework", "min_core"))
        cmd = self.commands["request"]
        name = self._cluster_field(token, "request", "name", body.get("name"), target)
        c = self.store.request_cluster(
            option(cmd, "name", "name", name), framework=option(cmd, "framework", "framework", body["framework"]),
            min_core=option(cmd, "min_core", "min_core", body["min_core"]),
            input_path=option(cmd, "input_path", "input", body.get("input")),
            expected_duration_s=option(cmd, "expected", "expected_duration", body.get("expected_duration")),
            deadline_s=option(cmd, "deadline", "deadline", body.get("deadline")))
        return 201, {"message": f"cluster {c.name} requested (min_core {c.min_core})",
                     "cluster": _finite(c.model_dump(mode="json"))}

    def _release(self, token, environ, path, target) -> tuple[int, Any]:
        body = read_json(environ, self.max_body) if environ.get("CONTENT_LENGTH") not in (None, "", "0") else {}
        only(body, ())
        name = self._cluster_field(token, "release", "cluster", _RELEASE.match(path).group(1), target)
        c = self.store.request_release(name)
        return 200, {"message": f"cluster {c.name}: " + ("withdrawn from the queue" if c.state == "released"
                                                         else "release requested"),
                     "cluster": _finite(c.model_dump(mode="json"))}

    def _wake(self, token, environ, path, target) -> tuple[int, Any]:
        body = read_json(environ, self.max_body) if environ.get("CONTENT_LENGTH") not in (None, "", "0") else {}
        only(body, ())
        name = self._cluster_field(token, "request", "cluster", _WAKE.match(path).group(1), target)
        c = self.store.wake_cluster(name)
        return 200, {"message": f"cluster {c.name}: woken, requested again (min_core {c.min_core})",
                     "cluster": _finite(c.model_dump(mode="json"))}

    def _submit(self, token, environ, path, target) -> tuple[int, Any]:
        body = read_json(environ, self.max_body)
        only(body, ("cluster", "app", "input", "input_bytes", "ref_runtime"), ("cluster", "app"))
        cmd = self.commands["submit"]
        cluster = self._cluster_field(token, "submit", "cluster", body.get("cluster"), target)
        app = options(cmd, "app", "app", body["app"])
        j = self.store.submit_job(cluster, app, input_path=option(cmd, "input_path", "input", body.get("input")),
                                  input_bytes=option(cmd, "input_bytes", "input_bytes", body.get("input_bytes")),
                                  ref_runtime=option(cmd, "ref_runtime", "ref_runtime", body.get("ref_runtime")))
        target[0] = f"{cluster} job {j.id}"
        return 201, {"message": f"job {j.id} queued on {cluster}", "job": _finite(j.model_dump(mode="json"))}

    def _cancel(self, token, environ, path, target) -> tuple[int, Any]:
        body = read_json(environ, self.max_body)
        only(body, ("ids",), ("ids",))
        ids = options(self.commands["cancel"], "job_ids", "ids", body["ids"])
        if not ids:
            raise ApiError(400, "ids: name at least one job")
        target[0] = "jobs " + ",".join(map(str, ids))
        names = {c.id: c.name for c in self.store.list_clusters()}
        for i in ids:
            job = self.store.get_job(i)
            self._need(token, "cancel", names.get(job.cluster_id))
        done = self.store.cancel_jobs(ids)
        return 200, {"message": "; ".join(f"job {j.id}: {o}" for j, o in done),
                     "jobs": [_finite(j.model_dump(mode="json")) | {"outcome": o} for j, o in done]}


def _one(q: dict[str, list[str]], key: str) -> str | None:
    for k in q:
        if k not in ("cluster", "limit"):
            raise ApiError(400, f"{k[:40]!r}: unknown query parameter (known: cluster, limit)")
    vals = q.get(key)
    if vals is None:
        return None
    if len(vals) != 1:
        raise ApiError(400, f"{key}: given more than once")
    return vals[0]


def _finite(obj: Any) -> Any:
    from fawkes.cli.status import finite_json

    return finite_json(obj)
