"""The SIMULATED fleet (issue 26): inventory ``simulated: N``, kind ``simulated``, the real coordinator
process on it.  The short seeded run: 100 simulated hosts, 10 minutes of trace compressed 30x, host
failures and failed daemon starts, then the fault campaign's invariants (no host held twice, none
leaked, no core node removed, no job lost)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from tests.conftest import REPO, run_cli

BAD = [
    ("simulated: .nan", "simulated: expected a number of hosts"),
    ("simulated: .inf", "simulated: expected a number of hosts"),
    ("simulated: -3", "simulated: Input should be greater than or equal to 1"),
    ("simulated: 0", "simulated: Input should be greater than or equal to 1"),
    ("simulated: 1000000000000000000000000000000", "simulated: Input should be less than or equal to 100000"),
    ("simulated: true", "simulated: expected a number of hosts"),
    ("simulated: {hosts: 5, speedup: .nan}", "simulated.speedup: Input should be a finite number"),
    ("simulated: {hosts: 5, speedup: 1e30}", "simulated.speedup: Input should be less than or equal to 1000"),
    ("simulated: {hosts: 5, speedup: 0.5}", "simulated.speedup: Input should be greater than or equal to 1"),
    ('simulated: {hosts: 5, costs: "a\\nb"}', "simulated.costs: must be a file path"),
    ('simulated: {hosts: 5, report: "a\\0b"}', "simulated.report: must be a file path"),
    ("simulated: {hosts: 5, host_failures_per_hour: -1}", "simulated.host_failures_per_hour: Input should be greater"),
    ("simulated: {hosts: 5, start_failure: 2}", "simulated.start_failure: Input should be less than or equal to 1"),
    ("simulated: {hosts: 5, seed: 1.5}", "simulated.seed: Input should be a valid integer"),
    ("simulated: {hosts: 5, typo: 1}", "simulated.typo: unknown field"),
    ("simulated: 5\nhosts: [{name: a, address: 10.0.0.1}]", "simulated: simulated and hosts both given"),
]


@pytest.mark.parametrize("text,msg", BAD, ids=[b[0][:40] for b in BAD])
def test_bad_simulated_inventory_is_one_line_exit_2(tmp_path, text, msg):
    p = tmp_path / "inv.yaml"
    p.write_text(text + "\n")
    r = run_cli("inventory", "check", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fawkes: error: {p}:1: {msg}"), lines
    assert sorted(x.name for x in tmp_path.iterdir()) == ["inv.yaml"]  # nothing created


def test_a_bad_cost_file_is_named(tmp_path):
    (tmp_path / "costs.yaml").write_text("tr_ready_s: .nan\n")
    p = tmp_path / "inv.yaml"
    p.write_text("simulated: {hosts: 3, costs: costs.yaml}\n")
    r = run_cli("inventory", "check", str(p))
    assert r.returncode == 2 and r.stderr.strip() == \
        f"fawkes: error: {tmp_path / 'costs.yaml'}: tr_ready_s: not a finite number: nan"


def test_simulated_inventory_hosts_and_executor(tmp_path):
    from fawkes.inventory import load_inventory

    p = tmp_path / "inv.yaml"
    p.write_text("simulated: 12\n")
    r = run_cli("inventory", "check", str(p))
    assert r.returncode == 0 and "ok (12 SIMULATED hosts" in r.stdout
    inv = load_inventory(p)
    assert [h.name for h in inv.hosts][:2] == ["simhost-0001", "simhost-0002"] and len(inv.hosts) == 12
    assert all(h.address.endswith(".simulated.invalid") for h in inv.hosts)  # no resolver answers these
    ex = inv.executor()
    res = ex.run(None, "true")
    assert len(res) == 12 and all(r.ok for r in res.values())
    other = ex.run(["simhost-0001"], "uname -a")["simhost-0001"]  # nothing else runs: visibly
    assert not other.ok and other.exit_code == 127 and "no simulation" in other.error
    assert inv.executor().world is ex.world  # one fleet per inventory


def test_the_simulated_kind_refuses_real_hosts():
    from fawkes.frameworks.base import driver_class, kinds
    from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
    from fawkes.mechanism import Role

    assert "simulated" in kinds()
    drv = driver_class("simulated")
    assert drv.check_framework(object(), None, ["h1"]) == {"h1": ["kind simulated runs only on a simulated "
                                                                  "inventory (simulated: N)"]}
    fw = FrameworkPaths("sim", "simulated", shared_dir="/simulated")
    spec = ClusterSpec("a", fw, (NodeSpec("h1", "10.0.0.1", Role.CORE, "/srv"),))
    with pytest.raises(FawkesError, match="runs only on a simulated inventory"):
        drv(object()).deploy(spec)


def test_a_job_runs_its_tasks_on_the_slots_it_holds():
    """World alone: a 40-task job of 1 s tasks on 4 then 8 slots (a node registering mid-job)."""
    from fawkes.sim.costs import CostModel
    from fawkes.simfleet.world import World

    now = [0.0]
    w = World(["h1", "h2"], costs=CostModel(cv=0.0, job_startup_s=0.0, job_overhead_s=0.0), cores=4,
              clock=lambda: now[0])
    w.start("c", "h1", "core", True, 0.0)
    w.launch("h1", "/r/clusters/c/jobs/7", "FAWKES_JOB=c/7 fawkes-simulated-job tasks=40 task_s=1; echo $? > x")
    now[0] = 2.0
    w.start("c", "h2", "transient", False, 2.0)  # registered at t = 4
    assert w.poll("h1", "/r/clusters/c/jobs/7") == "running\nsim-7\n"
    now[0] = 4.0
    assert w.sample("c")[2] == {"sim-7": (16, 8, 16)}  # 16 done by 4 s on 4 slots, 8 running now
    now[0] = 7.0
    assert w.poll("h1", "/r/clusters/c/jobs/7") == "rc 0\nsim-7\n"  # 16 + 8 x 3 = 40 by t = 7
    assert w.launch("h1", "/r/clusters/c/jobs/7", "x") == "" and w.launches["c/7"] == 1  # never twice
    w.launch("h1", "/r/clusters/c/jobs/8", "fawkes-simulated-job tasks=nan; echo $? > x")
    assert w.poll("h1", "/r/clusters/c/jobs/8").startswith("rc 2")


def _port(log: Path, timeout: float = 30.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", log.read_text())
        if m:
            return int(m.group(1))
        time.sleep(0.2)
    raise AssertionError("the coordinator never served /metrics:\n" + log.read_text()[-2000:])


#: the short run's fleet: its seed fixes which daemon starts fail and when hosts fail (World draws each
#: from its own stream), whatever the machine's load does to the order of everything else
SEED, HOSTS, SPEEDUP, START_FAILURE, HOST_FAILURES_PER_HOUR = 7, 100, 30, 0.05, 0.2


def seeded_failures(run_s: float) -> tuple[int, int]:
    """(the number of the first daemon start that fails, host failures due in the first ``run_s``
    real seconds) for the short run's seed: what its checks may count on."""
    from fawkes.simfleet.world import World

    now = [0.0]
    names = [f"simhost-{i:04d}" for i in range(1, HOSTS + 1)]
    w = World(names, seed=SEED, speedup=SPEEDUP, host_failures_per_hour=HOST_FAILURES_PER_HOUR,
              start_failure=START_FAILURE, clock=lambda: now[0])
    first = next(k + 1 for k in range(1000) if not w.start(f"c{k}", names[k % HOSTS], "core", False, 0.0).ok)
    now[0] = run_s
    w._fail_hosts(run_s)  # what the coordinator's next call into the fleet does
    return first, len(w.failed_hosts)


def test_the_seed_fixes_the_failures_whatever_the_order_of_other_draws():
    from fawkes.simfleet.world import World

    outcomes = []
    for noise in (0, 50):  # other draws (latencies) in between change nothing
        w = World(["a", "b"], seed=SEED, start_failure=START_FAILURE)
        for _ in range(noise):
            w.draw(10.0)
        outcomes.append([w.start(f"c{k}", "a", "core", False, 1.0).ok for k in range(60)])
    assert outcomes[0] == outcomes[1] and outcomes[0].count(False) >= 1
    assert World(["a"], seed=SEED + 1, start_failure=START_FAILURE).start_rng.random() != \
        World(["a"], seed=SEED, start_failure=START_FAILURE).start_rng.random()


def _shrunk_by_dp(store) -> bool:
    """A transient-core node that ran has been released: the policy shrank a cluster by DP."""
    return any(n.role == "transient-core" and n.state == "released" and n.running_at is not None
               for n in store.list_nodes(live=False))


# a compressed clock (30x) needs its CPU on time: in the run beside the lab (the lowest CPU weight) the
# coordinator was starved for minutes and never reached its --for end (the clean-clone CI of 6258953:
# still running 300 s after a 109-s run); with the serial tests it has the machine but for that run
@pytest.mark.serial
def test_the_real_coordinator_on_100_simulated_hosts(tmp_path):
    """10 minutes of a seeded trace (5 clusters, c0 three times as busy) at 30x: ~20 s, then until the
    checks' events have happened (a tick, a DP shrink, a failed host seen; at most 90 s more: under load
    the coordinator's steps come late, and a node chosen to go while still requested is cancelled, not
    decommissioned)."""
    from fawkes.inventory import load_inventory
    from fawkes.sim.costs import cost_model
    from fawkes.simfleet import invariants
    from fawkes.simfleet.player import Player
    from fawkes.simfleet.scenario import write_scenario
    from fawkes.store import Store
    from fawkes.traces.costfile import load_cost_file
    from fawkes.traces.trace import load_trace

    sc = write_scenario(tmp_path, hosts=HOSTS, clusters=5, min_core=4, minutes=10, speedup=SPEEDUP, seed=SEED,
                        jobs_per_cluster_hour=30, host_failures_per_hour=HOST_FAILURES_PER_HOUR,
                        start_failure=START_FAILURE)
    inv = load_inventory(sc.inventory)
    store = Store(f"sqlite:///{sc.state}")
    store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores, "memory_mb": h.memory_mb,
                       "rack": None} for h in inv.hosts])
    store.register_framework("sim", "simulated", shared_dir="/simulated")
    wl = load_trace(sc.trace, capacity=100, min_core=4, period_s=120, clusters_file=sc.clusters,
                    cost=cost_model(load_cost_file(sc.costs)))
    player = Player(store, "sim", wl, speedup=sc.speedup)
    log = tmp_path / "coordinator.log"
    t0 = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config", str(sc.config),
                                 "--for", str(int(player.duration_s + 90))], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    try:
        player.t0 = time.time()
        state_doc = metrics = None
        fetched = 0.0
        while proc.poll() is None and time.monotonic() - t0 < 240:  # (it stops itself; this guards a hang)
            player.step()
            # the real dashboard and /metrics over the fleet, once the trace is played and a tick was taken
            # (a loaded machine can take the first tick after the trace's end): again each second until then;
            # then the coordinator is stopped (SIGTERM) once a transient-core node that ran was released (the
            # policy shrank by DP) and the sampler marked a host failed
            if player.done() and time.monotonic() >= fetched + 1.0:
                ticked = metrics is not None and re.search(r"^fawkes_ticks_total [1-9]", metrics, re.M)
                if not ticked:
                    port = _port(log)
                    try:  # a starved coordinator may answer late: asked again, and checked below
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/state", timeout=30) as r:
                            state_doc = json.loads(r.read())
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                            metrics = r.read().decode()
                    except OSError:  # (URLError, a timeout)
                        pass
                elif _shrunk_by_dp(store) and store.list_hosts("failed"):
                    proc.send_signal(signal.SIGTERM)
                    break
                fetched = time.monotonic()
            time.sleep(0.05)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the coordinator still runs {time.monotonic() - t0:.0f} s after its start "
                                 f"(--for {int(player.duration_s + 90)}): {log.read_text()[-3000:]}") from None
        assert rc == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    wall = time.monotonic() - t0
    assert sc.report.exists(), log.read_text()[-3000:]  # written when the coordinator stops, or at its exit
    report = json.loads(sc.report.read_text())
    text = log.read_text()
    violations = invariants.check(store, report, player.submitted)
    assert not violations, violations[:10]
    assert player.done() and not player.refused and len(player.submitted) >= 20
    jobs = Counter(j.state for j in store.list_jobs())
    # jobs ran through the real dispatcher to the end (how many depends on the CPU the coordinator got:
    # 9 of 43 at a load average of 100 on this 2-core machine; none lost either way: the invariants above)
    assert jobs["succeeded"] >= 5, jobs
    moved = Counter((r["role"], r["how"]) for r in report["removed"])
    grown = [n for n in store.list_nodes(live=False) if n.role == "transient-core" and n.state in ("running", "released")]
    assert grown and moved[("transient-core", "dp")] >= 1, (moved, len(grown))  # the policy grew and shrank
    # the seed fails a start among the first few and two hosts within the run (seeded_failures): the fleet
    # must have counted them (a failure elsewhere is not a flake: the starts happen, and the hosts fail on
    # the wall clock, load or not; a failing host that runs a master is spared: hence two)
    first_failing, host_failures = seeded_failures(player.duration_s)
    assert first_failing <= 30 and host_failures >= 2, (first_failing, host_failures)  # the seed's promise
    assert report["counts"]["starts"] >= first_failing, report["counts"]
    assert report["counts"].get("start_failures", 0) >= 1 and report["failed_hosts"], report["counts"]
    failed = {h.name for h in store.list_hosts("failed")}
    assert failed & {f["host"] for f in report["failed_hosts"]}  # the sampler saw a host fail
    assert not report["unsimulated"], report["unsimulated"]  # the service ran nothing the fleet does not model
    assert "tick 1:" in text and "Traceback" not in text
    assert state_doc is not None and {c["name"] for c in state_doc["clusters"]} >= {"c0", "c1", "c2", "c3", "c4"}
    assert metrics is not None and re.search(r"^fawkes_ticks_total [1-9]", metrics, re.M), (metrics or "")[-500:]
    print(f"simulated fleet run: {wall:.1f} s of wall time")  # a figure, not a check: speed lives in bench/


def test_core_nodes_invariant_flags_a_removal_while_active_not_a_requeued_deployment(tmp_path):
    """A deployment that lost a core node releases the others and queues the cluster again (before it was
    ever active): not a violation; the clean-clone CI of a374cf1 flagged it when a seeded daemon start
    failure fell on a core node under load.  A core node drained while its cluster is active is one."""
    from fawkes.mechanism import ClusterState, Role
    from fawkes.simfleet import invariants
    from fawkes.store import Store
    from fawkes.store.lifecycle import NodeState

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.register_framework("sim", "simulated", shared_dir="/simulated")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 1, "memory_mb": 1024} for i in range(4)])
    store.request_cluster("c", framework="sim", min_core=2)
    store.transition_cluster("c", ClusterState.DEPLOYING)
    first = [store.allocate_node("c", h, Role.CORE) for h in ("h0", "h1")]
    store.transition_node(first[0].id, NodeState.PROVISIONING)
    store.transition_node(first[0].id, NodeState.FAILED, "start failed")
    store.transition_node(first[1].id, NodeState.PROVISIONING)
    store.transition_node(first[1].id, NodeState.DRAINING, "deployment lost a core node")
    for n in first:
        store.transition_node(n.id, NodeState.RELEASED, "deployment lost a core node")
    store.transition_cluster("c", ClusterState.REQUESTED, "queued again")
    store.transition_cluster("c", ClusterState.DEPLOYING)
    again = [store.allocate_node("c", h, Role.CORE) for h in ("h2", "h3")]
    for n in again:
        store.transition_node(n.id, NodeState.PROVISIONING)
        store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster("c", ClusterState.ACTIVE)
    assert invariants.core_nodes(store, {}) == []
    store.transition_node(again[0].id, NodeState.DRAINING, "a bug")
    assert invariants.core_nodes(store, {}) == ["core node h2 of c draining while the cluster was active"]
    store.transition_cluster("c", ClusterState.SAVING)
    store.transition_node(again[1].id, NodeState.DRAINING, "teardown")  # after SAVING: the release's
    assert len(invariants.core_nodes(store, {})) == 1
