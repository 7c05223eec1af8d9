"""Admin commands as real processes on SQLite and PostgreSQL: fawkes host, fawkes jobs cancel, fawkes prune."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import text

from fawkes.mechanism.model import ClusterMetrics, ClusterState, Role
from fawkes.store import HostState, JobState, NodeState, Store

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
    from test_cli_store import fawkes, ok, refused
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401
    from tests.test_cli_store import fawkes, ok, refused


def rows(url: str) -> dict:
    with Store(url) as s, s.engine.connect() as c:
        return {t: c.execute(text(f"SELECT * FROM {t} ORDER BY 1")).all()
                for t in ("hosts", "jobs", "nodes", "events", "samples", "decisions", "mr_clusters")}


@pytest.fixture
def url(store_url):
    """Cluster a active on n0 (core, running); n1 free; n2 failed by the sampler, still held by a's
    failed node; n3 free.  Jobs: 1 queued, 2 queued, 3 running, 4 succeeded."""
    with Store(store_url) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.sync_hosts([{"name": f"n{i}", "address": f"10.0.0.{i}", "cores": 2} for i in range(4)])
        s.request_cluster("a", framework="spark", min_core=1)
        s.transition_cluster("a", ClusterState.DEPLOYING)
        for h, role in (("n0", Role.CORE), ("n2", Role.TC)):
            n = s.allocate_node("a", h, role)
            s.transition_node(n.id, NodeState.PROVISIONING)
            s.transition_node(n.id, NodeState.RUNNING)
        s.transition_cluster("a", ClusterState.ACTIVE)
        s.transition_node(2, NodeState.FAILED, "host unreachable")
        s.set_host_state("n2", HostState.FAILED, detail="ssh timeout")
        ids = [s.submit_job("a", ["wc", str(k)]).id for k in range(4)]
        assert ids == [1, 2, 3, 4]
        for j, to in ((3, [JobState.DISPATCHED, JobState.RUNNING]),
                      (4, [JobState.DISPATCHED, JobState.RUNNING, JobState.SUCCEEDED])):
            for st in to:
                s.transition_job(j, st)
    return store_url


# ---------------------------------------------------------------- fawkes host
def test_host_list_shows_states_and_holders(url):
    listed = json.loads(ok(fawkes("host", "list", "--json", state=url)))
    assert [(h["name"], h["state"], h["cluster"], h["node_state"]) for h in listed] == [
        ("n0", "allocated", "a", "running"), ("n1", "free", None, None), ("n2", "failed", "a", "failed"),
        ("n3", "free", None, None)]
    assert [h["name"] for h in json.loads(ok(fawkes("host", "list", "--status", "free", "--json", state=url)))] \
        == ["n1", "n3"]
    table = ok(fawkes("host", "list", state=url))
    assert "a (core, running)" in table and "a (transient-core, failed)" in table


def test_host_fail_then_restore(url):
    out = ok(fawkes("host", "fail", "n1", "--reason", "memory test", state=url))
    assert out.strip() == "host n1: free -> failed (memory test); 'fawkes host restore n1' brings it back"
    with Store(url) as s:
        assert s.free_hosts() == ["n3"] and s.capacity() == 2
    assert ok(fawkes("host", "restore", "n1", state=url)).strip() == \
        "host n1: failed -> free; the coordinator may use it again"
    evs = [e for e in json.loads(ok(fawkes("events", "--json", "--oldest-first", state=url))) if e["kind"] == "host"]
    assert [e["message"] for e in evs][-2:] == [
        "host n1: free -> failed (taken out of service: memory test)",
        "host n1: failed -> free (restored by the admin)"]
    assert [e["node"] for e in evs][-2:] == ["n1", "n1"]
    with Store(url) as s:
        assert s.free_hosts() == ["n1", "n3"]


def test_failed_host_restored_after_its_node_is_released(url):
    refused(fawkes("host", "restore", "n2", state=url),
            "host n2: still held by cluster a (node 2, failed); restore it once that node is released")
    with Store(url) as s:
        s.transition_node(2, NodeState.RELEASED, "cleaned up")
    ok(fawkes("host", "restore", "n2", state=url))
    with Store(url) as s:
        assert s.free_hosts() == ["n1", "n2", "n3"]


@pytest.mark.parametrize("args, message", [
    (["host", "fail", "n0", "--reason", "x"],
     "host n0: held by cluster a (node 1, running); only a free host can be taken out of service"),
    (["host", "fail", "n2", "--reason", "x"], "host n2: held by cluster a (node 2, failed)"),
    (["host", "fail", "zz", "--reason", "x"], "host zz: not in the inventory"),
    (["host", "restore", "zz"], "host zz: not in the inventory"),
    (["host", "restore", "n1"], "host n1: not failed (free); nothing to restore"),
    (["host", "restore", "n0"], "host n0: not failed (allocated); nothing to restore"),
    (["jobs", "cancel", "4"], "job 4: already succeeded"),
    (["jobs", "cancel", "1", "3", "4"], "job 4: already succeeded"),  # all or none
    (["jobs", "cancel", "1", "99"], "job 99: not found"),
])
def test_refusals_are_one_line_exit_2_and_change_nothing(url, args, message):
    before = rows(url)
    refused(fawkes(*args, state=url), message)
    assert rows(url) == before


def test_usage_errors_exit_2_and_change_nothing(url):
    before = rows(url)
    r = fawkes("host", "fail", "n1", state=url)
    assert r.returncode == 2 and "Missing option '--reason'" in r.stderr
    r = fawkes("jobs", "cancel", state=url)
    assert r.returncode == 2 and "Missing argument" in r.stderr
    r = fawkes("jobs", "cancel", "x", state=url)
    assert r.returncode == 2 and "'x' is not a valid integer" in r.stderr
    assert rows(url) == before


# ---------------------------------------------------------------- fawkes jobs cancel
def test_jobs_cancel_queued_at_once_running_as_request(url):
    out = ok(fawkes("jobs", "cancel", "2", "3", state=url)).splitlines()
    assert out == ["job 2: cancelled",
                   "job 3: cancel requested (running); the coordinator will stop its driver"]
    jobs = {j["id"]: j for j in json.loads(ok(fawkes("jobs", "--json", state=url)))}
    assert (jobs[2]["state"], jobs[3]["state"]) == ("cancelled", "running")
    assert jobs[3]["cancel_requested_at"] is not None and jobs[2]["ended_at"] is not None
    assert "running (cancel requested)" in ok(fawkes("jobs", "a", state=url))
    again = json.loads(ok(fawkes("jobs", "cancel", "3", "--json", state=url)))
    assert [(j["id"], j["outcome"]) for j in again] == [(3, "pending")]
    # listing still works with and without the explicit sub-command
    assert [j["id"] for j in json.loads(ok(fawkes("jobs", "list", "a", "--status", "queued", "--json",
                                                  state=url)))] == [1]
    assert [j["id"] for j in json.loads(ok(fawkes("jobs", "-n", "1", "--json", state=url)))] == [4]


# ---------------------------------------------------------------- fawkes prune
def test_prune_prints_what_it_deleted(url, tmp_path):
    now = time.time()
    with Store(url) as s:
        for age in (10 * 86400, 8 * 86400, 60, 1):
            s.record_sample("a", ClusterMetrics(time=now - age))
        s.record_event("test", "ancient", time=now - 40 * 86400)
        for k in range(4):
            s.record_decision(policy="TD", inputs={}, weights={}, discriminations={}, global_factor=0.0,
                              gate_open=False, targets={}, plan={}, reason=str(k))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state: {url}\nretention: {{decisions_keep: 3}}\n")
    before = rows(url)
    dry = ok(fawkes("prune", "--config", str(cfg), "--dry-run"))
    assert "samples:   2 would delete" in dry and "events:    1 would delete" in dry
    assert "decisions: 1 would delete (kept the newest 3)" in dry
    assert rows(url) == before
    out = ok(fawkes("prune", "--config", str(cfg)))
    assert "samples:   2 deleted, older than " in out and "(kept 7d)" in out
    assert "events:    1 deleted" in out and "(kept 30d)" in out and "decisions: 1 deleted" in out
    with Store(url) as s:
        assert len(s.samples("a")) == 2 and s.count_decisions_beyond(3) == 0
    # an override below the mechanism's window is raised to it (td-damped, the default: T = 120 s, plus one T of look-back)
    r = json.loads(ok(fawkes("prune", "--config", str(cfg), "--samples-s", "1", "--json")))
    assert r["samples"] == 0 and r["samples_kept_s"] == 240 and not r["dry_run"]
    assert "the mechanism's window" in ok(fawkes("prune", "--config", str(cfg), "--samples-s", "1"))


@pytest.mark.parametrize("body, message", [
    ("retention: {samples_s: -1}\n", ":2: retention.samples_s: Input should be greater than 0"),
    ("retention: {events_s: soon}\n", ":2: retention.events_s: Input should be a valid number"),
    ("retention: {keep: 3}\n", ":2: retention.keep: unknown field"),
])
def test_prune_bad_config_names_the_key(url, tmp_path, body, message):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"state: {url}\n{body}")
    before = rows(url)
    refused(fawkes("prune", "--config", str(cfg)), f"{cfg}{message}")
    assert rows(url) == before
