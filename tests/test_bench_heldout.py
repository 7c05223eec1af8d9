"""The held-out twin benchmark's stream and comparison (issue 25, item 1; the live part is bench-only)."""

from __future__ import annotations

import pytest

from bench.bench_twin_heldout import (
    CLUSTERS,
    CORE_S,
    PARTITIONS,
    against,
    compare,
    heldout_plan,
    loaded,
)


@pytest.mark.parametrize("seed", [0, 1, 7, 5101, 2**32 - 1])
def test_a_seed_draws_one_stream_with_two_bursts_and_a_single_job(seed):
    plan = heldout_plan(seed)
    assert plan == heldout_plan(seed)  # the seed repeats the stream
    times = [t for t, _ in plan.stream]
    assert times == sorted(times) and times[0] == 0
    per = {c: sum(1 for _, x in plan.stream if x == c) for c in CLUSTERS}
    assert min(per.values()) == 1 and all(2 <= n <= 3 for n in sorted(per.values())[1:]), per
    assert len(loaded(plan)) == 2 and plan.partitions in PARTITIONS and plan.core_s in CORE_S


def test_a_run_against_its_own_r_scales_each_clusters_slowdown():
    # drift control: the None run's responses over the R measured right before it
    run = {"jobs": [{"cluster": "etl", "response_s": 30.0}, {"cluster": "etl", "response_s": 50.0},
                    {"cluster": "bi", "response_s": 24.0}], "slowdowns": {"etl": 1.6, "bi": 0.96}, "mean": 1.387}
    got = against(run, 20.0)
    assert got["slowdowns"] == {"etl": 2.0, "bi": 1.2} and abs(got["mean"] - 104 / 60) < 1e-12
    assert run["slowdowns"] == {"etl": 1.6, "bi": 0.96}  # the run itself is not changed
    plan = heldout_plan(3)
    a, b = loaded(plan)
    predicted = {k: {"cluster_mean_slowdown": {a: 1.0, b: 1.0}} for k in ("policy", "None")}
    slow = {"jobs": [{"cluster": a, "response_s": 26.0}, {"cluster": b, "response_s": 26.0}]}
    # a None run 30 % slower with an R 30 % longer: no error against its own R, -23 % against the first
    assert compare(predicted, {"None": against(slow, 26.0)}, {"slowdowns": {a: 0.9, b: 0.9}}, plan)["max_abs_error"] < 1e-12
    assert round(compare(predicted, {"None": against(slow, 20.0)}, {"slowdowns": {a: 0.9, b: 0.9}}, plan)
                 ["max_abs_error"], 3) == 0.231


def test_seeds_differ():
    assert len({heldout_plan(s) for s in range(20)}) > 10


def test_compare_gives_errors_and_the_sign_per_loaded_cluster():
    plan = heldout_plan(3)
    a, b = loaded(plan)
    single = next(c for c in CLUSTERS if c not in (a, b))
    predicted = {"policy": {"cluster_mean_slowdown": {a: 0.8, b: 1.0, single: 1.0}},
                 "None": {"cluster_mean_slowdown": {a: 1.2, b: 0.9, single: 1.0}}}
    measured = {"None": {"slowdowns": {a: 1.0, b: 1.0, single: 1.0}}}
    policy_run = {"slowdowns": {a: 0.7, b: 0.8, single: 1.0}}
    got = compare(predicted, measured, policy_run, plan)
    errs = {r["cluster"]: round(r["error"], 9) for r in got["rows"]}
    assert errs == {a: 0.2, b: -0.1, single: 0.0}
    assert round(got["median_abs_error"], 9) == 0.1 and round(got["max_abs_error"], 9) == 0.2
    signs = {s["cluster"]: s["right"] for s in got["signs"]}
    assert signs == {a: True, b: False}  # b: live policy < None, the twin's policy > its None
    assert not got["target_met"]
    measured["None"]["slowdowns"].update({a: 1.15, b: 0.95})
    predicted["None"]["cluster_mean_slowdown"][b] = 1.0
    predicted["policy"]["cluster_mean_slowdown"][b] = 0.9
    assert compare(predicted, measured, policy_run, plan)["target_met"]


def test_the_ablation_refuses_what_is_not_a_finished_run_in_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    tool = [sys.executable, str(Path(__file__).resolve().parent.parent / "bench" / "twin_heldout_ablation.py")]
    res = tmp_path / "result.json"
    r = subprocess.run([*tool, "--dir", str(tmp_path), "--result", str(res)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr.strip()) == (2, f"twin_heldout_ablation.py: {tmp_path / 'fawkes.db'}: not a regular file")
    (tmp_path / "fawkes.db").write_bytes(b"")
    res.write_text('{"seed": 1}')  # a run that never got to its None run
    r = subprocess.run([*tool, "--dir", str(tmp_path), "--result", str(res)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith(f"twin_heldout_ablation.py: {res}: not a finished held-out run")
    assert len(r.stderr.strip().splitlines()) == 1


def test_master_task_seconds_per_run_from_the_jobs_task_time(tmp_path):
    from bench.bench_twin_heldout import master_task_s
    from fawkes.mechanism import ClusterState
    from fawkes.store import Store

    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url) as st:
        st.register_framework("spark", "spark")
        st.request_cluster("etl", framework="spark", min_core=1)
        st.transition_cluster("etl", ClusterState.DEPLOYING)
        st.transition_cluster("etl", ClusterState.ACTIVE)
        ids = [st.submit_job("etl", ["burn.py"]).id for _ in range(4)]
        with st.session(write=True) as s:
            from fawkes.store.schema import Job

            for jid, tt in zip(ids, ({"master": [4, 40.0], "other": [4, 60.0]}, {"master": [2, 24.0], "other": [0, 0.0]},
                                     {"master": [5, 75.0], "other": [0, 0.0]}, None)):
                s.get(Job, jid).task_time = tt
    runs = {"td": {"jobs": [{"id": ids[0]}, {"id": ids[1]}]}, "None": {"jobs": [{"id": ids[2]}, {"id": ids[3]}]}}
    got = master_task_s(url, runs)
    assert got == {"td": 11.0, "None": 15.0, "ratio": {"td": 1.0, "None": 1.364}}  # a job without it left out


def test_the_single_job_clusters_speed_index_only_where_it_did_not_grow(tmp_path):
    from bench.twin_heldout_speed_index import errors, peak_nodes, speed_index

    doc = {"seed": 1, "policy": "td-damped", "stream": [[0, "etl"], [5, "etl"], [20, "ml"], [100, "bi"], [110, "bi"]],
           "policy_run": {"jobs": [{"cluster": "ml", "response_s": 100.0}, {"cluster": "etl", "response_s": 90.0}]},
           "measured": {"None": {"jobs": [{"cluster": "ml", "response_s": 115.0}],
                                 "slowdowns": {"etl": 2.3, "bi": 2.0, "ml": 1.15}}},
           "prediction": {"predicted": {"None": {"cluster_mean_slowdown": {"etl": 2.0, "bi": 2.0, "ml": 1.0}}}},
           "comparison": {"rows": [{"label": "None", "cluster": "etl", "error": -0.13}]}}
    log = tmp_path / "run.log"
    log.write_text("--- td-damped (900 s)\npolicy td-damped: 5 jobs\ncluster  jobs  mean response s  slowdown peak nodes\n"
                   "etl         2            318.2      1.17          4\nml          1            281.5      1.04          1\n"
                   "bi          2            340.4      1.25          3\noverall     5                       1.19\n")
    assert peak_nodes(doc, log) == {"etl": 4, "ml": 1, "bi": 3}
    assert speed_index(doc, {"ml": 1}) == ("ml", 1.15) and speed_index(doc, {"ml": 2}) is None
    e = errors(doc, peak_nodes(doc, log))
    assert e["single"] == "ml" and set(e["clusters"]) == {"etl", "bi"}
    assert round(e["clusters"]["etl"]["error"], 9) == 0.0 and e["clusters"]["etl"]["recorded_error"] == -0.13
    doc["policy_run"]["peak_nodes"] = {"ml": 3}  # recorded in the results: wins over the log
    assert errors(doc, peak_nodes(doc, log)) is None


def test_the_speed_probe_measures_steps_per_cpu_second_and_stops():
    import threading
    import time

    from bench.speed_probe import SpeedProbe

    t0 = time.time()
    with SpeedProbe(every_s=0.05, steps=2000) as probe:
        deadline = time.monotonic() + 30
        while len(probe.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    n = len(probe.samples)
    time.sleep(0.2)
    assert len(probe.samples) == n >= 3, "the probe did not stop"
    assert not any(t.name == "speed-probe" and t.is_alive() for t in threading.enumerate())
    assert all(v > 1e4 for _, v in probe.samples)  # SHA-256 steps a CPU-second: millions on any machine
    assert probe.speed(t0, time.time()) > 1e4 and probe.speed(0, 1) is None


@pytest.mark.usefixtures("root_and_cgroups")  # conftest: fails under CI, skips elsewhere
def test_the_host_probe_measures_what_its_quota_lets_it_do_per_wall_second():
    import time

    from bench.speed_probe import HostProbe
    from fawkes.lab import cgroup

    with HostProbe("fwtest-probe-lo", 0.1, every_s=1.0, busy_s=0.5) as lo, \
            HostProbe("fwtest-probe-hi", 0.4, every_s=1.0, busy_s=0.5) as hi:
        time.sleep(4.5)
    now = time.time()
    assert len(lo.samples) >= 3 and len(hi.samples) >= 3, (lo.samples, hi.samples)
    ratio = hi.speed(0, now) / lo.speed(0, now)
    assert 2.0 < ratio < 6.0, ratio  # four times the quota: about four times the steps a wall second
    assert not cgroup.group_dir("fwtest-probe-lo", "probe").parent.exists()  # its group removed
    assert lo.speed(now + 1, now + 2) is None


def test_a_probes_speed_ratio_scales_the_none_runs_slowdowns_to_the_policy_runs_speed():
    from bench.bench_twin_heldout import by_probe

    class Probe:
        samples = [(5.0, 100.0), (15.0, 80.0)]

        def speed(self, start, end):
            got = [v for t, v in self.samples if start <= t <= end]
            return got[0] if got else None

    plan = heldout_plan(3)
    a, b = loaded(plan)
    runs = {"td-damped": {"start": 0, "end": 10}, "None": {"start": 10, "end": 20}}
    predicted = {k: {"cluster_mean_slowdown": {a: 1.0, b: 1.0}} for k in ("policy", "None")}
    none_run = {"slowdowns": {a: 1.25, b: 1.0}}
    fig, cmp = by_probe(Probe(), runs, "td-damped", "steps_per_wall_s", (predicted, none_run,
                                                                          {"slowdowns": {a: 0.9, b: 0.9}}, plan))
    assert fig["steps_per_wall_s"] == {"td-damped": 100.0, "None": 80.0} and fig["none_slower_by"] == 1.25
    # the None run ran at 0.8 of the policy run's speed: its 1.25 is 1.0 at the speed the twin was fed
    assert {r["cluster"]: round(r["measured"], 9) for r in cmp["rows"]} == {a: 1.0, b: 0.8}
    assert by_probe(Probe(), {"td-damped": runs["td-damped"]}, "td-damped", "x", None)[1] is None
