"""``fawkes trace from-state`` and ``fawkes simulate --cost-file``: the coordinator's history as the
simulator's input (no lab: a state written row by row), and bad input refused in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fawkes.traces.from_state import export, job_tasks
from fawkes.store import Store
from fawkes.store.schema import DecisionRecord, Host, Job, MRCluster, Node, NodeTransition, Sample
from tests.conftest import run_cli

T0 = 1_800_000_000.0


def _state(path: Path) -> str:
    """Two clusters (min 1) on 4 hosts of 1 core; 3 jobs on etl, 1 on bi; a TC node grown and shrunk."""
    url = f"sqlite:///{path}"
    store = Store(url)
    with store.session(write=True) as s:
        for i in range(4):
            s.add(Host(name=f"h{i + 1}", address=f"10.0.0.{i + 1}", cores=1, memory_mb=2048,
                       state="allocated" if i < 2 else "free", position=i))
        for cid, name in ((1, "etl"), (2, "bi")):
            s.add(MRCluster(id=cid, name=name, live_name=name, framework="lab", min_core=1, state="active",
                            requested_at=T0 - 100, admitted_at=T0 - 100, active_at=T0 - 50, state_since=T0 - 50))
        s.flush()
        # core nodes, deployed (not counted as grows)
        for nid, (cid, host) in enumerate(((1, "h1"), (2, "h2")), start=1):
            s.add(Node(id=nid, cluster_id=cid, host=host, holds_host=host, role="core", state="running",
                       requested_at=T0 - 90, running_at=T0 - 60, state_since=T0 - 60))
        # a TC node of etl: requested at +5, running at +25, draining at +100, released at +108
        s.add(Node(id=3, cluster_id=1, host="h3", role="transient-core", state="released", requested_at=T0 + 5,
                   running_at=T0 + 25, draining_at=T0 + 100, released_at=T0 + 108, state_since=T0 + 108))
        s.flush()
        for to, at in (("requested", 5), ("provisioning", 6), ("running", 25), ("draining", 100), ("released", 108)):
            s.add(NodeTransition(node_id=3, to_state=to, time=T0 + at))
        # jobs: (cluster, submitted, dispatched, ended); etl runs them one after the other
        jobs = [(1, 0, 1, 40), (1, 10, 41, 70), (1, 20, 71, 90), (2, 30, 31, 80)]
        for jid, (cid, sub, disp, end) in enumerate(jobs, start=1):
            s.add(Job(id=jid, cluster_id=cid, argv=["app.py"], input_path="/input", input_bytes=1000, state="succeeded",
                      submitted_at=T0 + sub, dispatched_at=T0 + disp, started_at=T0 + disp + 5, ended_at=T0 + end,
                      ref_runtime=50.0))
        s.add(Job(id=5, cluster_id=2, argv=["app.py"], state="failed", submitted_at=T0 + 35, ended_at=T0 + 36))
        # samples every 2 s: while a job runs (from dispatch + 10 s to its end - 4 s), 2 tasks run;
        # completed grows by one per sample
        for cid, runs in ((1, jobs[:3]), (2, jobs[3:])):
            for t in range(-10, 130, 2):
                run = next(((d, e) for c, _, d, e in runs if d <= t <= e), None)
                busy = run is not None and run[0] + 10 <= t <= run[1] - 4
                done = (t - run[0] - 10) // 2 if busy else 0
                s.add(Sample(cluster_id=cid, time=T0 + t, running_tasks=2 if busy else 0,
                             completed_tasks=max(0, done)))
        for k in range(14):
            s.add(DecisionRecord(time=T0 + 10 * k, policy="TD", plan={}))
    store.close()
    return url


def test_job_tasks_integrates_running_tasks():
    class S:
        def __init__(self, t, r, c, slots=0.0):
            self.time, self.running_tasks, self.completed_tasks, self.configured_slots = t, r, c, slots

    jt = job_tasks([S(0, 0, 0), S(2, 2, 0), S(4, 2, 1), S(6, 1, 3), S(8, 0, 4)], 0, 10, 2.0)
    assert jt.tasks == 4 and jt.slot_s == pytest.approx(10.0) and jt.span_s == pytest.approx(6.0)
    # a late sample: the tasks ran until it; never more running than the cluster's slots
    jt = job_tasks([S(0, 1, 0, 1.0), S(2, 2, 0, 1.0), S(12, 1, 3, 1.0), S(14, 0, 4, 1.0)], 0, 20, 2.0)
    assert jt.slot_s == pytest.approx(2 + 10 + 2)
    assert job_tasks([], 0, 10, 2.0) is None
    # a second node registered at +2 (2 configured slots) whose executor is up only at +6: the tasks the
    # driver lists beyond the usable slots before then are not slot time
    two = [S(0, 1, 0, 1.0), S(2, 2, 0, 2.0), S(4, 2, 1, 2.0), S(6, 2, 2, 2.0), S(8, 0, 4, 2.0)]
    assert job_tasks(two, 0, 10, 2.0).slot_s == pytest.approx(2 + 4 + 4 + 4)
    assert job_tasks(two, 0, 10, 2.0, usable=lambda t: 1.0 if t < 6 else 2.0).slot_s == pytest.approx(2 + 2 + 2 + 4)


def test_one_task_stages_with_free_slots_are_serial_time():
    class S:
        def __init__(self, t, r, c, slots):
            self.time, self.running_tasks, self.completed_tasks, self.configured_slots = t, r, c, slots

    def run(slots, usable=None):
        # a one-task stage (+0..+4), the driver between stages (+4..+5), 4 tasks at once (+5..+7), done
        return job_tasks([S(0, 1, 0, slots), S(4, 0, 1, slots), S(5, 4, 1, slots), S(7, 0, 5, slots)], 0, 8, 2.0,
                         usable=usable)

    jt = run(4)
    assert jt.tasks == 5 and jt.serial_s == pytest.approx(4 + 1) and jt.slot_s == pytest.approx(4 * 2)
    assert jt.serial_idle_s == pytest.approx(1)  # of it, the driver between stages: no task ran
    # on one slot nothing is serial: the one task fills the cluster, and the 4 tasks ran one at a time
    jt = run(1)
    assert jt.serial_s == 0 and jt.serial_idle_s == 0 and jt.slot_s == pytest.approx(1 * 4 + 0 * 1 + 1 * 2)
    # 4 slots configured but one executor up: the same as one slot
    assert run(4, usable=lambda t: 1.0).serial_s == 0
    # slots unknown (no worker counted, no usable slots given): nothing is called serial
    assert run(0).serial_s == 0
    # the tail of a wave (no task to come) is not serial: the replay's slots reproduce it
    tail = job_tasks([S(0, 4, 0, 4), S(2, 1, 4, 4), S(4, 0, 5, 4)], 0, 6, 2.0)
    assert tail.serial_s == 0 and tail.slot_s == pytest.approx(4 * 2 + 1 * 2)


def test_export_reads_jobs_tasks_and_node_costs(tmp_path):
    url = _state(tmp_path / "s.db")
    store = Store(url)
    ex = export(store)
    store.close()
    assert [r.cluster for r in ex.rows] == ["etl", "etl", "etl", "bi"]
    assert [r.submit_s for r in ex.rows] == [0, 10, 20, 30]
    first = ex.rows[0]
    assert first.ref_runtime_s == 50.0 and first.reduces == 0 and first.job == "1"
    # job 1 ran from +1 to +40: tasks seen from +12 to +36, 2 at a time by the samples; but etl had 1
    # core (h1) until its TC node's executor was up (node running at +25, + an executor's start of
    # 5 s, below): 1 slot from +12 to +30, 2 from +30 to +38 (the last sample's tasks run to the next)
    assert first.maps == 2 + (36 - 11) // 2 and first.map_s * first.maps == pytest.approx(18 + 16, abs=0.1)
    assert ex.costs["map_slots"] == 1 and ex.costs["reduce_slots"] == 1
    # the TC node: running 20 s after its request, + an executor's start (application registered at
    # dispatch + 5 s, first task seen 11 s after dispatch, less half a sample period)
    assert ex.costs["tc_ready_s"] == 20 + 5 and ex.costs["dp_fixed_s"] == 8
    # dispatch +1, first sample with a task +12, last +36, end +40; samples every 2 s
    assert ex.costs["job_startup_s"] == 10 and ex.costs["job_overhead_s"] == 3 and ex.costs["max_running_jobs"] == 1
    assert [r.startup_s for r in ex.rows] == [10, 10, 10, 10]  # each job's own (here all alike)
    assert ex.minima == {"etl": 1, "bi": 1} and ex.capacity == 4 and ex.period_s == 10
    assert ex.policies == ["TD"] and ex.skipped == {"failed": 1}


def test_export_counts_a_jobs_own_tasks_and_the_time_per_attempt(tmp_path):
    """A job whose samples saw more attempts than it has tasks (re-runs after a shrink; its stored
    tasks_seen takes each task once) is exported with its own tasks, at the slot time per attempt."""
    url = _state(tmp_path / "s.db")
    store = Store(url)
    before = export(store).rows[0]
    with store.session(write=True) as s:
        s.get(Job, 1).tasks_seen = 10
    after = export(store).rows[0]
    store.close()
    assert before.maps == 14 and after.maps == 10 and after.map_s == before.map_s


def test_cli_writes_trace_costs_clusters_and_the_replay_runs(tmp_path):
    url = _state(tmp_path / "s.db")
    out, costs, cl = tmp_path / "t.csv", tmp_path / "c.yaml", tmp_path / "cl.csv"
    r = run_cli("trace", "from-state", "--state", url, "-o", str(out), "--costs", str(costs), "--clusters", str(cl))
    assert r.returncode == 0, r.stderr
    assert "replay: fawkes simulate --trace" in r.stderr and "--cost-file" in r.stderr
    assert out.read_text().splitlines()[0].startswith("submit_s,cluster,app,input_bytes,maps,reduces")
    assert "tc_ready_s: 25" in costs.read_text()
    assert cl.read_text() == "cluster,request_s,min_core,tasks_known\netl,0,1,0\nbi,0,1,0\n"
    r = run_cli("simulate", "--trace", str(out), "--clusters", str(cl), "--cost-file", str(costs), "--capacity", "4",
                "--min-core", "1", "--period", "10", "--compare", "None,TD", "--json", "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["policy"] for x in rows] == ["None", "TD"]
    assert rows[0]["cost"]["tc_ready_s"] == 25 and rows[0]["cost"]["map_slots"] == 1
    # --cost wins over the file
    r = run_cli("simulate", "--trace", str(out), "--cost-file", str(costs), "--cost", "tc_ready_s=3", "--capacity", "4",
                "--min-core", "1", "--period", "10", "--json", "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr and json.loads(r.stdout)["cost"]["tc_ready_s"] == 3


def test_tasks_known_are_what_finished_runs_of_the_program_reported_before_the_window(tmp_path):
    url = _state(tmp_path / "s.db")
    store = Store(url)
    with store.session(write=True) as s:
        for jid, seen in ((1, 15), (2, 40), (4, 9)):  # job 2 ends after the window below starts
            s.get(Job, jid).tasks_seen = seen
        s.add(Job(id=6, cluster_id=1, argv=["other.py"], state="succeeded", submitted_at=T0 - 80,
                  ended_at=T0 - 60, tasks_seen=99))  # another program: not what etl's jobs count
    ex = export(store, since=T0 + 15)  # etl's job 3 (+20) and bi's job 4 (+30); etl's job 1 ended at +40
    store.close()
    assert [r.job for r in ex.rows] == ["3", "4"]
    assert ex.tasks_known == {}  # ended before the window began (+15): none
    store = Store(url)
    with store.session(write=True) as s:
        s.add(Job(id=7, cluster_id=1, argv=["app.py"], input_path="/input", state="succeeded", submitted_at=T0 + 100,
                  dispatched_at=T0 + 101, started_at=T0 + 102, ended_at=T0 + 125, ref_runtime=50.0))
        s.add(Sample(cluster_id=1, time=T0 + 112, running_tasks=2, completed_tasks=0))
    ex = export(store, since=T0 + 95)
    store.close()
    assert [r.job for r in ex.rows] == ["7"] and ex.tasks_known == {"etl": 40}  # job 2's 40, not other.py's 99
    assert ex.clusters_csv() == "cluster,request_s,min_core,tasks_known\netl,0,1,40\n"


def test_since_until_select_jobs(tmp_path):
    url = _state(tmp_path / "s.db")
    r = run_cli("trace", "from-state", "--state", url, "--since", str(T0 + 5), "--until", "2027-01-16T00:00:00Z", "-q")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1 + 3
    r = run_cli("trace", "from-state", "--state", url, "--since", "1d", "-q")  # T0 is in 2027: all of them
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 5


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("opt,value,needle", [
    ("--since", "yesterday", "--since"), ("--since", "nan", "--since"), ("--since", "inf", "--since"),
    ("--since", "-5", "--since"), ("--until", "1e300", "--until"), ("--since", "2026-13-45", "--since"),
    ("--since", "99999999999d", "100 years"), ("--since", "", "--since"),
])
def test_bad_dates_one_line_nothing_written(tmp_path, opt, value, needle):
    url = _state(tmp_path / "s.db")
    out = tmp_path / "t.csv"
    r = run_cli("trace", "from-state", "--state", url, opt, value, "-o", str(out))
    _one_line_error(r, needle)
    assert not out.exists()


def test_missing_or_bad_state_creates_nothing(tmp_path):
    out = tmp_path / "t.csv"
    missing = tmp_path / "nope" / "x.db"
    r = run_cli("trace", "from-state", "--state", str(missing), "-o", str(out))
    _one_line_error(r, "no such file")
    assert not missing.exists() and not missing.parent.exists() and not out.exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    r = run_cli("trace", "from-state", "--state", str(junk), "-o", str(out))
    _one_line_error(r, "not an SQLite database")
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    r = run_cli("trace", "from-state", "--state", str(fifo), "-o", str(out))
    _one_line_error(r, "not a regular file")
    empty = tmp_path / "empty.db"
    Store(f"sqlite:///{empty}").close()
    r = run_cli("trace", "from-state", "--state", str(empty), "-o", str(out))
    _one_line_error(r, "no finished job")
    assert not out.exists()


def test_bad_outputs(tmp_path):
    url = _state(tmp_path / "s.db")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    r = run_cli("trace", "from-state", "--state", url, "-o", str(fifo))
    _one_line_error(r, "not a regular file")
    r = run_cli("trace", "from-state", "--state", url, "-o", str(tmp_path / "no" / "t.csv"))
    _one_line_error(r, "no such directory")
    same = tmp_path / "same"
    r = run_cli("trace", "from-state", "--state", url, "-o", str(same), "--costs", str(same))
    _one_line_error(r, "the same file")
    assert not same.exists()


@pytest.mark.parametrize("text,needle", [
    ("map_slots: .nan\n", "map_slots: not a finite number"),
    ("fp_stop_s: .inf\n", "fp_stop_s: not a finite number"),
    ("tc_ready_s: -3\n", "tc_ready_s"),
    ("tr_ready_s: 1e300\n", "out of range"),
    ("map_slots: 0\n", "map_slots"),
    ("no_such_field: 1\n", "unknown cost parameter"),
    ("apps: {wordcount: {beta_in: -1}}\n", "apps.wordcount.beta_in"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("map_slots: [1\n", "not YAML"),
    ("map_slots: 1\0\n", "NUL byte"),
    ("tc_ready_s: ten\n", "tc_ready_s"),
])
def test_bad_cost_files(tmp_path, text, needle):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces\n0,a,wordcount,1GB,4,1\n")
    cf = tmp_path / "c.yaml"
    cf.write_bytes(text.encode())
    r = run_cli("simulate", "--trace", str(trace), "--cost-file", str(cf), "--capacity", "4", "--min-core", "1",
                "--period", "10", "-q")
    _one_line_error(r, str(cf), needle)


def test_cost_file_fifo_and_missing(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces\n0,a,wordcount,1GB,4,1\n")
    fifo = tmp_path / "c.fifo"
    os.mkfifo(fifo)
    args = ["simulate", "--trace", str(trace), "--capacity", "4", "--min-core", "1", "--period", "10", "-q"]
    _one_line_error(run_cli(*args, "--cost-file", str(fifo)), "not a regular file")
    _one_line_error(run_cli(*args, "--cost-file", str(tmp_path / "none.yaml")), "cost file not found")


def test_twin_runs_one_job_at_a_time_after_its_start_up(tmp_path):
    """The live dispatcher's gate (SimCluster.submit): 3 jobs of 4 x 10 s tasks on one 4-slot node, submitted
    together: the plain model runs them back to back and adds the overhead at the end; the twin
    waits for each job's end plus the start-up of the next."""
    from fawkes.sim.costs import cost_model
    from fawkes.sim.runner import parse_policy, run_matrix
    from fawkes.traces.trace import load_trace

    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces,ref_runtime_s,map_s\n"
                     + "".join("0,a,wordcount,0,4,0,10,10\n" for _ in range(3)))
    base = (("map_slots", 4), ("cv", 0.0), ("job_overhead_s", 5.0))
    twin = base + (("max_running_jobs", 1), ("job_startup_s", 20.0))
    spec = [parse_policy("None")]
    plain, gated = (run_matrix("t", spec, [1], workload=load_trace(trace, capacity=1, min_core=1, period_s=10,
                                                                   cost=cost_model(c)))
                    for c in (base, twin))
    assert plain["None"][0].mean_response_s == pytest.approx((15 + 25 + 35) / 3)
    assert gated["None"][0].mean_response_s == pytest.approx((35 + 70 + 105) / 3)


def test_twin_uses_each_jobs_own_start_up(tmp_path):
    """A live export carries each job's measured start-up (``startup_s``): the gate waits that long for
    that job, the cost model's ``job_startup_s`` only for rows without one; written and read back."""
    from fawkes.sim.costs import cost_model
    from fawkes.sim.runner import parse_policy, run_matrix
    from fawkes.traces.trace import load_trace, write_trace

    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces,ref_runtime_s,map_s,startup_s\n"
                     "0,a,wordcount,0,4,0,10,10,\n0,a,wordcount,0,4,0,10,10,50\n0,a,wordcount,0,4,0,10,10,0\n")
    cost = cost_model((("map_slots", 4), ("cv", 0.0), ("job_overhead_s", 5.0), ("max_running_jobs", 1),
                       ("job_startup_s", 20.0)))
    wl = load_trace(trace, capacity=1, min_core=1, period_s=10, cost=cost)
    assert [j.startup_s for j in wl.jobs] == [None, 50, 0]
    res = run_matrix("t", [parse_policy("None")], [1], workload=wl)
    # job 1: 20 s start-up (the cost model's), tasks 20-30, end 35; job 2: 35 + 50, tasks to 95, end 100;
    # job 3: no start-up, tasks 100-110, end 115
    assert res["None"][0].mean_response_s == pytest.approx((35 + 100 + 115) / 3)
    out = tmp_path / "again.csv"
    with out.open("w") as f:
        write_trace(getattr(wl, "_rows"), f)
    assert [j.startup_s for j in load_trace(out, capacity=1, min_core=1, period_s=10, cost=cost).jobs] == [None, 50, 0]


def test_the_simulators_sampler_starts_from_tasks_known(tmp_path):
    from fawkes.sim import engine, runner
    from fawkes.traces.trace import load_trace

    (tmp_path / "t.csv").write_text("submit_s,cluster,app,input_bytes,maps,reduces,startup_s\n0,a,wordcount,0,8,0,60\n"
                                    "0,b,wordcount,0,8,0,60\n")
    (tmp_path / "c.csv").write_text("cluster,request_s,min_core,tasks_known\na,0,1,15\nb,0,1,\n")
    wl = load_trace(tmp_path / "t.csv", capacity=4, min_core=1, period_s=10, clusters_file=tmp_path / "c.csv")
    assert {c.name: c.tasks_known for c in wl.clusters} == {"a": 15, "b": 0}
    sim = engine.Simulator(wl, runner.settings_for(wl, runner.parse_policy("TD", wl.name)), refs=[100.0, 100.0], seed=1)
    assert sim.clusters["a"].learned == 15 and sim.clusters["b"].learned == 0


def test_master_factor_from_where_jobs_tasks_ran(tmp_path):
    """Jobs that say where their tasks ended (``jobs.task_time``, from Spark's /allexecutors): the cost
    file's ``master_task_factor`` is the median over jobs with tasks on both sides of the ratio of their
    mean task times, and a row's ``map_s`` becomes a task's time on another node, so that the replay (the
    master's tasks f times as long) keeps the job's mean at its share of tasks on the master; all of it only
    with ``master_factor`` (``--master-factor``): by default measured and shown, the rows and costs as before."""
    url = _state(tmp_path / "s.db")
    before = Store(url)
    plain = export(before)
    before.close()
    assert "master_task_factor" not in plain.costs  # no job says where its tasks ran: the thesis' model
    store = Store(url)
    with store.session(write=True) as s:
        # etl's jobs: 1.5x, 1.2x and (too few tasks on the master to count) 9x; bi's: all on the master
        for jid, tt in ((1, {"master": [4, 30.0], "other": [8, 40.0]}), (2, {"master": [3, 18.0], "other": [6, 30.0]}),
                        (3, {"master": [1, 45.0], "other": [10, 50.0]}), (4, {"master": [13, 91.0], "other": [0, 0.0]})):
            s.get(Job, jid).task_time = tt
    off = export(store)  # measured and shown, not applied (the default since the held-out seeds of 2026-11-28)
    ex = export(store, master_factor=True)
    store.close()
    assert off.master_factor == (1.35, 2) and not off.master_factor_applied
    assert "master_task_factor" not in off.costs and [r.map_s for r in off.rows] == [r.map_s for r in plain.rows]
    assert "# master_task_factor: 1.35  measured over 2 jobs, not applied" in off.cost_text()
    assert ex.costs["master_task_factor"] == pytest.approx(1.35)  # median of 1.5 and 1.2
    assert ex.measured["master_task_factor"] == "2 jobs"
    f = 1.35
    for row, old, q in zip(ex.rows, plain.rows, (4 / 12, 3 / 9, 1 / 11, 1.0)):
        assert row.map_s == pytest.approx(old.map_s / (q * f + 1 - q), abs=0.002)
    assert "master_task_factor: 1.35  # median over jobs" in ex.cost_text()


def test_master_factor_in_the_replay_slows_the_masters_tasks_only(tmp_path):
    """The simulator runs a task on a cluster's master node (its first core node) ``master_task_factor``
    times as long, and no other node's: one job of 8 tasks of 10 s, cv 0, one slot per node; on the master
    alone it takes f x 80 s; with a second core node only the master's tasks slow."""
    from fawkes.sim.costs import PER_CLUSTER, CostModel

    assert CostModel().master_task_factor == 1.0 and "master_task_factor" in PER_CLUSTER
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces,ref_runtime_s,map_s\n"
                     "0,a,wordcount,0,8,0,80,10\n")

    def response(factor: float, nodes: int) -> float:
        r = run_cli("simulate", "--trace", str(trace), "--cost", "cv=0", "--cost", "map_slots=1",
                    "--cost", "job_overhead_s=0", "--cost", f"master_task_factor={factor}",
                    "--cost", "penalty=off", "--cost", "tr_ready_s=0", "--cost", "tc_ready_s=0",
                    "--capacity", str(nodes), "--min-core", str(nodes), "--period", "5", "--policy", "None",
                    "--json", "-q", "--workers", "1")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["cluster_mean_slowdown"]["a"] * 80

    assert response(1, 1) == pytest.approx(80, abs=1)
    assert response(2, 1) == pytest.approx(160, abs=1)  # every task on the master
    # two core nodes: the second's tasks are not slowed (10 s each against the master's 20 s: it runs 5 or 6
    # of the 8 where each ran 4)
    assert response(1, 2) == pytest.approx(40, abs=1)
    assert 50 <= response(2, 2) <= 61
    for bad in ("0", "-1", "nan", "inf", "1e30"):
        r = run_cli("simulate", "--trace", str(trace), "--cost", f"master_task_factor={bad}", "--capacity", "1",
                    "--min-core", "1", "--policy", "None", "-q")
        assert r.returncode == 2 and "master_task_factor" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_from_state_shows_a_measured_master_factor_and_applies_it_on_request(tmp_path):
    url = _state(tmp_path / "s.db")
    store = Store(url)
    with store.session(write=True) as s:
        for jid, tt in ((1, {"master": [4, 30.0], "other": [8, 40.0]}), (2, {"master": [3, 18.0], "other": [6, 30.0]})):
            s.get(Job, jid).task_time = tt
    store.close()
    for flag, in_costs in (([], False), (["--master-factor"], True)):
        costs = tmp_path / f"c{len(flag)}.yaml"
        r = run_cli("trace", "from-state", "--state", url, "-o", str(tmp_path / "t.csv"), "--costs", str(costs), *flag)
        assert r.returncode == 0, r.stderr
        assert ("master_task_factor=1.35" in r.stderr.split("measured: ")[1].splitlines()[0]) is in_costs
        assert ("measured, not applied: master_task_factor=1.35 over 2 jobs" in r.stderr) is not in_costs
        assert (costs.read_text().count("\nmaster_task_factor: 1.35") == 1) is in_costs
