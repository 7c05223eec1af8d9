"""The Spark-like job model (fawkes/sim/stages.py): stages with barriers, executors held at a
stage's tail, a killed task re-run in its stage, shuffle output lost with a node; its calibration
from the Spark event logs fawkes imports (fawkes/traces/spark_stages.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fawkes.mechanism.model import Plan, Role, Shrink, ShrinkMode
from fawkes.sim import stages
from fawkes.sim.costs import GB, cost_model
from fawkes.sim.engine import Simulator
from fawkes.sim.workloads import JobSpec, Workload, WorkloadCluster
from fawkes.traces.spark_stages import calibrate

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "fixtures" / "eventlogs"
GAP = stages.STAGE_GAP_S
OVERHEAD = 8.0  # the cost model's job overhead


def _run(model, jobs, tr=0, shrink_at=None):
    """Cluster A of one core node (and ``tr`` TR nodes), 6 map + 2 reduce slots a node; ``jobs`` are
    (submit, map durations, reduce durations); a TR node taken by FP at ``shrink_at``."""
    cost = cost_model((), map_slots=6, reduce_slots=2)
    specs = [JobSpec(k, "A", "wordcount", 1 * GB, len(m), len(r), sub, map_d=m, red_d=r)
             for k, (sub, m, r) in enumerate(jobs)]
    cl = WorkloadCluster("A", 0.0, 1, static={Role.CORE: 1, **({Role.TR: tr} if tr else {})}, job_model=model)
    sim = Simulator(Workload("micro", (cl,), tuple(specs), 1 + tr, controller="static", cost=cost), None)
    if shrink_at is not None:
        def take(s, t):
            n = next(n for n in s.clusters["A"].nodes.values() if n.role is Role.TR)
            s._execute(Plan(shrinks=(Shrink("A", n.host, Role.TR, ShrinkMode.FP),)), t)
        sim.at(shrink_at, take)
    sim.run()
    c = sim.clusters["A"]
    assert c.free_map == sum(n.free_map for n in c.nodes.values())
    return {j.id: (j.started, j.end) for j in sim.done_jobs}, sim.stats


def test_a_stage_starts_when_the_one_before_has_finished():
    # 12 maps of 100 s on 6 cores: two waves; the 2 reduces run after the second, the logs' gap later
    got, _ = _run("spark", [(0.0, (100.0,) * 12, (10.0,) * 2)])
    assert got[0][1] == pytest.approx(200.0 + GAP + 10.0 + OVERHEAD)
    mr, _ = _run("mr", [(0.0, (100.0,) * 12, (10.0,) * 2)])  # MR: the reduces copy during the maps
    assert mr[0][1] == 212.0


def test_executors_idle_at_a_stage_tail_stay_with_their_job_until_the_idle_timeout():
    # job 0: one map of 100 s and five of 10 s; job 1 (five maps of 10 s) comes at 1 s
    jobs = [(0.0, (100.0,) + (10.0,) * 5, (5.0,)), (1.0, (10.0,) * 5, ())]
    spark, _ = _run("spark", jobs)
    assert spark[1][0] == 10.0 + stages.EXECUTOR_IDLE_S  # held from 10 s, released idle after 60 s
    assert spark[0][1] == pytest.approx(100.0 + GAP + 5.0 + OVERHEAD)
    mr, _ = _run("mr", jobs)
    assert mr[1][0] == 10.0  # MR: a freed slot goes to the next job at once


def test_a_killed_task_reruns_on_its_jobs_held_cores_and_holds_back_its_stage():
    # job 0: six maps of 10 s (core node) and six of 100 s (TR node) then a reduce; job 1 at 20 s;
    # the TR node is taken at 50 s: its six maps are killed and re-run at once on the cores job 0 holds
    jobs = [(0.0, (10.0,) * 6 + (100.0,) * 6, (5.0,)), (20.0, (200.0,) * 6, ())]
    spark, st = _run("spark", jobs, tr=1, shrink_at=50.0)
    assert st.killed_tasks == 6 and st.wasted_s == 6 * 50.0
    assert spark[1][0] == 150.0  # job 1 gets the cores when job 0's map stage ends (re-runs 50-150 s)
    assert spark[0][1] == 350.0 + 5.0 + OVERHEAD  # its reduce, FIFO after job 1's maps took every core
    mr, _ = _run("mr", jobs, tr=1, shrink_at=50.0)
    assert mr[1][0] == 20.0


def test_shuffle_output_lost_with_a_node_reruns_its_maps_and_fails_the_reading_stage():
    # 12 maps of 10 s (6 on the core node, 6 on the TR node), 2 reduces of 100 s from 10.13 s; the TR
    # node leaves at 50 s with 6 map outputs: the 2 reduces fail to fetch (killed), the 6 maps re-run
    # (50-60 s), the reduces again from 60.13 s
    spark, st = _run("spark", [(0.0, (10.0,) * 12, (100.0,) * 2)], tr=1, shrink_at=50.0)
    assert st.lost_maps == 6 and st.killed_tasks == 2
    assert st.wasted_s == pytest.approx(2 * (50.0 - 10.0 - GAP))
    assert spark[0][1] == pytest.approx(60.0 + GAP + 100.0 + OVERHEAD)
    _, mr = _run("mr", [(0.0, (10.0,) * 12, (100.0,) * 2)], tr=1, shrink_at=50.0)
    assert mr.lost_maps == 0  # MR: the running reduces had copied them


def test_the_calibration_is_what_the_event_logs_say():
    got = calibrate([LOGS / "etl", LOGS / "bi", LOGS / "spark-tests"])
    assert got["boundaries"] == 8 and got["overlap_violations"] == 0 and got["same_executors"] == 8
    assert stages.STAGE_GAP_S == round(got["gap_s_mean"], 2)
    stored = json.loads((ROOT / "bench/results/spark_stage_calibration_2026-11-27.json").read_text())
    assert stored["gap_s_mean"] == got["gap_s_mean"] and stored["overlap_violations"] == 0


def test_the_job_model_is_chosen_per_cluster_or_per_job():
    cost = cost_model((), map_slots=6, reduce_slots=2)
    jobs = (JobSpec(0, "A", "wordcount", GB, 6, 1, 0.0, map_d=(10.0,) * 6, red_d=(5.0,)),
            JobSpec(1, "A", "wordcount", GB, 6, 1, 0.0, map_d=(10.0,) * 6, red_d=(5.0,), model="spark"))
    wl = Workload("m", (WorkloadCluster("A", 0.0, 1, static={Role.CORE: 1}),), jobs, 1, controller="static", cost=cost)
    sim = Simulator(wl, None)
    seen = {}
    sim.at(1.0, lambda s, t: seen.update({j.id: j.staged for j in s.jobs.values()}))
    sim.run()
    assert seen == {0: False, 1: True}


KW = dict(capacity=8, min_core=1, period_s=60.0)


@pytest.mark.parametrize("value", ["x", "nan", "Spark ", "1e30", "-1", "mr\x00"])
def test_a_trace_rows_model_is_mr_or_spark_else_refused_naming_the_column(tmp_path, value):
    from fawkes.errors import ConfigError
    from fawkes.traces.trace import load_trace

    p = tmp_path / "t.csv"
    p.write_text("submit_s,cluster,app,input_bytes,maps,reduces,model\n0,a,wordcount,1GB,8,1," + value + "\n")
    with pytest.raises(ConfigError) as e:
        load_trace(p, **KW)
    assert e.value.field == "model" and e.value.line == 2 and "model" in str(e.value)


def test_a_trace_says_the_model_per_row_and_per_cluster(tmp_path):
    from fawkes.traces.trace import load_trace

    p = tmp_path / "t.csv"
    p.write_text("submit_s,cluster,app,input_bytes,maps,reduces,model\n0,a,wordcount,1GB,8,1,spark\n"
                 "0,a,wordcount,1GB,8,1,\n0,b,wordcount,1GB,8,1,\n")
    c = tmp_path / "c.csv"
    c.write_text("cluster,request_s,job_model\nb,0,spark\n")
    wl = load_trace(p, clusters_file=c, **KW)
    assert [j.model for j in wl.jobs] == ["spark", "", ""]
    assert {s.name: s.job_model for s in wl.clusters} == {"a": "mr", "b": "spark"}
    c.write_text("cluster,request_s,job_model\nb,0,hadoop\n")
    from fawkes.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load_trace(p, clusters_file=c, **KW)
    assert e.value.field == "job_model"


def test_simulate_refuses_a_job_model_it_does_not_know_or_where_it_does_not_apply():
    import subprocess
    import sys

    for args, word in ((["SIM-B2", "--job-model", "x"], "--job-model"), (["SIM-P1", "--job-model", "spark"], "SIM-P1"),
                       (["D", "--job-model", "spark"], "--job-model")):
        r = subprocess.run([sys.executable, "-m", "fawkes", "simulate", *args], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, (args, r.stderr)
