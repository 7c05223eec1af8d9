"""The command line with the teams' API (issue 27): ``fawkes token create|list|revoke``, ``fawkes audit``,
and the team commands sent to a real server by ``--url``/``FAWKES_URL`` with the token from
``FAWKES_TOKEN`` or a token file; TLS with a configured certificate.  Real subprocesses, real SQLite."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess

import pytest

from fawkes.config import ApiConfig
from fawkes.coordinator.dashboard import reserve_server
from fawkes.coordinator.metrics_http import serve
from fawkes.mechanism.model import ClusterState
from fawkes.store import Store

try:
    from conftest import run_cli
except ImportError:  # tests/ became a package
    from tests.conftest import run_cli


@pytest.fixture
def state(tmp_path):
    db = tmp_path / "state.db"
    with Store(str(db)) as s:
        s.register_framework("lab", "spark", spark_home="/opt/spark")
        s.sync_hosts([{"name": "h1", "address": "10.0.0.1", "cores": 2}, {"name": "h2", "address": "10.0.0.2",
                                                                           "cores": 2}])
        s.request_cluster("bi", framework="lab", min_core=1)
    return db


@pytest.fixture
def served(state):
    store = Store(str(state))
    server, _, port = serve(store, {}, "127.0.0.1", 0, api=ApiConfig(enabled=True))
    yield store, f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()
    store.close()


def test_token_commands_show_the_secret_once(state):
    env = {"FAWKES_STATE": str(state)}
    r = run_cli("token", "create", "etl-team", "--scope", "submit,status", "--clusters", "etl", "--expires", "7d",
                env=env)
    assert r.returncode == 0, r.stderr
    secret = r.stdout.strip()
    assert secret.startswith("fawkes_") and "\n" not in secret and secret not in r.stderr
    assert "token 1 for team etl-team" in r.stderr and "shown once" in r.stderr
    listed = run_cli("token", "list", "--json", env=env)
    rows = json.loads(listed.stdout)
    assert [(t["id"], t["team"], t["scopes"], t["clusters"]) for t in rows] == [(1, "etl-team", ["submit", "status"],
                                                                                 ["etl"])]
    assert secret not in listed.stdout and secret[7:] not in state.read_bytes().decode("latin-1")
    assert run_cli("token", "revoke", "1", env=env).stdout.strip() == "token 1 of team etl-team: revoked"
    with Store(str(state)) as s:
        assert s.list_tokens()[0].revoked_at is not None
    audit = run_cli("audit", "--since", "1h", "--json", env=env)
    assert [(a["action"], a["target"], a["result"], a["via"]) for a in json.loads(audit.stdout)] == [
        ("token.create", "etl-team", "ok", "cli"), ("token.revoke", "token 1", "ok", "cli")]


@pytest.mark.parametrize("args, msg", [
    (["--scope", "submit,root", "--clusters", "etl"], "scope: must be one or more of"),
    (["--scope", "submit", "--clusters", "etl", "--expires", "nan"], "--expires: must be a duration"),
    (["--scope", "submit", "--clusters", "etl", "--expires", "-5d"], "--expires: must be a duration"),
    (["--scope", "submit", "--clusters", "etl", "--expires", "1" + "0" * 30], "--expires: must be a duration"),
    (["--scope", "submit", "--clusters", "et\nl"], "clusters: invalid name"),
    (["--scope", "submit"], "clusters: name the clusters"),
])
def test_bad_token_input_is_one_line_and_writes_nothing(state, args, msg):
    before = state.read_bytes()
    r = run_cli("token", "create", "etl-team", *args, env={"FAWKES_STATE": str(state)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and msg in r.stderr, r.stderr
    assert state.read_bytes() == before  # the state file as it was
    with Store(str(state)) as s:
        assert s.list_tokens() == [] and s.audit() == []


def test_the_cli_talks_to_the_api_with_url_and_token(served, tmp_path):
    store, url = served
    _, secret = store.create_token("etl-team", ["submit", "status", "request", "release", "cancel"], ["etl"],
                                   expires_s=600)
    env = {"FAWKES_URL": url, "FAWKES_TOKEN": secret, "FAWKES_STATE": str(tmp_path / "nowhere.db")}
    r = run_cli("cluster", "request", "etl", "--framework", "lab", "--min-core", "1", env=env)
    assert r.returncode == 0 and r.stdout.strip() == "cluster etl requested (min_core 1)", r.stderr
    store.transition_cluster("etl", ClusterState.DEPLOYING)
    store.transition_cluster("etl", ClusterState.ACTIVE)
    r = run_cli("submit", "etl", "--", "app.py", "x; rm -rf /", env=env)
    assert r.returncode == 0, r.stderr
    job = int(r.stdout)
    assert store.get_job(job).argv == ["app.py", "x; rm -rf /"]
    r = run_cli("jobs", "--json", env=env)
    assert [j["id"] for j in json.loads(r.stdout)] == [job]
    r = run_cli("status", "--json", env=env)
    assert [c["name"] for c in json.loads(r.stdout)["clusters"]] == ["etl"]  # not bi
    # another team's cluster: one line, exit 2, nothing changed
    r = run_cli("cluster", "release", "bi", env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "403 team etl-team (token 1): no release scope" in r.stderr
    assert store.get_cluster("bi").release_requested_at is None
    # a bad option is refused before any request, as without --url
    r = run_cli("submit", "etl", "--ref-runtime", "nan", "--", "a", env=env)
    assert r.returncode == 2 and "not a finite number" in r.stderr
    assert run_cli("jobs", "cancel", str(job), env=env).stdout.strip() == f"job {job}: cancelled"
    assert not (tmp_path / "nowhere.db").exists()  # the state was never opened by the CLI
    # a token file instead of FAWKES_TOKEN: mode 0600 only
    tf = tmp_path / "token"
    tf.write_text(secret + "\n")
    tf.chmod(0o644)
    env2 = {"FAWKES_URL": url, "FAWKES_TOKEN_FILE": str(tf)}
    r = run_cli("status", env={**env2, "FAWKES_TOKEN": ""})
    assert r.returncode == 2 and "readable by others" in r.stderr and secret not in r.stderr
    tf.chmod(0o600)
    r = run_cli("status", "--json", env={**env2, "FAWKES_TOKEN": ""})
    assert r.returncode == 0 and json.loads(r.stdout)["clusters"][0]["name"] == "etl"
    actions = [(a.action, a.result) for a in store.audit()]
    assert actions == [("cluster.request", "ok"), ("job.submit", "ok"), ("cluster.release", "refused"),
                       ("job.cancel", "ok")]


def test_plain_http_to_another_host_and_a_missing_token_are_refused(tmp_path):
    env = {"FAWKES_URL": "http://192.0.2.1:9464", "FAWKES_TOKEN": "fawkes_x", "FAWKES_HOME": str(tmp_path)}
    r = run_cli("status", env=env)
    assert r.returncode == 2 and "plain http to 192.0.2.1 would send the token in clear" in r.stderr
    r = run_cli("status", env={"FAWKES_URL": "http://127.0.0.1:1", "FAWKES_TOKEN": "", "FAWKES_HOME": str(tmp_path)})
    assert r.returncode == 2 and "--url needs a token" in r.stderr


def test_tls_with_a_configured_certificate(state, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    store = Store(str(state))
    server = reserve_server("127.0.0.1", 0, tls=(str(cert), str(key)))
    _, _, port = serve(store, {}, "127.0.0.1", 0, server=server, api=ApiConfig(enabled=True))
    try:
        _, secret = store.create_token("bi-team", ["status"], ["bi"], expires_s=600)
        ctx = ssl.create_default_context(cafile=str(cert))
        conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
        conn.request("GET", "/api/v1/status", headers={"Authorization": f"Bearer {secret}"})
        resp = conn.getresponse()
        assert resp.status == 200 and [c["name"] for c in json.loads(resp.read())["clusters"]] == ["bi"]
        conn.close()
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)  # no TLS: no answer
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError, http.client.BadStatusLine)):
            plain.request("GET", "/metrics")
            plain.getresponse()
        plain.close()
        # the CLI verifies the certificate (SSL_CERT_FILE names the CA it trusts)
        env = {"FAWKES_URL": f"https://localhost:{port}", "FAWKES_TOKEN": secret, "SSL_CERT_FILE": str(cert)}
        r = run_cli("status", "--json", env=env)
        assert r.returncode == 0, r.stderr
        r = run_cli("status", env={**env, "SSL_CERT_FILE": os.devnull})
        assert r.returncode == 2 and "CERTIFICATE_VERIFY_FAILED" in r.stderr
    finally:
        server.shutdown()
        server.server_close()
        store.close()


@pytest.mark.parametrize("api, msg", [
    ("{enabled: true, tls_cert: missing.pem, tls_key: key.pem}", "api.tls_cert: "),
    ("{enabled: true, tls_cert: cert.pem}", "tls_cert and tls_key go together"),
    ("{enabled: 1}", "api.enabled"),
    ("{enabled: true, rate_per_min: .nan}", "api.rate_per_min"),
    ("{enabled: true, rate_per_min: -1}", "api.rate_per_min"),
    ("{enabled: true, max_body_bytes: 1000000000000000000000000000000}", "api.max_body_bytes"),
    ("{enabled: true, token: x}", "api.token"),
])
def test_bad_api_config_is_one_line(tmp_path, api, msg):
    (tmp_path / "cert.pem").write_text("x")
    (tmp_path / "key.pem").write_text("x")
    (tmp_path / "config.yaml").write_text(f"api: {api}\n")
    r = run_cli("config", "check", str(tmp_path / "config.yaml"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and msg in r.stderr, r.stderr
    assert "config.yaml:1" in r.stderr


def test_direct_mutating_commands_are_audited_with_the_os_user(state):
    import getpass

    env = {"FAWKES_STATE": str(state)}
    assert run_cli("cluster", "request", "etl", "--framework", "lab", "--min-core", "1", env=env).returncode == 0
    bad = run_cli("cluster", "request", "etl2", "--framework", "lab", "--min-core", "0", env=env)
    assert bad.returncode == 2
    assert run_cli("host", "fail", "h2", "--reason", "disk", env=env).returncode == 0
    assert run_cli("cluster", "release", "etl", env=env).returncode == 0
    rows = json.loads(run_cli("audit", "--json", env=env).stdout)
    assert [(r["actor"], r["via"], r["action"], r["target"], r["result"]) for r in rows] == [
        (f"user {getpass.getuser()}", "cli", "cluster.request", "etl", "ok"),
        (f"user {getpass.getuser()}", "cli", "host.fail", "h2", "ok"),
        (f"user {getpass.getuser()}", "cli", "cluster.release", "etl", "ok")]
    r = run_cli("audit", "--since", "5x", env=env)
    assert r.returncode == 2 and "--since: must be an age" in r.stderr
