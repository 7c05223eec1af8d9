"""The state CLI (cluster, submit, jobs, status, explain, events) as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from fawkes.mechanism.model import ClusterState, Role
from fawkes.store import NodeState, Store
from tests.conftest import needs_process

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401

REPO = Path(__file__).resolve().parent.parent


def fawkes(*args: str, env: dict | None = None, state: str | None = None,
           process: bool = False) -> subprocess.CompletedProcess:
    """``fawkes ARGS`` with the test's state and none of the user's: in this process
    (tests/conftest.py ``cli_in_process``) unless ``process`` is set or the command needs a process."""
    if not process and not needs_process(args):
        from tests.test_cli_conventions import inproc
        return inproc(*args, env=env, state=state)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAWKES_")}
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    e["FAWKES_HOME"] = "/nonexistent/fawkes-home-for-tests"  # never the user's own state
    if state:
        e["FAWKES_STATE"] = state
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "fawkes", *args], capture_output=True, text=True, env=e,
                          timeout=600)  # generous: beside the lab runs at the lowest CPU weight a CLI start can wait minutes


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def refused(r: subprocess.CompletedProcess, message: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fawkes: error: ") and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def snapshot(url: str) -> dict:
    with Store(url) as s, s.engine.connect() as c:
        return {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("mr_clusters", "jobs", "nodes", "events", "cluster_transitions", "frameworks")}


@pytest.fixture
def url(store_url):
    with Store(store_url) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.sync_hosts([{"name": f"n{i}", "cores": 8} for i in range(4)])
    return store_url


def test_request_submit_jobs_show_release_flow(url):
    assert "cluster a requested (min_core 2); 1 request(s)" in ok(fawkes("cluster", "request", "a", "--framework",
                                                                       "spark", "--min-core", "2", "--input",
                                                                       "/data/in", state=url))
    ok(fawkes("cluster", "request", "b", "-f", "spark", "-m", "1", state=url))
    listed = json.loads(ok(fawkes("cluster", "list", "--json", state=url)))
    assert [(c["name"], c["state"], c["min_core"], c["input_path"]) for c in listed] == [
        ("a", "requested", 2, "/data/in"), ("b", "requested", 1, None)]
    first = int(ok(fawkes("submit", "a", "--input", "/data/in/part1", "--", "wordcount", "--out", "/o", state=url)))
    second = int(ok(fawkes("submit", "a", "--", "sort", "-n", state=url)))
    assert second > first
    jobs = json.loads(ok(fawkes("jobs", "a", "--json", state=url)))
    assert [(j["id"], j["argv"], j["state"], j["cluster"]) for j in jobs] == [
        (first, ["wordcount", "--out", "/o"], "queued", "a"), (second, ["sort", "-n"], "queued", "a")]
    assert jobs[0]["input_path"] == "/data/in/part1"
    table = ok(fawkes("jobs", state=url))
    assert "wordcount --out /o" in table and "sort -n" in table
    shown = json.loads(ok(fawkes("cluster", "show", "a", "--json", state=url)))
    assert shown["jobs"] == {"queued": 2} and [h["to_state"] for h in shown["history"]] == ["requested"]
    assert "withdrawn from the queue" in ok(fawkes("cluster", "release", "b", state=url))
    assert json.loads(ok(fawkes("cluster", "show", "b", "--json", state=url)))["state"] == "released"
    assert [c["name"] for c in json.loads(ok(fawkes("cluster", "list", "--json", state=url)))] == ["a"]
    assert len(json.loads(ok(fawkes("cluster", "list", "--all", "--json", state=url)))) == 2
    evs = json.loads(ok(fawkes("events", "--cluster", "b", "--json", state=url)))
    assert [e["message"] for e in evs][0] == "requested -> released (withdrawn before admission)"  # newest first
    assert len(json.loads(ok(fawkes("events", "-n", "1", "--json", state=url)))) == 1


def test_status_and_explain_read_the_stored_decisions(url):
    with Store(url) as s:
        s.request_cluster("a", framework="spark", min_core=1)
        s.transition_cluster("a", ClusterState.DEPLOYING, "admitted")
        n = s.allocate_node("a", "n0", Role.CORE)
        s.transition_node(n.id, NodeState.PROVISIONING)
        s.allocate_node("a", "n1", Role.TC)
        s.submit_job("a", ["wc"])
        tick = s.record_decision(policy="TD", inputs={"capacity": 4, "free": ["n2", "n3"]},
                                 weights={"a": 0.625}, discriminations={"a": -7.5}, global_factor=56.25,
                                 gate_open=True, targets={"a": 3},
                                 plan={"grows": [{"cluster": "a", "host": "n2", "role": "transient-core"}],
                                       "shrinks": []}, reason="Var(D) 56.25 > tau 10: rebalance")
    st = json.loads(ok(fawkes("status", "--json", state=url)))
    row = st["clusters"][0]
    assert (st["tick"], row["name"], row["nodes"]["core"], row["nodes"]["transient-core"], row["weight"],
            row["discrimination"], row["target"], row["queued_jobs"]) == (tick, "a", 1, 1, 0.625, -7.5, 3, 1)
    table = ok(fawkes("status", state=url))
    assert "0.625" in table and "-7.500" in table and "gate open" in table and f"tick {tick}" in table
    ex = ok(fawkes("explain", state=url))
    assert "Var(D) 56.25 > tau 10: rebalance" in ex and "n2" in ex and "0.625" in ex and '"capacity": 4' in ex
    exj = json.loads(ok(fawkes("explain", str(tick), "--json", state=url)))
    assert exj["targets"] == {"a": 3} and exj["gate_open"] is True and exj["inputs"]["free"] == ["n2", "n3"]
    refused(fawkes("explain", "999", state=url), "tick 999: no such decision")


@pytest.mark.parametrize("args, message", [
    (["cluster", "request", "bad/name", "-f", "spark", "-m", "1"], "name: invalid name 'bad/name'"),
    (["cluster", "request", "x", "-f", "nope", "-m", "1"], "framework: 'nope' is not registered"),
    (["cluster", "request", "x", "-f", "spark", "-m", "0"], "min_core: must be an integer >= 1"),
    (["cluster", "request", "x", "-f", "spark", "-m", "5"], "min_core: 5 exceeds the pool capacity 4"),
    (["cluster", "request", "a", "-f", "spark", "-m", "1"], "cluster a: already exists"),
    (["cluster", "release", "zz"], "cluster zz: no such cluster"),
    (["cluster", "show", "zz"], "cluster zz: no such cluster"),
    (["submit", "zz", "--", "wc"], "cluster zz: no such cluster"),
    (["submit", "a", "--", ""], "app: the application name is empty"),
    (["jobs", "zz"], "cluster zz: no such cluster"),
    (["explain"], "no decision recorded yet"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(url, args, message):
    ok(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", state=url))
    before = snapshot(url)
    refused(fawkes(*args, state=url), message)
    assert snapshot(url) == before


def test_state_flag_overrides_environment(url, tmp_path):
    other = f"sqlite:///{tmp_path / 'other.db'}"
    refused(fawkes("cluster", "list", "--state", other, state=url), "no such state file")  # --state wins, creates nothing
    Store(other).close()  # an empty state there
    refused(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", "--state", other, state=url),
            "framework: 'spark' is not registered")
    ok(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", state=url))


def test_state_from_config_file(url, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state: {url}\n")
    ok(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", env={"FAWKES_CONFIG": str(cfg)}))
    assert json.loads(ok(fawkes("cluster", "list", "--json", state=url)))[0]["name"] == "a"
    cfg.write_text("state: x\nbogus: 1\n")
    refused(fawkes("status", env={"FAWKES_CONFIG": str(cfg)}), f"{cfg}:2: bogus: unknown field")


def test_newer_schema_refused_by_every_command(url):
    from fawkes.store.migrations import CURRENT

    newer = CURRENT + 1
    with Store(url) as s, s.engine.begin() as c:
        c.execute(text(f"UPDATE schema_version SET version = {newer}"))
    refused(fawkes("status", state=url), f"schema version {newer} is newer than this fawkes understands")
    refused(fawkes("submit", "a", "--", "wc", state=url), f"schema version {newer} is newer")


def test_parallel_cli_submits_are_all_queued_once(url):
    ok(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", state=url))
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAWKES_")}
    e.update(PYTHONPATH=str(REPO), FAWKES_STATE=url, FAWKES_HOME="/nonexistent/fawkes-home-for-tests")
    # 6 writers at once, 2 submits each (a process start is most of a submit's CPU)
    script = "; ".join(f"{sys.executable} -m fawkes submit a -- app {{}} {k}" for k in range(2))
    procs = [subprocess.Popen(["sh", "-c", script.replace("{}", str(p))], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=e) for p in range(6)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    ids = [int(x) for out, _ in outs for x in out.split()]
    assert len(ids) == 12 and len(set(ids)) == 12
    jobs = json.loads(ok(fawkes("jobs", "a", "--json", state=url)))
    assert sorted(j["id"] for j in jobs) == sorted(ids)
    assert sorted(tuple(j["argv"]) for j in jobs) == sorted(("app", str(p), str(k)) for p in range(6) for k in range(2))


def test_events_newest_first_oldest_first_and_follow(url):
    """``fawkes events`` lists the newest first; ``--follow`` prints the latest oldest first, then each
    new event as it is recorded (a real follower process, events written by another)."""
    import queue
    import threading

    with Store(url) as s:
        for i in range(3):
            s.record_event("note", f"m{i}")
    assert [e["message"] for e in json.loads(ok(fawkes("events", "--json", state=url)))] == ["m2", "m1", "m0"]
    assert [e["message"] for e in json.loads(ok(fawkes("events", "--json", "--oldest-first", state=url)))] == [
        "m0", "m1", "m2"]
    table = ok(fawkes("events", state=url))
    assert table.index("m2") < table.index("m1") < table.index("m0")
    e = {k: v for k, v in os.environ.items() if not k.startswith("FAWKES_")}
    e.update(PYTHONPATH=str(REPO), FAWKES_STATE=url, FAWKES_HOME="/nonexistent/fawkes-home-for-tests")
    p = subprocess.Popen([sys.executable, "-m", "fawkes", "events", "--follow", "-n", "2", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()

    def line(timeout: float = 300.0) -> dict:  # the side run, starved beside the lab: 80 s once
        return json.loads(lines.get(timeout=timeout))  # queue.Empty: no line from events --follow

    try:
        assert [line()["message"], line()["message"]] == ["m1", "m2"]
        with Store(url) as s:
            s.record_event("note", "m3", cluster="c1")
            s.record_event("note", "m4")
        got = [line(), line()]
        assert [(g["message"], g["cluster"]) for g in got] == [("m3", "c1"), ("m4", None)]
        assert got[0]["id"] < got[1]["id"]
        assert p.poll() is None
    finally:
        p.terminate()
        p.wait(timeout=30)
