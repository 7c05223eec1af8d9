"""Webhook notifications (issue 27, item 5): which recorded events are notified, the HMAC signature,
retries with exponential back-off, a slow receiver that holds nothing else, the bounded queue, no
secret in any log line, and the config's refusals (one line naming the field, exit 2, nothing written).

Every delivery test POSTs to a real HTTP server on 127.0.0.1 (http.server in a thread)."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fawkes.config import WebhookConfig, load_config
from fawkes.coordinator.notify import Delivery, Notifier, WebhookTarget, classify, read_secret, sign
from fawkes.coordinator.reconcile import Reconciler
from fawkes.errors import ConfigError
from fawkes.mechanism import ClusterState, Role
from fawkes.store import Store
from fawkes.store.lifecycle import JobState, NodeState

REPO = Path(__file__).resolve().parents[1]
SECRET = b"0123456789abcdef-the-webhook-key"


class Receiver:
    """A real HTTP server on 127.0.0.1: answers each POST with the next of ``statuses`` (then 200),
    after ``delay_s``; records (time, headers, body) of every request."""

    def __init__(self, statuses=(), delay_s: float = 0.0):
        self.statuses = list(statuses)
        self.delay_s = delay_s
        self.requests: list[tuple[float, dict, bytes]] = []
        self.got = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.got:
                    outer.requests.append((time.monotonic(), dict(self.headers), body))
                    status = outer.statuses.pop(0) if outer.statuses else 200
                    outer.got.notify_all()
                time.sleep(outer.delay_s)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/the-secret-path?key=abc"

    def wait(self, n: int, timeout: float = 10.0) -> list:
        with self.got:
            assert self.got.wait_for(lambda: len(self.requests) >= n, timeout), self.requests
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(*a, **kw):
        r = Receiver(*a, **kw)
        made.append(r)
        return r
    yield make
    for r in made:
        r.close()


def hook(url: str, tmp_path: Path, **kw) -> WebhookConfig:
    f = tmp_path / "secret"
    f.write_bytes(SECRET + b"\n")
    return WebhookConfig(url=url, events=kw.pop("events", ["job_failed", "host_failed"]), secret_file=f, **kw)


def delivery(n: int = 1) -> Delivery:
    return Delivery("job_failed", str(n), json.dumps({"event": "job_failed", "id": n}).encode())


# ---------------------------------------------------------------- which events are notified
def _store(tmp_path) -> Store:
    store = Store(str(tmp_path / "state.db"), create=True)
    store.register_framework("spark", "spark", spark_home="/opt/spark", java_home="/usr/lib/jvm/java-17")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 4, "memory_mb": 4096} for i in range(5)])
    return store


def test_classify_names_the_events_the_store_and_reconciler_record(tmp_path):
    store = _store(tmp_path)
    first = 0
    store.request_cluster("etl", framework="spark", min_core=1)
    store.transition_cluster("etl", ClusterState.DEPLOYING, "admitted")
    core = store.allocate_node("etl", "h0", Role.CORE)
    store.transition_node(core.id, NodeState.PROVISIONING)
    store.transition_node(core.id, NodeState.RUNNING)
    tr = store.allocate_node("etl", "h1", Role.TR)
    store.transition_node(tr.id, NodeState.PROVISIONING)
    store.transition_node(tr.id, NodeState.RUNNING)
    store.transition_node(tr.id, NodeState.DRAINING)
    store.transition_node(tr.id, NodeState.RELEASED, "removed (FP)")
    never_ran = store.allocate_node("etl", "h2", Role.TR)
    store.transition_node(never_ran.id, NodeState.RELEASED, "plan superseded")  # not a shrink
    store.fail_host("h4", "disk broken")
    job = store.submit_job("etl", ["wc"])
    store.transition_job(job.id, JobState.DISPATCHED)
    store.transition_job(job.id, JobState.RUNNING, app_id="app-1")
    store.transition_job(job.id, JobState.FAILED, "exit code 1", exit_code=1)
    # the reconciler's report of a node draining past timeouts.draining (its own message, not a copy)
    stuck = store.allocate_node("etl", "h3", Role.TR)
    store.transition_node(stuck.id, NodeState.PROVISIONING)
    store.transition_node(stuck.id, NodeState.RUNNING)
    store.transition_node(stuck.id, NodeState.DRAINING)
    store.clock = lambda: time.time() + 7200
    r = Reconciler(store, None, clock=store.clock)
    try:
        r._expire_stuck()
    finally:
        r.pool.shutdown()
    names = [(classify(e.kind, e.message, e.level), e.node or e.cluster)
             for e in store.events(after=first, limit=1000)]
    assert [x for x in names if x[0] is not None] == [
        ("admitted", "etl"), ("grown", "h0"), ("grown", "h1"), ("shrunk", "h1"), ("host_failed", "h4"),
        ("job_failed", "etl"), ("grown", "h3"), ("drain_stuck", "h3")]
    failed = [e for e in store.events(limit=50) if e.kind == "job"][-1]
    assert failed.message == f"job {job.id} failed: exit code 1" and failed.level == "warning"


def test_classify_names_hibernation_and_waking(tmp_path):
    """Scale to zero: the store's own transitions of a cluster into hibernation and out of it by a job."""
    store = _store(tmp_path)
    store.request_cluster("etl", framework="spark", min_core=1)
    store.transition_cluster("etl", ClusterState.DEPLOYING, "admitted")
    core = store.allocate_node("etl", "h0", Role.CORE)
    store.transition_node(core.id, NodeState.PROVISIONING)
    store.transition_node(core.id, NodeState.RUNNING)
    store.transition_cluster("etl", ClusterState.ACTIVE)
    store.transition_cluster("etl", ClusterState.SAVING, "inactive for T_idle")
    store.record_saved_output("etl", {"nothing": "no /output"}, "nothing to save")
    store.transition_node(core.id, NodeState.DRAINING, "teardown")
    store.transition_node(core.id, NodeState.RELEASED, "cluster released")
    store.transition_cluster("etl", ClusterState.HIBERNATING, "hibernated")
    store.submit_job("etl", ["wc"])
    store.request_release("etl")  # the woken one, still queued: withdrawn (not a wake)
    names = [classify(e.kind, e.message, e.level) for e in store.events(limit=1000)]
    assert [x for x in names if x in ("hibernated", "woken", "admitted")] == ["admitted", "hibernated", "woken"]


# ---------------------------------------------------------------- delivery
def test_signed_post_verifies_with_the_secret(tmp_path, receiver):
    r = receiver()
    t = WebhookTarget(0, hook(r.url, tmp_path), read_secret(tmp_path / "secret"))
    assert t.deliver(delivery(7))
    _, headers, body = r.wait(1)[0]
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert headers["X-Fawkes-Signature"] == expected == sign(SECRET, body)
    assert hmac.compare_digest(headers["X-Fawkes-Signature"], sign(SECRET, body))
    assert headers["X-Fawkes-Signature"] != sign(b"another key of 16+ bytes", body)
    assert headers["X-Fawkes-Event"] == "job_failed" and headers["X-Fawkes-Delivery"] == "7"
    assert json.loads(body) == {"event": "job_failed", "id": 7}
    assert t.counts == {"sent": 1, "retried": 0, "failed": 0, "dropped": 0}


def test_a_500_is_retried_with_exponential_backoff(tmp_path, receiver):
    r = receiver(statuses=[500, 503, 500])
    t = WebhookTarget(0, hook(r.url, tmp_path, backoff_s=0.2, backoff_max_s=10), SECRET)
    assert [t.backoff(i) for i in range(3)] == [0.2, 0.4, 0.8]
    assert t.deliver(delivery())
    times = [x[0] for x in r.wait(4)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # each wait at least its backoff (0.2, 0.4, 0.8: doubling, asserted above); not "each gap longer than
    # the last", which a starved receiver breaks (1.39 s then 1.00 s in the clean-clone CI of 7730e92)
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4 and gaps[2] >= 0.8, gaps
    assert len({x[2] for x in r.requests}) == 1  # the same body (and so signature) every attempt
    assert t.counts == {"sent": 1, "retried": 3, "failed": 0, "dropped": 0}


def test_backoff_is_capped_and_retries_end(tmp_path, receiver):
    r = receiver(statuses=[500] * 10)
    t = WebhookTarget(0, hook(r.url, tmp_path, backoff_s=0.05, backoff_max_s=0.1, retries=3), SECRET)
    assert [t.backoff(i) for i in range(5)] == [0.05, 0.1, 0.1, 0.1, 0.1]
    assert not t.deliver(delivery())
    assert len(r.requests) == 4 and t.counts["failed"] == 1 and t.counts["retried"] == 3


def test_a_refusal_is_not_retried_and_nothing_answering_is(tmp_path, receiver):
    r = receiver(statuses=[403])
    t = WebhookTarget(0, hook(r.url, tmp_path, backoff_s=0.01), SECRET)
    assert not t.deliver(delivery())
    assert len(r.requests) == 1  # 403: the receiver refuses it, a retry would too
    r.close()  # nothing listens there now: connection refused, retried, then given up
    t2 = WebhookTarget(1, hook(r.url, tmp_path, backoff_s=0.01, retries=2), SECRET)
    assert not t2.deliver(delivery()) and t2.counts["retried"] == 2 and t2.counts["failed"] == 1


def test_a_slow_receiver_blocks_neither_the_poll_nor_another_target(tmp_path, receiver):
    store = _store(tmp_path)
    slow, fast = receiver(delay_s=3.0), receiver()
    n = Notifier([WebhookTarget(0, hook(slow.url, tmp_path, queue=2, timeout_s=10), SECRET),
                  WebhookTarget(1, hook(fast.url, tmp_path), SECRET)])
    n.start(store)
    try:
        for i in range(5):
            store.fail_host(f"h{i}", "maintenance")
        t0 = time.monotonic()
        queued = n.poll(store)
        took = time.monotonic() - t0
        assert took < 0.5, took  # never waits on a receiver
        fast_got = fast.wait(5, timeout=5)  # the other target gets all five while the slow one hangs
        assert sorted(json.loads(b)["node"] for _, _, b in fast_got) == [f"h{i}" for i in range(5)]
        assert len(slow.requests) <= 1
        # the slow target: one in flight, two queued, the rest dropped and counted
        assert queued == 5 + 5 - n.targets[0].counts["dropped"]
        assert n.targets[0].counts["dropped"] >= 2 and n.counts()["dropped"] == n.targets[0].counts["dropped"]
        assert n.poll(store) == 0  # each event once
    finally:
        n.close(timeout=0.1)


def test_no_secret_and_no_url_path_in_any_log_line(tmp_path, receiver, caplog):
    caplog.set_level(logging.DEBUG)
    r = receiver(statuses=[500, 500, 500])
    t = WebhookTarget(0, hook(r.url, tmp_path, backoff_s=0.01, retries=2), read_secret(tmp_path / "secret"))
    assert not t.deliver(delivery())
    t.counts["dropped"] = 0
    t.q.put_nowait(delivery(2))  # and a full queue: logged too
    small = WebhookTarget(1, hook(r.url, tmp_path, queue=1), SECRET)
    small.offer(delivery(3))
    small.offer(delivery(4))
    text = caplog.text + repr(t) + repr(small)
    assert "not delivered: HTTP 500" in text and "queue full" in text
    assert SECRET.decode() not in text and "the-secret-path" not in text and "key=abc" not in text
    port = r.server.server_address[1]
    assert f"notify[0] (http://127.0.0.1:{port})" in text


# ---------------------------------------------------------------- the config
def _config(tmp_path: Path, notify: str) -> Path:
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    p = tmp_path / "config.yaml"
    p.write_text("state: state.db\nnotify:\n" + notify)
    return p


GOOD = "  - url: https://hooks.example.org/x\n    events: [admitted, job_failed]\n    secret_file: secret\n"


def test_a_good_config_resolves_the_secret_file(tmp_path):
    cfg = load_config(_config(tmp_path, GOOD))
    assert cfg.notify[0].secret_file == tmp_path / "secret" and cfg.notify[0].retries == 5
    n = Notifier.from_config(cfg)
    assert n.targets[0]._secret == SECRET and SECRET.decode() not in repr(n.targets[0])


@pytest.mark.parametrize("notify, field, why", [
    ("  - {url: 'ftp://h/x', events: [admitted], secret_file: secret}", "notify[0].url", "only http and https"),
    ("  - {url: 'file:///etc/passwd', events: [admitted], secret_file: secret}", "notify[0].url", "only http"),
    ("  - {url: \"http://h/x\\ny\", events: [admitted], secret_file: secret}", "notify[0].url", "control"),
    ("  - {url: \"http://h/x\\0y\", events: [admitted], secret_file: secret}", "notify[0].url", "control"),
    ("  - {url: 'http://u:p@h/x', events: [admitted], secret_file: secret}", "notify[0].url", "no user"),
    ("  - {url: 'http:///x', events: [admitted], secret_file: secret}", "notify[0].url", "no host"),
    ("  - {url: 'http://h:99999/x', events: [admitted], secret_file: secret}", "notify[0].url", "not a valid URL"),
    ("  - {url: 'http://h/" + "a" * 3000 + "', events: [admitted], secret_file: secret}", "notify[0].url", "2048"),
    ("  - {url: 'http://h/x', events: [exploded], secret_file: secret}", "notify[0].events", "admitted"),
    ("  - {url: 'http://h/x', events: [], secret_file: secret}", "notify[0].events", "at least 1"),
    ("  - {url: 'http://h/x', events: [grown, grown], secret_file: secret}", "notify[0].events", "twice"),
    ("  - {url: 'http://h/x', events: [grown]}", "notify[0].secret_file", "required"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: nosuch}", "notify[0].secret_file", "No such file"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: short}", "notify[0].secret_file", "shorter than 16"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: fifo}", "notify[0].secret_file", "not a regular"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: nul}", "notify[0].secret_file", "NUL"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: big}", "notify[0].secret_file", "too large"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, timeout_s: .nan}", "notify[0].timeout_s",
     "finite"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, timeout_s: .inf}", "notify[0].timeout_s",
     "finite"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, timeout_s: -1}", "notify[0].timeout_s",
     "greater than 0"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, retries: 1000000000000000000000000000000}",
     "notify[0].retries", "less than or equal"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, retries: -1}", "notify[0].retries",
     "greater than or equal"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, retries: '3'}", "notify[0].retries",
     "integer"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, backoff_s: 1.0e+30}", "notify[0].backoff_s",
     "less than or equal"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, backoff_s: 10, backoff_max_s: 5}", "notify[0]",
     "must not be below"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, queue: 0}", "notify[0].queue", "greater"),
    ("  - {url: 'http://h/x', events: [grown], secret_file: secret, extra: 1}", "notify[0].extra", "unknown field"),
])
def test_bad_webhooks_are_refused_in_one_line_naming_the_field(tmp_path, notify, field, why):
    (tmp_path / "short").write_bytes(b"tooshort\n")
    (tmp_path / "nul").write_bytes(b"0123456789abcdef\0xyz")
    (tmp_path / "big").write_bytes(b"x" * 5000)
    os.mkfifo(tmp_path / "fifo")
    p = _config(tmp_path, notify + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and f": {field}" in msg and why in msg, msg
    assert SECRET.decode() not in msg and "0123456789abcdef" not in msg


def test_coordinator_run_refuses_a_bad_webhook_with_exit_2_writing_nothing(tmp_path):
    p = _config(tmp_path, "  - {url: 'http://h/x', events: [grown], secret_file: secret, retries: .nan}\n")
    (tmp_path / "inventory.yaml").write_text("hosts:\n  - {name: x1, address: 192.0.2.1}\n")
    p.write_text(p.read_text() + "inventory: inventory.yaml\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "fawkes", "coordinator", "run", "--config", str(p), "--no-metrics",
                        "--for", "1"], check=False, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "notify[0].retries" in r.stderr, r.stderr
    assert not (tmp_path / "state.db").exists()


def test_the_coordinator_notifies_from_its_fast_step_and_counts_in_metrics(tmp_path, receiver):
    from fawkes.coordinator.service import build

    r = receiver()
    (tmp_path / "secret").write_bytes(SECRET)
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inventory.yaml").write_text(
        "known_hosts: known_hosts\nhosts:\n  - {name: x1, address: 192.0.2.1, cores: 1}\n")
    (tmp_path / "config.yaml").write_text(
        f"state: state.db\ninventory: inventory.yaml\nnotify:\n  - {{url: '{r.url}', events: [host_failed], "
        "secret_file: secret}\n")
    Store(str(tmp_path / "state.db"), create=True).close()
    cfg = load_config(tmp_path / "config.yaml")
    coord = build(cfg)
    try:
        coord.store.fail_host("x1", "maintenance")
        coord.fast()  # the fast step polls the events and queues the notification
        _, headers, body = r.wait(1)[0]
        assert json.loads(body)["event"] == "host_failed" and json.loads(body)["node"] == "x1"
        assert headers["X-Fawkes-Signature"] == sign(SECRET, body)
        deadline = time.monotonic() + 5
        while coord.counters["notifications"]()["sent"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        from prometheus_client import CollectorRegistry, generate_latest

        from fawkes.coordinator.metrics_http import StoreCollector
        reg = CollectorRegistry()
        reg.register(StoreCollector(coord.store, coord.counters))
        text = generate_latest(reg).decode()
        assert 'fawkes_notifications_total{result="sent"} 1.0' in text
        assert 'fawkes_notifications_total{result="dropped"} 0.0' in text
    finally:
        coord.close(0)
        coord.store.close()
