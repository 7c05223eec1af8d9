"""CERES (issue 11 item 4; spec seeds §001 C-1..C-3): swollen detection and reclaim-first,
stragglers from progress samples and expansion from idle capacity (fawkes/mechanism/ceres.py),
their settings, and the simulation checks SIM-C1/SIM-C2 (fawkes/seeds/ceres.py)."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from fawkes.mechanism import ClusterView, NodeView, Role, Settings, Snapshot, controller, decide
from fawkes.mechanism import ceres
from fawkes.mechanism.memory import Memory
from fawkes.mechanism.model import JobProgress, NodeUsage
from tests.mechanism_helpers import cluster, demand, memory


def _use(view: ClusterView, ratios: dict[str, float], running: dict[str, int] | None = None) -> ClusterView:
    """``view`` with each named node's window maximum (CPU; memory a little lower) and running tasks."""
    running = running or {}
    nodes = tuple(replace(n, usage=NodeUsage(ratios[n.id], ratios[n.id] / 2, 300.0) if n.id in ratios else None,
                          running_tasks=running.get(n.id, n.running_tasks)) for n in view.nodes)
    return replace(view, nodes=nodes)


def _short(ceres_on: bool = True, **kw):
    """A (latency) has 2 core nodes and 240 pending tasks; B and C hold 5 each (2 core + 3 transient)
    with 40 tasks each.  B's transient nodes are all busy; C's run nothing and were nearly idle for
    the whole window (swollen).  TD's weights want A at 6 (B and C give 2 each)."""
    ts = (20, 40, 60)
    a = cluster("A", 2, samples=[demand(t, 240) for t in ts])
    b = cluster("B", 2, tr=3, samples=[demand(t, 0, 120) for t in ts])
    c = cluster("C", 2, tr=3, samples=[demand(t, 0, 120) for t in ts])
    b = _use(b, {n.id: 0.9 for n in b.nodes}, {f"B-r{i}": 4 for i in range(3)})
    c = _use(c, {"C-c0": 0.8, "C-c1": 0.8, "C-r0": 0.1, "C-r1": 0.2, "C-r2": 0.05})
    snap = Snapshot(now=60, capacity=12, clusters=(a, b, c))
    s = Settings(policy="TD", tau=0.0, grow_type=Role.TR, **({"swollen_threshold": 0.5} if ceres_on else {}), **kw)
    return snap, s


def _killed(snap: Snapshot, d) -> int:
    busy = {(c.name, n.id): n.running_tasks for c in snap.clusters for n in c.nodes}
    return sum(busy[(s.cluster, s.node)] for s in d.plan.shrinks)


# --- C-1 ------------------------------------------------------------------------------------------

def test_swollen_is_the_window_maximum_below_the_threshold():
    snap, s = _short()
    c = snap.cluster("C")
    assert [ceres.node_swollen(n, 0.5) for n in c.nodes] == [False, False, True, True, True]
    assert ceres.cluster_ratio(c) == pytest.approx((0.8 + 0.8 + 0.1 + 0.2 + 0.05) / 5)
    assert ceres.swollen_clusters(snap.clusters, 0.5) == ["C"]
    assert ceres.cluster_ratio(snap.cluster("A")) is None  # not measured: never swollen
    # memory counts too: a node whose CPU stayed low but whose memory peaked is not swollen
    assert not ceres.node_swollen(NodeView("x", Role.TR, usage=NodeUsage(0.1, 0.7)), 0.5)
    assert not ceres.node_swollen(NodeView("x", Role.TR), 0.5)
    young = NodeView("x", Role.TR, usage=NodeUsage(0.0, 0.0, 100.0))  # observed 100 s of a 300 s window
    assert ceres.node_swollen(young, 0.5) and not ceres.node_swollen(young, 0.5, 300.0)
    assert ceres.reclaimable(cluster("Y", 1, tr=1, min_core=1), s) == []


def _capped(ceres_on: bool):
    """14 nodes.  A holds its minimum 2 with 32 pending tasks (4 nodes' worth); B holds 7 (5 transient,
    4 tasks each), C 5 (3 transient, idle and swollen).  TD's shares: A 7, B 4, C 3; BIG-C's demand
    cap lets A grow by 2 only, taken one node at a time from the largest surplus (B 3, C 2)."""
    ts = (20, 40, 60)
    a = cluster("A", 2, samples=[demand(t, 32) for t in ts])
    b = cluster("B", 2, tr=5, samples=[demand(t, 0, 16) for t in ts])
    c = cluster("C", 2, tr=3, samples=[demand(t, 0, 16) for t in ts])
    b = _use(b, {n.id: 0.9 for n in b.nodes}, {f"B-r{i}": 4 for i in range(5)})
    c = _use(c, {"C-c0": 0.8, "C-c1": 0.8, "C-r0": 0.1, "C-r1": 0.2, "C-r2": 0.05})
    snap = Snapshot(now=60, capacity=14, clusters=(a, b, c))
    s = Settings(policy="TD", tau=0.0, grow_type=Role.TR, shrink_amount="demand_capped",
                 **({"swollen_threshold": 0.5} if ceres_on else {}))
    return snap, s


def test_reclaim_first_takes_idle_swollen_nodes_before_preempting_busy_ones():
    snap, s_off = _capped(False)
    off = decide(snap, s_off)
    assert off.targets == {"A": 4, "B": 6, "C": 4} and _killed(snap, off) == 4  # one of B's busy nodes
    snap, s_on = _capped(True)
    on = decide(snap, s_on)
    assert on.targets == {"A": 4, "B": 7, "C": 3}  # C gives 2 idle swollen nodes (its surplus), B nothing
    assert {x.cluster for x in on.plan.shrinks} == {"C"} and _killed(snap, on) == 0
    assert "C-1 reclaimed idle swollen nodes first: C 2" in on.reason
    # a full shrink takes every surplus anyway: CERES changes nothing there
    snap, s_full = _short()
    assert decide(snap, s_full).targets == decide(snap, _short(ceres_on=False)[1]).targets == {"A": 6, "B": 3, "C": 3}


def test_what_swollen_nodes_do_not_cover_is_preempted_by_the_victim_order():
    snap, s = _short(ceres_on=False)
    snap = replace(snap, clusters=(snap.clusters[0],) + tuple(
        _use(c, {n.id: 0.9 for n in c.nodes} | ({"C-r2": 0.1} if c.name == "C" else {})) for c in snap.clusters[1:]))
    d = decide(snap, Settings(**(s.model_dump() | {"swollen_threshold": 0.5})))
    # A needs 4: C's one idle swollen node, then 3 from the surplus left (B 2, C 1) one at a time, largest first
    assert d.targets == {"A": 6, "B": 3, "C": 3}
    assert ("C", "C-r2") in {(x.cluster, x.node) for x in d.plan.shrinks} and "C-1 reclaimed idle swollen nodes first: C 1" in d.reason


def test_an_idle_node_busy_earlier_in_the_window_is_not_swollen_and_a_busy_swollen_node_stays():
    snap, s = _short()
    c = _use(snap.cluster("C"), {"C-c0": 0.8, "C-c1": 0.8, "C-r0": 0.1, "C-r1": 0.9, "C-r2": 0.05})
    snap2 = replace(snap, clusters=(snap.clusters[0], snap.clusters[1], c))
    # plan order for C's transient nodes: fewest tasks, then newest: r2, r1, r0 -> the prefix stops at r1
    assert [n.id for n in ceres.reclaimable(c, s)] == ["C-r2"]
    busy = _use(snap.cluster("C"), {"C-c0": 0.8, "C-c1": 0.8, "C-r0": 0.1, "C-r1": 0.1, "C-r2": 0.1},
                {"C-r0": 1, "C-r1": 1, "C-r2": 1})
    assert ceres.reclaimable(busy, s) == []  # a busy swollen node is not taken (no advertised-capacity shrink)
    d = decide(snap2, s)
    assert sum(1 for x in d.plan.shrinks if x.cluster == "C") >= 1 and "C 1" in d.reason


def test_nothing_short_nothing_reclaimed():
    snap, s = _short()
    targets, got = ceres.reclaim_first({"A": 4, "B": 5, "C": 5}, snap.clusters, 14, {}, s)
    assert got == {} and targets == {"A": 4, "B": 5, "C": 5}  # A's 2 more fit the 2 free hosts
    roomy = replace(snap, capacity=14, free_hosts=("f0", "f1"))
    d = decide(roomy, Settings(**(s.model_dump() | {"tau": math.inf})),
               memory(A=dict(target=4), B=dict(target=5), C=dict(target=5)))
    assert not d.plan.shrinks and len(d.plan.grows) == 2 and "C-1" not in d.reason


def test_the_minimum_and_core_nodes_are_never_reclaimed():
    snap, s = _short()
    c = _use(cluster("C", 4, tr=1, min_core=4), {"C-c0": 0.0, "C-c1": 0.0, "C-c2": 0.0, "C-c3": 0.0, "C-r0": 0.0})
    assert [n.id for n in ceres.reclaimable(c, s)] == ["C-r0"]


# --- C-2 ------------------------------------------------------------------------------------------

def _prog(job, pts, expected=None, start=0.0):
    return JobProgress(job, tuple(pts), expected, start)


def test_eta_from_the_last_three_samples():
    e = ceres.estimate(_prog("j", [(0, 0.0), (10, 0.1), (20, 0.3), (30, 0.4)]))
    assert e.speed_cur == pytest.approx(0.01) and e.speed_prev == pytest.approx(0.02)
    assert e.eta_s == pytest.approx(60.0) and e.elapsed_s == 30
    assert ceres.estimate(_prog("j", [(0, 0.0), (10, 0.1)])) is None  # two samples: no ETA
    assert ceres.estimate(_prog("j", [(0, 0.0), (10, 0.5), (20, 1.0)])) is None  # done
    assert ceres.estimate(_prog("j", [(0, 0.2), (10, 0.3), (20, 0.3)])).eta_s == math.inf  # stalled
    assert ceres.estimate(_prog("j", [(0, 0.2), (10, 0.3), (10, 0.4)])) is None  # times not increasing


def test_a_straggler_against_its_reference_runtime_or_its_peers():
    s = Settings(straggler_factor=2.0, straggler_window_s=0)  # CERES' last pair
    # reference 40 s: elapsed 30 + ETA 60 = 90 > 2 x 40
    v = replace(cluster("S", 1), progress=(_prog("slow", [(10, 0.1), (20, 0.3), (30, 0.4)], expected=40.0),
                                           _prog("fine", [(10, 0.3), (20, 0.6), (30, 0.9)], expected=40.0)))
    got = ceres.stragglers([v], s)
    assert [e.job for e in got["S"]] == ["slow"]
    # no reference: ETA 60 vs the others' median ETA (10, 20) = 15: 60 > 2 x 15
    peers = replace(cluster("S", 1), progress=(
        _prog("slow", [(10, 0.1), (20, 0.3), (30, 0.4)]), _prog("p1", [(10, 0.3), (20, 0.6), (30, 0.9)]),
        _prog("p2", [(10, 0.2), (20, 0.5), (30, 0.8)])))
    assert [e.job for e in ceres.stragglers([peers], s)["S"]] == ["slow"]
    alone = replace(cluster("S", 1), progress=(_prog("slow", [(10, 0.1), (20, 0.3), (30, 0.4)]),))
    assert ceres.stragglers([alone], s) == {}  # no peer, no reference: no verdict
    # no progress over the last pair: with a reference, elapsed alone decides; without, no verdict
    stalled = _prog("st", [(10, 0.0), (20, 0.0), (30, 0.0)], expected=20.0)
    assert ceres.stragglers([replace(cluster("S", 1), progress=(stalled,))], s) == {}  # 30 <= 2 x 20
    late = _prog("st", [(30, 0.0), (40, 0.0), (50, 0.0)], expected=20.0)
    assert [e.job for e in ceres.stragglers([replace(cluster("S", 1), progress=(late,))], s)["S"]] == ["st"]
    stalled_peer = replace(peers, progress=peers.progress + (_prog("st", [(10, 0.2), (20, 0.2), (30, 0.2)]),))
    assert [e.job for e in ceres.stragglers([stalled_peer], s)["S"]] == ["slow"]
    assert ceres.stragglers([v], Settings()) == {}  # off by default


def _one_slot_job(until: float, task_s: float = 9.5, tasks: int = 30, every: float = 2.0):
    """A job's progress on a 1-slot node, a task done every ``task_s``, sampled every ``every`` s
    (the live straggler bench's shape: bench/bench_ceres_straggler.py)."""
    return [(t, min(tasks, int(t // task_s)) / tasks) for t in [every * k for k in range(int(until / every) + 1)]]


def test_a_window_of_several_tasks_reads_a_steady_speed_where_the_last_pair_reads_none():
    true = 1 / (30 * 9.5)
    pts = _one_slot_job(200.0)
    last_pair = [ceres.estimate(_prog("j", pts[:k]), 0.0) for k in range(3, len(pts))]
    assert sum(math.isfinite(e.eta_s) for e in last_pair) / len(last_pair) < 0.3  # most pairs: no task done
    windowed = [ceres.estimate(_prog("j", pts[:k]), 30.0) for k in range(3, len(pts))]
    late = [e for e in windowed if e.at >= 40.0]
    assert late and all(abs(e.speed_cur / true - 1) < 0.35 for e in late)
    assert all(e.speed_prev is not None for e in windowed if e.at >= 62.0)
    # 3x its reference (95 s): flagged from its first finished task, not when elapsed alone passes 1.5 x 95
    s = Settings(straggler_factor=1.5)
    flagged = [t for k in range(3, len(pts))
               if ceres.stragglers([replace(cluster("S", 1), progress=(_prog("j", pts[:k], expected=95.0),))], s)
               for t in [pts[k - 1][0]]]
    assert flagged and flagged[0] <= 12.0
    s0 = Settings(straggler_factor=1.5, straggler_window_s=0)
    flagged0 = [pts[k - 1][0] for k in range(3, len(pts))
                if ceres.stragglers([replace(cluster("S", 1), progress=(_prog("j", pts[:k], expected=95.0),))], s0)]
    assert len(flagged0) < len(flagged) / 2  # the last pair: only the samples right after a task ends


def test_keep_progress_keeps_three_samples_at_window_0_and_a_bounded_window_else():
    kept: tuple = ()
    for t, p in _one_slot_job(2000.0, tasks=300):
        kept = ceres.keep_progress(kept, t, p, 0.0)
    assert len(kept) == 3 and kept[-1][0] == 2000.0
    kept = ()
    for t, p in _one_slot_job(2000.0, tasks=300):
        kept = ceres.keep_progress(kept, t, p, 30.0)
    assert 30 <= len(kept) <= 33 and kept[-1][0] == 2000.0
    assert ceres.keep_progress(kept, 2000.0, 0.9, 30.0) == kept  # not later than the last: dropped


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 20.0), st.floats(0.0, 0.999)), min_size=1, max_size=80),
       st.sampled_from([0.0, 5.0, 30.0, 1e6]))
def test_the_samples_kept_estimate_as_the_whole_history_does(steps, window):
    t, full, kept = 0.0, [], ()
    for dt, p in steps:
        t += dt
        full.append((t, p))
        kept = ceres.keep_progress(kept, t, p, window)
        assert ceres.estimate(_prog("j", kept), window) == ceres.estimate(_prog("j", full), window)


def _stragglers(free: int, **kw):
    ts = (20, 40, 60)
    s_view = replace(cluster("S", 2, samples=[demand(t, 30) for t in ts]),
                     progress=(_prog("q7", [(20, 0.1), (40, 0.15), (60, 0.2)], expected=60.0, start=0.0),))
    b = cluster("B", 2, tr=2, samples=[demand(t, 30) for t in ts])
    snap = Snapshot(now=60, capacity=6 + free, free_hosts=tuple(f"f{i}" for i in range(free)), clusters=(s_view, b))
    return snap, Settings(policy="TD", grow_type=Role.TR, **kw)


def test_a_straggler_cluster_grows_from_idle_capacity_ahead_of_the_weights():
    snap, s = _stragglers(free=3, tau=math.inf, straggler_factor=2.0, straggler_expand_nodes=2)
    mem = memory(S=dict(target=2), B=dict(target=4))
    plain = decide(snap, Settings(**(s.model_dump() | {"straggler_factor": None})), mem)
    assert not plain.gate_open and plain.targets == {"S": 2, "B": 4} and not plain.plan.grows
    d = decide(snap, s, mem)
    assert d.targets == {"S": 4, "B": 4} and [g.cluster for g in d.plan.grows] == ["S", "S"]
    assert "C-2 stragglers: S (q7)" in d.reason
    one = decide(snap, Settings(**(s.model_dump() | {"straggler_expand_nodes": 5})), mem)
    assert one.targets["S"] == 5  # at most the idle capacity (3 free hosts)


def test_no_idle_capacity_no_expansion():
    snap, s = _stragglers(free=0, tau=0.0, straggler_factor=2.0)
    d = decide(snap, s)
    assert sum(d.targets.values()) == snap.capacity
    base = decide(snap, Settings(**(s.model_dump() | {"straggler_factor": None})))
    assert d.targets == base.targets and "no idle capacity to expand" in d.reason


# --- defaults and settings ------------------------------------------------------------------------

def test_the_defaults_change_nothing_even_with_the_signals_in_the_snapshot():
    snap, s = _short(ceres_on=False)
    bare = replace(snap, clusters=tuple(replace(c, nodes=tuple(replace(n, usage=None) for n in c.nodes))
                                        for c in snap.clusters))
    assert Settings().swollen_threshold is None and Settings().straggler_factor is None
    a, b = decide(snap, s), decide(bare, s)
    assert (a.targets, a.plan, a.reason) == (b.targets, b.plan, b.reason)
    # on, but without signals: the same too
    on = Settings(**(s.model_dump() | {"swollen_threshold": 0.5, "straggler_factor": 2.0}))
    c = decide(bare, on)
    assert (c.targets, c.plan) == (b.targets, b.plan)
    d1, m1 = controller.tick(Memory(), bare, on)
    d2, m2 = controller.tick(Memory(), bare, s)
    assert (d1.targets, d1.plan, m1) == (d2.targets, d2.plan, m2)


@pytest.mark.parametrize("extra, words", [
    ({"swollen_threshold": 0.0}, "greater than 0"), ({"swollen_threshold": 1.5}, "less than or equal"),
    ({"swollen_threshold": math.nan}, "finite"), ({"swollen_threshold": True}, "valid number"),
    ({"straggler_factor": 1.0}, "greater than 1"), ({"straggler_factor": math.inf}, "finite"),
    ({"straggler_factor": 1e30}, "less than or equal"), ({"straggler_expand_nodes": 0}, "greater than or equal"),
    ({"straggler_expand_nodes": 2.5}, "valid integer"), ({"usage_window_s": -1.0}, "greater than or equal"),
    ({"usage_window_s": 1e30}, "less than or equal"),
])
def test_ceres_settings_refuse_bad_values(extra, words):
    with pytest.raises(ValueError, match=words):
        Settings(**extra)


def _fawkes(args, tmp_path):
    from tests.conftest import cli_in_process
    return cli_in_process(args, cwd=tmp_path)


@pytest.mark.parametrize("line, words", [
    ("swollen_threshold: .nan", "swollen_threshold"), ("swollen_threshold: -0.5", "swollen_threshold"),
    ("swollen_threshold: .inf", "swollen_threshold"),
    ("swollen_threshold: 1000000000000000000000000000000", "swollen_threshold"),
    ("straggler_factor: .nan", "straggler_factor"), ("straggler_factor: -2", "straggler_factor"),
    ("straggler_factor: 1000000000000000000000000000000", "straggler_factor"),
    ("straggler_expand_nodes: -1", "straggler_expand_nodes"), ("straggler_expand_nodes: .inf", "straggler_expand_nodes"),
    ("straggler_expand_nodes: 1000000000000000000000000000000", "straggler_expand_nodes"),
    ("usage_window_s: .nan", "usage_window_s"), ("usage_window_s: -5", "usage_window_s"),
    ("usage_window_s: 1000000000000000000000000000000", "usage_window_s"), ("usage_window_s: yes", "usage_window_s"),
])
def test_a_bad_ceres_setting_in_a_preset_is_one_line_naming_file_and_field_exit_2(line, words, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(f"policy: TD\n{line}\n")
    r = _fawkes(["policy", "show", str(f)], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and words in err, err
    assert list(tmp_path.iterdir()) == [f]  # nothing written


def test_good_ceres_settings_load_from_a_preset(tmp_path):
    f = tmp_path / "ceres.yaml"
    f.write_text("policy: TD\nswollen_threshold: 0.4\nusage_window_s: 120\nstraggler_factor: 1.5\n"
                 "straggler_expand_nodes: 2\nshrink_amount: demand_capped\n")
    r = _fawkes(["policy", "show", str(f)], tmp_path)
    assert r.returncode == 0, r.stderr
    for k in ("swollen_threshold: 0.4", "usage_window_s: 120", "straggler_factor: 1.5", "straggler_expand_nodes: 2"):
        assert k in r.stdout, r.stdout


# --- SIM-C1, SIM-C2 (fawkes/seeds/ceres.py): the directions the spec expects, on seeds 1-3 ---------------

from fawkes.seeds import ceres as sim_ceres  # noqa: E402


@pytest.fixture(scope="module")
def c1():
    return dict(sim_ceres.sim_c1([1, 2, 3])["expect"])


@pytest.fixture(scope="module")
def c2():
    return dict(sim_ceres.sim_c2([1, 2, 3])["expect"])


def test_sim_c1_bigc_like_kills_less_than_a_full_kill_and_ceres_at_d0_kills_no_more(c1):
    assert c1["BIG-C-like kills fewer tasks than TD's full kill"]
    assert c1["fewer preemptions (tasks killed) with CERES than BIG-C-like (D=0)"]  # -0.2 %: about even


@pytest.mark.xfail(strict=True, reason="measured (seeds 1-3): with BIG-C's regrow delay D=3, CERES' ordering kills "
                   "14.6 % more tasks (251 vs 357 on seed 3, within 2 on seeds 1-2), S's mean scheduling latency +9.5 %, "
                   "p95 running time +1.6 %: whole nodes only, so C-1 reclaims idle nodes, which the plan takes first "
                   "anyway; it changes whose idle nodes go and the runs diverge in timing (docs/reproduction.md; on the "
                   "Spark-like model the scheduling latency holds by 0.1 s, a tie: tests/test_seeds_spark_model.py)")
@pytest.mark.parametrize("statement", [
    "fewer preemptions (tasks killed) with CERES than BIG-C-like (D=3)",
    "the latency cluster's p95 running time lower with CERES than BIG-C-like (D=3)",
    "the latency cluster's mean scheduling latency lower with CERES than BIG-C-like (D=3)",
])
def test_sim_c1_ceres_on_bigc_like(c1, statement):
    assert c1[statement]


def test_sim_c2_straggler_expansion_cuts_the_tail_when_idle_capacity_waits(c2):
    assert c2["S's p95 running time lower with C-2 when idle capacity waits (tau 1000)"]
    assert c2["S's p99 running time lower with C-2 when idle capacity waits (tau 1000)"]
    assert c2["C-2 never makes S's p95 worse"]


@pytest.mark.xfail(strict=True, reason="measured (seeds 1-3): at tau 100 (and 10) the gate opens often enough that "
                   "TD hands out every free host at the next tick: no idle capacity is left for C-2, which never "
                   "expands (S p95 +0.0 %)")
def test_sim_c2_at_tau_100(c2):
    assert c2["S's p95 running time lower with C-2 at tau 100"]


def test_the_simulator_carries_the_signals_into_the_snapshot():
    wl, use = sim_ceres.mixed(1)
    s = sim_ceres._settings(swollen_threshold=0.5, usage_window_s=120.0)
    sim = sim_ceres.CeresSimulator(wl, s, use=use)
    seen = {}

    def grab(sim_, now):
        snap = sim_.snapshot(now)
        seen["snap"] = snap

    sim.at(400.0, grab)
    sim.run()
    snap = seen["snap"]
    usage = [n.usage for c in snap.clusters for n in c.nodes if n.usage is not None]
    assert usage and all(0.0 <= u.cpu_max <= 1.0 and 0.0 <= u.mem_max <= 1.0 and u.window_s <= 120.0 for u in usage)
    b2 = snap.cluster("B2")
    busy = [n.usage for n in b2.nodes if n.usage is not None and n.usage.cpu_max > 0]
    assert busy and max(u.cpu_max for u in busy) <= 0.35 + 1e-9  # B2's tasks use 35 % of a slot
    assert any(p.samples for c in snap.clusters for p in c.progress)
    span = 2 * s.straggler_window_s + s.sample_period_s  # C-2 keeps two windows (ceres.keep_progress)
    assert all((len(p.samples) <= 3 or p.samples[-1][0] - p.samples[1][0] < span) and all(0 <= f <= 1 for _, f in p.samples)
               for c in snap.clusters for p in c.progress)


def test_simulate_lists_and_runs_the_checks_and_refuses_options():
    def fawkes(*args):
        return subprocess.run([sys.executable, "-m", "fawkes", "simulate", *args], capture_output=True, text=True,
                              timeout=300)

    r = fawkes("--list")
    assert r.returncode == 0 and "SIM-C1" in r.stdout and "SIM-C2" in r.stdout
    r = fawkes("SIM-C2", "--seeds", "1", "--json")
    assert r.returncode == 0, r.stderr
    import json

    out = json.loads(r.stdout)
    assert out["check"] == "SIM-C2" and len(out["rows"]) == 6 and "s_trt_p95_s" in out["rows"][0]
    assert {e["expected"]: e["holds"] for e in out["expect"]}["C-2 never makes S's p95 worse"]
    r = fawkes("SIM-C2", "--set", "tau=1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--set" in r.stderr
