"""The teams' HTTP API (issue 27): real HTTP against the coordinator's server on 127.0.0.1 (an
ephemeral port), over real SQLite and PostgreSQL stores.  A team cannot touch another team's cluster,
an expired or revoked token is refused, bad bodies get one 4xx naming the field and change nothing,
secrets are stored hashed and never logged, tokens are rate-limited, a slow client holds no worker."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import socket
import time

import pytest

from fawkes.config import ApiConfig
from fawkes.coordinator import dashboard
from fawkes.coordinator.metrics_http import serve
from fawkes.mechanism.model import ClusterState
from fawkes.store import JobState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401


def fill(store: Store) -> Store:
    """Two teams' clusters, etl (active, a queued job) and bi (active, a queued job)."""
    store.register_framework("lab", "spark", spark_home="/opt/spark")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 2} for i in range(1, 5)])
    for name in ("etl", "bi"):
        store.request_cluster(name, framework="lab", min_core=1)
        store.transition_cluster(name, ClusterState.DEPLOYING)
        store.transition_cluster(name, ClusterState.ACTIVE)
        store.submit_job(name, ["app.py", name])
    return store


def snapshot(store: Store) -> dict:
    """Everything a request could change but its audit row."""
    return {"clusters": [(c.name, c.state, c.min_core, c.input_path, c.release_requested_at)
                         for c in store.list_clusters()],
            "jobs": [(j.id, j.cluster_id, j.state, j.argv, j.input_path, j.cancel_requested_at)
                     for j in store.list_jobs()],
            "tokens": [(t.id, t.revoked_at) for t in store.list_tokens()]}


class Api:
    """A running server with the API on ``store``, and a small client."""

    def __init__(self, store: Store, **cfg):
        self.store = store
        self.server, _, self.port = serve(store, {}, "127.0.0.1", 0, api=ApiConfig(enabled=True, **cfg))

    def call(self, method: str, path: str, body=None, *, token: str | None = None, raw: bytes | None = None,
             headers: dict | None = None) -> tuple[int, dict, dict]:
        # the side run gets only the CPU the lab runs leave: 30 s ran out once under a load of 29
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=90)
        hdrs = {"Authorization": f"Bearer {token}"} if token else {}
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            text = resp.read()
            return resp.status, json.loads(text) if text else {}, dict(resp.getheaders())
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api(store):
    a = Api(fill(store))
    yield a
    a.close()


@pytest.fixture
def sqlite_api(tmp_path):
    """The API on SQLite only: for the many bad-input cases, which the server refuses before the store is
    asked (the PostgreSQL variants of the other tests show the store behaves alike; a database each for
    some 40 cases cost minutes of the suite)."""
    s = Store(f"sqlite:///{tmp_path / 'state.db'}", clock=Clock())
    a = Api(fill(s))
    yield a
    a.close()
    s.close()


def token(store: Store, team: str, scopes: str, clusters: str = "", expires_s: float | None = 3600.0) -> str:
    return store.create_token(team, scopes.split(","), [c for c in clusters.split(",") if c],
                              expires_s=expires_s)[1]


ALL = "submit,cancel,status,request,release"


# ---------------------------------------------------------------- teams and scopes
def test_a_team_cannot_touch_another_teams_cluster(api):
    etl = token(api.store, "etl-team", ALL, "etl,etl2")
    bi_job = next(j.id for j in api.store.list_jobs("bi"))
    before = snapshot(api.store)
    for method, path, body in [
        ("POST", "/api/v1/jobs", {"cluster": "bi", "app": ["app.py"]}),
        ("POST", "/api/v1/clusters/bi/release", None),
        ("POST", "/api/v1/jobs/cancel", {"ids": [bi_job]}),
        ("POST", "/api/v1/clusters", {"name": "bi2", "framework": "lab", "min_core": 1}),
        ("GET", "/api/v1/jobs?cluster=bi", None),
    ]:
        status, out, _ = api.call(method, path, body, token=etl)
        assert status == 403, (path, out)
        assert out["error"].startswith("team etl-team (token 1): no ") and "\n" not in out["error"]
    assert snapshot(api.store) == before
    # its own clusters: allowed
    status, out, _ = api.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": ["wc.py", "{input}"]}, token=etl)
    assert status == 201 and out["job"]["argv"] == ["wc.py", "{input}"]
    assert api.store.get_job(out["job"]["id"]).state == JobState.QUEUED
    status, out, _ = api.call("POST", "/api/v1/clusters", {"name": "etl2", "framework": "lab", "min_core": 2},
                              token=etl)
    assert status == 201 and api.store.get_cluster("etl2").state == ClusterState.REQUESTED
    # what it sees: its clusters and jobs only
    status, out, _ = api.call("GET", "/api/v1/status", token=etl)
    assert status == 200 and [c["name"] for c in out["clusters"]] == ["etl", "etl2"]
    status, out, _ = api.call("GET", "/api/v1/jobs", token=etl)
    assert {j["cluster"] for j in out["jobs"]} == {"etl"}
    # the audit trail shows the refusals and the successes, with the team
    rows = [(r.actor, r.action, r.target, r.result, r.status) for r in api.store.audit()]
    assert rows[:4] == [("team etl-team (token 1)", "job.submit", "bi", "refused", 403),
                        ("team etl-team (token 1)", "cluster.release", "bi", "refused", 403),
                        ("team etl-team (token 1)", "job.cancel", f"jobs {bi_job}", "refused", 403),
                        ("team etl-team (token 1)", "cluster.request", "bi2", "refused", 403)]
    assert [r[3] for r in rows[4:]] == ["ok", "ok"]


def test_scopes_limit_what_a_team_does_and_admin_does_all(api):
    reader = token(api.store, "etl-team", "status", "etl")
    before = snapshot(api.store)
    status, out, _ = api.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": ["a"]}, token=reader)
    assert status == 403 and "no submit scope on cluster etl" in out["error"]
    assert snapshot(api.store) == before
    admin = token(api.store, "ops", "admin")
    status, out, _ = api.call("GET", "/api/v1/whoami", token=admin)
    assert out["clusters"] == "all" and out["team"] == "ops"
    ids = [j.id for j in api.store.list_jobs()]
    status, out, _ = api.call("POST", "/api/v1/jobs/cancel", {"ids": ids}, token=admin)
    assert status == 200 and [j["outcome"] for j in out["jobs"]] == ["cancelled", "cancelled"]
    status, out, _ = api.call("POST", "/api/v1/clusters/bi/release", None, token=admin)
    assert status == 200 and api.store.get_cluster("bi").release_requested_at is not None


def _hibernating(store: Store, name: str) -> None:
    """``name`` requested and taken into hibernation as the coordinator does (no job, no node)."""
    store.request_cluster(name, framework="lab", min_core=1)
    for to in (ClusterState.DEPLOYING, ClusterState.ACTIVE, ClusterState.SAVING):
        store.transition_cluster(name, to)
    store.record_saved_output(name, {"nothing": "no /output"}, "nothing to save")
    store.transition_cluster(name, ClusterState.HIBERNATING, "hibernated")


def test_a_team_wakes_its_own_hibernating_cluster_only(api):
    """``POST /api/v1/clusters/NAME/wake`` (``fawkes cluster wake``, scope request): another team's cluster
    403, a cluster that does not hibernate 409, a token without the request scope 403, nothing changed;
    its own: woken (a new incarnation requested to restore the saved output)."""
    _hibernating(api.store, "hib1")
    _hibernating(api.store, "hib2")
    etl = token(api.store, "etl-team", ALL, "etl,hib1")
    reader = token(api.store, "etl-team", "status,submit", "hib1")
    before = snapshot(api.store)
    for tok, path, status_, msg in [
        (etl, "/api/v1/clusters/hib2/wake", 403, "no request scope on cluster hib2"),
        (reader, "/api/v1/clusters/hib1/wake", 403, "no request scope on cluster hib1"),
        (etl, "/api/v1/clusters/etl/wake", 409, "cluster etl: active, not hibernating"),
        (etl, "/api/v1/clusters/nosuch/wake", 403, "no request scope on cluster nosuch"),
    ]:
        status, out, _ = api.call("POST", path, None, token=tok)
        assert (status, "\n" in out["error"]) == (status_, False) and msg in out["error"], (path, out)
    status, out, _ = api.call("POST", "/api/v1/clusters/hib1/wake", {"x": 1}, token=etl)
    assert status == 400 and "x" in out["error"]
    assert snapshot(api.store) == before
    old = api.store.get_cluster("hib1")
    status, out, _ = api.call("POST", "/api/v1/clusters/hib1/wake", None, token=etl)
    assert status == 200 and out["message"] == "cluster hib1: woken, requested again (min_core 1)"
    new = api.store.get_cluster("hib1")
    assert new.id != old.id and new.state == ClusterState.REQUESTED and json.loads(new.restore_from) == {
        "nothing": "no /output"}
    status, out, _ = api.call("POST", "/api/v1/clusters/hib1/wake", None, token=etl)  # twice: not hibernating now
    assert status == 409 and "requested, not hibernating" in out["error"]
    rows = [(r.action, r.target, r.result, r.status) for r in api.store.audit()]
    assert rows[0] == ("cluster.wake", "hib2", "refused", 403) and ("cluster.wake", "hib1", "ok", 200) in rows


# ---------------------------------------------------------------- tokens
def test_expired_revoked_unknown_and_missing_tokens_are_refused(api):
    short = token(api.store, "etl-team", ALL, "etl", expires_s=60)
    revoked = token(api.store, "etl-team", ALL, "etl")
    assert api.call("GET", "/api/v1/whoami", token=short)[0] == 200
    api.store.revoke_token(2)
    api.store.clock.advance(61)
    before = snapshot(api.store)
    body = {"cluster": "etl", "app": ["app.py"]}
    cases = [(short, "token 1: expired"), (revoked, "token 2: revoked"),
             ("fawkes_" + "A" * 43, "token: unknown"), ("Basic xyz", "token: not a fawkes token"), (None, "missing")]
    for secret, why in cases:
        status, out, headers = api.call("POST", "/api/v1/jobs", body, token=secret)
        assert status == 401 and why in out["error"], (secret, out)
        assert headers["WWW-Authenticate"].startswith("Bearer")
    assert snapshot(api.store) == before
    assert api.store.audit() == []  # nobody to audit: refused before anything


def test_tokens_are_stored_hashed_and_their_secret_never_logged(api, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    t, secret = api.store.create_token("etl-team", ["submit"], ["etl"], expires_s=600)
    assert secret.startswith("fawkes_") and len(secret) == len("fawkes_") + 43
    assert t.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    assert api.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": ["a"]}, token=secret)[0] == 201
    api.store.revoke_token(t.id)
    assert api.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": ["a"]}, token=secret)[0] == 401
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    assert api.call("GET", "/api/v1/whoami", token=wrong)[0] == 401
    assert secret not in caplog.text and wrong not in caplog.text
    assert "refused a request from 127.0.0.1" in caplog.text
    # every text and JSON column of every table, as the database returns it
    from sqlalchemy import inspect, text
    dump = []
    with api.store.engine.connect() as c:
        for table in inspect(c).get_table_names():
            dump += [str(tuple(r)) for r in c.execute(text(f'SELECT * FROM "{table}"'))]
    blob = "\n".join(dump)
    assert secret not in blob and secret[7:] not in blob and t.secret_sha256 in blob
    db = api.store.engine.url.database
    if api.store.engine.dialect.name == "sqlite":  # the file itself, and its write-ahead log
        for suffix in ("", "-wal"):
            try:
                raw = open(db + suffix, "rb").read()
            except FileNotFoundError:
                continue
            assert secret[7:].encode() not in raw


def test_token_input_is_checked_in_one_line(store):
    from fawkes.errors import FawkesError

    cases = [(("t\n", ["submit"], ["etl"], 60), "team: invalid name"),
             (("t", ["submit", "root"], ["etl"], 60), "scope: must be one or more"),
             (("t", [], ["etl"], 60), "scope: must be one or more"),
             (("t", ["submit"], [], 60), "clusters: name the clusters"),
             (("t", ["submit"], ["e\0tl"], 60), "clusters: invalid name"),
             (("t", ["submit"], ["etl"], float("nan")), "expires: must be"),
             (("t", ["submit"], ["etl"], float("inf")), "expires: must be"),
             (("t", ["submit"], ["etl"], -5), "expires: must be"),
             (("t", ["submit"], ["etl"], 10**30), "expires: must be")]
    for (team, scopes, clusters, exp), msg in cases:
        with pytest.raises(FawkesError, match=f"^{msg}") as e:
            store.create_token(team, scopes, clusters, expires_s=exp)
        assert "\n" not in str(e.value)
    assert store.list_tokens() == []


# ---------------------------------------------------------------- bodies
BAD_JOBS = [
    ({"cluster": "etl", "app": ["a"], "ref_runtime": float("nan")}, "ref_runtime"),
    ({"cluster": "etl", "app": ["a"], "ref_runtime": float("inf")}, "ref_runtime"),
    ({"cluster": "etl", "app": ["a"], "ref_runtime": -1}, "ref_runtime"),
    ({"cluster": "etl", "app": ["a"], "ref_runtime": 10**30}, "ref_runtime"),
    ({"cluster": "etl", "app": ["a"], "input_bytes": -1}, "input_bytes"),
    ({"cluster": "etl", "app": ["a"], "input_bytes": 10**30}, "input_bytes"),
    ({"cluster": "etl", "app": ["a"], "input_bytes": 1.5}, "input_bytes"),
    ({"cluster": "etl", "app": ["a"], "input_bytes": True}, "input_bytes"),
    ({"cluster": "etl", "app": ["a"], "input": "/in\nput"}, "input"),
    ({"cluster": "etl", "app": ["a"], "input": "/in\0put"}, "input"),
    ({"cluster": "etl", "app": ["a\0b"]}, "app"),
    ({"cluster": "etl", "app": []}, "app"),
    ({"cluster": "etl", "app": "a"}, "app"),
    ({"cluster": "etl", "app": [1]}, "app[0]"),
    ({"cluster": "et\nl", "app": ["a"]}, "cluster"),
    ({"cluster": "etl\0", "app": ["a"]}, "cluster"),
    ({"cluster": 7, "app": ["a"]}, "cluster"),
    ({"app": ["a"]}, "cluster"),
    ({"cluster": "etl", "app": ["a"], "shell": "rm -rf /"}, "shell"),
]
BAD_CLUSTERS = [
    ({"name": "etl2", "framework": "lab", "min_core": float("nan")}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": float("inf")}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": -1}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": 0}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": 10**30}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": "2; reboot"}, "min_core"),
    ({"name": "etl2", "framework": "lab", "min_core": 1, "deadline": float("nan")}, "deadline"),
    ({"name": "etl2", "framework": "lab", "min_core": 1, "deadline": -3}, "deadline"),
    ({"name": "etl2", "framework": "lab", "min_core": 1, "expected_duration": 1e300}, "expected_duration"),
    ({"name": "etl2", "framework": "la\nb", "min_core": 1}, "framework"),
    ({"name": "etl2", "framework": "lab", "min_core": 1, "input": "/x\n/y"}, "input"),
    ({"name": "etl2\n", "framework": "lab", "min_core": 1}, "name"),
]


@pytest.mark.parametrize("path, body, field", [("/api/v1/jobs", b, f) for b, f in BAD_JOBS]
                         + [("/api/v1/clusters", b, f) for b, f in BAD_CLUSTERS])
def test_a_bad_field_gets_one_400_naming_it_and_changes_nothing(sqlite_api, path, body, field):
    api = sqlite_api
    secret = token(api.store, "etl-team", ALL, "etl,etl2")
    before = snapshot(api.store)
    raw = json.dumps(body).encode()  # NaN and Infinity as Python's json writes them
    status, out, _ = api.call("POST", path, raw=raw, token=secret)
    assert status == 400, out
    assert out["error"].split(":")[0] in (field, repr(field)) and "\n" not in out["error"], out
    assert snapshot(api.store) == before


@pytest.mark.parametrize("raw, ctype, status, msg", [
    (b"{not json", "application/json", 400, "body: not JSON"),
    (b"[1, 2]", "application/json", 400, "body: must be a JSON object"),
    (b'{"cluster": "etl", "cluster": "bi", "app": ["a"]}', "application/json", 400, "body: not JSON (duplicate"),
    (b"\xff\xfe", "application/json", 400, "body: not UTF-8"),
    (b'{"cluster": "etl", "app": ["a"], "input": "/x\\ud800"}', "application/json", 400, "input: not valid Unicode"),
    (b'{"cluster": "etl", "app": ["\\udfff"]}', "application/json", 400, "app: not valid Unicode"),
    (b'{"cluster": "etl", "app": ["a"]}', "text/plain", 415, "body: Content-Type"),
    (b"[" * 100_000, "application/json", 413, "body: 100000 bytes is more than the limit of 65536"),
])
def test_malformed_bodies_get_one_4xx_and_change_nothing(sqlite_api, raw, ctype, status, msg):
    api = sqlite_api
    secret = token(api.store, "etl-team", ALL, "etl")
    before = snapshot(api.store)
    got, out, _ = api.call("POST", "/api/v1/jobs", raw=raw, token=secret, headers={"Content-Type": ctype})
    assert got == status and out["error"].startswith(msg), out
    assert snapshot(api.store) == before


def test_a_10_mb_body_is_refused_unread(api):
    secret = token(api.store, "etl-team", ALL, "etl")
    before = snapshot(api.store)
    with socket.create_connection(("127.0.0.1", api.port), timeout=30) as s:
        s.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret.encode()
                  + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(10 << 20).encode()
                  + b"\r\n\r\n" + b"{" + b" " * 65536)
        t0 = time.monotonic()
        head = b""
        while chunk := s.recv(4096):  # the answer, then the server closes the connection
            head += chunk
    assert head.startswith(b"HTTP/1.0 413 ") and b"more than the limit of 65536" in head
    assert time.monotonic() - t0 < 5
    assert snapshot(api.store) == before
    assert [(r.result, r.status) for r in api.store.audit()] == [("invalid", 413)]


def test_hostile_strings_are_stored_as_data(api):
    secret = token(api.store, "etl-team", ALL, "etl")
    app = ["app.py", "$(touch /tmp/fawkes-api-pwned)", "`id`; rm -rf /", "a\nb", "'\"\\"]
    status, out, _ = api.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": app}, token=secret)
    assert status == 201 and api.store.get_job(out["job"]["id"]).argv == app


# ---------------------------------------------------------------- rate limits, slow clients
def test_rate_limit_per_token_answers_429(store):
    a = Api(fill(store), rate_per_min=60, burst=3)
    try:
        one, other = token(store, "etl-team", "status", "etl"), token(store, "bi-team", "status", "bi")
        got = [a.call("GET", "/api/v1/whoami", token=one)[0] for _ in range(3)]
        status, out, headers = a.call("GET", "/api/v1/whoami", token=one)
        assert got == [200, 200, 200] and status == 429 and int(headers["Retry-After"]) >= 1
        assert "rate limit" in out["error"]
        before = snapshot(store)
        assert a.call("POST", "/api/v1/jobs", {"cluster": "etl", "app": ["a"]}, token=one)[0] == 429
        assert snapshot(store) == before
        assert a.call("GET", "/api/v1/whoami", token=other)[0] == 200  # another token has its own bucket
        # failed authentications are limited per address
        bad = [a.call("GET", "/api/v1/whoami", token="fawkes_" + "x" * 43)[0] for _ in range(4)]
        assert bad == [401, 401, 401, 429]
    finally:
        a.close()


def test_a_slow_client_holds_no_worker(api, monkeypatch):
    monkeypatch.setattr(dashboard.QuietHandler, "timeout", 1.0)
    secret = token(api.store, "etl-team", ALL, "etl")
    slow = [socket.create_connection(("127.0.0.1", api.port), timeout=10) for _ in range(20)]
    try:
        for s in slow:
            s.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nContent-Len")  # and then nothing
        t0 = time.monotonic()
        assert api.call("GET", "/api/v1/whoami", token=secret)[0] == 200
        assert time.monotonic() - t0 < 2
        for s in slow:  # each dropped by the server after its timeout, without an answer
            assert s.recv(100) == b""
        assert time.monotonic() - t0 < 8
    finally:
        for s in slow:
            s.close()


def test_the_api_is_off_unless_enabled(store):
    fill(store)
    server, _, port = serve(store, {}, "127.0.0.1", 0)  # no api config
    try:
        secret = token(store, "ops", "admin")
        before = snapshot(store)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/api/v1/jobs", body=b'{"cluster": "etl", "app": ["a"]}',
                     headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"})
        assert conn.getresponse().status == 405
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
        assert conn.getresponse().status == 404
        conn.close()
        assert snapshot(store) == before
    finally:
        server.shutdown()
        server.server_close()


def test_audit_rows_are_pruned_with_the_events(store):
    from fawkes.config import RetentionConfig
    from fawkes.coordinator.retention import prune
    from fawkes.mechanism import Settings

    store.record_audit(actor="user a", via="cli", action="token.create", target="t", result="ok")
    store.clock.advance(31 * 86400)
    store.record_audit(actor="user a", via="cli", action="token.revoke", target="t", result="ok")
    report = prune(store, RetentionConfig(), Settings(), store.clock())
    assert report.audit == 1 and "1 audit row(s)" in report.summary()
    assert [r.action for r in store.audit()] == ["token.revoke"]
