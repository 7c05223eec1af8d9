"""Benchmark (pytest-run): CERES C-1's partial reclaim live (issue 28): a busy swollen node's slack lent to a cluster
left short of its target while its grow waits, the owner's task running on.

A lab of 4 hosts with a CPU quota each (0.5 cores, 3 GiB).  Cluster ``a`` (min 1, refuses to borrow) holds h1;
``b`` (min 1, accepts) holds h2.  The in-process coordinator (TD growing transient-core nodes; C-1 on:
``swollen_threshold`` 0.8 over ``usage_window_s`` 20 s; ticks only when this script asks) with its Lender:

1. ``a`` runs a sleep-bound job (three tasks of ``A_SLEEP_S``, one slot per node): a tick grows ``a`` onto h3 and
   h4 (TC nodes), and an admin protects h4 (``fawkes node protect``: no resize takes it); every node of ``a`` runs
   a task and uses little of its quota (swollen, but busy: C-1 takes none of them whole);
2. ``b``'s CPU-bound job; a tick gives ``b`` a target above what it holds (3 in the run of 2026-11-29): ``a``'s h3
   is decommissioned (DP) for it, and while that drain runs ``b`` is short of its target with no host free;
3. the Lender, turned on now (before the tick UBIS alone lends ``b`` the slack, no cluster short then), lends
   ``b`` the slack of ``a``'s busy swollen node h4 first (event "CERES C-1's partial reclaim"): an opportunistic
   worker capped at T_alloc x Cap - Util beside ``a``'s running task, under the node's watchdog.  (``a``'s core
   node h1 is no candidate while h3 drains: it runs the NameNode that decommissions h3, whose CPU peaks above the
   threshold: seen in the runs of 2026-11-29 with a 3-host lab);
4. ``b``'s job ends with ``a``'s task on h4 still running beside ``b``'s worker (then ``a``'s job is cancelled).

Printed, and written to ``FAWKES_BENCH_RESULT`` (JSON) when set: the tick's targets and reason, the loans (when,
which host, their events), what C-1 saw of ``a``'s nodes at the tick and what the Lender's decision saw, the drain,
``b``'s job time, the load.  A demonstration of the path on one run, not a measured gain (no arm without the loan).
Lab hosts are CPU quotas of one 2-core machine.

    sudo FAWKES_BENCH_RESULT=bench/results/partial_reclaim_lab_DATE.json \\
        python3 -m pytest -s -p no:cacheprovider bench/bench_partial_reclaim_lab.py
"""

from __future__ import annotations

import json
import os
import time

import pytest

from fawkes.store.lifecycle import JobState, NodeState
from tests.conftest import REPO, own_lab
from tests.ubis_coordinator import ubis_coordinator

pytestmark = [pytest.mark.lab, pytest.mark.spark]

BURN = REPO / "fawkes" / "apps" / "burn.py"
WORDCOUNT = REPO / "fawkes" / "apps" / "wordcount.py"
A_SLEEP_S = 600  # each of a's three tasks: longer than the whole run (a's job is cancelled at the end)
B_JOB = ("40", "0.5")  # b's job: 40 tasks of 0.5 core-s (40 s of compute on one 0.5-core host)
# a core node holds 4-5 JVMs (about half its memory); a sample step takes up to ~7 s here: a window of several
PRESET = "swollen_threshold: 0.8\nusage_window_s: 20\n"


@pytest.fixture(scope="module")
def reclaim_lab(tmp_path_factory):
    lab = own_lab(tmp_path_factory, "p", 4, 228, "lab with CPU quotas", cpus=0.5, memory="3G")
    try:
        yield lab
    finally:
        lab.down()


def test_a_busy_swollen_nodes_slack_goes_to_the_cluster_left_short(reclaim_lab, tmp_path):
    from bench.results_meta import meta
    from fawkes.coordinator.ubis import Lender

    t0 = time.monotonic()
    out: dict = {**meta(), "lab": {"hosts": 4, "cpus": 0.5, "memory": "3G"}, "a_sleep_s": A_SLEEP_S,
                 "b_job": {"partitions": int(B_JOB[0]), "core_s": float(B_JOB[1])}}
    with ubis_coordinator(reclaim_lab, tmp_path, {"a": 1, "b": 1}, {"b": "accept", "a": "refuse"},
                          preset_lines=PRESET, grow_type="transient-core") as run:
        cfg, coord, store, drive = run.cfg, run.coord, run.store, run.drive
        data = run.deployed({"a": ["h1"], "b": ["h2"]})

        def state(j: int) -> str:
            return store.get_job(j).state

        def job_s(j: int) -> float:
            x = store.get_job(j)
            assert x.state == JobState.SUCCEEDED.value, (j, x.state, x.detail)
            return x.ended_at - x.started_at

        def nodes(c: str) -> dict[str, str]:
            return {n.host: n.state for n in store.list_nodes(c)}

        # 1. a's sleep-bound job; a tick grows a onto h3 and h4; an admin protects h4
        a_job = store.submit_job("a", [str(WORDCOUNT), f"file://{data}", "{output}", "3", str(A_SLEEP_S)]).id
        drive(lambda: state(a_job) == "running" and any(s.pending_tasks >= 2 for s in store.samples("a")[-1:]), 120,
              "a's job running with two tasks pending")
        coord.tick()
        drive(lambda: all(nodes("a").get(h) == NodeState.RUNNING.value for h in ("h3", "h4")), 180,
              "a grown onto h3 and h4")
        store.protect_node(host="h4")
        drive(lambda: all(n.running_tasks >= 1 for n in store.list_nodes("a")), 120, "a's three tasks running")

        # 2. b's job; a tick: b's target above what it holds, a's h3 drained for it.  The weights are the means of
        # the interval's samples: a tick first closes the interval up to b's job's first pending tasks, and the
        # next one comes after 12 s of samples of b's demand beside a's
        b_job = store.submit_job("b", [str(BURN), f"file://{data}", "{output}", *B_JOB]).id
        drive(lambda: state(b_job) == "running" and any(s.pending_tasks >= 10 for s in store.samples("b")[-1:]), 120,
              "b's job running with its stage's tasks pending")  # (before its driver lists a stage: an estimate of 1)
        coord.tick()
        t_reset = time.time()
        drive(lambda: time.time() - t_reset >= 12, 60, "12 s of samples of b's demand")
        ev0 = max((e.id for e in store.events(limit=1)), default=0)
        coord.tick()
        t_tick = time.time()
        targets = {n: m.target for n, m in coord.control.memory().clusters}
        snap = coord.control.snapshot()  # what C-1 saw of a's nodes: tasks, and use over the window
        out.update(targets_after_tick=targets, tick_reason=store.latest_decision().reason, a_nodes_at_tick=[
            {"host": n.id, "running_tasks": n.running_tasks, "draining": n.draining,
             "usage": None if n.usage is None else {"cpu_max": n.usage.cpu_max, "mem_max": n.usage.mem_max,
                                                    "window_s": n.usage.window_s}}
            for c in snap.clusters if c.name == "a" for n in c.nodes])
        assert targets.get("b", 0) > len(store.list_nodes("b")), (targets, out["tick_reason"])
        # the Lender on now, with b short (before the tick UBIS alone would lend b a's slack, as any borrower's
        # with demand when no host is free, not as a partial reclaim: no cluster was short of its target then)
        lender = Lender(store, coord.fleet, coord.control, cfg.opportunistic, coord.settings, clock=coord.clock,
                        cooldown_s=15)
        coord.lender = lender
        import fawkes.mechanism.opportunistic as opp

        decide, seen_by_lender = opp.decide, []

        def watched(snap, cfg_, targets_=None, **kw):  # what the Lender's decision saw, each pass with a grant
            plan = decide(snap, cfg_, targets_, **kw)
            if plan.grants and len(seen_by_lender) < 3:
                seen_by_lender.append({"targets": dict(targets_ or {}), "kw": kw,
                                       "grants": [str(g) for g in plan.grants],
                                       "held": {c.name: c.held for c in snap.clusters},
                                       "nodes": [(n.id, n.running_tasks, n.draining, None if n.usage is None else
                                                  (n.usage.cpu_max, n.usage.mem_max, n.usage.window_s))
                                                 for c in snap.clusters for n in c.nodes]})
            return plan

        opp.decide = watched
        try:
            # 3. while the drain runs, b borrows a's busy swollen node h4
            drive(lambda: "h4" in lender.sessions or state(b_job) in ("succeeded", "failed"), 120, "b lent h4")
            drained = nodes("a").get("h3")
            drive(lambda: state(b_job) in ("succeeded", "failed"), 400, "b's job")
            B = job_s(b_job)
            jb = store.get_job(b_job)
            events = store.events(limit=200, after=ev0)
            loans = [{"at_s_after_tick": round(e.time - t_tick, 1), "host": e.node, "message": e.message}
                     for e in events if e.kind == "ubis" and " lent to b" in e.message]
            ubis = [e.message for e in events if e.kind == "ubis"]
            moves = [f"{round(e.time - t_tick, 1)} s: {e.message}" for e in events
                     if e.kind in ("node", "reconcile", "resize") and ("h3" in e.message or "b" == e.cluster)]

            # 4. a's task on h4 still running when b's job ended (it ran beside b's worker); then a's job is cancelled
            a_h4_tasks = next(n.running_tasks for n in store.list_nodes("a") if n.host == "h4")
            a_state = state(a_job)
            lender.close()
            coord.lender = None
        finally:
            opp.decide = decide
        out["seen_by_lender"] = seen_by_lender
        store.cancel_jobs([a_job])
        drive(lambda: state(a_job) in ("cancelled", "succeeded", "failed"), 120, "a's job cancelled")
        out.update({"h3_when_lent": drained, "B_s": B, "loans": loans, "ubis_events": ubis, "moves": moves,
                    "a_job_when_b_ended": a_state, "a_tasks_on_h4_when_b_ended": a_h4_tasks,
                    "b_task_time": jb.task_time,
                    "nodes_at_end": {c: nodes(c) for c in ("a", "b")}, "total_s": time.monotonic() - t0,
                    "load_end": meta()["load"]})
    print("\n" + json.dumps(out, indent=2, default=str))
    if os.environ.get("FAWKES_BENCH_RESULT"):
        with open(os.environ["FAWKES_BENCH_RESULT"], "w") as f:
            json.dump(out, f, indent=2, default=str)
    partial = [x for x in loans if "CERES C-1's partial reclaim" in x["message"]]
    assert partial and partial[0]["host"] == "h4", (loans, out["a_nodes_at_tick"])
    assert a_state == "running" and a_h4_tasks >= 1, (a_state, a_h4_tasks)  # a's task on h4 never taken
    print(f"\npartial reclaim: b's job {B:.1f} s, loans {[(x['host'], x['at_s_after_tick']) for x in loans]} s after "
          f"the tick (h3 {drained} then); a's task on h4 still running when b's job ended")
