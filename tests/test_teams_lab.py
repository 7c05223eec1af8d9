"""Two teams against one live coordinator through the API (issue 27), on the lab with real Spark + HDFS.

The real coordinator (``fawkes coordinator run``, API on 127.0.0.1) has 3 lab hosts and two teams in its
config: ``etl-team`` (cluster ``etl``, at most 2 nodes) and ``bi-team`` (cluster ``bi``, at most 1 node).
Each team holds a token for its own cluster and drives it with the command line through ``--url``
(``FAWKES_URL`` and ``FAWKES_TOKEN``; the state is never opened by it):

1. etl-team requests ``etl`` with its input: admitted, deployed, the input loaded;
2. bi-team requests ``bi`` with a minimum of 2 nodes, past its quota of 1: accepted into the queue and
   held there by the quota (the decisions say ``bi waits: team bi-team's minima ...``), while etl runs;
3. etl-team submits a word count to ``etl``: it runs and succeeds, its output exact;
4. bi-team's submit to ``etl`` and its release of ``etl``: 403, one line, exit 2, nothing changed;
5. etl-team releases ``etl`` (its output saved, exact); the audit trail (``fawkes audit --json``) shows every step above with
   its team, action, target, result and HTTP status; nothing of the cluster is left on the hosts.

About 1.5 minutes.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import time

import pytest

from bench.fault_campaign import saved_counts
from fawkes.frameworks import dists
from fawkes.store import Store
from tests.conftest import REPO, cluster_dirs_marker, pids_with_cmdline, run_cli
from tests.coordinator_process import CoordinatorProcess
from tests.test_dashboard_lab import LAB_OPTIONS, small_inventory

pytestmark = [pytest.mark.lab, pytest.mark.spark]

APP = REPO / "fawkes" / "apps" / "wordcount.py"


def wait(what: str, check, timeout: float, alive) -> object:
    deadline = time.monotonic() + timeout
    while True:
        alive()
        v = check()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(1)


def test_two_teams_share_one_coordinator_through_the_api(lab, tmp_path):
    d = dists.ensure_lab_dists()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"state: {url}\ninventory: {small_inventory(lab, tmp_path / 'inventory.yaml')}\n"
        "policy: td-tr\nperiod: 5\nsample_period: 2\nmetrics: {bind: 127.0.0.1, port: 0}\n"
        "api: {enabled: true, rate_per_min: 600, burst: 100}\n"
        "teams:\n  etl-team: {clusters: [etl], max_nodes: 2}\n  bi-team: {clusters: [bi], max_nodes: 1}\n"
        f"cluster_options: {json.dumps(LAB_OPTIONS)}\n")
    with Store(url) as st:
        st.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    tokens = {}
    for team, cluster in (("etl-team", "etl"), ("bi-team", "bi")):
        r = run_cli("token", "create", team, "--scope", "submit,status,request,release", "--clusters", cluster,
                    "--expires", "1h", "--state", url)
        assert r.returncode == 0, r.stderr
        tokens[team] = r.stdout.strip().splitlines()[0]
        assert tokens[team].startswith("fawkes_")
    words = [f"w{i % 17}" for i in range(6000)]
    src = tmp_path / "words.txt"
    src.write_text("\n".join(" ".join(words[i:i + 6]) for i in range(0, len(words), 6)) + "\n")

    log = tmp_path / "coordinator.log"
    coordinator = CoordinatorProcess(config, log, metrics=True)
    coordinator.start()
    proc = coordinator.proc
    store = Store(url)

    def alive():
        assert proc.poll() is None, f"coordinator exited ({proc.returncode}):\n{log.read_text()[-3000:]}"

    try:
        api = wait("the API's URL in the log", lambda: re.search(r"teams' API: (http://127\.0\.0\.1:\d+)/api/v1/",
                                                                  log.read_text()), 120, alive).group(1)
        nowhere = str(tmp_path / "never-opened.db")

        def team(name: str, *args: str):
            return run_cli(*args, env={"FAWKES_URL": api, "FAWKES_TOKEN": tokens[name], "FAWKES_STATE": nowhere,
                                       "FAWKES_CONFIG": None})

        # 1. etl-team's cluster, with its input
        r = team("etl-team", "cluster", "request", "etl", "--framework", "lab", "--min-core", "1", "--input", str(src))
        assert r.returncode == 0, r.stderr
        # 2. bi-team's request past its quota: accepted, then held by it
        r = team("bi-team", "cluster", "request", "bi", "--framework", "lab", "--min-core", "2")
        assert r.returncode == 0 and r.stdout.strip() == "cluster bi requested (min_core 2)", r.stderr
        wait("etl active", lambda: store.get_cluster("etl").state == "active", 300, alive)
        held = wait("the quota named in a decision", lambda: [
            x for x in store.recent_decisions(20) if "bi waits: team bi-team's minima 0+2 > its quota 1" in x.reason],
            60, alive)
        assert held and store.get_cluster("bi").state == "requested"

        # 3. etl-team's job on its cluster
        r = team("etl-team", "submit", "etl", "--input", "/input", "--", str(APP), "{input}", "{output}", "4", "0.5")
        assert r.returncode == 0, r.stderr
        job = int(r.stdout)
        wait("the job done", lambda: store.get_job(job).state in ("succeeded", "failed"), 240, alive)
        assert store.get_job(job).state == "succeeded", store.get_job(job).detail
        r = team("etl-team", "jobs", "--json")
        assert r.returncode == 0 and [(j["id"], j["state"]) for j in json.loads(r.stdout)] == [(job, "succeeded")]

        # 4. bi-team on etl-team's cluster: 403, one line, nothing changed
        before = (len(store.list_jobs("etl")), store.get_cluster("etl").release_requested_at)
        for args, scope in ((("submit", "etl", "--", str(APP), "{input}", "{output}"), "submit"),
                            (("cluster", "release", "etl"), "release")):
            r = team("bi-team", *args)
            assert r.returncode == 2 and r.stderr.count("\n") == 1, (r.stdout, r.stderr)
            assert f"403 team bi-team (token 2): no {scope} scope on cluster etl" in r.stderr, r.stderr
            assert tokens["bi-team"] not in r.stderr
        assert (len(store.list_jobs("etl")), store.get_cluster("etl").release_requested_at) == before
        r = team("bi-team", "status", "--json")
        assert r.returncode == 0 and [c["name"] for c in json.loads(r.stdout)["clusters"]] == ["bi"]

        # 5. etl-team releases its cluster; the audit trail has it all
        r = team("etl-team", "cluster", "release", "etl")
        assert r.returncode == 0, r.stderr
        wait("etl released", lambda: store.get_cluster("etl").state == "released", 240, alive)
        r = run_cli("audit", "--json", "--state", url)
        assert r.returncode == 0, r.stderr
        rows = [(a["actor"], a["via"], a["action"], a["target"], a["result"], a["status"]) for a in json.loads(r.stdout)
                if a["via"] == "api"]
        assert rows == [
            ("team etl-team (token 1)", "api", "cluster.request", "etl", "ok", 201),
            ("team bi-team (token 2)", "api", "cluster.request", "bi", "ok", 201),
            ("team etl-team (token 1)", "api", "job.submit", f"etl job {job}", "ok", 201),
            ("team bi-team (token 2)", "api", "job.submit", "etl", "refused", 403),
            ("team bi-team (token 2)", "api", "cluster.release", "etl", "refused", 403),
            ("team etl-team (token 1)", "api", "cluster.release", "etl", "ok", 200)], rows
        assert all(t not in log.read_text() for t in tokens.values()), "a token's secret in the coordinator's log"
        # the job's output, saved at the release: exact
        with lab.executor() as ex:
            problem, counts = saved_counts(ex, store.get_cluster("etl").saved_output)
        assert problem is None and counts == {job: collections.Counter(words)}, problem
    finally:
        try:
            coordinator.stop()
        except subprocess.TimeoutExpired:
            coordinator.kill9()
        store.close()
    marker = cluster_dirs_marker(lab, "etl")
    deadline = time.monotonic() + 30
    while pids_with_cmdline(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pids_with_cmdline(marker), "processes of etl left on the hosts"
