"""The twin of a mixed run (issue 24 item 4): ``fawkes trace from-state`` on a pool of clusters of
several framework kinds measures each kind's start-up, overhead and node costs on that kind's own
jobs and nodes, writes them per cluster (the cost file's ``clusters:``), and ``fawkes simulate``
replays every cluster under its own kind's costs.  No lab: a state written row by row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sqlmodel import select

from fawkes.sim.costs import cost_model
from fawkes.store import Store
from fawkes.store.schema import (
    DecisionRecord,
    Framework,
    Host,
    Job,
    MRCluster,
    Node,
    NodeTransition,
    Sample,
)
from fawkes.traces.from_state import export
from tests.conftest import run_cli

T0 = 1_800_000_000.0
REF = 30.0

#: per kind: (cluster, framework, kind, start-up S: dispatch -> first sample seeing a task, task seconds,
#: end - last sample seeing a task, application registered after dispatch, first dispatch,
#: its TR node's requested -> running and draining -> released)
KINDS = (
    ("spark", "lab", "spark-hdfs", 10, 4, 4, 5, 0, 10, 3),
    ("flink", "lab-flink", "flink-hdfs", 20, 4, 10, 4, 100, 20, 6),
    ("dask", "lab-dask", "dask", 6, 12, 6, 3, 200, 5, 1),
)
SAMPLE = 2  # seconds between samples
TASKS = 4  # per job, one at a time (hosts of one core)


def _jobs(disp0: int, startup: int, task_s: int, tail: int) -> list[tuple[int, int, int]]:
    """Two jobs, the second dispatched 10 s after the first ends: (dispatch, first busy sample, end)."""
    out = []
    disp = disp0
    for _ in range(2):
        first = disp + startup
        last = first + TASKS * task_s - SAMPLE
        out.append((disp, first, last + tail))
        disp = last + tail + 10
    return out


def mixed_state(path: Path, *, kind_of_dask: str = "dask", dask_release_s: float | None = None) -> str:
    """Three clusters (spark-hdfs, flink-hdfs, dask; minimum 1 core node of 1 core) on 6 hosts, two
    jobs each, one after the other, and a TR node each, grown and shrunk; every kind's start-up,
    task seconds, overhead and node times different (KINDS)."""
    url = f"sqlite:///{path}"
    store = Store(url)
    with store.session(write=True) as s:
        for fw, kind in (("lab", "spark-hdfs"), ("lab-flink", "flink-hdfs"), ("lab-dask", kind_of_dask)):
            s.add(Framework(name=fw, kind=kind, paths={}, created=T0 - 1000))
        for i in range(6):
            s.add(Host(name=f"h{i + 1}", address=f"10.0.0.{i + 1}", cores=1, memory_mb=2048,
                       state="allocated" if i < 3 else "free", position=i))
        s.flush()
        jid = 0
        for cid, (name, fw, _, startup, task_s, tail, reg, disp0, ready, stop) in enumerate(KINDS, start=1):
            s.add(MRCluster(id=cid, name=name, live_name=name, framework=fw, min_core=1, state="active",
                            requested_at=T0 - 100, admitted_at=T0 - 100, active_at=T0 - 50, state_since=T0 - 50))
            s.flush()
            s.add(Node(id=cid, cluster_id=cid, host=f"h{cid}", holds_host=f"h{cid}", role="core", state="running",
                       requested_at=T0 - 90, running_at=T0 - 60, state_since=T0 - 60))
            jobs = _jobs(disp0, startup, task_s, tail)
            # the TR node: requested 5 s after the first job's end, running `ready` s later, drained 10 s
            # after, released `stop` s after that
            req = jobs[0][2] + 5
            rel = dask_release_s if name == "dask" and dask_release_s is not None else req + ready + 10 + stop
            tr = 10 + cid
            s.add(Node(id=tr, cluster_id=cid, host=f"h{3 + cid}", role="transient", state="released",
                       requested_at=T0 + req, running_at=T0 + req + ready, draining_at=T0 + req + ready + 10,
                       released_at=T0 + rel, state_since=T0 + rel))
            s.flush()
            for to, at in (("requested", req), ("provisioning", req + 1), ("running", req + ready),
                           ("draining", req + ready + 10), ("released", rel)):
                s.add(NodeTransition(node_id=tr, to_state=to, time=T0 + at))
            for disp, first, end in jobs:
                jid += 1
                s.add(Job(id=jid, cluster_id=cid, argv=["job.py"], input_path="/input", input_bytes=1000,
                          state="succeeded", submitted_at=T0 + disp, dispatched_at=T0 + disp,
                          started_at=T0 + disp + reg, ended_at=T0 + end, ref_runtime=REF))
            for t in range(-10, 340, SAMPLE):
                run = next(((first, end) for _, first, end in jobs if first <= t <= end - tail), None)
                done = (t - run[0]) // task_s if run else 0
                s.add(Sample(cluster_id=cid, time=T0 + t, running_tasks=1 if run else 0, completed_tasks=done,
                             configured_slots=1.0))
        for k in range(35):
            s.add(DecisionRecord(time=T0 + 10 * k, policy="TD", plan={}))
    store.close()
    return url


def test_each_cluster_carries_its_own_kinds_costs(tmp_path):
    url = mixed_state(tmp_path / "s.db")
    store = Store(url)
    ex = export(store)
    store.close()
    assert ex.kinds == {"spark": "spark-hdfs", "flink": "flink-hdfs", "dask": "dask"}
    for name, _, kind, startup, task_s, tail, reg, _, ready, stop in KINDS:
        own = ex.cluster_costs[name]
        # a task starts half a sample period before a sample sees it, and ends half one after the last
        ex_s = startup - SAMPLE / 2 - reg  # application registered -> first task: this kind's executor start
        assert own == {"kind": kind, "job_startup_s": startup - SAMPLE / 2, "job_overhead_s": tail - SAMPLE / 2,
                       "tr_ready_s": ready + ex_s, "fp_stop_s": stop}, name
        rows = [r for r in ex.rows if r.cluster == name]
        assert [r.maps for r in rows] == [TASKS, TASKS] and [r.map_s for r in rows] == [task_s, task_s]
        assert [r.startup_s for r in rows] == [startup - SAMPLE / 2] * 2
    # the pool's figures stay (the medians over every kind), for what a cluster does not set
    assert ex.costs["job_overhead_s"] == 5 and ex.costs["map_slots"] == 1 and ex.costs["max_running_jobs"] == 1
    text = ex.cost_text()
    doc = yaml.safe_load(text)
    assert doc["clusters"]["dask"] == ex.cluster_costs["dask"] and doc["job_overhead_s"] == 5
    assert "of kind flink-hdfs" in text


def test_a_single_kind_export_has_no_per_cluster_section(tmp_path):
    url = mixed_state(tmp_path / "s.db", kind_of_dask="spark-hdfs")
    store = Store(url)
    with store.session(write=True) as s:  # every cluster of kind spark-hdfs
        s.get(Framework, "lab-flink").kind = "spark-hdfs"
    ex = export(store)
    store.close()
    assert ex.cluster_costs == {} and "clusters:" not in ex.cost_text()
    assert set(ex.kinds.values()) == {"spark-hdfs"}


def _replay(tmp_path: Path, costs: Path, policy: str = "None") -> dict[str, float]:
    r = run_cli("simulate", "--trace", str(tmp_path / "t.csv"), "--clusters", str(tmp_path / "cl.csv"),
                "--cost-file", str(costs), "--cost", "cv=0", "--capacity", "6", "--min-core", "1", "--period", "10",
                "--idle-timeout", "3600", "--policy", policy, "--json", "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["cluster_mean_slowdown"]


def test_from_state_writes_it_and_the_replay_follows_each_kind(tmp_path):
    url = mixed_state(tmp_path / "s.db")
    costs = tmp_path / "c.yaml"
    r = run_cli("trace", "from-state", "--state", url, "-o", str(tmp_path / "t.csv"), "--costs", str(costs),
                "--clusters", str(tmp_path / "cl.csv"))
    assert r.returncode == 0, r.stderr
    assert "measured for dask (its kind's): kind=dask" in r.stderr
    assert yaml.safe_load(costs.read_text())["clusters"]["flink"]["kind"] == "flink-hdfs"
    # live: each job's response (dispatch -> end; it was submitted at its dispatch) over R
    live = {name: (startup + TASKS * task_s - SAMPLE + tail) / REF
            for name, _, _, startup, task_s, tail, *_ in KINDS}
    twin = _replay(tmp_path, costs)
    for name, sd in live.items():  # one slot, no growth under None, no noise (cv 0): the twin is the live run
        assert twin[name] == pytest.approx(sd, rel=0.01), name
    # dask's tasks are 3x spark's: its replay is correspondingly longer
    assert twin["dask"] / twin["spark"] == pytest.approx(live["dask"] / live["spark"], rel=0.01)
    assert twin["dask"] > 2 * twin["spark"]
    # without the per-cluster section every cluster takes the pool's overhead (dask's 5 s): spark's and
    # flink's replays leave the live run
    pool = tmp_path / "pool.yaml"
    pool.write_text(yaml.safe_dump({k: v for k, v in yaml.safe_load(costs.read_text()).items() if k != "clusters"}))
    one = _replay(tmp_path, pool)
    assert one["dask"] == pytest.approx(twin["dask"])
    assert one["spark"] > twin["spark"] * 1.02 and one["flink"] < twin["flink"] * 0.98


def test_each_cluster_grows_at_its_own_kinds_pace(tmp_path):
    """Two clusters with the same job, one after the other: under TD both grow; the one whose kind's
    transient nodes take 300 s to serve is slower, the other one unchanged."""
    from fawkes.sim.runner import parse_policy, run_matrix
    from fawkes.traces.trace import load_trace

    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces,ref_runtime_s,map_s,startup_s\n"
                     "0,a,wordcount,0,40,0,100,20,5\n2000,b,wordcount,0,40,0,100,20,5\n")
    base = (("map_slots", 1), ("cv", 0.0), ("max_running_jobs", 1), ("tr_ready_s", 5.0), ("fp_stop_s", 1.0))

    def replay(*per_cluster):
        wl = load_trace(trace, capacity=6, min_core=1, period_s=10, grow="tr", idle_timeout_s=3600,
                        cost=cost_model(base + per_cluster))
        return run_matrix("t", [parse_policy("TD")], [1], workload=wl)["TD"][0].cluster_mean_slowdown

    same = replay()
    slow_b = replay(("clusters.b.tr_ready_s", 300.0), ("clusters.b.kind", "dask"))
    assert slow_b["a"] == pytest.approx(same["a"]) and slow_b["b"] > same["b"] * 1.3
    slow_a = replay(("clusters.a.tr_ready_s", 300.0))
    assert slow_a["b"] == pytest.approx(same["b"]) and slow_a["a"] > same["a"] * 1.3
    # the pool's own field is what a cluster without its own takes: the same as setting it for both
    both = replay(("clusters.a.tr_ready_s", 300.0), ("clusters.b.tr_ready_s", 300.0))
    assert both == pytest.approx(replay(("tr_ready_s", 300.0)))


def test_the_simulators_clusters_take_their_own_fields():
    from fawkes.sim import engine, runner
    from fawkes.sim.workloads import Workload, WorkloadCluster

    cost = cost_model((("fp_stop_s", 2.0), ("job_overhead_s", 8.0), ("clusters.b.fp_stop_s", 9.0),
                       ("clusters.b.job_overhead_s", 1.5), ("clusters.b.kind", "flink-hdfs")))
    wl = Workload("w", (WorkloadCluster("a", min_core=1, dataset_bytes=0), WorkloadCluster("b", min_core=1,
                                                                                           dataset_bytes=0)),
                  (), 4, period_s=10, cost=cost)
    sim = engine.Simulator(wl, runner.settings_for(wl, runner.parse_policy("None", wl.name)), refs=[], seed=1)
    a, b = sim.clusters["a"].cost, sim.clusters["b"].cost
    assert (a.fp_stop_s, a.job_overhead_s) == (2.0, 8.0) and (b.fp_stop_s, b.job_overhead_s) == (9.0, 1.5)
    assert b.tr_ready_s == a.tr_ready_s == cost.tr_ready_s  # what b does not set is the pool's


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("text,needle", [
    ("clusters: {a: {job_overhead_s: .nan}}\n", "clusters.a.job_overhead_s: not a finite number"),
    ("clusters: {a: {tr_ready_s: .inf}}\n", "clusters.a.tr_ready_s: not a finite number"),
    ("clusters: {a: {fp_stop_s: -3}}\n", "clusters.a.fp_stop_s"),
    ("clusters: {a: {job_startup_s: 1000000000000000000000000000000}}\n", "clusters.a.job_startup_s"),
    ("clusters: {a: {job_startup_s: 1e30}}\n", "clusters.a.job_startup_s"),
    ("clusters: {a: {job_startup_s: 5000000000.0}}\n", "clusters.a.job_startup_s"),
    ("clusters: {a: {kind: \"dask\\nx\"}}\n", "clusters.a.kind"),
    ("clusters: {a: {kind: \"dask\\0\"}}\n", "clusters.a.kind"),
    ("clusters: {\"a\\nb\": {dp_fixed_s: 1}}\n", "invalid cluster name"),
    ("clusters: {\"a\\0\": {dp_fixed_s: 1}}\n", "invalid cluster name"),
    ("clusters: {a: {map_slots: 2}}\n", "clusters.a.map_slots: not a per-cluster field"),
    ("clusters: {a: {kind: 5}}\n", "clusters.a.kind"),
    ("clusters: {a: 5}\n", "clusters.a: expected a mapping"),
    ("clusters: [a]\n", "clusters: expected a mapping"),
    ("clusters: {zz: {fp_stop_s: 1}}\n", "clusters.zz"),
])
def test_bad_per_cluster_costs_one_line(tmp_path, text, needle):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces\n0,a,wordcount,1GB,4,1\n")
    cf = tmp_path / "c.yaml"
    cf.write_bytes(text.encode())
    plot = tmp_path / "p.png"
    r = run_cli("simulate", "--trace", str(trace), "--cost-file", str(cf), "--capacity", "4", "--min-core", "1",
                "--period", "10", "-q", "--plot", str(plot))
    _one_line_error(r, needle)
    assert not plot.exists()


@pytest.mark.parametrize("item,needle", [
    ("clusters.a.job_overhead_s=nan", "clusters.a.job_overhead_s"),
    ("clusters.a.job_overhead_s=-1", "clusters.a.job_overhead_s"),
    ("clusters.a.kind=x\ny", "clusters.a.kind"),
    ("clusters.a b.kind=x", "invalid cluster name"),
])
def test_bad_per_cluster_cost_items_one_line(tmp_path, item, needle):
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,cluster,app,input_bytes,maps,reduces\n0,a,wordcount,1GB,4,1\n")
    r = run_cli("simulate", "--trace", str(trace), "--cost", item, "--capacity", "4", "--min-core", "1",
                "--period", "10", "-q")
    _one_line_error(r, needle)


@pytest.mark.parametrize("state,needle", [
    ({"kind_of_dask": "dask\nx"}, "clusters.dask.kind"),
    ({"kind_of_dask": "dask\0"}, "clusters.dask.kind"),
    ({"dask_release_s": 1e30}, "fp_stop_s"),  # a node released 1e30 s after its drain
    ({"dask_release_s": float("inf")}, "clusters.dask.fp_stop_s: not a finite number"),
    ({"dask_release_s": 250.0}, "fp_stop_s"),  # released before it drained: a negative stop
])
def test_from_state_refuses_what_the_replay_would_refuse_and_writes_nothing(tmp_path, state, needle):
    url = mixed_state(tmp_path / "s.db", **state)
    outs = [tmp_path / "t.csv", tmp_path / "c.yaml", tmp_path / "cl.csv"]
    r = run_cli("trace", "from-state", "--state", url, "-o", str(outs[0]), "--costs", str(outs[1]),
                "--clusters", str(outs[2]))
    _one_line_error(r, "--costs", needle)
    assert not any(p.exists() for p in outs)


def test_bench_twin_of_runs_replays_a_mixed_run(tmp_path):
    """bench/bench_twin_of_runs.py (bench_mixed_pool.py's last step) on a mixed run's state: the mixed
    plan's clusters, each replayed with its own kind's costs, under the policy that ran and None."""
    import importlib.util

    url = mixed_state(tmp_path / "s.db")
    store = Store(url)
    with store.session() as s:
        jobs = list(s.exec(select(Job).join(MRCluster)))
        names = {c.id: c.name for c in s.exec(select(MRCluster))}
    store.close()
    rows = [{"cluster": names[j.cluster_id], "submitted": j.submitted_at, "ended": j.ended_at,
             "slowdown": (j.ended_at - j.submitted_at) / REF} for j in jobs]
    live = {n: sum(r["slowdown"] for r in rows if r["cluster"] == n) / 2 for n in names.values()}
    (tmp_path / "runs.json").write_text(json.dumps({"runs": {"None": [{"slowdowns": live, "jobs": rows}]}}))
    spec = importlib.util.spec_from_file_location("bench_twin_of_runs",
                                                  Path(__file__).parent.parent / "bench" / "bench_twin_of_runs.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = tmp_path / "twin.json"
    assert bench.main(["--state", str(tmp_path / "s.db"), "--json", str(tmp_path / "runs.json"), "--seeds", "2",
                       "--out", str(tmp_path / "twin"), "--result", str(result)]) == 0
    mean = json.loads(result.read_text())["mean"]["None"]
    assert set(mean) == {"spark", "flink", "dask"}
    for name, v in mean.items():  # the replay's task noise (cv 0.3) over 2 seeds: within the 15 %
        assert abs(v["diff"]) < 0.15, (name, v)
    assert "clusters:" in (tmp_path / "twin" / "None-1" / "stream-costs.yaml").read_text()


def test_a_cluster_whose_jobs_left_no_task_gets_no_costs_of_its_own(tmp_path):
    """A cluster of a kind whose samples held no task of its jobs (the dask cluster of the mixed benchmark
    of 2026-11-27, sampled before the sampler took a Dask scheduler's cluster-wide counts) has no row in the
    trace: the export gives it no costs either (simulate refuses costs of a cluster with no job) and counts
    its jobs as skipped."""
    from fawkes.traces.from_state import export
    from fawkes.store import Store

    from sqlmodel import select

    from fawkes.store.schema import Sample

    url = mixed_state(tmp_path / "s.db")
    store = Store(url)
    try:
        dk = store.get_cluster("dask")
        with store.session() as s:
            for r in s.exec(select(Sample).where(Sample.cluster_id == dk.id)):
                r.running_tasks = r.completed_tasks = 0
                s.add(r)
            s.commit()
        ex = export(store)
    finally:
        store.close()
    assert {r.cluster for r in ex.rows} == {"spark", "flink"}
    assert set(ex.cluster_costs) == {"spark", "flink"} and ex.skipped.get("without task samples", 0) >= 1
    # it holds its minimum in the replay's eyes: its hosts leave the capacity, it leaves the cluster file
    assert set(ex.minima) == {"spark", "flink"} and ex.capacity == 6 - 1
    assert "dask" not in ex.clusters_csv()
